//! A session's shell: one live shell process reading commands from a pipe, so that `cd`, exported
//! variables and background jobs carry from one command to the next.
//!
//! Each command is written to a file of the session's (mode 0600) and sourced by a small function
//! defined when the shell starts, with its standard input from `/dev/null` (the shell's own is the
//! command pipe). After the command the function prints a marker with a fresh nonce on standard
//! output and standard error, so the host knows where the command's output ends, and writes its
//! exit code, working folder and exported environment to the session's control pipe (a FIFO): what
//! the session needs to be rebuilt if its process is ever lost.
//!
//! Each shell gets a FIFO of its own (made again at the same path when a shell starts), and its
//! reader ends with the shell: a reader left from an earlier shell of the session would otherwise
//! take part of the next shell's message (its end marker, and the host would wait for ever).

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use super::child::SessionChild;
use super::host::{Chunk, Stream, pump};
use super::wire::Reply;
use super::{SHELL_OWNED, SavedState, ShellError, random_hex};
use crate::process::MAX_CAPTURE;

/// How often a waiting command checks whether the shell is still there.
const TICK: Duration = Duration::from_millis(50);

/// A running shell and what it has printed that no command has claimed yet.
pub struct Shell {
    pub(super) child: SessionChild,
    stdin: ChildStdin,
    chunks: Receiver<Chunk>,
    /// Bytes read after the last command's markers (a background job's output), per stream.
    carry: [Vec<u8>; 3],
    /// This shell's control pipe, to wake its reader when the shell is dropped.
    control: std::fs::File,
}

impl Drop for Shell {
    fn drop(&mut self) {
        // The reader's channel goes first, then a byte wakes it: its next send fails and it ends.
        self.chunks = std::sync::mpsc::channel().1;
        let _ = self.control.write_all(b"\n");
    }
}

/// Makes a new FIFO at `control` (in place of the one there): a reader of the old one, left from
/// an earlier shell, never sees what the new shell writes.
fn fresh_fifo(control: &Path) -> Result<(), ShellError> {
    let fresh = control.with_extension("new");
    let io = |source: std::io::Error| ShellError::Io {
        path: control.to_path_buf(),
        source,
    };
    let _ = std::fs::remove_file(&fresh);
    nix::unistd::mkfifo(&fresh, nix::sys::stat::Mode::S_IRWXU).map_err(|e| io(e.into()))?;
    std::fs::rename(&fresh, control).map_err(io)
}

/// What one command left.
pub struct Ran {
    pub reply: Reply,
    /// The state to save (the command reached its end marker).
    pub state: Option<SavedState>,
}

impl Shell {
    /// Starts `program` (a shell) in `cwd` with `env`, its control pipe at `control`.
    pub fn start(
        program: &str,
        cwd: &Path,
        env: &[(String, String)],
        control: &Path,
        start: &super::host::ProgramStart,
    ) -> Result<Self, ShellError> {
        fresh_fifo(control)?;
        let mut child = start
            .command(program, &["-s".to_string()], env)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|source| ShellError::Spawn {
                program: program.to_string(),
                source,
            })?;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ShellError::Terminal(
                "the shell's pipes were not made".into(),
            ));
        };
        // The pipe just made, not a link or a file put in its place.
        let control_file =
            store::atomic::own_file(std::fs::OpenOptions::new().read(true).write(true))
                .open(control)
                .and_then(|file| {
                    use std::os::unix::fs::FileTypeExt;
                    if file.metadata()?.file_type().is_fifo() {
                        // Opened without waiting; read as a pipe is, waiting for the shell's writes.
                        nix::fcntl::fcntl(
                            &file,
                            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
                        )
                        .map_err(std::io::Error::from)?;
                        Ok(file)
                    } else {
                        Err(std::io::Error::other("not a pipe"))
                    }
                })
                .map_err(|source| ShellError::Io {
                    path: control.to_path_buf(),
                    source,
                })?;
        let wake = control_file.try_clone().map_err(|source| ShellError::Io {
            path: control.to_path_buf(),
            source,
        })?;
        let chunks = pump(vec![
            (Stream::Out, Box::new(stdout)),
            (Stream::Err, Box::new(stderr)),
            (Stream::Control, Box::new(control_file)),
        ]);
        stdin
            .write_all(prelude(control).as_bytes())
            .map_err(|source| ShellError::Io {
                path: PathBuf::from(program),
                source,
            })?;
        Ok(Self {
            child: SessionChild::new(child),
            stdin,
            chunks,
            carry: Default::default(),
            control: wake,
        })
    }

    /// Runs `command` (written to `script`, a new file) and collects its output until its markers,
    /// the shell's end, `timeout`, or `gone()` saying the caller left (after either of which the
    /// shell is stopped: the next command gets a new one).
    pub fn exec(
        &mut self,
        command: &str,
        script: &Path,
        timeout: Option<Duration>,
        gone: &dyn Fn() -> bool,
    ) -> Ran {
        let nonce = random_hex(16);
        if let Err(e) = write_private(script, command) {
            return Ran {
                reply: Reply::failed(e.to_string()),
                state: None,
            };
        }
        let call = format!("__delta_run {nonce} {}\n", quote(&script.to_string_lossy()));
        if self.stdin.write_all(call.as_bytes()).is_err() {
            self.child.mark_ended();
        }
        let ran = self.collect(&nonce, timeout.map(|t| Instant::now() + t), gone);
        let _ = std::fs::remove_file(script);
        ran
    }

    fn collect(&mut self, nonce: &str, deadline: Option<Instant>, gone: &dyn Fn() -> bool) -> Ran {
        let out_mark = format!("\x1e{nonce}\n").into_bytes();
        let control_end = format!("\x1e{nonce}-END\n").into_bytes();
        let mut got: [Vec<u8>; 3] = std::mem::take(&mut self.carry);
        // Where the search for each marker goes on: only new bytes are looked at (a marker may
        // straddle two reads), so collecting stays linear in the output.
        let mut searched = [0usize; 3];
        let mut done = [false; 3];
        let mut reply = Reply::default();
        let mut ticks = 0u32;
        loop {
            for (i, mark) in [(0, &out_mark), (1, &out_mark), (2, &control_end)] {
                if done[i] {
                    continue;
                }
                match find(&got[i][searched[i]..], mark) {
                    Some(at) => {
                        let at = searched[i] + at;
                        self.carry[i] = got[i].split_off(at + mark.len());
                        got[i].truncate(at);
                        done[i] = true;
                    }
                    None => {
                        searched[i] = got[i].len().saturating_sub(mark.len() - 1);
                        // Past the most a reply keeps, only what may still hold the start of a
                        // marker is kept beyond it; the rest is counted.
                        if let Some(dropped) = bound(&mut got[i], mark.len() - 1) {
                            searched[i] = MAX_CAPTURE;
                            if let Some(count) = reply.header.dropped.get_mut(i) {
                                *count += dropped;
                            }
                        }
                    }
                }
            }
            if done.iter().all(|d| *d) {
                break;
            }
            if !self.child.alive() {
                self.drain_into(&mut got);
                reply.header.ended = true;
                reply.header.exit_code = self.child.exit_code(TICK);
                break;
            }
            let late = deadline.is_some_and(|d| Instant::now() >= d);
            ticks = ticks.wrapping_add(1);
            // Whether the caller is still there is asked about every quarter second.
            if late || (ticks.is_multiple_of(5) && gone()) {
                self.drain_into(&mut got);
                self.child.stop();
                reply.header.timed_out = late;
                reply.header.ended = true;
                reply.header.exit_code = 124;
                break;
            }
            if let Ok(Chunk::Data(stream, bytes)) = self.chunks.recv_timeout(TICK) {
                got[stream as usize].extend_from_slice(&bytes);
            }
        }
        let [mut stdout, mut stderr, control] = got;
        for (stream, dropped) in [&mut stdout, &mut stderr]
            .into_iter()
            .zip(reply.header.dropped.iter_mut())
        {
            *dropped += stream.len().saturating_sub(MAX_CAPTURE) as u64;
            stream.truncate(MAX_CAPTURE);
        }
        reply.stdout = stdout;
        reply.stderr = stderr;
        let mut state = None;
        if done[2]
            && let Some((code, saved)) = parse_control(nonce, &control)
        {
            reply.header.exit_code = code;
            state = saved;
        }
        Ran { reply, state }
    }

    /// What is waiting in the pipes now, without waiting for more.
    fn drain_into(&mut self, got: &mut [Vec<u8>; 3]) {
        let until = Instant::now() + TICK;
        while let Ok(chunk) = self
            .chunks
            .recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            if let Chunk::Data(stream, bytes) = chunk {
                got[stream as usize].extend_from_slice(&bytes);
            }
        }
    }
}

/// Cuts `buf` down to [`MAX_CAPTURE`] bytes and its last `tail` bytes once it is longer than both:
/// how many bytes were dropped, if any.
fn bound(buf: &mut Vec<u8>, tail: usize) -> Option<u64> {
    let end = buf.len().checked_sub(tail)?;
    if end <= MAX_CAPTURE {
        return None;
    }
    buf.drain(MAX_CAPTURE..end);
    Some((end - MAX_CAPTURE) as u64)
}

/// The function every command runs through (see the module's documentation). The markers go to
/// copies of the shell's own output pipes (descriptors 8 and 9, made when it starts), so a command
/// that redirects its output (`exec 2>&1`, `exec >/dev/null`) does not hide them; `env` is found
/// once, so a command that changes `PATH` does not lose the saved environment; the dump's own
/// errors go nowhere.
fn prelude(control: &Path) -> String {
    format!(
        "exec 8>&1 9>&2\n\
         __delta_control={}\n\
         __delta_env=$(command -v env)\n\
         __delta_run() {{ __delta_nonce=$1; __delta_script=$2; shift 2; \
         . \"$__delta_script\" </dev/null; __delta_rc=$?; \
         printf '\\036%s\\n' \"$__delta_nonce\" >&8; printf '\\036%s\\n' \"$__delta_nonce\" >&9; \
         {{ printf '%s %d\\n' \"$__delta_nonce\" \"$__delta_rc\"; pwd; \
         \"$__delta_env\" -0 || printf '\\036NOENV'; \
         printf '\\036%s-END\\n' \"$__delta_nonce\"; }} >\"$__delta_control\" 2>/dev/null; }}\n",
        quote(&control.to_string_lossy())
    )
}

/// `text` as one shell word: as it is when that is safe, else single-quoted.
pub fn word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=@%+,-".contains(c));
    if plain { text.to_string() } else { quote(text) }
}

/// `text` as one single-quoted shell word.
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Reads a control message: `<nonce> <code>\n<cwd>\n<NAME=VALUE\0>...`; the state is `None` when
/// the environment could not be listed.
fn parse_control(nonce: &str, message: &[u8]) -> Option<(i32, Option<SavedState>)> {
    let at = find(message, format!("{nonce} ").as_bytes())?;
    let rest = &message[at + nonce.len() + 1..];
    let line_end = rest.iter().position(|b| *b == b'\n')?;
    let code = std::str::from_utf8(&rest[..line_end])
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let rest = &rest[line_end + 1..];
    if find(rest, b"\x1eNOENV").is_some() {
        return Some((code, None));
    }
    let cwd_end = rest.iter().position(|b| *b == b'\n')?;
    let cwd = String::from_utf8_lossy(&rest[..cwd_end]).into_owned();
    let mut env = BTreeMap::new();
    for entry in rest[cwd_end + 1..].split(|b| *b == 0) {
        let entry = String::from_utf8_lossy(entry);
        if let Some((name, value)) = entry.split_once('=')
            && !SHELL_OWNED.contains(&name)
        {
            env.insert(name.to_string(), value.to_string());
        }
    }
    Some((code, Some(SavedState::from_snapshot(cwd, env))))
}

/// Writes `text` to a new file only its owner can read.
fn write_private(path: &Path, text: &str) -> Result<(), ShellError> {
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| ShellError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_control_message_gives_the_code_folder_and_environment() {
        let message = b"abc 7\n/tmp/x y\nA=1\0B=two\nlines\0_=/bin/env\0\x1eabc-END\n";
        let (code, state) = parse_control("abc", message).unwrap();
        let state = state.unwrap();
        assert_eq!(code, 7);
        assert_eq!(state.cwd, "/tmp/x y");
        assert_eq!(
            state.snapshot.get("B").map(String::as_str),
            Some("two\nlines")
        );
        assert!(
            !state.snapshot.contains_key("_"),
            "the shell's own variables are left out"
        );
        assert!(parse_control("zzz", message).is_none());
        let no_env = b"abc 3\n/tmp\n\x1eNOENV\x1eabc-END\n";
        assert_eq!(parse_control("abc", no_env), Some((3, None)));
    }

    #[test]
    fn quoting_keeps_any_text_one_word() {
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(word("-q"), "-q");
        assert_eq!(word("a b"), "'a b'");
        assert_eq!(word(""), "''");
    }
}
