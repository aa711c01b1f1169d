//! The disk as [`dygram_core::imports::Files`]: how the command line and saved executions read
//! a machine's imports.

use std::path::{Path, PathBuf};

use dygram_core::imports::{EXTENSIONS, Files};

/// Folders never searched for machine files.
const SKIPPED: [&str; 5] = ["target", "node_modules", "generated", ".git", ".dygram"];
/// At most this many machine files are found.
pub const MAX_FILES: usize = 5_000;
/// At most this many folder entries are looked at (a folder that is a whole home folder).
const MAX_ENTRIES: usize = 100_000;

/// Imported files read from the disk.
#[derive(Debug, Clone, Copy, Default)]
pub struct Disk;

impl Files for Disk {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }

    fn canonical(&self, path: &Path) -> PathBuf {
        canonical(path)
    }
}

/// `path` with links and `..` resolved when it exists (how a loaded file is known), else as
/// given.
pub fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The machine files under `root` (hidden and build folders skipped), at most [`MAX_FILES`]
/// among the first [`MAX_ENTRIES`] entries: where the language server looks for importers and
/// the playground lists what it edits.
pub fn machine_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    let mut looked = 0;
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            looked += 1;
            if looked > MAX_ENTRIES {
                return out;
            }
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if !name.starts_with('.') && !SKIPPED.contains(&name.as_str()) {
                    folders.push(path);
                }
            } else if path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| EXTENSIONS.contains(&e))
            {
                out.push(path);
                if out.len() >= MAX_FILES {
                    return out;
                }
            }
        }
    }
    out
}
