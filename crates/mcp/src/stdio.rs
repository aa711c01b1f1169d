//! The stdio transport: newline-delimited JSON-RPC on a child's stdin and stdout.
//!
//! A reader thread owns the child's stdout. It answers the server's requests itself, notes its
//! notifications in [`Flags`], skips lines that are not JSON (servers that log to stdout), and passes
//! responses to the waiting request over a channel. A line longer than [`MAX_MESSAGE`] fails the
//! waiting request with [`McpError::TooLarge`] as soon as it goes past the limit; the reader drops
//! what it holds of it and reads the rest to its end without keeping it, and the connection goes on. When stdout ends the channel closes, and every waiting or later request
//! fails with [`McpError::Closed`].
//!
//! A writer thread owns the child's stdin, so that a server that stops reading blocks that thread
//! only: the client queues its messages and waits for answers with its deadline, and gives up when
//! it passes. At most [`MAX_QUEUED`] messages wait to be written; the answers to the server's own
//! requests are queued only while fewer than [`MAX_QUEUED_ANSWERS`] wait (a server that floods
//! pings and reads nothing gets no more answers).

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::process::{Child, ChildStdin, ChildStdout};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::jsonrpc::{self, Flags};
use crate::{MAX_MESSAGE, McpError};

/// How long `close` waits for the server to exit once its stdin is closed, before killing it.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// How often a request in progress looks at its caller's cancel flag (and at a full queue).
const CANCEL_POLL: Duration = Duration::from_millis(20);
/// How long a request that found stdout closed waits for the child's exit status.
const EXIT_WAIT: Duration = Duration::from_millis(500);
/// The most messages waiting to be written to the child's stdin.
const MAX_QUEUED: usize = 64;
/// The most messages waiting before the answer to a server's request is dropped instead of queued.
const MAX_QUEUED_ANSWERS: usize = 16;
/// The reader's buffer, and the capacity its line buffer keeps between lines (a large message's is
/// let go).
const KEPT_CAPACITY: usize = 64 * 1024;

/// What the reader thread passes to the waiting request.
enum Received {
    /// A response: its `id` and the whole message.
    Response(Value, Value),
    /// A line went past [`MAX_MESSAGE`] bytes: it is dropped (skipped to its end).
    Cut,
}

/// What the writer thread is given.
enum Outgoing {
    /// One message, newline included.
    Line(Vec<u8>),
    /// Close the child's stdin (once what was queued before is written).
    Close,
}

/// The writer thread's queue: its sending side, and how many lines wait in it or are being written.
#[derive(Clone)]
struct Outbox {
    lines: Sender<Outgoing>,
    waiting: Arc<AtomicUsize>,
}

/// Why a message was not queued.
enum Unqueued {
    /// The queue stayed full until the deadline: the server is not reading its stdin.
    Full,
    /// The caller's cancel flag was raised.
    Cancelled,
    /// The writer has ended: the child's stdin is closed.
    Closed,
}

/// A connection to a server running as a child process.
pub(crate) struct Stdio {
    child: Child,
    outbox: Outbox,
    responses: Receiver<Received>,
}

impl Stdio {
    /// Starts writing to `child`'s stdin and reading its stdout; the child is killed if that cannot
    /// start.
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
        let (outbox, lines) = Outbox::new();
        let (sender, responses) = mpsc::channel();
        let waiting = Arc::clone(&outbox.waiting);
        let writer = std::thread::Builder::new()
            .name(format!("mcp-stdin-{pid}"))
            .spawn(move || write_loop(stdin, &lines, &waiting));
        let answers = outbox.clone();
        let reader = writer.and_then(|_| {
            std::thread::Builder::new()
                .name(format!("mcp-stdio-{pid}"))
                .spawn(move || read_loop(stdout, &answers, &flags, &sender))
        });
        if let Err(e) = reader {
            outbox.close();
            reap(&mut child);
            return Err(McpError::io(
                format!("starting the reader and writer of MCP server pid {pid}"),
                e,
            ));
        }
        Ok(Self {
            child,
            outbox,
            responses,
        })
    }

    /// The child's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one message, waiting up to `wait` while the queue is full (no wait: at most one try).
    pub(crate) fn send(&mut self, message: &Value, wait: Duration) -> Result<(), McpError> {
        match self.queue(message, Instant::now() + wait, None) {
            Ok(()) => Ok(()),
            Err(Unqueued::Closed) => Err(self.closed()),
            Err(Unqueued::Full | Unqueued::Cancelled) => Err(McpError::io(
                format!("writing to the MCP server's stdin (pid {})", self.pid()),
                std::io::Error::new(
                    ErrorKind::TimedOut,
                    format!(
                        "the server read none of the {MAX_QUEUED} messages waiting for it in {wait:?}"
                    ),
                ),
            )),
        }
    }

    /// Sends request `id` and waits up to `timeout` for its response (the whole message), the time
    /// its queueing took included. Answers and cut lines that came before it was sent are
    /// forgotten; late answers to earlier requests that timed out are skipped.
    pub(crate) fn request(
        &mut self,
        id: u64,
        message: &Value,
        timeout: Duration,
        cancel: Option<&AtomicBool>,
    ) -> Result<Value, McpError> {
        let deadline = Instant::now() + timeout;
        while self.responses.try_recv().is_ok() {}
        match self.queue(message, deadline, cancel) {
            Ok(()) => self.answer(id, message, deadline, timeout, cancel),
            Err(Unqueued::Full) => Err(timed_out(message, timeout)),
            Err(Unqueued::Cancelled) => Err(cancelled(message)),
            Err(Unqueued::Closed) => Err(self.closed()),
        }
    }

    /// Waits until `deadline` for the response to request `id`.
    fn answer(
        &mut self,
        id: u64,
        message: &Value,
        deadline: Instant,
        timeout: Duration,
        cancel: Option<&AtomicBool>,
    ) -> Result<Value, McpError> {
        loop {
            if is_raised(cancel) {
                return Err(cancelled(message));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.responses.recv_timeout(left.min(CANCEL_POLL)) {
                Ok(Received::Response(answered, message))
                    if jsonrpc::is_answer_to(&answered, id) =>
                {
                    return Ok(message);
                }
                Ok(Received::Response(..)) => {}
                Ok(Received::Cut) => {
                    return Err(McpError::TooLarge {
                        method: method_of(message),
                        limit: MAX_MESSAGE,
                    });
                }
                Err(RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                Err(RecvTimeoutError::Timeout) => return Err(timed_out(message, timeout)),
                Err(RecvTimeoutError::Disconnected) => return Err(self.closed()),
            }
        }
    }

    /// Queues `message` for the writer; while [`MAX_QUEUED`] messages wait already (the server is
    /// not reading), tries again until `deadline`, or until `cancel` is raised.
    fn queue(
        &self,
        message: &Value,
        deadline: Instant,
        cancel: Option<&AtomicBool>,
    ) -> Result<(), Unqueued> {
        let line = line_of(message);
        loop {
            match self.outbox.offer(&line, MAX_QUEUED) {
                Err(Unqueued::Full) => {}
                queued => return queued,
            }
            if is_raised(cancel) {
                return Err(Unqueued::Cancelled);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Unqueued::Full);
            }
            std::thread::sleep(left.min(CANCEL_POLL));
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

    /// Closes the child's stdin (once what is queued is written), gives it [`CLOSE_GRACE`] to exit,
    /// then kills it.
    pub(crate) fn close(mut self) {
        self.outbox.close();
        let deadline = Instant::now() + CLOSE_GRACE;
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        // Drop kills and reaps it if it is still running.
    }
}

impl Drop for Stdio {
    fn drop(&mut self) {
        self.outbox.close();
        // A writer blocked on a full pipe gets its error once the child is gone.
        reap(&mut self.child);
    }
}

impl Outbox {
    /// A queue and the receiving side its writer takes.
    fn new() -> (Self, Receiver<Outgoing>) {
        let (lines, receiver) = mpsc::channel();
        let waiting = Arc::new(AtomicUsize::new(0));
        (Self { lines, waiting }, receiver)
    }

    /// Queues `line` unless `limit` lines wait already ([`Unqueued::Full`]) or the writer has ended
    /// ([`Unqueued::Closed`]).
    fn offer(&self, line: &[u8], limit: usize) -> Result<(), Unqueued> {
        let room = self
            .waiting
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            });
        if room.is_err() {
            return Err(Unqueued::Full);
        }
        let sent = self.lines.send(Outgoing::Line(line.to_vec()));
        sent.map_err(|_| {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            Unqueued::Closed
        })
    }

    /// Asks the writer to close the child's stdin once what was queued before is written.
    fn close(&self) {
        // The writer has ended already if this fails: stdin is closed.
        let _ = self.lines.send(Outgoing::Close);
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

/// The [`McpError::Cancelled`] of `message`.
fn cancelled(message: &Value) -> McpError {
    McpError::Cancelled {
        method: method_of(message),
    }
}

/// Whether the caller's cancel flag is raised.
fn is_raised(cancel: Option<&AtomicBool>) -> bool {
    cancel.is_some_and(|c| c.load(Ordering::SeqCst))
}

/// The method of a request.
fn method_of(message: &Value) -> String {
    message
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or("(unknown)")
        .to_string()
}

/// `message` as one line, newline included.
fn line_of(message: &Value) -> Vec<u8> {
    let mut line = message.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// The writer thread: writes the queued lines to the child's stdin until it is closed, a write
/// fails (the child is gone) or the client is gone; stdin closes when it returns.
fn write_loop(mut stdin: ChildStdin, lines: &Receiver<Outgoing>, waiting: &AtomicUsize) {
    for outgoing in lines {
        let Outgoing::Line(line) = outgoing else {
            return;
        };
        if stdin.write_all(&line).and_then(|()| stdin.flush()).is_err() {
            return;
        }
        waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The reader thread: reads messages until stdout ends or the client is gone. A line over
/// [`MAX_MESSAGE`] is reported to the waiting request as soon as it is, then skipped to its end.
fn read_loop(stdout: ChildStdout, answers: &Outbox, flags: &Flags, responses: &Sender<Received>) {
    let mut reader = BufReader::with_capacity(KEPT_CAPACITY, stdout);
    let mut line = Vec::new();
    loop {
        let (received, too_long) = match next_line(&mut reader, &mut line, MAX_MESSAGE) {
            Ok(Line::End) | Err(_) => return,
            Ok(Line::TooLong) => (vec![Received::Cut], true),
            Ok(Line::Whole) => (handle(&line, answers, flags), false),
        };
        line.shrink_to(KEPT_CAPACITY);
        for received in received {
            if responses.send(received).is_err() {
                return;
            }
        }
        if too_long && skip_line(&mut reader).is_err() {
            return;
        }
    }
}

/// Handles one line: answers the server's requests (dropped while the queue holds
/// [`MAX_QUEUED_ANSWERS`]), notes its notifications; the responses it holds.
fn handle(line: &[u8], answers: &Outbox, flags: &Flags) -> Vec<Received> {
    let Ok(text) = std::str::from_utf8(line) else {
        return Vec::new();
    };
    // A failed answer means stdin is closed or not read; the end of stdout, or a timeout, follows.
    let reply = |answer: &Value| drop(answers.offer(&line_of(answer), MAX_QUEUED_ANSWERS));
    let responses = jsonrpc::handle(text.trim(), flags, reply);
    let responses = responses.into_iter();
    responses.map(|(id, m)| Received::Response(id, m)).collect()
}

/// What [`next_line`] read.
#[derive(Debug, PartialEq)]
enum Line {
    /// A line of at most the limit (its newline not counted), in the buffer.
    Whole,
    /// A line that goes past the limit: what was read of it is dropped, the rest is left unread
    /// (for [`skip_line`]).
    TooLong,
    /// The end of the input.
    End,
}

/// Reads the next line into `line` (emptied first), newline included, holding at most `limit` bytes
/// of it.
fn next_line(reader: &mut impl BufRead, line: &mut Vec<u8>, limit: usize) -> std::io::Result<Line> {
    line.clear();
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(if line.is_empty() {
                Line::End
            } else {
                Line::Whole
            });
        }
        let newline = buf.iter().position(|&b| b == b'\n');
        let taken = newline.map_or(buf.len(), |at| at + 1);
        let content = taken - usize::from(newline.is_some());
        if line.len() + content > limit {
            *line = Vec::new();
            return Ok(Line::TooLong);
        }
        line.extend_from_slice(&buf[..taken]);
        reader.consume(taken);
        if newline.is_some() {
            return Ok(Line::Whole);
        }
    }
}

/// Skips the rest of a line, a buffer at a time (nothing of it is kept); also for the server side.
pub(crate) fn skip_line(input: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|b| *b == b'\n') {
            Some(at) => {
                input.consume(at + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                input.consume(n);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_line_over_the_limit_is_reported_at_once_and_skipped_to_its_end() {
        let input = b"12345678\n123456789\nshort\n1234567890abcdef";
        // A buffer smaller than a line: the limit holds across reads.
        let mut reader = BufReader::with_capacity(4, &input[..]);
        let mut line = Vec::new();
        let mut next = || {
            let read = next_line(&mut reader, &mut line, 8).unwrap();
            let text = String::from_utf8(line.clone()).unwrap();
            if read == Line::TooLong {
                skip_line(&mut reader).unwrap();
            }
            (read, text)
        };
        assert_eq!(next(), (Line::Whole, "12345678\n".into()), "the limit fits");
        assert_eq!(next(), (Line::TooLong, String::new()));
        assert_eq!(next(), (Line::Whole, "short\n".into()));
        assert_eq!(
            next(),
            (Line::TooLong, String::new()),
            "an unended last line"
        );
        assert_eq!(next(), (Line::End, String::new()));
    }
}
