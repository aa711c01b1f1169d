//! `delta worker`: slots that claim queued runs from the store and work on them, each slot on a
//! connection of its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use store::LockHolder;
use store_pg::PgStore;

use super::work::{Ask, Parts, Settings, Worked, work};
use super::{FleetError, NAMESPACE, open};
use crate::engine::Observer;
use crate::metadata::RunStatus;
use crate::runner::{Host, Options};

/// How a worker works.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The store (`postgres://…`).
    pub url: String,
    /// Runs worked on at once.
    pub concurrency: usize,
    /// A lease's time to live without renewal: a run whose worker died is taken over after it.
    pub lease: Duration,
    /// How long an idle slot waits before looking at the queue again.
    pub poll: Duration,
    /// Stop once no run of the store is queued (none waiting, none being worked on).
    pub exit_when_done: bool,
    /// Working copies and stopping.
    pub settings: Settings,
}

/// What a worker tells its caller as it goes.
#[derive(Debug)]
pub enum WorkerEvent<'a> {
    /// A slot claimed a run.
    Claimed {
        /// The slot.
        slot: usize,
        /// The run.
        run_id: &'a str,
        /// The lease's epoch.
        epoch: u64,
        /// The previous holder whose lease ran out (a takeover).
        stale: Option<&'a LockHolder>,
    },
    /// A run stopped.
    Stopped {
        /// The slot.
        slot: usize,
        /// The run.
        run_id: &'a str,
        /// How.
        status: RunStatus,
        /// Put back in the queue (the worker is stopping).
        requeued: bool,
    },
    /// Another process took a run over: this slot gave it up.
    Lost {
        /// The slot.
        slot: usize,
        /// The run.
        run_id: &'a str,
    },
    /// Working on a run, or claiming one, failed.
    Failed {
        /// The slot.
        slot: usize,
        /// The run, when one was claimed.
        run_id: Option<&'a str>,
        /// Why.
        error: &'a FleetError,
    },
}

/// What a worker needs from its program for each run: settings, a host, an observer.
pub trait Crew: Sync {
    /// The settings of one run (a fresh `interrupt` flag each).
    fn options(&self) -> Options;
    /// The host of one run (notices, the model connection).
    fn host(&self) -> Box<dyn Host + '_>;
    /// The observer of one run.
    fn observer(&self) -> Box<dyn Observer + '_>;
    /// Something happened.
    fn event(&self, event: WorkerEvent<'_>);
}

/// What a worker did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Runs that stopped (any status).
    pub stopped: u64,
    /// Runs given up to another process.
    pub lost: u64,
    /// Runs that could not be worked on.
    pub failed: u64,
}

/// Runs the worker until `config.settings.shutdown` is raised (or, with `exit_when_done`, the
/// queue is empty).
pub fn run(config: &WorkerConfig, crew: &dyn Crew) -> Result<Tally, FleetError> {
    // Connect (and migrate) once before the slots start, so that a bad store fails at once.
    let probe = open(&config.url)?;
    drop(probe);
    let tallies = std::thread::scope(|scope| {
        let slots: Vec<_> = (0..config.concurrency.max(1))
            .map(|slot| scope.spawn(move || run_slot(slot, config, crew)))
            .collect();
        slots
            .into_iter()
            .map(|s| s.join().unwrap_or(Ok(Tally::default())))
            .collect::<Vec<_>>()
    });
    let mut total = Tally::default();
    for tally in tallies {
        let tally = tally?;
        total.stopped += tally.stopped;
        total.lost += tally.lost;
        total.failed += tally.failed;
    }
    Ok(total)
}

/// One slot: claim, work, repeat.
fn run_slot(slot: usize, config: &WorkerConfig, crew: &dyn Crew) -> Result<Tally, FleetError> {
    let connect =
        || PgStore::connect(&config.url, NAMESPACE).map(|store| store.with_lease(config.lease));
    let mut store = connect()?;
    let shutdown: &AtomicBool = &config.settings.shutdown;
    let mut tally = Tally::default();
    while !shutdown.load(Ordering::SeqCst) {
        let holder = LockHolder::current(jiff::Timestamp::now(), Some("delta worker"));
        let lease = match store.claim(&holder) {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                if config.exit_when_done && store.queued()? == 0 {
                    break;
                }
                pause(config.poll, shutdown);
                continue;
            }
            Err(e) => {
                let error = FleetError::Store(e);
                crew.event(WorkerEvent::Failed {
                    slot,
                    run_id: None,
                    error: &error,
                });
                tally.failed += 1;
                pause(config.poll, shutdown);
                // The connection may be what failed (the server restarted, the network broke).
                if let Ok(fresh) = connect() {
                    store = fresh;
                }
                continue;
            }
        };
        let run_id = lease.run().to_string();
        crew.event(WorkerEvent::Claimed {
            slot,
            run_id: &run_id,
            epoch: lease.epoch(),
            stale: lease.stale(),
        });
        let mut host = crew.host();
        let mut observer = crew.observer();
        let parts = Parts {
            options: crew.options(),
            observer: &mut *observer,
            host: &mut *host,
            human: None,
        };
        match work(&store, lease, Ask::Queued, &config.settings, parts) {
            Ok(Worked::Stopped { finished, requeued }) => {
                tally.stopped += 1;
                crew.event(WorkerEvent::Stopped {
                    slot,
                    run_id: &run_id,
                    status: finished.outcome.status,
                    requeued,
                });
            }
            Ok(Worked::Lost { .. }) => {
                tally.lost += 1;
                crew.event(WorkerEvent::Lost {
                    slot,
                    run_id: &run_id,
                });
            }
            Err(error) => {
                tally.failed += 1;
                crew.event(WorkerEvent::Failed {
                    slot,
                    run_id: Some(&run_id),
                    error: &error,
                });
                if error.is_busy() {
                    pause(config.poll, shutdown);
                } else if let Ok(fresh) = connect() {
                    store = fresh;
                }
            }
        }
    }
    Ok(tally)
}

/// Waits `period`, or less when the worker is stopping.
fn pause(period: Duration, shutdown: &AtomicBool) {
    let step = Duration::from_millis(20);
    let mut waited = Duration::ZERO;
    while waited < period && !shutdown.load(Ordering::SeqCst) {
        std::thread::sleep(step);
        waited += step;
    }
}
