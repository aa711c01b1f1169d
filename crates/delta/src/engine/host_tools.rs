//! Host tools: tools the program running the engine provides (not the agent's), offered to the
//! model after the agent's own and answered in-process — say, a state machine's transitions for an
//! agent that is one of its nodes. A call is journaled like any other (`ACTION_REQUEST`, the
//! approvals and the `pre_tool_exec` hook, `ACTION_RESULT`). Its effect lives in the host, which
//! rebuilds it from the journaled results, so a call cut short by a crash is simply made again when
//! the run is resumed (no "interrupted" result, unlike a process whose effect is unknown).

use serde_json::{Map, Value, json};

use super::act::{Begin, Requested};
use super::{Engine, EngineError, Observer, Progress, RunOutcome};
use crate::events::{ActionStatus, Event};
use llm::ToolDefinition;

/// What a host tool call gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostResult {
    /// What the model reads.
    pub content: String,
    /// Whether the call did what it was asked (a refusal is a failed result the model reads).
    pub ok: bool,
    /// The call hands the work back to the program (a state machine's transition taken): once
    /// its result is journaled the run ends COMPLETED, reason `handoff`, the result's content
    /// its final answer. Only a successful call ends the run.
    pub ends_run: bool,
}

impl HostResult {
    /// A successful result the model reads.
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            ok: true,
            ends_run: false,
        }
    }

    /// A refusal the model reads (a failed result).
    pub fn refused(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            ok: false,
            ends_run: false,
        }
    }
}

/// The tools a program offers the agents it runs.
pub trait HostTools {
    /// The tools, as the model sees them (names must not clash with the agent's).
    fn definitions(&self) -> Vec<ToolDefinition>;
    /// Answers call `name` with `args`.
    fn call(&mut self, name: &str, args: &Map<String, Value>) -> HostResult;
}

impl Engine<'_> {
    /// Runs call `id` of host tool `name`: `ACTION_REQUEST` (after the approvals and the hook), the
    /// host's answer, `ACTION_RESULT`.
    pub(super) fn run_host_tool(
        &mut self,
        id: &str,
        name: &str,
        args: &Map<String, Value>,
    ) -> Result<Option<RunOutcome>, EngineError> {
        let resolved = format!("{name} {}", Value::Object(args.clone()));
        let call = match self.begin_call(id, name, args, &resolved)? {
            Begin::Run(call) => call,
            Begin::Done(outcome) => return Ok(outcome.map(|o| *o)),
        };
        self.answer_host_call(call)
    }

    /// Settles call `id` of host tool `name` that an earlier process started: it is made again.
    pub(super) fn resume_host_tool(
        &mut self,
        id: &str,
        name: &str,
        args: &Value,
    ) -> Result<Option<RunOutcome>, EngineError> {
        let empty = Map::new();
        let args = args.as_object().unwrap_or(&empty);
        let resolved = format!("{name} {}", Value::Object(args.clone()));
        let call = Requested {
            id,
            name,
            args,
            resolved: &resolved,
            exec_ref: self.execution_ref(id),
        };
        self.answer_host_call(call)
    }

    fn answer_host_call(&mut self, call: Requested<'_>) -> Result<Option<RunOutcome>, EngineError> {
        let started = std::time::Instant::now();
        let result = match self.host_tools.as_deref_mut() {
            Some(host) => host.call(call.name, call.args),
            None => HostResult::refused(format!(
                "Error: {} is a tool of the program that ran this run before; this one does not offer it",
                call.name
            )),
        };
        let content = self.redact(&result.content);
        let record = crate::process::Outcome {
            stdout: content.clone().into_bytes(),
            exit_code: i32::from(!result.ok),
            duration: started.elapsed(),
            ..Default::default()
        };
        self.write_execution(&call.exec_ref, call.resolved, &record);
        self.observer.progress(Progress::ToolDone {
            id: call.id.to_string(),
            duration_ms: u64::try_from(record.duration.as_millis()).unwrap_or(u64::MAX),
            exit_code: record.exit_code,
            success: result.ok,
            preview: content.lines().next().map(str::to_string),
            chars: content.chars().count(),
            stopped: None,
        });
        self.append(Event::ActionResult {
            action_id: call.id.to_string(),
            status: if result.ok {
                ActionStatus::Success
            } else {
                ActionStatus::Failed
            },
            observation_content: content.clone(),
            execution_ref: call.exec_ref,
        })?;
        self.run_hook(
            crate::agent::HookName::PostToolExec,
            &json!({"tool_name": call.name, "exit_code": record.exit_code}),
        )?;
        if result.ok && result.ends_run {
            let note = format!("{} handed the work back to the program", call.name);
            self.log(&note);
            return self
                .complete(content, Some(super::EndReason::Handoff))
                .map(Some);
        }
        Ok(None)
    }
}
