//! What a run reports while it works, and who hears it.

use serde_json::Value;

use crate::agent::HookName;
use crate::events::HookStatus;

/// Progress reported while a run works (the CLI prints it on stderr).
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// An iteration begins.
    Iteration {
        /// 1-based, counted in this process.
        n: u32,
        /// Budget of this process.
        max: u32,
        /// Its number in the run (over every process that worked on it); the run's
        /// `iterations_completed` once it ends.
        run_iteration: u64,
    },
    /// Waiting for the model.
    Thinking,
    /// The model's text.
    Thought(String),
    /// Tools are about to run.
    Executing(usize),
    /// A tool is about to run.
    ToolCall {
        /// The call id.
        id: String,
        /// Tool name.
        name: String,
        /// Its arguments.
        args: Value,
    },
    /// A tool finished.
    ToolDone {
        /// The call id.
        id: String,
        /// How long it ran.
        duration_ms: u64,
        /// Exit code.
        exit_code: i32,
        /// Whether it succeeded.
        success: bool,
        /// First output, one line.
        preview: Option<String>,
        /// Output length in characters (stdout + stderr).
        chars: usize,
        /// Why it was stopped, when it did not exit by itself ("timed out after 30 s", "interrupted").
        stopped: Option<String>,
    },
    /// The model called a tool that does not exist.
    ToolNotFound(String),
    /// A tool call could not be run (bad arguments, spawn failure).
    ToolError(String),
    /// A hook ran.
    Hook {
        /// Which.
        name: HookName,
        /// How it went.
        status: HookStatus,
        /// Problems, if any.
        problems: Vec<String>,
    },
    /// A piece of the model's text, as it arrives (streaming; the whole text follows as `Thought`).
    TextDelta(String),
    /// Still waiting for the model, this many seconds now (once a second).
    Waiting {
        /// Seconds since the request was sent.
        seconds: u64,
    },
    /// The model asks the human something (interactive mode shows it).
    Question(String),
    /// The run stops to wait for the answer to this question.
    Paused(String),
    /// The oldest part of the conversation was replaced to fit the context window.
    Compacted {
        /// `summarize` or `truncate`.
        strategy: String,
        /// Model answers replaced.
        iterations: u64,
        /// Estimated tokens before.
        tokens_before: u64,
        /// Estimated tokens after.
        tokens_after: u64,
        /// What happened, in a line.
        note: String,
    },
    /// Something worth a line (skipped context sources, the iteration limit).
    Note(String),
}

/// Receives progress.
pub trait Observer {
    /// Called for each step.
    fn progress(&mut self, event: Progress);
}

/// An observer that discards everything.
pub struct Silent;

impl Observer for Silent {
    fn progress(&mut self, _event: Progress) {}
}
