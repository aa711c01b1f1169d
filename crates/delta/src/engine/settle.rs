//! Settling: before a resumed run says anything new, every call of the model's last answer gets its
//! result, in order.

use serde_json::Value;

use super::{ASK_HUMAN, Engine, EngineError, Progress, RunOutcome};
use crate::events::{ActionStatus, Event, ToolCallRecord};

impl Engine<'_> {
    /// Gives every call of the last model answer a result, in order: a call that started but never
    /// finished (the run was interrupted or crashed) gets a result saying so; a pending `ask_human`
    /// takes its answer from `interaction/response.txt` (or the terminal with `-i`), or the run keeps
    /// waiting; a call that never started runs now.
    pub(super) fn settle(&mut self) -> Result<Option<RunOutcome>, EngineError> {
        let Some(last) = self
            .typed
            .iter()
            .rposition(|e| matches!(e, Event::Thought { .. }))
        else {
            return Ok(None);
        };
        let Event::Thought {
            tool_calls: Some(calls),
            ..
        } = &self.typed[last]
        else {
            return Ok(None);
        };
        let later = &self.typed[last + 1..];
        let open: Vec<(ToolCallRecord, bool)> = calls
            .iter()
            .filter(|c| {
                !later.iter().any(
                    |e| matches!(e, Event::ActionResult { action_id, .. } if *action_id == c.id),
                )
            })
            .map(|c| {
                let started = later.iter().any(
                    |e| matches!(e, Event::ActionRequest { action_id, .. } if *action_id == c.id),
                );
                (c.clone(), started)
            })
            .collect();
        if open.is_empty() {
            return Ok(None);
        }
        for (call, started) in open {
            let raw = &call.function.arguments;
            let args =
                serde_json::from_str::<Value>(raw).unwrap_or_else(|_| Value::String(raw.clone()));
            let name = call.function.name.as_str();
            if started && name == ASK_HUMAN {
                if let Some(stop) = self.answer_pending(&call.id, &args)? {
                    return Ok(Some(stop));
                }
            } else if started {
                self.log(&format!("Settling interrupted call {} ({name})", call.id));
                self.append(Event::ActionResult {
                    action_id: call.id.clone(),
                    status: ActionStatus::Failed,
                    observation_content: format!(
                        "=== INTERRUPTED: the run stopped while {name} was running (interrupted or crashed); \
                         it may or may not have taken effect. Check before running it again. ==="
                    ),
                    execution_ref: String::new(),
                })?;
            } else {
                self.observer.progress(Progress::Executing(1));
                if let Some(stop) = self.act(&call.id, name, args)? {
                    return Ok(Some(stop));
                }
            }
        }
        self.metadata.iterations_completed += 1;
        self.save_progress()?;
        Ok(None)
    }
}
