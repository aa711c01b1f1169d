//! Keeping the API keys in use out of everything a run writes or prints.
//!
//! The engine scrubs text where it leaves the process: every journal event passes through
//! [`scrub_event`] before it is appended (so the journal, and the context rebuilt from it, never holds
//! a key), every progress report through [`RedactingObserver`], and the `io/` records, hook payloads,
//! `engine.log` and the interaction request through the same [`Redactor`]. What is *executed* is not
//! changed: a tool the model calls with the key as an argument receives the real value; only the record
//! of the call shows `[REDACTED]`.

use llm::Redactor;

use crate::engine::{Observer, Progress};
use crate::events::Event;

fn scrub(redactor: &Redactor, text: &mut String) {
    if let std::borrow::Cow::Owned(clean) = redactor.redact(text) {
        *text = clean;
    }
}

/// `event` with every secret of `redactor` replaced in its texts and values.
pub fn scrub_event(redactor: &Redactor, mut event: Event) -> Event {
    if redactor.is_empty() {
        return event;
    }
    match &mut event {
        Event::RunStart { task, .. } => scrub(redactor, task),
        Event::UserMessage { content } | Event::SystemMessage { content, .. } => {
            scrub(redactor, content)
        }
        Event::Compaction { summary, .. } => scrub(redactor, summary),
        Event::Thought {
            content,
            tool_calls,
            ..
        } => {
            scrub(redactor, content);
            for call in tool_calls.iter_mut().flatten() {
                // The model chooses ids and names as freely as arguments.
                scrub(redactor, &mut call.id);
                scrub(redactor, &mut call.function.name);
                scrub(redactor, &mut call.function.arguments);
            }
        }
        Event::ActionRequest {
            action_id,
            tool_name,
            tool_args,
            resolved_command,
        } => {
            scrub(redactor, action_id);
            scrub(redactor, tool_name);
            redactor.redact_json(tool_args);
            scrub(redactor, resolved_command);
        }
        Event::ActionResult {
            action_id,
            observation_content,
            execution_ref,
            ..
        } => {
            scrub(redactor, action_id);
            scrub(redactor, observation_content);
            scrub(redactor, execution_ref);
        }
        Event::HookExecutionAudit { .. } | Event::RunEnd { .. } => {}
    }
    event
}

/// `progress` with every secret of `redactor` replaced.
pub fn scrub_progress(redactor: &Redactor, mut progress: Progress) -> Progress {
    if redactor.is_empty() {
        return progress;
    }
    match &mut progress {
        Progress::Thought(text)
        | Progress::ToolNotFound(text)
        | Progress::ToolError(text)
        | Progress::Question(text)
        | Progress::Paused(text)
        | Progress::TextDelta(text)
        | Progress::Note(text) => scrub(redactor, text),
        Progress::Compacted { note, .. } => scrub(redactor, note),
        Progress::ToolCall { id, name, args } => {
            scrub(redactor, id);
            scrub(redactor, name);
            redactor.redact_json(args);
        }
        Progress::ToolDone { id, preview, .. } => {
            scrub(redactor, id);
            if let Some(p) = preview {
                scrub(redactor, p);
            }
        }
        Progress::Hook { problems, .. } => problems.iter_mut().for_each(|p| scrub(redactor, p)),
        Progress::Iteration { .. }
        | Progress::Thinking
        | Progress::Executing(_)
        | Progress::Waiting { .. } => {}
    }
    progress
}

/// An observer that scrubs every report before passing it on.
pub struct RedactingObserver<'a> {
    inner: &'a mut dyn Observer,
    redactor: Redactor,
}

impl<'a> RedactingObserver<'a> {
    /// Wraps `inner`.
    pub fn new(inner: &'a mut dyn Observer, redactor: Redactor) -> Self {
        Self { inner, redactor }
    }
}

impl Observer for RedactingObserver<'_> {
    fn progress(&mut self, event: Progress) {
        self.inner.progress(scrub_progress(&self.redactor, event));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{FunctionRecord, ToolCallRecord};
    use serde_json::json;

    #[test]
    fn every_text_of_an_event_is_scrubbed() {
        let r = Redactor::new(["sk-secret-1"]);
        let thought = scrub_event(
            &r,
            Event::Thought {
                content: "use sk-secret-1".into(),
                llm_invocation_ref: "id".into(),
                tool_calls: Some(vec![ToolCallRecord {
                    id: "call-sk-secret-1".into(),
                    kind: "function".into(),
                    function: FunctionRecord {
                        name: "sk-secret-1".into(),
                        arguments: r#"{"k":"sk-secret-1"}"#.into(),
                    },
                }]),
                usage: None,
            },
        );
        let text = serde_json::to_string(&thought).unwrap();
        assert!(
            !text.contains("sk-secret-1") && text.contains("[REDACTED]"),
            "{text}"
        );
        let request = scrub_event(
            &r,
            Event::ActionRequest {
                action_id: "c".into(),
                tool_name: "t".into(),
                tool_args: json!({"k": ["sk-secret-1"]}),
                resolved_command: "t sk-secret-1".into(),
            },
        );
        assert_eq!(
            request,
            Event::ActionRequest {
                action_id: "c".into(),
                tool_name: "t".into(),
                tool_args: json!({"k": ["[REDACTED]"]}),
                resolved_command: "t [REDACTED]".into(),
            }
        );
    }

    #[test]
    fn progress_is_scrubbed() {
        let r = Redactor::new(["sk-secret-1"]);
        let p = scrub_progress(
            &r,
            Progress::ToolCall {
                id: "c1".into(),
                name: "t".into(),
                args: json!({"a": "x sk-secret-1"}),
            },
        );
        assert_eq!(
            p,
            Progress::ToolCall {
                id: "c1".into(),
                name: "t".into(),
                args: json!({"a": "x [REDACTED]"}),
            }
        );
    }
}
