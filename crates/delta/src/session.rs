//! Creating a new run: id, folder, lock, metadata, `LATEST`.

use std::path::Path;

use store::{Clock, IdSource, LockHolder, RunLock, StoreError};

use crate::agent::Agent;
use crate::events::{Event, timestamp};
use crate::metadata::{RunMetadata, RunStatus, TokenTotals, process_name};
use crate::runs::{self, OpenError};
use crate::workspace::{self, LayoutError, RunDir};

/// A run that exists on disk and is locked by this process.
#[derive(Debug)]
pub struct Session {
    /// Its files.
    pub run: RunDir,
    /// Its metadata as last written.
    pub metadata: RunMetadata,
    /// The workspace's lock; keep it until the process ends.
    pub workspace_lock: RunLock,
    /// The run's lock; keep it until the process ends.
    pub lock: RunLock,
}

/// Why a run could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// The workspace's `.delta/` is damaged.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// The workspace could not be locked (another process works in it).
    #[error(transparent)]
    Workspace(#[from] OpenError),
    /// The id is taken.
    #[error("Run ID '{run_id}' already exists in workspace {}", .workspace.display())]
    Exists {
        /// The id.
        run_id: String,
        /// The workspace.
        workspace: std::path::PathBuf,
    },
    /// Files could not be written.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CreateError {
    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::Layout(e) => Some(e.hint()),
            Self::Exists { .. } => Some(
                "use a different --run-id (this would overwrite an existing run), or continue it with \
                 delta continue --run-id"
                    .into(),
            ),
            Self::Workspace(e) => e.hint(),
            Self::Store(_) => None,
        }
    }
}

/// A run to create.
#[derive(Debug, Clone, Copy)]
pub struct NewRun<'a> {
    /// Its agent.
    pub agent: &'a Agent,
    /// Its workspace (already prepared).
    pub workspace: &'a Path,
    /// Its task: the first user message.
    pub task: &'a str,
    /// Its id (already validated), or `None` for a generated one.
    pub run_id: Option<&'a str>,
    /// The command creating it, for the lock holder record (`delta run`).
    pub command: &'a str,
    /// The store holding the run of record (its first events and metadata go there first).
    pub upstream: Option<&'a std::sync::Arc<dyn crate::events::Upstream>>,
}

/// Creates the run `new` describes. An existing run with the same id is an error and is left
/// untouched. The workspace is locked for the new run (`workspace_lock`, when the caller holds it
/// already).
pub fn create(
    new: NewRun<'_>,
    clock: Clock,
    ids: &IdSource,
    workspace_lock: Option<RunLock>,
) -> Result<Session, CreateError> {
    let NewRun {
        agent,
        workspace,
        task,
        run_id,
        command,
        upstream,
    } = new;
    workspace::check_layout(workspace)?;
    let workspace_lock = match workspace_lock {
        Some(lock) => lock,
        None => runs::lock_workspace(workspace, clock, command)?,
    };
    let now = clock.now();
    if let Some(id) = run_id
        && RunDir::new(workspace, id).root.exists()
    {
        return Err(CreateError::Exists {
            run_id: id.to_string(),
            workspace: workspace.to_path_buf(),
        });
    }
    let run_id = match run_id {
        Some(id) => id.to_string(),
        None => {
            let mut id = workspace::new_run_id(now, ids);
            while RunDir::new(workspace, &id).root.exists() {
                id = workspace::new_run_id(now, ids);
            }
            id
        }
    };
    // The new folders and files are flushed together once the run's first events are journaled
    // (the journal flushes the run's folder as it is created): before anything acts on the run.
    let mut syncs = store::atomic::DirSyncs::default();
    let run = RunDir::create_in(workspace, &run_id, &mut syncs)?;
    let acquired = RunLock::acquire(&run.lock(), &LockHolder::current(now, Some(command)))?;
    // Sealed before its first line (an empty journal is a prefix of every journal): a run delta made
    // is never found without a seal. A seal that cannot be written is written again by the engine.
    let _ = crate::seal::write_for(&run, b"", None, &agent.dir.display().to_string());
    // The journal starts before the metadata exists: a run that can be listed (and resumed) always
    // has its first events, so an empty journal is never mistaken for a run that has not begun.
    let mut journal = crate::events::RunJournal::open(&run.journal(), clock)?
        .journal
        .with_upstream(upstream.cloned());
    journal.append_deferred(&Event::RunStart {
        run_id: run_id.clone(),
        task: task.to_string(),
        agent_ref: agent.dir.display().to_string(),
    })?;
    journal.append(&Event::UserMessage {
        content: task.to_string(),
    })?;
    drop(journal);
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
        boot_id: crate::process::group::boot_id(),
        end_time: None,
        usage: TokenTotals::default(),
        extra: serde_json::Map::new(),
    };
    let pretty = serde_json::to_vec_pretty(&metadata).map_err(|source| StoreError::Serialize {
        path: run.metadata(),
        source,
    })?;
    syncs.write_atomic(&run.metadata(), &pretty)?;
    metadata.send(upstream.map(|u| &**u))?;
    syncs.write_atomic(&workspace.join(".delta/LATEST"), run_id.as_bytes())?;
    syncs.flush()?;
    Ok(Session {
        run,
        metadata,
        workspace_lock,
        lock: acquired.lock,
    })
}

/// Why a fork could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ForkError {
    /// The source run has fewer iterations.
    #[error(
        "run {run_id} has only {have} iteration(s); --from-iteration must be between 0 and {have}"
    )]
    TooFew {
        /// The source run.
        run_id: String,
        /// Its iterations.
        have: usize,
    },
    /// The workspace could not be locked (another process works in it).
    #[error(transparent)]
    Workspace(#[from] OpenError),
    /// Files could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The source run is not as delta wrote it.
    #[error(transparent)]
    Seal(Box<crate::seal::SealError>),
}

impl ForkError {
    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::Workspace(e) => e.hint(),
            Self::Seal(e) => e.hint(),
            Self::TooFew { .. } | Self::Store(_) => None,
        }
    }
}

/// How many of a journal's lines a fork at `iteration` keeps: iteration 0 keeps the task (the
/// first user message) and what came before it; iteration N keeps the model's N-th answer, the
/// requests and results of its calls (with the audits of hooks that ran for them: a call that
/// started without a result stays started), and nothing said after them:
/// a message given later, a compaction, the run's end. Fails with the number of answers the
/// journal has when it has fewer than `iteration`.
pub fn fork_point(events: &[crate::events::Envelope], iteration: usize) -> Result<usize, usize> {
    let typed: Vec<(usize, Event)> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.event().map(|event| (i, event)))
        .collect();
    let thoughts: Vec<usize> = (0..typed.len())
        .filter(|&k| matches!(typed[k].1, Event::Thought { .. }))
        .collect();
    if iteration > thoughts.len() {
        return Err(thoughts.len());
    }
    let last_of_iteration = match iteration.checked_sub(1).map(|n| thoughts[n]) {
        None => {
            let task = typed
                .iter()
                .position(|(_, e)| matches!(e, Event::UserMessage { .. }));
            let before_first_answer = thoughts.first().copied().unwrap_or(typed.len());
            match task.filter(|&k| k < before_first_answer) {
                Some(k) => k,
                None => return Ok(typed.get(before_first_answer).map_or(events.len(), |t| t.0)),
            }
        }
        Some(k) => {
            let Event::Thought { tool_calls, .. } = &typed[k].1 else {
                return Err(thoughts.len());
            };
            let calls = tool_calls.as_deref().unwrap_or_default();
            let after = typed[k + 1..].iter().map(|(_, e)| e);
            let progress = crate::engine::call_progress(calls, after);
            progress.last_seen.map_or(k, |r| k + 1 + r)
        }
    };
    // The audits of hooks that ran for the last call (post_tool_exec) belong to it.
    let end = typed[last_of_iteration + 1..]
        .iter()
        .take_while(|(_, e)| matches!(e, Event::HookExecutionAudit { .. }))
        .count()
        + last_of_iteration;
    Ok(typed[end].0 + 1)
}

/// Creates run `new_id` in the source's workspace from the source's journal up to (and including)
/// iteration `iteration` ([`fork_point`]). The copy records where it came from, in its metadata
/// (`forked_from`) and in a system message.
pub fn fork(
    source: &RunDir,
    iteration: usize,
    new_id: &str,
    clock: Clock,
    command: &str,
) -> Result<Session, ForkError> {
    let workspace_lock = runs::lock_workspace(&source.workspace, clock, command)?;
    let source_meta = RunMetadata::load(&source.metadata())?;
    // What is copied is what delta wrote, with the agent it was made with.
    crate::seal::check_prefix(source, &source_meta.agent_ref, true)
        .map_err(|e| ForkError::Seal(Box::new(e)))?;
    let (events, _) = crate::events::read(&source.journal())?;
    let cut = fork_point(&events, iteration).map_err(|have| ForkError::TooFew {
        run_id: source.run_id.clone(),
        have,
    })?;
    let now = clock.now();
    let run = RunDir::create(&source.workspace, new_id)?;
    let acquired = RunLock::acquire(&run.lock(), &LockHolder::current(now, Some(command)))?;
    let mut journal = store::Journal::open(&run.journal())?;
    let mut last_seq = 0;
    for envelope in &events[..cut] {
        let mut copy = envelope.clone();
        if copy.kind == "RUN_START" {
            copy.payload["run_id"] = serde_json::json!(new_id);
        }
        last_seq = copy.seq;
        journal.append_unsynced(&copy)?;
    }
    // One flush for the whole copy (the fork is not visible as a resumable run before its metadata).
    journal.sync()?;
    drop(journal);
    let mut opened = crate::events::RunJournal::open(&run.journal(), clock)?;
    opened
        .journal
        .append(&crate::events::Event::SystemMessage {
            level: crate::events::Level::Info,
            content: format!(
                "Forked from run {} at iteration {iteration} (its events up to seq {last_seq})",
                source.run_id
            ),
        })?;
    let mut extra = serde_json::Map::new();
    extra.insert(
        "forked_from".into(),
        serde_json::json!({"run_id": source.run_id, "iteration": iteration, "seq": last_seq}),
    );
    let metadata = RunMetadata {
        run_id: new_id.to_string(),
        start_time: timestamp(now),
        agent_ref: source_meta.agent_ref.clone(),
        task: source_meta.task.clone(),
        status: RunStatus::Interrupted,
        iterations_completed: iteration as u64,
        pid: std::process::id(),
        hostname: store::hostname(),
        start_time_unix: now.as_millisecond(),
        process_name: process_name(),
        // The source's process records are not copied: no boot vouches that a copied call without
        // a result never started.
        boot_id: None,
        end_time: None,
        usage: TokenTotals::default(),
        extra,
    };
    metadata.save(&run.metadata())?;
    if let Ok(text) = std::fs::read(run.journal()) {
        let _ = crate::seal::write_for(&run, &text, None, &metadata.agent_ref);
    }
    workspace::set_latest(&source.workspace, new_id)?;
    Ok(Session {
        run,
        metadata,
        workspace_lock,
        lock: acquired.lock,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_run_has_its_first_events_before_its_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let agent_dir = dir.path().join("agent");
        std::fs::create_dir_all(&agent_dir).unwrap();
        std::fs::write(
            agent_dir.join("agent.yaml"),
            "name: a\nllm:\n  model: m\ntools: []\n",
        )
        .unwrap();
        std::fs::write(agent_dir.join("system_prompt.md"), "p").unwrap();
        let agent = crate::agent::load(&agent_dir).unwrap();
        let ws = workspace::prepare(&dir.path().join("ws")).unwrap();
        let new = NewRun {
            agent: &agent,
            workspace: &ws,
            task: "the task",
            run_id: Some("r1"),
            command: "test",
            upstream: None,
        };
        let session = create(new, Clock::System, &IdSource::seeded(1), None).unwrap();
        assert!(
            runs::lock_workspace(&ws, Clock::System, "t").is_err(),
            "the workspace is locked for the run"
        );
        let (events, torn) = crate::events::read(&session.run.journal()).unwrap();
        assert!(torn.is_none());
        let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["RUN_START", "USER_MESSAGE"]);
        assert_eq!(events[1].payload["content"], "the task");
        assert_eq!(
            RunMetadata::load(&session.run.metadata()).unwrap().task,
            "the task"
        );
        assert_eq!(workspace::latest(&ws).as_deref(), Some("r1"));
        drop(session);
        assert!(matches!(
            create(new, Clock::System, &IdSource::seeded(1), None),
            Err(CreateError::Exists { .. })
        ));
    }
}
