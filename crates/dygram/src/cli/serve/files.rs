//! The machines under the served folder: listed, read and written by paths relative to it, never
//! outside it.

use std::path::{Component, Path, PathBuf};

use dygram_core::imports::Files;
use dygram_runtime::files::{Disk, canonical};

/// Extensions of machine files.
const MACHINES: [&str; 3] = ["dy", "dygram", "mach"];

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// Not a relative path of plain names.
    #[error("{0:?} is not a path inside the served folder")]
    Outside(String),
    /// Not a machine file.
    #[error("{0:?} is not a machine file (.dy, .dygram or .mach)")]
    NotMachine(String),
    /// Not there.
    #[error("{0:?} does not exist under the served folder")]
    Missing(String),
}

/// `relative` under `root` ([`cli_edge::paths::inside`]), whose folder exists.
pub fn inside(root: &Path, relative: &str) -> Result<PathBuf, PathError> {
    let full = cli_edge::paths::inside(root, relative)
        .map_err(|_| PathError::Outside(relative.to_string()))?;
    match full.parent() {
        Some(folder) if folder.is_dir() => Ok(full),
        _ => Err(PathError::Missing(relative.to_string())),
    }
}

/// A machine file under `root` ([`inside`], with a machine extension).
pub fn machine(root: &Path, relative: &str) -> Result<PathBuf, PathError> {
    let is_machine = Path::new(relative)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| MACHINES.contains(&e));
    if !is_machine {
        return Err(PathError::NotMachine(relative.to_string()));
    }
    inside(root, relative)
}

/// The disk as [`Files`] for the machines of the served folder: a file an import names outside
/// it (by `..`, an absolute path or a link) is never read. Such a file is reported as there and
/// its reading refused, so that whether it exists is not told either.
pub struct Served {
    /// The folder, its links followed.
    root: PathBuf,
}

impl Served {
    /// The files under `root`.
    pub fn new(root: &Path) -> Self {
        Self {
            root: canonical(root),
        }
    }

    /// `path` with its links followed where it exists, else as written with `..` applied; and
    /// whether that is under the folder.
    fn resolve(&self, path: &Path) -> (PathBuf, bool) {
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| lexical(path));
        let inside = real.starts_with(&self.root);
        (real, inside)
    }
}

impl Files for Served {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        match self.resolve(path) {
            (real, true) => Disk.read(&real),
            (_, false) => Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("it is outside the served folder {}", self.root.display()),
            )),
        }
    }

    fn is_file(&self, path: &Path) -> bool {
        !self.resolve(path).1 || Disk.is_file(path)
    }

    fn canonical(&self, path: &Path) -> PathBuf {
        Disk.canonical(path)
    }
}

/// `path` with `.` left out and each `..` taking away the name before it (links not followed).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The machine files under `root`, relative to it with `/` between names, sorted.
pub fn list(root: &Path) -> Vec<String> {
    let mut found: Vec<String> = dygram_runtime::files::machine_files(root)
        .iter()
        .filter_map(|path| {
            let parts: Vec<String> = path
                .strip_prefix(root)
                .ok()?
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            Some(parts.join("/"))
        })
        .collect();
    found.sort();
    found
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_paths_inside_the_root_are_taken() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/m.dy"), "a;").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "").unwrap();
        std::fs::create_dir_all(dir.path().join(".dygram")).unwrap();
        std::fs::write(dir.path().join(".dygram/x.dy"), "").unwrap();
        assert!(machine(dir.path(), "sub/m.dy").is_ok());
        assert!(machine(dir.path(), "sub/new.dy").is_ok());
        for bad in [
            "../m.dy",
            "/etc/m.dy",
            "sub/../../m.dy",
            ".dygram/x.dy",
            "",
            "nowhere/m.dy",
        ] {
            assert!(machine(dir.path(), bad).is_err(), "{bad}");
        }
        assert!(matches!(
            machine(dir.path(), "notes.txt"),
            Err(PathError::NotMachine(_))
        ));
        std::os::unix::fs::symlink("/tmp", dir.path().join("out")).unwrap();
        assert!(matches!(
            inside(dir.path(), "out/m.dy"),
            Err(PathError::Outside(_))
        ));
        assert_eq!(list(dir.path()), ["sub/m.dy"]);
    }

    #[test]
    fn served_files_are_read_inside_the_folder_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("served");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/m.dy"), "a;").unwrap();
        std::fs::write(dir.path().join("secret.dy"), "b;").unwrap();
        let served = Served::new(&root);
        assert_eq!(served.read(&root.join("sub/../sub/m.dy")).unwrap(), "a;");
        assert!(!served.is_file(&root.join("sub/missing.dy")));
        for outside in ["sub/../../secret.dy", "../missing.dy", "/etc/hostname"] {
            let path = root.join(outside);
            // Reported as there whether it is or not; never read.
            assert!(served.is_file(&path), "{outside}");
            let refused = served.read(&path).unwrap_err();
            assert!(
                refused.to_string().contains("outside the served folder"),
                "{outside}"
            );
        }
    }
}
