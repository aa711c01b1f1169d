//! Whole-file replacement that survives crashes.
//!
//! The new content is written to a temporary file in the destination's directory, flushed to disk,
//! renamed over the destination, and then the directory itself is flushed so the rename is durable.
//! A reader (or a process that starts after a crash) sees the old content or the new content, never a
//! truncated mix.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use serde::Serialize;

use crate::error::{StoreError, StoreResult};

/// Replaces `path` with `bytes` atomically and durably.
///
/// The destination's directory must exist. The new file keeps the permissions of the file it replaces;
/// a new file gets `0o644` on Unix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> StoreResult<()> {
    replace(path, bytes, Flushes::FileAndFolder)
}

/// What a replacement flushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flushes {
    /// Nothing.
    None,
    /// The new file's content, not its folder (the caller flushes that).
    FileOnly,
    /// The new file's content and its folder.
    FileAndFolder,
}

/// Replaces `path` with `bytes` atomically (readers see the old or the new content) but without
/// flushing to disk: after a power loss the file may hold the previous content. For frequent updates
/// of data that can be recomputed (progress counters); status changes should use [`write_atomic`].
pub fn write_atomic_lazy(path: &Path, bytes: &[u8]) -> StoreResult<()> {
    replace(path, bytes, Flushes::None)
}

fn replace(path: &Path, bytes: &[u8], flushes: Flushes) -> StoreResult<()> {
    let dir = parent_dir(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".to_string());
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| StoreError::io("create a temporary file in", dir, e))?;
    tmp.write_all(bytes)
        .map_err(|e| StoreError::io("write", tmp.path().to_path_buf(), e))?;
    set_permissions_like(tmp.as_file(), path);
    if flushes != Flushes::None {
        tmp.as_file()
            .sync_all()
            .map_err(|e| StoreError::io("flush", tmp.path().to_path_buf(), e))?;
    }
    tmp.persist(path)
        .map_err(|e| StoreError::io("rename into place", path, e.error))?;
    if flushes == Flushes::FileAndFolder {
        sync_dir(dir)
    } else {
        Ok(())
    }
}

/// Whether `name` is one of the temporary files the writers of this module create (`.NAME.XXXXXX.tmp`,
/// `.new.XXXXXX.tmp`) and rename into place.
pub fn is_temporary_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

/// Removes from `dir` (not below it) the temporary files a writer killed before its rename left
/// there. Only for the holder of whatever lock keeps other writers out of `dir`. Best effort: a file
/// that cannot be removed is left for the next time.
pub fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_str().is_some_and(is_temporary_name)
            && entry.file_type().is_ok_and(|t| t.is_file())
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Creates `path` with `bytes`, atomically and durably, only if it does not exist yet.
///
/// Returns `Ok(false)` (and writes nothing) when the file already exists, so concurrent writers can
/// claim distinct names without overwriting each other.
pub fn create_atomic(path: &Path, bytes: &[u8]) -> StoreResult<bool> {
    let dir = parent_dir(path);
    let mut tmp = tempfile::Builder::new()
        .prefix(".new.")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| StoreError::io("create a temporary file in", dir, e))?;
    tmp.write_all(bytes)
        .map_err(|e| StoreError::io("write", tmp.path().to_path_buf(), e))?;
    set_permissions_like(tmp.as_file(), path);
    tmp.as_file()
        .sync_all()
        .map_err(|e| StoreError::io("flush", tmp.path().to_path_buf(), e))?;
    match tmp.persist_noclobber(path) {
        Ok(_) => {}
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
        Err(e) => return Err(StoreError::io("move into place", path, e.error)),
    }
    sync_dir(dir)?;
    Ok(true)
}

/// Serializes `value` as JSON (pretty, two-space indent when `pretty`) and writes it with
/// [`write_atomic`].
pub fn write_json_atomic<T: Serialize + ?Sized>(
    path: &Path,
    value: &T,
    pretty: bool,
) -> StoreResult<()> {
    let bytes = if pretty {
        serde_json::to_vec_pretty(value)
    } else {
        serde_json::to_vec(value)
    }
    .map_err(|source| StoreError::Serialize {
        path: path.to_path_buf(),
        source,
    })?;
    write_atomic(path, &bytes)
}

/// Reads and parses a JSON file written by [`write_json_atomic`].
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> StoreResult<T> {
    let bytes = fs::read(path).map_err(|e| StoreError::io("read", path, e))?;
    serde_json::from_slice(&bytes).map_err(|source| StoreError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// Directory flushes put off to one point: several entries made in one folder (a new run's
/// folders and files) cost one flush of it. What is made through it survives a crash once
/// [`DirSyncs::flush`] has returned; call it before anything relies on those entries.
#[derive(Debug, Default)]
pub struct DirSyncs {
    dirs: std::collections::BTreeSet<std::path::PathBuf>,
}

impl DirSyncs {
    /// Creates `dir` and its missing parents; their parents' flushes are put off.
    pub fn create_dir_all(&mut self, dir: &Path) -> StoreResult<()> {
        if dir.is_dir() {
            return Ok(());
        }
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.create_dir_all(parent)?;
        }
        match fs::create_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => {
                return Ok(());
            }
            Err(e) => return Err(StoreError::io("create directory", dir, e)),
        }
        self.dirs.insert(parent_dir(dir).to_path_buf());
        Ok(())
    }

    /// [`write_atomic`], the flush of the folder put off.
    pub fn write_atomic(&mut self, path: &Path, bytes: &[u8]) -> StoreResult<()> {
        replace(path, bytes, Flushes::FileOnly)?;
        self.dirs.insert(parent_dir(path).to_path_buf());
        Ok(())
    }

    /// Flushes every folder an entry was made in, once each.
    pub fn flush(&mut self) -> StoreResult<()> {
        for dir in std::mem::take(&mut self.dirs) {
            sync_dir(&dir)?;
        }
        Ok(())
    }
}

/// Flushes a directory so that entries created or renamed in it survive a crash.
pub fn sync_dir(dir: &Path) -> StoreResult<()> {
    #[cfg(unix)]
    {
        let handle = File::open(dir).map_err(|e| StoreError::io("open directory", dir, e))?;
        handle
            .sync_all()
            .map_err(|e| StoreError::io("flush directory", dir, e))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Creates `dir` and its missing parents, flushing each parent whose entries changed.
pub fn create_dir_all_durable(dir: &Path) -> StoreResult<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir_all_durable(parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => return Ok(()),
        Err(e) => return Err(StoreError::io("create directory", dir, e)),
    }
    sync_dir(parent_dir(dir))
}

pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

#[cfg(unix)]
fn set_permissions_like(file: &File, existing: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(existing)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o644);
    // Best effort: a file that keeps tempfile's 0600 is still correct, only less readable.
    let _ = file.set_permissions(fs::Permissions::from_mode(mode));
}

#[cfg(not(unix))]
fn set_permissions_like(_file: &File, _existing: &Path) {}

/// `options` set not to follow a symbolic link at the file's name (it fails with `ELOOP` instead)
/// and not to wait on a pipe: for the store's own files (lock files, journals) in folders a
/// sandboxed tool may write, which must never be written through a link it put there.
pub fn own_file(options: &mut std::fs::OpenOptions) -> &mut std::fs::OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
    }
    #[cfg(not(unix))]
    {
        options
    }
}

/// The file at `path` opened with `options` ([`own_file`]: no link followed, no waiting on a pipe)
/// when it is a regular file with one name; `None` when anything else is there (a link, a pipe, a
/// file with another name a tool could have made), which must be neither written nor trusted.
pub fn open_own(path: &Path, options: &mut std::fs::OpenOptions) -> std::io::Result<Option<File>> {
    let file = match own_file(options).open(path) {
        Ok(file) => file,
        #[cfg(unix)]
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENXIO)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    #[cfg(unix)]
    let single = std::os::unix::fs::MetadataExt::nlink(&meta) == 1;
    #[cfg(not(unix))]
    let single = true;
    Ok((meta.is_file() && single).then_some(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_json_atomic(&path, &serde_json::json!({"a": 1}), true).unwrap();
        write_json_atomic(&path, &serde_json::json!({"a": 2}), true).unwrap();
        let back: serde_json::Value = read_json(&path).unwrap();
        assert_eq!(back, serde_json::json!({"a": 2}));
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\n  \"a\": 2\n}");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
    }

    #[cfg(unix)]
    #[test]
    fn new_files_are_world_readable_and_existing_modes_are_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.json");
        write_atomic(&path, b"1").unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o644
        );
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&path, b"2").unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn lazy_replacement_is_still_atomic_for_readers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        write_atomic_lazy(&path, b"one").unwrap();
        write_atomic_lazy(&path, b"two").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn create_atomic_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("turn-1.json");
        assert!(create_atomic(&path, b"first").unwrap());
        assert!(!create_atomic(&path, b"second").unwrap());
        assert_eq!(fs::read_to_string(&path).unwrap(), "first");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temporary file left behind: {names:?}");
    }

    #[test]
    fn missing_directory_error_names_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope").join("x.json");
        let err = write_atomic(&path, b"{}").unwrap_err().to_string();
        assert!(err.contains("nope"), "{err}");
    }

    #[test]
    fn read_json_reports_the_path_on_bad_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.json");
        fs::write(&path, "{not json").unwrap();
        let err = read_json::<serde_json::Value>(&path)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("bad.json") && err.contains("not valid JSON"),
            "{err}"
        );
    }

    #[test]
    fn create_dir_all_durable_creates_nested_directories() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b/c");
        create_dir_all_durable(&nested).unwrap();
        assert!(nested.is_dir());
        create_dir_all_durable(&nested).unwrap();
    }
}
