//! `delta worker`: slots that claim queued runs from the store and work on them, each slot on a
//! connection of its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use std::sync::Arc;

use store::{Lease, LockHolder, RunStore};

use super::work::{Ask, Parts, Settings, Worked, work};
use super::{FleetError, open};
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
    /// A queued run had already stopped: it left the queue without being worked on.
    Settled {
        /// The slot.
        slot: usize,
        /// The run.
        run_id: &'a str,
        /// How it stands.
        status: RunStatus,
    },
    /// A run cannot be worked on yet: it waits in the queue.
    Waiting {
        /// The slot.
        slot: usize,
        /// The run.
        run_id: &'a str,
        /// Why.
        reason: &'a str,
    },
    /// This slot gave a run up: another process took it over, or its lease ran out unrenewed.
    Lost {
        /// The slot.
        slot: usize,
        /// The run.
        run_id: &'a str,
        /// Why.
        why: super::upstream::Loss,
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
    let mut slot = Slot {
        n: slot,
        config,
        crew,
        store: connect(config)?,
        tally: Tally::default(),
    };
    let shutdown: &AtomicBool = &config.settings.shutdown;
    while !shutdown.load(Ordering::SeqCst) {
        match slot.claim() {
            Next::Work(lease) => slot.work_on(*lease),
            Next::Wait => pause(config.poll, shutdown),
            Next::Done => break,
        }
    }
    Ok(slot.tally)
}

/// A slot's connection.
fn connect(config: &WorkerConfig) -> Result<Arc<dyn RunStore>, FleetError> {
    super::open_with_lease(&config.url, Some(config.lease))
}

/// What a slot does next.
enum Next {
    Work(Box<Lease>),
    Wait,
    Done,
}

/// A slot of a worker, with its connection and what it did.
struct Slot<'a> {
    n: usize,
    config: &'a WorkerConfig,
    crew: &'a dyn Crew,
    store: Arc<dyn RunStore>,
    tally: Tally,
}

impl Slot<'_> {
    /// Claims the next run, if any.
    fn claim(&mut self) -> Next {
        let holder = LockHolder::current(jiff::Timestamp::now(), Some("delta worker"));
        match self.store.claim(&holder) {
            Ok(Some(lease)) => Next::Work(Box::new(lease)),
            Ok(None) if self.config.exit_when_done && self.store.queued().is_ok_and(|n| n == 0) => {
                Next::Done
            }
            Ok(None) => Next::Wait,
            Err(e) => {
                self.failed(None, &FleetError::Store(e));
                pause(self.config.poll, &self.config.settings.shutdown);
                self.reconnect();
                Next::Wait
            }
        }
    }

    /// Works on the claimed run and reports how it ended.
    fn work_on(&mut self, lease: Lease) {
        let (slot, crew) = (self.n, self.crew);
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
        match work(
            &self.store,
            lease,
            Ask::Queued,
            &self.config.settings,
            parts,
        ) {
            Ok(Worked::Stopped { finished, requeued }) => {
                self.tally.stopped += 1;
                let status = finished.outcome.status;
                let run_id = &run_id;
                crew.event(WorkerEvent::Stopped {
                    slot,
                    run_id,
                    status,
                    requeued,
                });
            }
            Ok(Worked::Settled { status, .. }) => {
                self.tally.stopped += 1;
                crew.event(WorkerEvent::Settled {
                    slot,
                    run_id: &run_id,
                    status,
                });
            }
            Ok(Worked::Waiting { reason, .. }) => {
                crew.event(WorkerEvent::Waiting {
                    slot,
                    run_id: &run_id,
                    reason: &reason,
                });
                pause(self.config.poll, &self.config.settings.shutdown);
            }
            Ok(Worked::Lost { why, .. }) => {
                self.tally.lost += 1;
                crew.event(WorkerEvent::Lost {
                    slot,
                    run_id: &run_id,
                    why,
                });
            }
            Err(error) => {
                self.failed(Some(&run_id), &error);
                if error.is_busy() {
                    pause(self.config.poll, &self.config.settings.shutdown);
                } else {
                    self.reconnect();
                }
            }
        }
    }

    fn failed(&mut self, run_id: Option<&str>, error: &FleetError) {
        self.tally.failed += 1;
        self.crew.event(WorkerEvent::Failed {
            slot: self.n,
            run_id,
            error,
        });
    }

    /// A new connection, in case the old one is what failed (a server restart, a network cut).
    fn reconnect(&mut self) {
        if let Ok(fresh) = connect(self.config) {
            self.store = fresh;
        }
    }
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
