//! Saved executions: `.dygram/executions/<id>/` with `state.json`, `metadata.json`,
//! `machine.json` and `history.jsonl`, and a relative `last` symlink to the newest one.
//!
//! Files are replaced atomically (temp file, fsync, rename); `history.jsonl` only grows; a lock
//! per execution keeps a second process out while one works on it. A state file that cannot be
//! read is never deleted: its folder is renamed aside.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::runtime::state::{ExecutionState, Status, TurnState};

/// Layout version of `state.json`.
pub const STATE_FILE_VERSION: &str = "1.0";

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
    /// `playback`, `api` or `manual`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Recordings replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub playback_dir: Option<String>,
    /// Where answers are recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recordings_dir: Option<String>,
    /// Provider for `api`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
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
    /// Status after the last call.
    pub status: String,
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
    pub status: String,
    /// Last write (RFC 3339).
    pub last_updated: String,
    /// LLM round trips so far (also in the metadata, which is written after this file).
    #[serde(default)]
    pub turn_count: u64,
    /// Calls that advanced the execution so far.
    #[serde(default)]
    pub call_count: u64,
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
    /// The runtime state, with the machine from `machine.json`.
    pub fn restore(self, machine: Value) -> Result<ExecutionState, String> {
        if !machine.is_object() {
            return Err("`machine.json` does not hold a machine".into());
        }
        let view = self.execution_state;
        let mut state = view.runtime;
        state.machine_snapshot = machine;
        state.context_state = view.context_values;
        state.turn_state = view.turn_state;
        Ok(state)
    }
}

/// `state.json` for an execution, written straight from it (nothing is copied; each part of the
/// state appears once).
pub fn state_json(
    state: &ExecutionState,
    machine_hash: &str,
    now: &str,
    turn_count: u64,
    call_count: u64,
) -> Result<Vec<u8>, String> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Out<'a> {
        version: &'a str,
        machine_hash: &'a str,
        execution_state: View<'a>,
        status: &'a str,
        last_updated: &'a str,
        turn_count: u64,
        call_count: u64,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct View<'a> {
        current_node: Option<&'a str>,
        path_id: Option<&'a str>,
        visited_nodes: Vec<String>,
        attributes: Map<String, Value>,
        context_values: &'a Map<String, Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        turn_state: Option<&'a TurnState>,
        runtime: Runtime<'a>,
    }
    /// The runtime state without what is written elsewhere.
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Runtime<'a> {
        version: &'a str,
        paths: &'a [crate::runtime::state::Path],
        limits: &'a crate::runtime::state::Limits,
        metadata: &'a crate::runtime::state::Metadata,
        barriers: &'a std::collections::BTreeMap<String, crate::runtime::state::Barrier>,
        dynamic_tools: &'a [crate::runtime::state::DynamicTool],
        #[serde(skip_serializing_if = "<[Value]>::is_empty")]
        proposals: &'a [Value],
    }
    let main = state.main_path();
    let out = Out {
        version: STATE_FILE_VERSION,
        machine_hash,
        execution_state: View {
            current_node: main.map(|p| p.current_node.as_str()),
            path_id: main.map(|p| p.id.as_str()),
            visited_nodes: state.visited_nodes(),
            attributes: Map::new(),
            context_values: &state.context_state,
            turn_state: state.turn_state.as_ref(),
            runtime: Runtime {
                version: &state.version,
                paths: &state.paths,
                limits: &state.limits,
                metadata: &state.metadata,
                barriers: &state.barriers,
                dynamic_tools: &state.dynamic_tools,
                proposals: &state.proposals,
            },
        },
        status: state.status().as_str(),
        last_updated: now,
        turn_count,
        call_count,
    };
    serde_json::to_vec(&out).map_err(|e| e.to_string())
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
    pub status: String,
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

/// Summary of one execution, for listings.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Id.
    pub id: String,
    /// Its metadata (absent when unreadable).
    pub metadata: Option<Metadata>,
    /// Nodes where active paths stand.
    pub current_nodes: Vec<String>,
}

/// The folder of saved executions.
#[derive(Debug, Clone)]
pub struct Executions {
    root: PathBuf,
}

impl Executions {
    /// `<base>/.dygram/executions`.
    pub fn under(base: &Path) -> Self {
        Self {
            root: base.join(".dygram").join("executions"),
        }
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The folder of an execution (the id is validated first).
    pub fn dir(&self, id: &str) -> Result<PathBuf, SessionError> {
        if !valid_id(id) {
            return Err(SessionError::InvalidId(id.to_string()));
        }
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

    /// Points `last` at `id` (a relative symlink, replaced atomically).
    pub fn set_last(&self, id: &str) -> Result<(), SessionError> {
        let link = self.root.join("last");
        let tmp = self.root.join(format!(".last.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        #[cfg(unix)]
        std::os::unix::fs::symlink(id, &tmp).map_err(|e| io(&tmp, e))?;
        #[cfg(not(unix))]
        std::fs::write(&tmp, id).map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, &link).map_err(|e| io(&link, e))?;
        store::atomic::sync_dir(&self.root).map_err(|e| io(&self.root, e))
    }

    /// A new id `exec-YYYYMMDD-HHMMSS` (UTC), with `-2`, `-3`, … when taken.
    pub fn new_id(&self, now: jiff::Timestamp) -> String {
        let base = store::ids::timestamp_id("exec", now);
        if !self.root.join(&base).exists() {
            return base;
        }
        (2..)
            .map(|n| format!("{base}-{n}"))
            .find(|id| !self.root.join(id).exists())
            .unwrap_or(base)
    }

    /// Creates the folder of a new execution and claims it (fails when it already exists, so two
    /// processes starting in the same second get different ids).
    pub fn create_dir(&self, id: &str) -> Result<PathBuf, SessionError> {
        let dir = self.dir(id)?;
        store::atomic::create_dir_all_durable(&self.root).map_err(|e| io(&self.root, e))?;
        match std::fs::create_dir(&dir) {
            Ok(()) => Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(io(&dir, "already exists"))
            }
            Err(e) => Err(io(&dir, e)),
        }
    }

    /// Takes the lock of an execution for this process.
    pub fn lock(&self, id: &str, command: &str) -> Result<store::lock::Acquired, SessionError> {
        let path = self.dir(id)?.join("execution.lock");
        let holder = store::lock::LockHolder::current(jiff::Timestamp::now(), Some(command));
        store::lock::RunLock::acquire(&path, &holder).map_err(|e| match e {
            store::StoreError::Busy { holder, .. } => SessionError::Busy {
                id: id.to_string(),
                holder: holder.map_or_else(|| "another process".to_string(), |h| h.describe()),
            },
            other => io(&path, other),
        })
    }

    /// Writes the machine snapshot.
    pub fn save_machine(&self, id: &str, machine: &Value) -> Result<(), SessionError> {
        let path = self.dir(id)?.join("machine.json");
        store::atomic::write_json_atomic(&path, machine, false).map_err(|e| io(&path, e))
    }

    /// Writes state and metadata. The state (what resuming needs) is written durably first; the
    /// metadata describes it and is replaced atomically without waiting for the disk, as is the
    /// history (a process killed at any point loses nothing; a power loss may lose the last
    /// metadata update, which only counts and describes).
    pub fn save(&self, id: &str, state_json: &[u8], meta: &Metadata) -> Result<(), SessionError> {
        let dir = self.dir(id)?;
        let path = dir.join("state.json");
        store::atomic::write_atomic(&path, state_json).map_err(|e| io(&path, e))?;
        let path = dir.join("metadata.json");
        let bytes = serde_json::to_vec_pretty(meta).map_err(|e| io(&path, e))?;
        store::atomic::write_atomic_lazy(&path, &bytes).map_err(|e| io(&path, e))
    }

    /// Appends a line to `history.jsonl`.
    pub fn append_history(&self, id: &str, entry: &HistoryEntry) -> Result<(), SessionError> {
        let path = self.dir(id)?.join("history.jsonl");
        let mut journal = match store::journal::Journal::open(&path) {
            // A line torn by a killed call is cut off (the state, not the history, is the truth).
            Err(store::StoreError::TornTail { .. }) => {
                store::journal::recover::<Value>(&path).map_err(|e| io(&path, e))?;
                store::journal::Journal::open(&path)
            }
            other => other,
        }
        .map_err(|e| io(&path, e))?;
        journal.append_unsynced(entry).map_err(|e| io(&path, e))
    }

    /// Reads metadata.
    pub fn metadata(&self, id: &str) -> Result<Metadata, SessionError> {
        let dir = self.dir(id)?;
        if !dir.is_dir() {
            return Err(SessionError::NotFound(id.to_string()));
        }
        let path = dir.join("metadata.json");
        store::atomic::read_json(&path).map_err(|e| SessionError::Corrupted {
            id: id.to_string(),
            reason: format!("{}: {e}", path.display()),
        })
    }

    /// Reads state, metadata and machine.
    pub fn load(&self, id: &str) -> Result<(StateFile, Metadata, Value), SessionError> {
        let meta = self.metadata(id)?;
        let dir = self.dir(id)?;
        let corrupted = |path: &Path, e: &dyn std::fmt::Display| SessionError::Corrupted {
            id: id.to_string(),
            reason: format!("{}: {e}", path.display()),
        };
        // Temporary files of a call killed while writing are leftovers.
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.filter_map(Result::ok) {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') && name.ends_with(".tmp") {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        let path = dir.join("state.json");
        let state: StateFile = store::atomic::read_json(&path).map_err(|e| corrupted(&path, &e))?;
        let path = dir.join("machine.json");
        let machine: Value = store::atomic::read_json(&path).map_err(|e| corrupted(&path, &e))?;
        Ok((state, meta, machine))
    }

    /// Moves an execution's folder aside (`<id>.corrupted-<time>`); returns the new folder.
    pub fn set_aside(
        &self,
        id: &str,
        why: &str,
        now: jiff::Timestamp,
    ) -> Result<PathBuf, SessionError> {
        let dir = self.dir(id)?;
        let aside = self
            .root
            .join(format!("{id}.{why}-{}", now.strftime("%Y%m%d-%H%M%S")));
        std::fs::rename(&dir, &aside).map_err(|e| io(&dir, e))?;
        if self.last().is_none() {
            let _ = std::fs::remove_file(self.root.join("last"));
        }
        Ok(aside)
    }

    /// Every execution, newest first (by last call).
    pub fn list(&self) -> Vec<Summary> {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut out: Vec<Summary> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|id| valid_id(id))
            .filter(|id| self.root.join(id).join("metadata.json").is_file())
            .map(|id| {
                let metadata = self.metadata(&id).ok();
                let current_nodes = self.current_nodes(&id);
                Summary {
                    id,
                    metadata,
                    current_nodes,
                }
            })
            .collect();
        out.sort_by(|a, b| {
            let key = |s: &Summary| s.metadata.as_ref().map(|m| m.last_executed_at.clone());
            key(b).cmp(&key(a)).then(a.id.cmp(&b.id))
        });
        out
    }

    /// Nodes where the execution's active (or waiting) paths stand.
    pub fn current_nodes(&self, id: &str) -> Vec<String> {
        let Ok(dir) = self.dir(id) else {
            return Vec::new();
        };
        let Ok(state) = store::atomic::read_json::<StateFile>(&dir.join("state.json")) else {
            return Vec::new();
        };
        let mut nodes: Vec<String> = state
            .execution_state
            .runtime
            .paths
            .iter()
            .filter(|p| {
                matches!(
                    p.status,
                    crate::runtime::state::PathStatus::Active
                        | crate::runtime::state::PathStatus::Waiting
                )
            })
            .map(|p| p.current_node.clone())
            .collect();
        if nodes.is_empty() {
            nodes.extend(state.execution_state.current_node);
        }
        nodes.dedup();
        nodes
    }

    /// Deletes an execution (and `last` when it pointed there). Ok(false) when it did not exist.
    pub fn remove(&self, id: &str) -> Result<bool, SessionError> {
        let dir = self.dir(id)?;
        if !dir.is_dir() {
            return Ok(false);
        }
        let was_last = self.last().as_deref() == Some(id);
        std::fs::remove_dir_all(&dir).map_err(|e| io(&dir, e))?;
        if was_last {
            let link = self.root.join("last");
            let _ = std::fs::remove_file(&link);
        }
        Ok(true)
    }
}

/// Whether a status string means nothing is left to do.
pub fn is_finished(status: &str) -> bool {
    status == Status::Complete.as_str() || status == Status::Error.as_str()
}
