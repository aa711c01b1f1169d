//! Approvals: before a tool call starts, the agent's `permissions:` decide whether it runs, is
//! refused, or waits for a person.
//!
//! A call to ask about pauses the run as WAITING_FOR_INPUT (exit 101) before its `ACTION_REQUEST`, so
//! it has not started: `delta continue -m yes|no|always` (or `-i` at once) answers it, and the call is
//! checked again when the run goes on. Every decision is journaled as a `SYSTEM_MESSAGE` saying what
//! decided (a rule, the default, a person); a person's approval is journaled before the question's
//! files are removed, so a crash after the answer does not ask again.

use serde_json::{Map, Value};

use super::{Engine, EngineError, InputType, InteractionRequest, Observer, Progress, RunOutcome};
use crate::agent::permissions::{Action, CallView};
use crate::events::{Level, timestamp};

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
    /// Checks call `id` of `name` with `args` (resolved as `resolved`) against the agent's
    /// permissions. A `deny` always refuses: neither `always` nor `--approve all` lifts it.
    pub(super) fn check_permission(
        &mut self,
        id: &str,
        name: &str,
        args: &Map<String, Value>,
        resolved: &str,
    ) -> Result<Permission, EngineError> {
        let Some(permissions) = self.setup.agent.permissions.clone() else {
            return Ok(Permission::Go);
        };
        let call = CallView {
            tool: name,
            args,
            resolved,
        };
        let (action, by) = permissions.decide(&call);
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
            Action::Ask => {
                let digest = call_digest(id, name, args, resolved);
                if self.approved_always(name) {
                    self.decided(&format!(
                        "{name} allowed (call {id}): the user approved it for the rest of the run"
                    ))?;
                    Ok(Permission::Go)
                } else if permissions.approve_all {
                    self.decided(&approved(id, name, "approved by --approve all", &digest))?;
                    Ok(Permission::Go)
                } else {
                    self.ask_approval(id, name, resolved, &digest)
                }
            }
        }
    }

    /// Takes the person's answer to the approval question of call `id` (given to this process,
    /// for exactly this call), asks on the terminal (`-i`), or pauses the run for it.
    fn ask_approval(
        &mut self,
        id: &str,
        name: &str,
        resolved: &str,
        digest: &str,
    ) -> Result<Permission, EngineError> {
        let prompt = format!(
            "Allow {name} to run? {} (answer yes, no, or always for the rest of the run)",
            self.redact(resolved)
        );
        let answer = match self.answer_for(id, digest, &prompt)? {
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
                    _ => return self.wait_for_approval(id, prompt, digest),
                }
            }
            None => return self.wait_for_approval(id, prompt, digest),
        };
        match Answer::parse(&answer) {
            Answer::Once => {
                self.decided(&approved(id, name, "approved by the user", digest))?;
                self.remove_interaction_files()?;
                Ok(Permission::Go)
            }
            Answer::Always => {
                self.decided(&approved(
                    id,
                    name,
                    "approved by the user for the rest of the run",
                    digest,
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

    /// The person's answer given to this process, when the question asked (the run's seal) and the
    /// question shown (`interaction/request.json`) are both the one this call raises (the same call,
    /// the same words): an answer to any other question approves nothing, and is said so in the
    /// journal. A `response.txt` found on disk is never taken: any program of the run could have
    /// written it.
    fn answer_for(
        &mut self,
        id: &str,
        digest: &str,
        prompt: &str,
    ) -> Result<Option<String>, EngineError> {
        let Some(answer) = self.setup.answer.take() else {
            return Ok(None);
        };
        // The question as it was asked (the seal's, where the run has one), and as people were
        // shown it (the request file, which `list-runs` and `delta show` read): both must be this
        // call's.
        let sealed = match (&self.seal.state.question, self.seal.found()) {
            (Some(asked), true) => {
                asked.action_id == id && asked.digest == digest && asked.prompt == prompt
            }
            (None, true) => false,
            // A run without a seal (taken as found with --adopt, or where delta keeps no state):
            // nothing vouches for the question; where seals are kept it is asked again, sealed.
            (_, false) => crate::seal::state_dir().is_none(),
        };
        let shown = self
            .pending_for(id, false)
            .map(|(request, _)| request)
            .is_some_and(|request| {
                request.action_digest.as_deref() == Some(digest) && request.prompt == prompt
            });
        let same = sealed && shown;
        self.seal.state.question = None;
        if same {
            return Ok(Some(answer));
        }
        self.system(
            Level::Warn,
            &format!(
                "Approval: the answer given does not answer call {id}: the question on file is not \
                 the one this call raises (it changed since it was asked); asking again"
            ),
        )?;
        self.remove_interaction_files()?;
        Ok(None)
    }

    fn wait_for_approval(
        &mut self,
        id: &str,
        prompt: String,
        digest: &str,
    ) -> Result<Permission, EngineError> {
        let now = self.setup.clock.now();
        let request = InteractionRequest {
            request_id: self.setup.ids.uuid_v7(now).to_string(),
            timestamp: timestamp(now),
            prompt,
            input_type: InputType::Confirmation,
            sensitive: false,
            action_id: Some(id.to_string()),
            action_digest: Some(digest.to_string()),
        };
        self.seal.state.question = Some(crate::seal::SealedQuestion {
            action_id: id.to_string(),
            digest: digest.to_string(),
            prompt: request.prompt.clone(),
        });
        Ok(Permission::Stop(Some(Box::new(self.pause(request)?))))
    }

    /// Journals a decision (and reports it).
    fn decided(&mut self, what: &str) -> Result<(), EngineError> {
        self.observer
            .progress(Progress::Note(format!("Approval: {what}")));
        self.system(Level::Info, &format!("Approval: {what}"))
    }

    /// Whether the person approved tool `name` for the rest of the run: the run's seal says so
    /// (never `metadata.json`, which the run's programs can write).
    fn approved_always(&self, name: &str) -> bool {
        self.seal.state.approved_always.iter().any(|n| n == name)
    }

    fn remember_always(&mut self, name: &str) -> Result<(), EngineError> {
        self.seal.state.approved_always.push(name.to_string());
        self.seal.save(&self.setup.run, &mut self.journal)?;
        Ok(())
    }
}

/// The journal line of an approval.
fn approved(id: &str, name: &str, how: &str, digest: &str) -> String {
    format!("call {id} of {name} {how} (call digest {digest})")
}

/// sha256 (hex) of the exact call: its id, tool, arguments and resolved command.
pub(super) fn call_digest(
    id: &str,
    name: &str,
    args: &Map<String, Value>,
    resolved: &str,
) -> String {
    use sha2::{Digest, Sha256};
    let text =
        serde_json::to_string(&serde_json::json!([id, name, args, resolved])).unwrap_or_default();
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
