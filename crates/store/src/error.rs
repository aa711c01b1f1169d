use std::io;
use std::path::PathBuf;

use crate::holder::LockHolder;

/// Result alias for this crate.
pub type StoreResult<T> = Result<T, StoreError>;

/// Everything that can go wrong with durable files. Every variant that touches the filesystem names the
/// path.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An IO operation failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What we were doing, as a verb phrase ("open", "append to", "rename into place").
        action: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// A journal line that is not the last one cannot be parsed: the journal is corrupt.
    #[error("{path}:{line}: corrupt journal line: {reason}")]
    CorruptLine {
        /// The journal file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// Why it could not be parsed.
        reason: String,
    },

    /// The journal ends with a torn line; appending now would bury it in the middle of the file, where
    /// it would be corruption instead of a recoverable tail.
    #[error("{path}: {reason}; recover the journal before appending")]
    TornTail {
        /// The journal file.
        path: PathBuf,
        /// Length of the torn tail in bytes.
        bytes: u64,
        /// What is wrong with it.
        reason: String,
    },

    /// An earlier append failed and could not be undone, so the journal's end is unknown.
    #[error(
        "{path}: an earlier append failed and could not be rolled back; reopen the journal to recover it"
    )]
    Poisoned {
        /// The journal file.
        path: PathBuf,
    },

    /// A value could not be turned into JSON.
    #[error("cannot serialize a record for {path}: {source}")]
    Serialize {
        /// The file the record was meant for.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },

    /// A JSON document could not be parsed.
    #[error("{path} is not valid JSON: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },

    /// The run lock is held by a live process.
    #[error("{path} is locked by {}", holder.as_ref().map_or_else(|| "another process".to_string(), LockHolder::describe))]
    Busy {
        /// The lock file.
        path: PathBuf,
        /// Who holds it, when the holder wrote its details.
        holder: Option<LockHolder>,
    },

    /// A user-supplied id is not acceptable as a file name.
    #[error("invalid id {id:?}: {reason}")]
    InvalidId {
        /// The id as given.
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// A store URL that names no store.
    #[error("{url:?} names no store: {reason}")]
    BadUrl {
        /// The URL.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// A run to create exists already.
    #[error("run {run:?} exists already")]
    Exists {
        /// The run.
        run: String,
    },

    /// A run to open does not exist.
    #[error("no run {run:?}")]
    NoRun {
        /// The run.
        run: String,
    },

    /// A write named a lease that is no longer the run's current one: another writer took the run
    /// over, and this one must stop.
    #[error(
        "run {run:?}: the lease of epoch {held} was taken over (the run is at epoch {current})"
    )]
    Fenced {
        /// The run.
        run: String,
        /// The epoch of the lease the write named.
        held: u64,
        /// The run's current epoch.
        current: u64,
    },

    /// A lease was handed to a store that did not grant it.
    #[error("run {run:?}: the lease was not granted by this store")]
    ForeignLease {
        /// The run.
        run: String,
    },

    /// A journal record is not one line of JSON.
    #[error("run {run:?}: a journal record must be one JSON value on one line ({reason})")]
    BadRecord {
        /// The run.
        run: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A document key names something the store keeps for itself.
    #[error("run {run:?}: {key:?} is the store's own file, not a document")]
    ReservedKey {
        /// The run.
        run: String,
        /// The key.
        key: String,
    },

    /// A storage backend other than files failed (a database call).
    #[error("cannot {action}: {source}")]
    Backend {
        /// What we were doing.
        action: &'static str,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// An environment variable meant for tests holds a value we cannot use.
    #[error("{var}={value:?} is not valid: {reason}")]
    BadEnv {
        /// The variable name.
        var: String,
        /// Its value.
        value: String,
        /// Why it was refused.
        reason: String,
    },
}

impl StoreError {
    /// An IO error while doing `action` to `path`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
