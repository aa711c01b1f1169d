//! Running what the user asked for: a new run, the continuation of one, or a fork.
//!
//! `delta run` and `delta continue` hand a [`Request`] to [`Runner::run`]. The runner looks at the
//! workspace and the run once, under their locks, decides what to do (start, resume, answer, extend,
//! retry, fork), creates or opens the run, builds the [`Engine`](crate::engine::Engine) and runs it.
//! It returns a [`Finished`] run for the caller to report, or a [`RunnerError`].
//!
//! The runner never prints: what a user should know while it works (which run is resumed, a workspace
//! created, the banner) goes to [`Host::notice`] as a [`Notice`]. The model connection is made by
//! [`Host::connect`] once the agent and its environment are known, so the caller chooses the answer
//! source (live, record, playback) and how retries are shown.

mod children;
mod compact;
mod launch;
mod plan;

pub use compact::{CompactDone, CompactRun};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use store::{Clock, IdSource, RunLock, StoreError};

use crate::agent::permissions::{Action, Permissions, Rule};
use crate::agent::{Agent, AgentError};
use crate::connect::{ConnectError, Connection};
use crate::engine::{EngineError, HumanInput, Observer, RunOutcome};
use crate::env::{Env, EnvError};
use crate::metadata::RunStatus;
use crate::resume::{Decision, Refusal};
use crate::runs::OpenError;
use crate::session::{CreateError, ForkError};
use crate::workspace::{InvalidRunId, RunDir};

/// What the user asked for.
#[derive(Debug)]
pub enum Request {
    /// `delta run`: a new run (or, with [`NewRun::auto_resume`], the workspace's paused or
    /// interrupted run).
    Run(Box<NewRun>),
    /// `delta continue`: go on with an existing run, or fork it.
    Continue(Continue),
}

/// A new run of an agent.
#[derive(Debug)]
pub struct NewRun {
    /// The agent (loaded by the caller, which has shown its warnings).
    pub agent: Agent,
    /// Where the run lives (created if missing).
    pub workspace: PathBuf,
    /// The workspace's name under the agent's `workspaces/`, when it is one of them (for `LAST_USED`).
    pub workspace_name: Option<String>,
    /// Claim the next numbered workspace when the run is sure to start (`-y` without `-w`).
    pub next_workspace: bool,
    /// A paused or interrupted latest run of the workspace is resumed with the message instead of
    /// starting a new run (`-w` without `--run-id`).
    pub auto_resume: bool,
    /// The task.
    pub message: String,
    /// The new run's id, or `None` for a generated one.
    pub run_id: Option<String>,
}

/// Which workspace `delta continue` works in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkspaceRef {
    /// This folder (relative to the current folder).
    Dir(PathBuf),
    /// The workspace used last by this user (`~/.delta/LAST_WORKSPACE`).
    Last,
}

/// Going on with a run.
#[derive(Debug, Clone)]
pub struct Continue {
    /// The workspace.
    pub workspace: WorkspaceRef,
    /// The run (default: the workspace's latest).
    pub run_id: Option<String>,
    /// The message: an answer, new instructions, or guidance for a retry.
    pub message: Option<String>,
    /// A file whose content is added to the message.
    pub with_file: Option<PathBuf>,
    /// Fork a new run from this run's first N iterations instead.
    pub fork_at: Option<usize>,
}

/// The approvals of one invocation: `--approve all` trusts every call; `--permissions FILE`'s rules
/// are checked before the agent's.
#[derive(Debug, Clone, Default)]
pub struct Approvals {
    pub all: bool,
    pub rules: Vec<Rule>,
    /// A default no laxer than this (a child run is held to its parent's: the stricter of both).
    pub default_at_least: Option<Action>,
}

/// Settings of this process that apply whatever the request.
#[derive(Debug)]
pub struct Options {
    /// Iteration budget (default: the agent's).
    pub max_iterations: Option<u32>,
    /// Stop after this many iterations of this call, the run left INTERRUPTED to be resumed by
    /// the next (a program that steps a run one model turn per call). The agent's
    /// `max_iterations` then counts over the whole run, not per call.
    pub pause_after: Option<u32>,
    /// The model to ask instead of the agent's `llm.model` (`--model`, `DELTA_MODEL`).
    pub model: Option<String>,
    /// The sandbox's filesystem mode instead of the agent's (`--sandbox`).
    pub sandbox: Option<crate::sandbox::FsMode>,
    /// Whether the network is reachable, instead of the agent's setting (`--network`).
    pub network: Option<bool>,
    /// Rules checked before the agent's (`--permissions FILE`, read), and `--approve all`.
    pub approvals: Approvals,
    /// Report the model's text as it arrives, where the server can stream (for a terminal).
    pub stream_text: bool,
    /// Answer `ask_human` through the [`HumanInput`] given to the runner.
    pub interactive: bool,
    /// The environment before `.env` files are added (usually the process environment).
    pub env: Env,
    /// The current folder (where the project root's `.env` is looked for; relative paths start here).
    pub cwd: PathBuf,
    /// Clock.
    pub clock: Clock,
    /// Id source.
    pub ids: IdSource,
    /// Raised by SIGINT/SIGTERM.
    pub interrupt: Arc<AtomicBool>,
    /// The file that records the workspace used last (`~/.delta/LAST_WORKSPACE`): every run rewrites
    /// it, [`WorkspaceRef::Last`] reads it. `None`: not recorded.
    pub last_workspace_record: Option<PathBuf>,
    /// The process ends once the run stops (a CLI): the engine's memory is left to the operating
    /// system instead of being freed piece by piece. A program that runs on keeps this `false`.
    pub process_ends: bool,
    /// The store holding the run of record, when the workspace's files are a working copy of a run
    /// kept in a shared store ([`crate::fleet`]): its journal lines and metadata go there first.
    pub upstream: Option<Arc<dyn crate::events::Upstream>>,
    /// How many agent tools deep this runner runs (0: a run of its own; a child's runner is one
    /// deeper, up to [`children::MAX_DEPTH`]).
    pub depth: u32,
    /// The whole sandbox, instead of the agent's and `sandbox`/`network` (a child run's: its
    /// agent's held within its parent's).
    pub confine_as: Option<crate::sandbox::SandboxPolicy>,
    /// Take a run that has no seal as it is found (`continue --adopt`): a run made before seals,
    /// or whose workspace moved. Otherwise such a run is refused.
    pub adopt: bool,
}

impl Options {
    /// Puts the model `--model` names in place of the agent's.
    pub fn choose_model(&self, agent: &mut Agent) {
        if let Some(model) = self.model.as_ref().filter(|m| !m.trim().is_empty()) {
            agent.llm.model = Some(model.clone());
        }
        if !self.approvals.rules.is_empty() || self.approvals.default_at_least.is_some() {
            let mut permissions = agent.permissions.clone().unwrap_or(Permissions {
                default: Action::Allow,
                rules: Vec::new(),
                approve_all: false,
            });
            let mut rules = self.approvals.rules.clone();
            rules.append(&mut permissions.rules);
            permissions.rules = rules;
            if let Some(floor) = self.approvals.default_at_least {
                permissions.default = permissions.default.stricter(floor);
            }
            agent.permissions = Some(permissions);
        }
        // `--approve all` answers the questions; it never lifts a `deny`.
        if self.approvals.all
            && let Some(permissions) = agent.permissions.as_mut()
        {
            permissions.approve_all = true;
        }
        if let Some(policy) = &self.confine_as {
            agent.sandbox = Some(policy.clone());
        } else if self.sandbox.is_some() || self.network.is_some() {
            let mut policy = agent
                .sandbox
                .clone()
                .unwrap_or(crate::sandbox::SandboxPolicy {
                    filesystem: crate::sandbox::FsMode::Off,
                    network: true,
                    writable: Vec::new(),
                    readable: Vec::new(),
                });
            if let Some(mode) = self.sandbox {
                policy.filesystem = mode;
            }
            if let Some(network) = self.network {
                policy.network = network;
            }
            agent.sandbox = Some(policy);
        }
    }
}

/// What the runner tells the user while it works (the CLI prints these on stderr).
#[derive(Debug)]
pub enum Notice<'a> {
    /// `continue --last` uses the workspace recorded in `record`.
    UsingLastWorkspace {
        /// The workspace.
        workspace: &'a Path,
        /// The file that records it.
        record: String,
    },
    /// `run -w` found a run to resume.
    ResumeFound {
        /// The run.
        run_id: &'a str,
        /// Its status.
        status: RunStatus,
        /// Its process died.
        crashed: bool,
        /// What becomes of the message.
        decision: &'a Decision,
        /// The workspace.
        workspace: &'a Path,
    },
    /// What `continue` does with the run's status.
    Continuing {
        /// The decision.
        decision: &'a Decision,
        /// The run's `interaction/response.txt`.
        response: &'a Path,
    },
    /// A run's `metadata.json` was repaired from its journal when the run was opened.
    Repaired {
        /// The run.
        run_id: &'a str,
        /// What was wrong with it.
        repair: &'a crate::runs::Repair,
        /// The run's status, as the journal tells it.
        now: RunStatus,
    },
    /// A run was forked.
    Forked {
        /// The new run.
        new_id: &'a str,
        /// The source run.
        from: &'a str,
        /// Its iterations copied.
        iteration: usize,
    },
    /// The agent of a run picked up again was loaded (its warnings are the caller's to show).
    AgentLoaded(&'a Agent),
    /// A workspace folder was created: a numbered one (`name`), or the folder given.
    WorkspaceCreated {
        /// Its name under `workspaces/`.
        name: Option<&'a str>,
        /// Its path.
        path: &'a Path,
    },
    /// The loop is about to start.
    Launching(&'a Launching<'a>),
    /// Variables of a `.env` file inside the workspace were left out: the run's tools can write
    /// that file, so it configures neither delta nor a program's loader.
    EnvIgnored {
        /// The file.
        file: &'a Path,
        /// The variables left out.
        names: &'a [&'a str],
    },
}

/// What is run, for the banner.
#[derive(Debug)]
pub struct Launching<'a> {
    /// The status of a run picked up again (`None`: a new run).
    pub resuming: Option<RunStatus>,
    /// The agent.
    pub agent: &'a Agent,
    /// The workspace.
    pub workspace: &'a Path,
    /// The run.
    pub run_id: &'a str,
    /// The model's endpoint.
    pub endpoint: &'a str,
    /// Iteration budget.
    pub max_iterations: u32,
    /// `.env` files loaded.
    pub env_files: &'a [PathBuf],
    /// Why the run is resumed as INTERRUPTED (its previous process died).
    pub recovered: Option<&'a str>,
}

/// The caller's side of a runner: notices and the model connection.
pub trait Host {
    /// Something to tell the user.
    fn notice(&mut self, notice: Notice<'_>);

    /// Connects to the model for `agent` with the merged environment `env`; a recorder draws its
    /// request ids from `ids`.
    fn connect(
        &mut self,
        agent: &Agent,
        env: &Env,
        ids: IdSource,
    ) -> Result<Connection, ConnectError>;

    /// Whether the answers are recorded or replayed (a run's recordings are one folder: a child
    /// run of an agent tool cannot share it yet).
    fn records_or_replays(&self) -> bool {
        false
    }
}

/// A run that stopped (completed, failed, waiting or interrupted).
pub struct Finished {
    /// How it ended.
    pub outcome: RunOutcome,
    /// Its agent.
    pub agent: Agent,
    /// Its workspace.
    pub workspace: PathBuf,
    /// Its files.
    pub run: RunDir,
    /// Whether its answers cost something (not a playback).
    pub priced: bool,
    /// The run's and the workspace's locks: held until the caller has reported.
    pub locks: (RunLock, RunLock),
}

/// Why the runner could not run anything.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The agent could not be loaded.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// A `.env` file could not be read.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// The model could not be set up.
    #[error(transparent)]
    Connect(ConnectError),
    /// The connection could not be tied to the run (playback state).
    #[error(transparent)]
    Bind(ConnectError),
    /// The run or its workspace could not be taken over.
    #[error("{source}")]
    Open {
        /// Why.
        source: Box<OpenError>,
        /// The workspace.
        workspace: PathBuf,
    },
    /// The new run could not be created.
    #[error("{source}")]
    Create {
        /// Why.
        source: Box<CreateError>,
        /// The workspace.
        workspace: PathBuf,
    },
    /// The fork could not be made.
    #[error("{source}")]
    Fork {
        /// Why.
        source: Box<ForkError>,
        /// The workspace.
        workspace: PathBuf,
    },
    /// The run's status needs a message that was not given.
    #[error("{source}")]
    Refused {
        /// Why.
        source: Refusal,
        /// The workspace.
        workspace: PathBuf,
    },
    /// The workspace holds no run (or not the one named).
    #[error("No existing run found in the work directory {}", .0.display())]
    NoRun(PathBuf),
    /// `--last` with nothing recorded.
    #[error("no workspace has been used yet (nothing recorded in ~/.delta/LAST_WORKSPACE)")]
    NoLastWorkspace,
    /// `--last` names a folder that is gone.
    #[error("the workspace used last, {}, no longer exists (recorded in ~/.delta/LAST_WORKSPACE)", .0.display())]
    LastWorkspaceGone(PathBuf),
    /// The run's record is in a store; this workspace holds its working copy.
    #[error("run {run_id} is kept in a store: this workspace only holds its working copy")]
    KeptInStore {
        /// The run.
        run_id: String,
    },
    /// The run id given is not a valid one.
    #[error(transparent)]
    InvalidRunId(#[from] InvalidRunId),
    /// The file to add to the message could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Files could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The loop could not go on.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl RunnerError {
    /// The failure to take a run or its workspace over, with the workspace, where that is the cause.
    fn open_error(&self) -> Option<(&OpenError, &Path)> {
        match self {
            Self::Open { source, workspace } => Some((source, workspace)),
            Self::Create { source, workspace } => match &**source {
                CreateError::Workspace(source) => Some((source, workspace)),
                _ => None,
            },
            Self::Fork { source, workspace } => match &**source {
                ForkError::Workspace(source) => Some((source, workspace)),
                _ => None,
            },
            _ => None,
        }
    }

    /// The message, as the user reads it.
    pub fn message(&self) -> String {
        match self.open_error() {
            Some((OpenError::Busy { holder, .. }, _)) => format!(
                "Run is currently executing ({}). Wait for completion or interrupt first.",
                holder
                    .as_ref()
                    .map_or_else(|| "another process".to_string(), |h| h.describe())
            ),
            Some((OpenError::NotFound(id), ws)) => {
                format!("Run '{id}' not found in {}", ws.display())
            }
            Some((source, _)) => source.to_string(),
            None => self.to_string(),
        }
    }

    /// What to do about it (the CLI prints it as a hint).
    pub fn hint(&self) -> Option<String> {
        if let Some((source, ws)) = self.open_error() {
            return match source {
                OpenError::Busy { .. } => Some(format!(
                    "one delta process works in a workspace at a time; watch it with: delta list-runs -w {}",
                    ws.display()
                )),
                OpenError::NotFound(_) => Some(format!(
                    "list the runs with: delta list-runs -w {}",
                    ws.display()
                )),
                OpenError::Store(e) => store_hint(e),
                other => other.hint(),
            };
        }
        match self {
            Self::Agent(e) => e.hint(),
            Self::Connect(e) => e.hint(),
            Self::Create { source, .. } => source.hint(),
            Self::Fork { source, .. } => source.hint(),
            Self::Refused { source, workspace } => Some(source.hint(workspace)),
            Self::NoRun(_) => Some("Use `delta run` to start a new run".into()),
            Self::KeptInStore { run_id } => Some(format!(
                "continue it through the store, so that its record stays whole: delta continue --store URL --run-id {run_id}"
            )),
            Self::NoLastWorkspace | Self::LastWorkspaceGone(_) => {
                Some("name the workspace with -w PATH".into())
            }
            Self::InvalidRunId(e) => Some(e.hint()),
            Self::Store(e) => store_hint(e),
            Self::Engine(EngineError::Seal(e)) => e.hint(),
            Self::Open { .. }
            | Self::Env(_)
            | Self::Bind(_)
            | Self::ReadFile { .. }
            | Self::Engine(_) => None,
        }
    }

    /// The store error beneath, where the runner stopped on one.
    pub fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Store(e) | Self::Engine(EngineError::Store(e)) => Some(e),
            Self::Open { source, .. } => match &**source {
                OpenError::Store(e) => Some(e),
                _ => None,
            },
            _ => None,
        }
    }

    /// Another process holds the run or its workspace.
    pub fn is_busy(&self) -> bool {
        match self.open_error() {
            Some((OpenError::Busy { .. } | OpenError::Store(StoreError::Busy { .. }), _)) => true,
            Some(_) => false,
            None => matches!(self, Self::Store(StoreError::Busy { .. })),
        }
    }

    /// The run id given was refused (a usage error).
    pub fn is_usage(&self) -> bool {
        matches!(self, Self::InvalidRunId(_))
    }
}

/// The hint for a store error: a busy lock says what to do.
fn store_hint(e: &StoreError) -> Option<String> {
    matches!(e, StoreError::Busy { .. }).then(|| {
        "wait for that process to finish, or stop it; a run has one writer at a time".to_string()
    })
}

/// Runs requests: one per process in the CLI, any number in other programs.
pub struct Runner<'a> {
    /// Settings of this process.
    pub options: Options,
    /// Receives the engine's progress.
    pub observer: &'a mut dyn Observer,
    /// Answers `ask_human` when [`Options::interactive`] is set.
    pub human: Option<&'a mut dyn HumanInput>,
    /// Notices and the connection.
    pub host: &'a mut dyn Host,
    /// Tools this program offers the agent beside its own (see [`crate::engine::HostTools`]).
    pub tools: Option<&'a mut dyn crate::engine::HostTools>,
}

impl Runner<'_> {
    /// Carries out `request` until the run stops.
    pub fn run(self, request: Request) -> Result<Finished, RunnerError> {
        match request {
            Request::Run(mut new) => {
                self.options.choose_model(&mut new.agent);
                self.start(*new)
            }
            Request::Continue(cont) => self.go_on(cont),
        }
    }
}
