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
use record::{ChildKind, Recorder};

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
        Some(record) => start(spawn, interrupt, Some((record, recording.recorder)))?,
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
            namespaces: c.namespace_fds(),
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
    record: Option<(gate::SelfRecord, &Recorder)>,
) -> Result<(gate::Started, GroupId), RunError> {
    let program = program(spawn)?;
    let (record, recorder) = record.unzip();
    let how = gate::Start {
        record,
        interrupt: Some(interrupt),
        pid_to: Some(&STARTING),
    };
    let started = gate::start(&program, how).map(|child| {
        // The start time the child read for its record, so that the two always agree.
        let group = GroupId {
            pgid: child.pid,
            start_ticks: child.start_ticks,
            boot_id: group::boot_id(),
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
            let path = recorder.map(|r| r.path().to_path_buf()).unwrap_or_default();
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
    let gated = gate::spawn(&program(spawn)?, |pid| {
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
mod tests;
