//! Executions shared through a store: callers in different folders, on different machines,
//! advance one execution turn by turn (`dygram execute -i --store URL --id ID`).
//!
//! The store (PostgreSQL, namespace [`NAMESPACE`]; or folders under `path/dygram` for
//! `file:///path`) keeps an execution as a run whose documents are the files of its folder, each under its path inside the folder (`state.json`,
//! `metadata.json`, `machine.json`, `history.jsonl`, `pending-request.json`). One call
//! ([`SharedStore::call`]):
//!
//! 1. takes the run's lease, creating the run when the execution is new: one caller at a time, the
//!    others are told the execution is busy;
//! 2. writes the documents into a private temporary folder, `<tmp>/.dygram/executions/<id>/`
//!    ([`Checkout`]), and makes there the ordinary call of the file mode ([`Session::open`],
//!    [`Session::advance`]), renewing the lease while it works;
//! 3. uploads the files that changed under the lease, `state.json` (the commit point) last;
//! 4. gives the lease up and removes the private folder.
//!
//! A caller whose lease ran out and was taken over is refused at step 3
//! ([`SharedError::Fenced`]): `state.json` is the last document it would write, so nothing of its
//! turn is committed. See [`Checkout`] for what a call cut short between two documents leaves and
//! how the next call repairs it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use store::{FileLayout, FileStore, Lease, LockHolder, RunStore, StoreError};

use super::call::{CallError, CallRequest, Host, Opening, Session};
use super::{Advance, ManualInput, StateFile, Summary, check_id};

pub use super::checkout::{CheckedIn, Checkout, View};

/// The namespace of dygram's executions in the store (delta's runs live beside them in another).
pub const NAMESPACE: &str = "dygram";

/// How long a PostgreSQL lease holds without renewal, unless the caller says otherwise.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The names of an execution's own files in a store on folders.
const STORE_FILES: FileLayout = FileLayout {
    journal: "journal.jsonl",
    lock: ".lease",
};

#[cfg(feature = "postgres")]
fn postgres(url: &str, lease: Duration) -> Result<Arc<dyn RunStore>, SharedError> {
    let store = store_pg::PgStore::connect(url, NAMESPACE)
        .map_err(|e| SharedError::Connect(Box::new(e)))?;
    Ok(Arc::new(store.with_lease(lease)))
}

#[cfg(not(feature = "postgres"))]
fn postgres(url: &str, _: Duration) -> Result<Arc<dyn RunStore>, SharedError> {
    Err(SharedError::NoPostgres(url.to_string()))
}

/// The command the leases name.
const COMMAND: &str = "dygram execute -i --store";

/// Why a call on a shared execution failed. Nothing of the call's turn is committed.
#[derive(Debug, thiserror::Error)]
pub enum SharedError {
    /// The store cannot be reached (or its tables cannot be made).
    #[error("cannot use the execution store: {0}")]
    Connect(#[source] Box<StoreError>),
    /// A PostgreSQL store asked of a dygram built without it.
    #[error("this dygram was built without PostgreSQL support, so it cannot open '{0}'")]
    NoPostgres(String),
    /// Another caller holds the execution's lease.
    #[error("execution {id} is in use by another dygram process ({holder})")]
    Busy {
        /// The execution.
        id: String,
        /// Who holds it.
        holder: String,
    },
    /// Another caller took the execution over while this one worked (this one's lease had run
    /// out): the upload was refused.
    #[error(
        "execution {id} was taken over by another caller while this call worked (this call's lease, epoch {held}, had run out; the execution is at epoch {current}); nothing of this turn was saved"
    )]
    Fenced {
        /// The execution.
        id: String,
        /// The epoch of this call's lease.
        held: u64,
        /// The execution's epoch now.
        current: u64,
    },
    /// The store's `state.json` of the execution cannot be read.
    #[error(
        "state.json of execution {id} in the store cannot be read ({reason}); nothing was changed"
    )]
    Corrupted {
        /// The execution.
        id: String,
        /// Why.
        reason: String,
    },
    /// The store has no such execution (or none committed yet).
    #[error("no execution {0} in the store")]
    NotFound(String),
    /// A shared execution is named by its caller.
    #[error("an execution in a store is shared by name: the call needs its id")]
    NoId,
    /// Reading or writing the execution's documents failed.
    #[error("execution {id} in the store: {source}")]
    Store {
        /// The execution.
        id: String,
        /// Why.
        #[source]
        source: Box<StoreError>,
    },
    /// A file of the private folder could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The error of a store operation on execution `id`.
pub(super) fn store_error(id: &str) -> impl Fn(StoreError) -> SharedError + '_ {
    move |e| match e {
        StoreError::Busy { holder, .. } => SharedError::Busy {
            id: id.to_string(),
            holder: holder.map_or_else(|| "another process".to_string(), |h| h.describe()),
        },
        StoreError::Fenced { held, current, .. } => SharedError::Fenced {
            id: id.to_string(),
            held,
            current,
        },
        source => SharedError::Store {
            id: id.to_string(),
            source: Box::new(source),
        },
    }
}

/// A call's error from the store's.
fn shared<E>(e: SharedError) -> CallError<E> {
    CallError::Shared(Box::new(e))
}

/// The executions of one shared store (PostgreSQL, or folders every caller reaches), for the
/// calls of one caller.
#[derive(Debug, Clone)]
pub struct SharedStore {
    store: Arc<dyn RunStore>,
    caller: PathBuf,
    redactor: llm::Redactor,
}

/// What [`SharedStore::call`] did.
pub enum SharedCall {
    /// The machine has errors (the host has shown them): nothing was created or changed.
    Invalid,
    /// A unit of work, committed to the store.
    Done {
        /// The execution as this call left it (its private folder is gone).
        session: Box<Session>,
        /// What the unit of work did.
        advance: Box<Advance>,
    },
}

impl SharedStore {
    /// Opens the store at `url`: a PostgreSQL database (`postgres://…`; its tables are created
    /// when missing), leases lasting [`DEFAULT_LEASE`] without renewal, or `file:///path`
    /// (executions under `path/dygram`; leases are OS locks). `caller` is the caller's folder: the
    /// file queue (`--queue`) stays there.
    pub fn connect(url: &str, caller: &Path) -> Result<Self, SharedError> {
        Self::connect_with_lease(url, caller, DEFAULT_LEASE)
    }

    /// [`SharedStore::connect`], PostgreSQL leases lasting `lease` without renewal (a call renews
    /// its lease every third of it).
    pub fn connect_with_lease(
        url: &str,
        caller: &Path,
        lease: Duration,
    ) -> Result<Self, SharedError> {
        let store: Arc<dyn RunStore> = match FileStore::from_url(url, NAMESPACE, STORE_FILES) {
            Some(files) => Arc::new(files.map_err(|e| SharedError::Connect(Box::new(e)))?),
            None => postgres(url, lease)?,
        };
        Ok(Self::new(store, caller))
    }

    /// The executions of `store` (whose namespace is the caller's choice).
    pub fn new(store: Arc<dyn RunStore>, caller: &Path) -> Self {
        Self {
            store,
            caller: caller.to_path_buf(),
            redactor: llm::Redactor::default(),
        }
    }

    /// Scrubs the secrets of `redactor` from every file written (see
    /// [`super::Executions::with_redactor`]).
    pub fn with_redactor(mut self, redactor: llm::Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// The store.
    pub fn store(&self) -> &dyn RunStore {
        &*self.store
    }

    /// Takes the lease of execution `id` (creating it in the store when it does not exist) and
    /// writes its documents into a private folder.
    pub fn checkout(&self, id: &str) -> Result<Checkout, SharedError> {
        let lease = self.lease_of(id)?;
        let renew_every = self.store.renew_every();
        Checkout::take(
            Arc::clone(&self.store),
            lease,
            renew_every,
            &self.caller,
            self.redactor.clone(),
        )
    }

    fn lease_of(&self, id: &str) -> Result<Lease, SharedError> {
        let holder = LockHolder::current(jiff::Timestamp::now(), Some(COMMAND));
        let taken = match self.store.lease(id, &holder) {
            Err(StoreError::NoRun { .. }) => match self.store.create(id, &holder) {
                // Another caller created it meanwhile.
                Err(StoreError::Exists { .. }) => self.store.lease(id, &holder),
                created => created,
            },
            leased => leased,
        };
        taken.map_err(store_error(id))
    }

    /// One call on the shared execution `request.id`: the lease taken, the documents written into
    /// a private folder, the file mode's call made there, the changed files uploaded (`state.json`
    /// last), the lease given up. Nothing is uploaded when the call fails.
    pub fn call<H: Host>(
        &self,
        request: CallRequest,
        host: &mut H,
        input: &mut ManualInput,
    ) -> Result<SharedCall, CallError<H::Error>> {
        let Some(id) = request.id.clone() else {
            return Err(shared(SharedError::NoId));
        };
        check_id(&id)?;
        let checkout = self.checkout(&id).map_err(shared)?;
        let called = checkout.keep_alive(|executions| {
            let mut session = match Session::open(request, executions, host, input)? {
                Opening::Ready(session) => session,
                Opening::Invalid => return Ok(None),
            };
            let advance = session.advance(host, executions, input)?;
            Ok::<_, CallError<H::Error>>(Some((session, advance)))
        })?;
        let Some((session, mut advance)) = called else {
            return Ok(SharedCall::Invalid);
        };
        checkout.check_in().map_err(shared)?;
        if let Advance::Done(report) = &mut advance
            && let Some(waiting) = &mut report.waiting
        {
            // The private folder is gone: the request is a document of the store.
            waiting.file = format!("store:{NAMESPACE}/{id}/pending-request.json");
        }
        Ok(SharedCall::Done {
            session,
            advance: Box::new(advance),
        })
    }

    /// Execution `id` copied for reading, without its lease ([`View`]).
    pub fn view(&self, id: &str) -> Result<View, SharedError> {
        check_id(id).map_err(|_| SharedError::NotFound(id.to_string()))?;
        View::take(&*self.store, id)
    }

    /// Removes execution `id` from the store; `false` when there was none. Refused
    /// ([`SharedError::Busy`]) while a caller holds its lease.
    pub fn remove(&self, id: &str) -> Result<bool, SharedError> {
        check_id(id).map_err(|_| SharedError::NotFound(id.to_string()))?;
        let holder = LockHolder::current(jiff::Timestamp::now(), Some("dygram exec rm --store"));
        let lease = match self.store.lease(id, &holder) {
            Err(StoreError::NoRun { .. }) => return Ok(false),
            leased => leased.map_err(store_error(id))?,
        };
        self.store.remove(lease).map_err(store_error(id))?;
        Ok(true)
    }

    /// `exec clean --store`: removes the executions `which` selects, as [`super::Executions::clean`]
    /// does in a folder; one a caller holds is kept.
    pub fn clean(&self, which: super::Cleaning) -> Result<super::Cleaned, SharedError> {
        super::clean::clean_among(
            self.list()?,
            which,
            |id| self.remove(id),
            |e| match e {
                SharedError::Busy { id, holder } => Ok(super::SessionError::Busy { id, holder }),
                other => Err(other),
            },
        )
    }

    /// The executions in the store, most recent call first (as [`super::Executions::list`]);
    /// one that has no commit yet (its first call is under way, or failed) has no metadata.
    pub fn list(&self) -> Result<Vec<Summary>, SharedError> {
        let ids = self
            .store
            .list()
            .map_err(|e| SharedError::Connect(Box::new(e)))?;
        let mut all = Vec::with_capacity(ids.len());
        for id in ids {
            let bytes = self
                .store
                .get(&id, "state.json")
                .map_err(store_error(&id))?;
            let state = bytes
                .filter(|b| !b.is_empty())
                .and_then(|b| serde_json::from_slice::<StateFile>(&b).ok());
            all.push(Summary {
                metadata: state.as_ref().and_then(|s| s.metadata.clone()),
                current_nodes: state.map(super::current_nodes_of).unwrap_or_default(),
                set_aside: None,
                id,
            });
        }
        let last_call = |s: &Summary| s.metadata.as_ref().map(|m| m.last_executed_at.clone());
        all.sort_by(|a, b| last_call(b).cmp(&last_call(a)).then(a.id.cmp(&b.id)));
        Ok(all)
    }
}
