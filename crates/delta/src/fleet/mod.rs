//! Runs kept in a shared store (PostgreSQL) and worked on by a fleet of processes.
//!
//! A run of the fleet lives in the store: its journal (the run's record, line for line the same as a
//! `journal.jsonl`), its `metadata.json`, the `submission.json` that queued it, the `workspace.json`
//! that says where its working copy is, and its `io/` records. The process working on it holds the
//! run's **lease** (an epoch in the store, renewed while it works): every journal line goes to the
//! store first, in a transaction that checks the epoch, so a process whose lease was taken over is
//! refused before anything acts on the line and gives the run up ([`upstream`]).
//!
//! Tools run in a **working copy**: an ordinary workspace whose `.delta/<run>/` is rebuilt from the
//! store before the engine starts ([`copy`]), and then the ordinary runner goes on with the run — a
//! new run, or a resume with the same settling rules as after a local crash ([`work`]). A run's
//! working copy is the workspace it was submitted with (`-w`, a path every worker reaches: shared
//! storage), or one the first worker creates under its own folder. A later worker reuses the
//! recorded working copy when it can reach it and nobody holds it, so what the previous process left
//! (`process.json`: a tool still running) is found and stopped; otherwise it makes a fresh copy and
//! says of an interrupted call that it may or may not have taken effect.
//!
//! [`submit`] queues a run; [`worker`] claims queued runs (`FOR UPDATE SKIP LOCKED`) and works them;
//! [`admin`] lists, exports and imports runs.

pub mod admin;
pub mod copy;
pub mod upstream;
pub mod work;
pub mod worker;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use store::{Clock, FileLayout, FileStore, IdSource, LockHolder, RunStore, StoreError};

use crate::workspace::{self, InvalidRunId};

/// The store's namespace for delta's runs (dygram's executions have their own).
pub const NAMESPACE: &str = "delta";
/// The document a submission is kept in.
pub const SUBMISSION: &str = "submission.json";
/// The document that says where a run's working copy is.
pub const PLACE: &str = "workspace.json";
/// The document of the run's metadata (as `metadata.json` in a workspace).
pub const METADATA: &str = "metadata.json";
/// The document that says why a run could not be worked on (it then left the queue).
pub const ERROR: &str = "error.json";
/// The document that says why a queued run waits (its workspace is held), while it does.
pub const WAITING: &str = "waiting.json";
/// The question a run paused on (`interaction/request.json` in its working copy), for listings.
pub const QUESTION: &str = "question.json";
/// Lines of a run's journal read from its end (in the store) to tell how it ended or why it failed.
pub const TAIL_LINES: usize = 64;

/// Why a queued run waits (`waiting.json`); both absent once it no longer does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiting {
    /// The reason.
    pub reason: Option<String>,
    /// Since when (the last time a worker found it so).
    pub since: Option<String>,
}

/// Why a fleet operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// `--store` is neither a PostgreSQL URL nor a folder.
    #[error(
        "--store takes a PostgreSQL URL (postgres://… or postgresql://…) or a folder (file:///path), not '{0}'"
    )]
    BadUrl(String),
    /// A PostgreSQL store asked of a delta built without it.
    #[error("this delta was built without PostgreSQL support, so it cannot open '{0}'")]
    NoPostgres(String),
    /// The run id given is not a valid one.
    #[error(transparent)]
    InvalidRunId(#[from] InvalidRunId),
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A working copy's seal could not be written.
    #[error(transparent)]
    Seal(Box<crate::seal::SealError>),
    /// The run has no submission (it was not made by `delta submit` or `delta import`).
    #[error("run {0} has no submission.json in the store: it was not submitted or imported")]
    NotSubmitted(String),
    /// A document of the store could not be read.
    #[error("run {run}: {key} in the store is unreadable: {source}")]
    BadDocument {
        /// The run.
        run: String,
        /// The document.
        key: &'static str,
        /// Why.
        source: serde_json::Error,
    },
    /// The runner could not run the run.
    #[error(transparent)]
    Runner(#[from] Box<crate::runner::RunnerError>),
    /// `import` of a run the store has already.
    #[error(transparent)]
    ImportExists(StoreError),
    /// `import --resume` of a run whose journal in the store is not the workspace's.
    #[error(
        "run {0} is in the store with another journal than the workspace's: it is not this import"
    )]
    ImportDiffers(String),
}

impl From<crate::seal::SealError> for FleetError {
    fn from(e: crate::seal::SealError) -> Self {
        Self::Seal(Box::new(e))
    }
}

impl FleetError {
    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::BadUrl(_) => Some(
                "e.g. --store postgres://user@db.example/delta, DELTA_STORE=postgresql://…, or --store file:///shared/delta-store".into(),
            ),
            Self::NoPostgres(_) => Some(
                "build it with the cargo feature `postgres` (on by default), or use a folder: --store file:///path".into(),
            ),
            Self::InvalidRunId(e) => Some(e.hint()),
            Self::Store(StoreError::Busy { .. }) => Some(
                "a worker or another delta process holds the run's lease; wait, or see: delta list-runs --store URL"
                    .into(),
            ),
            Self::Store(StoreError::NoRun { .. }) => {
                Some("list the store's runs with: delta list-runs --store URL".into())
            }
            Self::Runner(e) => e.hint(),
            Self::ImportExists(_) => Some(
                "if an earlier import of this run was cut short, `delta import --resume` finishes it; \
                 otherwise import it under another id (--run-id of a copy) or continue it with \
                 delta continue --store URL --run-id ID"
                    .into(),
            ),
            Self::ImportDiffers(_) => Some(
                "the store's run is another one with the same id: list it with delta list-runs --store URL"
                    .into(),
            ),
            _ => None,
        }
    }

    /// Another process holds the run (exit 75).
    pub fn is_busy(&self) -> bool {
        match self {
            Self::Store(StoreError::Busy { .. }) => true,
            Self::Runner(e) => e.is_busy(),
            _ => false,
        }
    }

    /// The store could not be reached for a moment (a database restarting, say): the work is
    /// worth another try, not given up on.
    pub fn is_transient(&self) -> bool {
        let unreachable = |e: &StoreError| matches!(e, StoreError::Backend { .. });
        match self {
            Self::Store(e) => unreachable(e),
            Self::Runner(e) => e.store_error().is_some_and(unreachable),
            _ => false,
        }
    }

    /// A usage error (exit 64).
    pub fn is_usage(&self) -> bool {
        match self {
            Self::BadUrl(_) | Self::NoPostgres(_) | Self::InvalidRunId(_) => true,
            Self::Runner(e) => e.is_usage(),
            _ => false,
        }
    }
}

/// The names of a run's own files in a store on folders.
const STORE_FILES: FileLayout = FileLayout {
    journal: "journal.jsonl",
    lock: ".lease",
};

/// The store at `url` with its own lease time: `postgres://…` (its migrations are applied on
/// first use) or `file:///path`, run folders under `path/delta` (on storage every worker reaches;
/// leases are OS locks, held until their holder lets go or dies).
pub fn open(url: &str) -> Result<Arc<dyn RunStore>, FleetError> {
    open_with_lease(url, None)
}

/// [`open`], PostgreSQL leases lasting `lease` without renewal (a store on folders has no lease
/// time).
pub fn open_with_lease(
    url: &str,
    lease: Option<Duration>,
) -> Result<Arc<dyn RunStore>, FleetError> {
    if let Some(store) = FileStore::from_url(url, NAMESPACE, STORE_FILES) {
        return Ok(Arc::new(
            store.map_err(|_| FleetError::BadUrl(url.to_string()))?,
        ));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return postgres(url, lease);
    }
    Err(FleetError::BadUrl(url.to_string()))
}

#[cfg(feature = "postgres")]
fn postgres(url: &str, lease: Option<Duration>) -> Result<Arc<dyn RunStore>, FleetError> {
    let store = store_pg::PgStore::connect(url, NAMESPACE)?;
    Ok(Arc::new(match lease {
        Some(lease) => store.with_lease(lease),
        None => store,
    }))
}

#[cfg(not(feature = "postgres"))]
fn postgres(url: &str, _: Option<Duration>) -> Result<Arc<dyn RunStore>, FleetError> {
    Err(FleetError::NoPostgres(url.to_string()))
}

/// What `delta submit` queued: everything a worker needs to start the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submission {
    /// The agent's folder (absolute; every worker must reach it).
    pub agent: PathBuf,
    /// The task.
    pub task: String,
    /// The workspace (absolute, on storage every worker reaches), or `None` for one the worker
    /// creates.
    pub workspace: Option<PathBuf>,
    /// Iteration budget (default: the agent's).
    pub max_iterations: Option<u32>,
    /// The model to ask instead of the agent's (absent: the agent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// When it was submitted.
    pub submitted: String,
}

/// Where a run's working copy is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    /// The workspace.
    pub workspace: PathBuf,
    /// The machine that made it.
    pub host: String,
}

/// Queues a new run for the fleet and returns its id (`run_id`, or a generated one).
pub fn submit(
    store: &dyn RunStore,
    submission: &Submission,
    run_id: Option<&str>,
    clock: Clock,
    ids: &IdSource,
) -> Result<String, FleetError> {
    let id = match run_id {
        Some(id) => workspace::validate_run_id(id)?.to_string(),
        None => workspace::new_run_id(clock.now(), ids),
    };
    let mut lease = store.create(&id, &LockHolder::current(clock.now(), Some("delta submit")))?;
    put_json(store, &mut lease, SUBMISSION, submission)?;
    store.set_queued(&mut lease, true)?;
    Ok(id)
}

/// Reads the JSON document `key` of `run`.
pub fn get_json<T: serde::de::DeserializeOwned>(
    store: &dyn RunStore,
    run: &str,
    key: &'static str,
) -> Result<Option<T>, FleetError> {
    let Some(bytes) = store.get(run, key)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|source| FleetError::BadDocument {
            run: run.to_string(),
            key,
            source,
        })
}

/// Writes `value` as the JSON document `key`, durably.
pub(crate) fn put_json<T: Serialize>(
    store: &dyn RunStore,
    lease: &mut store::Lease,
    key: &'static str,
    value: &T,
) -> Result<(), FleetError> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|source| FleetError::BadDocument {
        run: lease.run().to_string(),
        key,
        source,
    })?;
    Ok(store.put(lease, key, &bytes, store::Flush::Durable)?)
}
