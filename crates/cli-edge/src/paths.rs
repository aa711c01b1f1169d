//! Paths a client names relative to a folder a server works in (the MCP servers, the playground):
//! kept inside that folder.

use std::path::{Component, Path, PathBuf};

/// A path that leaves the folder, or is no plain relative path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a path inside the server's folder (plain names relative to it)")]
pub struct Outside(pub String);

/// `relative` under `root`: plain names only (no `..`, no root, no hidden part), and, once the
/// links of the part that exists are followed, still under `root`. The path need not exist.
pub fn inside(root: &Path, relative: &str) -> Result<PathBuf, Outside> {
    let outside = || Outside(relative.to_string());
    let path = Path::new(relative);
    let plain = path.components().all(|c| match c {
        Component::Normal(name) => !name.to_string_lossy().starts_with('.'),
        _ => false,
    });
    if relative.is_empty() || !plain {
        return Err(outside());
    }
    let full = root.join(path);
    let existing = full
        .ancestors()
        .find_map(|a| a.canonicalize().ok())
        .ok_or_else(outside)?;
    let root = root.canonicalize().map_err(|_| outside())?;
    if !existing.starts_with(&root) {
        return Err(outside());
    }
    Ok(full)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_that_stay_inside_are_taken() {
        let root = std::env::temp_dir().join(format!("cli-edge-paths-{}", std::process::id()));
        std::fs::create_dir_all(root.join("a")).unwrap();
        std::os::unix::fs::symlink("/", root.join("a/up")).unwrap_or(());
        assert_eq!(inside(&root, "a/b/c").unwrap(), root.join("a/b/c"));
        for bad in [
            "",
            "../x",
            "/etc",
            "a/../../x",
            ".hidden",
            "a/up/etc",
            "a/up",
        ] {
            assert!(inside(&root, bad).is_err(), "{bad}");
        }
        std::fs::remove_dir_all(&root).unwrap();
    }
}
