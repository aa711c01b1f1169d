//! A session's folder: `metadata.json` (the clients'), `host.json` and `state.json` (the host's),
//! `control` (the shell's control pipe), `lock` (taken by a client while it changes the session),
//! `host.log` (what the host had to say).

use std::fs::File;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{HostRecord, SessionMeta, ShellError, StateFile};

const META: &str = "metadata.json";
const HOST: &str = "host.json";
const STATE: &str = "state.json";
/// The longest socket path a Unix socket address holds, less room for the terminating NUL.
const SOCKET_PATH_MAX: usize = 100;

pub fn meta_path(dir: &Path) -> PathBuf {
    dir.join(META)
}

pub fn host_path(dir: &Path) -> PathBuf {
    dir.join(HOST)
}

pub fn control_path(dir: &Path) -> PathBuf {
    dir.join("control")
}

pub fn log_path(dir: &Path) -> PathBuf {
    dir.join("host.log")
}

fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, ShellError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        _ => Ok(Some(store::atomic::read_json(path)?)),
    }
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), ShellError> {
    Ok(store::write_json_atomic(path, value, true)?)
}

/// The session's metadata; an error when it is missing or unreadable.
pub fn read_meta(dir: &Path) -> Result<SessionMeta, ShellError> {
    read_json(&meta_path(dir))?.ok_or_else(|| ShellError::Io {
        path: meta_path(dir),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    })
}

pub fn write_meta(dir: &Path, meta: &SessionMeta) -> Result<(), ShellError> {
    write_json(&meta_path(dir), meta)
}

pub fn read_host(dir: &Path) -> Result<Option<HostRecord>, ShellError> {
    read_json(&host_path(dir))
}

pub fn write_host(dir: &Path, record: &HostRecord) -> Result<(), ShellError> {
    write_json(&host_path(dir), record)
}

pub fn read_state(dir: &Path) -> Result<Option<StateFile>, ShellError> {
    read_json(&dir.join(STATE))
}

pub fn write_state(dir: &Path, state: &StateFile) -> Result<(), ShellError> {
    write_json(&dir.join(STATE), state)
}

/// Holds the session's lock until dropped: one client at a time changes a session (starts its host,
/// counts a command, ends it).
pub fn lock(dir: &Path) -> Result<File, ShellError> {
    let path = dir.join("lock");
    let io = |source| ShellError::Io {
        path: path.clone(),
        source,
    };
    // Not through a link, nor waiting on a pipe: the session's own programs can write its folder.
    let file = store::atomic::own_file(
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true),
    )
    .open(&path)
    .map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(io(std::io::Error::other("not a regular file")));
    }
    file.lock().map_err(io)?;
    Ok(file)
}

/// Whether `path` is a socket where a host of the session in `dir` would listen: `host.sock` in
/// its folder, or one in this user's private folder under `/tmp`; and a socket indeed (not a link).
pub fn is_host_socket(dir: &Path, path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let uid = nix::unistd::getuid().as_raw();
    let private = PathBuf::from(format!("/tmp/delta-sessions-{uid}"));
    let placed = *path == dir.join("host.sock")
        || (path.parent() == Some(private.as_path())
            && path.extension().is_some_and(|e| e == "sock"));
    placed && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// Where the host of session `id` in `dir` listens: `host.sock` in its folder, or, where that path
/// is too long for a socket address, a folder of this user's under `/tmp` that only they can enter.
pub fn socket_path(dir: &Path, id: &str) -> Result<PathBuf, ShellError> {
    let beside = dir.join("host.sock");
    if beside.as_os_str().len() <= SOCKET_PATH_MAX {
        return Ok(beside);
    }
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let uid = nix::unistd::getuid().as_raw();
    let private = PathBuf::from(format!("/tmp/delta-sessions-{uid}"));
    let io = |source| ShellError::Io {
        path: private.clone(),
        source,
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&private) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(e)),
    }
    let meta = std::fs::symlink_metadata(&private).map_err(io)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(ShellError::Unsafe(private));
    }
    Ok(private.join(format!("{id}-{}.sock", super::random_hex(8))))
}
