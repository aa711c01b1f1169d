//! Approvals: before a tool call starts, the agent's `permissions:` decide whether it runs, is
//! refused, or waits for a person.
//!
//! A call to ask about pauses the run as WAITING_FOR_INPUT (exit 101) before its `ACTION_REQUEST`, so
//! it has not started: `delta continue -m yes|no|always` (or `-i` at once) answers it, and the call is
//! checked again when the run goes on. Every decision is journaled as a `SYSTEM_MESSAGE` saying what
//! decided (a rule, the default, a person); a person's approval is journaled before the question's
//! files are removed, so a crash after the answer does not ask again.

use super::{Engine, EngineError, InputType, InteractionRequest, Observer, Progress, RunOutcome};
use crate::agent::permissions::Action;
use crate::events::{Event, Level, timestamp};

/// The metadata key of the tools the user approved for the rest of the run (`always`).
const ALWAYS: &str = "approved_always";

/// What the permissions decided for a call.
pub(super) enum Permission {
    /// Run it.
    Go,
    /// It is settled (refused) or the run stops (waiting for an answer, interrupted).
    Stop(Option<Box<RunOutcome>>),
}

/// A person's answer to an approval question.
enum Answer {
    Once,
    Always,
    Refused(String),
}

impl Answer {
    fn parse(text: &str) -> Self {
        match text.trim().to_lowercase().as_str() {
            "yes" | "y" | "allow" | "approve" | "ok" => Self::Once,
            "always" | "a" => Self::Always,
            _ => Self::Refused(text.trim().to_string()),
        }
    }
}

impl Engine<'_> {
    /// Checks call `id` of `name` (resolved as `resolved`) against the agent's permissions.
    pub(super) fn check_permission(
        &mut self,
        id: &str,
        name: &str,
        resolved: &str,
    ) -> Result<Permission, EngineError> {
        let Some(permissions) = self.setup.agent.permissions.clone() else {
            return Ok(Permission::Go);
        };
        if self.approved_always(name) {
            self.decided(&format!(
                "{name} allowed: the user approved it for the rest of the run"
            ))?;
            return Ok(Permission::Go);
        }
        let (action, by) = permissions.decide(name, resolved);
        match action {
            Action::Allow => {
                self.decided(&format!("{name} allowed by {}", by.describe()))?;
                Ok(Permission::Go)
            }
            Action::Deny => {
                self.decided(&format!("{name} denied by {}", by.describe()))?;
                self.error_result(
                    id,
                    format!(
                        "Error: {name} was not run: the agent's permissions deny it ({}). Do not try \
                         to do the same another way; ask the user if it is needed.",
                        by.describe()
                    ),
                )?;
                Ok(Permission::Stop(None))
            }
            Action::Ask if self.approved_in_journal(id) => Ok(Permission::Go),
            Action::Ask => self.ask_approval(id, name, resolved),
        }
    }

    /// Takes the answer to the approval question of call `id`, asks on the terminal (`-i`), or
    /// pauses the run for it.
    fn ask_approval(
        &mut self,
        id: &str,
        name: &str,
        resolved: &str,
    ) -> Result<Permission, EngineError> {
        let prompt = format!(
            "Allow {name} to run? {} (answer yes, no, or always for the rest of the run)",
            self.redact(resolved)
        );
        let answer = match self.pending_for(id, false).and_then(|(_, answer)| answer) {
            Some(answer) => answer,
            None if self.setup.interactive && self.human.is_some() => {
                self.observer.progress(Progress::Question(prompt.clone()));
                let asked = self
                    .human
                    .as_deref_mut()
                    .map(|h| h.ask(&prompt, InputType::Confirmation, false));
                match asked {
                    Some(Ok(Some(answer))) => answer,
                    Some(Ok(None)) if self.interrupted() => {
                        return Ok(Permission::Stop(Some(Box::new(self.interrupt_run()?))));
                    }
                    _ => return self.wait_for_approval(id, prompt),
                }
            }
            None => return self.wait_for_approval(id, prompt),
        };
        match Answer::parse(&answer) {
            Answer::Once => {
                self.decided(&approved(id, name, "approved by the user"))?;
                self.remove_interaction_files()?;
                Ok(Permission::Go)
            }
            Answer::Always => {
                self.decided(&approved(
                    id,
                    name,
                    "approved by the user for the rest of the run",
                ))?;
                self.remove_interaction_files()?;
                self.remember_always(name)?;
                Ok(Permission::Go)
            }
            Answer::Refused(text) => {
                self.decided(&format!("{name} refused by the user (call {id}): {text}"))?;
                self.error_result(
                    id,
                    format!("Error: the user did not approve running {name}: {text}"),
                )?;
                self.remove_interaction_files()?;
                Ok(Permission::Stop(None))
            }
        }
    }

    fn wait_for_approval(&mut self, id: &str, prompt: String) -> Result<Permission, EngineError> {
        let now = self.setup.clock.now();
        let request = InteractionRequest {
            request_id: self.setup.ids.uuid_v7(now).to_string(),
            timestamp: timestamp(now),
            prompt,
            input_type: InputType::Confirmation,
            sensitive: false,
            action_id: Some(id.to_string()),
        };
        Ok(Permission::Stop(Some(Box::new(self.pause(request)?))))
    }

    /// Journals a decision (and reports it).
    fn decided(&mut self, what: &str) -> Result<(), EngineError> {
        self.observer
            .progress(Progress::Note(format!("Approval: {what}")));
        self.system(Level::Info, &format!("Approval: {what}"))
    }

    /// Whether the journal says, since the model's last answer, that the user approved call `id`
    /// (an approval a crash kept from being used).
    fn approved_in_journal(&self, id: &str) -> bool {
        let marker = format!("Approval: call {id} of ");
        self.typed
            .iter()
            .rev()
            .take_while(|e| !matches!(e, Event::Thought { .. }))
            .any(|e| matches!(e, Event::SystemMessage { content, .. } if content.starts_with(&marker)))
    }

    fn approved_always(&self, name: &str) -> bool {
        self.metadata
            .extra
            .get(ALWAYS)
            .and_then(|v| v.as_array())
            .is_some_and(|names| names.iter().any(|n| n.as_str() == Some(name)))
    }

    fn remember_always(&mut self, name: &str) -> Result<(), EngineError> {
        let entry = self
            .metadata
            .extra
            .entry(ALWAYS.to_string())
            .or_insert_with(|| serde_json::json!([]));
        if let Some(names) = entry.as_array_mut() {
            names.push(serde_json::json!(name));
        }
        self.save_metadata()
    }
}

/// The journal line of an approval ([`Engine::approved_in_journal`] looks for its start).
fn approved(id: &str, name: &str, how: &str) -> String {
    format!("call {id} of {name} {how}")
}
