//! [`RunStore`] on the local filesystem: one folder per run under a root folder.
//!
//! ```text
//! <root>/<run>/<journal>       the journal, JSON lines (FileLayout::journal, e.g. journal.jsonl)
//! <root>/<run>/<lock>          the lease: an OS lock held by the writer (FileLayout::lock)
//! <root>/<run>/.epoch          the run's lease epoch (a decimal number)
//! <root>/<run>/<key>           documents (`io/invocations/3.json` is a file in `io/invocations/`)
//! <root>/.rm-<run>-<epoch>/    a run being removed (gone with the next `list` after a crash)
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
    Entry, Flush, JournalRead, Lease, LeaseState, RunStore, Seq, check_record, validate_key,
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

    /// Finishes removals a crash interrupted.
    fn finish_removals(&self) {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return;
        };
        for entry in entries.filter_map(Result::ok) {
            if entry.file_name().to_string_lossy().starts_with(REMOVING) {
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
