//! Existing runs: finding them in a workspace, listing them, and taking one over to continue it.

use std::path::{Path, PathBuf};

use store::{LockHolder, LockState, RunLock, StoreError};

use crate::metadata::{RunMetadata, RunStatus};
use crate::workspace::{self, LayoutError, RunDir};

/// A run as `list-runs` shows it.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// Its files.
    pub run: RunDir,
    /// Its metadata.
    pub metadata: RunMetadata,
    /// Its status, corrected by the lock: RUNNING with nobody holding the lock is INTERRUPTED.
    pub status: RunStatus,
    /// Whether it was RUNNING when its process died.
    pub crashed: bool,
    /// Why its `metadata.json` could not be used (missing or unreadable): `metadata` was then
    /// rebuilt from the journal.
    pub damaged: Option<String>,
}

/// The status a run really has: RUNNING but unlocked means its process died.
pub fn effective_status(metadata: &RunMetadata, lock: &LockState) -> (RunStatus, bool) {
    match (metadata.status, lock) {
        (RunStatus::Running, LockState::Held(_)) => (RunStatus::Running, false),
        (RunStatus::Running, _) => (RunStatus::Interrupted, true),
        (other, _) => (other, false),
    }
}

/// The status a run has, from its lock, metadata and journal: a run whose journal has ended
/// ([`crate::tail::ending`]) is COMPLETED or FAILED whatever its metadata says (its process died
/// between journaling the end and saving the metadata); otherwise as [`effective_status`]. The
/// second value says whether its process died while it was RUNNING.
pub fn status_of(run: &RunDir, metadata: &RunMetadata, lock: &LockState) -> (RunStatus, bool) {
    let (status, crashed) = effective_status(metadata, lock);
    if matches!(status, RunStatus::Interrupted | RunStatus::WaitingForInput)
        && let Ok(Some(ending)) = crate::tail::ending(&run.journal())
    {
        return (ending.status.into(), false);
    }
    (status, crashed)
}

/// The run's `metadata.json`, or, when it is missing or cannot be read, its metadata rebuilt from
/// the journal ([`rebuild_metadata`]) with why the file was not used. Fails with the file's error
/// when the journal cannot tell either.
pub fn metadata_or_journal(run: &RunDir) -> Result<(RunMetadata, Option<String>), StoreError> {
    let error = match RunMetadata::load(&run.metadata()) {
        Ok(metadata) => return Ok((metadata, None)),
        Err(e) => e,
    };
    let damage = if run.metadata().exists() {
        format!("metadata.json is unreadable ({error})")
    } else {
        "metadata.json is missing".to_string()
    };
    match rebuild_metadata(run) {
        Ok(Some(metadata)) => Ok((metadata, Some(damage))),
        Ok(None) | Err(_) => Err(error),
    }
}

/// A run's metadata as its journal tells it: id, task and agent from `RUN_START`, the start from
/// its first line, iterations and tokens from the answers, and the status: the end's when the
/// journal has ended, WAITING_FOR_INPUT with a pending question, else RUNNING (which the lock turns
/// into INTERRUPTED once no process holds it). `None` without a `RUN_START`.
pub fn rebuild_metadata(run: &RunDir) -> Result<Option<RunMetadata>, StoreError> {
    let (envelopes, _) = crate::events::read(&run.journal())?;
    let typed = crate::context::typed(&envelopes);
    let Some((run_id, task, agent_ref)) = typed.iter().find_map(|e| match e {
        crate::events::Event::RunStart {
            run_id,
            task,
            agent_ref,
        } => Some((run_id.clone(), task.clone(), agent_ref.clone())),
        _ => None,
    }) else {
        return Ok(None);
    };
    let start_time = envelopes
        .first()
        .map(|e| e.timestamp.clone())
        .unwrap_or_default();
    let start_time_unix = start_time
        .parse::<jiff::Timestamp>()
        .map_or(0, |t| t.as_millisecond());
    let ending = crate::tail::ending(&run.journal())?;
    let status = match &ending {
        Some(end) => end.status.into(),
        None if run.interaction().join("request.json").is_file() => RunStatus::WaitingForInput,
        None => RunStatus::Running,
    };
    let mut metadata = RunMetadata {
        run_id,
        start_time,
        agent_ref,
        task,
        status,
        iterations_completed: 0,
        pid: 0,
        hostname: String::new(),
        start_time_unix,
        process_name: crate::metadata::process_name(),
        boot_id: None,
        end_time: ending.map(|e| e.timestamp),
        usage: Default::default(),
        extra: Default::default(),
    };
    crate::engine::catch_up(&mut metadata, &typed);
    Ok(Some(metadata))
}

/// Brings `metadata` in line with a journal that has ended: its status, end time, iterations and
/// tokens. Returns the status it said before, or `None` when the journal has not ended or the
/// metadata says so already.
pub fn repair_ended(
    run: &RunDir,
    metadata: &mut RunMetadata,
) -> Result<Option<RunStatus>, StoreError> {
    if matches!(metadata.status, RunStatus::Completed | RunStatus::Failed) {
        return Ok(None);
    }
    let Some(ending) = crate::tail::ending(&run.journal())? else {
        return Ok(None);
    };
    let before = metadata.status;
    let (envelopes, _) = crate::events::read(&run.journal())?;
    crate::engine::catch_up(metadata, &crate::context::typed(&envelopes));
    metadata.status = ending.status.into();
    metadata.end_time = Some(ending.timestamp);
    metadata.save(&run.metadata())?;
    Ok(Some(before))
}

/// Every run of `workspace` that has metadata, newest first.
pub fn list(workspace: &Path) -> Result<Vec<RunSummary>, StoreError> {
    let dir = workspace.join(".delta");
    let entries = std::fs::read_dir(&dir).map_err(|e| StoreError::Io {
        action: "read",
        path: dir.clone(),
        source: e,
    })?;
    let mut runs = Vec::new();
    for entry in entries.flatten() {
        let Ok(id) = entry.file_name().into_string() else {
            continue;
        };
        if id.starts_with('.') || store::validate_id(&id).is_err() || !entry.path().is_dir() {
            continue;
        }
        let run = RunDir::new(workspace, &id);
        // A folder with neither metadata nor journal holds no run (yet).
        let Ok((metadata, damaged)) = metadata_or_journal(&run) else {
            continue;
        };
        let lock = RunLock::probe(&run.lock()).unwrap_or(LockState::Free);
        let (status, crashed) = status_of(&run, &metadata, &lock);
        runs.push(RunSummary {
            run,
            metadata,
            status,
            crashed,
            damaged,
        });
    }
    runs.sort_by(|a, b| {
        b.metadata
            .start_time_unix
            .cmp(&a.metadata.start_time_unix)
            .then_with(|| b.run.run_id.cmp(&a.run.run_id))
    });
    Ok(runs)
}

/// The run `LATEST` names, or else the newest run with metadata.
pub fn latest(workspace: &Path) -> Option<RunDir> {
    if let Some(id) = workspace::latest(workspace) {
        let run = RunDir::new(workspace, &id);
        if run.metadata().is_file() {
            return Some(run);
        }
    }
    list(workspace).ok()?.into_iter().next().map(|s| s.run)
}

/// A run taken over by this process.
#[derive(Debug)]
pub struct Opened {
    /// Its files.
    pub run: RunDir,
    /// Its metadata as found.
    pub metadata: RunMetadata,
    /// The workspace's lock (keep it for the whole process).
    pub workspace_lock: RunLock,
    /// The run's lock (keep it for the whole process).
    pub lock: RunLock,
    /// The status to act on: a crashed RUNNING run is INTERRUPTED.
    pub status: RunStatus,
    /// When the previous process died while the run was RUNNING: who it was.
    pub crashed: Option<String>,
    /// How its `metadata.json` was repaired from the journal, if it was.
    pub repaired: Option<Repair>,
}

/// How a run's `metadata.json` was repaired from its journal when the run was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    /// It said `was` though the journal had ended: the process died between the two writes.
    Ended {
        /// What it said.
        was: RunStatus,
    },
    /// It was missing or unreadable (why): it was rebuilt from the journal.
    Rebuilt {
        /// Why it could not be used.
        damage: String,
    },
}

/// Why a run could not be taken over.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// No such run.
    #[error("no run {0} in this workspace")]
    NotFound(String),
    /// A live process works on the run, or in its workspace.
    #[error("a run of this workspace is currently executing ({})", .holder.as_ref().map_or_else(|| "another process".to_string(), LockHolder::describe))]
    Busy {
        /// The lock that is held: the workspace's or the run's.
        lock: PathBuf,
        /// Who holds it.
        holder: Option<LockHolder>,
    },
    /// The run has metadata but no journal to resume from.
    #[error("run {run_id} cannot be resumed: its journal {} is {state}", .path.display())]
    NoJournal {
        /// The run.
        run_id: String,
        /// The journal file.
        path: PathBuf,
        /// Missing or empty.
        state: crate::events::JournalState,
    },
    /// The workspace's `.delta/` is damaged.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// Files could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl OpenError {
    /// What to do about it, when there is something to say beyond the message.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::NoJournal { path, .. } => {
                let workspace = path
                    .parent()
                    .and_then(Path::parent)
                    .and_then(Path::parent)
                    .unwrap_or(Path::new("."));
                let folder = path.parent().unwrap_or(Path::new("."));
                Some(format!(
                    "the journal is the run's only record of what happened (rebuilding the run from \
                     metadata.json would run its tools again); start a new run instead: delta run -w {} \
                     --run-id NEW -m \"...\", or remove the run folder {}",
                    workspace.display(),
                    folder.display()
                ))
            }
            Self::Layout(e) => Some(e.hint()),
            Self::NotFound(_) | Self::Busy { .. } | Self::Store(_) => None,
        }
    }
}

fn busy(err: StoreError) -> OpenError {
    match err {
        StoreError::Busy { path, holder } => OpenError::Busy { lock: path, holder },
        other => other.into(),
    }
}

/// Takes the workspace's lock (`.delta/workspace.lock`) without waiting: one delta process works in a
/// workspace at a time, so that two runs never share its files and the choice between resuming the
/// latest run and starting a new one is made by one process. Fails with [`OpenError::Busy`] when a
/// live process holds it.
pub fn lock_workspace(
    workspace: &Path,
    clock: store::Clock,
    command: &str,
) -> Result<RunLock, OpenError> {
    workspace::check_layout(workspace)?;
    let holder = LockHolder::current(clock.now(), Some(command));
    let lock = RunLock::acquire(&workspace::lock_path(workspace), &holder)
        .map(|acquired| acquired.lock)
        .map_err(busy)?;
    // Whatever run this process works on, nothing a dead process left running goes on beside it, and
    // no half-written file of one stays behind.
    crate::process::record::sweep_workspace(workspace, crate::process::STOP_GRACE)?;
    workspace::remove_stale_temporaries(workspace);
    Ok(lock)
}

/// Locks the workspace, then run `run_id` of it (failing fast if a live process holds either), then
/// reads the run. A run whose journal is missing or holds no event is refused
/// ([`OpenError::NoJournal`]).
pub fn open(
    workspace: &Path,
    run_id: &str,
    clock: store::Clock,
    command: &str,
) -> Result<Opened, OpenError> {
    let workspace_lock = lock_workspace(workspace, clock, command)?;
    open_locked(workspace, run_id, workspace_lock, clock, command)
}

/// [`open`] for a caller that holds the workspace's lock already.
pub fn open_locked(
    workspace: &Path,
    run_id: &str,
    workspace_lock: RunLock,
    clock: store::Clock,
    command: &str,
) -> Result<Opened, OpenError> {
    let run = RunDir::new(workspace, run_id);
    if !run.holds_run() {
        return Err(OpenError::NotFound(run_id.to_string()));
    }
    let holder = LockHolder::current(clock.now(), Some(command));
    let acquired = RunLock::acquire(&run.lock(), &holder).map_err(busy)?;
    if let Some(state) = crate::events::journal_state(&run.journal())? {
        return Err(OpenError::NoJournal {
            run_id: run_id.to_string(),
            path: run.journal(),
            state,
        });
    }
    let (mut metadata, damage) = metadata_or_journal(&run)?;
    let repaired = match damage {
        Some(damage) => {
            metadata.save(&run.metadata())?;
            Some(Repair::Rebuilt { damage })
        }
        None => repair_ended(&run, &mut metadata)?.map(|was| Repair::Ended { was }),
    };
    let (status, crashed) = match metadata.status {
        RunStatus::Running => {
            let who = acquired
                .stale
                .as_ref()
                .map(LockHolder::describe)
                .unwrap_or_else(|| format!("pid {} on {}", metadata.pid, metadata.hostname));
            (
                RunStatus::Interrupted,
                Some(format!(
                    "Recovered a crashed run: its process ({who}) stopped while the run was RUNNING"
                )),
            )
        }
        other => (other, None),
    };
    Ok(Opened {
        run,
        metadata,
        workspace_lock,
        lock: acquired.lock,
        status,
        crashed,
        repaired,
    })
}

/// Why a run could not be removed.
#[derive(Debug, thiserror::Error)]
pub enum RemoveError {
    /// The id is not one a run can have.
    #[error(transparent)]
    InvalidId(#[from] crate::workspace::InvalidRunId),
    /// It could not be taken (missing, busy, damaged workspace).
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Its record is in a store: this folder is only its working copy.
    #[error("run {0} is kept in a store; this folder is only its working copy")]
    KeptInStore(String),
    /// The processes of its shell sessions could not be stopped (nothing was removed).
    #[error("cannot stop the shell sessions of run {run}: {source}")]
    Sessions {
        run: String,
        source: Box<crate::shells::ShellError>,
    },
    /// Its files could not be removed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The name a run folder takes while it is being removed: hidden from listings, and cleared by the
/// next process that locks the workspace if a removal was cut short.
pub const REMOVING_PREFIX: &str = ".removing-";

/// Removes run `run_id` of `workspace` with all its files, under the workspace's and the run's locks
/// (a run a live process works on is [`OpenError::Busy`]). What the run started that outlives its
/// processes (see [`stop_processes`]) is stopped first. The folder is then renamed out of sight,
/// then deleted, so that a removal cut short never leaves half a run; `LATEST` then names the
/// newest run left, if any.
pub fn remove(workspace: &Path, run_id: &str, clock: store::Clock) -> Result<(), RemoveError> {
    crate::workspace::validate_run_id(run_id)?;
    let workspace_lock = lock_workspace(workspace, clock, "delta rm")?;
    let run = RunDir::new(workspace, run_id);
    if !run.holds_run() {
        return Err(OpenError::NotFound(run_id.to_string()).into());
    }
    let holder = LockHolder::current(clock.now(), Some("delta rm"));
    let run_lock = RunLock::acquire(&run.lock(), &holder).map_err(busy)?.lock;
    if run.root.join(crate::events::UPSTREAM_MARKER).exists() {
        return Err(RemoveError::KeptInStore(run_id.to_string()));
    }
    stop_processes(&run)?;
    let aside = workspace
        .join(".delta")
        .join(format!("{REMOVING_PREFIX}{run_id}"));
    remove_leftover(&aside)?;
    std::fs::rename(&run.root, &aside).map_err(|e| StoreError::io("rename", &run.root, e))?;
    store::atomic::sync_dir(&workspace.join(".delta"))?;
    remove_leftover(&aside)?;
    crate::seal::remove(&run);
    if crate::workspace::latest(workspace).as_deref() == Some(run_id) {
        match list(workspace)?.first() {
            Some(newest) => crate::workspace::set_latest(workspace, &newest.run.run_id)?,
            None => {
                let latest = workspace.join(".delta/LATEST");
                std::fs::remove_file(&latest).map_err(|e| StoreError::io("remove", &latest, e))?;
            }
        }
    }
    drop((run_lock, workspace_lock));
    Ok(())
}

/// Stops what run `run` started that outlives a delta process while the run waits (for an answer,
/// or after a pause between turns) or after its process died: the processes of the shell sessions
/// it owns (their saved state stays) and the MCP servers recorded in its folder. The processes of
/// its tools and hooks are stopped by the workspace's lock ([`lock_workspace`]). For the holder of
/// the run's lock.
fn stop_processes(run: &RunDir) -> Result<(), RemoveError> {
    crate::mcp_servers::stop_recorded(&run.root.join(crate::mcp_servers::RECORD_FILE));
    let sessions = crate::shells::ShellSessions::new(
        run.workspace.join(crate::shells::DEFAULT_DIR),
        crate::shells::host_program(),
        Vec::new(),
    );
    sessions
        .stop_owned(&run.run_id)
        .map_err(|source| RemoveError::Sessions {
            run: run.run_id.clone(),
            source: Box::new(source),
        })?;
    Ok(())
}

/// Deletes what a removal left at `aside` (nothing there is fine).
fn remove_leftover(aside: &Path) -> Result<(), StoreError> {
    match std::fs::remove_dir_all(aside) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io("remove", aside, e)),
    }
}

/// The workspace `delta` used last (any agent): `$HOME/.delta/LAST_WORKSPACE`.
pub fn last_workspace_file() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(".delta").join("LAST_WORKSPACE"))
}

/// Records `workspace` as the last used in `file` (best effort: a read-only home must not stop a run).
/// It is a convenience pointer, so it is not flushed to disk, and not rewritten when it already says
/// so.
/// The path is kept byte for byte (spaces at its ends and bytes that are not UTF-8 included).
pub fn remember_workspace(file: &Path, workspace: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let bytes = workspace.as_os_str().as_bytes();
    if std::fs::read(file).ok().as_deref() != Some(bytes)
        && let Some(dir) = file.parent()
        && std::fs::create_dir_all(dir).is_ok()
    {
        let _ = store::atomic::write_atomic_lazy(file, bytes);
    }
}

/// The workspace recorded in `file` by [`remember_workspace`] (it may have been removed since),
/// exactly as recorded; one line break at the end (an editor's) is not part of it.
pub fn last_workspace(file: &Path) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = std::fs::read(file).ok()?;
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    (!bytes.is_empty()).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(status: RunStatus) -> RunMetadata {
        RunMetadata {
            run_id: "r".into(),
            start_time: "s".into(),
            agent_ref: "/a".into(),
            task: "t".into(),
            status,
            iterations_completed: 0,
            pid: 1,
            hostname: "h".into(),
            start_time_unix: 0,
            process_name: "delta".into(),
            boot_id: None,
            end_time: None,
            usage: Default::default(),
            extra: Default::default(),
        }
    }

    #[test]
    fn running_without_a_lock_holder_is_interrupted() {
        assert_eq!(
            effective_status(&meta(RunStatus::Running), &LockState::Free),
            (RunStatus::Interrupted, true)
        );
        assert_eq!(
            effective_status(&meta(RunStatus::Running), &LockState::Held(None)),
            (RunStatus::Running, false)
        );
        assert_eq!(
            effective_status(&meta(RunStatus::Completed), &LockState::Free),
            (RunStatus::Completed, false)
        );
    }

    fn journal_with_one_event(run: &RunDir) {
        let mut journal = crate::events::RunJournal::open(&run.journal(), store::Clock::System)
            .unwrap()
            .journal;
        journal
            .append(&crate::events::Event::UserMessage {
                content: "t".into(),
            })
            .unwrap();
    }

    #[test]
    fn the_run_lock_is_checked_under_the_workspace_lock() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path(), "r1").unwrap();
        meta(RunStatus::Running).save(&run.metadata()).unwrap();
        journal_with_one_event(&run);
        // An older delta (no workspace lock) holding the run.
        let _run_lock = RunLock::acquire(
            &run.lock(),
            &LockHolder::current(jiff::Timestamp::now(), Some("old delta")),
        )
        .unwrap();
        match open(dir.path(), "r1", store::Clock::System, "test") {
            Err(OpenError::Busy { lock, holder }) => {
                assert!(lock.ends_with("run.lock"));
                assert_eq!(holder.unwrap().command.as_deref(), Some("old delta"));
            }
            other => panic!("expected busy, got {other:?}"),
        }
        // The failed attempt released the workspace again.
        assert!(lock_workspace(dir.path(), store::Clock::System, "t").is_ok());
    }

    #[test]
    fn a_run_without_journal_events_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path(), "r1").unwrap();
        meta(RunStatus::Interrupted).save(&run.metadata()).unwrap();
        for (content, state) in [
            (None, "missing"),
            (Some(""), "empty"),
            (Some("\n\n"), "empty"),
            (Some("{\"seq\":1,\"type\""), "empty"),
        ] {
            if let Some(text) = content {
                std::fs::write(run.journal(), text).unwrap();
            }
            match open(dir.path(), "r1", store::Clock::System, "test") {
                Err(e @ OpenError::NoJournal { .. }) => {
                    assert!(e.to_string().ends_with(&format!("is {state}")), "{e}");
                    assert!(e.hint().unwrap().contains("--run-id NEW"), "{e}");
                }
                other => panic!("{content:?}: expected NoJournal, got {other:?}"),
            }
        }
        std::fs::remove_file(run.journal()).unwrap();
        journal_with_one_event(&run);
        assert!(open(dir.path(), "r1", store::Clock::System, "test").is_ok());
    }

    #[test]
    fn open_locks_and_recovers_crashed_runs() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path(), "r1").unwrap();
        meta(RunStatus::Running).save(&run.metadata()).unwrap();
        journal_with_one_event(&run);
        let opened = open(dir.path(), "r1", store::Clock::System, "test").unwrap();
        assert_eq!(opened.status, RunStatus::Interrupted);
        assert!(
            opened
                .crashed
                .as_deref()
                .unwrap()
                .starts_with("Recovered a crashed run")
        );
        match open(dir.path(), "r1", store::Clock::System, "test") {
            Err(OpenError::Busy { lock, .. }) => assert!(lock.ends_with("workspace.lock")),
            other => panic!("expected busy, got {other:?}"),
        }
        // The workspace stays locked while the run is open.
        let held = lock_workspace(dir.path(), store::Clock::System, "t");
        assert!(matches!(held, Err(OpenError::Busy { .. })));
        drop(opened);
        assert!(matches!(
            open(dir.path(), "nope", store::Clock::System, "t"),
            Err(OpenError::NotFound(_))
        ));
    }
}
