//! One call on a saved execution, as a library: [`Session::open`] finds the execution of the call
//! (the id given, else the most recent one of its machine file, else a new one), locks it, sets a
//! corrupted one aside and checks that its machine did not change; [`Session::advance`] performs
//! one unit of work and commits it. What the library cannot know (how the machine is compiled and its diagnostics
//! shown, how API clients are built, where progress lines go) comes from the caller's [`Host`].
//!
//! The `dygram execute -i` command is one `open` and one `advance` per process; a program may
//! advance an opened session several times.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::{ClientConfig, HistoryEntry, Metadata, SessionError};
use crate::executor::RuntimeError;
use crate::state::ExecutionState;
use llm::answer::AnswerError;
use llm::queue::QueueError;

/// Which unit of work one call performs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Unit {
    /// One LLM round trip, or one step without the model (`-i`, `--step-turn`).
    #[default]
    Turn,
    /// One step of every path, conversations to their end (`--step`).
    Step,
    /// One step of one path, paths in turn (`--step-path`).
    Path,
}

impl Unit {
    /// How reports name the unit.
    pub fn name(self) -> &'static str {
        match self {
            Self::Turn => "turn",
            Self::Step => "step",
            Self::Path => "path step",
        }
    }
}

/// Where a call's answers come from, as its flags say (the execution remembers the rest).
#[derive(Debug, Clone, Default)]
pub struct SourceFlags {
    /// Answers from the file queue.
    pub queue: bool,
    /// Recordings to replay.
    pub playback: Option<PathBuf>,
    /// Where to record the answers.
    pub record: Option<PathBuf>,
    /// The model.
    pub model: Option<String>,
    /// Output limit of each answer.
    pub max_tokens: Option<u32>,
    /// The API provider named by the call when it is not the default (`anthropic`): it replaces
    /// the execution's.
    pub provider: Option<llm::Provider>,
}

/// What one call asks for.
#[derive(Debug, Clone, Default)]
pub struct CallRequest {
    /// The execution (default: the most recent execution of `machine_file`, else a new one).
    pub id: Option<String>,
    /// Start over: a new execution, an existing one under `id` set aside.
    pub force: bool,
    /// The unit of work.
    pub unit: Unit,
    /// The answer source's flags.
    pub sources: SourceFlags,
    /// How long a queued answer is waited for.
    pub queue_timeout: Duration,
    /// The machine's source text (fingerprinted: when it is unchanged, nothing is compiled).
    pub machine_text: String,
    /// The machine's file (`None`: standard input).
    pub machine_file: Option<String>,
    /// Where an execution that ends leaves its result file (`<stem>-result.json`), if anywhere.
    pub result: Option<(PathBuf, String)>,
}

/// The machine compiled from the sources.
#[derive(Debug, Clone)]
pub struct CompiledMachine {
    /// Canonical machine JSON (without source ranges).
    pub machine: Value,
    /// The files it imports.
    pub files: Vec<String>,
}

impl CompiledMachine {
    /// The machine of a loaded project (its entry, checked: the caller has seen to its errors).
    pub fn of(project: &dygram_core::imports::Project) -> Self {
        Self {
            machine: project.entry().json(dygram_core::json::JsonOptions {
                source_ranges: false,
            }),
            files: project
                .modules
                .iter()
                .map(|m| m.path.display().to_string())
                .collect(),
        }
    }
}

/// What a call hears of along the way (progress and warnings, in the order they happen).
#[derive(Debug)]
pub enum Notice<'a> {
    /// `--force` set the execution under the id aside.
    StartedOver {
        /// The id.
        previous: &'a str,
        /// Where its folder went.
        aside: &'a Path,
    },
    /// The execution's state could not be read: set aside, a fresh execution starts.
    Corrupted {
        /// Why.
        reason: &'a str,
        /// Where its folder went.
        folder: &'a Path,
    },
    /// Where the answers of a corrupted execution came from is lost; `now` is the fresh one's.
    SourceLost {
        /// The id.
        id: &'a str,
        /// The answer source the fresh execution uses.
        now: &'a ClientConfig,
    },
    /// The previous call was killed after its commit: derived files were brought up to date.
    Repaired {
        /// The id.
        id: &'a str,
        /// The files.
        files: &'a [&'static str],
    },
    /// A new execution, with where its answers come from.
    Started {
        /// The id.
        id: &'a str,
        /// Where the answers come from.
        config: &'a ClientConfig,
    },
    /// An existing execution goes on, with where its answers come from.
    Resumed {
        /// The id.
        id: &'a str,
        /// Where the answers come from.
        config: &'a ClientConfig,
    },
    /// A call without an id: other executions of its machine file are running too.
    SeveralActive {
        /// The machine file (`None`: standard input).
        machine_file: Option<&'a str>,
        /// The execution of this call.
        id: &'a str,
        /// The others in progress or paused, most recent call first.
        others: &'a [String],
    },
    /// A derived file could not be written after the commit (the next call repairs it).
    Unrepaired(&'a SessionError),
}

/// Where the agent runs of an execution live.
#[derive(Debug, Clone)]
pub struct AgentPlace {
    /// The execution's folder (each agent node's workspace is `agents/<node>/` in it).
    pub execution_dir: PathBuf,
    /// Where the agents' model answers are recorded (`<recordings>/agents`), when they are.
    pub recordings: Option<PathBuf>,
    /// Where they are replayed from (`<playback>/agents`), when they are.
    pub playback: Option<PathBuf>,
}

/// What the caller provides: compiling, API clients, and where notices go.
pub trait Host {
    /// The caller's errors (opening recordings).
    type Error;
    /// The machine compiled; `None` when it has errors (the host has shown them).
    fn compile(&mut self) -> Option<CompiledMachine>;
    /// Connects to the answer source `config` names (the file queue of execution `id` in
    /// `queue.0`, answers waited for `queue.1`); `None` when nobody inside the process answers
    /// (manual mode, or an API without a key). Replayed recordings go on from the state `config`
    /// saved. The binary uses [`crate::connect::for_execution`]; a program may connect its own way.
    fn connect(
        &self,
        config: &ClientConfig,
        queue: (&Path, Duration),
        id: &str,
    ) -> Result<Option<llm::Connection>, Self::Error>;
    /// Whether an API client can be built for the provider of `config`.
    fn api_configured(&self, config: &ClientConfig) -> bool;
    /// The model when neither the call nor the machine names one.
    fn default_model(&self, config: &ClientConfig) -> String;
    /// Hears of progress and warnings.
    fn notice(&mut self, notice: Notice<'_>);
    /// Runs the agents of agent nodes (`@Agent`) of the execution at `place`; `None` (the
    /// default): such a node stops the call with an error that says so.
    fn agents(&self, place: &AgentPlace) -> Option<Box<dyn crate::agents::AgentDriver>> {
        let _ = place;
        None
    }
    /// A listener of the unit's events as they happen; with one, the model's answers are asked
    /// for as a stream, so that their text reaches it as it arrives
    /// ([`crate::executor::ExecutionEvent::TextDelta`]). None by default.
    fn live(&mut self) -> Option<crate::executor::Listener<'static>> {
        None
    }
}

/// Why input given to a call was refused (nothing was changed).
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// The execution's answers come from elsewhere.
    Source(Box<ClientConfig>),
    /// The call does not reach a request; it takes an automatic step (`did` says which).
    NoRequest {
        /// ` (a -> b)` or ` (completing at n)`, or empty.
        did: String,
    },
    /// The execution has ended.
    Ended,
    /// The agent that asked now asks another question (the one answered was taken by a call
    /// that did not finish): this one.
    AgentAsks(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Source(config) => match config.kind {
                llm::SourceKind::Playback => write!(
                    f,
                    "this execution replays the recordings in {}",
                    config.playback_dir.as_deref().unwrap_or("?")
                ),
                llm::SourceKind::Queue => {
                    f.write_str("this execution takes its answers from the file queue")
                }
                _ => write!(f, "this execution asks the {} API", config.provider()),
            },
            Self::NoRequest { did } => write!(
                f,
                "this call does not reach a request for an answer: it takes an automatic step{did}"
            ),
            Self::Ended => f.write_str("the execution has already ended"),
            Self::AgentAsks(question) => write!(
                f,
                "the agent now asks another question (an earlier call took the answer before it was stopped): {question}"
            ),
        }
    }
}

/// Why a call failed. Nothing is committed by a call that fails.
#[derive(Debug, thiserror::Error)]
pub enum CallError<E> {
    /// The execution store.
    #[error("{0}")]
    Store(#[from] SessionError),
    /// The host (opening recordings).
    #[error("{0}")]
    Host(E),
    /// The saved execution's machine is not the one compiled now.
    #[error(
        "Machine definition has changed since execution started.\n   Original hash: {}\n   Current hash:  {}",
        short(.saved),
        short(.current)
    )]
    MachineChanged {
        /// The execution.
        id: String,
        /// The hash it started with.
        saved: String,
        /// The hash of the machine now.
        current: String,
    },
    /// The saved state cannot be restored.
    #[error("{error}")]
    Restore {
        /// The execution.
        id: String,
        /// Why.
        error: SessionError,
    },
    /// A new execution cannot start (no start node).
    #[error("{0}")]
    NoStart(RuntimeError),
    /// The unit of work stopped on an error outside the machine.
    #[error("{0}")]
    Runtime(RuntimeError),
    /// The model could not be asked (the next call asks again).
    #[error("LLM request at node '{node}' failed: {error}")]
    Llm {
        /// The node.
        node: String,
        /// Why.
        error: llm::LlmError,
    },
    /// The recorder of the execution's answers cannot be set up.
    #[error("cannot record the answers: {0}")]
    Recorder(llm::LlmError),
    /// A manual answer cannot be recorded.
    #[error("cannot record the answer: {0}")]
    Record(llm::LlmError),
    /// The file queue cannot be set up.
    #[error("{0}")]
    Queue(QueueError),
    /// The input could not be read.
    #[error("cannot read standard input: {0}")]
    InputUnreadable(String),
    /// The input is no answer.
    #[error("Failed to parse response: {0}")]
    BadAnswer(AnswerError),
    /// Input given to a call that cannot use it.
    #[error("input was given on stdin, but {0}; it was not used, and nothing was changed")]
    Refused(Refusal),
    /// Input that arrived after the call had looked for it and found none.
    #[error(
        "input arrived on stdin while this call was working, after it had looked for input (input counts when it starts within {} ms of the call's start); it was not used, and nothing was changed",
        super::manual::GRACE.as_millis()
    )]
    Late(Box<ClientConfig>),
    /// A manual answer without a tool call while every transition is closed.
    #[error(
        "this answer calls no tool, and no transition of {node} is open, so it would end the execution with an error ({error}); it was not used, and nothing was changed"
    )]
    WouldFail {
        /// The node.
        node: String,
        /// The error it would end with.
        error: String,
        /// An answer that would do.
        example: Value,
    },
    /// A manual answer calling tools the node cannot run (misspelled names, most likely).
    #[error(
        "this answer calls {}, which {node} does not offer; it was not used, and nothing was changed",
        unknown_list(.tools)
    )]
    UnknownTools {
        /// The node.
        node: String,
        /// The names called that it cannot run.
        tools: Vec<crate::executor::UnknownTool>,
        /// An answer that would do.
        example: Value,
    },
    /// A unit of work on this session failed before: it must be opened again.
    #[error("execution {0} must be opened again: a unit of work on it failed")]
    Unsettled(String),
    /// The result file cannot be written.
    #[error("{0}")]
    Result(super::result::ResultError),
    /// The store of a shared execution (`--store`): busy, unreachable, or taken over.
    #[error("{0}")]
    Shared(Box<super::shared::SharedError>),
}

/// `a (did you mean b?), c`.
fn unknown_list(tools: &[crate::executor::UnknownTool]) -> String {
    let names: Vec<String> = tools
        .iter()
        .map(|t| match &t.meant {
            Some(meant) => format!("{} (did you mean {meant}?)", t.name),
            None => t.name.clone(),
        })
        .collect();
    names.join(", ")
}

/// The first 12 characters of a hash and an ellipsis.
fn short(hash: &str) -> String {
    format!("{}…", hash.chars().take(12).collect::<String>())
}

/// The execution a call works on, locked until it is dropped.
pub struct Session {
    pub(super) id: String,
    pub(super) _lock: store::lock::Acquired,
    /// Taken by the executor during a unit of work.
    pub(super) state: Option<ExecutionState>,
    pub(super) meta: Metadata,
    pub(super) hash: String,
    pub(super) started: bool,
    pub(super) last_call: Option<HistoryEntry>,
    pub(super) request: CallRequest,
}

/// What [`Session::open`] found.
pub enum Opening {
    /// The execution, opened (or created) and locked.
    Ready(Box<Session>),
    /// The machine has errors (the host has shown them): nothing was opened or created.
    Invalid,
}

impl Session {
    /// The execution's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether this call created the execution.
    pub fn started(&self) -> bool {
        self.started
    }

    /// The metadata (as of the last commit, and the answer source of this call).
    pub fn metadata(&self) -> &Metadata {
        &self.meta
    }

    /// The execution's state (`None` after a unit of work failed: the session must be opened
    /// again).
    pub fn state(&self) -> Option<&ExecutionState> {
        self.state.as_ref()
    }

    /// The state, taken (the execution stays locked until the session is dropped).
    pub fn take_state(&mut self) -> Option<ExecutionState> {
        self.state.take()
    }
}
