//! `ask_human`: asking on the terminal (`-i`), pausing the run for an answer, and taking the answer
//! when the run is resumed.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{ASK_HUMAN, Engine, EngineError, InputType, InteractionRequest, Progress, RunOutcome};
use crate::agent::HookName;
use crate::events::{ActionStatus, Event, Level, timestamp};
use crate::metadata::RunStatus;

impl Engine<'_> {
    pub(super) fn ask_human(
        &mut self,
        id: &str,
        args: &Map<String, Value>,
    ) -> Result<Option<RunOutcome>, EngineError> {
        let Some(prompt) = args
            .get("prompt")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            self.error_result(
                id,
                "Error: ask_human needs a prompt (the question to show the user)".into(),
            )?;
            return Ok(None);
        };
        let input_type = match args.get("input_type").and_then(Value::as_str) {
            Some("password") => InputType::Password,
            Some("confirmation") => InputType::Confirmation,
            _ => InputType::Text,
        };
        let sensitive = match args.get("sensitive") {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => s == "true",
            _ => false,
        };
        self.append(Event::ActionRequest {
            action_id: id.to_string(),
            tool_name: ASK_HUMAN.into(),
            tool_args: Value::Object(args.clone()),
            resolved_command: format!("{ASK_HUMAN} {prompt}"),
        })?;
        if self.setup.interactive
            && let Some(human) = self.human.as_deref_mut()
        {
            self.observer.progress(Progress::Question(prompt.clone()));
            let answer = match human.ask(&prompt, input_type, sensitive) {
                Ok(Some(answer)) => answer,
                Ok(None) if self.interrupted() => return Ok(Some(self.interrupt_run()?)),
                Ok(None) => {
                    self.observer.progress(Progress::Note(
                        "No answer on standard input (it ended); the run waits for one.".into(),
                    ));
                    let request = InteractionRequest {
                        request_id: self.setup.ids.uuid_v7(self.setup.clock.now()).to_string(),
                        timestamp: timestamp(self.setup.clock.now()),
                        prompt,
                        input_type,
                        sensitive,
                    };
                    return Ok(Some(self.pause(request)?));
                }
                Err(e) => {
                    self.error_result(
                        id,
                        format!("Error: could not read an answer from the terminal: {e}"),
                    )?;
                    return Ok(None);
                }
            };
            let exec_ref = self.execution_ref(id);
            self.write_execution(&exec_ref, ASK_HUMAN, &answer, "", 0, Duration::ZERO);
            self.append(Event::ActionResult {
                action_id: id.to_string(),
                status: ActionStatus::Success,
                observation_content: answer,
                execution_ref: exec_ref,
            })?;
            return Ok(None);
        }
        let request = InteractionRequest {
            request_id: self.setup.ids.uuid_v7(self.setup.clock.now()).to_string(),
            timestamp: timestamp(self.setup.clock.now()),
            prompt,
            input_type,
            sensitive,
        };
        Ok(Some(self.pause(request)?))
    }

    /// The answer to an `ask_human` call asked by an earlier process.
    pub(super) fn answer_pending(
        &mut self,
        id: &str,
        args: &Value,
    ) -> Result<Option<RunOutcome>, EngineError> {
        let dir = self.setup.run.interaction();
        let response = dir.join("response.txt");
        let answer = match std::fs::read_to_string(&response) {
            Ok(text) => {
                let _ = std::fs::remove_file(dir.join("request.json"));
                let _ = std::fs::remove_file(&response);
                Some(text.trim().to_string())
            }
            Err(_) => None,
        };
        let prompt = args
            .get("prompt")
            .and_then(Value::as_str)
            .unwrap_or("(no prompt)")
            .to_string();
        let answer = match answer {
            Some(a) => a,
            None if self.setup.interactive && self.human.is_some() => {
                let input_type = match args.get("input_type").and_then(Value::as_str) {
                    Some("password") => InputType::Password,
                    Some("confirmation") => InputType::Confirmation,
                    _ => InputType::Text,
                };
                let sensitive = args
                    .get("sensitive")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                self.observer.progress(Progress::Question(prompt.clone()));
                let Some(human) = self.human.as_deref_mut() else {
                    return Ok(None);
                };
                match human.ask(&prompt, input_type, sensitive) {
                    Ok(Some(a)) => {
                        let _ = std::fs::remove_file(dir.join("request.json"));
                        a
                    }
                    Ok(None) => return Ok(Some(self.interrupt_run()?)),
                    Err(e) => {
                        self.error_result(
                            id,
                            format!("Error: could not read an answer from the terminal: {e}"),
                        )?;
                        return Ok(None);
                    }
                }
            }
            None => {
                // Still no answer: the run keeps waiting (never left RUNNING).
                let request =
                    store::atomic::read_json::<InteractionRequest>(&dir.join("request.json"))
                        .unwrap_or_else(|_| InteractionRequest {
                            request_id: self.setup.ids.uuid_v7(self.setup.clock.now()).to_string(),
                            timestamp: timestamp(self.setup.clock.now()),
                            prompt,
                            input_type: InputType::Text,
                            sensitive: false,
                        });
                return Ok(Some(self.pause(request)?));
            }
        };
        let exec_ref = self.execution_ref(id);
        self.write_execution(&exec_ref, ASK_HUMAN, &answer, "", 0, Duration::ZERO);
        self.append(Event::ActionResult {
            action_id: id.to_string(),
            status: ActionStatus::Success,
            observation_content: answer,
            execution_ref: exec_ref,
        })?;
        Ok(None)
    }

    /// Stops the run to wait for the answer to `request`.
    pub(super) fn pause(&mut self, request: InteractionRequest) -> Result<RunOutcome, EngineError> {
        let dir = self.setup.run.interaction();
        store::atomic::create_dir_all_durable(&dir)?;
        store::write_json_atomic(&dir.join("request.json"), &request, true)?;
        self.set_status(RunStatus::WaitingForInput, false)?;
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
