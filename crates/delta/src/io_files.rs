//! Writing a run's `io/` records (the engine's and the hooks') without following links below the
//! run folder.
//!
//! A tool that may write in the workspace may write in `.delta/<run>/` too, and could put a link
//! where a record or one of its folders goes (`io/tool_executions -> ~/somewhere`). delta itself is
//! not confined, so it must never follow such a link: every folder below the run folder is opened
//! one name at a time without following links (created when missing), and a record is created
//! there as a new file, whatever was at its name being removed first. A link anywhere below the run
//! folder makes the record fail (reported as missing), and nothing outside the run folder is
//! written or removed.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{Mode, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};

/// The run folder, and the folders below it opened so far.
pub(crate) struct Folders {
    root: PathBuf,
    open: HashMap<PathBuf, OwnedFd>,
}

/// A record being written: its file, and where to remove it from should the writing fail.
pub(crate) struct Created {
    pub(crate) file: File,
    dir: PathBuf,
    name: PathBuf,
}

impl Folders {
    /// Records go below `root` (the run folder, opened as it is named).
    pub(crate) fn new(root: PathBuf) -> Self {
        Self {
            root,
            open: HashMap::new(),
        }
    }

    /// Creates the record `path` (below the run folder) as a new file.
    pub(crate) fn create(&mut self, path: &Path) -> io::Result<Created> {
        let (dir, name) = self.split(path)?;
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW;
        let mode = Mode::from_bits_truncate(0o666);
        let folder = self.folder(&dir)?;
        let fd = match openat(
            folder.as_fd(),
            name.as_os_str(),
            flags | OFlag::O_CLOEXEC,
            mode,
        ) {
            Err(Errno::EEXIST) => {
                unlinkat(folder.as_fd(), name.as_os_str(), UnlinkatFlags::NoRemoveDir)?;
                openat(
                    folder.as_fd(),
                    name.as_os_str(),
                    flags | OFlag::O_CLOEXEC,
                    mode,
                )?
            }
            other => other?,
        };
        Ok(Created {
            file: File::from(fd),
            dir,
            name,
        })
    }

    /// Writes `bytes` as the new record `path` (removed again if the writing fails).
    pub(crate) fn write(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let created = self.create(path)?;
        let written = std::io::Write::write_all(&mut &created.file, bytes);
        if written.is_err() {
            self.remove(&created);
        }
        written
    }

    /// Makes sure the folder `path` (below the run folder) exists, created name by name.
    pub(crate) fn make_folder(&mut self, path: &Path) -> io::Result<()> {
        let (dir, name) = self.split(path)?;
        self.folder(&dir.join(name)).map(|_| ())
    }

    /// Removes a record created by [`Folders::create`] (its writing failed).
    pub(crate) fn remove(&mut self, created: &Created) {
        if let Ok(folder) = self.folder(&created.dir) {
            let _ = unlinkat(
                folder.as_fd(),
                created.name.as_os_str(),
                UnlinkatFlags::NoRemoveDir,
            );
        }
    }

    /// `path`'s folder relative to the run folder, and its name; only plain names below it.
    fn split(&self, path: &Path) -> io::Result<(PathBuf, PathBuf)> {
        let outside = || io::Error::other("not a path below the run folder");
        let relative = path.strip_prefix(&self.root).map_err(|_| outside())?;
        if !relative
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        {
            return Err(outside());
        }
        let name = relative.file_name().ok_or_else(outside)?;
        let dir = relative.parent().unwrap_or(Path::new(""));
        Ok((dir.to_path_buf(), PathBuf::from(name)))
    }

    /// The folder `dir` (relative to the run folder), each of its names opened without following a
    /// link and created when missing; kept open for the next records.
    fn folder(&mut self, dir: &Path) -> io::Result<&OwnedFd> {
        if !self.open.contains_key(dir) {
            let mut fd = File::open(&self.root)?.into();
            for name in dir.iter() {
                fd = open_folder(&fd, name)?;
            }
            self.open.insert(dir.to_path_buf(), fd);
        }
        self.open
            .get(dir)
            .ok_or_else(|| io::Error::other("folder not kept"))
    }
}

/// The folder `name` in `parent`, not followed if it is a link, created if missing.
fn open_folder(parent: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match openat(parent.as_fd(), name, flags, Mode::empty()) {
        Err(Errno::ENOENT) => {
            match mkdirat(parent.as_fd(), name, Mode::from_bits_truncate(0o777)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(e.into()),
            }
            Ok(openat(parent.as_fd(), name, flags, Mode::empty())?)
        }
        Err(Errno::ELOOP | Errno::ENOTDIR) => Err(io::Error::other(format!(
            "{} is a link or a file where a folder should be",
            Path::new(name).display()
        ))),
        other => Ok(other?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_are_created_name_by_name_and_a_link_below_the_run_folder_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let mut folders = Folders::new(run.clone());

        folders
            .write(&run.join("io/hooks/001_x/input/a.json"), b"{}")
            .unwrap();
        assert_eq!(
            std::fs::read(run.join("io/hooks/001_x/input/a.json")).unwrap(),
            b"{}"
        );
        folders
            .make_folder(&run.join("io/hooks/001_x/output"))
            .unwrap();
        assert!(run.join("io/hooks/001_x/output").is_dir());

        // A folder replaced by a link (folders opened before are not reused: a new writer).
        std::os::unix::fs::symlink(&outside, run.join("io/tool_executions")).unwrap();
        let mut folders = Folders::new(run.clone());
        let refused = folders.write(&run.join("io/tool_executions/c1.json"), b"{}");
        assert!(refused.is_err(), "{refused:?}");
        assert!(
            refused.unwrap_err().to_string().contains("link"),
            "the error says why"
        );
        std::fs::write(run.join("io/invocations"), "a file").unwrap();
        assert!(
            folders
                .write(&run.join("io/invocations/x.json"), b"{}")
                .is_err()
        );
        assert!(folders.write(&outside.join("y.json"), b"{}").is_err());
        assert!(folders.write(&run.join("io/../y.json"), b"{}").is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    }
}
