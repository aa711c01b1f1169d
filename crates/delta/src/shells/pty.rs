//! A session's program on a pseudo-terminal: a live interactive program (a `python3` REPL,
//! `sqlite3`) that keeps its state between commands.
//!
//! A command is written to the program as a line of input; what it prints is read until it has
//! been quiet for [`IDLE`], or until the timeout. There is no exit code to read from a program that
//! goes on running: a reply says 0 while it runs, and its code once it has ended. Echo is off, so
//! the output is what the program printed (prompts included), with the terminal's `\r\n` read as
//! `\n`.

use std::fs::File;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use nix::sys::termios::{self, LocalFlags, SetArg};

use super::ShellError;
use super::child::SessionChild;
use super::host::{Chunk, Stream, pump};
use super::wire::Reply;

/// How long the program must stay quiet before its answer counts as complete.
pub const IDLE: Duration = Duration::from_millis(300);
/// How long a command waits for the program's first output when the caller sets no timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a wait for the program's first output looks whether its caller is still there.
const GONE_CHECK: Duration = Duration::from_millis(250);

/// A program running on a pseudo-terminal.
pub struct Pty {
    pub(super) child: SessionChild,
    master: File,
    chunks: Receiver<Chunk>,
}

impl Pty {
    /// Starts `command` (a command line, run by `sh -c`) on a new pseudo-terminal.
    pub fn start(
        command: &str,
        cwd: &Path,
        env: &[(String, String)],
        start: &super::host::ProgramStart,
    ) -> Result<Self, ShellError> {
        let errno = |what: &str, e: nix::Error| ShellError::Terminal(format!("{what}: {e}"));
        let pair = nix::pty::openpty(None, None).map_err(|e| errno("openpty", e))?;
        let mut settings = termios::tcgetattr(&pair.slave).map_err(|e| errno("tcgetattr", e))?;
        settings.local_flags.remove(LocalFlags::ECHO);
        termios::tcsetattr(&pair.slave, SetArg::TCSANOW, &settings)
            .map_err(|e| errno("tcsetattr", e))?;
        let slave = File::from(pair.slave);
        let stdio = || -> Result<Stdio, ShellError> {
            slave
                .try_clone()
                .map(Stdio::from)
                .map_err(|e| ShellError::Terminal(format!("dup: {e}")))
        };
        let mut env = env.to_vec();
        if !env.iter().any(|(k, _)| k == "TERM") {
            env.push(("TERM".into(), "dumb".into()));
        }
        let child = start
            .command(
                "/bin/sh",
                &["-c".to_string(), format!("exec {command}")],
                &env,
            )
            .current_dir(cwd)
            .stdin(stdio()?)
            .stdout(stdio()?)
            .stderr(stdio()?)
            .process_group(0)
            .spawn()
            .map_err(|source| ShellError::Spawn {
                program: command.to_string(),
                source,
            })?;
        drop(slave);
        let master = File::from(pair.master);
        let reader = master
            .try_clone()
            .map_err(|e| ShellError::Terminal(format!("dup: {e}")))?;
        let chunks = pump(vec![(Stream::Out, Box::new(reader))]);
        Ok(Self {
            child: SessionChild::new(child),
            master,
            chunks,
        })
    }

    /// Sends `input` and reads the answer (with whatever the program printed since the last
    /// command). Input of several lines ends with an empty one, so that a block (a Python `def`,
    /// a loop) is closed and runs. A program that says nothing within the timeout is stopped (the
    /// next command starts it again); one whose caller left is left running.
    pub fn exec(
        &mut self,
        input: &str,
        timeout: Option<Duration>,
        gone: &dyn Fn() -> bool,
    ) -> Reply {
        let mut reply = Reply::default();
        let mut out = Vec::new();
        let keep = |out: &mut Vec<u8>, bytes: &[u8], dropped: &mut u64| {
            let room = crate::process::MAX_CAPTURE.saturating_sub(out.len());
            out.extend_from_slice(bytes.get(..room.min(bytes.len())).unwrap_or_default());
            *dropped += bytes.len().saturating_sub(room) as u64;
        };
        let mut dropped = 0u64;
        while let Ok(Chunk::Data(_, bytes)) = self.chunks.try_recv() {
            keep(&mut out, &bytes, &mut dropped);
        }
        let text = input.trim_end_matches('\n');
        let mut line = text.as_bytes().to_vec();
        line.push(b'\n');
        if text.contains('\n') {
            line.push(b'\n');
        }
        if self.master.write_all(&line).is_err() {
            self.child.mark_ended();
        }
        let deadline = Instant::now() + timeout.unwrap_or(DEFAULT_TIMEOUT);
        let mut heard = false;
        let mut last_heard = Instant::now();
        loop {
            let now = Instant::now();
            if now >= deadline {
                // Silent, or still talking: either way it outlived its time. Stopped, it leaves
                // nothing for the next command (which starts it again).
                self.child.stop();
                reply.header.timed_out = true;
                reply.header.exit_code = 124;
                break;
            }
            if gone() {
                break;
            }
            let wait = if heard { IDLE } else { GONE_CHECK }.min(deadline - now);
            match self.chunks.recv_timeout(wait) {
                Ok(Chunk::Data(_, bytes)) => {
                    heard = true;
                    last_heard = Instant::now();
                    keep(&mut out, &bytes, &mut dropped);
                }
                Ok(Chunk::End(_)) => {
                    self.child.mark_ended();
                    break;
                }
                Err(_) if heard && Instant::now() >= last_heard + IDLE => break,
                Err(_) => {}
            }
        }
        if !self.child.alive() {
            reply.header.ended = true;
            if !reply.header.timed_out {
                reply.header.exit_code = self.child.exit_code(Duration::from_millis(500));
            }
        }
        reply.stdout = normalize_newlines(&out);
        reply.header.dropped = [dropped, 0];
        reply
    }
}

/// The terminal's line ends (`\r\n`) as `\n`.
fn normalize_newlines(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
            i += 1;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn terminal_line_ends_read_as_newlines() {
        assert_eq!(super::normalize_newlines(b"a\r\nb\rc\r\n"), b"a\nb\rc\n");
    }
}
