//! Running tools, hooks and generators as child processes.
//!
//! Every child runs in its own process group with an explicit environment and working folder. Its
//! standard input is closed unless a value is given (then that value is written and the pipe closed),
//! so a tool can never hang waiting for input. Output is captured in full (up to a cap). When the
//! deadline passes, or the interrupt flag is raised, the whole group is killed: grandchildren too,
//! and [`run`] returns only once none of the group is left.
//!
//! A child is held between `fork` and `exec` until the parent has noted its group (for
//! [`kill_running`]), recorded it (with [`run_recorded`]) and checked for an interrupt: its program
//! never runs unnoted, and an interrupt that comes while it is being started stops it before it runs.

mod gate;
pub mod group;
pub mod record;

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use store::StoreError;

use group::GroupId;

/// Most bytes kept per output stream; the rest is counted but dropped.
pub const MAX_CAPTURE: usize = 64 * 1024 * 1024;
/// How long a group gets between SIGTERM and SIGKILL after a timeout.
const GRACE: Duration = Duration::from_millis(1000);
/// How long a group left running by a process that died gets between SIGTERM and SIGKILL when the run
/// is taken over.
pub const STOP_GRACE: Duration = GRACE;
/// How often waiting loops look at the interrupt flag.
const POLL: Duration = Duration::from_millis(20);

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
        let path_var = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str())
            .unwrap_or("");
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
}

/// How it went.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
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

/// The process group of the program running now. Programs run one at a time.
static RUNNING: Mutex<Option<GroupId>> = Mutex::new(None);

fn set_running(group: Option<GroupId>) {
    *RUNNING.lock().unwrap_or_else(|p| p.into_inner()) = group;
}

/// Kills the program running now, with everything it started, and returns once none of it is left
/// (for a forced exit: the process is about to end and must not leave a tool behind). A program still
/// held before `exec` is killed too.
pub fn kill_running() {
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

fn signal_group(group: &GroupId, signal: Signal) {
    // The group may already be gone; that is fine.
    let _ = killpg(Pid::from_raw(group.pgid), signal);
}

/// Why the gate did not let a program go.
enum Refusal {
    Interrupted,
    Record(StoreError),
}

/// Reads both output pipes until both are closed, on one thread.
fn read_pipes(
    mut stdout: std::process::ChildStdout,
    mut stderr: std::process::ChildStderr,
    bufs: [Arc<Mutex<Vec<u8>>>; 2],
    done: mpsc::Sender<()>,
) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    std::thread::spawn(move || {
        let mut open = [true, true];
        let mut chunk = [0u8; 16 * 1024];
        while open[0] || open[1] {
            let mut ready = [false, false];
            {
                let mut fds = Vec::with_capacity(2);
                let mut which = Vec::with_capacity(2);
                if open[0] {
                    fds.push(PollFd::new(stdout.as_fd(), PollFlags::POLLIN));
                    which.push(0);
                }
                if open[1] {
                    fds.push(PollFd::new(stderr.as_fd(), PollFlags::POLLIN));
                    which.push(1);
                }
                if poll(&mut fds, PollTimeout::NONE).is_err() {
                    break;
                }
                for (fd, i) in fds.iter().zip(which) {
                    // Readable, closed (POLLHUP) or failed: a read tells which.
                    ready[i] = fd.revents().is_none_or(|r| !r.is_empty());
                }
            }
            for i in 0..2 {
                if !ready[i] {
                    continue;
                }
                let read = if i == 0 {
                    stdout.read(&mut chunk)
                } else {
                    stderr.read(&mut chunk)
                };
                match read {
                    Ok(0) | Err(_) => open[i] = false,
                    Ok(n) => {
                        let mut b = bufs[i].lock().unwrap_or_else(|p| p.into_inner());
                        let room = MAX_CAPTURE.saturating_sub(b.len());
                        b.extend_from_slice(&chunk[..n.min(room)]);
                    }
                }
            }
        }
        let _ = done.send(());
    });
}

/// Runs `spawn` to completion, deadline or interruption.
///
/// An error means the program did not run: it could not be started (not found, not executable, bad
/// folder), or an interrupt came while it was being started.
pub fn run(spawn: &Spawn, interrupt: &AtomicBool) -> Result<Outcome, RunError> {
    run_recorded(spawn, interrupt, &mut |_| Ok(()))
}

/// Creates the child for `spawn` (in its own process group), notes and records its group, and lets
/// its program go unless an interrupt came meanwhile.
fn start_gated(
    spawn: &Spawn,
    interrupt: &AtomicBool,
    record: &mut dyn FnMut(&GroupId) -> Result<(), StoreError>,
) -> Result<(std::process::Child, GroupId), RunError> {
    let Some((program, args)) = spawn.argv.split_first() else {
        return Err(RunError::Start(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "empty command",
        )));
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(&spawn.cwd)
        .env_clear()
        .envs(spawn.env.iter().map(|(k, v)| (k, v)))
        .process_group(0)
        .stdin(if spawn.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut started = None;
    let gated = gate::spawn(command, |pid| {
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
    let group = match started {
        Some(group) => group,
        None => GroupId::of_leader(i32::try_from(child.id()).unwrap_or(0)),
    };
    Ok((child, group))
}

/// [`run`], calling `record` with the child's process group after the child exists and before its
/// program starts. If `record` fails, the program never runs ([`RunError::Record`]).
pub fn run_recorded(
    spawn: &Spawn,
    interrupt: &AtomicBool,
    record: &mut dyn FnMut(&GroupId) -> Result<(), StoreError>,
) -> Result<Outcome, RunError> {
    let start = Instant::now();
    let _running = RunningGuard;
    let (mut child, group) = start_gated(spawn, interrupt, record)?;
    if let (Some(input), Some(mut pipe)) = (spawn.stdin.clone(), child.stdin.take()) {
        std::thread::spawn(move || {
            // A tool that exits without reading its input closes the pipe; that is not an error.
            let _ = pipe.write_all(input.as_bytes());
        });
    }
    let stdout = Arc::new(Mutex::new(Vec::new()));
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let (done_tx, done_rx) = mpsc::channel();
    let mut readers = 0;
    if let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) {
        read_pipes(
            out,
            err,
            [Arc::clone(&stdout), Arc::clone(&stderr)],
            done_tx,
        );
        readers += 1;
    }

    let (exit_tx, exit_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = exit_tx.send(child.wait());
    });

    let deadline = start + spawn.timeout;
    let mut timed_out = false;
    let mut interrupted = false;
    let status = loop {
        let now = Instant::now();
        let wait = if timed_out || interrupted {
            POLL
        } else {
            deadline.saturating_duration_since(now).min(POLL)
        };
        match exit_rx.recv_timeout(wait) {
            Ok(status) => break status.map_err(RunError::Start)?,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(RunError::Start(std::io::Error::other(
                    "lost track of the child process",
                )));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if interrupt.load(Ordering::SeqCst) && !interrupted {
            interrupted = true;
            signal_group(&group, Signal::SIGKILL);
        } else if !timed_out && !interrupted && Instant::now() >= deadline {
            timed_out = true;
            signal_group(&group, Signal::SIGTERM);
            match exit_rx.recv_timeout(GRACE) {
                Ok(status) => break status.map_err(RunError::Start)?,
                Err(_) => signal_group(&group, Signal::SIGKILL),
            }
        }
    };
    if timed_out || interrupted {
        // Anything the tool left running in its group goes too, before we go on.
        group::kill(&group);
    }
    // Wait for the output pipes to drain. A background process that inherited them could keep them
    // open forever, so give up after a short while and keep what arrived.
    let drain_end = Instant::now() + Duration::from_millis(500);
    for _ in 0..readers {
        if done_rx
            .recv_timeout(drain_end.saturating_duration_since(Instant::now()))
            .is_err()
        {
            break;
        }
    }
    use std::os::unix::process::ExitStatusExt;
    let exit_code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(-1);
    let take =
        |b: &Arc<Mutex<Vec<u8>>>| std::mem::take(&mut *b.lock().unwrap_or_else(|p| p.into_inner()));
    Ok(Outcome {
        stdout: take(&stdout),
        stderr: take(&stderr),
        exit_code,
        timed_out,
        interrupted,
        duration: start.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spawn(argv: &[&str], stdin: Option<&str>, timeout: Duration) -> Spawn {
        Spawn {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            stdin: stdin.map(str::to_string),
            cwd: std::env::temp_dir(),
            env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
            timeout,
        }
    }

    #[test]
    fn captures_output_and_exit_code_with_closed_stdin() {
        let flag = AtomicBool::new(false);
        let out = run(
            &spawn(
                &["sh", "-c", "cat; echo out; echo err >&2; exit 3"],
                None,
                Duration::from_secs(5),
            ),
            &flag,
        )
        .unwrap();
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
        let flag = AtomicBool::new(false);
        let out = run(
            &spawn(&["sh", "-c", &script], None, Duration::from_millis(300)),
            &flag,
        )
        .unwrap();
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

    #[test]
    fn a_program_starts_only_once_its_group_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("started");
        let script = format!("echo $$ > {}", marker.display());
        let flag = AtomicBool::new(false);
        let mut recorded = None;
        let out = run_recorded(
            &spawn(&["sh", "-c", &script], None, Duration::from_secs(5)),
            &flag,
            &mut |group| {
                // The child exists (in its own group) but its program has not started.
                assert!(matches!(group::liveness(group), group::Liveness::Alive(_)));
                std::thread::sleep(Duration::from_millis(300));
                assert!(!marker.exists(), "the program ran before it was recorded");
                recorded = Some(group.clone());
                Ok(())
            },
        )
        .unwrap();
        assert!(out.success());
        let pid: i32 = std::fs::read_to_string(&marker)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let recorded = recorded.unwrap();
        assert_eq!(recorded.pgid, pid, "the recorded group is the program's");
        assert!(recorded.verifiable());
    }

    #[test]
    fn an_interrupt_while_a_program_is_started_keeps_it_from_running() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let script = format!("touch {}", marker.display());
        let flag = AtomicBool::new(false);
        let result = run_recorded(
            &spawn(&["sh", "-c", &script], None, Duration::from_secs(5)),
            &flag,
            &mut |_| {
                // SIGINT arrives while the record is being written.
                flag.store(true, Ordering::SeqCst);
                Ok(())
            },
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
        let mut leader = None;
        let result = run_recorded(
            &spawn(&["sh", "-c", &script], None, Duration::from_secs(5)),
            &flag,
            &mut |group| {
                leader = Some(group.clone());
                Err(StoreError::Io {
                    action: "write",
                    path: dir.path().join("process.json"),
                    source: std::io::Error::other("disk full"),
                })
            },
        );
        match result {
            Err(e @ RunError::Record(_)) => assert!(e.to_string().contains("disk full"), "{e}"),
            other => panic!("{other:?}"),
        }
        assert!(!appears(&marker), "the program ran");
        assert_eq!(
            group::liveness(&leader.unwrap()),
            group::Liveness::Gone,
            "the held child is gone"
        );
    }

    #[test]
    fn a_bad_working_folder_is_a_start_error() {
        let flag = AtomicBool::new(false);
        let mut s = spawn(&["true"], None, Duration::from_secs(5));
        s.cwd = std::path::PathBuf::from("/nonexistent/folder/xyz");
        let mut called = false;
        let result = run_recorded(&s, &flag, &mut |_| {
            called = true;
            Ok(())
        });
        assert!(matches!(result, Err(RunError::Start(_))), "{result:?}");
        assert!(
            !called,
            "nothing to record for a child that never reached the gate"
        );
    }

    #[test]
    fn an_interrupt_leaves_nothing_of_the_group_when_run_returns() {
        let flag = Arc::new(AtomicBool::new(false));
        let f = Arc::clone(&flag);
        let dir = tempfile::tempdir().unwrap();
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
        let mut group = None;
        let out = run_recorded(
            &spawn(&["sh", "-c", &script], None, Duration::from_secs(60)),
            &flag,
            &mut |g| {
                group = Some(g.clone());
                Ok(())
            },
        )
        .unwrap();
        assert!(out.interrupted);
        assert_eq!(group::liveness(&group.unwrap()), group::Liveness::Gone);
    }

    const HELPER_DIR: &str = "DELTA_GATE_TEST_DIR";

    /// Entry point for the test below, run in a child process: starts a program and, while it is held
    /// at the gate, announces its group and waits to be killed. Does nothing without the variable.
    #[test]
    #[ignore = "run by a_held_program_never_runs_when_delta_dies_before_letting_it_go"]
    fn gate_helper() {
        let Some(dir) = std::env::var_os(HELPER_DIR).map(std::path::PathBuf::from) else {
            return;
        };
        let flag = AtomicBool::new(false);
        let script = format!("touch {}", dir.join("ran").display());
        let _ = run_recorded(
            &spawn(&["sh", "-c", &script], None, Duration::from_secs(5)),
            &flag,
            &mut |group| {
                std::fs::write(dir.join("group"), group.pgid.to_string()).unwrap();
                std::thread::sleep(Duration::from_secs(30));
                Ok(())
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
    fn background_children_holding_the_pipes_do_not_block() {
        let flag = AtomicBool::new(false);
        let out = run(
            &spawn(
                &["sh", "-c", "sleep 5 & echo started"],
                None,
                Duration::from_secs(10),
            ),
            &flag,
        )
        .unwrap();
        assert_eq!(out.stdout, b"started\n");
        assert!(out.duration < Duration::from_secs(2), "{:?}", out.duration);
    }
}
