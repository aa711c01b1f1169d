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
        self.records = Records::of(
            self.metadata.boot_id.as_deref(),
            process::group::boot_id().as_deref(),
        );
        // Sessions stay alive while a run waits for an answer; whatever else the previous process
        // left running (it crashed, or was killed) is stopped.
        // A run paused between turns as asked keeps them too (unless its process died since: then
        // the run's status says RUNNING, not the pause's INTERRUPTED).
        let paused = self.metadata.extra.remove(super::PAUSED).is_some()
            && self.metadata.status == RunStatus::Interrupted
            && self.setup.recovered.is_none();
        if self.metadata.status != RunStatus::WaitingForInput && !paused {
            self.stop_sessions();
        }
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
                self.records = Records::Unreadable;
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
        // Calls run one at a time: the tool left running belongs to the one call that started
        // without a result.
        let in_flight = open_calls(&self.typed)
            .into_iter()
            .find(|c| c.started)
            .map(|c| c.call.id);
        match (&record.kind, record.action_id.as_deref()) {
            (ChildKind::Tool, Some(id)) if in_flight.as_deref() == Some(id) => {
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
            None => match self.records.why_unknown() {
                None => (
                    ActionStatus::Error,
                    format!(
                        "=== INTERRUPTED: the run stopped before {name} started: it did not run. ==="
                    ),
                ),
                Some(why) => (
                    ActionStatus::Failed,
                    format!(
                        "=== INTERRUPTED: the run stopped while {name} was running (interrupted or \
                         crashed; {why}); it may or may not have taken effect. Check before running \
                         it again. ==="
                    ),
                ),
            },
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

    /// The result of call `id` of `name`, which started but never finished and whose work is done by
    /// a process delta does not record per call (a session's shell): it may have taken effect.
    fn settle_uncertain(&mut self, id: &str, name: &str) -> Result<(), EngineError> {
        self.log(&format!("Settling interrupted call {id} ({name})"));
        self.append(Event::ActionResult {
            action_id: id.to_string(),
            status: ActionStatus::Failed,
            observation_content: format!(
                "=== INTERRUPTED: the run stopped while {name} was running (interrupted or crashed); \
                 it may or may not have taken effect. Check before running it again. ==="
            ),
            execution_ref: String::new(),
        })
    }

    /// Gives every call of the last model answer a result, in order: a call that started but never
    /// finished (the run was interrupted or crashed) gets a result saying so; a pending `ask_human`
    /// takes its answer from `interaction/response.txt` (or the terminal with `-i`), or the run keeps
    /// waiting; an agent tool's child run is driven on; a call that never started runs now.
    pub(super) fn settle(&mut self) -> Result<Option<RunOutcome>, EngineError> {
        let open = open_calls(&self.typed);
        if open.is_empty() {
            return Ok(None);
        }
        for OpenCall { call, started } in open {
            let raw = &call.function.arguments;
            let args =
                serde_json::from_str::<Value>(raw).unwrap_or_else(|_| Value::String(raw.clone()));
            let name = call.function.name.as_str();
            if started {
                // A started call is settled by what its name runs: a question takes its answer;
                // anything else was cut short.
                let stop = match self.tools.get(name) {
                    Some(Handler::AskHuman) => self.answer_pending(&call.id, &args)?,
                    // A child run goes on from where it stopped.
                    Some(Handler::Agent(_)) => self.resume_agent_tool(&call.id, name, &args)?,
                    // Its effect lives in the host, which has not seen a result: made again.
                    Some(Handler::Host) => self.resume_host_tool(&call.id, name, &args)?,
                    Some(Handler::Shell(_)) | None => {
                        self.settle_interrupted(&call.id, name)?;
                        None
                    }
                    Some(Handler::Session(_) | Handler::Mcp(_)) => {
                        self.settle_uncertain(&call.id, name)?;
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

/// Whether the process records (`process.json`) the previous process wrote are all here, so that a
/// started call without a record is known never to have started its program; and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Records {
    /// The previous process ran in this boot, in this working copy: every record it wrote is here.
    Complete,
    /// The machine has restarted since (records are not flushed to disk).
    OtherBoot,
    /// The run's metadata names no boot: it was last worked on in another working copy (a fleet
    /// run taken over elsewhere), or by a delta that did not record it.
    NotHere,
    /// This system does not say which boot it is in.
    BootUnknown,
    /// The record is unreadable (cut short by a power loss, say).
    Unreadable,
}

impl Records {
    /// From the boot the run's metadata names and the current one.
    pub(crate) fn of(recorded: Option<&str>, current: Option<&str>) -> Self {
        match (recorded, current) {
            (_, None) => Self::BootUnknown,
            (None, Some(_)) => Self::NotHere,
            (Some(r), Some(c)) if r == c => Self::Complete,
            (Some(_), Some(_)) => Self::OtherBoot,
        }
    }

    /// Why a missing record does not prove that a call never started (`None`: it does).
    fn why_unknown(self) -> Option<&'static str> {
        match self {
            Self::Complete => None,
            Self::OtherBoot => Some("the machine has restarted since"),
            Self::NotHere => Some(
                "its process records are not in this working copy: the run was last worked on in \
                 another one, or by a delta that did not record them",
            ),
            Self::BootUnknown => Some("this system does not tell whether it has restarted since"),
            Self::Unreadable => Some("its process record was unreadable"),
        }
    }
}

/// A call of the model's last answer that has no result yet.
#[derive(Debug, Clone, PartialEq)]
struct OpenCall {
    /// The call.
    call: ToolCallRecord,
    /// Its `ACTION_REQUEST` was journaled.
    started: bool,
}

/// The calls of the last model answer in `typed` that have no result yet, in order.
///
/// Calls are matched to their requests and results by position, not by id alone: they run one
/// after another, so the k-th result after the answer is its k-th call's. Two calls with the same
/// id (some servers send them) are told apart that way.
fn open_calls(typed: &[Event]) -> Vec<OpenCall> {
    let Some(last) = typed
        .iter()
        .rposition(|e| matches!(e, Event::Thought { .. }))
    else {
        return Vec::new();
    };
    let Event::Thought {
        tool_calls: Some(calls),
        ..
    } = &typed[last]
    else {
        return Vec::new();
    };
    let progress = call_progress(calls, &typed[last + 1..]);
    calls
        .iter()
        .skip(progress.settled)
        .enumerate()
        .map(|(i, call)| OpenCall {
            call: call.clone(),
            started: i == 0 && progress.next_started,
        })
        .collect()
}

/// How far the calls of one model answer got in the events that follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CallProgress {
    /// How many calls, from the first, have their result.
    pub(crate) settled: usize,
    /// The first call without a result has its `ACTION_REQUEST`.
    pub(crate) next_started: bool,
    /// Where the last request or result of a call is among the events.
    pub(crate) last_seen: Option<usize>,
}

/// Follows `calls` through the `after` events of their answer, matching requests and results to
/// calls by position (see [`open_calls`]).
pub(crate) fn call_progress<'a>(
    calls: &[ToolCallRecord],
    after: impl IntoIterator<Item = &'a Event>,
) -> CallProgress {
    let mut progress = CallProgress::default();
    for (index, event) in after.into_iter().enumerate() {
        let Some(call) = calls.get(progress.settled) else {
            break;
        };
        match event {
            Event::ActionRequest { action_id, .. } if *action_id == call.id => {
                progress.next_started = true;
                progress.last_seen = Some(index);
            }
            Event::ActionResult { action_id, .. } if *action_id == call.id => {
                progress.settled += 1;
                progress.next_started = false;
                progress.last_seen = Some(index);
            }
            _ => {}
        }
    }
    progress
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{ActionStatus, FunctionRecord};

    fn thought(ids: &[&str]) -> Event {
        Event::Thought {
            content: String::new(),
            llm_invocation_ref: "i".into(),
            tool_calls: Some(
                ids.iter()
                    .map(|id| ToolCallRecord {
                        id: (*id).into(),
                        kind: "function".into(),
                        function: FunctionRecord {
                            name: "t".into(),
                            arguments: "{}".into(),
                        },
                    })
                    .collect(),
            ),
            usage: None,
        }
    }

    fn request(id: &str) -> Event {
        Event::ActionRequest {
            action_id: id.into(),
            tool_name: "t".into(),
            tool_args: serde_json::json!({}),
            resolved_command: "t".into(),
        }
    }

    fn result(id: &str) -> Event {
        Event::ActionResult {
            action_id: id.into(),
            status: ActionStatus::Success,
            observation_content: String::new(),
            execution_ref: String::new(),
        }
    }

    fn open(events: &[Event]) -> Vec<(String, bool)> {
        open_calls(events)
            .into_iter()
            .map(|c| (c.call.id, c.started))
            .collect()
    }

    #[test]
    fn calls_with_the_same_id_are_settled_by_position() {
        let two = thought(&["dup", "dup"]);
        let s = |id: &str| (id.to_string(), true);
        let n = |id: &str| (id.to_string(), false);
        assert_eq!(open(std::slice::from_ref(&two)), vec![n("dup"), n("dup")]);
        assert_eq!(
            open(&[two.clone(), request("dup")]),
            vec![s("dup"), n("dup")]
        );
        assert_eq!(
            open(&[two.clone(), request("dup"), result("dup")]),
            vec![n("dup")]
        );
        assert_eq!(
            open(&[two.clone(), request("dup"), result("dup"), request("dup")]),
            vec![s("dup")]
        );
        assert_eq!(
            open(&[
                two,
                request("dup"),
                result("dup"),
                request("dup"),
                result("dup")
            ]),
            vec![]
        );
        let mixed = thought(&["a", "b", "a"]);
        assert_eq!(
            open(&[mixed, request("a"), result("a"), result("b")]),
            vec![n("a")],
            "a call without a request (an unknown tool) has a result all the same"
        );
    }
}
