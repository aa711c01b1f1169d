//! The storage seam: what a tool needs from durable storage for its runs, without naming where the
//! runs live.
//!
//! A *run* (a delta run, a dygram execution) is a named unit of durable state inside one store (a
//! delta workspace, a dygram executions folder, later a database schema). It has
//!
//! * a **journal**: an append-only sequence of records, each one JSON value on one line, numbered
//!   from 1 by the store ([`Seq`]) — the source of truth a crash leaves consistent;
//! * **documents**: small values replaced whole (state, metadata, derived files, recorded artefacts),
//!   addressed by a key such as `metadata.json` or `io/invocations/3.json`;
//! * a **lease**: one writer at a time. Taking it bumps the run's *epoch*; every write names the
//!   [`Lease`] it holds, and a store refuses a write whose lease is no longer the current one
//!   ([`StoreError::Fenced`]), so a writer that lost its lease (a paused process whose lease expired
//!   and was taken over) can never append after its successor.
//!
//! [`RunStore`] is object-safe: tools hold a `&dyn RunStore` (or an `Arc`). The files under a folder
//! are the first implementation ([`crate::files::FileStore`]).

use std::time::Duration;

use crate::error::{StoreError, StoreResult};
use crate::journal::TornTail;
use crate::lock::{LockHolder, LockState};

/// The position of a record in its run's journal: 1 for the first record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Seq(pub u64);

impl std::fmt::Display for Seq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// One journal record, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its position.
    pub seq: Seq,
    /// Its JSON text (one line, without the line end).
    pub json: String,
}

/// What a journal read found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JournalRead {
    /// The complete records asked for, in order.
    pub entries: Vec<Entry>,
    /// How many complete records the journal holds in all.
    pub len: u64,
    /// A last record whose write did not complete (a writer killed while appending): not returned,
    /// and cut off by the next lease.
    pub torn: Option<TornTail>,
}

/// Whether a document must reach the disk before the call returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    /// On the disk when the call returns (state a later step relies on).
    Durable,
    /// Replaced atomically, but possibly lost by a power cut (data the journal can rebuild).
    Lazy,
}

/// A run's writer, as seen by others.
pub type LeaseState = LockState;

/// The right to write one run, held by one writer. Dropping it gives the run up.
///
/// The epoch grows with every lease taken on the run; a store fences writes by it.
pub struct Lease {
    run: String,
    epoch: u64,
    recovered: Option<TornTail>,
    stale: Option<LockHolder>,
    pub(crate) guard: Box<dyn std::any::Any + Send>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("run", &self.run)
            .field("epoch", &self.epoch)
            .field("recovered", &self.recovered)
            .field("stale", &self.stale)
            .finish_non_exhaustive()
    }
}

impl Lease {
    /// A lease for an implementation of [`RunStore`]: `guard` holds whatever keeps it (a lock, an
    /// open journal, a connection) and is given back by [`Lease::guard_mut`].
    pub fn new(
        run: &str,
        epoch: u64,
        recovered: Option<TornTail>,
        stale: Option<LockHolder>,
        guard: Box<dyn std::any::Any + Send>,
    ) -> Self {
        Self {
            run: run.to_string(),
            epoch,
            recovered,
            stale,
            guard,
        }
    }

    /// The run it is for.
    pub fn run(&self) -> &str {
        &self.run
    }

    /// Its epoch: 1 for the first lease of a run, one more for each lease after.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The torn last record the lease cut off, when the previous writer died while appending.
    pub fn recovered(&self) -> Option<&TornTail> {
        self.recovered.as_ref()
    }

    /// The previous writer, when it died holding the run (the run was interrupted).
    pub fn stale(&self) -> Option<&LockHolder> {
        self.stale.as_ref()
    }

    /// The implementation's guard, when it is of type `G` (a lease of another store is not).
    pub fn guard_mut<G: 'static>(&mut self) -> StoreResult<&mut G> {
        let run = self.run.clone();
        self.guard
            .downcast_mut::<G>()
            .ok_or(StoreError::ForeignLease { run })
    }
}

/// Durable storage for the runs of one tool in one place.
///
/// Reads need no lease; every write names the lease it holds. Run names are validated
/// ([`crate::validate_id`]); document keys are `/`-separated names of the same alphabet.
pub trait RunStore: Send + Sync + std::fmt::Debug {
    /// The runs there are, in name order.
    fn list(&self) -> StoreResult<Vec<String>>;

    /// Creates the run (failing with [`StoreError::Exists`] when it exists) and takes its first
    /// lease.
    fn create(&self, run: &str, holder: &LockHolder) -> StoreResult<Lease>;

    /// Takes the lease of an existing run, cutting off a torn last record. Fails with
    /// [`StoreError::Busy`] while another writer holds it and [`StoreError::NoRun`] when the run
    /// does not exist.
    fn lease(&self, run: &str, holder: &LockHolder) -> StoreResult<Lease>;

    /// Who writes the run, if anyone (a free lease whose last holder never gave it up is stale).
    fn lease_state(&self, run: &str) -> StoreResult<LeaseState>;

    /// Appends records (each one JSON value on one line) in one durable step and returns the
    /// position of the last. All are on the disk when it returns; after a crash during the call the
    /// journal holds a prefix of them (a torn record is cut off by the next lease).
    fn append(&self, lease: &mut Lease, records: &[&str]) -> StoreResult<Seq>;

    /// The records after `after` (all of them with `Seq(0)`).
    fn read_journal(&self, run: &str, after: Seq) -> StoreResult<JournalRead>;

    /// The last `count` records.
    fn read_tail(&self, run: &str, count: usize) -> StoreResult<JournalRead>;

    /// Replaces the document at `key`.
    fn put(&self, lease: &mut Lease, key: &str, bytes: &[u8], flush: Flush) -> StoreResult<()>;

    /// The document at `key`, if there is one.
    fn get(&self, run: &str, key: &str) -> StoreResult<Option<Vec<u8>>>;

    /// The keys of the documents under `prefix` (`""` for all; `io/` for those in `io`), sorted.
    fn keys(&self, run: &str, prefix: &str) -> StoreResult<Vec<String>>;

    /// Removes the run and everything in it; the lease ends with it.
    fn remove(&self, lease: Lease) -> StoreResult<()>;

    /// Creates `run` with its whole journal (`records`, numbered from 1) and its `documents` in
    /// one step: a process killed on the way leaves nothing. Returns its lease.
    fn create_whole(
        &self,
        run: &str,
        holder: &LockHolder,
        records: &[&str],
        documents: &[(&str, &[u8])],
    ) -> StoreResult<Lease>;

    /// How long a lease holds without [`RunStore::renew`]; `None` for a lease held until its
    /// holder gives it up or dies (an OS lock).
    fn lease_time(&self) -> Option<Duration>;

    /// Extends `lease` by the lease time; fails with [`StoreError::Fenced`] when another writer
    /// took the run over.
    fn renew(&self, lease: &mut Lease) -> StoreResult<()>;

    /// How often a holder renews its lease: three times in the lease time (every ten seconds for a
    /// lease without one, where a renewal only checks that the lease is still held).
    fn renew_every(&self) -> Duration {
        self.lease_time()
            .map_or(Duration::from_secs(10), |time| time / 3)
    }

    /// Puts the run in the queue for workers (`true`), or takes it out once it needs no more work.
    fn set_queued(&self, lease: &mut Lease, queued: bool) -> StoreResult<()>;

    /// Moves a queued run to the back of the queue, for a run that cannot be worked on yet: it
    /// does not hold up the others.
    fn defer(&self, lease: &mut Lease) -> StoreResult<()>;

    /// Takes the lease of the oldest queued run that nobody holds (a run whose holder died, or
    /// whose lease ran out, is taken over), or `None` when there is none. Claimers at the same
    /// time never get the same run.
    fn claim(&self, holder: &LockHolder) -> StoreResult<Option<Lease>>;

    /// How many runs are queued (waiting for a worker or being worked on).
    fn queued(&self) -> StoreResult<u64>;

    /// Every run with its lease and queue state, in name order.
    fn rows(&self) -> StoreResult<Vec<RunRow>>;
}

/// A run as a listing of the store shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRow {
    /// Its name.
    pub run: String,
    /// Its lease epoch (how many leases were taken).
    pub epoch: u64,
    /// Who writes it, if anyone; `live` says whether that lease still holds.
    pub holder: Option<LockHolder>,
    /// The holder's lease holds.
    pub live: bool,
    /// It waits for (or is being worked on by) a worker.
    pub queued: bool,
    /// When it was created.
    pub created: jiff::Timestamp,
}

/// Checks a run to be created whole ([`RunStore::create_whole`]): every record and every
/// document key.
pub fn check_whole(run: &str, records: &[&str], documents: &[(&str, &[u8])]) -> StoreResult<()> {
    for record in records {
        check_record(run, record)?;
    }
    for (key, _) in documents {
        validate_key(key)?;
    }
    Ok(())
}

/// Checks a journal record: one JSON value on one line.
pub fn check_record(run: &str, record: &str) -> StoreResult<()> {
    let bad = |reason: String| StoreError::BadRecord {
        run: run.to_string(),
        reason,
    };
    if record.contains('\n') {
        return Err(bad("it holds a line break".into()));
    }
    serde_json::from_str::<serde::de::IgnoredAny>(record)
        .map(|_| ())
        .map_err(|e| bad(e.to_string()))
}

/// Checks a document key: `/`-separated segments, each a valid id, none reserved by the store.
pub fn validate_key(key: &str) -> StoreResult<&str> {
    let bad = |reason| StoreError::InvalidId {
        id: key.to_string(),
        reason,
    };
    if key.is_empty() {
        return Err(bad("a document key is empty"));
    }
    for segment in key.split('/') {
        crate::ids::validate_id(segment).map_err(|_| {
            bad("each part of a document key takes letters, digits, '-', '_' and '.' only")
        })?;
        if segment.starts_with('.') {
            return Err(bad("a document key part cannot start with '.'"));
        }
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_keys_stay_inside_the_run() {
        for good in ["state.json", "io/invocations/3.json", "a-b_c.d"] {
            assert!(validate_key(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "io//x",
            "../x",
            "io/../../x",
            ".hidden",
            "io/.x",
            "a\\b",
            "a b",
        ] {
            assert!(validate_key(bad).is_err(), "{bad}");
        }
    }
}
