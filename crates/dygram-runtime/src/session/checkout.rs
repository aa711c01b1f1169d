//! [`Checkout`]: a shared execution's documents as an ordinary executions folder, under the lease,
//! and the changed files uploaded back.
//!
//! **Upload order.** The file mode writes `state.json` first and the files derived from it after,
//! so that a derived file may lag its commit point but never lead it; the next call repairs a
//! lagging file from the commit point ([`super::commit`]). A store has no rename: its documents
//! are written one by one. The upload writes `state.json` last (a caller fenced anywhere along the
//! way commits nothing), so the files that come before may lead the commit point when a call is
//! cut short. Each is then harmless or undone:
//!
//! * `metadata.json` and `pending-request.json` are rewritten from `state.json` by the repair of
//!   the next call, leading or lagging;
//! * lines of `history.jsonl` after the commit point's call are dropped when the documents are
//!   written into the private folder: their call did not happen;
//! * `machine.json` is the machine of every commit that does not carry one, so a new machine must
//!   not lead the commit that carries it: when the new `state.json` carries the machine (a meta
//!   tool changed it), `machine.json` is written after `state.json`, and when it lags, the next
//!   call repairs it from that commit and uploads it before its own.
//!
//! A document the folder no longer has (`pending-request.json` once answered) is written empty:
//! an empty document stands for a removed file and is not written into the folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde::Deserialize;
use store::runs::validate_key;
use store::{Flush, Lease, RunStore};

use super::Executions;
use super::shared::{SharedError, store_error};

const STATE: &str = "state.json";
const MACHINE: &str = "machine.json";
const HISTORY: &str = "history.jsonl";
/// The OS lock of the private folder's execution (the lease stands for it in the store).
const LOCK: &str = "execution.lock";

/// Documents of an execution by key (its path inside the execution's folder, `/`-separated).
type Documents = BTreeMap<String, Vec<u8>>;

/// A shared execution checked out: its lease held, its documents written into a private folder
/// (`<tmp>/.dygram/executions/<id>/`, removed when the checkout ends).
pub struct Checkout {
    store: Arc<dyn RunStore>,
    lease: Mutex<Lease>,
    renew_every: Duration,
    id: String,
    folder: TempFolder,
    executions: Executions,
    /// The documents as they were in the store.
    downloaded: Documents,
}

/// What [`Checkout::check_in`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckedIn {
    /// The keys written, in order (`state.json` among the last).
    pub written: Vec<String>,
}

impl Checkout {
    /// Writes the documents of the execution `lease` is for into a new private folder; queued
    /// answers stay in `caller`'s `.dygram/interactive-queue`.
    pub(super) fn take(
        store: Arc<dyn RunStore>,
        lease: Lease,
        renew_every: Duration,
        caller: &Path,
        redactor: llm::Redactor,
    ) -> Result<Self, SharedError> {
        let folder = TempFolder::new()?;
        let executions = Executions::under(&folder.0)
            .with_redactor(redactor)
            .with_queue_dir(caller.join(super::QUEUE_DIR))
            .private_copy();
        let mut checkout = Self {
            store,
            id: lease.run().to_string(),
            lease: Mutex::new(lease),
            renew_every,
            folder,
            executions,
            downloaded: Documents::new(),
        };
        checkout.download()?;
        Ok(checkout)
    }

    /// The execution's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The private folder: its `.dygram/executions/<id>/` holds the execution.
    pub fn base(&self) -> &Path {
        &self.folder.0
    }

    /// The executions folder of the checkout.
    pub fn executions(&self) -> &Executions {
        &self.executions
    }

    /// The execution's folder.
    fn dir(&self) -> PathBuf {
        self.executions.root().join(&self.id)
    }

    /// Reads the documents and writes them into the folder. Before the first commit (no
    /// `state.json`) nothing is written: the call creates the execution.
    fn download(&mut self) -> Result<(), SharedError> {
        self.downloaded = download(&*self.store, &self.id, &self.dir())?;
        Ok(())
    }

    /// Runs `work` on the executions folder, renewing the lease every third of its time meanwhile
    /// (a renewal that fails stops renewing; the upload then says why).
    pub fn keep_alive<T>(&self, work: impl FnOnce(&Executions) -> T) -> T {
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::scope(|scope| {
            scope.spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(self.renew_every)
                {
                    let mut lease = self.lease.lock().unwrap_or_else(|p| p.into_inner());
                    if self.store.renew(&mut lease).is_err() {
                        return;
                    }
                }
            });
            let out = work(&self.executions);
            drop(stop);
            out
        })
    }

    /// Uploads the files of the execution's folder that differ from the store's documents, under
    /// the lease, in the order of the module documentation, and gives the lease up. Refused with
    /// [`SharedError::Fenced`] when another caller took the execution over.
    pub fn check_in(self) -> Result<CheckedIn, SharedError> {
        let dir = self.dir();
        if !dir.is_dir() {
            // Nothing was created (the machine has errors).
            return Ok(CheckedIn::default());
        }
        let mut files = Documents::new();
        collect(&dir, "", &mut files)?;
        let machine_last = files.get(STATE).is_some_and(|s| carries_machine(s));
        let plan = upload_plan(&self.downloaded, files, machine_last);
        let mut lease = self.lease.into_inner().unwrap_or_else(|p| p.into_inner());
        let mut written = Vec::with_capacity(plan.len());
        for (key, bytes) in plan {
            self.store
                .put(&mut lease, &key, &bytes, Flush::Durable)
                .map_err(store_error(&self.id))?;
            written.push(key);
        }
        Ok(CheckedIn { written })
    }
}

/// Reads the documents of execution `id` and writes the committed ones into `dir` (its folder);
/// returns them as they were in the store. Before the first commit (no `state.json`) nothing is
/// written.
fn download(store: &dyn RunStore, id: &str, dir: &Path) -> Result<Documents, SharedError> {
    let mut downloaded = Documents::new();
    let keys = store.keys(id, "").map_err(store_error(id))?;
    for key in keys.into_iter().filter(|k| validate_key(k).is_ok()) {
        if let Some(bytes) = store.get(id, &key).map_err(store_error(id))? {
            downloaded.insert(key, bytes);
        }
    }
    let Some(state) = downloaded.get(STATE).filter(|s| !s.is_empty()) else {
        return Ok(downloaded);
    };
    let state: super::StateFile =
        serde_json::from_slice(state).map_err(|e| SharedError::Corrupted {
            id: id.to_string(),
            reason: e.to_string(),
        })?;
    let last_call = state.last_call.map_or(0, |c| c.turn);
    for (key, bytes) in &downloaded {
        if bytes.is_empty() {
            continue;
        }
        let path = dir.join(key);
        if key == HISTORY {
            write_file(&path, &committed_history(bytes, last_call))?;
        } else {
            write_file(&path, bytes)?;
        }
    }
    Ok(downloaded)
}

/// A shared execution copied for reading (`exec status|show --store`): its committed documents in
/// a private folder, read without taking its lease (what a call uploads before its `state.json`
/// is left out, as a call does).
pub struct View {
    _folder: TempFolder,
    executions: Executions,
}

impl View {
    /// Copies execution `id` of `store`; [`SharedError::NotFound`] when the store has no such
    /// execution, or none committed yet.
    pub(super) fn take(store: &dyn RunStore, id: &str) -> Result<Self, SharedError> {
        let folder = TempFolder::new()?;
        let executions = Executions::under(&folder.0);
        let documents = download(store, id, &executions.root().join(id))?;
        if documents.get(STATE).is_none_or(|s| s.is_empty()) {
            return Err(SharedError::NotFound(id.to_string()));
        }
        Ok(Self {
            _folder: folder,
            executions,
        })
    }

    /// The executions folder of the copy (it holds the one execution).
    pub fn executions(&self) -> &Executions {
        &self.executions
    }
}

/// The documents to write, in order: every changed file but `state.json` (and `machine.json` when
/// `machine_last`), empty documents for the files gone, then `state.json`, then `machine.json`
/// when `machine_last`.
fn upload_plan(before: &Documents, now: Documents, machine_last: bool) -> Vec<(String, Vec<u8>)> {
    let gone: Vec<(String, Vec<u8>)> = before
        .iter()
        .filter(|(key, bytes)| !bytes.is_empty() && !now.contains_key(*key))
        .map(|(key, _)| (key.clone(), Vec::new()))
        .collect();
    let (mut last, mut first): (Vec<_>, Vec<_>) = now
        .into_iter()
        .filter(|(key, bytes)| before.get(key) != Some(bytes))
        .partition(|(key, _)| key == STATE || (machine_last && key == MACHINE));
    first.extend(gone);
    last.sort_by_key(|(key, _)| key != STATE);
    first.extend(last);
    first
}

/// Whether `state.json` carries the machine (the call of its commit changed it).
fn carries_machine(state: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Carries {
        #[serde(default)]
        machine: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Carries>(state).is_ok_and(|c| c.machine.is_some())
}

/// The lines of `history.jsonl` up to call `last` (the commit point's): a later line was uploaded
/// by a call cut short before its `state.json`, so its call did not happen.
fn committed_history(history: &[u8], last: u64) -> Vec<u8> {
    #[derive(Deserialize)]
    struct Turn {
        turn: u64,
    }
    let mut kept = Vec::with_capacity(history.len());
    for line in history.split_inclusive(|&b| b == b'\n') {
        let turn = serde_json::from_slice::<Turn>(line.trim_ascii_end()).map(|t| t.turn);
        if turn.is_ok_and(|t| t > last) {
            break;
        }
        kept.extend_from_slice(line);
    }
    kept
}

/// The files under `dir` that are documents, by key (`prefix/name`): not the lock, nor temporary
/// files or other names a document key cannot take (names starting with '.').
fn collect(dir: &Path, prefix: &str, files: &mut Documents) -> Result<(), SharedError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SharedError::Io { path, source }
    };
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let key = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let path = entry.path();
        let kind = entry.file_type().map_err(io(&path))?;
        if kind.is_dir() && validate_key(&key).is_ok() {
            collect(&path, &key, files)?;
        } else if kind.is_file() && key != LOCK && validate_key(&key).is_ok() {
            let bytes = std::fs::read(&path).map_err(io(&path))?;
            files.insert(key, bytes);
        }
    }
    Ok(())
}

/// Writes `bytes` to `path` in the private folder (its folders made first).
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), SharedError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SharedError::Io { path, source }
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    std::fs::write(path, bytes).map_err(io(path))
}

/// A folder only this process uses (mode 0700), removed with everything in it when dropped.
struct TempFolder(PathBuf);

impl TempFolder {
    fn new() -> Result<Self, SharedError> {
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        let mut n = 0u32;
        loop {
            let path = base.join(format!("dygram-store-{}-{nanos}-{n}", std::process::id()));
            match builder.create(&path) {
                Ok(()) => return Ok(Self(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
                Err(source) => return Err(SharedError::Io { path, source }),
            }
        }
    }
}

impl Drop for TempFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn docs(pairs: &[(&str, &str)]) -> Documents {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    fn keys(plan: &[(String, Vec<u8>)]) -> Vec<&str> {
        plan.iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn state_goes_last_and_unchanged_files_stay() {
        let before = docs(&[
            ("state.json", "1"),
            ("metadata.json", "m"),
            ("pending-request.json", "p"),
        ]);
        let now = docs(&[
            ("state.json", "2"),
            ("metadata.json", "m"),
            ("history.jsonl", "h"),
        ]);
        let plan = upload_plan(&before, now, false);
        assert_eq!(
            keys(&plan),
            ["history.jsonl", "pending-request.json", "state.json"]
        );
        assert!(plan[1].1.is_empty(), "a file gone is an empty document");
    }

    #[test]
    fn a_new_machine_follows_the_commit_that_carries_it() {
        let now = docs(&[("machine.json", "m2"), ("state.json", "s"), ("a.json", "a")]);
        let plan = upload_plan(&Documents::new(), now.clone(), true);
        assert_eq!(keys(&plan), ["a.json", "state.json", "machine.json"]);
        let plan = upload_plan(&Documents::new(), now, false);
        assert_eq!(keys(&plan), ["a.json", "machine.json", "state.json"]);
    }

    #[test]
    fn history_lines_after_the_commit_point_are_dropped() {
        let history = b"{\"turn\":1}\n{\"turn\":2}\n{\"turn\":3}\n";
        assert_eq!(
            committed_history(history, 2),
            b"{\"turn\":1}\n{\"turn\":2}\n"
        );
        assert_eq!(committed_history(history, 0), b"");
        assert_eq!(committed_history(history, 3), history);
        // A torn last line is left to the repair of the file mode.
        assert_eq!(
            committed_history(b"{\"turn\":1}\n{\"tu", 1),
            b"{\"turn\":1}\n{\"tu"
        );
    }

    #[test]
    fn the_commit_point_says_whether_it_carries_the_machine() {
        assert!(carries_machine(br#"{"machine":{"nodes":[]}}"#));
        assert!(!carries_machine(br#"{"status":"complete"}"#));
        assert!(!carries_machine(br#"{"machine":null}"#));
    }
}
