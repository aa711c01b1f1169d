//! `delta compact`: compacting a run's conversation on demand, without going on with the run.

use std::path::PathBuf;
use std::sync::Arc;

use super::{Runner, RunnerError, WorkspaceRef};
use crate::engine::{CompactNow, Engine, EngineSetup};
use crate::runs;
use crate::workspace::{self, RunDir};

const COMPACT: &str = "delta compact";

/// The run to compact.
#[derive(Debug, Clone)]
pub struct CompactRun {
    /// Its workspace.
    pub workspace: PathBuf,
    /// The run (default: the workspace's latest).
    pub run_id: Option<String>,
}

/// What `delta compact` did.
#[derive(Debug)]
pub struct CompactDone {
    /// The run.
    pub run: RunDir,
    /// The compaction journaled, or that there was nothing to compact.
    pub compaction: CompactNow,
}

impl Runner<'_> {
    /// Replaces the oldest iterations of the run's conversation (all but the agent's
    /// `keep_recent`) as its `compaction` strategy says, and journals it; the run's status does
    /// not change.
    pub fn compact(mut self, request: CompactRun) -> Result<CompactDone, RunnerError> {
        let ws = self.continue_workspace(&WorkspaceRef::Dir(request.workspace))?;
        let run_id = match request.run_id {
            Some(id) => workspace::validate_run_id(&id)?.to_string(),
            None => {
                runs::latest(&ws)
                    .ok_or_else(|| RunnerError::NoRun(ws.clone()))?
                    .run_id
            }
        };
        let clock = self.options.clock;
        let open_error = |source| RunnerError::Open {
            source: Box::new(source),
            workspace: ws.clone(),
        };
        let lock = runs::lock_workspace(&ws, clock, COMPACT).map_err(open_error)?;
        let opened = runs::open_locked(&ws, &run_id, lock, clock, COMPACT).map_err(open_error)?;
        // Which agent the run was made with is the seal's to say, not metadata.json's.
        // (A run without a seal is refused by the engine, which compacts it, unless adopted.)
        crate::seal::check_prefix(&opened.run, &opened.metadata.agent_ref, false)
            .map_err(|e| RunnerError::Engine(e.into()))?;
        let agent = self.load_agent(std::path::Path::new(&opened.metadata.agent_ref))?;
        let env = self.environment(&ws, &agent)?;
        let conn = self.connect(&agent, &env)?;
        conn.bind_run(&opened.run).map_err(RunnerError::Bind)?;
        let setup = EngineSetup {
            max_iterations: self.options.max_iterations.unwrap_or(agent.max_iterations),
            pause_after: None,
            agent,
            run: opened.run.clone(),
            env,
            client: conn.client,
            interactive: false,
            clock,
            ids: self.options.ids,
            redactor: conn.redactor.clone(),
            interrupt: Arc::clone(&self.options.interrupt),
            recovered: None,
            resuming: true,
            upstream: self.options.upstream.clone(),
            stream_text: false,
            answer: None,
            adopt: false,
        };
        let mut engine = Engine::new(setup, opened.metadata, self.observer, None)?;
        let compaction = engine.compact_now()?;
        drop(engine);
        drop((opened.lock, opened.workspace_lock));
        Ok(CompactDone {
            run: opened.run,
            compaction,
        })
    }
}
