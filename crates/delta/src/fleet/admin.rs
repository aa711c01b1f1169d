//! Looking at the store's runs and moving runs into it: `list-runs --store`, `export`, `import`.

use std::path::Path;

use serde::Serialize;
use serde::de::IgnoredAny;
use store::{Clock, Flush, LockHolder, RunStore, Seq, StoreError};
use store_pg::PgStore;

use super::{ERROR, FleetError, METADATA, PLACE, Place, SUBMISSION, Submission, copy, get_json};
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
}

/// Lines of a run's journal read from its end to tell how it ended or why it failed.
const TAIL_LINES: usize = 64;

/// A document of a run, or `None` when it is absent; one that cannot be read is noted in `damage`
/// (the listing goes on without it). A failing store is an error.
fn document<T: serde::de::DeserializeOwned>(
    store: &PgStore,
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
pub fn list(store: &PgStore) -> Result<Vec<StoreRun>, FleetError> {
    let mut out = Vec::new();
    for row in store.rows()? {
        out.push(list_one(store, &row)?);
    }
    Ok(out)
}

/// One run of [`list`].
fn list_one(store: &PgStore, row: &store_pg::RunRow) -> Result<StoreRun, FleetError> {
    let mut damage = Vec::new();
    let metadata: Option<RunMetadata> = document(store, &row.run, METADATA, &mut damage)?;
    let submission: Option<Submission> = document(store, &row.run, SUBMISSION, &mut damage)?;
    let place: Option<Place> = document(store, &row.run, PLACE, &mut damage)?;
    let error: Option<serde_json::Value> = document(store, &row.run, ERROR, &mut damage)?;
    // The journal's end says how a run ended, whatever its metadata says (or when it is lost).
    let tail = store.read_tail(&row.run, TAIL_LINES)?;
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
    })
}

/// The run's journal as JSON lines (each with its line end), as `journal.jsonl` holds it.
pub fn export(store: &PgStore, run_id: &str, out: &mut dyn FnMut(&str)) -> Result<u64, FleetError> {
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

/// Records appended to the store per transaction when importing.
const IMPORT_BATCH: usize = 1000;

/// Moves run `run_id` of the workspace `ws` into the store (the workspace's copy stays, as the
/// run's working copy). The run must not be running; it is not queued (continue it with
/// `delta continue --store`).
pub fn import(store: &PgStore, ws: &Path, run_id: &str, clock: Clock) -> Result<u64, FleetError> {
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
    let path = opened.run.journal();
    let contents = store::journal::read_with(&path, |line| {
        serde_json::from_slice::<IgnoredAny>(line)
            .map(|_| String::from_utf8_lossy(line).into_owned())
    })?;
    let mut lease = store.create(
        run_id,
        &LockHolder::current(clock.now(), Some("delta import")),
    )?;
    for batch in contents.records.chunks(IMPORT_BATCH) {
        let lines: Vec<&str> = batch.iter().map(String::as_str).collect();
        store.append(&mut lease, &lines)?;
    }
    let mut metadata = opened.metadata.clone();
    metadata.status = opened.status;
    let submission = Submission {
        agent: metadata.agent_ref.clone().into(),
        task: metadata.task.clone(),
        workspace: Some(ws.clone()),
        max_iterations: None,
        model: None,
        submitted: crate::events::timestamp(clock.now()),
    };
    let place = Place {
        workspace: ws.clone(),
        host: store::hostname(),
    };
    for (key, value) in [
        (SUBMISSION, serde_json::to_vec_pretty(&submission)),
        (PLACE, serde_json::to_vec_pretty(&place)),
        (METADATA, serde_json::to_vec_pretty(&metadata)),
    ] {
        let bytes = value.map_err(|source| FleetError::BadDocument {
            run: run_id.to_string(),
            key,
            source,
        })?;
        store.put(&mut lease, key, &bytes, Flush::Durable)?;
    }
    copy::upload_io(store, &mut lease, &opened.run)?;
    // From now on the store holds the record: the workspace's copy is only a working copy.
    let marker = opened.run.root.join(crate::events::UPSTREAM_MARKER);
    let note = format!(
        "run {run_id} was imported into a PostgreSQL store; this folder is its working copy. Continue it with: delta continue --store URL --run-id {run_id}\n"
    );
    store::write_atomic(&marker, note.as_bytes())?;
    Ok(contents.records.len() as u64)
}
