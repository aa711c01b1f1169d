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

/// Folders kept open at most (each hook's run has folders of its own: they are not all kept).
const KEPT_OPEN: usize = 8;

/// The run folder (opened once, on first use, without following a link), and the folders below
/// it opened lately.
pub(crate) struct Folders {
    root: PathBuf,
    root_fd: Option<OwnedFd>,
    open: HashMap<PathBuf, OwnedFd>,
}

/// A record being written: its file, and where to remove it from should the writing fail.
struct Created {
    file: File,
    dir: PathBuf,
    name: PathBuf,
}

impl Folders {
    /// Records go below `root` (the run folder).
    pub(crate) fn new(root: PathBuf) -> Self {
        Self {
            root,
            root_fd: None,
            open: HashMap::new(),
        }
    }

    /// Creates the record `path` (below the run folder) as a new file, whatever was at its name
    /// removed first (not followed).
    fn create(&mut self, path: &Path) -> io::Result<Created> {
        let (dir, name) = self.split(path)?;
        let file = self
            .create_new(&dir, &name, OFlag::empty(), true)?
            .ok_or_else(|| io::Error::from_raw_os_error(nix::libc::EEXIST))?;
        Ok(Created { file, dir, name })
    }

    /// Creates `path` (below the run folder) as a new file opened for appending; `None` when
    /// something is at its name already, which is neither removed nor followed.
    pub(crate) fn create_appending(&mut self, path: &Path) -> io::Result<Option<File>> {
        let (dir, name) = self.split(path)?;
        self.create_new(&dir, &name, OFlag::O_APPEND, false)
    }

    /// Creates `name` in the folder `dir` (relative to the run folder) as a new file, opened to
    /// write with `extra` flags, without following a link. What is at its name already is removed
    /// first with `replace`, else left (`None`). A folder kept open that has been removed since is
    /// made again.
    fn create_new(
        &mut self,
        dir: &Path,
        name: &Path,
        extra: OFlag,
        replace: bool,
    ) -> io::Result<Option<File>> {
        let flags = OFlag::O_WRONLY
            | OFlag::O_CREAT
            | OFlag::O_EXCL
            | OFlag::O_NOFOLLOW
            | OFlag::O_CLOEXEC
            | extra;
        let attempt = |folders: &mut Self| -> io::Result<Option<File>> {
            let folder = folders.folder(dir)?;
            let open = || openat(folder.as_fd(), name, flags, Mode::from_bits_truncate(0o666));
            let fd = match open() {
                Err(Errno::EEXIST) if replace => {
                    unlinkat(folder.as_fd(), name, UnlinkatFlags::NoRemoveDir)?;
                    open()?
                }
                Err(Errno::EEXIST) => return Ok(None),
                other => other?,
            };
            Ok(Some(File::from(fd)))
        };
        match attempt(self) {
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOENT) => {
                self.open.remove(dir);
                attempt(self)
            }
            other => other,
        }
    }

    /// Creates the record `path` and has `fill` write it; removes it again if that fails.
    pub(crate) fn write_with(
        &mut self,
        path: &Path,
        fill: impl FnOnce(&File) -> io::Result<()>,
    ) -> io::Result<()> {
        let created = self.create(path)?;
        let written = fill(&created.file);
        if written.is_err() {
            self.remove(&created);
        }
        written
    }

    /// Writes `bytes` as the new record `path` (removed again if the writing fails).
    pub(crate) fn write(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.write_with(path, |mut file| std::io::Write::write_all(&mut file, bytes))
    }

    /// The text of the file `path` (below the run folder, reached without following a link) when it
    /// is a regular file, at most `limit` bytes of it: what a hook wrote for delta to read.
    pub(crate) fn read(&mut self, path: &Path, limit: u64) -> Option<String> {
        let (dir, name) = self.split(path).ok()?;
        let folder = self.folder(&dir).ok()?;
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let file = File::from(openat(folder.as_fd(), name.as_os_str(), flags, Mode::empty()).ok()?);
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let mut text = String::new();
        io::Read::read_to_string(&mut io::Read::take(file, limit), &mut text).ok()?;
        Some(text)
    }

    /// Makes sure the folder `path` (below the run folder) exists, created name by name.
    pub(crate) fn make_folder(&mut self, path: &Path) -> io::Result<()> {
        let (dir, name) = self.split(path)?;
        self.folder(&dir.join(name)).map(|_| ())
    }

    /// Makes the folder `path` (below the run folder), which must not exist yet: `false` when
    /// something is at its name already.
    pub(crate) fn new_folder(&mut self, path: &Path) -> io::Result<bool> {
        let (dir, name) = self.split(path)?;
        let parent = self.folder(&dir)?;
        match mkdirat(
            parent.as_fd(),
            name.as_os_str(),
            Mode::from_bits_truncate(0o777),
        ) {
            Ok(()) => Ok(true),
            Err(Errno::EEXIST) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes a record created by [`Folders::create`] (its writing failed).
    fn remove(&mut self, created: &Created) {
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
            let root = match self.root_fd.take() {
                Some(fd) => fd,
                None => open_root(&self.root)?,
            };
            let walked = dir
                .iter()
                .try_fold(root.try_clone()?, |fd, name| open_folder(&fd, name));
            self.root_fd = Some(root);
            if self.open.len() >= KEPT_OPEN {
                self.open.clear();
            }
            self.open.insert(dir.to_path_buf(), walked?);
        }
        self.open
            .get(dir)
            .ok_or_else(|| io::Error::other("folder not kept"))
    }
}

/// The run folder itself: a link or anything but a folder at its name is refused.
fn open_root(root: &Path) -> io::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match nix::fcntl::open(root, flags, Mode::empty()) {
        Err(Errno::ELOOP | Errno::ENOTDIR) => Err(io::Error::other(format!(
            "the run folder {} is a link or not a folder",
            root.display()
        ))),
        other => Ok(other?),
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

/// Removes what is at `dir`'s name unless it is a real folder (a link or a file a tool put in the
/// run folder, which delta must not write or remove through); whether something was removed.
pub(crate) fn unless_folder(dir: &Path) -> Result<bool, store::StoreError> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(false),
        Ok(_) => std::fs::remove_file(dir)
            .map(|()| true)
            .map_err(|e| store::StoreError::io("remove", dir, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(store::StoreError::io("inspect", dir, e)),
    }
}

/// Makes `dir` (a folder of the run folder) a real folder, durably: a link or a file at its name is
/// removed first (see [`unless_folder`]).
pub(crate) fn own_folder(dir: &Path) -> Result<(), store::StoreError> {
    unless_folder(dir)?;
    store::atomic::create_dir_all_durable(dir)
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

    #[test]
    fn folders_kept_open_are_few_and_one_removed_is_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        let open_fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        let mut folders = Folders::new(run.clone());
        folders.write(&run.join("io/a.json"), b"1").unwrap();
        let before = open_fds();
        for n in 0..100 {
            folders
                .write(&run.join(format!("io/hooks/{n:03}_x/input/c.json")), b"{}")
                .unwrap();
        }
        // Other tests of this binary open files meanwhile: a margin, far below one per folder.
        assert!(
            open_fds() <= before + KEPT_OPEN + 8,
            "folders are not all kept open"
        );

        std::fs::remove_dir_all(run.join("io")).unwrap();
        folders.write(&run.join("io/b.json"), b"2").unwrap();
        assert_eq!(std::fs::read(run.join("io/b.json")).unwrap(), b"2");

        let moved = dir.path().join("moved");
        std::fs::rename(&run, &moved).unwrap();
        std::os::unix::fs::symlink(&moved, &run).unwrap();
        let mut fresh = Folders::new(run.clone());
        let refused = fresh.write(&run.join("io/c.json"), b"3").unwrap_err();
        assert!(refused.to_string().contains("run folder"), "{refused}");
    }

    #[test]
    fn a_link_where_a_folder_of_the_run_goes_is_removed_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("request.json"), "keep me").unwrap();
        let interaction = dir.path().join("run/interaction");
        std::fs::create_dir_all(dir.path().join("run")).unwrap();
        std::os::unix::fs::symlink(&outside, &interaction).unwrap();
        own_folder(&interaction).unwrap();
        assert!(interaction.is_dir() && !interaction.is_symlink());
        assert!(!unless_folder(&interaction).unwrap(), "a real folder stays");
        assert_eq!(
            std::fs::read_to_string(outside.join("request.json")).unwrap(),
            "keep me"
        );
    }
}
