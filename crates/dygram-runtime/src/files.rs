//! The disk as [`dygram_core::imports::Files`]: how the command line and saved executions read
//! a machine's imports.

use std::path::{Path, PathBuf};

use dygram_core::imports::Files;

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
