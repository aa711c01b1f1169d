//! Running tools, hooks and generators as child processes.
//!
//! Every child runs in its own process group with an explicit environment and working folder. Its
//! standard input is closed unless a value is given (then that value is written and the pipe closed),
//! so a tool can never hang waiting for input. Output is captured in full (up to a cap). When the
//! deadline passes, or the interrupt flag is raised, the whole group is killed: grandchildren too.

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

/// Most bytes kept per output stream; the rest is counted but dropped.
pub const MAX_CAPTURE: usize = 64 * 1024 * 1024;
/// How long a group gets between SIGTERM and SIGKILL after a timeout.
const GRACE: Duration = Duration::from_millis(1000);
/// How often waiting loops look at the interrupt flag.
const POLL: Duration = Duration::from_millis(20);

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

fn kill_group(pid: u32, signal: Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        // The group may already be gone; that is fine.
        let _ = killpg(Pid::from_raw(pid), signal);
    }
}

fn reader(
    mut stream: impl Read + Send + 'static,
    buf: Arc<Mutex<Vec<u8>>>,
    done: mpsc::Sender<()>,
) {
    std::thread::spawn(move || {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let mut b = buf.lock().unwrap_or_else(|p| p.into_inner());
                    let room = MAX_CAPTURE.saturating_sub(b.len());
                    b.extend_from_slice(&chunk[..n.min(room)]);
                }
            }
        }
        let _ = done.send(());
    });
}

/// Runs `spawn` to completion, deadline or interruption.
///
/// An error means the program could not be started (not found, not executable, bad folder).
pub fn run(spawn: &Spawn, interrupt: &AtomicBool) -> std::io::Result<Outcome> {
    let Some((program, args)) = spawn.argv.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "empty command",
        ));
    };
    let start = Instant::now();
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
    let mut child = command.spawn()?;
    let pid = child.id();

    if let (Some(input), Some(mut pipe)) = (spawn.stdin.clone(), child.stdin.take()) {
        std::thread::spawn(move || {
            // A tool that exits without reading its input closes the pipe; that is not an error.
            let _ = pipe.write_all(input.as_bytes());
        });
    }
    let stdout = Arc::new(Mutex::new(Vec::new()));
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let (done_tx, done_rx) = mpsc::channel();
    let mut streams = 0;
    if let Some(out) = child.stdout.take() {
        reader(out, Arc::clone(&stdout), done_tx.clone());
        streams += 1;
    }
    if let Some(err) = child.stderr.take() {
        reader(err, Arc::clone(&stderr), done_tx.clone());
        streams += 1;
    }
    drop(done_tx);

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
            Ok(status) => break status?,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(std::io::Error::other("lost track of the child process"));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if interrupt.load(Ordering::SeqCst) && !interrupted {
            interrupted = true;
            kill_group(pid, Signal::SIGKILL);
        } else if !timed_out && !interrupted && Instant::now() >= deadline {
            timed_out = true;
            kill_group(pid, Signal::SIGTERM);
            match exit_rx.recv_timeout(GRACE) {
                Ok(status) => break status?,
                Err(_) => kill_group(pid, Signal::SIGKILL),
            }
        }
    };
    if timed_out || interrupted {
        // Anything the tool left running in its group goes too.
        kill_group(pid, Signal::SIGKILL);
    }
    // Wait for the output pipes to drain. A background process that inherited them could keep them
    // open forever, so give up after a short while and keep what arrived.
    let drain_end = Instant::now() + Duration::from_millis(500);
    for _ in 0..streams {
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
