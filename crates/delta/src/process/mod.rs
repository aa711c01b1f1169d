//! Running tools, hooks and generators as child processes.
//!
//! Every child runs in its own process group with an explicit environment and working folder. Its
//! standard input is closed unless a value is given (then that value is written and the pipe closed),
//! so a tool can never hang waiting for input. Output is captured in full (up to a cap). When the
//! deadline passes, or the interrupt flag is raised, the whole group is killed: grandchildren too,
//! and [`run`] returns only once none of the group is left.
//!
//! A child's pid is noted from the moment it exists (for [`kill_running`]). Before `exec`, a child
//! started with [`run_recorded`] writes its own record (its pid and start time are known to it
//! first), and every child checks the interrupt flag: its program never runs unrecorded, and an
//! interrupt that comes while it is being started stops it before it runs. A record too long for one
//! write is written by the parent instead, while the child waits at a gate.

pub mod group;
pub mod record;
mod watch;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use process_gate as gate;
use store::StoreError;

use group::GroupId;
use record::{ChildKind, Prepared, Recorder};

/// Most bytes kept per output stream; the rest is read, counted ([`Outcome::dropped`]) and dropped.
pub const MAX_CAPTURE: usize = 64 * 1024 * 1024;
/// How long a group left running by a process that died gets between SIGTERM and SIGKILL when the run
/// is taken over (as long as a program that overran its deadline gets).
pub const STOP_GRACE: Duration = watch::GRACE;

/// Finds programs on `PATH` once per name, so that repeated tool calls do not probe every `PATH`
/// entry again (each miss is a failed `execve`).
#[derive(Debug, Default)]
pub struct ProgramCache {
    found: std::collections::HashMap<String, String>,
}

impl ProgramCache {
    /// The program's path: names with a `/` are kept; other names are looked up in the `PATH` of
    /// `env`. A name that is not found is kept, so that starting it reports the usual error.
    pub fn resolve(&mut self, program: &str, env: &[(String, String)]) -> String {
        if program.contains('/') {
            return program.to_string();
        }
        if let Some(path) = self.found.get(program) {
            return path.clone();
        }
        // Without a `PATH`, the search path the C library's `execvp` uses.
        let path_var = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map_or("/bin:/usr/bin", |(_, v)| v.as_str());
        for dir in path_var.split(':').filter(|d| d.starts_with('/')) {
            let candidate = std::path::Path::new(dir).join(program);
            if is_executable(&candidate) {
                let resolved = candidate.display().to_string();
                self.found.insert(program.to_string(), resolved.clone());
                return resolved;
            }
        }
        program.to_string()
    }
}

fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Spawn {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Standard input (`None`: closed).
    pub stdin: Option<String>,
    /// Working folder.
    pub cwd: PathBuf,
    /// The complete environment.
    pub env: Vec<(String, String)>,
    /// Deadline.
    pub timeout: Duration,
    /// The sandbox the program runs in (`None`: none).
    pub confine: Option<std::sync::Arc<crate::sandbox::Confinement>>,
}

/// How it went.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
    /// Bytes of standard output and standard error past [`MAX_CAPTURE`], read and dropped.
    pub dropped: [u64; 2],
    /// Exit code; `128 + signal` when killed by a signal.
    pub exit_code: i32,
    /// Killed because the deadline passed.
    pub timed_out: bool,
    /// Killed because the interrupt flag was raised.
    pub interrupted: bool,
    /// Wall time.
    pub duration: Duration,
}

impl Outcome {
    /// The outcome of something that printed `text` and exited 0 at once (a call answered without a
    /// program: a skipped tool, a human's answer), for its record.
    pub fn printed(text: &str) -> Self {
        Self {
            stdout: text.as_bytes().to_vec(),
            ..Self::default()
        }
    }

    /// Exit code 0 and not killed.
    pub fn success(&self) -> bool {
        self.exit_code == 0 && !self.timed_out && !self.interrupted
    }
}

/// Why a program produced no [`Outcome`].
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// It could not be started (not found, not executable, bad folder).
    #[error("{0}")]
    Start(#[source] std::io::Error),
    /// An interrupt arrived while it was being started: it never ran.
    #[error("the run was interrupted before it started")]
    Interrupted,
    /// Its process group could not be recorded, so it was not let go: it never ran.
    #[error("it was not started, as its process could not be recorded: {0}")]
    Record(#[source] StoreError),
}

#[cfg(test)]
thread_local! {
    /// Set by tests to watch programs (started on this thread) as on systems without pidfds.
    static WITHOUT_EXIT_NOTICE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// What tells the end of child `pid` (see [`watch`]).
fn exit_notice(pid: i32) -> Option<std::os::fd::OwnedFd> {
    #[cfg(test)]
    if WITHOUT_EXIT_NOTICE.get() {
        return None;
    }
    gate::exit_notice(pid)
}

/// The process group of the program running now. Programs run one at a time.
static RUNNING: Mutex<Option<GroupId>> = Mutex::new(None);

/// The pid of the child being started, from the moment it exists (the kernel stores it as it creates
/// the child) until its group is in [`RUNNING`]; 0 when none.
static STARTING: AtomicI32 = AtomicI32::new(0);

fn set_running(group: Option<GroupId>) {
    *RUNNING.lock().unwrap_or_else(|p| p.into_inner()) = group;
}

/// Kills the program running now, with everything it started, and returns once none of it is left
/// (for a forced exit: the process is about to end and must not leave a tool behind). A child still
/// being started is killed too; one created after this call checks the interrupt flag before its
/// program runs (the command line raises it before a forced exit). A process that runs several runs
/// at once (a fleet worker) notes only the latest child here; the others are in their records.
pub fn kill_running() {
    // The starting child first: its group is noted in RUNNING before it is forgotten here.
    let starting = STARTING.load(Ordering::SeqCst);
    if starting != 0 {
        group::kill_starting(starting);
    }
    let group = RUNNING.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(group) = group {
        group::kill(&group);
    }
}

/// Forgets the running group however [`run`] returns.
struct RunningGuard;

impl Drop for RunningGuard {
    fn drop(&mut self) {
        set_running(None);
    }
}

/// What a child is recorded as in its run's `process.json` ([`run_recorded`]).
#[derive(Debug, Clone, Copy)]
pub struct Recording<'a> {
    /// The run's record.
    pub recorder: &'a Recorder,
    /// What the child is.
    pub kind: ChildKind,
    /// The tool's, hook's or context source's name.
    pub name: &'a str,
    /// The tool call it runs (tools only).
    pub action_id: Option<&'a str>,
}

/// Why the gate did not let a program go.
enum Refusal {
    Interrupted,
    Record(StoreError),
}

/// Runs `spawn` to completion, deadline or interruption.
///
/// An error means the program did not run: it could not be started (not found, not executable, bad
/// folder), or an interrupt came while it was being started.
pub fn run(spawn: &Spawn, interrupt: &AtomicBool) -> Result<Outcome, RunError> {
    let began = Instant::now();
    let _running = RunningGuard;
    let started = start(spawn, interrupt, None)?;
    finish(spawn, interrupt, began, started)
}

/// [`run`], with the child's process group recorded as `recording` before its program starts. If
/// the record cannot be written, the program never runs ([`RunError::Record`]). The record stays
/// when this returns: the caller clears it once what happened is kept.
pub fn run_recorded(
    spawn: &Spawn,
    interrupt: &AtomicBool,
    recording: Recording<'_>,
) -> Result<Outcome, RunError> {
    let began = Instant::now();
    let _running = RunningGuard;
    let started = match recording
        .recorder
        .prepare(recording.kind, recording.name, recording.action_id)
        .map_err(RunError::Record)?
    {
        Some(prepared) => start(
            spawn,
            interrupt,
            Some((prepared, recording.recorder.path())),
        )?,
        // Too long for the child to write in one go: the parent writes it while the child waits.
        None => start_gated(spawn, interrupt, &mut |group| {
            let r = &recording;
            r.recorder.record(r.kind, r.name, r.action_id, group)
        })?,
    };
    finish(spawn, interrupt, began, started)
}

/// The program to start for `spawn`: its first word is looked up on the `PATH` of the given
/// environment unless it names a file.
fn program(spawn: &Spawn) -> Result<gate::Program, RunError> {
    let Some(first) = spawn.argv.first() else {
        return Err(RunError::Start(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "empty command",
        )));
    };
    let path = ProgramCache::default().resolve(first, &spawn.env);
    if !path.contains('/') {
        // Not on the path: a name is never taken as a file in the working folder.
        return Err(RunError::Start(std::io::Error::from_raw_os_error(
            nix::libc::ENOENT,
        )));
    }
    gate::Program::new(
        &path,
        &spawn.argv,
        &spawn.env,
        &spawn.cwd,
        spawn.stdin.is_some(),
    )
    .map(|program| {
        program.confined(spawn.confine.as_ref().map(|c| gate::Confine {
            ruleset: c.ruleset_fd(),
            filter: c.filter(),
        }))
    })
    .map_err(RunError::Start)
}

/// Starts the child for `spawn` in its own process group; it writes `prepared` (when given) and
/// checks `interrupt` before its program runs. Its pid is noted from the moment it exists, so that a
/// forced exit kills it even while it is being started.
fn start(
    spawn: &Spawn,
    interrupt: &AtomicBool,
    prepared: Option<(Prepared, &std::path::Path)>,
) -> Result<(gate::Started, GroupId), RunError> {
    let program = program(spawn)?;
    let (prepared, path) = prepared.unzip();
    let (record, _file) = prepared.map(|p| (p.record, p.file)).unzip();
    let how = gate::Start {
        record,
        interrupt: Some(interrupt),
        pid_to: Some(&STARTING),
    };
    let started = gate::start(&program, how);
    let started = started.map(|child| {
        let group = match child.start_ticks {
            Some(ticks) => GroupId {
                pgid: child.pid,
                start_ticks: Some(ticks),
                boot_id: group::boot_id(),
            },
            None => GroupId::of_leader(child.pid),
        };
        set_running(Some(group.clone()));
        // Forgotten once noted above (a child that did not start was forgotten before its reaping).
        let _ = STARTING.compare_exchange(child.pid, 0, Ordering::SeqCst, Ordering::SeqCst);
        (child, group)
    });
    started.map_err(|e| match e {
        gate::StartError::Start(e) => RunError::Start(e),
        gate::StartError::Interrupted => RunError::Interrupted,
        gate::StartError::Record(e) => {
            let path = path.map(std::path::Path::to_path_buf).unwrap_or_default();
            RunError::Record(StoreError::io("write", path, e))
        }
    })
}

/// Creates the child for `spawn` (in its own process group) held at the gate, notes and records its
/// group, and lets its program go unless an interrupt came meanwhile.
fn start_gated(
    spawn: &Spawn,
    interrupt: &AtomicBool,
    record: &mut dyn FnMut(&GroupId) -> Result<(), StoreError>,
) -> Result<(gate::Started, GroupId), RunError> {
    let mut started = None;
    let gated = gate::spawn(program(spawn)?, |pid| {
        let group = GroupId::of_leader(pid);
        // Noted first, so that a forced exit kills the child even while it is being recorded.
        set_running(Some(group.clone()));
        started = Some(group.clone());
        if interrupt.load(Ordering::SeqCst) {
            return Err(Refusal::Interrupted);
        }
        record(&group).map_err(Refusal::Record)?;
        if interrupt.load(Ordering::SeqCst) {
            return Err(Refusal::Interrupted);
        }
        Ok(())
    });
    let child = match gated {
        Ok(child) => child,
        Err(gate::GateError::Start(e)) => return Err(RunError::Start(e)),
        Err(gate::GateError::Refused(Refusal::Interrupted)) => return Err(RunError::Interrupted),
        Err(gate::GateError::Refused(Refusal::Record(e))) => return Err(RunError::Record(e)),
    };
    let group = started.unwrap_or_else(|| GroupId::of_leader(child.pid));
    Ok((child, group))
}

/// Feeds the started program its input and watches it to its end, deadline (counted from `start`)
/// or interruption.
fn finish(
    spawn: &Spawn,
    interrupt: &AtomicBool,
    start: Instant,
    (child, group): (gate::Started, GroupId),
) -> Result<Outcome, RunError> {
    if let (Some(input), Some(mut pipe)) = (spawn.stdin.clone(), child.stdin) {
        std::thread::spawn(move || {
            // A tool that exits without reading its input closes the pipe; that is not an error.
            let _ = pipe.write_all(input.as_bytes());
        });
    }
    let limits = watch::Limits {
        deadline: start + spawn.timeout,
        interrupt,
    };
    let notice = exit_notice(child.pid);
    let watched = watch::watch(
        child.pid,
        &group,
        [child.stdout, child.stderr],
        notice,
        &limits,
    );
    let ended = match watched {
        Ok(ended) => ended,
        Err(e) => {
            // Watching failed (the system refused a wait): nothing of the group may stay behind.
            group::kill(&group);
            let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child.pid), None);
            return Err(e);
        }
    };
    Ok(Outcome {
        stdout: ended.stdout,
        stderr: ended.stderr,
        dropped: ended.dropped,
        exit_code: ended.exit_code,
        timed_out: ended.timed_out,
        interrupted: ended.interrupted,
        duration: start.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::sync::Arc;

    fn spawn(argv: &[&str], stdin: Option<&str>, timeout: Duration) -> Spawn {
        Spawn {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            stdin: stdin.map(str::to_string),
            cwd: std::env::temp_dir(),
            env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
            timeout,
            confine: None,
        }
    }

    /// `sh -c script` run to its end.
    fn shell(script: &str, timeout: Duration) -> Outcome {
        run(
            &spawn(&["sh", "-c", script], None, timeout),
            &AtomicBool::new(false),
        )
        .unwrap()
    }

    #[test]
    fn captures_output_and_exit_code_with_closed_stdin() {
        let out = shell(
            "cat; echo out; echo err >&2; exit 3",
            Duration::from_secs(5),
        );
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        assert_eq!(out.exit_code, 3);
        assert!(!out.success());
    }

    #[test]
    fn passes_stdin_and_environment() {
        let flag = AtomicBool::new(false);
        let mut s = spawn(
            &["sh", "-c", "printf '%s|%s' \"$(cat)\" \"$X\""],
            Some("in put"),
            Duration::from_secs(5),
        );
        s.env.push(("X".into(), "ex".into()));
        let out = run(&s, &flag).unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "in put|ex");
        assert!(out.success());
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("grandchild-survived");
        let script = format!("(sleep 2; touch {}) & sleep 30", marker.display());
        let out = shell(&script, Duration::from_millis(300));
        assert!(out.timed_out);
        assert!(out.duration < Duration::from_secs(3), "{:?}", out.duration);
        std::thread::sleep(Duration::from_millis(2500));
        assert!(!marker.exists(), "the grandchild was not killed");
    }

    #[test]
    fn interrupt_kills_promptly() {
        let flag = Arc::new(AtomicBool::new(false));
        let f = Arc::clone(&flag);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            f.store(true, Ordering::SeqCst);
        });
        let out = run(
            &spawn(&["sleep", "30"], None, Duration::from_secs(60)),
            &flag,
        )
        .unwrap();
        assert!(out.interrupted);
        assert!(out.duration < Duration::from_secs(2));
        assert_eq!(out.exit_code, 128 + 9);
    }

    /// Waits up to 2 s for `path` to appear.
    fn appears(path: &std::path::Path) -> bool {
        appears_within(path, Duration::from_secs(2))
    }

    fn appears_within(path: &std::path::Path, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if path.exists() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// A recorder in `dir`, and what a child is recorded as: a tool call whose id is `call_id`.
    fn recording<'a>(recorder: &'a Recorder, call_id: &'a str) -> Recording<'a> {
        Recording {
            recorder,
            kind: ChildKind::Tool,
            name: "t",
            action_id: Some(call_id),
        }
    }

    /// A call id too long for the child to write its record itself: the parent writes it at the
    /// gate instead.
    fn long_id() -> String {
        "c".repeat(5000)
    }

    #[test]
    fn a_program_finds_its_group_recorded_when_it_starts() {
        let dir = tempfile::tempdir().unwrap();
        let recorder = Recorder::new(dir.path().join("process.json"));
        let script = format!("cat {}; echo; echo $$", recorder.path().display());
        for call_id in ["c1".to_string(), long_id()] {
            let flag = AtomicBool::new(false);
            let out = run_recorded(
                &spawn(&["sh", "-c", &script], None, Duration::from_secs(5)),
                &flag,
                recording(&recorder, &call_id),
            )
            .unwrap();
            assert!(out.success(), "{out:?}");
            let text = String::from_utf8(out.stdout).unwrap();
            let (seen, pid) = text.trim_end().rsplit_once('\n').unwrap();
            let seen: record::ProcessRecord = serde_json::from_str(seen).unwrap();
            let pid: i32 = pid.parse().unwrap();
            assert_eq!(seen.group.pgid, pid, "the recorded group is the program's");
            assert_eq!(seen.action_id.as_deref(), Some(call_id.as_str()));
            assert!(seen.group.verifiable());
            // The start time the program recorded is its own, as anyone reads it.
            let stored = recorder.read().unwrap().unwrap();
            assert_eq!(stored, seen);
            recorder.clear().unwrap();
        }
    }

    #[test]
    fn a_recorded_group_is_the_one_a_reader_of_proc_finds_alive() {
        let dir = tempfile::tempdir().unwrap();
        let recorder = Recorder::new(dir.path().join("process.json"));
        let marker = dir.path().join("started");
        let script = format!("touch {}; sleep 30", marker.display());
        let flag = Arc::new(AtomicBool::new(false));
        let (f, path) = (Arc::clone(&flag), recorder.path().to_path_buf());
        // Read from another thread once the program runs, as a process taking the run over would.
        let watcher = std::thread::spawn(move || {
            assert!(appears_within(&marker, Duration::from_secs(10)));
            let seen = Recorder::new(path).read().unwrap().unwrap();
            let alive = group::liveness(&seen.group);
            f.store(true, Ordering::SeqCst);
            alive
        });
        let out = run_recorded(
            &spawn(&["sh", "-c", &script], None, Duration::from_secs(60)),
            &flag,
            recording(&recorder, "c2"),
        )
        .unwrap();
        assert!(out.interrupted);
        assert!(matches!(watcher.join().unwrap(), group::Liveness::Alive(_)));
        let seen = recorder.read().unwrap().unwrap();
        assert_eq!(group::liveness(&seen.group), group::Liveness::Gone);
    }

    #[test]
    fn a_record_the_child_cannot_write_is_a_record_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let script = format!("touch {}", marker.display());
        let recorder = Recorder::new(dir.path().join("process.json"));
        let mut prepared = recorder
            .prepare(ChildKind::Tool, "t", Some("c1"))
            .unwrap()
            .unwrap();
        // Every write to it fails (ENOSPC).
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        prepared.record.file = std::os::fd::AsRawFd::as_raw_fd(&full);
        let flag = AtomicBool::new(false);
        let spawn = spawn(&["sh", "-c", &script], None, Duration::from_secs(5));
        let result = start(&spawn, &flag, Some((prepared, recorder.path())));
        match result {
            Err(e @ RunError::Record(_)) => {
                let text = format!("{e}: {}", std::error::Error::source(&e).unwrap());
                assert!(text.contains("process.json"), "{text}");
            }
            other => panic!("{other:?}"),
        }
        assert!(!appears(&marker), "the program ran");
    }

    #[test]
    fn an_interrupt_while_a_program_is_started_keeps_it_from_running() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let recorder = Recorder::new(dir.path().join("process.json"));
        let script = format!("touch {}", marker.display());
        // Raised before the child checks it, once its record is written, whichever writes it.
        let flag = AtomicBool::new(true);
        for call_id in ["c1".to_string(), long_id()] {
            let result = run_recorded(
                &spawn(&["sh", "-c", &script], None, Duration::from_secs(5)),
                &flag,
                recording(&recorder, &call_id),
            );
            assert!(matches!(result, Err(RunError::Interrupted)), "{result:?}");
            // A child that writes its own record does so before it checks; the parent checks first.
            if let Some(seen) = recorder.read().unwrap() {
                assert_eq!(group::liveness(&seen.group), group::Liveness::Gone);
            }
            recorder.clear().unwrap();
        }
        let result = run(
            &spawn(&["sh", "-c", &script], None, Duration::from_secs(5)),
            &flag,
        );
        assert!(matches!(result, Err(RunError::Interrupted)), "{result:?}");
        assert!(!appears(&marker), "the program ran");
    }

    #[test]
    fn a_program_whose_group_cannot_be_recorded_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let script = format!("touch {}", marker.display());
        let flag = AtomicBool::new(false);
        // The record's folder does not exist.
        let recorder = Recorder::new(dir.path().join("gone").join("process.json"));
        for call_id in ["c1".to_string(), long_id()] {
            let result = run_recorded(
                &spawn(&["sh", "-c", &script], None, Duration::from_secs(5)),
                &flag,
                recording(&recorder, &call_id),
            );
            match result {
                Err(e @ RunError::Record(_)) => {
                    assert!(e.to_string().contains("process.json"), "{e}")
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(!appears(&marker), "the program ran");
    }

    #[test]
    fn a_bad_working_folder_is_a_start_error_and_records_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let recorder = Recorder::new(dir.path().join("process.json"));
        let flag = AtomicBool::new(false);
        let mut s = spawn(&["true"], None, Duration::from_secs(5));
        s.cwd = std::path::PathBuf::from("/nonexistent/folder/xyz");
        let result = run_recorded(&s, &flag, recording(&recorder, "c1"));
        assert!(matches!(result, Err(RunError::Start(_))), "{result:?}");
        assert_eq!(recorder.read().unwrap(), None, "a child that never ran");
        let result = run(&s, &flag);
        match result {
            Err(RunError::Start(e)) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_interrupt_leaves_nothing_of_the_group_when_run_returns() {
        let flag = Arc::new(AtomicBool::new(false));
        let f = Arc::clone(&flag);
        let dir = tempfile::tempdir().unwrap();
        let recorder = Recorder::new(dir.path().join("process.json"));
        let marker = dir.path().join("started");
        let m = marker.clone();
        std::thread::spawn(move || {
            appears(&m);
            f.store(true, Ordering::SeqCst);
        });
        let script = format!(
            "trap '' TERM; (trap '' TERM; sleep 30) & sleep 30 & touch {}; wait",
            marker.display()
        );
        let out = run_recorded(
            &spawn(&["sh", "-c", &script], None, Duration::from_secs(60)),
            &flag,
            recording(&recorder, "c1"),
        )
        .unwrap();
        assert!(out.interrupted);
        let group = recorder.read().unwrap().unwrap().group;
        assert_eq!(group::liveness(&group), group::Liveness::Gone);
    }

    const FORCED_EXIT_DIR: &str = "DELTA_FORCED_EXIT_TEST_DIR";

    /// Entry point for the test below, run in a process of its own (a forced exit acts on the
    /// process's one running program, which other tests would share): runs a program, and once it
    /// has started, forces the exit; also kills a child noted as being started. Does nothing
    /// without the variable.
    #[test]
    #[ignore = "run by a_forced_exit_kills_the_running_program_and_one_being_started"]
    fn forced_exit_helper() {
        let Some(dir) = std::env::var_os(FORCED_EXIT_DIR).map(std::path::PathBuf::from) else {
            return;
        };
        let mut starting = Command::new("sleep").arg("30").spawn().unwrap();
        std::fs::write(dir.join("starting"), starting.id().to_string()).unwrap();
        let marker = dir.join("started");
        let script = format!("(sleep 30) & touch {}; wait", marker.display());
        let recorder = Recorder::new(dir.join("process.json"));
        std::thread::spawn(move || {
            assert!(appears_within(&marker, Duration::from_secs(20)));
            // As if the kernel had just stored a child being started (the program above is
            // noted as running by now).
            STARTING.store(starting.id() as i32, Ordering::SeqCst);
            kill_running();
            // Killed, it ends at once: exit 130 says so (a child left alive keeps its pid).
            let code = match starting.wait() {
                Ok(status) if status.code().is_none() => 130,
                _ => 1,
            };
            std::process::exit(code);
        });
        let flag = AtomicBool::new(false);
        let out = run_recorded(
            &spawn(&["sh", "-c", &script], None, Duration::from_secs(60)),
            &flag,
            recording(&recorder, "c1"),
        );
        // Killed: the forced exit ends the process meanwhile.
        assert_eq!(out.unwrap().exit_code, 128 + 9);
        std::thread::sleep(Duration::from_secs(20));
    }

    #[test]
    fn a_forced_exit_kills_the_running_program_and_one_being_started() {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "process::tests::forced_exit_helper",
                "--ignored",
                "--test-threads=1",
            ])
            .env(FORCED_EXIT_DIR, dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(
            status.code(),
            Some(130),
            "the child being started was not killed"
        );
        let group = Recorder::new(dir.path().join("process.json"))
            .read()
            .unwrap()
            .unwrap()
            .group;
        assert_eq!(group::liveness(&group), group::Liveness::Gone);
    }

    const HELPER_DIR: &str = "DELTA_GATE_TEST_DIR";

    /// Entry point for the test below, run in a child process: starts a program held at the gate (as
    /// for a record only the parent can write) and, while it is held, announces its group and waits
    /// to be killed. Does nothing without the variable.
    #[test]
    #[ignore = "run by a_held_program_never_runs_when_delta_dies_before_letting_it_go"]
    fn gate_helper() {
        let Some(dir) = std::env::var_os(HELPER_DIR).map(std::path::PathBuf::from) else {
            return;
        };
        let flag = AtomicBool::new(false);
        let script = format!("touch {}", dir.join("ran").display());
        let recorder = Recorder::new(dir.join("process.json"));
        let _ = start_gated(
            &spawn(&["sh", "-c", &script], None, Duration::from_secs(5)),
            &flag,
            &mut |group| {
                std::fs::write(dir.join("group"), group.pgid.to_string()).unwrap();
                std::thread::sleep(Duration::from_secs(30));
                recorder.record(ChildKind::Tool, "t", Some(&long_id()), group)
            },
        );
    }

    #[test]
    fn a_held_program_never_runs_when_delta_dies_before_letting_it_go() {
        let dir = tempfile::tempdir().unwrap();
        let mut helper = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "process::tests::gate_helper",
                "--ignored",
                "--test-threads=1",
            ])
            .env(HELPER_DIR, dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert!(
            appears_within(&dir.path().join("group"), Duration::from_secs(30)),
            "the helper never held a program"
        );
        let pgid: i32 = std::fs::read_to_string(dir.path().join("group"))
            .unwrap()
            .parse()
            .unwrap();
        let group = GroupId::of_leader(pgid);
        assert!(matches!(group::liveness(&group), group::Liveness::Alive(_)));
        helper.kill().unwrap();
        helper.wait().unwrap();
        let end = Instant::now() + Duration::from_secs(5);
        while matches!(group::liveness(&group), group::Liveness::Alive(_)) {
            assert!(Instant::now() < end, "the held child outlived its parent");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!appears(&dir.path().join("ran")), "the program ran");
    }

    #[test]
    fn programs_are_found_on_the_given_path_once() {
        let mut cache = ProgramCache::default();
        let env = vec![("PATH".to_string(), "/nonexistent:/usr/bin:/bin".to_string())];
        let sh = cache.resolve("sh", &env);
        assert!(sh.ends_with("/sh") && sh.starts_with('/'), "{sh}");
        assert_eq!(cache.resolve("./local.sh", &env), "./local.sh");
        assert_eq!(
            cache.resolve("no-such-program-xyz", &env),
            "no-such-program-xyz"
        );
    }

    #[test]
    fn a_missing_program_is_an_error() {
        let flag = AtomicBool::new(false);
        assert!(
            run(
                &spawn(
                    &["definitely-not-a-program-xyz"],
                    None,
                    Duration::from_secs(1)
                ),
                &flag
            )
            .is_err()
        );
    }

    #[test]
    fn programs_are_watched_without_pidfds_too() {
        WITHOUT_EXIT_NOTICE.set(true);
        let out = shell("echo out; exit 4", Duration::from_secs(5));
        assert_eq!((out.stdout.as_slice(), out.exit_code), (&b"out\n"[..], 4));
        let out = shell(
            "exec >/dev/null 2>&1; sleep 0.2; exit 3",
            Duration::from_secs(5),
        );
        assert_eq!(out.exit_code, 3, "an exit after the pipes closed is seen");
        let out = shell("sleep 30", Duration::from_millis(200));
        assert!(
            out.timed_out && out.duration < Duration::from_secs(5),
            "{out:?}"
        );
        let out = shell("sleep 5 & echo started", Duration::from_secs(10));
        assert_eq!(out.stdout, b"started\n");
        assert!(out.duration < Duration::from_secs(2), "{:?}", out.duration);
    }

    #[test]
    fn a_program_starts_with_default_signals_and_none_blocked() {
        // A writer into a closed pipe ends by SIGPIPE (silently), as it does from a shell.
        let out = shell("yes | head -n 1", Duration::from_secs(5));
        assert_eq!(
            (out.stdout.as_slice(), out.stderr.as_slice()),
            (&b"y\n"[..], &b""[..])
        );
        // The program itself reads its masks (a shell blocks signals at times of its own).
        let out = run(
            &spawn(
                &["grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"],
                None,
                Duration::from_secs(5),
            ),
            &AtomicBool::new(false),
        )
        .unwrap();
        let status = String::from_utf8_lossy(&out.stdout);
        let mask = |name: &str| {
            let line = status.lines().find(|l| l.starts_with(name)).unwrap();
            u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
        };
        assert_eq!(mask("SigBlk:"), 0, "{status}");
        assert_eq!(
            mask("SigIgn:") & (1 << (nix::libc::SIGPIPE - 1)),
            0,
            "{status}"
        );
    }

    #[test]
    fn programs_started_from_many_threads_while_memory_churns_each_get_their_own_arguments() {
        // The child shares the parent's memory until `exec`: other threads allocating, freeing and
        // starting programs meanwhile must not disturb what any child runs.
        let stop = Arc::new(AtomicBool::new(false));
        let churn = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut kept: Vec<Vec<u8>> = Vec::new();
                let mut n = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    kept.push(vec![(n % 251) as u8; 1 + n % 70_000]);
                    if kept.len() > 64 {
                        kept.drain(..32);
                    }
                    n += 1;
                }
                n
            })
        };
        let workers: Vec<_> = (0..6)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..40 {
                        let word = format!("w{t}-{i}-{}", "x".repeat(i * 37));
                        let mut s = spawn(
                            &["sh", "-c", "printf '%s|%s' \"$1\" \"$MARK\"", "sh", &word],
                            None,
                            Duration::from_secs(10),
                        );
                        s.env.push(("MARK".into(), format!("env-{word}")));
                        let out = run(&s, &AtomicBool::new(false)).unwrap();
                        assert_eq!(out.exit_code, 0);
                        assert_eq!(
                            String::from_utf8(out.stdout).unwrap(),
                            format!("{word}|env-{word}")
                        );
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        assert!(churn.join().unwrap() > 0);
    }

    #[test]
    fn a_script_without_an_interpreter_line_runs_in_the_shell() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("plain");
        std::fs::write(&script, "echo \"from $0 with $1\"\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let flag = AtomicBool::new(false);
        let out = run(
            &spawn(
                &[script.to_str().unwrap(), "one"],
                None,
                Duration::from_secs(5),
            ),
            &flag,
        )
        .unwrap();
        let expected = format!("from {} with one\n", script.display());
        assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
    }

    #[test]
    fn without_a_path_the_usual_folders_are_searched_and_the_working_folder_is_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("local-tool"), "#!/bin/sh\necho ran\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            dir.path().join("local-tool"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let flag = AtomicBool::new(false);
        let mut s = spawn(&["sh", "-c", "echo found"], None, Duration::from_secs(5));
        s.env.clear();
        assert_eq!(run(&s, &flag).unwrap().stdout, b"found\n");
        let mut s = spawn(&["local-tool"], None, Duration::from_secs(5));
        s.cwd = dir.path().to_path_buf();
        match run(&s, &flag) {
            Err(RunError::Start(e)) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn background_children_holding_the_pipes_do_not_block() {
        let out = shell("sleep 5 & echo started", Duration::from_secs(10));
        assert_eq!(out.stdout, b"started\n");
        assert!(out.duration < Duration::from_secs(2), "{:?}", out.duration);
    }
}
