//! One turn of an execution asked for by the page: the library's call (`Session::open`, then
//! `advance`) on the executions of the served folder, as `dygram execute -i FILE` run in that
//! folder makes it, so the page and the command line see each other's turns.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dygram_runtime::outputs::execution::Trace;
use dygram_runtime::session::shared::{SharedCall, SharedStore};
use dygram_runtime::session::{
    Advance, CallError, CallRequest, ClientConfig, CompiledMachine, Executions, HistoryEntry, Host,
    ManualInput, Notice, Opening, Session, SourceFlags, Unit,
};
use serde_json::{Value, json};

use super::files;

/// What the page sends.
#[derive(Debug, serde::Deserialize)]
pub struct StepRequest {
    /// The machine, relative to the served folder.
    pub path: String,
    /// The execution (none: the machine's most recent one, or a new one).
    #[serde(default)]
    pub id: Option<String>,
    /// Recorded answers, a folder relative to the served folder (for a new execution).
    #[serde(default)]
    pub playback: Option<String>,
    /// A manual answer for a waiting turn.
    #[serde(default)]
    pub answer: Option<String>,
}

/// Why a turn was not taken.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// A path the page gave.
    #[error(transparent)]
    Path(#[from] files::PathError),
    /// The machine file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The machine has errors.
    #[error("the machine has errors: {0}")]
    Invalid(String),
    /// The call failed (busy, not found, a failed answer source…).
    #[error("{0}")]
    Call(String),
}

impl TurnError {
    /// The HTTP status that says it.
    pub fn status(&self) -> u16 {
        match self {
            Self::Path(_) | Self::Invalid(_) => 400,
            Self::Read { .. } => 404,
            Self::Call(message) if message.contains("in use") => 409,
            Self::Call(_) => 422,
        }
    }
}

/// Takes one turn of `request` in the executions of `root` (or, with `shared`, in that store, the
/// execution named by its id): the report (the object `execute -i --format json` prints), the
/// execution's trace and its history.
pub fn step(
    root: &Path,
    request: StepRequest,
    shared: Option<&SharedStore>,
) -> Result<Value, TurnError> {
    let file = files::machine(root, &request.path)?;
    let text = std::fs::read_to_string(&file).map_err(|source| TurnError::Read {
        path: file.clone(),
        source,
    })?;
    let playback = match &request.playback {
        Some(dir) => Some(files::inside(root, dir)?),
        None => None,
    };
    let call = CallRequest {
        id: request.id.clone(),
        force: false,
        unit: Unit::Turn,
        sources: SourceFlags {
            queue: false,
            playback,
            record: None,
            model: None,
            max_tokens: None,
            provider: None,
        },
        queue_timeout: Duration::from_secs(60),
        machine_text: text.clone(),
        machine_file: Some(request.path.clone()),
        result: None,
    };
    let mut manual = match request.answer {
        Some(answer) => ManualInput::start(Cursor::new(answer.into_bytes())),
        None => ManualInput::none(),
    };
    let mut host = PageHost {
        files: files::Served::new(root),
        file,
        text,
        errors: Vec::new(),
    };
    let (session, advance, history) = take_turn(root, call, shared, &mut host, &mut manual)?;
    turn_json(&session, &advance, &history)
}

/// One turn of the call, in the folder's executions or the store's: the execution as the turn
/// left it, what the turn did, and the execution's history.
fn take_turn(
    root: &Path,
    call: CallRequest,
    shared: Option<&SharedStore>,
    host: &mut PageHost,
    manual: &mut ManualInput,
) -> Result<(Box<Session>, Advance, Vec<HistoryEntry>), TurnError> {
    Ok(match shared {
        Some(shared) => {
            let Some(id) = call.id.clone() else {
                return Err(TurnError::Call(
                    "an execution in a store is named by its id: give it".into(),
                ));
            };
            match shared.call(call, host, manual).map_err(call_error)? {
                SharedCall::Invalid => return Err(TurnError::Invalid(host.errors.join("; "))),
                SharedCall::Done { session, advance } => {
                    let history = shared
                        .view(&id)
                        .ok()
                        .and_then(|view| view.executions().history(&id).ok());
                    (session, *advance, history.unwrap_or_default())
                }
            }
        }
        None => {
            let store = Executions::under(root).with_redactor(dygram_runtime::connect::redactor());
            let mut session = match Session::open(call, &store, host, manual).map_err(call_error)? {
                Opening::Ready(session) => session,
                Opening::Invalid => return Err(TurnError::Invalid(host.errors.join("; "))),
            };
            let advance = session.advance(host, &store, manual).map_err(call_error)?;
            let history = store.history(session.id()).unwrap_or_default();
            (session, advance, history)
        }
    })
}

/// The report of the turn, the execution's trace and its history, as the page and MCP read them.
fn turn_json(
    session: &Session,
    advance: &Advance,
    history: &[HistoryEntry],
) -> Result<Value, TurnError> {
    let id = session.id().to_string();
    let meta = session.metadata().clone();
    let Some(state) = session.state() else {
        return Err(TurnError::Call(format!("execution {id} has no state")));
    };
    let report = match advance {
        Advance::Done(report) => report.to_json(&id, &meta, state),
        Advance::AlreadyFinished => json!({
            "id": id,
            "status": state.status().as_str(),
            "turns": meta.turn_count,
            "steps": meta.step_count,
            "currentNodes": state.current_nodes(),
            "events": [],
            "alreadyFinished": true,
        }),
    };
    let trace = Trace::of(state);
    let history: Vec<Value> = history
        .iter()
        .map(|h| {
            let summary = match (&h.output, h.tools.is_empty()) {
                (Some(text), _) => text.clone(),
                (None, false) => format!("called {}", h.tools.join(", ")),
                (None, true) => h.status.as_str().to_string(),
            };
            json!({"turn": h.turn, "node": h.node, "summary": summary})
        })
        .collect();
    Ok(json!({
        "report": report,
        "trace": {"currentNodes": trace.current, "visited": trace.visited, "taken": trace.taken},
        "history": history,
    }))
}

fn call_error<E: std::fmt::Display>(e: CallError<E>) -> TurnError {
    TurnError::Call(e.to_string())
}

/// The page's side of a call: the machine compiled from the served file, answers from recordings
/// or from the page (no API key is read for the page: a machine that needs a model uses
/// recordings or waits for a manual answer).
struct PageHost {
    /// Where the machine's imports are read: the served folder only.
    files: files::Served,
    file: PathBuf,
    text: String,
    errors: Vec<String>,
}

impl Host for PageHost {
    type Error = TurnError;

    fn compile(&mut self) -> Option<CompiledMachine> {
        let source = dygram_syntax::source::SourceFile::new(
            self.file.display().to_string(),
            self.text.as_str(),
        );
        let project = dygram_core::imports::load(source, Some(&self.file), &self.files);
        if project.has_errors() {
            self.errors = project
                .entry()
                .diagnostics
                .iter()
                .filter(|d| d.is_error())
                .map(|d| d.one_line(&project.entry().file))
                .collect();
            return None;
        }
        Some(CompiledMachine::of(&project))
    }

    fn connect(
        &self,
        config: &ClientConfig,
        (queue_dir, queue_timeout): (&Path, Duration),
        id: &str,
    ) -> Result<Option<llm::Connection>, TurnError> {
        dygram_runtime::connect::for_execution(config, queue_dir, queue_timeout, id, None)
            .map_err(|e| TurnError::Call(e.to_string()))
    }

    fn api_configured(&self, config: &ClientConfig) -> bool {
        dygram_runtime::connect::api_client(config.provider()).is_some()
    }

    fn default_model(&self, config: &ClientConfig) -> String {
        dygram_runtime::connect::default_model(config.provider())
    }

    fn agents(
        &self,
        place: &dygram_runtime::session::AgentPlace,
    ) -> Option<Box<dyn dygram_runtime::agents::AgentDriver>> {
        let base = self
            .file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Some(Box::new(dygram::agent_nodes::DeltaAgents::new(
            base,
            place.clone(),
        )))
    }

    fn notice(&mut self, _notice: Notice<'_>) {}
}
