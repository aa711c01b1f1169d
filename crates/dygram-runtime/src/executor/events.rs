//! What an execution reports as it runs ([`ExecutionEvent`]), and where the events go
//! ([`EventLog`]): kept for the caller, and given at once to a listener when there is one.

use serde_json::{Value, json};

/// What happened, for the caller to report.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecutionEvent {
    /// A path took a transition.
    Transition {
        /// Path.
        path: String,
        /// From.
        from: String,
        /// To.
        to: String,
        /// Why.
        reason: String,
    },
    /// The model was asked.
    LlmCall {
        /// Path.
        path: String,
        /// Node.
        node: String,
        /// Tools offered, in order.
        tools: Vec<String>,
        /// Messages sent.
        messages: usize,
        /// Model.
        model: String,
    },
    /// A tool the model called starts.
    ToolStarted {
        /// Path.
        path: String,
        /// The call's id (the model's).
        id: String,
        /// Tool.
        name: String,
        /// The arguments the model gave.
        input: Value,
    },
    /// A tool the model called has answered.
    ToolCall {
        /// Path.
        path: String,
        /// The call's id (the model's).
        id: String,
        /// Tool.
        name: String,
        /// The arguments the model gave.
        input: Value,
        /// Whether it failed.
        is_error: bool,
        /// The result (JSON text).
        result: String,
    },
    /// A piece of the model's text as it arrives (streamed answers only). Given to the listener
    /// and not kept: the whole text follows as [`ExecutionEvent::Output`].
    TextDelta {
        /// Path.
        path: String,
        /// The piece.
        text: String,
    },
    /// The model answered with text.
    Output {
        /// Path.
        path: String,
        /// Text.
        text: String,
    },
    /// A path was created.
    Spawned {
        /// New path.
        path: String,
        /// Where it starts.
        node: String,
        /// The path that created it.
        parent: String,
    },
    /// A path reached a node without transitions.
    Completed {
        /// Path.
        path: String,
        /// Node.
        node: String,
    },
    /// A path failed.
    Failed {
        /// Path.
        path: String,
        /// Node.
        node: String,
        /// Why.
        error: String,
    },
    /// An agent node's conversation was compacted to fit the model's context window.
    Compacted {
        /// Path.
        path: String,
        /// Node.
        node: String,
        /// Answers of the model replaced (with their tool results).
        answers: u64,
        /// `summarize` or `truncate`.
        strategy: String,
        /// The window, in tokens.
        window: u32,
        /// Estimated tokens of the next request before.
        tokens_before: u32,
        /// And after.
        tokens_after: u32,
    },
    /// An agent node's run (`@Agent`) took a turn, or said where it stands.
    AgentTurn {
        /// Path.
        path: String,
        /// Node.
        node: String,
        /// The run's id.
        run: String,
        /// The run's folder (`delta show` reads it).
        run_dir: String,
        /// The run's model turns so far.
        iterations: u64,
        /// `paused` (more turns to come), `waiting`, `completed` or `failed`.
        status: String,
    },
    /// A path waits (barrier, or conditions that may change).
    Waiting {
        /// Path.
        path: String,
        /// Node.
        node: String,
        /// Why.
        reason: String,
    },
}

/// A listener of events as they happen.
pub type Listener<'c> = Box<dyn FnMut(&ExecutionEvent) + 'c>;

/// The events of an executor: kept until taken, and each given to the listener first.
#[derive(Default)]
pub struct EventLog<'c> {
    kept: Vec<ExecutionEvent>,
    listener: Option<Listener<'c>>,
}

impl<'c> EventLog<'c> {
    /// Records an event (the listener sees it now).
    pub fn push(&mut self, event: ExecutionEvent) {
        if let Some(listener) = &mut self.listener {
            listener(&event);
        }
        self.kept.push(event);
    }

    /// Gives an event to the listener only (a live event such as [`ExecutionEvent::TextDelta`]).
    pub fn announce(&mut self, event: ExecutionEvent) {
        if let Some(listener) = &mut self.listener {
            listener(&event);
        }
    }

    /// The events kept since the last call, taken.
    pub fn take(&mut self) -> Vec<ExecutionEvent> {
        std::mem::take(&mut self.kept)
    }

    /// Sets the listener.
    pub fn listen(&mut self, listener: Listener<'c>) {
        self.listener = Some(listener);
    }
}

impl ExecutionEvent {
    /// The event as one JSON object, `type` first: `transition`, `model_request`, `model_text`
    /// (`model_text_delta` for a piece of it, never kept), `tool_started`, `tool_finished`,
    /// `spawned`, `completed`, `failed`, `waiting`, `compaction` or `agent_turn` (the lines of `--format
    /// stream-json`, and the `events` of `execute -i --format json`; see
    /// docs/dygram/stream-json.md). The names are the ones delta's stream uses where the two
    /// tools report the same thing.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Transition {
                path,
                from,
                to,
                reason,
            } => json!({"type": "transition", "path": path, "from": from, "to": to,
                "transition": reason}),
            Self::LlmCall {
                path,
                node,
                tools,
                messages,
                model,
            } => json!({"type": "model_request", "path": path, "node": node, "tools": tools,
                "messages": messages, "model": model}),
            Self::ToolStarted {
                path,
                id,
                name,
                input,
            } => json!({"type": "tool_started", "path": path, "id": id, "name": name,
                "input": input}),
            Self::ToolCall {
                path,
                id,
                name,
                input,
                is_error,
                result,
            } => json!({"type": "tool_finished", "path": path, "id": id, "name": name,
                "input": input, "isError": is_error, "result": result}),
            Self::Output { path, text } => {
                json!({"type": "model_text", "path": path, "text": text})
            }
            Self::TextDelta { path, text } => {
                json!({"type": "model_text_delta", "path": path, "text": text})
            }
            Self::Spawned { path, node, parent } => {
                json!({"type": "spawned", "path": path, "node": node, "parent": parent})
            }
            Self::Completed { path, node } => {
                json!({"type": "completed", "path": path, "node": node})
            }
            Self::Failed { path, node, error } => {
                json!({"type": "failed", "path": path, "node": node, "error": error})
            }
            Self::AgentTurn {
                path,
                node,
                run,
                run_dir,
                iterations,
                status,
            } => json!({"type": "agent_turn", "path": path, "node": node, "run": run,
                "runDir": run_dir, "iterations": iterations, "status": status}),
            Self::Waiting { path, node, reason } => {
                json!({"type": "waiting", "path": path, "node": node, "reason": reason})
            }
            Self::Compacted {
                path,
                node,
                answers,
                strategy,
                window,
                tokens_before,
                tokens_after,
            } => json!({
                "type": "compaction", "path": path, "node": node, "answers": answers,
                "strategy": strategy, "window": window, "tokensBefore": tokens_before,
                "tokensAfter": tokens_after
            }),
        }
    }
}
