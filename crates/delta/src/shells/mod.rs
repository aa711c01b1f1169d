//! Persistent shell sessions: a shell (or an interactive program on a pseudo-terminal) that lives
//! across separate tool calls and separate delta processes.
//!
//! Sessions live in a folder (`<cwd>/.sessions` for `delta sessions`, `<workspace>/.sessions` for a
//! run), one sub-folder per session. Each session's process is kept by a host process of its own
//! ([`host`]); any later call reaches it through the host's socket. The working folder and exported
//! variables carry from one command to the next because the shell itself stays alive; after each
//! command they are also saved, so a session whose process has gone (a machine restart, a run's
//! cleanup, a kill) is started again from them, and says so.
//!
//! A session started by a run (its tools, or `delta sessions start` with `DELTA_RUN_ID` set) names
//! that run as its owner: when the run ends, fails or is interrupted the engine stops the processes
//! of the sessions it owns ([`ShellSessions::stop_owned`]); their saved state stays, so a later
//! `delta continue` that uses them again finds them rebuilt.

pub mod child;
pub mod files;
pub mod host;
mod peer;
pub mod pty;
pub mod shell;
pub mod wire;

use std::collections::BTreeMap;
use std::io::{BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::process::group::{self, GroupId, Liveness};
use wire::{Reply, Request};

/// The folder `delta sessions` uses when none is given, under the current folder.
pub const DEFAULT_DIR: &str = ".sessions";
/// The shell a session runs when the caller names none.
pub const DEFAULT_SHELL: &str = "bash";
/// Shells a session without a terminal can run (it drives them through a function of its own).
const SHELLS: [&str; 5] = ["bash", "sh", "dash", "zsh", "ksh"];
/// How long a new host gets to answer.
const HOST_START: Duration = Duration::from_secs(10);
/// How long a host gets to stop before its processes are killed.
const HOST_STOP: Duration = Duration::from_secs(5);

/// What went wrong with a session.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    #[error("Session {0} not found")]
    NotFound(String),
    #[error("Session {0} is terminated")]
    Terminated(String),
    #[error("Session {0} already exists")]
    Exists(String),
    #[error(
        "invalid session id {0:?}: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"
    )]
    BadId(String),
    #[error(
        "{0} is not a shell a session can drive without a terminal (bash, sh, dash, zsh, ksh); start an interactive program with --pty"
    )]
    NotAShell(String),
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("the pseudo-terminal could not be set up: {0}")]
    Terminal(String),
    #[error("{0} is not a private folder of this user's; sessions will not put a socket there")]
    Unsafe(PathBuf),
    #[error("the host of session {id} did not start: {why}")]
    HostStart { id: String, why: String },
    #[error("session {id}: {source}")]
    Host { id: String, source: std::io::Error },
    #[error("session {0}: {1}")]
    Protocol(String, String),
    #[error("interrupted while session {0} ran a command")]
    Interrupted(String),
    #[error("session {id} did not answer within {} s: another command may be running in it", waited.as_secs_f64())]
    Busy { id: String, waited: Duration },
}

/// Whether a session can still be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionStatus {
    Active,
    Terminated,
}

/// A session's `metadata.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMeta {
    pub session_id: String,
    pub command: String,
    pub work_dir: String,
    pub status: SessionStatus,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_executed_at: Option<String>,
    #[serde(default)]
    pub execution_count: u64,
    /// The program runs on a pseudo-terminal.
    #[serde(default)]
    pub pty: bool,
    /// The run that started the session (its cleanup stops the session's process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_run: Option<String>,
}

/// `host.json`: the host, its session's live process, its socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRecord {
    pub host: GroupId,
    pub process: Option<GroupId>,
    pub socket: PathBuf,
}

/// A shell's working folder and whole exported environment after a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedState {
    pub cwd: String,
    pub snapshot: BTreeMap<String, String>,
}

impl SavedState {
    pub fn from_snapshot(cwd: String, snapshot: BTreeMap<String, String>) -> Self {
        Self { cwd, snapshot }
    }
}

/// `state.json`: what a rebuilt shell starts from. Only what the session's commands changed is
/// kept (the variables they set or changed, those they removed), never the environment the session
/// inherited: keys the caller had in its environment are not written to disk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFile {
    pub cwd: String,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub unset: Vec<String>,
}

impl StateFile {
    /// What `state` changed relative to `base`.
    pub fn diff(base: &[(String, String)], state: &SavedState) -> Self {
        let base: BTreeMap<&str, &str> =
            base.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let env = state
            .snapshot
            .iter()
            .filter(|(k, v)| base.get(k.as_str()) != Some(&v.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let unset = base
            .keys()
            .filter(|k| !state.snapshot.contains_key(**k) && !shell_owned(k))
            .map(|k| (*k).to_string())
            .collect();
        Self {
            cwd: state.cwd.clone(),
            env,
            unset,
        }
    }

    /// `base` with this state's changes applied.
    pub fn apply(&self, base: &[(String, String)]) -> Vec<(String, String)> {
        let mut env: BTreeMap<String, String> = base
            .iter()
            .filter(|(k, _)| !self.unset.contains(k))
            .cloned()
            .collect();
        env.extend(self.env.clone());
        env.into_iter().collect()
    }
}

/// Variables the shell sets itself: never saved as the session's own.
pub const SHELL_OWNED: [&str; 5] = ["_", "SHLVL", "PWD", "OLDPWD", "PS1"];

fn shell_owned(name: &str) -> bool {
    SHELL_OWNED.contains(&name)
}

/// What a command printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
    pub timed_out: bool,
    /// The session's process had gone and was started again first: what to tell the caller.
    pub rebuilt: Option<String>,
    /// Bytes of each stream past what a reply keeps, dropped.
    pub dropped: [u64; 2],
}

/// How a session is started.
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// The shell (or, with `pty`, the command line); default `bash`.
    pub command: Option<String>,
    /// The caller's name for it; default `sess_<8 hex>`.
    pub id: Option<String>,
    pub pty: bool,
    /// The working folder to start in.
    pub work_dir: PathBuf,
    /// The run that owns it.
    pub owner_run: Option<String>,
}

/// The sessions of one folder.
#[derive(Debug, Clone)]
pub struct ShellSessions {
    dir: PathBuf,
    /// The program that hosts a session: this delta binary (`delta sessions __host DIR`).
    host_program: PathBuf,
    /// The environment a new host (and so the session's process) starts with.
    env: Vec<(String, String)>,
    /// The sandbox of the run that drives these sessions, and its workspace: each host is started
    /// with them, and a host is used only when it is a process of this binary, unconfined, started
    /// with exactly them.
    sandbox: Option<(crate::sandbox::SandboxPolicy, PathBuf)>,
}

impl ShellSessions {
    /// The sessions under `dir`, hosted by `host_program` started with `env`.
    pub fn new(dir: PathBuf, host_program: PathBuf, env: Vec<(String, String)>) -> Self {
        Self {
            dir,
            host_program,
            env,
            sandbox: None,
        }
    }

    /// The same sessions, whose processes run in `sandbox` for `workspace` (the policy and
    /// workspace of the run that drives them; nothing in a session's folder changes them).
    pub fn confined(
        mut self,
        sandbox: Option<crate::sandbox::SandboxPolicy>,
        workspace: &Path,
    ) -> Self {
        self.sandbox = sandbox
            .filter(crate::sandbox::SandboxPolicy::confines)
            .map(|policy| (policy, workspace.to_path_buf()));
        self
    }

    fn session_dir(&self, id: &str) -> Result<PathBuf, ShellError> {
        validate_id(id)?;
        Ok(self.dir.join(id))
    }

    fn existing(&self, id: &str) -> Result<(PathBuf, SessionMeta), ShellError> {
        let dir = self.session_dir(id)?;
        if !files::meta_path(&dir).is_file() {
            return Err(ShellError::NotFound(id.to_string()));
        }
        let meta = files::read_meta(&dir)?;
        Ok((dir, meta))
    }

    /// Starts a session: its folder, its metadata, its host and process.
    pub fn start(&self, options: &StartOptions) -> Result<SessionMeta, ShellError> {
        let command = options
            .command
            .clone()
            .unwrap_or_else(|| DEFAULT_SHELL.to_string());
        if !options.pty && !is_shell(&command) {
            return Err(ShellError::NotAShell(command));
        }
        let id = match &options.id {
            Some(id) => id.clone(),
            None => format!("sess_{}", random_hex(8)),
        };
        let dir = self.session_dir(&id)?;
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ShellError::Io { path, source }
        };
        // Only the user may enter a session's folder: it holds the socket that runs commands as them
        // and the saved environment.
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io(&self.dir))?;
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(ShellError::Exists(id));
            }
            Err(e) => return Err(io(&dir)(e)),
        }
        let control = files::control_path(&dir);
        nix::unistd::mkfifo(&control, nix::sys::stat::Mode::S_IRWXU).map_err(|e| {
            ShellError::Io {
                path: control.clone(),
                source: e.into(),
            }
        })?;
        let meta = SessionMeta {
            session_id: id,
            command,
            work_dir: options.work_dir.display().to_string(),
            status: SessionStatus::Active,
            created_at: now(),
            last_executed_at: None,
            execution_count: 0,
            pty: options.pty,
            owner_run: options.owner_run.clone(),
        };
        files::write_meta(&dir, &meta)?;
        let _lock = files::lock(&dir)?;
        self.launch_host(&dir, &meta, false)?;
        Ok(meta)
    }

    /// Runs `command` in session `id`; `interrupt` (checked while waiting) gives up on it.
    pub fn exec(
        &self,
        id: &str,
        command: &str,
        timeout: Option<Duration>,
        interrupt: Option<&AtomicBool>,
    ) -> Result<ExecOutput, ShellError> {
        let (dir, meta) = self.existing(id)?;
        if meta.status == SessionStatus::Terminated {
            return Err(ShellError::Terminated(id.to_string()));
        }
        let stream = {
            let _lock = files::lock(&dir)?;
            match self.connect(&dir) {
                Some(stream) => stream,
                None => {
                    self.launch_host(&dir, &meta, true)?;
                    self.connect(&dir).ok_or_else(|| ShellError::HostStart {
                        id: id.to_string(),
                        why: "its socket does not answer".into(),
                    })?
                }
            }
        };
        // The host enforces the timeout on the command; the caller waits a little longer, since the
        // host may first finish another caller's command.
        let wait = timeout.map(|t| t + HOST_STOP);
        let reply = ask(
            id,
            &stream,
            &Request::exec(command, timeout),
            interrupt,
            wait,
        )?;
        if let Some(error) = reply.header.error {
            return Err(ShellError::Protocol(id.to_string(), error));
        }
        {
            let _lock = files::lock(&dir)?;
            let mut meta = files::read_meta(&dir)?;
            meta.execution_count += 1;
            meta.last_executed_at = Some(now());
            files::write_meta(&dir, &meta)?;
        }
        Ok(ExecOutput {
            stdout: reply.stdout,
            stderr: reply.stderr,
            exit_code: reply.header.exit_code,
            timed_out: reply.header.timed_out,
            rebuilt: reply.header.rebuilt,
            dropped: reply.header.dropped,
        })
    }

    /// Ends session `id`: its process stops and it is marked terminated (its folder stays until
    /// [`ShellSessions::cleanup`]).
    pub fn end(&self, id: &str) -> Result<SessionMeta, ShellError> {
        let (dir, _) = self.existing(id)?;
        let _lock = files::lock(&dir)?;
        stop_host(&dir);
        let mut meta = files::read_meta(&dir)?;
        meta.status = SessionStatus::Terminated;
        files::write_meta(&dir, &meta)?;
        Ok(meta)
    }

    /// Every session of the folder, oldest first, with whether its process is alive.
    pub fn list(&self) -> Result<Vec<(SessionMeta, bool)>, ShellError> {
        let mut sessions = Vec::new();
        for dir in self.session_dirs()? {
            if let Ok(meta) = files::read_meta(&dir) {
                let alive = host_alive(&dir);
                sessions.push((meta, alive));
            }
        }
        sessions.sort_by(|a, b| a.0.created_at.cmp(&b.0.created_at));
        Ok(sessions)
    }

    /// Removes the folders of terminated sessions and of those whose metadata is unreadable;
    /// returns their ids.
    pub fn cleanup(&self) -> Result<Vec<String>, ShellError> {
        let mut cleaned = Vec::new();
        for dir in self.session_dirs()? {
            let remove = match files::read_meta(&dir) {
                Ok(meta) => meta.status == SessionStatus::Terminated,
                Err(_) => true,
            };
            if remove {
                stop_host(&dir);
                std::fs::remove_dir_all(&dir).map_err(|source| ShellError::Io {
                    path: dir.clone(),
                    source,
                })?;
                cleaned.push(file_name(&dir));
            }
        }
        cleaned.sort();
        Ok(cleaned)
    }

    /// Stops the processes of the active sessions `run_id` owns, keeping their saved state (a later
    /// command rebuilds them); returns their ids.
    pub fn stop_owned(&self, run_id: &str) -> Result<Vec<String>, ShellError> {
        let mut stopped = Vec::new();
        for dir in self.session_dirs()? {
            let Ok(meta) = files::read_meta(&dir) else {
                continue;
            };
            if meta.owner_run.as_deref() == Some(run_id) && host_alive(&dir) {
                let _lock = files::lock(&dir)?;
                stop_host(&dir);
                stopped.push(meta.session_id);
            }
        }
        stopped.sort();
        Ok(stopped)
    }

    fn session_dirs(&self) -> Result<Vec<PathBuf>, ShellError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(ShellError::Io {
                    path: self.dir.clone(),
                    source,
                });
            }
        };
        Ok(entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir() && validate_id(&file_name(p)).is_ok())
            .collect())
    }

    /// Starts the host of the session in `dir` and waits until it answers. The caller holds the
    /// session's lock.
    fn launch_host(&self, dir: &Path, meta: &SessionMeta, rebuild: bool) -> Result<(), ShellError> {
        stop_host(dir);
        let log = files::log_path(dir);
        // Not through a link, nor into a file with another name (the session's own programs can
        // write its folder): a link there is an error, never a way to append elsewhere.
        let log_file =
            store::atomic::open_own(&log, std::fs::OpenOptions::new().create(true).append(true))
                .and_then(|file| {
                    file.ok_or_else(|| {
                        std::io::Error::other("it is a link, or not a regular file of one name")
                    })
                })
                .map_err(|source| ShellError::Io {
                    path: log.clone(),
                    source,
                })?;
        let mut command = Command::new(&self.host_program);
        command
            .args(["sessions", "__host"])
            .arg(dir)
            .current_dir(dir)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file);
        if rebuild {
            command.arg("--rebuild");
        }
        command.args(self.host_sandbox_args());
        let mut child = command.spawn().map_err(|source| ShellError::Spawn {
            program: self.host_program.display().to_string(),
            source,
        })?;
        let host_pid = child.id() as i32;
        let deadline = Instant::now() + HOST_START;
        loop {
            if let Ok(Some(record)) = files::read_host(dir)
                && record.host.pgid == host_pid
                && UnixStream::connect(&record.socket).is_ok()
            {
                // The host outlives this call; a thread collects it when it ends.
                std::thread::spawn(move || child.wait());
                return Ok(());
            }
            if let Ok(Some(status)) = child.try_wait() {
                let log_text = std::fs::read_to_string(&log).unwrap_or_default();
                let last = log_text.lines().last().unwrap_or("").to_string();
                return Err(ShellError::HostStart {
                    id: meta.session_id.clone(),
                    why: format!("it exited ({status}): {last}"),
                });
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ShellError::HostStart {
                    id: meta.session_id.clone(),
                    why: format!("no answer within {} s", HOST_START.as_secs()),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl ShellSessions {
    /// The arguments that give a host its sandbox.
    fn host_sandbox_args(&self) -> Vec<String> {
        match &self.sandbox {
            Some((policy, workspace)) => vec![
                "--sandbox".into(),
                serde_json::to_string(policy).unwrap_or_default(),
                "--workspace".into(),
                workspace.display().to_string(),
            ],
            None => Vec::new(),
        }
    }

    /// A connection to the session's host, when it answers and, for confined sessions, is one
    /// started for them ([`peer::is_host_for`]): `host.json` and the socket lie in a folder the
    /// session's own programs can write.
    fn connect(&self, dir: &Path) -> Option<UnixStream> {
        let stream = connect(dir)?;
        if self.sandbox.is_none() {
            return Some(stream);
        }
        let mut expected = vec![
            "sessions".to_string(),
            "__host".to_string(),
            dir.display().to_string(),
        ];
        expected.extend(self.host_sandbox_args());
        peer::is_host_for(&stream, &expected).then_some(stream)
    }
}

/// A connection to the session's host, when it answers.
fn connect(dir: &Path) -> Option<UnixStream> {
    let record = files::read_host(dir).ok()??;
    // A host being killed may still accept a connection for a moment, then drop it: a host whose
    // process is dying is gone already.
    if !matches!(group::liveness(&record.host), Liveness::Alive(_)) {
        return None;
    }
    UnixStream::connect(&record.socket).ok()
}

/// Whether the session's host runs.
fn host_alive(dir: &Path) -> bool {
    match files::read_host(dir) {
        Ok(Some(record)) => matches!(group::liveness(&record.host), Liveness::Alive(_)),
        _ => false,
    }
}

/// Sends `request` and waits for the reply, giving up when `interrupt` is set or `wait` has passed
/// (the host may be busy with another caller's command first).
fn ask(
    id: &str,
    stream: &UnixStream,
    request: &Request,
    interrupt: Option<&AtomicBool>,
    wait: Option<Duration>,
) -> Result<Reply, ShellError> {
    let host = |source| ShellError::Host {
        id: id.to_string(),
        source,
    };
    let mut line = serde_json::to_vec(request)
        .map_err(|e| ShellError::Protocol(id.to_string(), e.to_string()))?;
    line.push(b'\n');
    (&mut &*stream).write_all(&line).map_err(host)?;
    // Wake up now and then to look at the flag and the clock.
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(host)?;
    let mut reader = BufReader::new(PatientRead {
        stream,
        interrupt,
        until: wait.map(|w| Instant::now() + w),
    });
    Reply::read_from(&mut reader).map_err(|e| match e.kind() {
        _ if interrupt.is_some_and(|f| f.load(Ordering::SeqCst)) => {
            ShellError::Interrupted(id.to_string())
        }
        std::io::ErrorKind::TimedOut => ShellError::Busy {
            id: id.to_string(),
            waited: wait.unwrap_or_default(),
        },
        _ => host(e),
    })
}

/// Reads a stream whose reads time out, trying again until data comes, the interrupt flag is set,
/// or the time is up.
struct PatientRead<'a> {
    stream: &'a UnixStream,
    interrupt: Option<&'a AtomicBool>,
    until: Option<Instant>,
}

impl std::io::Read for PatientRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match std::io::Read::read(&mut &*self.stream, buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    // Not `ErrorKind::Interrupted`: buffered readers retry on that.
                    if self.interrupt.is_some_and(|f| f.load(Ordering::SeqCst)) {
                        return Err(std::io::Error::other("interrupted"));
                    }
                    if self.until.is_some_and(|u| Instant::now() >= u) {
                        return Err(std::io::ErrorKind::TimedOut.into());
                    }
                }
                other => return other,
            }
        }
    }
}

/// Stops the host of the session in `dir` and its process: asked first, killed if it does not go.
fn stop_host(dir: &Path) {
    let Ok(Some(record)) = files::read_host(dir) else {
        return;
    };
    // `host.json` may have been written by the session's own programs: nothing it names is asked
    // or stopped unless it is this session's host (or a process of the host's session).
    if files::is_host_socket(dir, &record.socket)
        && let Ok(stream) = UnixStream::connect(&record.socket)
    {
        let _ = stream.set_read_timeout(Some(HOST_STOP));
        let _ = ask("", &stream, &Request::Stop, None, Some(HOST_STOP));
    }
    let host = record.host.pgid;
    if peer::is_host_of(host, dir) {
        group::stop(&record.host, Duration::from_millis(500));
    }
    if let Some(process) = record
        .process
        .as_ref()
        .filter(|p| peer::session_of(p.pgid) == Some(host))
    {
        group::stop(process, Duration::from_millis(500));
    }
    // `host.json` may have been written by the session's own programs: only a socket where a host
    // puts one (its folder, or this user's private folder under /tmp) is removed.
    if files::is_host_socket(dir, &record.socket) {
        let _ = std::fs::remove_file(&record.socket);
    }
    let _ = std::fs::remove_file(files::host_path(dir));
}

/// Checks a session id before it names a folder.
pub fn validate_id(id: &str) -> Result<(), ShellError> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(ShellError::BadId(id.to_string()))
    }
}

/// The program that hosts sessions: `$DELTA_SESSION_HOST` where set (a program embedding delta's
/// library names a delta binary there), else this executable.
pub fn host_program() -> PathBuf {
    std::env::var_os("DELTA_SESSION_HOST")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("delta"))
}

/// Whether `command` names a shell a session drives without a terminal.
pub fn is_shell(command: &str) -> bool {
    let program = command.split_whitespace().next().unwrap_or("");
    let name = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    SHELLS.contains(&name)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

/// `len` random hexadecimal digits.
pub fn random_hex(len: usize) -> String {
    let mut text = String::new();
    while text.len() < len {
        text.push_str(&uuid::Uuid::new_v4().simple().to_string());
    }
    text.truncate(len);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked_before_they_name_a_folder() {
        for good in ["sess_0a1b2c3d", "build", "a.b-c_d"] {
            assert!(validate_id(good).is_ok(), "{good}");
        }
        for bad in ["", "../x", ".hidden", "a/b", "x y", &"a".repeat(65)] {
            assert!(validate_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn saved_state_keeps_only_what_commands_changed() {
        let base = vec![
            ("HOME".to_string(), "/root".to_string()),
            ("DELTA_API_KEY".to_string(), "secret".to_string()),
            ("GONE".to_string(), "x".to_string()),
        ];
        let snapshot: BTreeMap<String, String> =
            [("HOME", "/root"), ("DELTA_API_KEY", "secret"), ("NEW", "1")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let state = StateFile::diff(&base, &SavedState::from_snapshot("/w".into(), snapshot));
        assert_eq!(state.env.len(), 1, "{state:?}");
        assert_eq!(state.unset, vec!["GONE".to_string()]);
        let env = state.apply(&base);
        assert!(env.contains(&("NEW".into(), "1".into())));
        assert!(!env.iter().any(|(k, _)| k == "GONE"));
    }
}
