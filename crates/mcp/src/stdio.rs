//! The stdio transport: newline-delimited JSON-RPC on a child's stdin and stdout.
//!
//! A reader thread owns the child's stdout. It answers the server's requests itself (through the
//! shared stdin), notes its notifications in [`Flags`], skips lines that are not JSON (servers that
//! log to stdout), and passes responses to the waiting request over a channel. When stdout ends the
//! channel closes, and every waiting or later request fails with [`McpError::Closed`].

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::process::{Child, ChildStdin, ChildStdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::McpError;
use crate::jsonrpc::{self, Flags};

/// How long `close` waits for the server to exit once its stdin is closed, before killing it.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// How often a request in progress looks at its caller's cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(20);
/// How long a request that found stdout closed waits for the child's exit status.
const EXIT_WAIT: Duration = Duration::from_millis(500);

/// The child's stdin, shared by the client and the reader thread; `None` once closed.
type SharedStdin = Arc<Mutex<Option<ChildStdin>>>;

/// A connection to a server running as a child process.
pub(crate) struct Stdio {
    child: Child,
    stdin: SharedStdin,
    responses: Receiver<(Value, Value)>,
}

impl Stdio {
    /// Starts reading `child`'s stdout; the child is killed if that cannot start.
    pub(crate) fn new(mut child: Child, flags: Flags) -> Result<Self, McpError> {
        let pid = child.id();
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            reap(&mut child);
            return Err(McpError::io(
                format!("connecting to the MCP server (pid {pid})"),
                std::io::Error::new(
                    ErrorKind::InvalidInput,
                    "its stdin and stdout must be piped",
                ),
            ));
        };
        let stdin: SharedStdin = Arc::new(Mutex::new(Some(stdin)));
        let (sender, responses) = mpsc::channel();
        let shared = Arc::clone(&stdin);
        let started = std::thread::Builder::new()
            .name(format!("mcp-stdio-{pid}"))
            .spawn(move || read_loop(stdout, &shared, &flags, &sender));
        if let Err(e) = started {
            reap(&mut child);
            return Err(McpError::io(
                format!("starting the reader of MCP server pid {pid}"),
                e,
            ));
        }
        Ok(Self {
            child,
            stdin,
            responses,
        })
    }

    /// The child's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one message.
    pub(crate) fn send(&mut self, message: &Value) -> Result<(), McpError> {
        match write_line(&self.stdin, message) {
            Ok(()) => Ok(()),
            Err(e) if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::NotConnected) => {
                Err(self.closed())
            }
            Err(e) => Err(McpError::io(
                format!("writing to the MCP server's stdin (pid {})", self.pid()),
                e,
            )),
        }
    }

    /// Sends request `id` and waits up to `timeout` for its response (the whole message). Late
    /// answers to earlier requests that timed out are skipped.
    pub(crate) fn request(
        &mut self,
        id: u64,
        message: &Value,
        timeout: Duration,
        cancel: Option<&AtomicBool>,
    ) -> Result<Value, McpError> {
        self.send(message)?;
        let deadline = Instant::now() + timeout;
        loop {
            if cancel.is_some_and(|c| c.load(Ordering::SeqCst)) {
                return Err(McpError::Cancelled {
                    method: method_of(message),
                });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.responses.recv_timeout(left.min(CANCEL_POLL)) {
                Ok((answered, message)) if jsonrpc::is_answer_to(&answered, id) => {
                    return Ok(message);
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                Err(RecvTimeoutError::Timeout) => return Err(timed_out(message, timeout)),
                Err(RecvTimeoutError::Disconnected) => return Err(self.closed()),
            }
        }
    }

    /// [`McpError::Closed`], with the child's exit status once it has exited.
    fn closed(&mut self) -> McpError {
        let deadline = Instant::now() + EXIT_WAIT;
        let reason = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break format!("its output ended; it exited with {status}"),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Ok(None) => break format!("its output ended; pid {} is still running", self.pid()),
                Err(e) => break format!("its output ended; its status is unknown ({e})"),
            }
        };
        McpError::Closed { reason }
    }

    /// Closes the child's stdin, gives it [`CLOSE_GRACE`] to exit, then kills it.
    pub(crate) fn close(mut self) {
        lock(&self.stdin).take();
        let deadline = Instant::now() + CLOSE_GRACE;
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        // Drop kills and reaps it if it is still running.
    }
}

impl Drop for Stdio {
    fn drop(&mut self) {
        lock(&self.stdin).take();
        reap(&mut self.child);
    }
}

/// Kills `child` unless it has exited, and waits for it.
fn reap(child: &mut Child) {
    if matches!(child.try_wait(), Ok(None)) {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The [`McpError::Timeout`] of `message`.
fn timed_out(message: &Value, after: Duration) -> McpError {
    McpError::Timeout {
        method: method_of(message),
        after,
    }
}

/// The method of a request.
fn method_of(message: &Value) -> String {
    message
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or("(unknown)")
        .to_string()
}

fn lock(stdin: &SharedStdin) -> std::sync::MutexGuard<'_, Option<ChildStdin>> {
    stdin.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Writes `message` as one line.
fn write_line(stdin: &SharedStdin, message: &Value) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    let mut stdin = lock(stdin);
    let pipe = stdin
        .as_mut()
        .ok_or_else(|| std::io::Error::new(ErrorKind::NotConnected, "stdin was closed"))?;
    pipe.write_all(&line)?;
    pipe.flush()
}

/// The reader thread: reads messages until stdout ends or the client is gone.
fn read_loop(
    stdout: ChildStdout,
    stdin: &SharedStdin,
    flags: &Flags,
    responses: &Sender<(Value, Value)>,
) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            continue;
        };
        // A failed answer means stdin is closed; the end of stdout follows.
        let reply = |answer: &Value| drop(write_line(stdin, answer));
        for response in jsonrpc::handle(text.trim(), flags, reply) {
            if responses.send(response).is_err() {
                return;
            }
        }
    }
}
