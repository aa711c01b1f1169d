//! `--format stream-json`: what a run does, as it happens, one JSON object per line.
//!
//! Every line has a `type`; the schema (documented in `docs/delta.md`, "Streaming JSON") is:
//!
//! | `type` | fields |
//! |---|---|
//! | `run_started` | `run_id`, `workspace`, `agent`, `model`, `resuming` (the status picked up, or null), `max_iterations` |
//! | `iteration` | `n` (in this call), `max`, `run_iteration` (in the run) |
//! | `model_request` | (the model is asked) |
//! | `model_text` | `text` |
//! | `tool_started` | `id`, `name`, `arguments` |
//! | `tool_finished` | `id`, `name`, `exit_code`, `success`, `stopped` (why it was stopped, or null), `duration_ms`, `output_chars`, `preview` |
//! | `tool_not_found` | `name` |
//! | `tool_error` | `message` |
//! | `hook` | `name`, `status`, `problems` |
//! | `question_asked` | `prompt`, `waiting` (true: the run stops for the answer) |
//! | `compaction` | `strategy`, `iterations`, `tokens_before`, `tokens_after` |
//! | `note` | `text` |
//! | `run_finished` | `result`: the object `--format json` prints |

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::engine::{Observer, Progress};
use crate::runner::Launching;

/// The `run_started` line.
pub fn started(launching: &Launching<'_>) -> Value {
    json!({
        "type": "run_started",
        "run_id": launching.run_id,
        "workspace": launching.workspace,
        "agent": launching.agent.dir,
        "model": launching.agent.llm.model,
        "resuming": launching.resuming.map(|s| s.as_str()),
        "max_iterations": launching.max_iterations,
        "policy": crate::agent::policy::to_json(launching.agent),
    })
}

/// The `run_finished` line around `result` (a RunResult, or the object of a run that could not
/// start).
pub fn finished(result: Value) -> Value {
    json!({"type": "run_finished", "result": result})
}

/// Turns progress into lines for `sink` (which writes them, a line break after each).
pub struct StreamJson<F: FnMut(&Value)> {
    sink: F,
    /// Tool names by call id, for `tool_finished`.
    names: HashMap<String, String>,
}

impl<F: FnMut(&Value)> StreamJson<F> {
    /// Lines go to `sink`.
    pub fn new(sink: F) -> Self {
        Self {
            sink,
            names: HashMap::new(),
        }
    }

    fn line(&mut self, progress: Progress) -> Value {
        match progress {
            Progress::Iteration {
                n,
                max,
                run_iteration,
            } => json!({"type": "iteration", "n": n, "max": max, "run_iteration": run_iteration}),
            Progress::Thinking => json!({"type": "model_request"}),
            Progress::Thought(text) => json!({"type": "model_text", "text": text}),
            // The whole text comes as `model_text`; waits show in the lines' order.
            Progress::Executing(_) | Progress::TextDelta(_) | Progress::Waiting { .. } => {
                Value::Null
            }
            Progress::ToolCall { id, name, args } => {
                self.names.insert(id.clone(), name.clone());
                json!({"type": "tool_started", "id": id, "name": name, "arguments": args})
            }
            Progress::ToolDone {
                id,
                duration_ms,
                exit_code,
                success,
                preview,
                chars,
                stopped,
            } => json!({
                "type": "tool_finished",
                "name": self.names.get(&id),
                "id": id,
                "exit_code": exit_code,
                "success": success,
                "stopped": stopped,
                "duration_ms": duration_ms,
                "output_chars": chars,
                "preview": preview,
            }),
            Progress::ToolNotFound(name) => json!({"type": "tool_not_found", "name": name}),
            Progress::ToolError(message) => json!({"type": "tool_error", "message": message}),
            other => other_line(other),
        }
    }
}

/// The lines of hooks, questions, compactions and notes.
fn other_line(progress: Progress) -> Value {
    match progress {
        Progress::Hook {
            name,
            status,
            problems,
        } => {
            json!({"type": "hook", "name": name.as_str(), "status": status, "problems": problems})
        }
        Progress::Question(prompt) => {
            json!({"type": "question_asked", "prompt": prompt, "waiting": false})
        }
        Progress::Paused(prompt) => {
            json!({"type": "question_asked", "prompt": prompt, "waiting": true})
        }
        Progress::Compacted {
            strategy,
            iterations,
            tokens_before,
            tokens_after,
            ..
        } => json!({
            "type": "compaction",
            "strategy": strategy,
            "iterations": iterations,
            "tokens_before": tokens_before,
            "tokens_after": tokens_after,
        }),
        Progress::Note(text) => json!({"type": "note", "text": text}),
        _ => Value::Null,
    }
}

impl<F: FnMut(&Value)> Observer for StreamJson<F> {
    fn progress(&mut self, event: Progress) {
        let line = self.line(event);
        if !line.is_null() {
            (self.sink)(&line);
        }
    }
}
