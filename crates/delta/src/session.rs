//! Creating a new run: id, folder, lock, metadata, `LATEST`.

use std::path::Path;

use store::{Clock, IdSource, LockHolder, RunLock, StoreError};

use crate::agent::Agent;
use crate::events::timestamp;
use crate::metadata::{RunMetadata, RunStatus, TokenTotals, process_name};
use crate::workspace::{self, RunDir};

/// A run that exists on disk and is locked by this process.
#[derive(Debug)]
pub struct Session {
    /// Its files.
    pub run: RunDir,
    /// Its metadata as last written.
    pub metadata: RunMetadata,
    /// The lock; keep it until the process ends.
    pub lock: RunLock,
}

/// Creates a new run of `agent` in `workspace` (already prepared) for `task`.
pub fn create(
    agent: &Agent,
    workspace: &Path,
    task: &str,
    clock: Clock,
    ids: &IdSource,
    command: &str,
) -> Result<Session, StoreError> {
    let now = clock.now();
    let mut run_id = workspace::new_run_id(now, ids);
    while RunDir::new(workspace, &run_id).root.exists() {
        run_id = workspace::new_run_id(now, ids);
    }
    let run = RunDir::create(workspace, &run_id)?;
    let acquired = RunLock::acquire(&run.lock(), &LockHolder::current(now, Some(command)))?;
    let metadata = RunMetadata {
        run_id: run_id.clone(),
        start_time: timestamp(now),
        agent_ref: agent.dir.display().to_string(),
        task: task.to_string(),
        status: RunStatus::Running,
        iterations_completed: 0,
        pid: std::process::id(),
        hostname: store::hostname(),
        start_time_unix: now.as_millisecond(),
        process_name: process_name(),
        end_time: None,
        usage: TokenTotals::default(),
        extra: serde_json::Map::new(),
    };
    metadata.save(&run.metadata())?;
    workspace::set_latest(workspace, &run_id)?;
    Ok(Session {
        run,
        metadata,
        lock: acquired.lock,
    })
}
