//! The run of record in the store, seen from the engine: journal lines and metadata go there under
//! the lease, and a background thread renews the lease while the run is worked on.
//!
//! A process that cannot renew its lease (the database restarted, the network is cut) does not know
//! whether another process has taken the run over, and must assume so once the lease may have run
//! out: the renewer then stops the run (its tool is stopped by the engine's interrupt) a margin
//! before the lease's end as this process counts it, so that a successor never works beside it.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use store::{Flush, Lease, RunStore, Seq, StoreError};

use crate::events::Upstream;

/// A run's store and the lease this process holds on it.
#[derive(Debug)]
pub struct StoreUpstream {
    store: Arc<dyn RunStore>,
    lease: Mutex<Option<Lease>>,
    /// Set once the store refused the lease (taken over), or the lease could not be renewed before
    /// it ran out: nothing more is written.
    lost: AtomicBool,
    /// Why the lease ran out unrenewed, once it did (as opposed to taken over): a [`Loss`] code.
    ran_out: AtomicU8,
}

/// Why a process gave a run up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// Another process took the run over (the store refused this lease).
    TakenOver,
    /// The lease could not be renewed before it ran out (the store could not be reached).
    CutOff,
    /// This process was stopped (paused) past its lease.
    Paused,
}

impl StoreUpstream {
    /// Holds `lease` on `store` for the engine.
    pub fn new(store: Arc<dyn RunStore>, lease: Lease) -> Arc<Self> {
        Arc::new(Self {
            store,
            lease: Mutex::new(Some(lease)),
            lost: AtomicBool::new(false),
            ran_out: AtomicU8::new(0),
        })
    }

    /// The store.
    pub fn store(&self) -> &dyn RunStore {
        &*self.store
    }

    /// The run.
    pub fn run_id(&self) -> String {
        self.lease
            .lock()
            .ok()
            .and_then(|l| l.as_ref().map(|l| l.run().to_string()))
            .unwrap_or_default()
    }

    /// Whether the run was given up: its lease taken over, or run out unrenewed.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Why the run was given up, once it was.
    pub fn loss(&self) -> Option<Loss> {
        if !self.is_lost() {
            return None;
        }
        Some(match self.ran_out.load(Ordering::SeqCst) {
            RAN_OUT_CUT_OFF => Loss::CutOff,
            RAN_OUT_PAUSED => Loss::Paused,
            _ => Loss::TakenOver,
        })
    }

    /// Gives the run up because its lease may have run out unrenewed: `paused` when this process
    /// was stopped, else the store could not be reached.
    fn ran_out(&self, paused: bool) {
        let why = if paused {
            RAN_OUT_PAUSED
        } else {
            RAN_OUT_CUT_OFF
        };
        self.ran_out.store(why, Ordering::SeqCst);
        self.lost.store(true, Ordering::SeqCst);
    }

    /// Runs `op` with the lease; a refusal for a lost lease marks it lost.
    pub fn with_lease<T>(
        &self,
        op: impl FnOnce(&dyn RunStore, &mut Lease) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if self.is_lost() {
            return Err(StoreError::Backend {
                action: "write the run",
                source: "the run was given up".into(),
            });
        }
        let mut guard = self.guard()?;
        let Some(lease) = guard.as_mut() else {
            return Err(StoreError::Backend {
                action: "write the run",
                source: "the run's lease was given up".into(),
            });
        };
        let result = op(&*self.store, lease);
        if let Err(StoreError::Fenced { .. } | StoreError::NoRun { .. }) = &result {
            self.lost.store(true, Ordering::SeqCst);
        }
        result
    }

    fn guard(&self) -> Result<MutexGuard<'_, Option<Lease>>, StoreError> {
        self.lease.lock().map_err(|_| StoreError::Backend {
            action: "use the run's lease",
            source: "a thread panicked while holding it".into(),
        })
    }

    /// Gives the lease up (the run is free for the next worker at once).
    pub fn release(&self) {
        if let Ok(mut guard) = self.lease.lock() {
            guard.take();
        }
    }

    /// Renews the lease every `period` until `stop` is raised. When the store refuses it (taken
    /// over), when it could not be renewed for nearly the whole lease ([`stop_margin`] before its
    /// end), or when `shutdown` is raised, `interrupt` is raised so that the engine stops its tool
    /// and ends.
    pub fn keep_alive(
        self: &Arc<Self>,
        period: Duration,
        shutdown: Arc<AtomicBool>,
        interrupt: Arc<AtomicBool>,
    ) -> Renewer {
        let stop = Arc::new(AtomicBool::new(false));
        let lease_time = self.store.lease_time();
        // When the last renewal that succeeded was sent, in milliseconds from `start`: the lease
        // holds at least until then plus its time (the store counts from when it received it).
        let start = Instant::now();
        let held_from = Arc::new(AtomicU64::new(0));
        // Renewals on a thread of their own, so that a call the network holds up never delays the
        // decision to stop. It ends after its call once stopped (it is not waited for).
        {
            let (upstream, stopped, held_from) =
                (Arc::clone(self), Arc::clone(&stop), Arc::clone(&held_from));
            std::thread::spawn(move || {
                while !stopped.load(Ordering::SeqCst) && !upstream.is_lost() {
                    sleep_unless(period, &stopped);
                    let sent = millis_since(start);
                    // A passing database error is retried at the next period; a refusal is final.
                    if !stopped.load(Ordering::SeqCst)
                        && upstream
                            .with_lease(|store, lease| store.renew(lease))
                            .is_ok()
                    {
                        held_from.fetch_max(sent, Ordering::SeqCst);
                    }
                }
            });
        }
        let upstream = Arc::clone(self);
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            // A lease without a time (an OS lock) holds while this process lives.
            let give_up_after = lease_time.map(|time| time.saturating_sub(stop_margin(time)));
            let tick = Duration::from_millis(50);
            let mut ticked = Instant::now();
            while !stopped.load(Ordering::SeqCst) {
                std::thread::sleep(tick);
                // A tick that took far longer than asked: the whole process was stopped.
                let paused = ticked.elapsed() > tick + period;
                ticked = Instant::now();
                if shutdown.load(Ordering::SeqCst) {
                    interrupt.store(true, Ordering::SeqCst);
                }
                let held = Duration::from_millis(held_from.load(Ordering::SeqCst));
                if !upstream.is_lost()
                    && give_up_after
                        .is_some_and(|limit| start.elapsed().saturating_sub(held) >= limit)
                {
                    upstream.ran_out(paused);
                }
                if upstream.is_lost() {
                    interrupt.store(true, Ordering::SeqCst);
                    break;
                }
            }
        });
        Renewer {
            stop,
            thread: Some(thread),
        }
    }
}

impl Upstream for StoreUpstream {
    fn describe(&self) -> String {
        let run = self.run_id();
        format!(
            "run {run} is kept in a PostgreSQL store; this folder is its working copy. Continue it with: delta continue --store URL --run-id {run}\n"
        )
    }

    fn append(&self, first: u64, lines: &[&str]) -> Result<(), StoreError> {
        let last = self.with_lease(|store, lease| store.append(lease, lines))?;
        let expected = first + lines.len() as u64 - 1;
        if last != Seq(expected) {
            // The working copy and the store disagree: never go on writing beside another record.
            self.lost.store(true, Ordering::SeqCst);
            return Err(StoreError::Backend {
                action: "append to the run's journal",
                source: format!(
                    "the store's journal ends at {last} where the working copy expected {expected}"
                )
                .into(),
            });
        }
        Ok(())
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.with_lease(|store, lease| store.put(lease, key, bytes, Flush::Durable))
    }
}

/// [`StoreUpstream::ran_out`]'s reasons.
const RAN_OUT_CUT_OFF: u8 = 1;
const RAN_OUT_PAUSED: u8 = 2;

/// Sleeps `period`, or less once `stopped` is raised.
fn sleep_unless(period: Duration, stopped: &AtomicBool) {
    let until = Instant::now() + period;
    while !stopped.load(Ordering::SeqCst) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

fn millis_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// How long before its lease runs out a process that could not renew it gives its run up: the time
/// its tool gets to stop (SIGTERM, a grace, SIGKILL) and a little more, at most a third of the lease.
pub fn stop_margin(lease_time: Duration) -> Duration {
    (crate::process::STOP_GRACE + Duration::from_millis(500)).min(lease_time / 3)
}

/// The thread renewing a lease; stopped when dropped.
#[derive(Debug)]
pub struct Renewer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Renewer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
