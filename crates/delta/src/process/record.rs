//! `<run>/process.json`: the process group delta is running for a run right now (a tool, a hook or a
//! context generator; they run one at a time).
//!
//! The record is written after the child exists (its pid and start time are known) and before its
//! program starts, by the child itself ([`Recorder::prepare`] makes the line it fills in) or, for a
//! record longer than a page, by delta while the child waits at a gate ([`Recorder::record`]); so a
//! process of ours never runs unrecorded. A delta killed while its child writes the record leaves no
//! gap either: until `exec` the child shares delta's open files, the run's lock (a `flock`, held by
//! the open file) among them, so no process takes the run over and reads the record before the child
//! has written it and run its program. A process that takes the run over after a crash finds the record and stops the group
//! if it is still running ([`stop_recorded`]) before it settles the interrupted call.
//!
//! Records are not flushed to disk. A record has to outlive the delta process, not the machine: once
//! a write returns, every later process sees it, however the writer dies, and a power loss ends the
//! group anyway. (A flush would cost about three times a journal append per tool call.) What a flush
//! would add, knowing after a power loss that a call without a record never started, comes from the
//! run's metadata instead, which names the boot of the process that wrote it.
//!
//! The file is written in place and emptied, not replaced and removed: a tool call would otherwise
//! create a file and delete one, and on some file systems (ext4 without a journal) each file created
//! costs more for every file deleted in the last half minute. A record is one line of JSON written
//! at the start of the file in one write of at most a page, which a process killed during it leaves
//! whole or not at all; the file is then cut to that line. A writer killed between the two leaves the
//! line followed by the end of a longer earlier record, and the reader takes the first line. An empty
//! file records nothing. A record longer than a page (a very long call id) replaces the file instead.
//! The run's lock serializes writers and readers: the process that holds it is the only one that
//! writes, and a process that reads a run's record holds its lock or its workspace's. The file is
//! opened without following a symbolic link, and written into only when it is a regular file with
//! one name: a tool that may write in the workspace could put a link to any file of the user's at
//! the record's name, which delta replaces (or removes) instead of writing through. An empty
//! record left by a delta killed before it removed the file is removed by the next process that
//! takes the workspace ([`sweep_workspace`]).

use std::fs::OpenOptions;
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use store::StoreError;

use super::group::{self, GroupId, Stopped};

/// What a recorded process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChildKind {
    /// A tool call.
    Tool,
    /// A lifecycle hook.
    Hook,
    /// A context generator.
    Generator,
}

impl ChildKind {
    /// As the record spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Hook => "hook",
            Self::Generator => "generator",
        }
    }
}

/// The contents of `process.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    /// What it is.
    pub kind: ChildKind,
    /// The tool's, hook's or context source's name.
    pub name: String,
    /// The tool call it runs (tools only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
    /// The host it runs on (a workspace on a shared disk may be opened from another machine).
    pub host: String,
    /// Its process group.
    #[serde(flatten)]
    pub group: GroupId,
    /// Set when the group was found running and stopped by a later process before the run was taken
    /// over ([`sweep_workspace`]): what that found, so the run's own resume still says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
}

impl ProcessRecord {
    /// A record of `group`, running `kind` `name` (for tool call `action_id`) on this host.
    fn new(kind: ChildKind, name: &str, action_id: Option<&str>, group: GroupId) -> Self {
        Self {
            kind,
            name: name.to_string(),
            action_id: action_id.map(str::to_string),
            host: store::hostname(),
            group,
            stopped: None,
        }
    }
}

/// The record's file name in a run folder.
pub const FILE_NAME: &str = "process.json";

/// The longest record written in place: one write of at most a page is never cut short by the
/// writer's death.
const IN_PLACE_MAX: usize = process_gate::SELF_RECORD_MAX;

/// Writes and clears one run's `process.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorder {
    path: PathBuf,
}

impl Recorder {
    /// The record at `path` (`<run>/process.json`).
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }

    /// The record file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records that `group` runs `kind` `name` (for tool call `action_id`), in one write, without a
    /// flush (see the module documentation).
    pub fn record(
        &self,
        kind: ChildKind,
        name: &str,
        action_id: Option<&str>,
        group: &GroupId,
    ) -> Result<(), StoreError> {
        self.write(&ProcessRecord::new(kind, name, action_id, group.clone()))
    }

    /// The record of `kind` `name` (for tool call `action_id`) prepared for its child to write
    /// itself before its program runs (see the gate's `start`): the line, with room for the pid and
    /// start time, and the record file opened to write it. `None` when the line is longer than one
    /// write of a page: the parent writes such a record itself, while the child waits ([`record`]).
    ///
    /// [`record`]: Self::record
    pub fn prepare(
        &self,
        kind: ChildKind,
        name: &str,
        action_id: Option<&str>,
    ) -> Result<Option<process_gate::SelfRecord>, StoreError> {
        // The largest values of each field hold their place in the line.
        let group = GroupId {
            pgid: i32::MAX,
            start_ticks: Some(u64::MAX),
            boot_id: group::boot_id(),
        };
        let line = self.line(&ProcessRecord::new(kind, name, action_id, group))?;
        if line.len() > IN_PLACE_MAX {
            return Ok(None);
        }
        // A key with its quotes cannot occur inside a string value, where quotes are escaped.
        let slot = |key: &str, value: String| {
            let text = format!("\"{key}\":{value}");
            let at = line.windows(text.len()).position(|w| w == text.as_bytes());
            at.map(|at| at + text.len() - value.len()..at + text.len())
        };
        let (Some(pid_at), Some(ticks_at)) = (
            slot("pgid", i32::MAX.to_string()),
            slot("start_ticks", u64::MAX.to_string()),
        ) else {
            return Ok(None);
        };
        Ok(Some(process_gate::SelfRecord {
            file: self.open_for_writing()?.into(),
            line,
            pid_at,
            ticks_at,
        }))
    }

    /// `record` as the file's line.
    fn line(&self, record: &ProcessRecord) -> Result<Vec<u8>, StoreError> {
        let mut line = serde_json::to_vec(record).map_err(|source| StoreError::Serialize {
            path: self.path.clone(),
            source,
        })?;
        line.push(b'\n');
        Ok(line)
    }

    /// The record file opened to be written in place: created if missing, and made anew when
    /// anything but a plain file of ours is at its name (a link a tool made, say), never written
    /// through.
    fn open_for_writing(&self) -> Result<std::fs::File, StoreError> {
        let opened = self
            .open_plain(OpenOptions::new().write(true).create(true).mode(0o600))
            .map_err(|e| StoreError::io("open", &self.path, e))?;
        if let Some(file) = opened {
            return Ok(file);
        }
        self.discard()?;
        store::atomic::own_file(OpenOptions::new().write(true).create_new(true).mode(0o600))
            .open(&self.path)
            .map_err(|e| StoreError::io("create", &self.path, e))
    }

    /// Writes `record` in place in one write, or, longer than a page, replaces the file.
    fn write(&self, record: &ProcessRecord) -> Result<(), StoreError> {
        let line = self.line(record)?;
        if line.len() > IN_PLACE_MAX {
            return store::write_atomic_lazy(&self.path, &line);
        }
        let file = self.open_for_writing()?;
        file.write_all_at(&line, 0)
            .map_err(|e| StoreError::io("write", &self.path, e))?;
        file.set_len(line.len() as u64)
            .map_err(|e| StoreError::io("truncate", &self.path, e))
    }

    /// The file at the record's name opened with `options`, when it is a regular file with a single
    /// name (delta writes into its own files only: a tool may have put a link there).
    fn open_plain(&self, options: &mut OpenOptions) -> std::io::Result<Option<std::fs::File>> {
        store::atomic::open_own(&self.path, options)
    }

    /// The record, if there is one. An unreadable record is reported, not ignored; so is anything
    /// but a regular file at its name.
    pub fn read(&self) -> Result<Option<ProcessRecord>, StoreError> {
        let file = match self.open_plain(OpenOptions::new().read(true)) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::io("open", &self.path, e)),
        };
        let unreadable = |source| StoreError::Parse {
            path: self.path.clone(),
            source,
        };
        let Some(mut file) = file else {
            return Err(unreadable(serde::de::Error::custom(
                "not a regular file of delta's",
            )));
        };
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes)
            .map_err(|e| StoreError::io("read", &self.path, e))?;
        parse_record(&bytes).map_err(unreadable)
    }

    /// Empties the record (its group has ended, or its end is journaled). Not flushed: a record that
    /// comes back after a power loss names a group of an earlier boot, which is known to be gone.
    pub fn clear(&self) -> Result<(), StoreError> {
        match self.open_plain(OpenOptions::new().write(true)) {
            Ok(Some(file)) => file
                .set_len(0)
                .map_err(|e| StoreError::io("empty", &self.path, e)),
            // Not delta's own file: its name is removed, what it points to is left alone.
            Ok(None) => self.discard(),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io("open", &self.path, e)),
        }
    }

    /// Removes the file, whatever it records (a finished run's, whose groups have been stopped).
    pub fn discard(&self) -> Result<(), StoreError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io("remove", &self.path, e)),
        }
    }

    /// Removes the file when it records nothing (a run stops with none of its processes running).
    pub fn remove_if_empty(&self) -> Result<(), StoreError> {
        match std::fs::metadata(&self.path) {
            Ok(meta) if meta.len() == 0 => self.discard(),
            Ok(_) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io("inspect", &self.path, e)),
        }
    }
}

/// A record file's contents: nothing when empty; else the whole file (as an older delta wrote it,
/// pretty-printed), or else its first line (a longer earlier record's end may follow it when its
/// writer died before cutting the file).
fn parse_record(bytes: &[u8]) -> Result<Option<ProcessRecord>, serde_json::Error> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice(bytes).map(Some).or_else(|whole| {
        let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
        serde_json::from_slice(first).map(Some).map_err(|_| whole)
    })
}

/// A process group found recorded when a run was taken over, and what was done about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// The record.
    pub record: ProcessRecord,
    /// What stopping it found.
    pub stopped: LeftoverState,
}

/// What became of a recorded group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeftoverState {
    /// Checked on this host.
    Checked(Stopped),
    /// Recorded on another host: it cannot be checked or stopped from here.
    OtherHost(String),
}

impl Leftover {
    /// Whether the group was still running (and has been stopped now).
    pub fn was_running(&self) -> bool {
        matches!(&self.stopped, LeftoverState::Checked(s) if s.was_running())
    }

    /// How it was found, for messages: "was still running and has been stopped (SIGTERM)".
    pub fn describe(&self) -> String {
        let group = self.record.group.pgid;
        match &self.stopped {
            LeftoverState::Checked(Stopped::Terminated) => {
                format!("was still running; its process group {group} has been stopped (SIGTERM)")
            }
            LeftoverState::Checked(Stopped::Killed) => {
                format!("was still running; its process group {group} has been killed (SIGKILL)")
            }
            LeftoverState::Checked(Stopped::NotRunning) => "was no longer running".into(),
            LeftoverState::Checked(Stopped::Unverifiable) => {
                format!("could not be checked (process group {group}): it may still be running")
            }
            LeftoverState::OtherHost(host) => {
                format!("ran on {host} (process group {group}): it may still be running there")
            }
        }
    }
}

/// Stops the group recorded in `recorder`'s file, if it still runs on this host (SIGTERM, `grace`,
/// SIGKILL). The record is left in place: the caller clears it once what happened is journaled.
/// Call it only while holding the run's lock.
pub fn stop_recorded(
    recorder: &Recorder,
    grace: std::time::Duration,
) -> Result<Option<Leftover>, StoreError> {
    let Some(record) = recorder.read()? else {
        return Ok(None);
    };
    let stopped = if record.host == store::hostname() {
        match (group::stop(&record.group, grace), record.stopped) {
            // Stopped already, when another run took the workspace: say what that found.
            (Stopped::NotRunning, Some(earlier)) => LeftoverState::Checked(earlier),
            (now, _) => LeftoverState::Checked(now),
        }
    } else {
        LeftoverState::OtherHost(record.host.clone())
    };
    Ok(Some(Leftover { record, stopped }))
}

/// Stops every process group a dead delta process left running in `workspace`, whichever run it
/// belongs to: the process that takes the workspace's lock calls it first, so that nothing it starts
/// overlaps a crashed run's tool, whatever run it works on. Each record stays in place, marked with
/// what was found, for its own run's resume to report.
pub fn sweep_workspace(workspace: &Path, grace: std::time::Duration) -> Result<(), StoreError> {
    let Ok(entries) = std::fs::read_dir(workspace.join(".delta")) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let recorder = Recorder::new(entry.path().join(FILE_NAME));
        if !recorder.path().is_file() {
            continue;
        }
        // An empty record of a run that stopped (its process killed before it removed it).
        recorder.remove_if_empty()?;
        match stop_recorded(&recorder, grace) {
            Ok(Some(Leftover {
                mut record,
                stopped: LeftoverState::Checked(found),
            })) if found.was_running() => {
                record.stopped = Some(found);
                recorder.write(&record)?;
            }
            // Nothing running, another host, or a record that cannot be read: the run's own resume
            // deals with it.
            Ok(_) | Err(StoreError::Parse { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::time::Duration;

    #[test]
    fn a_recorded_group_that_still_runs_is_stopped_and_the_record_kept() {
        let dir = tempfile::tempdir().unwrap();
        let recorder = Recorder::new(dir.path().join("process.json"));
        assert_eq!(
            stop_recorded(&recorder, Duration::from_secs(1)).unwrap(),
            None
        );
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let group = GroupId::of_leader(child.id() as i32);
        recorder
            .record(ChildKind::Tool, "slow", Some("c1"), &group)
            .unwrap();
        let record = recorder.read().unwrap().unwrap();
        assert_eq!(record.action_id.as_deref(), Some("c1"));
        assert_eq!(record.group, group);

        let leftover = stop_recorded(&recorder, Duration::from_secs(1))
            .unwrap()
            .unwrap();
        assert!(leftover.was_running());
        assert!(
            leftover.describe().contains("has been stopped"),
            "{leftover:?}"
        );
        let _ = child.wait();
        assert!(recorder.path().exists(), "the caller clears the record");
        let again = stop_recorded(&recorder, Duration::from_secs(1))
            .unwrap()
            .unwrap();
        assert!(!again.was_running());
        assert_eq!(again.describe(), "was no longer running");
        recorder.clear().unwrap();
        recorder.clear().unwrap();
        assert_eq!(recorder.read().unwrap(), None);
    }

    /// A group that is not running (this process's own, which is never stopped by these tests).
    fn some_group() -> GroupId {
        GroupId {
            pgid: i32::MAX - 7,
            start_ticks: Some(1),
            boot_id: Some("boot".into()),
        }
    }

    #[test]
    fn a_record_is_written_in_place_and_emptied_then_removed_when_empty() {
        let dir = tempfile::tempdir().unwrap();
        let recorder = Recorder::new(dir.path().join("process.json"));
        recorder.clear().unwrap();
        assert!(!recorder.path().exists(), "clearing no record creates none");
        recorder
            .record(ChildKind::Tool, "t", Some("c1"), &some_group())
            .unwrap();
        let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
        let first = inode(recorder.path());
        let text = std::fs::read_to_string(recorder.path()).unwrap();
        assert_eq!(text.lines().count(), 1, "one line: {text}");
        assert!(text.ends_with('\n'));

        recorder.remove_if_empty().unwrap();
        assert!(recorder.path().exists(), "a record is never removed");
        recorder.clear().unwrap();
        assert_eq!(std::fs::metadata(recorder.path()).unwrap().len(), 0);
        assert_eq!(
            recorder.read().unwrap(),
            None,
            "an empty file records nothing"
        );
        recorder
            .record(ChildKind::Hook, "h", None, &some_group())
            .unwrap();
        assert_eq!(
            inode(recorder.path()),
            first,
            "the file is written in place"
        );
        assert_eq!(recorder.read().unwrap().unwrap().kind, ChildKind::Hook);
        recorder.clear().unwrap();
        recorder.remove_if_empty().unwrap();
        assert!(!recorder.path().exists());
        recorder.remove_if_empty().unwrap();
    }

    #[test]
    fn a_record_followed_by_the_end_of_a_longer_one_is_read_by_its_first_line() {
        let dir = tempfile::tempdir().unwrap();
        let recorder = Recorder::new(dir.path().join("process.json"));
        let long = "x".repeat(300);
        recorder
            .record(ChildKind::Tool, &long, Some("c1"), &some_group())
            .unwrap();
        let longer = std::fs::read(recorder.path()).unwrap();
        // A writer that died between writing the new line and cutting the file.
        recorder
            .record(ChildKind::Tool, "short", Some("c2"), &some_group())
            .unwrap();
        let short = std::fs::read(recorder.path()).unwrap();
        let mut torn = short.clone();
        torn.extend_from_slice(&longer[short.len()..]);
        std::fs::write(recorder.path(), &torn).unwrap();
        let read = recorder.read().unwrap().unwrap();
        assert_eq!(
            (read.name.as_str(), read.action_id.as_deref()),
            ("short", Some("c2"))
        );

        // As an older delta wrote it: pretty-printed, several lines.
        let pretty = serde_json::to_vec_pretty(&read).unwrap();
        std::fs::write(recorder.path(), pretty).unwrap();
        assert_eq!(recorder.read().unwrap().unwrap(), read);

        // Damaged: reported, not taken for nothing.
        std::fs::write(recorder.path(), b"{\"kind\":\"to").unwrap();
        assert!(matches!(recorder.read(), Err(StoreError::Parse { .. })));
    }

    #[test]
    fn a_record_longer_than_a_page_replaces_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let recorder = Recorder::new(dir.path().join("process.json"));
        let id = "c".repeat(IN_PLACE_MAX);
        recorder
            .record(ChildKind::Tool, "t", Some(&id), &some_group())
            .unwrap();
        assert_eq!(
            recorder.read().unwrap().unwrap().action_id.as_deref(),
            Some(id.as_str())
        );
        recorder
            .record(ChildKind::Tool, "t", Some("c2"), &some_group())
            .unwrap();
        assert_eq!(
            recorder.read().unwrap().unwrap().action_id.as_deref(),
            Some("c2")
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left");
    }

    #[test]
    fn a_link_or_a_pipe_at_the_records_name_is_replaced_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("precious.txt");
        std::fs::write(&outside, "keep me").unwrap();
        let recorder = Recorder::new(dir.path().join("process.json"));
        let link = || std::os::unix::fs::symlink(&outside, recorder.path()).unwrap();

        link();
        assert!(matches!(recorder.read(), Err(StoreError::Parse { .. })));
        recorder
            .record(ChildKind::Tool, "t", Some("c1"), &some_group())
            .unwrap();
        assert!(!recorder.path().is_symlink());
        assert_eq!(recorder.read().unwrap().unwrap().name, "t");

        std::fs::remove_file(recorder.path()).unwrap();
        link();
        recorder.clear().unwrap();
        assert!(!recorder.path().exists(), "the link is removed");

        std::fs::hard_link(&outside, recorder.path()).unwrap();
        recorder
            .record(ChildKind::Tool, "t", Some("c2"), &some_group())
            .unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");

        std::fs::remove_file(recorder.path()).unwrap();
        nix::unistd::mkfifo(recorder.path(), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(matches!(recorder.read(), Err(StoreError::Parse { .. })));
        recorder
            .record(ChildKind::Tool, "t", Some("c3"), &some_group())
            .unwrap();
        assert_eq!(
            recorder.read().unwrap().unwrap().action_id.as_deref(),
            Some("c3")
        );
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
    }

    #[test]
    fn a_workspace_sweep_removes_empty_records() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join(".delta/run1");
        std::fs::create_dir_all(&run).unwrap();
        let recorder = Recorder::new(run.join(FILE_NAME));
        recorder
            .record(ChildKind::Tool, "t", Some("c1"), &some_group())
            .unwrap();
        recorder.clear().unwrap();
        sweep_workspace(dir.path(), Duration::from_millis(10)).unwrap();
        assert!(!recorder.path().exists());
    }

    #[test]
    fn a_group_recorded_on_another_host_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let recorder = Recorder::new(dir.path().join("process.json"));
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let group = GroupId::of_leader(child.id() as i32);
        recorder
            .record(ChildKind::Hook, "pre_tool_exec", None, &group)
            .unwrap();
        let mut text = std::fs::read_to_string(recorder.path()).unwrap();
        text = text.replace(&store::hostname(), "elsewhere");
        std::fs::write(recorder.path(), text).unwrap();
        let leftover = stop_recorded(&recorder, Duration::from_secs(1))
            .unwrap()
            .unwrap();
        assert_eq!(
            leftover.stopped,
            LeftoverState::OtherHost("elsewhere".into())
        );
        assert!(matches!(group::liveness(&group), group::Liveness::Alive(_)));
        group::kill(&group);
        let _ = child.wait();
    }
}
