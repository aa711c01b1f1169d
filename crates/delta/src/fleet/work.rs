//! Working on one run of the store: the working copy, the lease kept alive, the ordinary runner,
//! and what the store keeps when the process lets the run go.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use store::{Flush, Lease, RunStore, StoreError};

use super::copy::{Choice, Held};
use super::upstream::{Loss, StoreUpstream};
use super::{
    ERROR, FleetError, METADATA, SUBMISSION, Submission, WAITING, Waiting, copy, get_json,
};
use crate::agent;
use crate::engine::{HumanInput, Observer};
use crate::metadata::{RunMetadata, RunStatus};
use crate::runner::{
    Continue, Finished, Host, NewRun, Options, Request, Runner, RunnerError, WorkspaceRef,
};

/// Why the run is worked on.
#[derive(Debug, Clone)]
pub enum Ask {
    /// A worker claimed it from the queue: start it, or resume it after its process died.
    Queued,
    /// `delta continue --store`: go on with it as `delta continue` does with a local run.
    Continue {
        /// The message.
        message: Option<String>,
        /// A file whose content is added to the message.
        with_file: Option<PathBuf>,
    },
}

/// How this process works on runs of the store.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where working copies that no workspace was given for are made.
    pub dir: PathBuf,
    /// How often the lease is renewed (a third of its time to live).
    pub renew: Duration,
    /// Raised when the process is asked to stop: the run is interrupted and put back in the queue.
    pub shutdown: Arc<AtomicBool>,
}

/// The caller's side of the runner.
pub struct Parts<'a> {
    /// Settings of the run (its `interrupt` is raised when the lease is lost).
    pub options: Options,
    /// Receives the engine's progress.
    pub observer: &'a mut dyn Observer,
    /// Notices and the model connection.
    pub host: &'a mut dyn Host,
    /// Answers `ask_human` when `options.interactive` is set.
    pub human: Option<&'a mut dyn HumanInput>,
}

/// How working on a run ended.
pub enum Worked {
    /// The run stopped (completed, failed, waiting or interrupted); the store has its record.
    Stopped {
        /// The run, for the report.
        finished: Box<Finished>,
        /// It was put back in the queue (interrupted by a stopping worker).
        requeued: bool,
    },
    /// The run had already stopped (its journal ended, or it waits for an answer), though it was
    /// still queued (the worker that stopped it died before taking it out): it left the queue,
    /// quietly, without being worked on; its metadata was brought in line with its journal.
    Settled {
        /// The run.
        run_id: String,
        /// How it stands.
        status: RunStatus,
    },
    /// The run cannot be worked on yet (its workspace is held): it waits in the queue, behind the
    /// runs queued now, with the reason in the store (`waiting.json`).
    Waiting {
        /// The run.
        run_id: String,
        /// Why.
        reason: String,
    },
    /// The run was given up: nothing more was written.
    Lost {
        /// The run.
        run_id: String,
        /// Why.
        why: Loss,
    },
}

/// Works on the run of `lease` until it stops, then gives the lease up.
///
/// A queued run that had already stopped leaves the queue quietly ([`Worked::Settled`]); one whose
/// workspace another process holds waits its turn ([`Worked::Waiting`]). A run that cannot be
/// worked on (its agent does not load, its working copy cannot be made) leaves the queue with the
/// error kept in the store (`error.json`).
pub fn work(
    shared: &Arc<dyn RunStore>,
    mut lease: Lease,
    ask: Ask,
    settings: &Settings,
    parts: Parts<'_>,
) -> Result<Worked, FleetError> {
    let store: &dyn RunStore = &**shared;
    let clock = parts.options.clock;
    let run_id = lease.run().to_string();
    // Only a run taken from the queue leaves it on an error, or waits in it; a caller's refused
    // continue does not.
    let from_queue = matches!(ask, Ask::Queued);
    if from_queue && let Some(status) = settled(store, &mut lease)? {
        return Ok(Worked::Settled { run_id, status });
    }
    let (request, submission) = match prepare(store, &mut lease, ask, &settings.dir, clock) {
        Ok(Prepared::Ready(request, submission)) => (request, submission),
        Ok(Prepared::Held(held)) if from_queue => {
            let reason = held.reason();
            wait(store, &mut lease, &reason)?;
            return Ok(Worked::Waiting { run_id, reason });
        }
        Ok(Prepared::Held(held)) => {
            return Err(FleetError::Store(StoreError::Busy {
                path: held.lock,
                holder: held.holder,
            }));
        }
        Err(e) => {
            if from_queue {
                give_up(store, &mut lease, &e);
            }
            return Err(e);
        }
    };
    if from_queue {
        stop_waiting(store, &mut lease)?;
    }
    let upstream = StoreUpstream::new(Arc::clone(shared), lease);
    let Parts {
        mut options,
        observer,
        host,
        human,
    } = parts;
    let renewer = upstream.keep_alive(
        settings.renew,
        Arc::clone(&settings.shutdown),
        Arc::clone(&options.interrupt),
    );
    options.upstream = Some(upstream.clone());
    options.max_iterations = options.max_iterations.or(submission.max_iterations);
    options.model = options.model.take().or_else(|| submission.model.clone());
    let runner = Runner {
        options,
        observer,
        human,
        host,
        tools: None,
    };
    let result = runner.run(request);
    drop(renewer);
    let outcome = conclude(&upstream, result, settings, from_queue);
    upstream.release();
    outcome
}

/// How a queued run stands when its journal (in the store) says it has already stopped: ended
/// (RUN_END), or paused on a question. It is then taken out of the queue, and its metadata brought
/// in line with the journal; `None` when it has work left.
fn settled(store: &dyn RunStore, lease: &mut Lease) -> Result<Option<RunStatus>, FleetError> {
    let run = lease.run().to_string();
    // A run without metadata has not begun (most claims): nothing more to read.
    let Some(document) = store.get(&run, METADATA)? else {
        return Ok(None);
    };
    // Metadata that cannot be read is rebuilt by whoever works on the run next.
    let metadata = serde_json::from_slice::<RunMetadata>(&document).ok();
    let tail = store.read_tail(&run, super::TAIL_LINES)?;
    let ending = crate::tail::ending_of(tail.entries.iter().rev().map(|e| e.json.as_bytes()));
    let status = match (&ending, &metadata) {
        (Some(end), _) => RunStatus::from(end.status),
        (None, Some(m)) if m.status == RunStatus::WaitingForInput => m.status,
        (None, _) => return Ok(None),
    };
    if let (Some(end), Some(mut metadata)) = (ending, metadata)
        && metadata.status != status
    {
        metadata.status = status;
        metadata.end_time = Some(end.timestamp);
        super::put_json(store, lease, METADATA, &metadata)?;
    }
    store.set_queued(lease, false)?;
    Ok(Some(status))
}

/// Keeps the run in the queue behind the runs queued now, with why it waits (`waiting.json`).
fn wait(store: &dyn RunStore, lease: &mut Lease, reason: &str) -> Result<(), FleetError> {
    let note = Waiting {
        reason: Some(reason.to_string()),
        since: Some(crate::events::timestamp(jiff::Timestamp::now())),
    };
    super::put_json(store, lease, WAITING, &note)?;
    store.defer(lease)?;
    Ok(())
}

/// Clears the reason a run waited for, once it no longer does.
fn stop_waiting(store: &dyn RunStore, lease: &mut Lease) -> Result<(), FleetError> {
    let waited = get_json::<Waiting>(store, lease.run(), WAITING)
        .ok()
        .flatten()
        .is_some_and(|w| w.reason.is_some());
    if waited {
        super::put_json(store, lease, WAITING, &Waiting::default())?;
    }
    Ok(())
}

/// `delta continue --store`: takes the run's lease (refused while another process holds it) and
/// works on the run here, as `delta continue` does with a run of a workspace.
pub fn continue_run(
    store: &Arc<dyn RunStore>,
    run_id: &str,
    ask: Ask,
    settings: &Settings,
    parts: Parts<'_>,
) -> Result<Worked, FleetError> {
    crate::workspace::validate_run_id(run_id)?;
    let holder = store::LockHolder::current(parts.options.clock.now(), Some("delta continue"));
    let lease = store.lease(run_id, &holder)?;
    work(store, lease, ask, settings, parts)
}

/// What a run needs before the runner starts.
enum Prepared {
    /// The request for the runner, and the submission.
    Ready(Request, Submission),
    /// Its workspace is held by another process.
    Held(Held),
}

/// Reads the submission, rebuilds the working copy and says what the runner is asked.
fn prepare(
    store: &dyn RunStore,
    lease: &mut Lease,
    ask: Ask,
    dir: &std::path::Path,
    clock: store::Clock,
) -> Result<Prepared, FleetError> {
    let run_id = lease.run().to_string();
    let submission: Submission = get_json(store, &run_id, SUBMISSION)?
        .ok_or_else(|| FleetError::NotSubmitted(run_id.clone()))?;
    let mut copy = match copy::choose(store, lease, &submission, dir, clock)? {
        Choice::Copy(copy) => copy,
        Choice::Held(held) => return Ok(Prepared::Held(held)),
    };
    let begun = copy::materialize(store, lease, &copy, &submission, clock)?;
    // The runner takes the workspace's lock itself; should another process take it in between,
    // the run waits its turn.
    drop(copy.lock.take());
    let request = if begun {
        let (message, with_file) = match ask {
            Ask::Queued => (None, None),
            Ask::Continue { message, with_file } => (message, with_file),
        };
        Request::Continue(Continue {
            workspace: WorkspaceRef::Dir(copy.workspace),
            run_id: Some(run_id),
            message,
            with_file,
            fork_at: None,
        })
    } else {
        let agent = agent::load(&submission.agent)
            .map_err(|e| FleetError::Runner(Box::new(RunnerError::Agent(e))))?;
        Request::Run(Box::new(NewRun {
            agent,
            workspace: copy.workspace,
            workspace_name: None,
            next_workspace: false,
            auto_resume: false,
            message: submission.task.clone(),
            run_id: Some(run_id),
        }))
    };
    Ok(Prepared::Ready(request, submission))
}

/// What the store keeps of how the runner stopped.
fn conclude(
    upstream: &StoreUpstream,
    result: Result<Finished, RunnerError>,
    settings: &Settings,
    from_queue: bool,
) -> Result<Worked, FleetError> {
    if let Some(why) = upstream.loss() {
        return Ok(Worked::Lost {
            run_id: upstream.run_id(),
            why,
        });
    }
    match result {
        Ok(finished) => {
            let requeued = finished.outcome.status == RunStatus::Interrupted
                && settings.shutdown.load(Ordering::SeqCst);
            let run = finished.run.clone();
            upstream.with_lease(|store, lease| {
                copy::upload_io(store, lease, &run).map_err(into_store)?;
                store.set_queued(lease, requeued)
            })?;
            Ok(Worked::Stopped {
                finished: Box::new(finished),
                requeued,
            })
        }
        Err(e) => {
            let e = FleetError::Runner(Box::new(e));
            if from_queue && e.is_busy() {
                // Another process took the workspace between the choice and the start: wait.
                let reason = format!("waits for its workspace: {e}");
                upstream
                    .with_lease(|store, lease| wait(store, lease, &reason).map_err(into_store))?;
                return Ok(Worked::Waiting {
                    run_id: upstream.run_id(),
                    reason,
                });
            }
            if from_queue {
                let _ = upstream.with_lease(|store, lease| {
                    if e.is_transient() {
                        // The store was out of reach for a moment: the run goes back in the queue
                        // for the next claim (this worker's, or another's).
                        store.set_queued(lease, true)
                    } else {
                        give_up(store, lease, &e);
                        Ok(())
                    }
                });
            }
            Err(e)
        }
    }
}

/// Takes a run that cannot be worked on out of the queue, with the reason for whoever looks
/// (`error.json`); a busy workspace only delays it. Best effort: the error is reported anyway.
fn give_up(store: &dyn RunStore, lease: &mut Lease, error: &FleetError) {
    if error.is_busy() {
        return;
    }
    let note = serde_json::json!({ "error": error.to_string(), "hint": error.hint() });
    let _ = store.put(lease, ERROR, note.to_string().as_bytes(), Flush::Durable);
    let _ = store.set_queued(lease, false);
}

/// A fleet error inside a store operation, as a store error.
fn into_store(e: FleetError) -> StoreError {
    match e {
        FleetError::Store(e) => e,
        other => StoreError::Backend {
            action: "keep the run's io/ records",
            source: other.to_string().into(),
        },
    }
}
