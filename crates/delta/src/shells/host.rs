//! A session's host: the small process that keeps a session's shell (or program on a terminal)
//! alive between the separate calls that use it.
//!
//! `delta sessions` starts it (the same binary, hidden command `__host`) in a session of its own
//! (`setsid`), so no terminal's Ctrl-C reaches it. It listens on a Unix socket only its user can
//! reach, runs one command at a time, and starts the session's process again from its saved state
//! when it has ended (the reply says so). It writes `host.json` (itself, its process's group and its
//! socket) and `state.json` (the saved working folder and environment) in the session's folder;
//! `metadata.json` belongs to the clients.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::child::SessionChild;
use super::pty::Pty;
use super::shell::Shell;
use super::wire::{Reply, Request};
use super::{HostRecord, SavedState, SessionMeta, ShellError, StateFile, files};
use crate::process::group::GroupId;

/// Which output a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Out = 0,
    Err = 1,
    Control = 2,
}

/// Bytes read from one of a process's outputs, or the end of it.
#[derive(Debug)]
pub enum Chunk {
    Data(Stream, Vec<u8>),
    End(Stream),
}

/// Reads each source on a thread of its own into one channel.
pub fn pump(sources: Vec<(Stream, Box<dyn Read + Send>)>) -> Receiver<Chunk> {
    let (tx, rx) = mpsc::channel();
    for (stream, mut source) in sources {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match source.read(&mut buf) {
                    Ok(0) | Err(_) => {
                        let _ = tx.send(Chunk::End(stream));
                        return;
                    }
                    Ok(n) => {
                        if tx.send(Chunk::Data(stream, buf[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                }
            }
        });
    }
    rx
}

/// How the session's process is started: as it is, or in its run's sandbox (with the session's
/// folder writable, for its control pipe).
pub struct ProgramStart {
    sandbox: Option<(crate::sandbox::SandboxPolicy, PathBuf)>,
}

impl ProgramStart {
    /// `sandbox` is the policy and workspace the host was started with (by the run that drives the
    /// session), never read from the session's folder, which the session's programs can write.
    fn of(sandbox: Option<(crate::sandbox::SandboxPolicy, PathBuf)>, dir: &Path) -> Self {
        let sandbox = sandbox.map(|(mut policy, workspace)| {
            policy.writable.push(dir.to_path_buf());
            (policy, workspace)
        });
        Self { sandbox }
    }

    /// The command that starts `program args` with exactly `env`.
    pub fn command(
        &self,
        program: &str,
        args: &[String],
        env: &[(String, String)],
    ) -> std::process::Command {
        match &self.sandbox {
            Some((policy, workspace)) => crate::sandbox::command(
                &super::host_program(),
                policy,
                workspace,
                program,
                args,
                env,
            ),
            None => {
                let mut command = std::process::Command::new(program);
                command
                    .args(args)
                    .env_clear()
                    .envs(env.iter().map(|(k, v)| (k, v)));
                command
            }
        }
    }
}

/// The session's live process.
enum Live {
    Shell(Shell),
    Pty(Pty),
}

impl Live {
    fn child(&self) -> &SessionChild {
        match self {
            Live::Shell(s) => &s.child,
            Live::Pty(p) => &p.child,
        }
    }

    fn child_mut(&mut self) -> &mut SessionChild {
        match self {
            Live::Shell(s) => &mut s.child,
            Live::Pty(p) => &mut p.child,
        }
    }
}

/// A host serving one session.
struct Host {
    dir: PathBuf,
    meta: SessionMeta,
    /// The sandbox the session's process runs in and its workspace, as the host was started with
    /// them.
    sandbox: Option<(crate::sandbox::SandboxPolicy, PathBuf)>,
    /// The environment the host started with: what saved state is told apart from.
    base_env: Vec<(String, String)>,
    socket: PathBuf,
    live: Option<Live>,
    /// A process has run before for this session (a new one is a rebuild).
    started_once: bool,
    /// What the next reply says of a rebuild made when the host started.
    pending_note: Option<String>,
    /// The live process's group, for the watchdog.
    current: Arc<Mutex<Option<GroupId>>>,
}

/// Runs the host of the session in `dir` until it is told to stop. Returns when the host could
/// not start (the error) or has stopped. `rebuild`: the session had a process before, which is gone.
pub fn run(
    dir: &Path,
    rebuild: bool,
    sandbox: Option<(crate::sandbox::SandboxPolicy, PathBuf)>,
) -> Result<(), ShellError> {
    // A group leader cannot start a session; the host is started as an ordinary child, so it is not.
    nix::unistd::setsid().map_err(|e| ShellError::Terminal(format!("setsid: {e}")))?;
    let meta = files::read_meta(dir)?;
    let socket = files::socket_path(dir, &meta.session_id)?;
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).map_err(|source| ShellError::Io {
        path: socket.clone(),
        source,
    })?;
    let mut host = Host {
        dir: dir.to_path_buf(),
        meta,
        sandbox,
        base_env: std::env::vars().collect(),
        socket,
        live: None,
        started_once: rebuild,
        pending_note: None,
        current: Arc::new(Mutex::new(None)),
    };
    watch_folder(dir, &host.socket, Arc::clone(&host.current));
    match host.ensure_live() {
        Ok(note) => host.pending_note = note,
        Err(e) => log(&format!("the session's process did not start: {e}")),
    }
    host.record()?;
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        if host.serve(stream) {
            break;
        }
    }
    host.shut_down();
    Ok(())
}

impl Host {
    /// Answers one connection; true when the host must stop.
    fn serve(&mut self, stream: UnixStream) -> bool {
        if !super::peer::may_drive(&stream) {
            let refused = Reply::failed(
                "refused: a sandboxed program may not drive a session that runs outside the \
                 sandbox"
                    .into(),
            );
            let _ = refused.write_to(&mut &stream);
            return false;
        }
        let mut reader = BufReader::new(&stream);
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() {
            return false;
        }
        let gone = || client_gone(&stream);
        let (reply, stop) = match serde_json::from_str::<Request>(&line) {
            // A caller that left while the host was busy is not answered.
            Ok(Request::Exec { .. }) if gone() => return false,
            Ok(Request::Exec {
                command,
                timeout_ms,
            }) => (
                self.exec(&command, timeout_ms.map(Duration::from_millis), &gone),
                false,
            ),
            Ok(Request::Stop) => (Reply::default(), true),
            Err(e) => (Reply::failed(format!("bad request: {e}")), false),
        };
        if stop {
            self.shut_down();
        }
        let _ = reply.write_to(&mut &stream);
        stop
    }

    /// Starts the session's process if it is not running; `Some(note)` when that was a rebuild.
    fn ensure_live(&mut self) -> Result<Option<String>, ShellError> {
        if let Some(live) = &mut self.live
            && live.child_mut().alive()
        {
            return Ok(None);
        }
        self.live = None;
        let saved = files::read_state(&self.dir).ok().flatten();
        let work_dir = PathBuf::from(&self.meta.work_dir);
        let (cwd, env, cwd_lost) = match &saved {
            Some(state) => {
                let cwd = PathBuf::from(&state.cwd);
                let usable = cwd.is_dir();
                let cwd = if usable { cwd } else { work_dir.clone() };
                (cwd, state.apply(&self.base_env), !usable)
            }
            None => (work_dir, self.base_env.clone(), false),
        };
        let launcher = ProgramStart::of(self.sandbox.clone(), &self.dir);
        let live = if self.meta.pty {
            Live::Pty(Pty::start(&self.meta.command, &cwd, &env, &launcher)?)
        } else {
            Live::Shell(Shell::start(
                &self.meta.command,
                &cwd,
                &env,
                &files::control_path(&self.dir),
                &launcher,
            )?)
        };
        self.live = Some(live);
        let rebuilt = std::mem::replace(&mut self.started_once, true);
        self.record()?;
        Ok(rebuilt.then(|| rebuild_note(&self.meta, &cwd, saved.is_some(), cwd_lost)))
    }

    fn exec(&mut self, command: &str, timeout: Option<Duration>, gone: &dyn Fn() -> bool) -> Reply {
        let rebuilt = match self.ensure_live() {
            Ok(note) => note.or(self.pending_note.take()),
            Err(e) => return Reply::failed(e.to_string()),
        };
        let mut reply = match &mut self.live {
            Some(Live::Shell(shell)) => {
                let script = self
                    .dir
                    .join(format!("command-{}.sh", super::random_hex(8)));
                let ran = shell.exec(command, &script, timeout, gone);
                if let Some(state) = ran.state {
                    self.save(&state);
                }
                ran.reply
            }
            Some(Live::Pty(pty)) => pty.exec(command, timeout, gone),
            None => Reply::failed("the session has no process".into()),
        };
        reply.header.rebuilt = rebuilt;
        if reply.header.ended {
            self.live = None;
            let _ = self.record();
        }
        reply
    }

    fn save(&self, state: &SavedState) {
        let file = StateFile::diff(&self.base_env, state);
        if let Err(e) = files::write_state(&self.dir, &file) {
            log(&format!("cannot save the session's state: {e}"));
        }
    }

    /// Writes `host.json`: this process, its live process's group, its socket.
    fn record(&self) -> Result<(), ShellError> {
        let process = self.live.as_ref().map(|l| l.child().group().clone());
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = process.clone();
        let record = HostRecord {
            host: GroupId::of_leader(std::process::id() as i32),
            process,
            socket: self.socket.clone(),
        };
        files::write_host(&self.dir, &record)
    }

    fn shut_down(&mut self) {
        if let Some(live) = &mut self.live {
            live.child_mut().stop();
        }
        self.live = None;
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_file(files::host_path(&self.dir));
    }
}

/// How often the host looks whether its session's folder is still there.
const WATCH: Duration = Duration::from_secs(2);

/// Ends the host (and the session's process) once the session's folder is gone: removed by hand,
/// nobody could reach or end the session any more.
fn watch_folder(dir: &Path, socket: &Path, current: Arc<Mutex<Option<GroupId>>>) {
    let meta = files::meta_path(dir);
    let socket = socket.to_path_buf();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(WATCH);
            if meta.is_file() {
                continue;
            }
            let group = current
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let Some(group) = group {
                crate::process::group::stop(&group, Duration::from_secs(1));
            }
            let _ = std::fs::remove_file(&socket);
            log("the session's folder is gone; the host ends");
            std::process::exit(0);
        }
    });
}

/// Whether the caller on `stream` has gone (it closed the connection, or died): it sends nothing
/// after its request, so anything readable is its end.
fn client_gone(stream: &UnixStream) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let mut fds = [PollFd::new(
        stream.as_fd(),
        PollFlags::POLLIN | PollFlags::POLLHUP,
    )];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(0) => false,
        Ok(_) => true,
        Err(_) => false,
    }
}

/// A line in the host's log (its standard error is the session's `host.log`).
fn log(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{} {text}", jiff::Timestamp::now());
}

fn rebuild_note(meta: &SessionMeta, cwd: &Path, had_state: bool, cwd_lost: bool) -> String {
    let what = if meta.pty {
        format!(
            "its program had ended and was started again ({}); what it held in memory is gone",
            meta.command
        )
    } else if had_state {
        format!(
            "its shell had ended and was started again in {} with its saved environment",
            cwd.display()
        )
    } else {
        format!(
            "its shell had ended and was started again in {}",
            cwd.display()
        )
    };
    let lost = if cwd_lost {
        " (its saved working folder no longer exists)"
    } else {
        ""
    };
    format!("session {}: {what}{lost}", meta.session_id)
}
