//! [`RunStore`] on the local filesystem: one folder per run under a root folder.
//!
//! ```text
//! <root>/<run>/<journal>       the journal, JSON lines (FileLayout::journal, e.g. journal.jsonl)
//! <root>/<run>/<lock>          the lease: an OS lock held by the writer (FileLayout::lock)
//! <root>/<run>/.epoch          the run's lease epoch (a decimal number)
//! <root>/<run>/.created        when the run was created (milliseconds since the epoch)
//! <root>/<run>/.queued         present while the run is queued for workers: when it joined the
//!                              queue (milliseconds), the order in which workers claim runs
//! <root>/<run>/<key>           documents (`io/invocations/3.json` is a file in `io/invocations/`)
//! <root>/.rm-<run>-<epoch>/    a run being removed (gone with the next `list` after a crash)
//! <root>/.new-<run>-<pid>-<n>/ a run being created whole, renamed into place when complete
//! ```
//!
//! The lease is a [`RunLock`]: the operating system frees it when its holder dies, so a free lease
//! is never stuck. The epoch is bumped (atomically, without a flush) each time the lease is taken,
//! and every append and document write checks it, so a writer whose lock file was replaced under it
//! (removed by hand, the run folder moved) is fenced rather than writing beside the new holder.
//! After a power loss the epoch may go back by one; the OS lock still keeps one writer at a time.

use std::path::{Path, PathBuf};

use serde::de::IgnoredAny;

use crate::atomic::{create_dir_all_durable, sync_dir, write_atomic, write_atomic_lazy};
use crate::error::{StoreError, StoreResult};
use crate::ids::validate_id;
use crate::journal::{self, Journal};
use crate::lock::{LockHolder, RunLock};
use crate::runs::{
    Entry, Flush, JournalRead, Lease, LeaseState, RunRow, RunStore, Seq, check_record, check_whole,
    validate_key,
};

/// The names of a run's own files, which differ between the tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLayout {
    /// The journal's file name.
    pub journal: &'static str,
    /// The lock file's name.
    pub lock: &'static str,
}

/// Where a run's epoch is kept.
const EPOCH: &str = ".epoch";
/// Prefix of a run folder being removed.
const REMOVING: &str = ".rm-";
/// Prefix of a run folder being created whole.
const CREATING: &str = ".new-";
/// When a run was created.
const CREATED: &str = ".created";
/// When a queued run joined the queue.
const QUEUED: &str = ".queued";
/// How old a folder left by an interrupted whole creation must be before a listing removes it
/// (a younger one may be a creation still going on).
const ABANDONED: std::time::Duration = std::time::Duration::from_secs(3600);

/// Runs as folders under one root.
#[derive(Debug, Clone)]
pub struct FileStore {
    root: PathBuf,
    layout: FileLayout,
}

/// What a file lease holds.
struct FileGuard {
    dir: PathBuf,
    epoch: u64,
    records: u64,
    journal: Journal,
    _lock: RunLock,
}

impl FileStore {
    /// The runs under `root` (created on the first [`RunStore::create`]).
    pub fn new(root: impl Into<PathBuf>, layout: FileLayout) -> Self {
        Self {
            root: root.into(),
            layout,
        }
    }

    /// The store a `file:///path` URL names, the runs of `namespace` in `path/<namespace>`;
    /// `None` for another kind of URL, an error for a `file://` one without an absolute path.
    pub fn from_url(url: &str, namespace: &str, layout: FileLayout) -> Option<StoreResult<Self>> {
        let path = url.strip_prefix("file://")?;
        if !path.starts_with('/') {
            return Some(Err(StoreError::BadUrl {
                url: url.to_string(),
                reason: "a folder store is file:///absolute/path",
            }));
        }
        Some(validate_id(namespace).map(|ns| Self::new(Path::new(path).join(ns), layout)))
    }

    /// The root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn run_dir(&self, run: &str) -> StoreResult<PathBuf> {
        Ok(self.root.join(validate_id(run)?))
    }

    fn existing_run_dir(&self, run: &str) -> StoreResult<PathBuf> {
        let dir = self.run_dir(run)?;
        if dir.is_dir() {
            Ok(dir)
        } else {
            Err(StoreError::NoRun {
                run: run.to_string(),
            })
        }
    }

    /// Takes the lease of the run in `dir`: the lock, a new epoch, the journal with its torn tail
    /// cut off.
    fn take(&self, run: &str, dir: PathBuf, holder: &LockHolder) -> StoreResult<Lease> {
        let acquired = RunLock::acquire(&dir.join(self.layout.lock), holder)?;
        let epoch = read_epoch(&dir)? + 1;
        let epoch_path = dir.join(EPOCH);
        write_atomic_lazy(&epoch_path, epoch.to_string().as_bytes())?;
        let path = dir.join(self.layout.journal);
        let (records, recovered) = if path.exists() {
            let contents = journal::read_with(&path, json_line)?;
            let recovered = match contents.torn_tail {
                Some(_) => journal::recover_with(&path, json_line)?,
                None => None,
            };
            (contents.records.len() as u64, recovered)
        } else {
            (0, None)
        };
        let journal = Journal::open(&path)?;
        let guard = FileGuard {
            dir,
            epoch,
            records,
            journal,
            _lock: acquired.lock,
        };
        Ok(Lease::new(
            run,
            epoch,
            recovered,
            acquired.stale,
            Box::new(guard),
        ))
    }

    /// The guard of a lease this store granted, checked against the run's current epoch.
    fn guard<'l>(&self, lease: &'l mut Lease) -> StoreResult<&'l mut FileGuard> {
        let run = lease.run().to_string();
        let expected = self.run_dir(&run)?;
        let guard = lease.guard_mut::<FileGuard>()?;
        if guard.dir != expected {
            return Err(StoreError::ForeignLease { run });
        }
        let current = read_epoch(&guard.dir)?;
        if current != guard.epoch {
            return Err(StoreError::Fenced {
                run,
                held: guard.epoch,
                current,
            });
        }
        Ok(guard)
    }

    fn is_reserved(&self, key: &str) -> bool {
        key == self.layout.journal || key == self.layout.lock
    }

    /// Finishes removals a crash interrupted, and clears whole creations it cut short.
    fn finish_removals(&self) {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return;
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            let abandoned = name.starts_with(CREATING)
                && entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > ABANDONED));
            if name.starts_with(REMOVING) || abandoned {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }

    fn read_all(&self, run: &str) -> StoreResult<JournalRead> {
        let dir = self.existing_run_dir(run)?;
        let path = dir.join(self.layout.journal);
        let contents = match journal::read_with(&path, json_text) {
            Ok(contents) => contents,
            Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(JournalRead::default());
            }
            Err(e) => return Err(e),
        };
        let entries: Vec<Entry> = contents
            .records
            .into_iter()
            .zip(1..)
            .map(|(json, n)| Entry { seq: Seq(n), json })
            .collect();
        Ok(JournalRead {
            len: entries.len() as u64,
            entries,
            torn: contents.torn_tail,
        })
    }
}

/// Whether a journal line is one JSON value.
fn json_line(line: &[u8]) -> Result<(), serde_json::Error> {
    serde_json::from_slice::<IgnoredAny>(line).map(|_| ())
}

/// A journal line's text, when it is one JSON value.
fn json_text(line: &[u8]) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let text = std::str::from_utf8(line)?;
    serde_json::from_str::<IgnoredAny>(text)?;
    Ok(text.to_string())
}

fn read_epoch(dir: &Path) -> StoreResult<u64> {
    let path = dir.join(EPOCH);
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse().map_err(|_| StoreError::BadRecord {
            run: dir.display().to_string(),
            reason: format!("{} holds {text:?}, not an epoch", path.display()),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(StoreError::io("read", path, e)),
    }
}

/// Milliseconds since the Unix epoch, now.
fn now_millis() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// A file holding milliseconds since the epoch, if it is there and holds one.
fn read_millis(path: &Path) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// When the run in `dir` was created: its `.created`, or (a run made before it was kept) the
/// folder's modification time.
fn created_at(dir: &Path) -> jiff::Timestamp {
    read_millis(&dir.join(CREATED))
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .or_else(|| {
            let modified = std::fs::metadata(dir).and_then(|m| m.modified()).ok()?;
            jiff::Timestamp::try_from(modified).ok()
        })
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

impl FileStore {
    /// The queued runs, oldest first (ties by name).
    fn queue(&self) -> StoreResult<Vec<String>> {
        let mut queued: Vec<(i64, String)> = self
            .list()?
            .into_iter()
            .filter_map(|run| Some((read_millis(&self.root.join(&run).join(QUEUED))?, run)))
            .collect();
        queued.sort();
        Ok(queued.into_iter().map(|(_, run)| run).collect())
    }

    /// Builds the run `run` whole in a hidden folder, then renames it into place.
    fn build_whole(
        &self,
        run: &str,
        records: &[&str],
        documents: &[(&str, &[u8])],
    ) -> StoreResult<PathBuf> {
        let dir = self.run_dir(run)?;
        create_dir_all_durable(&self.root)?;
        if dir.exists() {
            return Err(StoreError::Exists {
                run: run.to_string(),
            });
        }
        let staging = tempfile::Builder::new()
            .prefix(&format!("{CREATING}{run}-{}-", std::process::id()))
            .tempdir_in(&self.root)
            .map_err(|e| StoreError::io("create a folder in", &self.root, e))?;
        let path = staging.path();
        write_atomic(&path.join(CREATED), now_millis().to_string().as_bytes())?;
        let mut journal = Journal::open(&path.join(self.layout.journal))?;
        journal.append_raw_lines(records)?;
        drop(journal);
        for (key, bytes) in documents {
            let file = path.join(key);
            if let Some(parent) = file.parent().filter(|p| *p != path) {
                create_dir_all_durable(parent)?;
            }
            write_atomic(&file, bytes)?;
        }
        sync_dir(path)?;
        let staged = staging.keep();
        if let Err(e) = std::fs::rename(&staged, &dir) {
            let _ = std::fs::remove_dir_all(&staged);
            return Err(if dir.exists() {
                StoreError::Exists {
                    run: run.to_string(),
                }
            } else {
                StoreError::io("move into place", dir, e)
            });
        }
        sync_dir(&self.root)?;
        Ok(dir)
    }
}

impl RunStore for FileStore {
    fn list(&self) -> StoreResult<Vec<String>> {
        self.finish_removals();
        let entries = match std::fs::read_dir(&self.root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io("list", &self.root, e)),
        };
        let mut runs: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|name| !name.starts_with('.') && validate_id(name).is_ok())
            .collect();
        runs.sort();
        Ok(runs)
    }

    fn create(&self, run: &str, holder: &LockHolder) -> StoreResult<Lease> {
        let dir = self.run_dir(run)?;
        create_dir_all_durable(&self.root)?;
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(StoreError::Exists {
                    run: run.to_string(),
                });
            }
            Err(e) => return Err(StoreError::io("create", dir, e)),
        }
        sync_dir(&self.root)?;
        write_atomic_lazy(&dir.join(CREATED), now_millis().to_string().as_bytes())?;
        self.take(run, dir, holder)
    }

    fn lease(&self, run: &str, holder: &LockHolder) -> StoreResult<Lease> {
        let dir = self.existing_run_dir(run)?;
        self.take(run, dir, holder)
    }

    fn lease_state(&self, run: &str) -> StoreResult<LeaseState> {
        let dir = self.existing_run_dir(run)?;
        RunLock::probe(&dir.join(self.layout.lock))
    }

    fn append(&self, lease: &mut Lease, records: &[&str]) -> StoreResult<Seq> {
        for record in records {
            check_record(lease.run(), record)?;
        }
        let guard = self.guard(lease)?;
        guard.journal.append_raw_lines(records)?;
        guard.records += records.len() as u64;
        Ok(Seq(guard.records))
    }

    fn read_journal(&self, run: &str, after: Seq) -> StoreResult<JournalRead> {
        let mut read = self.read_all(run)?;
        read.entries.retain(|e| e.seq > after);
        Ok(read)
    }

    fn read_tail(&self, run: &str, count: usize) -> StoreResult<JournalRead> {
        let mut read = self.read_all(run)?;
        let keep_from = read.entries.len().saturating_sub(count);
        read.entries.drain(..keep_from);
        Ok(read)
    }

    fn put(&self, lease: &mut Lease, key: &str, bytes: &[u8], flush: Flush) -> StoreResult<()> {
        validate_key(key)?;
        if self.is_reserved(key) {
            return Err(StoreError::ReservedKey {
                run: lease.run().to_string(),
                key: key.to_string(),
            });
        }
        let guard = self.guard(lease)?;
        let path = guard.dir.join(key);
        if let Some(parent) = path.parent().filter(|p| *p != guard.dir) {
            create_dir_all_durable(parent)?;
        }
        match flush {
            Flush::Durable => write_atomic(&path, bytes),
            Flush::Lazy => write_atomic_lazy(&path, bytes),
        }
    }

    fn get(&self, run: &str, key: &str) -> StoreResult<Option<Vec<u8>>> {
        validate_key(key)?;
        let path = self.existing_run_dir(run)?.join(key);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::io("read", path, e)),
        }
    }

    fn keys(&self, run: &str, prefix: &str) -> StoreResult<Vec<String>> {
        let dir = self.existing_run_dir(run)?;
        let mut keys = Vec::new();
        collect_keys(&dir, "", &mut keys)?;
        keys.retain(|k| k.starts_with(prefix) && !self.is_reserved(k));
        keys.sort();
        Ok(keys)
    }

    fn remove(&self, mut lease: Lease) -> StoreResult<()> {
        let doomed = self
            .root
            .join(format!("{REMOVING}{}-{}", lease.run(), lease.epoch()));
        let dir = self.guard(&mut lease)?.dir.clone();
        std::fs::rename(&dir, &doomed).map_err(|e| StoreError::io("move away", dir, e))?;
        sync_dir(&self.root)?;
        drop(lease);
        std::fs::remove_dir_all(&doomed).map_err(|e| StoreError::io("remove", doomed, e))
    }

    fn create_whole(
        &self,
        run: &str,
        holder: &LockHolder,
        records: &[&str],
        documents: &[(&str, &[u8])],
    ) -> StoreResult<Lease> {
        check_whole(run, records, documents)?;
        for (key, _) in documents {
            if self.is_reserved(key) {
                return Err(StoreError::ReservedKey {
                    run: run.to_string(),
                    key: (*key).to_string(),
                });
            }
        }
        let dir = self.build_whole(run, records, documents)?;
        self.take(run, dir, holder)
    }

    fn lease_time(&self) -> Option<std::time::Duration> {
        None
    }

    fn renew(&self, lease: &mut Lease) -> StoreResult<()> {
        self.guard(lease).map(|_| ())
    }

    fn set_queued(&self, lease: &mut Lease, queued: bool) -> StoreResult<()> {
        let dir = self.guard(lease)?.dir.clone();
        let path = dir.join(QUEUED);
        if !queued {
            return match std::fs::remove_file(&path) {
                Ok(()) => sync_dir(&dir),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(StoreError::io("remove", path, e)),
            };
        }
        if path.exists() {
            return Ok(());
        }
        write_atomic(&path, now_millis().to_string().as_bytes())
    }

    fn defer(&self, lease: &mut Lease) -> StoreResult<()> {
        let path = self.guard(lease)?.dir.join(QUEUED);
        if !path.exists() {
            return Ok(());
        }
        write_atomic(&path, now_millis().to_string().as_bytes())
    }

    fn claim(&self, holder: &LockHolder) -> StoreResult<Option<Lease>> {
        for run in self.queue()? {
            let dir = self.run_dir(&run)?;
            let lease = match self.take(&run, dir.clone(), holder) {
                Ok(lease) => lease,
                Err(StoreError::Busy { .. } | StoreError::NoRun { .. }) => continue,
                Err(StoreError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    continue;
                }
                Err(e) => return Err(e),
            };
            // Another worker may have finished it between the listing and the lock.
            if dir.join(QUEUED).exists() {
                return Ok(Some(lease));
            }
        }
        Ok(None)
    }

    fn queued(&self) -> StoreResult<u64> {
        Ok(self.queue()?.len() as u64)
    }

    fn rows(&self) -> StoreResult<Vec<RunRow>> {
        let mut rows = Vec::new();
        for run in self.list()? {
            let dir = self.root.join(&run);
            let (holder, live) = match RunLock::probe(&dir.join(self.layout.lock))? {
                crate::lock::LockState::Free => (None, false),
                crate::lock::LockState::Stale(holder) => (Some(holder), false),
                crate::lock::LockState::Held(holder) => (holder, true),
            };
            rows.push(RunRow {
                epoch: read_epoch(&dir)?,
                holder,
                live,
                queued: dir.join(QUEUED).exists(),
                created: created_at(&dir),
                run,
            });
        }
        Ok(rows)
    }
}

/// The document keys under `dir` (`prefix` is the key of `dir` itself, `""` at the run's folder):
/// every file whose path is made of valid key parts (hidden and temporary files are not documents).
fn collect_keys(dir: &Path, prefix: &str, keys: &mut Vec<String>) -> StoreResult<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| StoreError::io("list", dir, e))?;
    for entry in entries.filter_map(Result::ok) {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let key = format!("{prefix}{name}");
        if validate_key(&key).is_err() {
            continue;
        }
        match entry.file_type() {
            Ok(t) if t.is_dir() => collect_keys(&entry.path(), &format!("{key}/"), keys)?,
            Ok(t) if t.is_file() => keys.push(key),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
