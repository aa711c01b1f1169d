//! Running the loop on the run a request picked: its agent, environment and connection, then the
//! engine.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Finished, Launching, Notice, Runner, RunnerError};
use crate::agent::{self, Agent};
use crate::connect::Connection;
use crate::engine::{Engine, EngineSetup};
use crate::env::Env;
use crate::metadata::RunStatus;
use crate::runs::{self, Opened};
use crate::session::Session;
use crate::workspace;
use store::IdSource;

/// The run to work on, locked, with what the loop needs.
pub(super) struct Picked {
    pub agent: Agent,
    pub workspace: PathBuf,
    pub session: Session,
    pub env: Env,
    pub conn: Connection,
    /// Added as a user message once the resume has settled the pending calls.
    pub message: Option<String>,
    /// Why the run is taken over from a process that died.
    pub recovered: Option<String>,
    /// The run was started by an earlier process.
    pub resuming: bool,
    /// The person's answer given to this call (`continue -m`) for the question the run waits on.
    pub answer: Option<String>,
}

impl Runner<'_> {
    /// Resumes `opened` (locked, with its workspace); `message` is added once the pending calls are
    /// settled.
    pub(super) fn resume(
        self,
        ws: &Path,
        opened: Opened,
        message: Option<String>,
        answer: Option<String>,
    ) -> Result<Finished, RunnerError> {
        let marker = opened.run.root.join(crate::events::UPSTREAM_MARKER);
        if self.options.upstream.is_none() && marker.exists() {
            return Err(RunnerError::KeptInStore {
                run_id: opened.run.run_id.clone(),
            });
        }
        let session = Session {
            run: opened.run,
            metadata: opened.metadata,
            workspace_lock: opened.workspace_lock,
            lock: opened.lock,
        };
        self.pick_up(ws, session, (message, answer), opened.crashed)
    }

    /// Goes on with `session`, a run started earlier (or a fork of one): loads its agent and
    /// environment, connects, makes it the workspace's latest run, and runs the loop.
    pub(super) fn pick_up(
        mut self,
        ws: &Path,
        session: Session,
        (message, answer): (Option<String>, Option<String>),
        recovered: Option<String>,
    ) -> Result<Finished, RunnerError> {
        // Which agent a run is made with is the seal's to say, not metadata.json's.
        crate::seal::check_agent(&session.run, &session.metadata.agent_ref)
            .map_err(|e| RunnerError::Engine(e.into()))?;
        let agent = self.load_agent(Path::new(&session.metadata.agent_ref))?;
        let env = self.environment(ws, &agent)?;
        let conn = self.connect(&agent, &env)?;
        workspace::set_latest(ws, &session.run.run_id)?;
        self.launch(Picked {
            agent,
            workspace: ws.to_path_buf(),
            session,
            env,
            conn,
            message,
            recovered,
            resuming: true,
            answer,
        })
    }

    /// Loads the agent of a run picked up again.
    pub(super) fn load_agent(&mut self, dir: &Path) -> Result<Agent, RunnerError> {
        let mut agent = agent::load(dir)?;
        self.options.choose_model(&mut agent);
        self.host.notice(Notice::AgentLoaded(&agent));
        Ok(agent)
    }

    /// The environment of a run of `agent` in `ws`: the base one, completed by `.env` files.
    pub(super) fn environment(&mut self, ws: &Path, agent: &Agent) -> Result<Env, RunnerError> {
        let mut env = self.options.env.clone();
        env.load_cascade(ws, &agent.dir, &self.options.cwd)?;
        for file in &env.loaded_files {
            let names: Vec<&str> = env
                .ignored()
                .iter()
                .filter(|(_, f)| f == file)
                .map(|(name, _)| name.as_str())
                .collect();
            if !names.is_empty() {
                self.host.notice(Notice::EnvIgnored {
                    file,
                    names: &names,
                });
            }
        }
        env.add_secret_names(agent::mcp::secret_vars(&agent.mcp_servers));
        Ok(env)
    }

    /// Connects through the host. A recorder's request ids come from a second id source, seeded
    /// from the runner's, so that seeded runs stay reproducible.
    pub(super) fn connect(&mut self, agent: &Agent, env: &Env) -> Result<Connection, RunnerError> {
        let ids = IdSource::seeded(self.options.ids.next_u64());
        self.host
            .connect(agent, env, ids)
            .map_err(RunnerError::Connect)
    }

    /// Runs the loop on `picked` until the run stops.
    pub(super) fn launch(self, picked: Picked) -> Result<Finished, RunnerError> {
        let Picked {
            agent,
            workspace,
            session,
            env,
            conn,
            message,
            recovered,
            resuming,
            answer,
        } = picked;
        if let Some(record) = &self.options.last_workspace_record {
            runs::remember_workspace(record, &workspace);
        }
        // A run stepped a few iterations per call is bounded by the agent's budget over the whole
        // run; otherwise the budget is this process's.
        let max_iterations = match (self.options.max_iterations, self.options.pause_after) {
            (Some(max), _) => max,
            (None, Some(_)) => u32::try_from(
                u64::from(agent.max_iterations)
                    .saturating_sub(session.metadata.iterations_completed),
            )
            .unwrap_or(0),
            (None, None) => agent.max_iterations,
        };
        // A run whose process died still says RUNNING on disk; it is resumed as INTERRUPTED.
        let status = match recovered {
            Some(_) => RunStatus::Interrupted,
            None => session.metadata.status,
        };
        self.host.notice(Notice::Launching(&Launching {
            resuming: resuming.then_some(status),
            agent: &agent,
            workspace: &workspace,
            run_id: &session.run.run_id,
            endpoint: &conn.endpoint,
            max_iterations,
            env_files: &env.loaded_files,
            recovered: recovered.as_deref(),
        }));
        conn.bind_run(&session.run).map_err(RunnerError::Bind)?;
        // Agent tools run their children through a runner of their own (the same host).
        let mut options = self.options;
        let mut children = agent
            .tools
            .iter()
            .any(|t| t.syntax == crate::agent::tools::Syntax::Agent)
            .then(|| {
                super::children::ChildRuns::new(self.host, &mut options, &agent, (&env, &workspace))
            });
        // Replayed answers cost nothing: a playback run has no cost.
        let priced = conn.playback.is_none();
        // The secrets the MCP servers' env and headers bring in are scrubbed like the API key.
        let setup = EngineSetup {
            agent: agent.clone(),
            run: session.run.clone(),
            env,
            client: conn.client,
            max_iterations,
            pause_after: options.pause_after.filter(|n| *n > 0),
            interactive: options.interactive,
            clock: options.clock,
            ids: options.ids,
            redactor: conn.redactor.clone(),
            interrupt: Arc::clone(&options.interrupt),
            recovered,
            resuming,
            upstream: options.upstream.clone(),
            stream_text: options.stream_text,
            answer,
            adopt: options.adopt,
        };
        let human = if options.interactive {
            self.human
        } else {
            None
        };
        let observer: &mut dyn crate::engine::Observer = self.observer;
        // Reborrowed for the engine, which lives shorter than the runner's borrows (`children`).
        let human: Option<&mut dyn crate::engine::HumanInput> =
            human.map(|h| -> &mut dyn crate::engine::HumanInput { h });
        let mut engine = Engine::new(setup, session.metadata, observer, human)?;
        if let Some(children) = children.as_mut() {
            engine.with_sub_agents(children);
        }
        if let Some(tools) = self.tools {
            engine.with_host_tools(tools);
        }
        let outcome = engine.run(message.as_deref())?;
        if options.process_ends {
            // `run` has flushed every record and the process ends soon after this, so the engine's
            // memory is left to the operating system: freeing a long run's events one by one costs
            // about 1 ms per 10 000 events (resume benchmark).
            std::mem::forget(engine);
        }
        Ok(Finished {
            outcome,
            agent,
            workspace,
            run: session.run,
            priced,
            locks: (session.lock, session.workspace_lock),
        })
    }
}
