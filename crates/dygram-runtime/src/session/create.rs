//! Creating an execution atomically: it exists whole or not at all.
//!
//! The new execution is built in a hidden folder `.new-<id>-<pid>-<n>` next to the others (its
//! files written and flushed, its lock held) and renamed to `<id>` in one step. A rename never
//! replaces a folder that has files in it, so two processes creating the same id cannot overwrite
//! each other: the second one picks the next free id, or fails for an id the user gave. A claim
//! file `.new-<id>-<pid>-<n>.lock`, locked from before the folder exists until after the rename,
//! tells whether the creator still runs: what a killed creator leaves is removed by the next call
//! that creates an execution.

use std::path::Path;

use super::commit::{Commit, encode};
use super::{Executions, Metadata, SessionError, io, lock_at, valid_id};
use crate::state::ExecutionState;

/// The id of a new execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NewId {
    /// Given by the user: taken, or an error when it exists.
    Given(String),
    /// `exec-YYYYMMDD-HHMMSS` (UTC) of this moment, with `-2`, `-3`, … when taken.
    Generated(jiff::Timestamp),
}

/// What an attempt to build and rename an execution came to.
enum Built {
    /// The execution exists, its lock held.
    Created(store::lock::Acquired),
    /// The id was taken meanwhile (nothing is left behind).
    Taken,
    /// The claim was lost to a sweep (nothing is left behind).
    Interrupted,
}

/// Prefix of the hidden folders (and claim files) of executions being created.
const NEW: &str = ".new-";

/// How many ids a generated creation tries before giving up.
const ATTEMPTS: u32 = 1000;

impl Executions {
    /// Creates an execution from its initial state and metadata (`metadata.id` is set to the id
    /// taken) and returns its id and lock, held. `last` points at it.
    pub fn create(
        &self,
        choice: NewId,
        state: &ExecutionState,
        machine_hash: &str,
        mut metadata: Metadata,
        command: &str,
    ) -> Result<(String, store::lock::Acquired), SessionError> {
        store::atomic::create_dir_all_durable(&self.root).map_err(|e| io(&self.root, e))?;
        self.sweep();
        for attempt in 0..ATTEMPTS {
            let name = match &choice {
                NewId::Given(id) => id.clone(),
                NewId::Generated(now) => self.new_id(*now),
            };
            if !valid_id(&name) {
                return Err(SessionError::InvalidId(name));
            }
            let target = self.root.join(&name);
            if !target.exists() {
                metadata.id.clone_from(&name);
                let token = format!("{NEW}{name}-{}-{attempt}", std::process::id());
                match self.build_and_rename(
                    &token,
                    &name,
                    state,
                    machine_hash,
                    &metadata,
                    command,
                )? {
                    Built::Created(lock) => return Ok((name, lock)),
                    Built::Taken => {}
                    // Another process sweeping leftovers took the claim in the instant between its
                    // creation and its lock: try again under a new claim.
                    Built::Interrupted => continue,
                }
            }
            // Taken (by an execution that exists, or by another process just now).
            if let NewId::Given(id) = &choice {
                return Err(SessionError::Exists(id.clone()));
            }
        }
        Err(SessionError::Exists(format!(
            "{} (no free id after {ATTEMPTS} attempts)",
            self.new_id(jiff::Timestamp::now())
        )))
    }

    /// Builds the execution in the hidden folder `token` and renames it to `name`.
    fn build_and_rename(
        &self,
        token: &str,
        name: &str,
        state: &ExecutionState,
        machine_hash: &str,
        metadata: &Metadata,
        command: &str,
    ) -> Result<Built, SessionError> {
        let claim_path = self.root.join(format!("{token}.lock"));
        let claim = match lock_at(&claim_path, name, command) {
            Ok(claim) => claim,
            Err(SessionError::Busy { .. }) => return Ok(Built::Interrupted),
            Err(e) => return Err(e),
        };
        let tmp = self.root.join(token);
        let cleanup = |tmp: &Path| {
            let _ = std::fs::remove_dir_all(tmp);
            let _ = std::fs::remove_file(&claim_path);
        };
        let lock = match self.build(&tmp, name, state, machine_hash, metadata, command) {
            Ok(lock) => lock,
            Err(e) => {
                cleanup(&tmp);
                return Err(e);
            }
        };
        let target = self.root.join(name);
        match std::fs::rename(&tmp, &target) {
            Ok(()) => {
                // The claim goes first: a process killed while the folder's rename is flushed
                // leaves no claim behind (the next call on the execution does not sweep), and the
                // flush makes the rename and the removal durable together.
                let _ = std::fs::remove_file(&claim_path);
                let synced = store::atomic::sync_dir(&self.root).map_err(|e| io(&self.root, e));
                drop(claim);
                synced?;
                Ok(Built::Created(lock))
            }
            Err(e) => {
                drop(lock);
                cleanup(&tmp);
                drop(claim);
                let taken = target.exists()
                    || matches!(
                        e.kind(),
                        std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::DirectoryNotEmpty
                    );
                if taken {
                    Ok(Built::Taken)
                } else {
                    Err(io(&target, e))
                }
            }
        }
    }

    /// Writes the files of a new execution into `tmp` (created) and points `last` at `name`.
    fn build(
        &self,
        tmp: &Path,
        name: &str,
        state: &ExecutionState,
        machine_hash: &str,
        metadata: &Metadata,
        command: &str,
    ) -> Result<store::lock::Acquired, SessionError> {
        std::fs::create_dir(tmp).map_err(|e| io(tmp, e))?;
        let lock = lock_at(&tmp.join("execution.lock"), name, command)?;
        let path = tmp.join("machine.json");
        let bytes = self
            .json_bytes(&state.machine_snapshot, false)
            .map_err(|e| io(&path, e))?;
        store::atomic::write_atomic(&path, &bytes).map_err(|e| io(&path, e))?;
        let now = metadata.started_at.clone();
        let bytes = encode(
            self,
            name,
            &Commit {
                state,
                machine_hash,
                metadata,
                last_call: None,
                machine_changed: false,
                now: &now,
            },
        )?;
        let path = tmp.join("state.json");
        store::atomic::write_atomic(&path, &bytes).map_err(|e| io(&path, e))?;
        let path = tmp.join("metadata.json");
        let bytes = self.json_bytes(metadata, true).map_err(|e| io(&path, e))?;
        store::atomic::write_atomic(&path, &bytes).map_err(|e| io(&path, e))?;
        // `last` names the execution before it exists: a process killed before the rename leaves a
        // `last` that resolves to nothing, which reads as "no last execution".
        self.point_last_at(tmp, name)?;
        Ok(lock)
    }

    /// A new id `exec-YYYYMMDD-HHMMSS` (UTC), with `-2`, `-3`, … when taken.
    pub fn new_id(&self, now: jiff::Timestamp) -> String {
        let base = store::ids::timestamp_id("exec", now);
        if !self.root.join(&base).exists() {
            return base;
        }
        (2..)
            .map(|n| format!("{base}-{n}"))
            .find(|id| !self.root.join(id).exists())
            .unwrap_or(base)
    }

    /// Removes a claim file and its hidden folder when no creator holds the claim (held: its
    /// creator is at work; free: its creator died).
    fn sweep_claim(&self, token: &str) {
        let path = self.root.join(format!("{token}.lock"));
        let holder = store::lock::LockHolder::current(jiff::Timestamp::now(), Some("sweep"));
        if let Ok(claim) = store::lock::RunLock::acquire(&path, &holder) {
            let _ = std::fs::remove_dir_all(self.root.join(token));
            let _ = std::fs::remove_file(&path);
            drop(claim);
        }
    }

    /// Removes what creations killed midway left (hidden folders and claim files whose creator no
    /// longer holds the claim), and what removals killed midway left (`.rm-…` folders).
    pub fn sweep(&self) {
        self.sweep_where(|n| n.starts_with(NEW) || n.starts_with(super::REMOVING));
    }

    /// Removes what killed creations of `id` left (a creation killed after its rename leaves its
    /// claim file next to the execution the next call opens), and only that: other leftovers wait
    /// for the next creation or `exec clean`.
    pub(super) fn sweep_creations_of(&self, id: &str) {
        self.sweep_where(|n| creation_of(n) == Some(id));
    }

    fn sweep_where(&self, wanted: impl Fn(&str) -> bool) {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return;
        };
        let names: Vec<String> = entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| wanted(n))
            .collect();
        for name in &names {
            let path = self.root.join(name);
            if name.starts_with(super::REMOVING) {
                // A removal that was killed after the folder was renamed: finish it.
                let _ = std::fs::remove_dir_all(&path);
                continue;
            }
            match name.strip_suffix(".lock") {
                Some(token) => self.sweep_claim(token),
                // A folder whose claim is gone (a sweep was interrupted between the two removals).
                None if !self.root.join(format!("{name}.lock")).exists() => {
                    let _ = std::fs::remove_dir_all(&path);
                }
                None => {}
            }
        }
    }
}

/// The id a creation's hidden folder or claim file (`.new-<id>-<pid>-<n>[.lock]`) is for.
fn creation_of(name: &str) -> Option<&str> {
    let token = name
        .strip_suffix(".lock")
        .unwrap_or(name)
        .strip_prefix(NEW)?;
    let (rest, attempt) = token.rsplit_once('-')?;
    let (id, pid) = rest.rsplit_once('-')?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    (digits(attempt) && digits(pid)).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::creation_of;

    #[test]
    fn a_creation_names_its_id() {
        assert_eq!(creation_of(".new-f17-8128-0.lock"), Some("f17"));
        assert_eq!(creation_of(".new-f17-8128-0"), Some("f17"));
        assert_eq!(creation_of(".new-a-b-c-1-22"), Some("a-b-c"));
        assert_eq!(creation_of(".new-f1-x-0"), None);
        assert_eq!(creation_of(".rm-f1-22"), None);
        assert_eq!(creation_of("f1"), None);
    }
}
