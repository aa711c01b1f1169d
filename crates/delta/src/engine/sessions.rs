//! The built-in shell-session tools (`sessions: true`): `session_start`, `session_exec`,
//! `session_end`, journaled like any tool call; and the cleanup of the run's sessions.
//!
//! Sessions live in `<workspace>/.sessions` and name the run as their owner. When the run ends,
//! fails or is interrupted their processes are stopped (their saved folder and environment stay, so
//! a later `delta continue` that uses them finds them rebuilt); while the run waits for an answer
//! they stay alive, since the same run goes on with them. A run taken over after a crash stops what
//! its previous process left running.

use serde_json::{Map, Value, json};

use super::act::Begin;
use super::registry::SessionTool;
use super::{Engine, EngineError, Observer, Progress, RunOutcome};
use crate::agent::tools::value_text;
use crate::process;
use crate::shells::{self, ExecOutput, ShellError, ShellSessions, StartOptions};

impl Engine<'_> {
    /// The sessions of this run's workspace.
    fn shell_sessions(&self) -> ShellSessions {
        ShellSessions::new(
            self.setup.run.workspace.join(shells::DEFAULT_DIR),
            shells::host_program(),
            self.tool_env.clone(),
        )
        .confined(self.setup.agent.sandbox.clone(), &self.setup.run.workspace)
    }

    /// Runs call `id` of a built-in session tool.
    pub(super) fn run_session_tool(
        &mut self,
        id: &str,
        name: &str,
        tool: SessionTool,
        args: &Map<String, Value>,
    ) -> Result<Option<RunOutcome>, EngineError> {
        let text = |key: &str| args.get(key).and_then(value_text).filter(|t| !t.is_empty());
        let (session, command) = (text("id"), text("command"));
        let resolved = match (tool, &session, &command) {
            (SessionTool::Start, _, _) => format!(
                "session_start {} {}",
                session.as_deref().unwrap_or("(new)"),
                command.as_deref().unwrap_or(shells::DEFAULT_SHELL)
            ),
            (SessionTool::Exec, Some(s), Some(c)) => format!("session_exec {s}: {c}"),
            (SessionTool::End, Some(s), _) => format!("session_end {s}"),
            (_, None, _) => return self.missing(id, name, "id"),
            (_, _, None) => return self.missing(id, name, "command"),
        };
        let call = match self.begin_call(id, name, args, &resolved)? {
            Begin::Run(call) => call,
            Begin::Done(outcome) => return Ok(outcome.map(|o| *o)),
        };
        let timeout = args
            .get("timeout_seconds")
            .and_then(|v| v.as_f64().or_else(|| value_text(v)?.parse().ok()))
            .and_then(crate::agent::seconds)
            .unwrap_or(self.setup.agent.tool_timeout);
        let sessions = self.shell_sessions();
        let started = std::time::Instant::now();
        let mut out = match tool {
            SessionTool::Start => {
                let options = StartOptions {
                    pty: command.as_deref().is_some_and(|c| !shells::is_shell(c)),
                    command,
                    id: session,
                    work_dir: self.setup.run.workspace.clone(),
                    owner_run: Some(self.setup.run.run_id.clone()),
                };
                described(sessions.start(&options).map(|meta| {
                    json!({"session_id": meta.session_id, "command": meta.command,
                           "work_dir": meta.work_dir, "status": meta.status})
                }))
            }
            SessionTool::Exec => {
                let interrupt = std::sync::Arc::clone(&self.setup.interrupt);
                let ran = sessions.exec(
                    session.as_deref().unwrap_or_default(),
                    command.as_deref().unwrap_or_default(),
                    Some(timeout),
                    Some(&interrupt),
                );
                exec_outcome(ran)
            }
            SessionTool::End => described(
                sessions
                    .end(session.as_deref().unwrap_or_default())
                    .map(|meta| json!({"status": meta.status, "session_id": meta.session_id})),
            ),
        };
        out.duration = started.elapsed();
        self.finish_call(call, &out, timeout, None)
    }

    fn missing(
        &mut self,
        id: &str,
        name: &str,
        argument: &str,
    ) -> Result<Option<RunOutcome>, EngineError> {
        self.error_result(
            id,
            format!("Error: {name}: missing required argument `{argument}`"),
        )?;
        Ok(None)
    }

    /// Stops the processes of the sessions this run owns (at its end, or when a run left by a crashed
    /// process is taken over). A failure is reported, never fatal: the run's result stands.
    pub(super) fn stop_sessions(&mut self) {
        match self.shell_sessions().stop_owned(&self.setup.run.run_id) {
            Ok(stopped) if stopped.is_empty() => {}
            Ok(stopped) => self.log(&format!(
                "Stopped the processes of shell sessions {} (their state is kept)",
                stopped.join(", ")
            )),
            Err(e) => self.observer.progress(Progress::Note(format!(
                "Failed to clean up shell sessions: {e}"
            ))),
        }
    }
}

/// The outcome of a start or end: its JSON on stdout, or the error on stderr with exit code 1.
fn described(result: Result<Value, ShellError>) -> process::Outcome {
    match result {
        Ok(value) => process::Outcome::printed(&format!("{value}")),
        Err(e) => failed(&e),
    }
}

fn failed(e: &ShellError) -> process::Outcome {
    process::Outcome {
        stderr: format!("Error: {e}").into_bytes(),
        exit_code: 1,
        interrupted: matches!(e, ShellError::Interrupted(_)),
        ..process::Outcome::default()
    }
}

/// The outcome of a command run in a session; a rebuild is said first on stderr.
fn exec_outcome(ran: Result<ExecOutput, ShellError>) -> process::Outcome {
    let out = match ran {
        Ok(out) => out,
        Err(e) => return failed(&e),
    };
    let mut stderr = match &out.rebuilt {
        Some(note) => format!("[{note}]\n").into_bytes(),
        None => Vec::new(),
    };
    stderr.extend_from_slice(&out.stderr);
    process::Outcome {
        stdout: out.stdout,
        stderr,
        exit_code: out.exit_code,
        timed_out: out.timed_out,
        dropped: out.dropped,
        ..process::Outcome::default()
    }
}
