//! Run locks: one writer per run.
//!
//! A [`RunLock`] is an exclusive `File::try_lock` on a lock file, held for as long as the value lives
//! (normally the whole process). The operating system releases it when the process dies, however it
//! dies, so a lock that is free is never "stuck". The holder writes who it is (pid, host, start time)
//! into the file for diagnostics and empties it on a clean release; a lock that is free but still names
//! a holder was therefore left by a process that died: it is *stale*, and the run it protects was
//! interrupted.
//!
//! The holder record is advisory and not flushed to disk (two `fsync`s per run saved): after a power
//! loss it may be missing. Callers that must know a run was cut short record that in their own
//! durable state (delta's `metadata.json` says RUNNING), and use the record only to say who held it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{StoreError, StoreResult};
pub use crate::holder::{LockHolder, hostname};

/// The state of a lock file, as seen by [`RunLock::probe`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockState {
    /// Nobody holds the lock and the last holder released it cleanly (or there never was one).
    Free,
    /// Nobody holds the lock, but the last holder did not release it: it died.
    Stale(LockHolder),
    /// A live process holds the lock.
    Held(Option<LockHolder>),
}

/// An exclusive lock, released when dropped.
#[derive(Debug)]
pub struct RunLock {
    file: File,
    path: PathBuf,
}

/// A freshly acquired lock.
#[derive(Debug)]
pub struct Acquired {
    /// The lock; keep it alive for as long as you write.
    pub lock: RunLock,
    /// The previous holder, when it died without releasing the lock.
    pub stale: Option<LockHolder>,
}

impl RunLock {
    /// Takes the lock at `path` (creating the file) without waiting.
    ///
    /// Fails with [`StoreError::Busy`] when a live process holds it.
    pub fn acquire(path: &Path, holder: &LockHolder) -> StoreResult<Acquired> {
        // If another process deletes the lock file between our open and our lock, we would hold a lock
        // on a file nobody else can see. Check and retry a few times.
        for _ in 0..5 {
            let mut file = open_lock_file(path)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    return Err(StoreError::Busy {
                        path: path.to_path_buf(),
                        holder: read_holder(&mut file),
                    });
                }
                Err(TryLockError::Error(e)) => return Err(StoreError::io("lock", path, e)),
            }
            if !same_file(&file, path) {
                continue;
            }
            let stale = read_holder(&mut file);
            write_holder(&mut file, holder)
                .map_err(|e| StoreError::io("write lock holder to", path, e))?;
            return Ok(Acquired {
                lock: RunLock {
                    file,
                    path: path.to_path_buf(),
                },
                stale,
            });
        }
        Err(StoreError::io(
            "lock",
            path,
            std::io::Error::other("the lock file keeps being replaced by another process"),
        ))
    }

    /// Looks at the lock without keeping it.
    ///
    /// Probing takes a shared lock for an instant, so a concurrent [`RunLock::acquire`] could see the
    /// file as busy during that instant.
    pub fn probe(path: &Path) -> StoreResult<LockState> {
        let mut file = match crate::atomic::own_file(OpenOptions::new().read(true)).open(path) {
            Ok(f) => plain_file(f, path)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LockState::Free),
            Err(e) => return Err(StoreError::io("open lock file", path, e)),
        };
        match file.try_lock_shared() {
            Ok(()) => {
                let holder = read_holder(&mut file);
                let _ = file.unlock();
                Ok(holder.map_or(LockState::Free, LockState::Stale))
            }
            Err(TryLockError::WouldBlock) => Ok(LockState::Held(read_holder(&mut file))),
            Err(TryLockError::Error(e)) => Err(StoreError::io("lock", path, e)),
        }
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Releases the lock now (dropping it does the same).
    pub fn release(self) {
        drop(self);
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Emptying the file marks a clean release; closing the file releases the lock itself.
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

fn open_lock_file(path: &Path) -> StoreResult<File> {
    let file = crate::atomic::own_file(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false),
    )
    .open(path)
    .map_err(|e| StoreError::io("open lock file", path, e))?;
    plain_file(file, path)
}

/// `file` (opened at `path`) if it is a regular file with at most one name (none: removed by
/// another process meanwhile, which [`RunLock::acquire`] retries); a lock file is written, and
/// must not be another file reached through a link someone put at its name.
fn plain_file(file: File, path: &Path) -> StoreResult<File> {
    let meta = file
        .metadata()
        .map_err(|e| StoreError::io("inspect lock file", path, e))?;
    #[cfg(unix)]
    let single = std::os::unix::fs::MetadataExt::nlink(&meta) <= 1;
    #[cfg(not(unix))]
    let single = true;
    if meta.is_file() && single {
        return Ok(file);
    }
    Err(StoreError::io(
        "use lock file",
        path,
        std::io::Error::other("not a regular file with one name (remove it)"),
    ))
}

fn read_holder(file: &mut File) -> Option<LockHolder> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    Some(serde_json::from_str(text).unwrap_or(LockHolder {
        pid: 0,
        host: "unknown".into(),
        started_at: "unknown".into(),
        command: Some(format!("unreadable holder record {text:?}")),
        process_scope: None,
    }))
}

fn write_holder(file: &mut File, holder: &LockHolder) -> std::io::Result<()> {
    let text = serde_json::to_string(holder).map_err(std::io::Error::other)?;
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")
}

#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(_file: &File, path: &Path) -> bool {
    path.exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(cmd: &str) -> LockHolder {
        LockHolder::current(jiff::Timestamp::UNIX_EPOCH, Some(cmd))
    }

    #[cfg(unix)]
    #[test]
    fn a_link_at_the_lock_files_name_is_refused_and_its_target_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("precious.txt");
        std::fs::write(&outside, "keep me").unwrap();
        let lock = dir.path().join("run.lock");
        std::os::unix::fs::symlink(&outside, &lock).unwrap();
        assert!(RunLock::acquire(&lock, &holder("a")).is_err());
        assert!(RunLock::probe(&lock).is_err());
        std::fs::remove_file(&lock).unwrap();
        std::os::unix::fs::symlink(dir.path().join("missing.txt"), &lock).unwrap();
        assert!(RunLock::acquire(&lock, &holder("a")).is_err());
        assert!(
            !dir.path().join("missing.txt").exists(),
            "nothing created through it"
        );
        std::fs::remove_file(&lock).unwrap();
        std::fs::hard_link(&outside, &lock).unwrap();
        assert!(RunLock::acquire(&lock, &holder("a")).is_err());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
    }

    #[test]
    fn second_acquire_is_busy_and_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let first = RunLock::acquire(&path, &holder("delta run")).unwrap();
        assert!(first.stale.is_none());
        let err = RunLock::acquire(&path, &holder("delta continue")).unwrap_err();
        match &err {
            StoreError::Busy {
                holder: Some(h), ..
            } => {
                assert_eq!(h.pid, std::process::id());
                assert_eq!(h.command.as_deref(), Some("delta run"));
            }
            other => panic!("expected Busy, got {other:?}"),
        }
        assert!(err.to_string().contains("(delta run)"), "{err}");
        assert!(matches!(
            RunLock::probe(&path).unwrap(),
            LockState::Held(Some(_))
        ));
        drop(first);
        assert_eq!(RunLock::probe(&path).unwrap(), LockState::Free);
        let again = RunLock::acquire(&path, &holder("delta continue")).unwrap();
        assert!(again.stale.is_none(), "a clean release is not stale");
    }

    #[test]
    fn a_holder_that_did_not_release_is_stale() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let dead = holder("delta run");
        std::fs::write(&path, serde_json::to_string(&dead).unwrap()).unwrap();
        assert_eq!(
            RunLock::probe(&path).unwrap(),
            LockState::Stale(dead.clone())
        );
        let acquired = RunLock::acquire(&path, &holder("delta continue")).unwrap();
        assert_eq!(acquired.stale, Some(dead));
    }

    #[test]
    fn probe_of_a_missing_file_is_free() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            RunLock::probe(&dir.path().join("nope")).unwrap(),
            LockState::Free
        );
    }

    #[test]
    fn describe_is_readable() {
        let h = LockHolder {
            pid: 42,
            host: "box".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            command: Some("dygram execute".into()),
            process_scope: None,
        };
        assert_eq!(
            h.describe(),
            "pid 42 on box (dygram execute) since 2026-01-01T00:00:00Z"
        );
    }
}
