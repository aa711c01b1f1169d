//! Picking a run up again: what `delta continue` and `delta run -w` do with a run, given its status and
//! the message they were given.
//!
//! Both commands make the same decision ([`decide`]) and make it once the run is locked, so the status
//! acted on is the status the run has, not one seen before another process changed it.

use std::path::Path;

use store::{RunLock, StoreError};

use crate::engine::{InteractionRequest, response_path};
use crate::metadata::RunStatus;
use crate::process::record::Recorder;
use crate::runs::{self, OpenError, Opened};

/// The command that picks a run up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// `delta continue`: acts on any status; the message is optional.
    Continue,
    /// `delta run -w`: resumes a paused or interrupted run with its (required) message, and leaves a
    /// finished run alone to start a new one.
    Run,
}

/// What to do with a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Go on where it stopped; the message, if any, is added as a user message once every pending call
    /// has its result.
    Resume {
        /// The new message.
        message: Option<String>,
    },
    /// Answer the pending `ask_human` question with this text, then go on.
    Answer(String),
    /// Answer the pending question with the text already in `interaction/response.txt`.
    AnswerFromFile,
    /// Add the message to a finished run: the conversation goes on (COMPLETED) or is retried with it as
    /// guidance (FAILED).
    Extend {
        /// The new message.
        message: String,
        /// COMPLETED or FAILED.
        status: RunStatus,
    },
    /// Leave the run alone and start a new one.
    StartNew,
}

impl Decision {
    /// The person's answer this decision carries (`continue -m` on a waiting run).
    pub fn answer(&self) -> Option<String> {
        match self {
            Self::Answer(answer) => Some(answer.clone()),
            _ => None,
        }
    }
}

/// Why a run was not picked up: the message it needs is missing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A paused run needs an answer.
    #[error(
        "Run is WAITING_FOR_INPUT. Please provide a response using -m/--message.{}",
        .question.as_deref().map(|q| format!(" The question: {q}")).unwrap_or_default()
    )]
    NeedsAnswer {
        /// The pending question, when it can be read.
        question: Option<String>,
    },
    /// A finished run is only extended or retried with a message.
    #[error("Run is {status}. To {}, provide a message using -m/--message", if *.status == RunStatus::Failed { "retry" } else { "continue" })]
    NeedsMessage {
        /// COMPLETED or FAILED.
        status: RunStatus,
    },
}

impl Refusal {
    /// An example command for the run's workspace.
    pub fn hint(&self, workspace: &Path) -> String {
        let example = match self {
            Self::NeedsAnswer { .. } => "yes",
            Self::NeedsMessage {
                status: RunStatus::Failed,
            } => "Guidance for retry",
            Self::NeedsMessage { .. } => "Now do something else",
        };
        format!(
            "Example: delta continue -w {} -m \"{example}\"",
            workspace.display()
        )
    }
}

/// The decision for a run with `status` (as found under its lock), given `message` (empty counts as
/// none). `answer_on_file` says whether `interaction/response.txt` holds an answer already.
pub fn decide_for(
    status: RunStatus,
    message: Option<&str>,
    caller: Caller,
    answer_on_file: bool,
) -> Result<Decision, Refusal> {
    let message = message.filter(|m| !m.trim().is_empty()).map(str::to_string);
    match (status, message) {
        // A locked run is never RUNNING for us: `runs::open` reports a dead process's run as
        // INTERRUPTED. Treat it the same way should it happen.
        (RunStatus::Interrupted | RunStatus::Running, message) => Ok(Decision::Resume { message }),
        (RunStatus::WaitingForInput, Some(answer)) => Ok(Decision::Answer(answer)),
        (RunStatus::WaitingForInput, None) if answer_on_file => Ok(Decision::AnswerFromFile),
        (RunStatus::WaitingForInput, None) => Err(Refusal::NeedsAnswer { question: None }),
        (RunStatus::Completed | RunStatus::Failed, _) if caller == Caller::Run => {
            Ok(Decision::StartNew)
        }
        (status @ (RunStatus::Completed | RunStatus::Failed), Some(message)) => {
            Ok(Decision::Extend { message, status })
        }
        (status @ (RunStatus::Completed | RunStatus::Failed), None) => {
            Err(Refusal::NeedsMessage { status })
        }
    }
}

/// [`decide_for`] an opened run; a refusal to answer names the pending question.
pub fn decide(opened: &Opened, message: Option<&str>, caller: Caller) -> Result<Decision, Refusal> {
    let on_file = response_path(&opened.run).is_file();
    decide_for(opened.status, message, caller, on_file).map_err(|refusal| match refusal {
        Refusal::NeedsAnswer { .. } => Refusal::NeedsAnswer {
            question: store::atomic::read_json::<InteractionRequest>(
                &opened.run.interaction().join("request.json"),
            )
            .ok()
            .map(|r| r.prompt),
        },
        other => other,
    })
}

/// Carries out the part of `decision` that comes before the engine runs: an answer is written
/// (durably) to `interaction/response.txt`, where the pending `ask_human` call takes it from. Returns
/// the message the engine adds after settling the pending calls.
pub fn prepare(opened: &Opened, decision: &Decision) -> Result<Option<String>, StoreError> {
    match decision {
        Decision::Answer(answer) => {
            crate::io_files::own_folder(&opened.run.interaction())?;
            store::write_atomic(&response_path(&opened.run), answer.as_bytes())?;
            Ok(None)
        }
        Decision::Resume { message } => Ok(message.clone()),
        Decision::Extend { message, .. } => Ok(Some(message.clone())),
        Decision::AnswerFromFile | Decision::StartNew => Ok(None),
    }
}

/// What `delta run -w` does in a workspace that has runs.
#[derive(Debug)]
pub enum RunInWorkspace {
    /// Resume the latest run (it is locked, with the workspace).
    Resume {
        /// The run.
        opened: Box<Opened>,
        /// What to do with it.
        decision: Decision,
    },
    /// Start a new run; the workspace is locked for it.
    New {
        /// The workspace's lock.
        workspace_lock: RunLock,
    },
}

/// Locks the workspace, then decides what `delta run -w` with `message` does: resume its latest run
/// when that is paused or interrupted (a run whose process died counts as interrupted), else start a
/// new one. A workspace another process works in is [`OpenError::Busy`]; so is a latest run held by a
/// process that does not take the workspace's lock. The locks decide, so of several callers racing
/// for the same run, one resumes it and the others are busy.
pub fn claim_for_run(
    workspace: &Path,
    message: &str,
    clock: store::Clock,
    command: &str,
) -> Result<RunInWorkspace, OpenError> {
    let workspace_lock = runs::lock_workspace(workspace, clock, command)?;
    let Some(latest) = runs::latest(workspace) else {
        return Ok(RunInWorkspace::New { workspace_lock });
    };
    let opened = runs::open_locked(workspace, &latest.run_id, workspace_lock, clock, command)?;
    match decide(&opened, Some(message), Caller::Run) {
        Ok(Decision::StartNew) | Err(_) => {
            // What the finished run's process left running was stopped when the workspace was
            // locked (`runs::lock_workspace`); its record has nothing more to tell.
            Recorder::new(opened.run.process_record()).discard()?;
            Ok(RunInWorkspace::New {
                // The run's own lock is released here; the workspace's is kept for the new run.
                workspace_lock: opened.workspace_lock,
            })
        }
        Ok(decision) => Ok(RunInWorkspace::Resume {
            opened: Box::new(opened),
            decision,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_acts_on_every_status() {
        use Decision::*;
        use RunStatus::*;
        let d = |status, message, on_file| decide_for(status, message, Caller::Continue, on_file);
        assert_eq!(d(Interrupted, None, false), Ok(Resume { message: None }));
        assert_eq!(
            d(Interrupted, Some("more"), false),
            Ok(Resume {
                message: Some("more".into())
            })
        );
        assert_eq!(
            d(Interrupted, Some("  "), false),
            Ok(Resume { message: None })
        );
        assert_eq!(
            d(WaitingForInput, Some("Blue"), true),
            Ok(Answer("Blue".into())),
            "the message wins over a file"
        );
        assert_eq!(d(WaitingForInput, None, true), Ok(AnswerFromFile));
        assert_eq!(
            d(WaitingForInput, None, false),
            Err(Refusal::NeedsAnswer { question: None })
        );
        assert_eq!(
            d(Completed, Some("go on"), false),
            Ok(Extend {
                message: "go on".into(),
                status: Completed
            })
        );
        assert_eq!(
            d(Failed, None, false),
            Err(Refusal::NeedsMessage { status: Failed })
        );
        assert_eq!(
            Refusal::NeedsMessage { status: Failed }.to_string(),
            "Run is FAILED. To retry, provide a message using -m/--message"
        );
        assert_eq!(
            Refusal::NeedsAnswer {
                question: Some("Name?".into())
            }
            .to_string(),
            "Run is WAITING_FOR_INPUT. Please provide a response using -m/--message. The question: Name?"
        );
    }

    #[test]
    fn run_resumes_paused_and_interrupted_runs_with_its_message_and_leaves_finished_ones() {
        use Decision::*;
        use RunStatus::*;
        let d = |status| decide_for(status, Some("text"), Caller::Run, false);
        assert_eq!(d(WaitingForInput), Ok(Answer("text".into())));
        assert_eq!(
            d(Interrupted),
            Ok(Resume {
                message: Some("text".into())
            })
        );
        assert_eq!(d(Completed), Ok(StartNew));
        assert_eq!(d(Failed), Ok(StartNew));
    }
}
