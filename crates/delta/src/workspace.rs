//! Workspaces (`<agent>/workspaces/Wnnn` or any folder given with `-w`) and run folders.
//!
//! ```text
//! <workspace>/.delta/VERSION            "1.2"
//! <workspace>/.delta/LATEST             id of the most recent run (written atomically)
//! <workspace>/.delta/workspace.lock     held by the one delta process working in the workspace
//! <workspace>/.delta/<run_id>/          journal.jsonl, metadata.json, engine.log, run.lock,
//!                                       process.json (a child's group while it runs; empty
//!                                       between children, removed when the run stops),
//!                                       io/{invocations,tool_executions,hooks}/, interaction/
//! ```
//!
//! Run ids share `.delta/` with the layout's own files, so the names of those files (and hidden names,
//! which temporary files use) are not valid run ids: see [`validate_run_id`].

use std::path::{Path, PathBuf};

use store::StoreError;
use store::atomic::create_dir_all_durable;

/// Layout version written to `.delta/VERSION`.
pub const LAYOUT_VERSION: &str = "1.2";

/// The files `.delta/` holds besides run folders; no run may take one of these names.
pub const RESERVED_NAMES: [&str; 3] = ["LATEST", "VERSION", "workspace.lock"];

/// A run id a user gave that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid run id {id:?}: {reason}")]
pub struct InvalidRunId {
    /// The id as given.
    pub id: String,
    /// Why it was refused.
    pub reason: String,
}

impl InvalidRunId {
    /// What ids are accepted.
    pub fn hint(&self) -> String {
        format!(
            "a run id is made of letters, digits, '-', '_' and '.', does not start with '.', and is not \
             one of {} (names delta keeps in .delta/)",
            RESERVED_NAMES.join(", ")
        )
    }
}

/// Checks a run id given by a user: safe as a single folder name ([`store::validate_id`]), not hidden,
/// and not the name of one of the layout's files (compared without case, as some file systems do).
pub fn validate_run_id(id: &str) -> Result<&str, InvalidRunId> {
    let refuse = |reason: String| InvalidRunId {
        id: id.to_string(),
        reason,
    };
    if let Err(e) = store::validate_id(id) {
        return Err(refuse(match e {
            StoreError::InvalidId { reason, .. } => reason.to_string(),
            other => other.to_string(),
        }));
    }
    if id.starts_with('.') {
        return Err(refuse(
            "it starts with '.' (hidden names are kept for temporary files)".into(),
        ));
    }
    if let Some(name) = RESERVED_NAMES.iter().find(|n| n.eq_ignore_ascii_case(id)) {
        return Err(refuse(format!(
            "{name} is the name of a file delta keeps in .delta/"
        )));
    }
    Ok(id)
}

/// A workspace whose `.delta/` cannot be used as it is.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// A run folder sits where one of the layout's files belongs (an older delta accepted such ids).
    #[error(
        "{} is a folder, not the file delta keeps there: a run was created with the reserved id {name}",
        .path.display()
    )]
    ReservedNameIsAFolder {
        /// The folder.
        path: PathBuf,
        /// Its name.
        name: &'static str,
    },
}

impl LayoutError {
    /// How to repair the workspace.
    pub fn hint(&self) -> String {
        match self {
            Self::ReservedNameIsAFolder { path, name } => {
                let renamed = path.with_file_name(format!("{name}-run"));
                let workspace = path.parent().and_then(Path::parent).unwrap_or(path);
                format!(
                    "rename it to an ordinary run id; the run keeps its history: mv '{}' '{}', \
                     then continue it with: delta continue -w '{}' --run-id {name}-run --adopt",
                    path.display(),
                    renamed.display(),
                    workspace.display()
                )
            }
        }
    }
}

/// `.delta/workspace.lock`: held by the delta process working in the workspace.
pub fn lock_path(workspace: &Path) -> PathBuf {
    workspace.join(".delta").join("workspace.lock")
}

/// Checks that none of the layout's files has been taken by a run folder.
pub fn check_layout(workspace: &Path) -> Result<(), LayoutError> {
    for name in RESERVED_NAMES {
        let path = workspace.join(".delta").join(name);
        if path.is_dir() {
            return Err(LayoutError::ReservedNameIsAFolder { path, name });
        }
    }
    Ok(())
}

/// Removes the temporary files that a process killed in the middle of an atomic write left in
/// `.delta/`, in run folders and their `interaction/` ([`store::atomic::remove_stale_temporaries`]).
/// Only for the holder of the workspace's lock: no other process of ours writes there meanwhile. A run
/// held by a process that does not take the workspace's lock (an older delta) is left alone.
pub fn remove_stale_temporaries(workspace: &Path) {
    let root = workspace.join(".delta");
    store::atomic::remove_stale_temporaries(&root);
    let Ok(entries) = std::fs::read_dir(&root) else {
        return;
    };
    for entry in entries.flatten() {
        let run = entry.path();
        // A run folder a removal set aside and did not finish deleting.
        if entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(crate::runs::REMOVING_PREFIX))
        {
            let _ = std::fs::remove_dir_all(&run);
            continue;
        }
        let in_use = || {
            matches!(
                store::RunLock::probe(&run.join("run.lock")),
                Ok(store::LockState::Held(_))
            )
        };
        if entry.file_type().is_ok_and(|t| t.is_dir()) && !in_use() {
            store::atomic::remove_stale_temporaries(&run);
            store::atomic::remove_stale_temporaries(&run.join("interaction"));
        }
    }
}

/// Where an agent's numbered workspaces live.
pub fn workspaces_root(agent_dir: &Path) -> PathBuf {
    agent_dir.join("workspaces")
}

fn w_number(name: &str) -> Option<u64> {
    let digits = name.strip_prefix('W')?;
    (digits.len() >= 3 && digits.chars().all(|c| c.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The workspaces under `root`: `Wnnn` ones in numeric order, then the others alphabetically.
pub fn list(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort_by(|a, b| match (w_number(a), w_number(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    });
    names
}

/// The next free `Wnnn` name (`W001` first; `W999` is followed by `W1000`, then `W1001`).
pub fn next_id(root: &Path) -> String {
    let next = list(root)
        .iter()
        .filter_map(|n| w_number(n))
        .max()
        .unwrap_or(0)
        + 1;
    format!("W{next:03}")
}

/// Creates the next free numbered workspace under `root` (see [`next_id`]) and prepares it; returns its
/// name and absolute path. The folder is claimed with an exclusive `mkdir`, so callers racing for the
/// same number each end up with a workspace of their own.
pub fn create_next(root: &Path) -> Result<(String, PathBuf), StoreError> {
    create_dir_all_durable(root)?;
    loop {
        let name = next_id(root);
        let dir = root.join(&name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok((name, prepare(&dir)?)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(StoreError::Io {
                    action: "create workspace",
                    path: dir,
                    source: e,
                });
            }
        }
    }
}

/// The workspace used last, if recorded.
pub fn last_used(root: &Path) -> Option<String> {
    let name = std::fs::read_to_string(root.join("LAST_USED")).ok()?;
    let name = name.trim().to_string();
    (!name.is_empty() && root.join(&name).is_dir()).then_some(name)
}

/// Records the workspace used last.
pub fn set_last_used(root: &Path, name: &str) -> Result<(), StoreError> {
    create_dir_all_durable(root)?;
    store::write_atomic(&root.join("LAST_USED"), name.as_bytes())
}

/// Creates a workspace folder (if needed) with its `.delta/VERSION`; returns its absolute path.
///
/// This runs before the workspace is locked (its lock lives in `.delta/`), so another process may
/// be writing `VERSION` too, or, holding the lock, clearing the temporary files of writers it
/// takes for dead: a write that lost its temporary file is tried again unless `VERSION` is there.
pub fn prepare(dir: &Path) -> Result<PathBuf, StoreError> {
    create_dir_all_durable(&dir.join(".delta"))?;
    let version = dir.join(".delta/VERSION");
    let mut tries = 0;
    while !version.exists() {
        match store::atomic::create_atomic(&version, format!("{LAYOUT_VERSION}\n").as_bytes()) {
            Ok(_) => break,
            Err(StoreError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound && tries < 3 =>
            {
                tries += 1;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()))
}

/// The id of the most recent run of a workspace.
pub fn latest(workspace: &Path) -> Option<String> {
    let id = std::fs::read_to_string(workspace.join(".delta/LATEST")).ok()?;
    let id = id.trim().to_string();
    store::validate_id(&id).ok()?;
    Some(id)
}

/// Records the most recent run of a workspace (nothing is written when it already says so).
pub fn set_latest(workspace: &Path, run_id: &str) -> Result<(), StoreError> {
    if latest(workspace).as_deref() == Some(run_id) {
        return Ok(());
    }
    store::write_atomic(&workspace.join(".delta/LATEST"), run_id.as_bytes())
}

/// The files of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir {
    /// `<workspace>/.delta/<run_id>`.
    pub root: PathBuf,
    /// The workspace (absolute).
    pub workspace: PathBuf,
    /// The run id.
    pub run_id: String,
}

impl RunDir {
    /// The run `run_id` of `workspace` (not created).
    pub fn new(workspace: &Path, run_id: &str) -> Self {
        Self {
            root: workspace.join(".delta").join(run_id),
            workspace: workspace.to_path_buf(),
            run_id: run_id.to_string(),
        }
    }

    /// Creates the run folder and its `io/` subfolders, durably; fails if the run already exists.
    pub fn create(workspace: &Path, run_id: &str) -> Result<Self, StoreError> {
        let mut syncs = store::atomic::DirSyncs::default();
        let dir = Self::create_in(workspace, run_id, &mut syncs)?;
        syncs.flush()?;
        Ok(dir)
    }

    /// [`RunDir::create`], the folders' flushes left to `syncs`.
    pub fn create_in(
        workspace: &Path,
        run_id: &str,
        syncs: &mut store::atomic::DirSyncs,
    ) -> Result<Self, StoreError> {
        let dir = Self::new(workspace, run_id);
        if dir.root.exists() {
            return Err(StoreError::Io {
                action: "create run folder",
                path: dir.root,
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "the run already exists",
                ),
            });
        }
        for sub in ["io/invocations", "io/tool_executions", "io/hooks"] {
            syncs.create_dir_all(&dir.root.join(sub))?;
        }
        Ok(dir)
    }

    /// `journal.jsonl`.
    pub fn journal(&self) -> PathBuf {
        self.root.join("journal.jsonl")
    }
    /// `metadata.json`.
    pub fn metadata(&self) -> PathBuf {
        self.root.join("metadata.json")
    }
    /// Whether the folder holds a run: its metadata, or (when that was lost) its journal.
    pub fn holds_run(&self) -> bool {
        self.metadata().is_file() || self.journal().is_file()
    }
    /// `engine.log`.
    pub fn engine_log(&self) -> PathBuf {
        self.root.join("engine.log")
    }
    /// `run.lock`.
    pub fn lock(&self) -> PathBuf {
        self.root.join("run.lock")
    }
    /// `io/invocations`.
    pub fn invocations(&self) -> PathBuf {
        self.root.join("io/invocations")
    }
    /// `io/tool_executions`.
    pub fn tool_executions(&self) -> PathBuf {
        self.root.join("io/tool_executions")
    }
    /// `io/hooks`.
    pub fn hooks(&self) -> PathBuf {
        self.root.join("io/hooks")
    }
    /// `interaction`.
    pub fn interaction(&self) -> PathBuf {
        self.root.join("interaction")
    }
    /// `process.json`: the process group delta runs for the run now (see `process::record`).
    pub fn process_record(&self) -> PathBuf {
        self.root.join(crate::process::record::FILE_NAME)
    }
}

/// A run id: `YYYYMMDD_HHMMSS_<6 hex>` in local time.
pub fn new_run_id(now: jiff::Timestamp, ids: &store::IdSource) -> String {
    let local = now.to_zoned(jiff::tz::TimeZone::system());
    format!("{}_{}", local.strftime("%Y%m%d_%H%M%S"), ids.hex(6))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbering_sorting_and_the_w1000_collision_fix() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(next_id(root), "W001");
        for n in ["W002", "W010", "alpha", "W998", "W999", ".hidden"] {
            std::fs::create_dir_all(root.join(n)).unwrap();
        }
        assert_eq!(list(root), vec!["W002", "W010", "W998", "W999", "alpha"]);
        assert_eq!(next_id(root), "W1000");
        std::fs::create_dir_all(root.join("W1000")).unwrap();
        assert_eq!(next_id(root), "W1001");
    }

    #[test]
    fn temporaries_of_killed_writers_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let ws = prepare(dir.path()).unwrap();
        let run = RunDir::create(&ws, "r1").unwrap();
        std::fs::create_dir_all(run.interaction()).unwrap();
        let leftovers = [
            ws.join(".delta/.LATEST.a1B2c3.tmp"),
            run.root.join(".metadata.json.x9Y8z7.tmp"),
            run.interaction().join(".request.json.q1.tmp"),
        ];
        let kept = [ws.join(".delta/VERSION"), run.root.join("notes.tmp")];
        for f in leftovers.iter().chain(&kept[1..]) {
            std::fs::write(f, "x").unwrap();
        }
        remove_stale_temporaries(&ws);
        for f in &leftovers {
            assert!(!f.exists(), "{} was left", f.display());
        }
        for f in &kept {
            assert!(f.exists(), "{} was removed", f.display());
        }
    }

    #[test]
    fn the_next_workspace_is_claimed_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("workspaces");
        let (a, pa) = create_next(&root).unwrap();
        let (b, _) = create_next(&root).unwrap();
        assert_eq!((a.as_str(), b.as_str()), ("W001", "W002"));
        assert!(pa.join(".delta/VERSION").is_file());
    }

    #[test]
    fn last_used_and_latest_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("workspaces");
        assert_eq!(last_used(&root), None);
        let ws = prepare(&root.join("W001")).unwrap();
        set_last_used(&root, "W001").unwrap();
        assert_eq!(last_used(&root).as_deref(), Some("W001"));
        assert_eq!(
            std::fs::read_to_string(ws.join(".delta/VERSION")).unwrap(),
            "1.2\n"
        );
        set_latest(&ws, "20250101_000000_abcdef").unwrap();
        assert_eq!(latest(&ws).as_deref(), Some("20250101_000000_abcdef"));
        std::fs::write(ws.join(".delta/LATEST"), "../../etc").unwrap();
        assert_eq!(latest(&ws), None, "an unsafe id is ignored");
    }

    #[test]
    fn run_ids_that_collide_with_the_layout_are_refused() {
        for ok in [
            "20250101_000000_abcdef",
            "mine",
            "LATEST-run",
            "v1.2",
            "latest2",
        ] {
            assert!(validate_run_id(ok).is_ok(), "{ok}");
        }
        for bad in [
            "LATEST",
            "Latest",
            "VERSION",
            "version",
            "workspace.lock",
            ".tmp",
            ".",
            "..",
            "a/b",
            "",
        ] {
            let err = validate_run_id(bad).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with(&format!("invalid run id {bad:?}: ")),
                "{err}"
            );
        }
    }

    #[test]
    fn a_run_folder_in_place_of_latest_is_reported_with_a_repair() {
        let dir = tempfile::tempdir().unwrap();
        let ws = prepare(dir.path()).unwrap();
        assert!(check_layout(&ws).is_ok());
        std::fs::create_dir(ws.join(".delta/LATEST")).unwrap();
        let err = check_layout(&ws).unwrap_err();
        assert!(
            err.to_string().contains(".delta/LATEST is a folder"),
            "{err}"
        );
        assert!(err.hint().contains("LATEST-run"), "{}", err.hint());
    }

    #[test]
    fn run_folders_are_created_once() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path(), "r1").unwrap();
        assert!(
            run.tool_executions().is_dir() && run.hooks().is_dir() && run.invocations().is_dir()
        );
        assert!(RunDir::create(dir.path(), "r1").is_err());
    }

    #[test]
    fn run_ids_have_the_documented_shape() {
        let id = new_run_id(
            "2025-10-13T12:00:00Z".parse().unwrap(),
            &store::IdSource::seeded(1),
        );
        assert_eq!(id.len(), 22, "{id}");
        assert_eq!(&id[8..9], "_");
        assert!(id[16..].chars().all(|c| c.is_ascii_hexdigit()));
    }
}
