//! Act: running one tool call of the model's answer and journaling its result.
//!
//! `ACTION_REQUEST` is flushed before the tool starts and `ACTION_RESULT` is written as soon as it
//! ends, so a run stopped at any point knows which calls started and which finished. Between the two,
//! the tool's process group is recorded in `process.json` (before its program starts) and the record is
//! emptied once the result is journaled: a process that takes the run over after a crash finds the
//! group there, stops it if it still runs, and knows that a call without a record never started its
//! program.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::observation::{self, Ending};
use super::registry::Handler;
use super::{ASK_HUMAN, Engine, EngineError, Observer, Progress, RunOutcome};
use crate::agent::{HookName, Tool};
use crate::events::{ActionStatus, Event, HookStatus, Level};
use crate::process::record::ChildKind;
use crate::process::{self, RunError, Spawn};

/// What [`Engine::begin_call`] decided.
pub(super) enum Begin<'a> {
    /// Run the call.
    Run(Requested<'a>),
    /// The call is settled (skipped by a hook) or the run stopped.
    Done(Option<Box<RunOutcome>>),
}

/// A tool call whose `ACTION_REQUEST` is journaled.
pub(super) struct Requested<'a> {
    pub(super) id: &'a str,
    pub(super) name: &'a str,
    pub(super) args: &'a Map<String, Value>,
    /// The command as journaled.
    pub(super) resolved: &'a str,
    /// Its `io/tool_executions/` folder.
    pub(super) exec_ref: String,
}

impl Engine<'_> {
    /// Runs one tool call. Returns an outcome when the run must stop (waiting, interrupted).
    pub(super) fn act(
        &mut self,
        id: &str,
        name: &str,
        raw_args: Value,
    ) -> Result<Option<RunOutcome>, EngineError> {
        let Some(args) = self.call_arguments(id, name, raw_args)? else {
            return Ok(None);
        };
        self.observer.progress(Progress::ToolCall {
            id: id.to_string(),
            name: name.to_string(),
            args: Value::Object(args.clone()),
        });
        match self.tools.get(name) {
            None => {
                self.tool_not_found(id, name)?;
                Ok(None)
            }
            Some(Handler::AskHuman) => self.ask_human(id, &args),
            Some(Handler::Session(tool)) => self.run_session_tool(id, name, tool, &args),
            Some(Handler::Mcp(index)) => self.run_mcp_tool(id, name, index, &args),
            Some(Handler::Shell(index)) => {
                let tool = self.setup.agent.tools[index].clone();
                self.run_shell_tool(id, name, &tool, &args)
            }
            Some(Handler::Host) => self.run_host_tool(id, name, &args),
            Some(Handler::Agent(index)) => {
                let tool = self.setup.agent.tools[index].clone();
                self.run_agent_tool(id, name, &tool, &args)
            }
        }
    }

    /// Runs call `id` of the agent's tool `tool`: `ACTION_REQUEST`, the `pre_tool_exec` hook, the
    /// process, `ACTION_RESULT`.
    fn run_shell_tool(
        &mut self,
        id: &str,
        name: &str,
        tool: &Tool,
        args: &Map<String, Value>,
    ) -> Result<Option<RunOutcome>, EngineError> {
        let home = self.setup.agent.dir.display().to_string();
        let invocation = match tool.resolve(args, &home) {
            Ok(inv) => inv,
            Err(e) => {
                self.error_result(id, format!("Error: {name}: {e}"))?;
                return Ok(None);
            }
        };
        let resolved = invocation.display();
        let call = match self.begin_call(id, name, args, &resolved)? {
            Begin::Run(call) => call,
            Begin::Done(outcome) => return Ok(outcome.map(|o| *o)),
        };
        let mut argv = invocation.argv.clone();
        if let Some(program) = argv.first_mut() {
            *program = self.programs.resolve(program, &self.tool_env);
        }
        let spawn = Spawn {
            argv,
            stdin: invocation.stdin.clone(),
            cwd: self.setup.run.workspace.clone(),
            env: self.tool_env.clone(),
            timeout: tool.timeout,
            confine: self.confinement.clone(),
        };
        self.execute(call, tool, &spawn)
    }

    /// Journals the `ACTION_REQUEST` of call `id` and runs the `pre_tool_exec` hook: the call goes
    /// on ([`Begin::Run`], with its `io/tool_executions/` folder chosen) unless the hook skipped it or the
    /// run was interrupted.
    pub(super) fn begin_call<'a>(
        &mut self,
        id: &'a str,
        name: &'a str,
        args: &'a Map<String, Value>,
        resolved: &'a str,
    ) -> Result<Begin<'a>, EngineError> {
        // The agent's permissions come first: a call refused, or waiting for approval, never started.
        if let super::approvals::Permission::Stop(outcome) =
            self.check_permission(id, name, args, resolved)?
        {
            return Ok(Begin::Done(outcome));
        }
        self.append(Event::ActionRequest {
            action_id: id.to_string(),
            tool_name: name.to_string(),
            tool_args: Value::Object(args.clone()),
            resolved_command: resolved.to_string(),
        })?;
        let exec_ref = self.execution_ref(id);
        if let Some(hook) = self.run_hook(
            HookName::PreToolExec,
            &json!({"tool_name": name, "tool_args": args, "resolved_command": resolved}),
        )? && hook.status == HookStatus::Success
            && hook.skip()
        {
            self.skipped_by_hook(Requested {
                id,
                name,
                args,
                resolved,
                exec_ref,
            })?;
            return Ok(Begin::Done(None));
        }
        if self.interrupted() {
            self.not_started(id)?;
            return Ok(Begin::Done(Some(Box::new(self.interrupt_run()?))));
        }
        Ok(Begin::Run(Requested {
            id,
            name,
            args,
            resolved,
            exec_ref,
        }))
    }

    /// The call's arguments as an object; anything else becomes an error result (`None`).
    fn call_arguments(
        &mut self,
        id: &str,
        name: &str,
        raw_args: Value,
    ) -> Result<Option<Map<String, Value>>, EngineError> {
        let message = match raw_args {
            Value::Object(map) => return Ok(Some(map)),
            Value::Null => return Ok(Some(Map::new())),
            Value::String(raw) if matches!(raw.trim(), "" | "null" | "undefined" | "{}") => {
                return Ok(Some(Map::new()));
            }
            Value::String(raw) => {
                let err = serde_json::from_str::<Value>(&raw)
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                format!(
                    "Error: the arguments for {name} are not valid JSON ({err}); send a JSON object"
                )
            }
            other => format!("Error: the arguments for {name} must be a JSON object, not {other}"),
        };
        self.error_result(id, message)?;
        Ok(None)
    }

    fn tool_not_found(&mut self, id: &str, name: &str) -> Result<(), EngineError> {
        self.observer
            .progress(Progress::ToolNotFound(name.to_string()));
        self.system(Level::Error, &format!("Tool not found: {name}"))?;
        // The agent's tools, then the built-in (the list starts with ", " when the agent has none).
        let available: Vec<&str> = self.tools.names().filter(|n| *n != ASK_HUMAN).collect();
        self.append(Event::ActionResult {
            action_id: id.to_string(),
            status: ActionStatus::Error,
            observation_content: format!(
                "Error: Tool not found: {name}. Available tools: {}, {ASK_HUMAN}",
                available.join(", ")
            ),
            execution_ref: String::new(),
        })
    }

    fn skipped_by_hook(&mut self, call: Requested<'_>) -> Result<(), EngineError> {
        let stdout = "Tool execution skipped by pre_tool_exec hook";
        self.write_execution(
            &call.exec_ref,
            call.resolved,
            &process::Outcome::printed(stdout),
        );
        self.observer.progress(Progress::ToolDone {
            id: call.id.to_string(),
            duration_ms: 0,
            exit_code: 0,
            success: true,
            preview: Some(stdout.into()),
            chars: stdout.len(),
            stopped: None,
        });
        self.append(Event::ActionResult {
            action_id: call.id.to_string(),
            status: ActionStatus::Success,
            observation_content: observation::format(stdout, "", [0, 0], 0, Ending::Exited),
            execution_ref: call.exec_ref,
        })
    }

    /// The result of a call whose program never ran because the run was interrupted first.
    fn not_started(&mut self, id: &str) -> Result<(), EngineError> {
        self.append(Event::ActionResult {
            action_id: id.to_string(),
            status: ActionStatus::Error,
            observation_content:
                "The run was interrupted before this tool started: it did not run.".into(),
            execution_ref: String::new(),
        })
    }

    /// Runs the tool (recorded in `process.json` before its program starts) and journals its result;
    /// the record goes once the result is journaled.
    fn execute(
        &mut self,
        call: Requested<'_>,
        tool: &Tool,
        spawn: &Spawn,
    ) -> Result<Option<RunOutcome>, EngineError> {
        let (id, name) = (call.id, call.name);
        let recorder = self.recorder();
        let interrupt = Arc::clone(&self.setup.interrupt);
        let recording = process::Recording {
            recorder: &recorder,
            kind: ChildKind::Tool,
            name,
            action_id: Some(id),
        };
        let run = process::run_recorded(spawn, &interrupt, recording);
        let out = match run {
            Ok(out) => out,
            Err(RunError::Interrupted) => {
                self.not_started(id)?;
                self.clear_record();
                return Ok(Some(self.interrupt_run()?));
            }
            Err(RunError::Record(e)) => {
                // Nothing ran; the call keeps its request without a result, like any crash before
                // a tool starts, and the run stops: its state cannot be written.
                self.clear_record();
                return Err(e.into());
            }
            Err(RunError::Start(e)) => {
                let program = spawn.argv.first().cloned().unwrap_or_default();
                let message = format!("cannot start {program}: {e}");
                self.system(Level::Error, &format!("Tool execution error: {message}"))?;
                self.error_result(id, format!("Error executing tool: {message}"))?;
                self.clear_record();
                self.run_hook(
                    HookName::OnError,
                    &json!({"error_type": "TOOL_EXECUTION_ERROR", "message": message,
                            "context": {"tool_name": name, "tool_args": call.args}}),
                )?;
                return Ok(None);
            }
        };
        let sandbox = self.confinement.clone();
        self.finish_call(call, &out, tool.timeout, sandbox.as_deref())
    }

    /// Journals the result of a call that ran (`out`; `timeout` is what a timed-out call was
    /// allowed), keeps its record under `io/tool_executions/`, and runs the `post_tool_exec` hook.
    pub(super) fn finish_call(
        &mut self,
        call: Requested<'_>,
        out: &process::Outcome,
        timeout: std::time::Duration,
        sandbox: Option<&crate::sandbox::Confinement>,
    ) -> Result<Option<RunOutcome>, EngineError> {
        let (id, name) = (call.id, call.name);
        // Keys are scrubbed where this text leaves the process (the record below, the journal, hook
        // payloads, the console), once each.
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        self.write_execution(&call.exec_ref, call.resolved, out);
        let ending = if out.interrupted {
            Ending::Interrupted
        } else if out.timed_out {
            Ending::TimedOut(timeout)
        } else {
            Ending::Exited
        };
        let stopped = match &ending {
            Ending::Exited => None,
            Ending::TimedOut(after) => Some(format!("timed out after {} s", after.as_secs_f64())),
            Ending::Interrupted => Some("interrupted".to_string()),
        };
        self.observer.progress(Progress::ToolDone {
            id: id.to_string(),
            duration_ms: u64::try_from(out.duration.as_millis()).unwrap_or(u64::MAX),
            exit_code: out.exit_code,
            success: out.success(),
            preview: observation::preview(&stdout, &stderr),
            chars: stdout.chars().count() + stderr.chars().count(),
            stopped,
        });
        self.append(Event::ActionResult {
            action_id: id.to_string(),
            status: if out.success() {
                ActionStatus::Success
            } else {
                ActionStatus::Failed
            },
            observation_content: observation::format(
                &stdout,
                &stderr,
                out.dropped,
                out.exit_code,
                ending,
            ) + &sandbox_note(sandbox, out, &stderr),
            execution_ref: call.exec_ref,
        })?;
        self.clear_record();
        if out.interrupted {
            return Ok(Some(self.interrupt_run()?));
        }
        self.run_hook(
            HookName::PostToolExec,
            &json!({"tool_name": name, "exit_code": out.exit_code, "stdout": stdout, "stderr": stderr}),
        )?;
        Ok(None)
    }

    pub(super) fn error_result(&mut self, id: &str, message: String) -> Result<(), EngineError> {
        self.observer.progress(Progress::ToolError(message.clone()));
        self.append(Event::ActionResult {
            action_id: id.to_string(),
            status: ActionStatus::Error,
            observation_content: message,
            execution_ref: String::new(),
        })
    }

    /// A fresh `io/tool_executions/` folder name for call `id`.
    pub(super) fn execution_ref(&mut self, id: &str) -> String {
        let base = safe_dir_name(id);
        let mut name = base.clone();
        let mut n = 2;
        while self.exec_refs.contains(&name) {
            name = format!("{base}-{n}");
            n += 1;
        }
        self.exec_refs.insert(name.clone());
        name
    }

    /// Keeps what the tool of `exec_ref` did in `io/tool_executions/` (record `<ref>`): its exit code,
    /// time and command on the first line, then both streams (each ending with a mark where its
    /// capture stopped, if it did).
    pub(super) fn write_execution(&self, exec_ref: &str, command: &str, out: &process::Outcome) {
        self.write_execution_with(exec_ref, command, out, Vec::new());
    }

    /// [`Engine::write_execution`], with `extra` fields after the usual ones (their values
    /// already scrubbed).
    pub(super) fn write_execution_with(
        &self,
        exec_ref: &str,
        command: &str,
        out: &process::Outcome,
        extra: Vec<(&'static str, Value)>,
    ) {
        let redact = |text: &str| self.setup.redactor.redact(text).into_owned();
        let stream = |bytes: &[u8], dropped: u64| -> super::io_writer::Content {
            let mut text = redact(&String::from_utf8_lossy(bytes));
            if dropped > 0 {
                text.push_str(&observation::cut_mark(dropped));
            }
            // Encoded on the writer thread: a stream may be large (its JSON is at least as long).
            super::io_writer::Content::Later(
                text.len() + 2,
                Box::new(move || serde_json::to_vec(&text).unwrap_or_default()),
            )
        };
        let head = json!({
            "exit_code": out.exit_code,
            "duration_ms": u64::try_from(out.duration.as_millis()).unwrap_or(u64::MAX),
            "command": redact(command),
        });
        let mut fields = vec![
            ("stdout", stream(&out.stdout, out.dropped[0])),
            ("stderr", stream(&out.stderr, out.dropped[1])),
        ];
        fields.extend(
            extra
                .into_iter()
                .map(|(key, value)| (key, serde_json::to_vec(&value).unwrap_or_default().into())),
        );
        let parts = super::records::object_parts(&head, fields);
        self.io.write(
            self.setup
                .run
                .tool_executions()
                .join(format!("{exec_ref}.json")),
            parts,
        );
    }
}

/// What a failed call is told when the sandbox may be why: its error says permission was refused
/// (or the network could not be reached) and the call ran confined.
fn sandbox_note(
    sandbox: Option<&crate::sandbox::Confinement>,
    out: &process::Outcome,
    stderr: &str,
) -> String {
    const REFUSED: [&str; 5] = [
        "Permission denied",
        "Operation not permitted",
        "Read-only file system",
        "PermissionError",
        "Network is unreachable",
    ];
    match sandbox {
        Some(sandbox) if !out.success() && REFUSED.iter().any(|r| stderr.contains(r)) => format!(
            "\n=== SANDBOX: the tool runs in a sandbox ({}), which refuses {}. If that is what \
             failed, do it another way or ask the user. ===",
            sandbox.policy().describe(),
            sandbox.policy().refusals()
        ),
        _ => String::new(),
    }
}

/// A name safe as a folder name for an id the model chose.
pub(super) fn safe_dir_name(id: &str) -> String {
    let cleaned: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    if cleaned.is_empty() {
        "call".into()
    } else {
        cleaned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_call_ids_make_safe_folder_names() {
        assert_eq!(safe_dir_name("call_abc-1"), "call_abc-1");
        assert_eq!(safe_dir_name("../../etc/passwd"), "______etc_passwd");
        assert_eq!(safe_dir_name(""), "call");
    }
}
