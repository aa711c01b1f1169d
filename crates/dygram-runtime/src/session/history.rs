//! What a call did, as `history.jsonl` keeps it for the views of `exec show`: the model's text and
//! the tool calls of the call ([`ToolCallRecord`]), and the reading of the whole file.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::executor::ExecutionEvent;

use super::{Executions, HistoryEntry, SessionError};

/// The longest model text a history line keeps, in characters.
pub const TEXT_LIMIT: usize = 20_000;
/// The longest tool result a history line keeps, in characters.
pub const RESULT_LIMIT: usize = 4_000;

/// One tool call of a call, as `history.jsonl` keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRecord {
    /// The path that called it.
    pub path: String,
    /// The tool.
    pub name: String,
    /// The arguments the model gave.
    #[serde(default)]
    pub input: Value,
    /// What the tool answered (JSON text, at most [`RESULT_LIMIT`] characters).
    pub result: String,
    /// Whether it failed.
    #[serde(default)]
    pub is_error: bool,
}

/// `text` cut to `limit` characters, with `…` where it was cut.
fn at_most(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(limit).collect();
    cut.push('…');
    cut
}

/// The model's text of a call's events (the answers of several round trips joined by a blank
/// line), cut to [`TEXT_LIMIT`].
pub(super) fn text_of(events: &[ExecutionEvent]) -> Option<String> {
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ExecutionEvent::Output { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (!texts.is_empty()).then(|| at_most(&texts.join("\n\n"), TEXT_LIMIT))
}

/// The tool calls of a call's events, in order.
pub(super) fn calls_of(events: &[ExecutionEvent]) -> Vec<ToolCallRecord> {
    events
        .iter()
        .filter_map(|e| match e {
            ExecutionEvent::ToolCall {
                path,
                name,
                input,
                is_error,
                result,
                ..
            } => Some(ToolCallRecord {
                path: path.clone(),
                name: name.clone(),
                input: input.clone(),
                result: at_most(result, RESULT_LIMIT),
                is_error: *is_error,
            }),
            _ => None,
        })
        .collect()
}

impl Executions {
    /// The lines of an execution's `history.jsonl`, in order: one a call that advanced it (none
    /// when the file does not exist; a line that cannot be read, such as a torn last line, is
    /// left out).
    pub fn history(&self, id: &str) -> Result<Vec<HistoryEntry>, SessionError> {
        let path = self.dir(id)?.join("history.jsonl");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(super::io(&path, e)),
        };
        Ok(text
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn long_texts_and_results_are_cut_with_a_mark() {
        assert_eq!(at_most("abc", 3), "abc");
        assert_eq!(at_most("abcd", 3), "abc…");
        let events = [
            ExecutionEvent::Output {
                path: "p".into(),
                text: "one".into(),
            },
            ExecutionEvent::ToolCall {
                path: "p".into(),
                id: "c".into(),
                name: "t".into(),
                input: serde_json::json!({"a": 1}),
                is_error: true,
                result: "x".repeat(RESULT_LIMIT + 5),
            },
            ExecutionEvent::Output {
                path: "p".into(),
                text: "two".into(),
            },
        ];
        assert_eq!(text_of(&events).unwrap(), "one\n\ntwo");
        let calls = calls_of(&events);
        assert_eq!(calls.len(), 1);
        assert!(calls[0].is_error);
        assert_eq!(calls[0].result.chars().count(), RESULT_LIMIT + 1);
        assert_eq!(text_of(&events[1..2]), None);
    }
}
