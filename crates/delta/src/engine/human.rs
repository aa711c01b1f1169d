//! `ask_human`: asking on the terminal (`-i`), pausing the run for an answer, and taking the answer
//! when the run is resumed.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::registry::AskHumanArgs;
use super::{ASK_HUMAN, Engine, EngineError, Observer, Progress, RunOutcome};
use crate::agent::HookName;
use crate::events::{ActionStatus, Event, Level, timestamp};
use crate::metadata::RunStatus;
use store::StoreError;

/// What the terminal gave for a question.
enum Asked {
    /// The answer.
    Answer(String),
    /// The run stops here (interrupted, or waiting because the input ended).
    Stop(Box<RunOutcome>),
    /// The terminal could not be read; the call got an error result and the run goes on.
    Failed,
}

impl Engine<'_> {
    /// The arguments of an `ask_human` call, its prompt redacted.
    fn question(&self, args: &Value) -> AskHumanArgs {
        let mut question = AskHumanArgs::parse(args);
        question.prompt = question.prompt.map(|p| self.redact(&p));
        question
    }

    pub(super) fn ask_human(
        &mut self,
        id: &str,
        args: &Map<String, Value>,
    ) -> Result<Option<RunOutcome>, EngineError> {
        let args = Value::Object(args.clone());
        let question = self.question(&args);
        let Some(prompt) = question.prompt.clone() else {
            self.error_result(
                id,
                "Error: ask_human needs a prompt (the question to show the user)".into(),
            )?;
            return Ok(None);
        };
        self.append(Event::ActionRequest {
            action_id: id.to_string(),
            tool_name: ASK_HUMAN.into(),
            tool_args: args,
            resolved_command: format!("{ASK_HUMAN} {prompt}"),
        })?;
        if !self.setup.interactive || self.human.is_none() {
            let request = self.new_request(id, &question);
            return Ok(Some(self.pause(request)?));
        }
        match self.ask_terminal(id, &question)? {
            Asked::Answer(answer) => {
                self.answered(id, answer)?;
                Ok(None)
            }
            Asked::Stop(outcome) => Ok(Some(*outcome)),
            Asked::Failed => Ok(None),
        }
    }

    /// Asks `question` on the terminal (`-i`). When the input has ended the run waits for an answer as
    /// it does without `-i`.
    fn ask_terminal(&mut self, id: &str, question: &AskHumanArgs) -> Result<Asked, EngineError> {
        let prompt = question.prompt.as_deref().unwrap_or("(no prompt)");
        self.observer
            .progress(Progress::Question(prompt.to_string()));
        let Some(human) = self.human.as_deref_mut() else {
            let request = self.new_request(id, question);
            return Ok(Asked::Stop(Box::new(self.pause(request)?)));
        };
        match human.ask(prompt, question.input_type, question.sensitive) {
            Ok(Some(answer)) => Ok(Asked::Answer(answer)),
            Ok(None) if self.interrupted() => Ok(Asked::Stop(Box::new(self.interrupt_run()?))),
            Ok(None) => {
                self.observer.progress(Progress::Note(
                    "No answer on standard input (it ended); the run waits for one.".into(),
                ));
                let request = self.new_request(id, question);
                Ok(Asked::Stop(Box::new(self.pause(request)?)))
            }
            Err(e) => {
                self.error_result(
                    id,
                    format!("Error: could not read an answer from the terminal: {e}"),
                )?;
                Ok(Asked::Failed)
            }
        }
    }

    /// Journals `answer` as the result of call `id` (with its `io/tool_executions/` record).
    fn answered(&mut self, id: &str, answer: String) -> Result<(), EngineError> {
        let exec_ref = self.execution_ref(id);
        let record = crate::process::Outcome::printed(&answer);
        self.write_execution(&exec_ref, ASK_HUMAN, &record);
        self.append(Event::ActionResult {
            action_id: id.to_string(),
            status: ActionStatus::Success,
            observation_content: answer,
            execution_ref: exec_ref,
        })
    }

    /// The question of the child run of call `id`, asked as this run's: the child's request
    /// (its id, so that the answer goes to that question only; how to answer; whether the answer
    /// is secret), its prompt redacted, naming call `id`.
    pub(super) fn child_question(&self, id: &str, asked: InteractionRequest) -> InteractionRequest {
        InteractionRequest {
            prompt: self.redact(&asked.prompt),
            action_id: Some(id.to_string()),
            ..asked
        }
    }

    fn new_request(&self, id: &str, question: &AskHumanArgs) -> InteractionRequest {
        let now = self.setup.clock.now();
        InteractionRequest {
            request_id: self.setup.ids.uuid_v7(now).to_string(),
            timestamp: timestamp(now),
            prompt: question
                .prompt
                .clone()
                .unwrap_or_else(|| "(no prompt)".into()),
            input_type: question.input_type,
            sensitive: question.sensitive,
            action_id: Some(id.to_string()),
            action_digest: None,
        }
    }

    /// The answer to an `ask_human` call asked by an earlier process: `interaction/response.txt` when
    /// `interaction/request.json` asks for this call (a response left from another question, or written
    /// when no question was pending, answers nothing), else the terminal with `-i`; otherwise the run
    /// waits again. An answer is journaled as the call's result before its files are removed, so it is
    /// used exactly once: a crash in between leaves files that name a call that has its result.
    pub(super) fn answer_pending(
        &mut self,
        id: &str,
        args: &Value,
    ) -> Result<Option<RunOutcome>, EngineError> {
        // A request written before requests named their call is taken as this call's.
        let (pending, from_file) = match self.pending_for(id, true) {
            Some((request, answer)) => (Some(request), answer),
            None => (None, None),
        };
        let question = self.question(args);
        let answer = match from_file {
            Some(a) => a,
            None if self.setup.interactive && self.human.is_some() => {
                match self.ask_terminal(id, &question)? {
                    Asked::Answer(a) => a,
                    Asked::Stop(outcome) => return Ok(Some(*outcome)),
                    Asked::Failed => return Ok(None),
                }
            }
            None => {
                // Still no answer: the run keeps waiting (never left RUNNING).
                let request = match pending {
                    Some(request) => InteractionRequest {
                        action_id: Some(id.to_string()),
                        ..request
                    },
                    None => self.new_request(id, &question),
                };
                return Ok(Some(self.pause(request)?));
            }
        };
        self.answered(id, answer)?;
        self.remove_interaction_files()?;
        Ok(None)
    }

    /// The question in `interaction/request.json` when it asks about call `id` (with `unnamed`, a
    /// request that names no call counts too), and the answer in `response.txt`, if there is one.
    pub(super) fn pending_for(
        &self,
        id: &str,
        unnamed: bool,
    ) -> Option<(InteractionRequest, Option<String>)> {
        let dir = self.setup.run.interaction();
        let request = store::atomic::read_json::<InteractionRequest>(&dir.join("request.json"))
            .ok()
            .filter(|r| match r.action_id.as_deref() {
                Some(asked) => asked == id,
                None => unnamed,
            })?;
        let answer = std::fs::read_to_string(super::response_path(&self.setup.run))
            .ok()
            .map(|text| text.trim().to_string());
        Some((request, answer))
    }

    /// Removes `interaction/request.json` and `response.txt` (durably: the directory is flushed).
    pub(super) fn remove_interaction_files(&mut self) -> Result<(), EngineError> {
        let dir = self.setup.run.interaction();
        if crate::io_files::unless_folder(&dir)? {
            // A link a tool put there: nothing of delta's to remove through it.
            return Ok(());
        }
        let mut removed = false;
        for name in ["response.txt", "request.json"] {
            let path = dir.join(name);
            match std::fs::remove_file(&path) {
                Ok(()) => removed = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(StoreError::Io {
                        action: "remove",
                        path,
                        source: e,
                    }
                    .into());
                }
            }
        }
        if removed {
            store::sync_dir(&dir)?;
        }
        Ok(())
    }

    /// Stops the run to wait for the answer to `request`.
    ///
    /// A response already in `interaction/response.txt` was written before this question was asked, so
    /// it does not answer it: it is removed (with a note in the journal) before the question is.
    pub(super) fn pause(&mut self, request: InteractionRequest) -> Result<RunOutcome, EngineError> {
        self.report_io_failures(true)?;
        let dir = self.setup.run.interaction();
        crate::io_files::own_folder(&dir)?;
        if super::response_path(&self.setup.run).exists() {
            self.remove_interaction_files()?;
            self.system(
                Level::Warn,
                "Discarded interaction/response.txt: it was there before this question was asked, so \
                 it does not answer it",
            )?;
        }
        store::write_json_atomic(&dir.join("request.json"), &request, true)?;
        // A run kept in a store shows its question there too (list-runs --store).
        if let Some(upstream) = &self.setup.upstream {
            let bytes = serde_json::to_vec(&request).unwrap_or_default();
            upstream.put(crate::fleet::QUESTION, &bytes)?;
        }
        self.set_status(RunStatus::WaitingForInput, false)?;
        self.observer
            .progress(Progress::Paused(request.prompt.clone()));
        self.system(Level::Info, "Agent pausing for human input")?;
        self.log("Paused for human input");
        self.run_hook(
            HookName::OnRunEnd,
            &json!({"status": "WAITING_FOR_INPUT", "prompt": request.prompt,
                    "iterations_completed": self.metadata.iterations_completed}),
        )?;
        let mut outcome = self.outcome(RunStatus::WaitingForInput);
        outcome.interaction = Some(request);
        Ok(outcome)
    }
}

/// How `ask_human` wants its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputType {
    /// Free text.
    Text,
    /// Hidden input.
    Password,
    /// Yes or no.
    Confirmation,
}

/// Answers `ask_human` questions in interactive mode.
pub trait HumanInput {
    /// Asks `prompt`; `Ok(None)` means no answer came: the run was interrupted, or the input ended
    /// (the run then waits for an answer as it does without `-i`).
    fn ask(
        &mut self,
        prompt: &str,
        input_type: InputType,
        sensitive: bool,
    ) -> std::io::Result<Option<String>>;
}

/// `interaction/request.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InteractionRequest {
    /// Request id.
    pub request_id: String,
    /// When it was asked.
    pub timestamp: String,
    /// The question.
    pub prompt: String,
    /// How to answer.
    pub input_type: InputType,
    /// Whether the answer is secret.
    pub sensitive: bool,
    /// The `ask_human` call it asks for: `interaction/response.txt` answers this call only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
    /// For an approval: the digest of the exact call asked about (its id, tool, arguments and
    /// resolved command); an answer approves that call only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_digest: Option<String>,
}
