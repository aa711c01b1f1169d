//! The working copy of a run kept in the store: choosing its workspace, rebuilding its
//! `.delta/<run>/` from the store before the engine starts, and keeping its `io/` records in the
//! store when the process lets the run go.

use std::path::{Path, PathBuf};

use store::{Clock, Flush, Lease, RunStore, Seq, StoreError};

use super::{FleetError, METADATA, PLACE, Place, Submission, get_json};
use crate::metadata::{RunMetadata, RunStatus, TokenTotals, process_name};
use crate::runs::{self, OpenError};
use crate::workspace::{self, RunDir};

/// `io/` records larger than this stay in the working copy only (the store is for the run's
/// record, not for bulk output; the journal holds every observation anyway).
pub const MAX_IO_DOCUMENT: u64 = 1 << 20;

/// The workspace a run is worked in, and whether it is the one recorded for it (whose process
/// records are then complete).
#[derive(Debug)]
pub struct WorkingCopy {
    /// The workspace.
    pub workspace: PathBuf,
    /// It is the run's recorded working copy (or the run has none yet).
    pub recorded: bool,
    /// The workspace's lock, held while the copy is rebuilt (its `LATEST` and temporary files are
    /// shared with the other runs of the workspace); let go before the runner takes it.
    pub lock: Option<store::RunLock>,
}

/// Why a run's working copy cannot be used now: another process works in its workspace (a run
/// sharing it, or the process this run was taken from, paused). The run waits in the queue.
#[derive(Debug, Clone)]
pub struct Held {
    /// The workspace.
    pub workspace: PathBuf,
    /// Its lock.
    pub lock: PathBuf,
    /// Who holds it, when known.
    pub holder: Option<store::LockHolder>,
}

impl Held {
    /// The reason, for people.
    pub fn reason(&self) -> String {
        format!(
            "waits for its workspace {}, held by {}",
            self.workspace.display(),
            self.holder.as_ref().map_or_else(
                || "another process".to_string(),
                store::LockHolder::describe
            )
        )
    }
}

/// What became of the choice of a working copy.
#[derive(Debug)]
pub enum Choice {
    /// Work here.
    Copy(WorkingCopy),
    /// The run's workspace is held: wait.
    Held(Held),
}

/// Whether a workspace can be worked in now.
enum Usable {
    /// Free: its lock, taken.
    Yes(store::RunLock),
    /// Held by a live process.
    Held(Held),
    /// Not here: the recorded copy is on a machine (or storage) this process does not reach.
    OutOfReach,
}

/// Chooses the workspace for `lease`'s run: the recorded one, the submission's, or a new folder under
/// `dir`. A workspace that another process holds is waited for (the process that left it may still
/// have tools running there, and its files are the run's): a fresh copy is made only when the
/// recorded one is out of reach from here.
pub fn choose(
    store: &dyn RunStore,
    lease: &Lease,
    submission: &Submission,
    dir: &Path,
    clock: Clock,
) -> Result<Choice, FleetError> {
    let run = lease.run();
    let recorded: Option<Place> = get_json(store, run, PLACE)?;
    let first_choice = match &recorded {
        Some(place) => place.workspace.clone(),
        None => match &submission.workspace {
            Some(ws) => ws.clone(),
            None => dir.join(run),
        },
    };
    // A recorded workspace that is not here is on a machine (or storage) this process does not
    // reach. One that is here but lacks the run's folder while the run has begun lost the
    // process records of the copy that worked on it: it is used, but says nothing is known.
    let reachable = recorded.is_none() || first_choice.is_dir();
    match usable(&first_choice, reachable, clock)? {
        Usable::Yes(lock) => {
            let records_here = recorded.is_none()
                || first_choice.join(".delta").join(run).is_dir()
                || store.read_tail(run, 1)?.len == 0;
            Ok(Choice::Copy(WorkingCopy {
                workspace: first_choice.canonicalize().unwrap_or(first_choice),
                recorded: records_here,
                lock: Some(lock),
            }))
        }
        Usable::Held(held) => Ok(Choice::Held(held)),
        Usable::OutOfReach => {
            let fresh = dir.join(format!("{run}.{}", lease.epoch()));
            let workspace = workspace::prepare(&fresh)?;
            let lock = runs::lock_workspace(&workspace, clock, "delta worker").ok();
            Ok(Choice::Copy(WorkingCopy {
                workspace,
                recorded: false,
                lock,
            }))
        }
    }
}

/// Whether `ws` can be worked in now (then its lock is taken).
fn usable(ws: &Path, reachable: bool, clock: Clock) -> Result<Usable, FleetError> {
    if !reachable {
        return Ok(Usable::OutOfReach);
    }
    let ws = workspace::prepare(ws)?;
    match runs::lock_workspace(&ws, clock, "delta worker") {
        Ok(lock) => Ok(Usable::Yes(lock)),
        Err(OpenError::Busy { lock, holder }) => Ok(Usable::Held(Held {
            workspace: ws,
            lock,
            holder,
        })),
        Err(OpenError::Store(StoreError::Busy { path, holder })) => Ok(Usable::Held(Held {
            workspace: ws,
            lock: path,
            holder,
        })),
        Err(e) => Err(FleetError::Runner(Box::new(
            crate::runner::RunnerError::Open {
                source: Box::new(e),
                workspace: ws,
            },
        ))),
    }
}

/// Records `copy` as the run's working copy and rebuilds its `.delta/<run>/` from the store's
/// journal and metadata. Returns whether the run has begun (its journal has records).
pub fn materialize(
    store: &dyn RunStore,
    lease: &mut Lease,
    copy: &WorkingCopy,
    submission: &Submission,
    clock: Clock,
) -> Result<bool, FleetError> {
    let run_id = lease.run().to_string();
    let place = Place {
        workspace: copy.workspace.clone(),
        host: store::hostname(),
    };
    let bytes = serde_json::to_vec_pretty(&place).map_err(|source| FleetError::BadDocument {
        run: run_id.clone(),
        key: PLACE,
        source,
    })?;
    store.put(lease, PLACE, &bytes, Flush::Durable)?;
    let journal = store.read_journal(&run_id, Seq(0))?;
    let run = RunDir::new(&copy.workspace, &run_id);
    if journal.entries.is_empty() {
        // Nothing journaled: whatever a previous attempt left here never began.
        if run.root.exists() {
            std::fs::remove_dir_all(&run.root)
                .map_err(|e| StoreError::io("remove", &run.root, e))?;
        }
        return Ok(false);
    }
    if !run.root.exists() {
        RunDir::create(&copy.workspace, &run_id)?;
    }
    let mut text = String::with_capacity(journal.entries.iter().map(|e| e.json.len() + 1).sum());
    for entry in &journal.entries {
        text.push_str(&entry.json);
        text.push('\n');
    }
    store::write_atomic(&run.journal(), text.as_bytes())?;
    // The store's journal is the run's record, and its question the one a person was shown: the
    // copy is sealed from them (a seal of this copy's earlier journal says nothing of it).
    let question = get_json::<crate::engine::InteractionRequest>(store, &run_id, super::QUESTION)?;
    let mut metadata = match get_json::<RunMetadata>(store, &run_id, METADATA)? {
        Some(metadata) => metadata,
        None => begun(&run_id, submission, clock),
    };
    // The agent is the submission's, whatever the metadata says.
    let agent = submission.agent.display().to_string();
    crate::seal::write_for(&run, text.as_bytes(), question.as_ref(), &agent)?;
    if !copy.recorded {
        // The process records of the copy that ran before are not here: say nothing is known.
        metadata.boot_id = None;
    }
    metadata.save(&run.metadata())?;
    workspace::set_latest(&copy.workspace, &run_id)?;
    Ok(true)
}

/// The metadata of a run whose first events were journaled but whose metadata never reached the
/// store (its process died in between): running, so that it is resumed as interrupted.
fn begun(run_id: &str, submission: &Submission, clock: Clock) -> RunMetadata {
    let now = clock.now();
    RunMetadata {
        run_id: run_id.to_string(),
        start_time: crate::events::timestamp(now),
        agent_ref: submission.agent.display().to_string(),
        task: submission.task.clone(),
        status: RunStatus::Running,
        iterations_completed: 0,
        pid: 0,
        hostname: String::new(),
        start_time_unix: now.as_millisecond(),
        process_name: process_name(),
        boot_id: None,
        end_time: None,
        usage: TokenTotals::default(),
        extra: serde_json::Map::new(),
    }
}

/// Keeps the run's new `io/` records in the store (each up to [`MAX_IO_DOCUMENT`]), not flushed:
/// the journal is the record; these are its details.
pub fn upload_io(
    store: &dyn RunStore,
    lease: &mut Lease,
    run: &RunDir,
) -> Result<usize, FleetError> {
    let mut files = Vec::new();
    collect(&run.root.join("io"), "io", &mut files);
    // Each record is written once, under a name of its own: what an earlier process sent is
    // not sent again.
    let kept: std::collections::HashSet<String> =
        store.keys(lease.run(), "io/")?.into_iter().collect();
    let mut sent = 0;
    for (key, path) in files.into_iter().filter(|(key, _)| !kept.contains(key)) {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.len() > MAX_IO_DOCUMENT || store::runs::validate_key(&key).is_err() {
            continue;
        }
        let bytes = std::fs::read(&path).map_err(|e| StoreError::io("read", &path, e))?;
        store.put(lease, &key, &bytes, Flush::Lazy)?;
        sent += 1;
    }
    Ok(sent)
}

/// The files under `dir`, with their keys (`prefix/…`).
fn collect(dir: &Path, prefix: &str, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let key = format!("{prefix}/{name}");
        match entry.file_type() {
            Ok(t) if t.is_dir() => collect(&entry.path(), &key, out),
            Ok(t) if t.is_file() => out.push((key, entry.path())),
            _ => {}
        }
    }
}
