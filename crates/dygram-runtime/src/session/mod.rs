//! Saved executions: `.dygram/executions/<id>/` with `state.json`, `metadata.json`,
//! `machine.json` and `history.jsonl`, and a relative `last` symlink to the newest one.
//!
//! `state.json` is the **commit point** of a call: it is replaced atomically and durably, and it
//! carries everything the other files say (the metadata, the history line of the latest call that
//! advanced the execution, the machine when a call changed it). The other files are derived from
//! it after each commit, and repaired from it by the next call when a process was killed in
//! between ([`commit`]). A new execution is built in a hidden folder and renamed into place, so it
//! exists whole or not at all ([`create`]). A state file that cannot be read is never deleted: its
//! folder is set aside under a unique name ([`aside`]). A lock per execution keeps a second
//! process out while one works on it.
//!
//! A call on an execution is a [`Session`]: opened (or created) and locked by [`Session::open`],
//! advanced by one unit of work and committed by [`Session::advance`] ([`call`], [`open`],
//! [`advance`]); its answers come from the sources of [`sources`] or, by hand, from a
//! [`ManualInput`] ([`manual`]).
//!
//! Callers in different folders or on different machines share an execution through PostgreSQL
//! ([`shared`]): each call works on a private copy of the execution's documents, under the
//! execution's lease, and uploads what changed.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::state::{ExecutionState, Status, TurnState};

mod advance;
mod aside;
mod call;
mod checkout;
mod clean;
mod commit;
mod create;
mod history;
mod manual;
mod open;
mod progress;
mod record;
pub mod result;
mod select;
pub mod shared;
mod sources;

pub use advance::{AGENT_QUESTION, Advance, Report, Waiting};
pub use aside::SetAside;
pub use call::{
    AgentPlace, CallError, CallRequest, CompiledMachine, Host, Notice, Opening, Refusal, Session,
    SourceFlags, Unit,
};
pub use clean::{Cleaned, Cleaning};
pub use commit::{Commit, Committed, Found, Opened, Restart};
pub use create::NewId;
pub use history::ToolCallRecord;
pub use manual::{GRACE, ManualInput, Unread};
pub use progress::{Progress, status_json, summary_json};
pub use record::{ExecutionRecorder, RecordPosition};
pub use select::OfMachine;

/// Layout version of `state.json`.
pub const STATE_FILE_VERSION: &str = "1.0";

/// The folder of the file queue (answers typed by another process), under the working folder.
pub const QUEUE_DIR: &str = ".dygram/interactive-queue";

/// Errors of the execution store.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A file could not be read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The id cannot name a folder.
    #[error("invalid execution id \"{0}\": use letters, digits, '_' and '-' (at most 128)")]
    InvalidId(String),
    /// No such execution.
    #[error("Execution not found: {0}")]
    NotFound(String),
    /// No execution at all.
    #[error("No executions found")]
    NoExecutions,
    /// The state file is unreadable.
    #[error("state of execution {id} is corrupted ({reason})")]
    Corrupted {
        /// Execution.
        id: String,
        /// Why.
        reason: String,
    },
    /// Another process holds the execution.
    #[error("execution {id} is in use by another dygram process ({holder})")]
    Busy {
        /// Execution.
        id: String,
        /// Who holds it.
        holder: String,
    },
    /// An execution with this id was created meanwhile by another process.
    #[error("execution {0} already exists (another dygram process created it)")]
    Exists(String),
    /// `last`, the link to the most recent execution, used as an id.
    #[error(
        "\"last\" is reserved: it names the link to the most recent execution, not an execution id"
    )]
    Reserved,
    /// The name of a folder set aside, where an execution id is needed.
    #[error(
        "{0} is a folder set aside, not an execution: it can be listed (`dygram exec list`) and removed (`dygram exec rm {0}`), but not shown or resumed"
    )]
    SetAsideName(String),
    /// A name that is neither an execution id nor a set-aside folder.
    #[error(
        "invalid execution name \"{0}\": an id, or a set-aside folder such as ID.corrupted-20260101-120000"
    )]
    InvalidName(String),
    /// State or metadata could not be encoded.
    #[error("cannot encode {what} of execution {id}: {message}")]
    Encode {
        /// Execution.
        id: String,
        /// Which file.
        what: &'static str,
        /// Why.
        message: String,
    },
}

fn io(path: &Path, e: impl std::fmt::Display) -> SessionError {
    SessionError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Where answers come from, remembered across calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientConfig {
    /// `playback`, `api`, `queue` or `manual` (a kind this version does not know reads as
    /// `manual`: nobody inside the process answers).
    #[serde(rename = "type", deserialize_with = "kind_or_manual")]
    pub kind: llm::SourceKind,
    /// Recordings replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub playback_dir: Option<String>,
    /// Where answers are recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recordings_dir: Option<String>,
    /// Where the execution stands in `recordings_dir` (see [`RecordPosition`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<RecordPosition>,
    /// Provider for `api` (an unknown name reads as none: Anthropic).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "known_provider"
    )]
    pub provider: Option<llm::Provider>,
    /// Model given with `-m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Output limit given with `--max-tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Which recordings were served so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub playback_state: Option<llm::PlaybackState>,
}

impl ClientConfig {
    /// The line under the start of an execution whose answers are replayed or recorded:
    /// `Mode: playback (DIR)` or `Mode: interactive (recording to DIR)`; none otherwise.
    pub fn start_line(&self) -> Option<String> {
        match (&self.kind, &self.playback_dir, &self.recordings_dir) {
            (llm::SourceKind::Playback, Some(dir), _) => Some(format!("Mode: playback ({dir})")),
            (_, _, Some(dir)) => Some(format!("Mode: interactive (recording to {dir})")),
            _ => None,
        }
    }

    /// What a resumed execution's line adds: `playback mode` or `recording mode`; none otherwise.
    pub fn resume_mode(&self) -> Option<&'static str> {
        match (&self.kind, &self.recordings_dir) {
            (llm::SourceKind::Playback, _) => Some("playback mode"),
            (_, Some(_)) => Some("recording mode"),
            _ => None,
        }
    }

    /// The provider asked for `api` (Anthropic unless one is named).
    pub fn provider(&self) -> llm::Provider {
        self.provider.unwrap_or(llm::Provider::Anthropic)
    }
}

/// `type` of a [`ClientConfig`]: a kind this version does not know is `manual`.
fn kind_or_manual<'de, D: serde::Deserializer<'de>>(d: D) -> Result<llm::SourceKind, D::Error> {
    let name = String::deserialize(d)?;
    Ok(llm::SourceKind::from_name(&name).unwrap_or_default())
}

/// `provider` of a [`ClientConfig`]: a name this version does not know is none.
fn known_provider<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<llm::Provider>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.and_then(|name| name.parse().ok()))
}

/// `metadata.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// Execution id.
    pub id: String,
    /// The machine file (absent for standard input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_file: Option<String>,
    /// `file` or `stdin`.
    pub machine_source: String,
    /// Started (RFC 3339).
    pub started_at: String,
    /// Last call (RFC 3339).
    pub last_executed_at: String,
    /// LLM round trips so far.
    pub turn_count: u64,
    /// Calls that advanced the execution.
    pub step_count: u64,
    /// Status after the last call (`paused` while a conversation is open or an answer is awaited).
    pub status: Status,
    /// `playback`, `interactive` (API or manual) or `auto`.
    pub mode: String,
    /// Where answers come from.
    pub client_config: ClientConfig,
    /// The request waiting for an answer in manual mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_request: Option<Value>,
    /// Files the machine imports (its source and these are fingerprinted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_files: Vec<String>,
    /// sha256 over the source text and the imported files: when it is unchanged, so is the
    /// machine, and a call need not compile it again to check the machine hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_fingerprint: Option<String>,
}

impl Metadata {
    /// Where the answers come from, for people: `playback (DIR)`, `api (openai)`, `queue`,
    /// `manual`, with `, recording to DIR` when they are recorded.
    pub fn mode_text(&self) -> String {
        let c = &self.client_config;
        let mut s = match c.kind {
            llm::SourceKind::Playback => {
                format!("playback ({})", c.playback_dir.as_deref().unwrap_or("?"))
            }
            llm::SourceKind::Api => format!("api ({})", c.provider()),
            other => other.name().to_string(),
        };
        if let Some(r) = &c.recordings_dir {
            s.push_str(&format!(", recording to {r}"));
        }
        s
    }

    /// Records how a call's unit of work ended, at `at` (RFC 3339): waiting for the manual answer
    /// to `request`, or having advanced the execution to `status`. The pending request is the one
    /// the unit ends waiting for, so it is cleared whenever a unit does not end waiting, whoever
    /// answered (a person on stdin, or another source chosen since the request was shown).
    pub fn end_unit(&mut self, at: String, request: Option<Value>, status: Status) {
        self.last_executed_at = at;
        if request.is_some() {
            self.status = Status::Paused;
        } else {
            self.step_count += 1;
            self.status = status;
        }
        self.pending_request = request;
    }
}

/// `state.json` as read: the seed's fields plus everything resuming needs (written by
/// [`state_json`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateFile {
    /// Layout version.
    pub version: String,
    /// sha256 of the canonical machine JSON compiled from the source when the execution started.
    pub machine_hash: String,
    /// The execution.
    pub execution_state: ExecutionView,
    /// Status.
    pub status: Status,
    /// Last write (RFC 3339).
    pub last_updated: String,
    /// LLM round trips so far.
    #[serde(default)]
    pub turn_count: u64,
    /// Calls that advanced the execution so far.
    #[serde(default)]
    pub call_count: u64,
    /// The metadata as of this commit (`metadata.json` is rewritten from it when they differ).
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// The history line of the latest call that advanced the execution (appended to
    /// `history.jsonl` when missing there).
    #[serde(default)]
    pub last_call: Option<HistoryEntry>,
    /// The machine, when the call of this commit changed it (`machine.json` is rewritten from it).
    #[serde(default)]
    pub machine: Option<Value>,
}

/// The execution inside `state.json`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionView {
    /// Node of the main path.
    pub current_node: Option<String>,
    /// The main path.
    pub path_id: Option<String>,
    /// Distinct nodes of the main path.
    pub visited_nodes: Vec<String>,
    /// Kept for the seed's layout (always empty).
    pub attributes: Map<String, Value>,
    /// Context values.
    pub context_values: Map<String, Value>,
    /// An open conversation.
    #[serde(default)]
    pub turn_state: Option<TurnState>,
    /// The rest of the runtime state (the machine is in `machine.json`; the context values and the
    /// conversation are the fields above).
    pub runtime: ExecutionState,
}

impl StateFile {
    /// The runtime state of execution `id`, with its machine.
    pub fn restore(self, id: &str, machine: Value) -> Result<ExecutionState, SessionError> {
        if !machine.is_object() {
            return Err(SessionError::Corrupted {
                id: id.to_string(),
                reason: "`machine.json` does not hold a machine".into(),
            });
        }
        let view = self.execution_state;
        let mut state = view.runtime;
        state.machine_snapshot = machine;
        state.context_state = view.context_values;
        state.turn_state = view.turn_state;
        Ok(state)
    }
}

/// One line of `history.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// Call number.
    pub turn: u64,
    /// When (RFC 3339).
    pub timestamp: String,
    /// Node worked on.
    pub node: String,
    /// Tools the model called.
    pub tools: Vec<String>,
    /// The model's text (first 100 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Status after the call.
    pub status: Status,
    /// The model's text in this call, whole up to [`history::TEXT_LIMIT`] characters (answers of
    /// several round trips one after the other); for the views of `exec show`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The tools the model called in this call, in order, with their arguments and results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<ToolCallRecord>,
}

/// sha256 (hex) over a source text and the files it imports (path and bytes of each; a missing
/// file counts as empty).
pub fn source_fingerprint(text: &str, files: &[String]) -> String {
    let mut h = Sha256::new();
    h.update(text.as_bytes());
    for f in files {
        h.update([0u8]);
        h.update(f.as_bytes());
        h.update([0u8]);
        h.update(std::fs::read(f).unwrap_or_default());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// sha256 (hex) of a machine's canonical JSON.
pub fn machine_hash(machine: &Value) -> String {
    let text = serde_json::to_string(machine).unwrap_or_default();
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether an id can name an execution folder: a safe path component (the store's rules) without
/// `.`, which marks folders set aside (`ID.corrupted-…`), and not `last`.
pub fn valid_id(id: &str) -> bool {
    store::ids::validate_id(id).is_ok() && !id.contains('.') && id != "last"
}

/// Checks that `id` can name an execution folder ([`valid_id`]), with an error that says what
/// the name is when it cannot: `last`, a folder set aside, or simply invalid.
pub fn check_id(id: &str) -> Result<(), SessionError> {
    if valid_id(id) {
        Ok(())
    } else if id == "last" {
        Err(SessionError::Reserved)
    } else if aside::kind_of(id).is_some() {
        Err(SessionError::SetAsideName(id.to_string()))
    } else {
        Err(SessionError::InvalidId(id.to_string()))
    }
}

/// Summary of one execution, for listings.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Id.
    pub id: String,
    /// Its metadata (absent when unreadable).
    pub metadata: Option<Metadata>,
    /// Nodes where active paths stand (for a finished execution: where its paths ended).
    pub current_nodes: Vec<String>,
    /// For a folder set aside (`ID.corrupted-…`, `ID.replaced-…`): why.
    pub set_aside: Option<SetAside>,
}

/// The folder of saved executions.
#[derive(Debug, Clone)]
pub struct Executions {
    root: PathBuf,
    /// Secrets scrubbed from everything written.
    redactor: llm::Redactor,
    /// The file queue's folder, when it is not `.dygram/interactive-queue` beside `root`.
    queue: Option<PathBuf>,
    /// A private copy of executions kept elsewhere (a store's): what lives only here is lost.
    private_copy: bool,
}

impl Executions {
    /// `<base>/.dygram/executions`.
    pub fn under(base: &Path) -> Self {
        Self {
            root: base.join(".dygram").join("executions"),
            redactor: llm::Redactor::default(),
            queue: None,
            private_copy: false,
        }
    }

    /// Takes queued answers from `dir` instead of `.dygram/interactive-queue` beside the folder
    /// (an execution worked on in a private copy keeps its caller's queue).
    pub fn with_queue_dir(mut self, dir: PathBuf) -> Self {
        self.queue = Some(dir);
        self
    }

    /// Marks the folder as a private copy of executions kept in a store.
    pub fn private_copy(mut self) -> Self {
        self.private_copy = true;
        self
    }

    /// Whether the folder is a private copy of executions kept in a store.
    pub fn is_private_copy(&self) -> bool {
        self.private_copy
    }

    /// The folder of the file queue (`--queue`).
    pub fn queue_dir(&self) -> PathBuf {
        if let Some(dir) = &self.queue {
            return dir.clone();
        }
        self.root.parent().map_or_else(
            || self.root.clone(),
            |dygram| dygram.join("interactive-queue"),
        )
    }

    /// Scrubs the secrets of `redactor` (the API keys in use) from every file written: a key the
    /// model echoes is saved as `[REDACTED]`, also in the state the execution goes on from.
    pub fn with_redactor(mut self, redactor: llm::Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// `value` as JSON (pretty or compact), with the secrets scrubbed from every string in it.
    pub(crate) fn json_bytes<T: Serialize + ?Sized>(
        &self,
        value: &T,
        pretty: bool,
    ) -> Result<Vec<u8>, serde_json::Error> {
        if self.redactor.is_empty() {
            return if pretty {
                serde_json::to_vec_pretty(value)
            } else {
                serde_json::to_vec(value)
            };
        }
        let mut v = serde_json::to_value(value)?;
        self.redactor.redact_json(&mut v);
        if pretty {
            serde_json::to_vec_pretty(&v)
        } else {
            serde_json::to_vec(&v)
        }
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The secrets scrubbed from everything written.
    pub fn redactor(&self) -> &llm::Redactor {
        &self.redactor
    }

    /// The execution a reading command names: `id` (`last` and none mean the most recent one,
    /// see [`Executions::latest`]). [`SessionError::NoExecutions`] when there is none at all.
    pub fn resolve(&self, id: Option<&str>) -> Result<String, SessionError> {
        match id {
            Some(id) if id != "last" => {
                self.dir(id)?;
                if !self.exists(id) {
                    return Err(SessionError::NotFound(id.to_string()));
                }
                Ok(id.to_string())
            }
            // The link names the most recent execution; read as such.
            _ => self.latest().ok_or(SessionError::NoExecutions),
        }
    }

    /// The state and metadata of an execution, for viewing (nothing is changed).
    pub fn view(&self, id: &str) -> Result<(ExecutionState, Metadata), SessionError> {
        let (state, meta, machine) = self.load(id)?;
        Ok((state.restore(id, machine)?, meta))
    }

    /// The folder of an execution (the id is validated first).
    pub fn dir(&self, id: &str) -> Result<PathBuf, SessionError> {
        check_id(id)?;
        Ok(self.root.join(id))
    }

    /// Whether an execution exists.
    pub fn exists(&self, id: &str) -> bool {
        self.dir(id).is_ok_and(|d| d.is_dir())
    }

    /// The id `last` points to, when it names an existing execution.
    pub fn last(&self) -> Option<String> {
        let target = std::fs::read_link(self.root.join("last")).ok()?;
        let id = target.file_name()?.to_str()?.to_string();
        self.exists(&id).then_some(id)
    }

    /// The most recent execution, for commands that read one: the one `last` names, else (no
    /// `last`, or one left naming nothing by a creation that was killed) the one with the latest
    /// call.
    pub fn latest(&self) -> Option<String> {
        self.last().or_else(|| {
            self.list()
                .into_iter()
                .find(|s| s.set_aside.is_none())
                .map(|s| s.id)
        })
    }

    /// Points `last` at the execution in `dir` (named `id`): a relative symlink, replaced
    /// atomically. The temporary link is made inside `dir`, which the caller holds the lock of, so
    /// no other process uses that name (a leftover is removed with the other temporary files).
    fn point_last_at(&self, dir: &Path, id: &str) -> Result<(), SessionError> {
        let link = self.root.join("last");
        let tmp = dir.join(".last.tmp");
        let _ = std::fs::remove_file(&tmp);
        #[cfg(unix)]
        std::os::unix::fs::symlink(id, &tmp).map_err(|e| io(&tmp, e))?;
        #[cfg(not(unix))]
        std::fs::write(&tmp, id).map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, &link).map_err(|e| io(&link, e))?;
        store::atomic::sync_dir(&self.root).map_err(|e| io(&self.root, e))
    }

    /// Points `last` at `id` (whose lock the caller holds).
    pub fn set_last(&self, id: &str) -> Result<(), SessionError> {
        let dir = self.dir(id)?;
        self.point_last_at(&dir, id)
    }

    /// Takes the lock of an execution for this process.
    pub fn lock(&self, id: &str, command: &str) -> Result<store::lock::Acquired, SessionError> {
        lock_at(&self.dir(id)?.join("execution.lock"), id, command)
    }

    /// Reads an execution's metadata: from its commit point (`state.json`) when that carries it,
    /// else from `metadata.json` (older executions).
    pub fn metadata(&self, id: &str) -> Result<Metadata, SessionError> {
        let dir = self.dir(id)?;
        if !dir.is_dir() {
            return Err(SessionError::NotFound(id.to_string()));
        }
        read_metadata(&dir, id)
    }

    /// Reads state, metadata and machine without changing anything (for viewing; a call that
    /// works on the execution uses [`Executions::open`], which also repairs it).
    pub fn load(&self, id: &str) -> Result<(StateFile, Metadata, Value), SessionError> {
        let dir = self.dir(id)?;
        if !dir.is_dir() {
            return Err(SessionError::NotFound(id.to_string()));
        }
        commit::read(&dir, id)
    }

    /// Every execution, newest first (by last call), then the folders set aside.
    pub fn list(&self) -> Vec<Summary> {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut out: Vec<Summary> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter_map(|name| {
                let set_aside = if valid_id(&name) {
                    None
                } else {
                    Some(aside::kind_of(&name)?)
                };
                let dir = self.root.join(&name);
                let state = store::atomic::read_json::<StateFile>(&dir.join("state.json")).ok();
                let metadata = state
                    .as_ref()
                    .and_then(|s| s.metadata.clone())
                    .or_else(|| store::atomic::read_json(&dir.join("metadata.json")).ok());
                if set_aside.is_none() && metadata.is_none() && state.is_none() {
                    return None;
                }
                let current_nodes = state.map(current_nodes_of).unwrap_or_default();
                Some(Summary {
                    id: name,
                    metadata,
                    current_nodes,
                    set_aside,
                })
            })
            .collect();
        out.sort_by(|a, b| {
            let key = |s: &Summary| s.metadata.as_ref().map(|m| m.last_executed_at.clone());
            a.set_aside
                .is_some()
                .cmp(&b.set_aside.is_some())
                .then(key(b).cmp(&key(a)))
                .then(a.id.cmp(&b.id))
        });
        out
    }

    /// Nodes where the execution's active (or waiting) paths stand; for a finished execution, the
    /// nodes where its paths ended.
    pub fn current_nodes(&self, id: &str) -> Vec<String> {
        let Ok(dir) = self.dir(id) else {
            return Vec::new();
        };
        store::atomic::read_json::<StateFile>(&dir.join("state.json"))
            .map(current_nodes_of)
            .unwrap_or_default()
    }

    /// The runs of the agent nodes (`@Agent`) the execution's paths are at: path, node, run id,
    /// model turns so far, the pending question (or null) and the run's folder (which `delta
    /// show` reads).
    pub fn agents(&self, id: &str) -> Vec<Value> {
        let Ok(dir) = self.dir(id) else {
            return Vec::new();
        };
        let Ok(state) = store::atomic::read_json::<StateFile>(&dir.join("state.json")) else {
            return Vec::new();
        };
        state
            .execution_state
            .runtime
            .paths
            .iter()
            .filter_map(|p| {
                let a = p.agent.as_ref()?;
                let run_dir = dir
                    .join("agents")
                    .join(&a.node)
                    .join(".delta")
                    .join(&a.run_id);
                Some(
                    serde_json::json!({"path": p.id, "node": a.node, "agent": a.agent,
                    "run": a.run_id, "iterations": a.iterations, "question": a.question,
                    "runDir": run_dir.display().to_string()}),
                )
            })
            .collect()
    }

    /// Deletes an execution, or a folder set aside (`ID.corrupted-…`), and `last` when it pointed
    /// there. Ok(false) when it did not exist; [`SessionError::Busy`] when a call is working on it.
    ///
    /// The folder's lock is taken first, and the folder is renamed to a hidden name before it is
    /// deleted, so other processes see the whole execution or none of it (what a killed removal
    /// leaves is deleted by the next sweep).
    pub fn remove(&self, name: &str) -> Result<bool, SessionError> {
        if name == "last" {
            return Err(SessionError::Reserved);
        }
        if !valid_id(name) && aside::kind_of(name).is_none() {
            return Err(SessionError::InvalidName(name.to_string()));
        }
        let dir = self.root.join(name);
        if !dir.is_dir() {
            return Ok(false);
        }
        let lock = match lock_at(&dir.join("execution.lock"), name, "dygram exec rm") {
            Ok(lock) => lock,
            // Removed meanwhile by another process.
            Err(SessionError::Io { .. }) if !dir.is_dir() => return Ok(false),
            Err(e) => return Err(e),
        };
        let was_last = self.last().as_deref() == Some(name);
        let doomed = self
            .root
            .join(format!("{REMOVING}{name}-{}", std::process::id()));
        match std::fs::rename(&dir, &doomed) {
            Ok(()) => {}
            Err(_) if !dir.is_dir() => return Ok(false),
            Err(e) => return Err(io(&dir, e)),
        }
        drop(lock);
        if was_last {
            let _ = std::fs::remove_file(self.root.join("last"));
        }
        store::atomic::sync_dir(&self.root).map_err(|e| io(&self.root, e))?;
        match std::fs::remove_dir_all(&doomed) {
            Ok(()) => Ok(true),
            // A sweep of another process deleted it at the same time.
            Err(_) if !doomed.exists() => Ok(true),
            Err(e) => Err(io(&doomed, e)),
        }
    }
}

/// Prefix of a folder being removed (renamed so before it is deleted).
const REMOVING: &str = ".rm-";

fn lock_at(path: &Path, id: &str, command: &str) -> Result<store::lock::Acquired, SessionError> {
    let holder = store::lock::LockHolder::current(jiff::Timestamp::now(), Some(command));
    store::lock::RunLock::acquire(path, &holder).map_err(|e| match e {
        store::StoreError::Busy { holder, .. } => SessionError::Busy {
            id: id.to_string(),
            holder: holder.map_or_else(|| "another process".to_string(), |h| h.describe()),
        },
        other => io(path, other),
    })
}

/// The metadata of the execution in `dir`: the commit point's, else `metadata.json`'s.
fn read_metadata(dir: &Path, id: &str) -> Result<Metadata, SessionError> {
    if let Ok(state) = store::atomic::read_json::<StateFile>(&dir.join("state.json"))
        && let Some(meta) = state.metadata
    {
        return Ok(meta);
    }
    let path = dir.join("metadata.json");
    // The store's errors name the file.
    store::atomic::read_json(&path).map_err(|e| SessionError::Corrupted {
        id: id.to_string(),
        reason: e.to_string(),
    })
}

fn current_nodes_of(state: StateFile) -> Vec<String> {
    use crate::state::PathStatus;
    let mut nodes: Vec<String> = state
        .execution_state
        .runtime
        .paths
        .iter()
        .filter(|p| matches!(p.status, PathStatus::Active | PathStatus::Waiting))
        .map(|p| p.current_node.clone())
        .collect();
    if nodes.is_empty() {
        // A finished execution: where its paths ended.
        for p in &state.execution_state.runtime.paths {
            if !nodes.contains(&p.current_node) {
                nodes.push(p.current_node.clone());
            }
        }
    }
    if nodes.is_empty() {
        nodes.extend(state.execution_state.current_node);
    }
    nodes.dedup();
    nodes
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::ClientConfig;

    /// `clientConfig` of `metadata.json` reads and writes back byte for byte.
    #[test]
    fn the_saved_source_keeps_its_json() {
        for json in [
            r#"{"type":"api","provider":"openai","model":"m","maxTokens":100}"#,
            r#"{"type":"playback","playbackDir":"rec","playbackState":{"used":["turn-1.json"],"next_sequential":1}}"#,
            r#"{"type":"queue","recordingsDir":"out","provider":"anthropic"}"#,
            r#"{"type":"manual"}"#,
        ] {
            let config: ClientConfig = serde_json::from_str(json).unwrap();
            assert_eq!(serde_json::to_string(&config).unwrap(), json);
        }
    }

    /// A kind or provider this version does not know reads as manual / Anthropic, as it did when
    /// they were strings.
    #[test]
    fn unknown_names_read_as_the_defaults() {
        let config: ClientConfig =
            serde_json::from_str(r#"{"type":"carrier-pigeon","provider":"gemini"}"#).unwrap();
        assert_eq!(config.kind, llm::SourceKind::Manual);
        assert_eq!(config.provider, None);
        assert_eq!(config.provider(), llm::Provider::Anthropic);
    }
}
