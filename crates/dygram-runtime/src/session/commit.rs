//! One commit point per call, and the repair of the other files from it.
//!
//! A call ends by replacing `state.json`, atomically and durably; that write is the moment the
//! call happened. The file carries the metadata, the history line of the latest call that advanced
//! the execution and, when the call changed it, the machine. Then `machine.json`,
//! `metadata.json`, `pending-request.json` and `history.jsonl` are brought in line with it. A
//! process killed before the commit leaves the previous call's state (the call is redone); one
//! killed after it leaves files that the next call repairs from the commit before doing anything,
//! so history lines are never lost nor doubled and the metadata always describes the state.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::{
    ClientConfig, Executions, HistoryEntry, Metadata, STATE_FILE_VERSION, SessionError, SetAside,
    StateFile, io, lock_at,
};
use crate::state::{ExecutionState, TurnState};

/// What a call commits.
pub struct Commit<'a> {
    /// The execution after the call.
    pub state: &'a ExecutionState,
    /// sha256 of the canonical machine JSON the execution started with.
    pub machine_hash: &'a str,
    /// The metadata after the call (its counters are the execution's).
    pub metadata: &'a Metadata,
    /// The history line of the latest call that advanced the execution (this call's, or the one
    /// before when this call only waits for an answer).
    pub last_call: Option<&'a HistoryEntry>,
    /// Whether this call changed the machine (meta tools): it is then part of the commit.
    pub machine_changed: bool,
    /// When (RFC 3339).
    pub now: &'a str,
}

/// An execution opened for a call: locked, repaired, read.
#[derive(Debug)]
pub struct Opened {
    /// Held until the call ends.
    pub lock: store::lock::Acquired,
    /// The commit point.
    pub state: StateFile,
    /// The metadata it carries.
    pub metadata: Metadata,
    /// The machine.
    pub machine: Value,
    /// Files the repair rewrote (empty when the previous call ended normally).
    pub repaired: Vec<&'static str>,
}

/// What a call finds under the id of an execution ([`Executions::open_or_set_aside`]).
#[derive(Debug)]
pub enum Found {
    /// The execution, opened for the call.
    Opened(Box<Opened>),
    /// Its state could not be read: its folder was set aside, and a fresh execution may take the
    /// id.
    SetAside(Box<Restart>),
    /// No execution by that id: there never was one, or another call removed it or set it aside
    /// between the caller's look and the lock.
    Missing,
}

/// An execution whose state could not be read, set aside.
#[derive(Debug)]
pub struct Restart {
    /// Why its state could not be read.
    pub reason: String,
    /// Where its folder was moved (`ID.corrupted-<time>`).
    pub folder: PathBuf,
    /// Where its answers came from, as far as its files still tell (see
    /// [`Executions::answer_source`]): the fresh execution goes on with it.
    pub source: Option<ClientConfig>,
}

/// `state.json` of a commit, written straight from the execution (nothing is copied; each part of
/// the state appears once), with the store's secrets scrubbed.
pub(super) fn encode(
    store: &Executions,
    id: &str,
    c: &Commit<'_>,
) -> Result<Vec<u8>, SessionError> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Out<'a> {
        version: &'a str,
        machine_hash: &'a str,
        execution_state: View<'a>,
        status: crate::state::Status,
        last_updated: &'a str,
        turn_count: u64,
        call_count: u64,
        metadata: &'a Metadata,
        #[serde(skip_serializing_if = "Option::is_none")]
        last_call: Option<&'a HistoryEntry>,
        #[serde(skip_serializing_if = "Option::is_none")]
        machine: Option<&'a Value>,
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
        paths: &'a [crate::state::Path],
        limits: &'a crate::state::Limits,
        metadata: &'a crate::state::Counters,
        barriers: &'a std::collections::BTreeMap<String, crate::state::Barrier>,
        dynamic_tools: &'a [crate::state::DynamicTool],
        #[serde(skip_serializing_if = "<[Value]>::is_empty")]
        proposals: &'a [Value],
        #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        model_windows: &'a std::collections::BTreeMap<String, crate::state::ModelWindow>,
    }
    let state = c.state;
    let main = state.main_path();
    let out = Out {
        version: STATE_FILE_VERSION,
        machine_hash: c.machine_hash,
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
                model_windows: &state.model_windows,
            },
        },
        status: c.metadata.status,
        last_updated: c.now,
        turn_count: c.metadata.turn_count,
        call_count: c.metadata.step_count,
        metadata: c.metadata,
        last_call: c.last_call,
        machine: c.machine_changed.then_some(&state.machine_snapshot),
    };
    store
        .json_bytes(&out, false)
        .map_err(|e| SessionError::Encode {
            id: id.to_string(),
            what: "state.json",
            message: e.to_string(),
        })
}

/// Reads the execution in `dir`: the commit point, its metadata and its machine.
pub(super) fn read(dir: &Path, id: &str) -> Result<(StateFile, Metadata, Value), SessionError> {
    // The store's errors name the file.
    let corrupted = |e: store::StoreError| SessionError::Corrupted {
        id: id.to_string(),
        reason: e.to_string(),
    };
    let path = dir.join("state.json");
    let state: StateFile = store::atomic::read_json(&path).map_err(corrupted)?;
    let metadata = match &state.metadata {
        Some(m) => m.clone(),
        None => store::atomic::read_json(&dir.join("metadata.json")).map_err(corrupted)?,
    };
    let machine = match &state.machine {
        Some(m) => m.clone(),
        None => store::atomic::read_json(&dir.join("machine.json")).map_err(corrupted)?,
    };
    Ok((state, metadata, machine))
}

impl Executions {
    /// Opens an execution for a call: takes its lock, removes temporary files a killed call left
    /// (and the claim files killed creations of it left), reads the commit point and repairs the
    /// other files from it. When the commit point cannot
    /// be read, the folder is set aside (`ID.corrupted-<time>`, at `now`) before the lock is
    /// released, so the read that failed and the set-aside see the same folder: a call racing
    /// this one either waits its turn (busy), or finds the id free, or finds the fresh execution
    /// that took it, which it never sets aside.
    pub fn open_or_set_aside(
        &self,
        id: &str,
        command: &str,
        now: jiff::Timestamp,
    ) -> Result<Found, SessionError> {
        let dir = self.dir(id)?;
        if !dir.is_dir() {
            return Ok(Found::Missing);
        }
        let lock = match lock_at(&dir.join("execution.lock"), id, command) {
            Ok(lock) => lock,
            // Set aside or removed by another call since the look.
            Err(SessionError::Io { .. }) if !dir.is_dir() => return Ok(Found::Missing),
            Err(e) => return Err(e),
        };
        remove_temporary_files(&dir);
        self.sweep_creations_of(id);
        let (state, metadata, machine) = match read(&dir, id) {
            Ok(read) => read,
            Err(SessionError::Corrupted { reason, .. }) => {
                let source = self.answer_source(id);
                let folder = self.set_aside(id, SetAside::Corrupted, now)?;
                drop(lock);
                return Ok(Found::SetAside(Box::new(Restart {
                    reason,
                    folder,
                    source,
                })));
            }
            Err(e) => return Err(e),
        };
        let repair = self.bring_in_line(
            &dir,
            &metadata,
            state.last_call.as_ref(),
            state.machine.as_ref(),
        );
        // A call does not go on from files it cannot repair (it would leave them behind for good).
        if let Some(e) = repair.failed.into_iter().next() {
            return Err(e);
        }
        Ok(Found::Opened(Box::new(Opened {
            lock,
            state,
            metadata,
            machine,
            repaired: repair.changed,
        })))
    }

    /// Commits a call (its lock held): `state.json` durably, then the files derived from it.
    ///
    /// An error means that the commit was not made: the call did not happen. Once `state.json`
    /// is written the call has happened, whatever comes next: a derived file that cannot be
    /// brought in line is reported in [`Committed::unrepaired`], and the next call repairs it.
    pub fn commit(&self, id: &str, c: &Commit<'_>) -> Result<Committed, SessionError> {
        let dir = self.dir(id)?;
        let bytes = encode(self, id, c)?;
        if let Some(entry) = c.last_call {
            // This commit carries this call's history line only: the line of the call before it
            // must be on the disk first.
            flush_history_before(&dir.join("history.jsonl"), entry.turn)?;
        }
        let path = dir.join("state.json");
        store::atomic::write_atomic(&path, &bytes).map_err(|e| io(&path, e))?;
        let machine = c.machine_changed.then_some(&c.state.machine_snapshot);
        let repair = self.bring_in_line(&dir, c.metadata, c.last_call, machine);
        Ok(Committed {
            unrepaired: repair.failed,
        })
    }

    /// Makes `machine.json`, `metadata.json`, `pending-request.json` and `history.jsonl` agree
    /// with a commit, each file whatever became of the others. Only `machine.json` is written
    /// durably (it changes rarely, and the next commit no longer carries the machine); the others
    /// are repaired from the commit after a loss, and the history line, which the next advancing
    /// commit no longer carries, is flushed just before that commit ([`Executions::commit`]).
    pub(super) fn bring_in_line(
        &self,
        dir: &Path,
        metadata: &Metadata,
        last_call: Option<&HistoryEntry>,
        machine: Option<&Value>,
    ) -> Repair {
        let mut repair = Repair::default();
        if let Some(machine) = machine {
            let path = dir.join("machine.json");
            repair.note(
                "machine.json",
                self.replace_json(&path, machine, Layout::Compact, Flush::Durable),
            );
        }
        let path = dir.join("metadata.json");
        repair.note(
            "metadata.json",
            self.replace_json(&path, metadata, Layout::Pretty, Flush::Lazy),
        );
        let pending = dir.join("pending-request.json");
        let done = match &metadata.pending_request {
            Some(request) => self.replace_json(&pending, request, Layout::Pretty, Flush::Lazy),
            None => match std::fs::remove_file(&pending) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(io(&pending, e)),
            },
        };
        repair.note("pending-request.json", done);
        if let Some(entry) = last_call {
            let path = dir.join("history.jsonl");
            repair.note("history.jsonl", self.ensure_history(&path, entry));
        }
        repair
    }

    /// Replaces `path` with `value` as JSON unless it already holds exactly that. Whether it wrote.
    fn replace_json<T: Serialize + ?Sized>(
        &self,
        path: &Path,
        value: &T,
        layout: Layout,
        flush: Flush,
    ) -> Result<bool, SessionError> {
        let bytes = self
            .json_bytes(value, layout == Layout::Pretty)
            .map_err(|e| io(path, e))?;
        if std::fs::read(path).is_ok_and(|old| old == bytes) {
            return Ok(false);
        }
        match flush {
            Flush::Durable => store::atomic::write_atomic(path, &bytes),
            Flush::Lazy => store::atomic::write_atomic_lazy(path, &bytes),
        }
        .map_err(|e| io(path, e))?;
        Ok(true)
    }
}

/// How a derived JSON file is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// One line.
    Compact,
    /// Indented, for people to read.
    Pretty,
}

/// Whether a derived file must reach the disk before the call goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flush {
    /// Flushed, and its folder too.
    Durable,
    /// Left to the system (repaired from the commit point after a loss).
    Lazy,
}

/// Flushes `history.jsonl` when its last line is of a call before `turn`: that line was appended
/// after the previous commit, and the commit of `turn` no longer carries it. Nothing is flushed
/// when no line was appended since (a call that only waits commits the same line again).
fn flush_history_before(path: &Path, turn: u64) -> Result<(), SessionError> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(path, e)),
    };
    let (_, last) = tail(&mut file).map_err(|e| io(path, e))?;
    if last.is_some_and(|t| t < turn) {
        file.sync_data().map_err(|e| io(path, e))?;
    }
    Ok(())
}

/// A commit made ([`Executions::commit`]): the call happened.
#[derive(Debug, Default)]
pub struct Committed {
    /// The files derived from the commit point that could not be brought in line with it (the
    /// next call repairs them from `state.json`).
    pub unrepaired: Vec<SessionError>,
}

/// What bringing the derived files in line with a commit did.
#[derive(Debug, Default)]
pub(super) struct Repair {
    /// The files that had to change.
    pub changed: Vec<&'static str>,
    /// The files that could not be brought in line.
    pub failed: Vec<SessionError>,
}

impl Repair {
    fn note(&mut self, file: &'static str, done: Result<bool, SessionError>) {
        match done {
            Ok(true) => self.changed.push(file),
            Ok(false) => {}
            Err(e) => self.failed.push(e),
        }
    }
}

/// Temporary files of a call killed while writing (`.name.….tmp`, `.last.tmp`).
fn remove_temporary_files(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.ends_with(".tmp") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

impl Executions {
    /// Makes `history.jsonl` end with `entry`: a torn last line (a call killed while appending) is cut
    /// off, and the entry is appended unless the last line already is that call's. Whether it wrote.
    fn ensure_history(&self, path: &Path, entry: &HistoryEntry) -> Result<bool, SessionError> {
        let existed = path.exists();
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| io(path, e))?;
        let (complete_len, last_turn) = tail(&mut file).map_err(|e| io(path, e))?;
        let len = file.metadata().map_err(|e| io(path, e))?.len();
        let mut changed = false;
        if complete_len < len {
            file.set_len(complete_len).map_err(|e| io(path, e))?;
            changed = true;
        }
        if last_turn.is_none_or(|t| t < entry.turn) {
            let mut line = self.json_bytes(entry, false).map_err(|e| io(path, e))?;
            line.push(b'\n');
            file.seek(SeekFrom::End(0)).map_err(|e| io(path, e))?;
            file.write_all(&line).map_err(|e| io(path, e))?;
            changed = true;
        }
        if !existed && let Some(dir) = path.parent() {
            // The file's name is on the disk before a later commit relies on its lines.
            store::atomic::sync_dir(dir).map_err(|e| io(dir, e))?;
        }
        Ok(changed)
    }
}

/// The length of the complete lines of a history file (up to its last newline) and the call number
/// of its last complete line. Only the end of the file is read, so this stays fast however long the
/// history grows.
fn tail(file: &mut std::fs::File) -> std::io::Result<(u64, Option<u64>)> {
    #[derive(serde::Deserialize)]
    struct Turn {
        turn: u64,
    }
    let len = file.metadata()?.len();
    let mut window: u64 = 8 * 1024;
    loop {
        let start = len.saturating_sub(window);
        file.seek(SeekFrom::Start(start))?;
        let mut buf = Vec::with_capacity((len - start) as usize);
        file.read_to_end(&mut buf)?;
        let Some(last_nl) = buf.iter().rposition(|&b| b == b'\n') else {
            if start == 0 {
                return Ok((0, None));
            }
            window *= 4;
            continue;
        };
        let complete_len = start + last_nl as u64 + 1;
        let body = &buf[..last_nl];
        let line_start = body.iter().rposition(|&b| b == b'\n').map(|i| i + 1);
        match line_start {
            Some(i) => {
                let turn = serde_json::from_slice::<Turn>(&body[i..])
                    .ok()
                    .map(|t| t.turn);
                return Ok((complete_len, turn));
            }
            None if start == 0 => {
                let turn = serde_json::from_slice::<Turn>(body).ok().map(|t| t.turn);
                return Ok((complete_len, turn));
            }
            None => window *= 4,
        }
    }
}
