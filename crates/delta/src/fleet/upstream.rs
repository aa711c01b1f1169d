//! The run of record in the store, seen from the engine: journal lines and metadata go there under
//! the lease, and a background thread renews the lease while the run is worked on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use store::{Flush, Lease, RunStore, Seq, StoreError};
use store_pg::PgStore;

use crate::events::Upstream;

/// A run's store and the lease this process holds on it.
#[derive(Debug)]
pub struct StoreUpstream {
    store: PgStore,
    lease: Mutex<Option<Lease>>,
    /// Set once the store refused the lease (taken over): nothing more is written.
    lost: AtomicBool,
}

impl StoreUpstream {
    /// Holds `lease` on `store` for the engine.
    pub fn new(store: PgStore, lease: Lease) -> Arc<Self> {
        Arc::new(Self {
            store,
            lease: Mutex::new(Some(lease)),
            lost: AtomicBool::new(false),
        })
    }

    /// The store.
    pub fn store(&self) -> &PgStore {
        &self.store
    }

    /// The run.
    pub fn run_id(&self) -> String {
        self.lease
            .lock()
            .ok()
            .and_then(|l| l.as_ref().map(|l| l.run().to_string()))
            .unwrap_or_default()
    }

    /// Whether the lease was taken over.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Runs `op` with the lease; a refusal for a lost lease marks it lost.
    pub fn with_lease<T>(
        &self,
        op: impl FnOnce(&PgStore, &mut Lease) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut guard = self.guard()?;
        let Some(lease) = guard.as_mut() else {
            return Err(StoreError::Backend {
                action: "write the run",
                source: "the run's lease was given up".into(),
            });
        };
        let result = op(&self.store, lease);
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

    /// Renews the lease every `period` until `stop` is raised; when the store refuses it (taken
    /// over) or `shutdown` is raised, `interrupt` is raised so that the engine stops its tool and
    /// ends.
    pub fn keep_alive(
        self: &Arc<Self>,
        period: Duration,
        shutdown: Arc<AtomicBool>,
        interrupt: Arc<AtomicBool>,
    ) -> Renewer {
        let stop = Arc::new(AtomicBool::new(false));
        let upstream = Arc::clone(self);
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut renewed = Instant::now();
            while !stopped.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
                if shutdown.load(Ordering::SeqCst) {
                    interrupt.store(true, Ordering::SeqCst);
                }
                if renewed.elapsed() < period {
                    continue;
                }
                renewed = Instant::now();
                // A passing database error is retried at the next period; a refusal is final.
                let _ = upstream.with_lease(|store, lease| store.renew(lease));
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
