//! Looking at the store's runs and moving runs into it: `list-runs --store`, `export`, `import`.

use std::path::Path;

use serde::Serialize;
use serde::de::IgnoredAny;
use store::{Clock, LockHolder, RunStore, Seq, StoreError};

use super::{
    ERROR, FleetError, METADATA, PLACE, Place, SUBMISSION, Submission, WAITING, Waiting, copy,
    get_json,
};
use crate::metadata::{RunMetadata, RunStatus};
use crate::runner::RunnerError;
use crate::runs::{self, OpenError};
use crate::workspace;

/// A run of the store, as `delta list-runs --store --format json` prints it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct StoreRun {
    /// Its id.
    pub run_id: String,
    /// Its status (`QUEUED`: submitted, no worker has started it yet; `NOT_STARTED`: taken out of
    /// the queue before it began). A RUNNING run whose lease ran out is INTERRUPTED.
    pub status: String,
    /// It waits for a worker, or a worker works on it.
    pub queued: bool,
    /// Who holds its lease while it holds (`pid@host`, command).
    pub holder: Option<String>,
    /// Leases taken on it so far.
    pub epoch: u64,
    /// Where its working copy is, once a process worked on it.
    pub workspace: Option<String>,
    /// Its agent.
    pub agent: String,
    /// Its task.
    pub task: String,
    /// Iterations completed.
    pub iterations: u64,
    /// When it was submitted or imported (RFC 3339).
    pub created: String,
    /// When it last stopped.
    pub end_time: Option<String>,
    /// Why a worker could not work on it (it then left the queue), or why it failed.
    pub error: Option<String>,
    /// Documents of the run that could not be read (the run is shown from what could).
    pub damaged: Option<String>,
    /// Why a queued run waits instead of being worked on (its workspace is held), while it does.
    pub waiting: Option<String>,
    /// The question a WAITING_FOR_INPUT run waits on (an `ask_human` question or an approval).
    pub pending_question: Option<String>,
}

/// A document of a run, or `None` when it is absent; one that cannot be read is noted in `damage`
/// (the listing goes on without it). A failing store is an error.
fn document<T: serde::de::DeserializeOwned>(
    store: &dyn RunStore,
    run: &str,
    key: &'static str,
    damage: &mut Vec<String>,
) -> Result<Option<T>, FleetError> {
    match get_json(store, run, key) {
        Ok(value) => Ok(value),
        Err(e @ FleetError::BadDocument { .. }) => {
            damage.push(e.to_string());
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Every run of the store, by id. A run whose documents cannot be read is listed all the same,
/// from its journal, with what was damaged.
pub fn list(store: &dyn RunStore) -> Result<Vec<StoreRun>, FleetError> {
    let mut out = Vec::new();
    for row in store.rows()? {
        out.push(list_one(store, &row)?);
    }
    Ok(out)
}

/// One run of [`list`].
fn list_one(store: &dyn RunStore, row: &store::RunRow) -> Result<StoreRun, FleetError> {
    let mut damage = Vec::new();
    let metadata: Option<RunMetadata> = document(store, &row.run, METADATA, &mut damage)?;
    let submission: Option<Submission> = document(store, &row.run, SUBMISSION, &mut damage)?;
    let place: Option<Place> = document(store, &row.run, PLACE, &mut damage)?;
    let error: Option<serde_json::Value> = document(store, &row.run, ERROR, &mut damage)?;
    let waiting: Option<Waiting> = document(store, &row.run, WAITING, &mut damage)?;
    let question: Option<crate::engine::InteractionRequest> =
        document(store, &row.run, super::QUESTION, &mut damage)?;
    // The journal's end says how a run ended, whatever its metadata says (or when it is lost).
    let tail = store.read_tail(&row.run, super::TAIL_LINES)?;
    let from_end = || tail.entries.iter().rev().map(|e| e.json.as_bytes());
    let ending = crate::tail::ending_of(from_end());
    let status = match (&ending, &metadata, row.queued) {
        (Some(end), _, _) => RunStatus::from(end.status).as_str().to_string(),
        (None, Some(m), _) if m.status == RunStatus::Running && !row.live => {
            RunStatus::Interrupted.as_str().to_string()
        }
        (None, Some(m), _) => m.status.as_str().to_string(),
        (None, None, _) if tail.len > 0 && row.live => RunStatus::Running.as_str().to_string(),
        (None, None, _) if tail.len > 0 => RunStatus::Interrupted.as_str().to_string(),
        (None, None, true) => "QUEUED".to_string(),
        (None, None, false) => "NOT_STARTED".to_string(),
    };
    let (agent, task) = match (&metadata, &submission) {
        (Some(m), _) => (m.agent_ref.clone(), m.task.clone()),
        (None, Some(s)) => (s.agent.display().to_string(), s.task.clone()),
        (None, None) => (String::new(), String::new()),
    };
    let pending_question = question
        .filter(|_| status == RunStatus::WaitingForInput.as_str())
        .map(|q| q.prompt);
    let failure = (status == RunStatus::Failed.as_str())
        .then(|| crate::tail::failure_of(from_end()))
        .flatten();
    Ok(StoreRun {
        run_id: row.run.clone(),
        status,
        queued: row.queued,
        holder: row
            .holder
            .as_ref()
            .filter(|_| row.live)
            .map(LockHolder::describe),
        epoch: row.epoch,
        workspace: place.map(|p| p.workspace.display().to_string()),
        agent,
        task,
        iterations: metadata.as_ref().map_or(0, |m| m.iterations_completed),
        created: row.created.to_string(),
        end_time: ending
            .map(|e| e.timestamp)
            .or_else(|| metadata.and_then(|m| m.end_time)),
        error: error
            .filter(|_| !row.queued)
            .and_then(|e| e["error"].as_str().map(str::to_string))
            .or(failure),
        damaged: (!damage.is_empty()).then(|| damage.join("; ")),
        waiting: waiting
            .filter(|_| row.queued && !row.live)
            .and_then(|w| w.reason),
        pending_question,
    })
}

/// The run's journal as JSON lines (each with its line end), as `journal.jsonl` holds it.
pub fn export(
    store: &dyn RunStore,
    run_id: &str,
    out: &mut dyn FnMut(&str),
) -> Result<u64, FleetError> {
    workspace::validate_run_id(run_id)?;
    let mut after = Seq(0);
    let mut count = 0;
    loop {
        let read = store.read_journal(run_id, after)?;
        let Some(last) = read.entries.last() else {
            return Ok(count);
        };
        after = last.seq;
        for entry in &read.entries {
            out(&entry.json);
            count += 1;
        }
        if after.0 >= read.len {
            return Ok(count);
        }
    }
}

/// Moves run `run_id` of the workspace `ws` into the store (the workspace's copy stays, as the
/// run's working copy). The run must not be running; it is not queued (continue it with
/// `delta continue --store`).
///
/// The journal and the run's documents go in in one transaction: an import killed before it
/// committed leaves nothing in the store. What follows (the `io/` records, and the working copy's
/// `upstream.txt` that hands the run over to the store) is finished by `resume`, which accepts a
/// run the store has already when its journal there is the workspace's, line for line.
pub fn import(
    store: &dyn RunStore,
    ws: &Path,
    run_id: &str,
    resume: bool,
    clock: Clock,
) -> Result<u64, FleetError> {
    workspace::validate_run_id(run_id)?;
    let open_error = |source: OpenError| {
        FleetError::Runner(Box::new(RunnerError::Open {
            source: Box::new(source),
            workspace: ws.to_path_buf(),
        }))
    };
    let ws = ws
        .canonicalize()
        .map_err(|e| StoreError::io("open", ws, e))?;
    let opened = runs::open(&ws, run_id, clock, "delta import").map_err(open_error)?;
    // What goes to the store is what delta wrote, with the agent the run was made with.
    // A run without a seal (made before seals) is uploaded as found: a known limit.
    crate::seal::check_prefix(&opened.run, &opened.metadata.agent_ref, false)?;
    let path = opened.run.journal();
    let contents = store::journal::read_with(&path, |line| {
        serde_json::from_slice::<IgnoredAny>(line)
            .map(|_| String::from_utf8_lossy(line).into_owned())
    })?;
    let lines: Vec<&str> = contents.records.iter().map(String::as_str).collect();
    let holder = LockHolder::current(clock.now(), Some("delta import"));
    let documents = documents(&opened, &ws, clock)?;
    let documents: Vec<(&str, &[u8])> = documents.iter().map(|(k, b)| (*k, b.as_slice())).collect();
    let mut lease = match store.create_whole(run_id, &holder, &lines, &documents) {
        Ok(lease) => lease,
        Err(StoreError::Exists { .. }) if resume => {
            let lease = store.lease(run_id, &holder)?;
            if !same_journal(store, run_id, &lines)? {
                return Err(FleetError::ImportDiffers(run_id.to_string()));
            }
            lease
        }
        Err(e @ StoreError::Exists { .. }) => return Err(FleetError::ImportExists(e)),
        Err(e) => return Err(e.into()),
    };
    copy::upload_io(store, &mut lease, &opened.run)?;
    // From now on the store holds the record: the workspace's copy is only a working copy.
    let marker = opened.run.root.join(crate::events::UPSTREAM_MARKER);
    let note = format!(
        "run {run_id} was imported into a PostgreSQL store; this folder is its working copy. Continue it with: delta continue --store URL --run-id {run_id}\n"
    );
    store::write_atomic(&marker, note.as_bytes())?;
    Ok(contents.records.len() as u64)
}

/// The documents an imported run starts with: its submission (as if submitted from this
/// workspace), its place (this workspace) and its metadata.
fn documents(
    opened: &runs::Opened,
    ws: &Path,
    clock: Clock,
) -> Result<Vec<(&'static str, Vec<u8>)>, FleetError> {
    let mut metadata = opened.metadata.clone();
    metadata.status = opened.status;
    let submission = Submission {
        agent: metadata.agent_ref.clone().into(),
        task: metadata.task.clone(),
        workspace: Some(ws.to_path_buf()),
        max_iterations: None,
        model: None,
        submitted: crate::events::timestamp(clock.now()),
    };
    let place = Place {
        workspace: ws.to_path_buf(),
        host: store::hostname(),
    };
    let run = &opened.run.run_id;
    [
        (SUBMISSION, serde_json::to_vec_pretty(&submission)),
        (PLACE, serde_json::to_vec_pretty(&place)),
        (METADATA, serde_json::to_vec_pretty(&metadata)),
    ]
    .into_iter()
    .map(|(key, bytes)| {
        bytes
            .map(|bytes| (key, bytes))
            .map_err(|source| FleetError::BadDocument {
                run: run.clone(),
                key,
                source,
            })
    })
    .collect()
}

/// Whether the store's journal of `run` is `lines`, line for line.
fn same_journal(store: &dyn RunStore, run: &str, lines: &[&str]) -> Result<bool, FleetError> {
    let mut theirs = Vec::with_capacity(lines.len());
    export(store, run, &mut |line| theirs.push(line.to_string()))?;
    Ok(theirs.len() == lines.len() && theirs.iter().zip(lines).all(|(a, b)| a == b))
}

/// Copies what the store holds of `run_id` (journal, metadata, `io/` records) into a run folder
/// under `into` (a scratch folder: `into/.delta/<run>/`), to be read as a local run is (`delta
/// show --store`). A RUNNING run whose lease holds is marked as held, so that it does not read as
/// crashed; its status is the store's.
pub fn snapshot(store: &dyn RunStore, run_id: &str, into: &Path) -> Result<Snapshot, FleetError> {
    workspace::validate_run_id(run_id)?;
    let lease = store.lease_state(run_id)?;
    let run = workspace::RunDir::create(into, run_id)?;
    let mut journal = String::new();
    export(store, run_id, &mut |line| {
        journal.push_str(line);
        journal.push('\n');
    })?;
    std::fs::write(run.journal(), journal)
        .map_err(|e| StoreError::io("write", run.journal(), e))?;
    if let Some(bytes) = store.get(run_id, METADATA)? {
        std::fs::write(run.metadata(), bytes)
            .map_err(|e| StoreError::io("write", run.metadata(), e))?;
    }
    for key in store.keys(run_id, "io/")? {
        let Some(bytes) = store.get(run_id, &key)? else {
            continue;
        };
        // Keys were checked when written (no `..`, no absolute path): they stay inside the run.
        let path = run.root.join(&key);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create", dir, e))?;
        }
        std::fs::write(&path, bytes).map_err(|e| StoreError::io("write", &path, e))?;
    }
    Ok(Snapshot {
        run,
        held: matches!(lease, store::LeaseState::Held(_)),
    })
}

/// A store run copied for reading ([`snapshot`]).
#[derive(Debug)]
pub struct Snapshot {
    /// Its folder.
    pub run: workspace::RunDir,
    /// A process holds its lease now.
    pub held: bool,
}

/// The transcript of run `run_id` of the store (`delta show --store`), read from a copy made under
/// `scratch`: as a local run's, but RUNNING while a process holds its lease.
pub fn transcript(
    store: &dyn RunStore,
    run_id: &str,
    scratch: &Path,
) -> Result<crate::transcript::Transcript, FleetError> {
    let snapshot = snapshot(store, run_id, scratch)?;
    let mut transcript =
        crate::transcript::Transcript::load(&snapshot.run).map_err(|e| match e {
            crate::transcript::TranscriptError::Store(e) => FleetError::Store(e),
        })?;
    if snapshot.held && transcript.crashed {
        transcript.status = RunStatus::Running;
        transcript.crashed = false;
    }
    // Where the run's files are is its working copy, not the scratch copy read here.
    if let Ok(Some(place)) = get_json::<Place>(store, run_id, PLACE) {
        transcript.run_dir = place.workspace.join(".delta").join(run_id);
    }
    Ok(transcript)
}

/// Removes run `run_id` from the store, with its journal and documents. Refused while a process
/// holds its lease ([`StoreError::Busy`]); a queued run leaves the queue with it.
pub fn remove(store: &dyn RunStore, run_id: &str, clock: Clock) -> Result<(), FleetError> {
    workspace::validate_run_id(run_id)?;
    let lease = store.lease(run_id, &LockHolder::current(clock.now(), Some("delta rm")))?;
    store.remove(lease)?;
    Ok(())
}
