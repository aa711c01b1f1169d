//! Settling: before a resumed run says anything new, every call of the model's last answer gets its
//! result, in order.
//!
//! First, a process group the previous process left recorded in `process.json` (a tool, hook or
//! generator that was running when it died) is stopped if it still runs: SIGTERM, a grace period,
//! SIGKILL. An interrupted tool call's result then says whether its tool was still running and was
//! stopped, had already ended, or never started (no record: its program was never let go). Records
//! are not flushed to disk, so "no record" proves "never started" only when the previous process ran
//! in the same boot (its metadata names the boot); otherwise the result says the machine restarted.

use serde_json::Value;

use super::registry::Handler;
use super::{Engine, EngineError, Observer, Progress, RunOutcome};
use crate::events::{ActionStatus, Event, Level, ToolCallRecord};
use crate::metadata::RunStatus;
use crate::process::{self, record::ChildKind};
use store::StoreError;

impl Engine<'_> {
    /// Marks a resumed run as running again, by this process.
    pub(super) fn begin_resume(&mut self) -> Result<(), EngineError> {
        // The boot recorded by the process that worked on the run last; it is replaced once the calls
        // that process left open are settled (see `run_loop`).
        let boot = process::group::boot_id();
        self.records_complete = boot.is_some() && self.metadata.boot_id == boot;
        self.metadata.status = RunStatus::Running;
        self.metadata.end_time = None;
        self.metadata.pid = std::process::id();
        self.metadata.hostname = store::hostname();
        self.metadata.process_name = crate::metadata::process_name();
        self.save_metadata()?;
        self.log(&format!("Resuming run {}", self.setup.run.run_id));
        if let Some(note) = self.setup.recovered.clone() {
            self.system(Level::Warn, &note)?;
        }
        self.stop_leftover()
    }

    /// Stops what the previous process left running, as recorded in `process.json`. A hook or
    /// generator is noted in the journal; a tool is kept for its call's result (its record stays until
    /// that result is journaled).
    pub(super) fn stop_leftover(&mut self) -> Result<(), EngineError> {
        let recorder = self.recorder();
        let leftover = match process::record::stop_recorded(&recorder, process::STOP_GRACE) {
            Ok(Some(leftover)) => leftover,
            Ok(None) => return Ok(()),
            Err(e @ StoreError::Parse { .. }) => {
                // Cut short by a power loss, say. Without it nothing can be stopped or known.
                self.records_complete = false;
                self.system(
                    Level::Warn,
                    &format!("Ignored an unreadable process record ({e}); a process it named could not be checked"),
                )?;
                self.clear_record();
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        let record = &leftover.record;
        self.log(&format!(
            "Process group {} of the previous process ({} {}): {}",
            record.group.pgid,
            record.kind.as_str(),
            record.name,
            leftover.describe()
        ));
        let settled = |engine: &Self, id: &str| {
            engine
                .typed
                .iter()
                .any(|e| matches!(e, Event::ActionResult { action_id, .. } if action_id == id))
        };
        match (&record.kind, record.action_id.as_deref()) {
            (ChildKind::Tool, Some(id)) if !settled(self, id) => {
                self.leftover = Some(leftover);
                return Ok(());
            }
            (ChildKind::Tool, _) => {}
            (kind, _) => {
                let what = match kind {
                    ChildKind::Hook => format!("The {} hook", record.name),
                    _ => format!("The generator of context source '{}'", record.name),
                };
                self.system(
                    Level::Warn,
                    &format!(
                        "{what} left by the previous process {}",
                        leftover.describe()
                    ),
                )?;
            }
        }
        self.clear_record();
        Ok(())
    }

    /// The result of call `id` of tool `name`, which started but never finished.
    fn settle_interrupted(&mut self, id: &str, name: &str) -> Result<(), EngineError> {
        self.log(&format!("Settling interrupted call {id} ({name})"));
        let leftover = self
            .leftover
            .take_if(|l| l.record.action_id.as_deref() == Some(id));
        let (status, observation_content) = match &leftover {
            Some(l) => (
                ActionStatus::Failed,
                format!(
                    "=== INTERRUPTED: the run stopped while {name} was running (interrupted or crashed). \
                     When the run was resumed, {name} {}. It may or may not have taken effect{}. Check \
                     before running it again. ===",
                    l.describe(),
                    if l.was_running() {
                        ", possibly in part"
                    } else {
                        ""
                    }
                ),
            ),
            // The record is written before a tool's program is let go, so without one it never ran:
            // certain when the previous process ran in this boot (no record was lost to a restart).
            None if self.records_complete => (
                ActionStatus::Error,
                format!(
                    "=== INTERRUPTED: the run stopped before {name} started: it did not run. ==="
                ),
            ),
            None => (
                ActionStatus::Failed,
                format!(
                    "=== INTERRUPTED: the run stopped while {name} was running (interrupted or crashed; \
                     the machine has restarted since, or the run was started by an older delta); it may \
                     or may not have taken effect. Check before running it again. ==="
                ),
            ),
        };
        self.append(Event::ActionResult {
            action_id: id.to_string(),
            status,
            observation_content,
            execution_ref: String::new(),
        })?;
        if leftover.is_some() {
            self.clear_record();
        }
        Ok(())
    }

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
            if started {
                // A started call is settled by what its name runs: a question takes its answer;
                // anything else was cut short.
                let stop = match self.tools.get(name) {
                    Some(Handler::AskHuman) => self.answer_pending(&call.id, &args)?,
                    Some(Handler::Shell(_)) | None => {
                        self.settle_interrupted(&call.id, name)?;
                        None
                    }
                };
                if let Some(stop) = stop {
                    return Ok(Some(stop));
                }
            } else {
                self.observer.progress(Progress::Executing(1));
                if let Some(stop) = self.act(&call.id, name, args)? {
                    return Ok(Some(stop));
                }
            }
        }
        self.save_progress()?;
        Ok(None)
    }
}
