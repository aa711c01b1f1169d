//! Manual answers: input given to a call (in the `dygram` binary, its standard input) is the answer
//! to the request the call reaches, or refused with a message; never dropped silently.
//!
//! The input is read on a thread from the start of the call, and the call decides by a fixed rule
//! whether input was given:
//!
//! - input is given when its first byte arrives within [`GRACE`] of the call's start (or before the
//!   call first looks, when that is later); given input is then read to its end;
//! - just before the call commits it looks again, without waiting (beyond the grace) and without
//!   reading the input to its end: input that has arrived by then and was not used is refused, and
//!   nothing is committed;
//! - a call that ends with its standard input still open and nothing read from it says so, since
//!   what arrives later is never read.
//!
//! So an open pipe nobody writes to costs a call at most [`GRACE`] of waiting.

use std::io::Read;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError, sync_channel};
use std::time::{Duration, Instant};

use llm::ChatResponse;

use super::call::CallError;
use llm::answer::parse_answer;

/// How long after its start a call waits for input that may be on its way.
pub const GRACE: Duration = Duration::from_millis(150);

/// The most input read from stdin (an answer is a few kilobytes; this stops a runaway writer).
const MAX_INPUT: usize = 64 * 1024 * 1024;

/// Size of one read from stdin.
const CHUNK: usize = 64 * 1024;

/// Chunks the reading thread may get ahead of the call (so input nobody takes costs at most
/// this much memory; the thread then waits).
const AHEAD: usize = 16;

enum Chunk {
    Data(Vec<u8>),
    End,
    Failed(String),
}

/// The input of a call, as read so far.
pub struct ManualInput {
    rx: Option<Receiver<Chunk>>,
    /// When the call started: the grace counts from here.
    started: Instant,
    bytes: Vec<u8>,
    ended: bool,
    error: Option<String>,
    /// Whether the input became this call's answer.
    used: bool,
    /// Whether a look found no input (so input found later arrived late).
    found_none: bool,
}

impl ManualInput {
    /// A call without input (a terminal, or standard input already taken by the machine).
    pub fn none() -> Self {
        Self {
            rx: None,
            started: Instant::now(),
            bytes: Vec::new(),
            ended: true,
            error: None,
            used: false,
            found_none: false,
        }
    }

    /// Starts reading `reader` (e.g. standard input) on a thread; the grace counts from now.
    pub fn start(mut reader: impl Read + Send + 'static) -> Self {
        let mut s = Self::none();
        let (tx, rx) = sync_channel(AHEAD);
        std::thread::spawn(move || {
            let mut buf = vec![0u8; CHUNK];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) => {
                        let _ = tx.send(Chunk::End);
                        return;
                    }
                    Ok(n) => {
                        if tx.send(Chunk::Data(buf[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let _ = tx.send(Chunk::Failed(e.to_string()));
                        return;
                    }
                }
            }
        });
        s.rx = Some(rx);
        s.ended = false;
        s
    }

    /// Takes what arrived until `deadline` (`None`: until the end of the input), stopping at the
    /// first bytes when there is a deadline.
    fn pump(&mut self, deadline: Option<Instant>) {
        while !self.ended {
            let Some(rx) = &self.rx else {
                return;
            };
            let chunk = match deadline {
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(d) => rx.recv_timeout(d.saturating_duration_since(Instant::now())),
            };
            match chunk {
                Ok(chunk) => self.take(chunk),
                Err(RecvTimeoutError::Disconnected) => self.ended = true,
                Err(RecvTimeoutError::Timeout) => return,
            }
            if deadline.is_some() && !self.bytes.is_empty() {
                return;
            }
        }
    }

    /// Takes the chunks that have arrived by now, without waiting for more.
    fn take_arrived(&mut self) {
        while !self.ended {
            let Some(rx) = &self.rx else {
                return;
            };
            match rx.try_recv() {
                Ok(chunk) => self.take(chunk),
                Err(TryRecvError::Disconnected) => self.ended = true,
                Err(TryRecvError::Empty) => return,
            }
        }
    }

    fn take(&mut self, chunk: Chunk) {
        match chunk {
            Chunk::Data(b) => {
                self.bytes.extend(b);
                if self.bytes.len() > MAX_INPUT {
                    self.error = Some(format!(
                        "the input is larger than {} MB",
                        MAX_INPUT / (1024 * 1024)
                    ));
                    self.ended = true;
                    // Nothing more is read: the reading thread stops at its next chunk.
                    self.rx = None;
                }
            }
            Chunk::End => self.ended = true,
            Chunk::Failed(e) => {
                self.error = Some(e);
                self.ended = true;
            }
        }
    }

    fn has_text(&self) -> bool {
        self.bytes.iter().any(|b| !b.is_ascii_whitespace())
    }

    /// Whether input was given (anything but whitespace): waits for a first byte until the grace
    /// has passed since the call started (not at all later on); once a byte arrived, reads the
    /// input to its end.
    pub fn given(&mut self) -> bool {
        if !self.ended {
            self.pump(Some(self.started + GRACE));
            if !self.bytes.is_empty() {
                self.pump(None);
            }
        }
        let given = self.has_text();
        if !given {
            self.found_none = true;
        }
        given
    }

    /// The answer given, parsed; `None` when none was given (see [`ManualInput::given`]). Once
    /// taken, the input counts as used.
    pub fn answer<E>(&mut self) -> Result<Option<ChatResponse>, CallError<E>> {
        let Some(text) = self.given_text()? else {
            return Ok(None);
        };
        let answer = parse_answer(&text).map_err(CallError::BadAnswer)?;
        self.used = true;
        Ok(Some(answer))
    }

    /// The input given, read to its end (not yet counted as used).
    fn given_text<E>(&mut self) -> Result<Option<String>, CallError<E>> {
        let given = self.given();
        if let Some(e) = &self.error {
            return Err(CallError::InputUnreadable(e.clone()));
        }
        Ok(given.then(|| String::from_utf8_lossy(&self.bytes).into_owned()))
    }

    /// The input given, as text (trimmed), for a question that takes plain text; `None` when
    /// none was given. It counts as used once [`ManualInput::mark_used`] says so.
    pub fn text<E>(&mut self) -> Result<Option<String>, CallError<E>> {
        Ok(self.given_text()?.map(|t| t.trim().to_string()))
    }

    /// Counts the input as used (it reached what it answers).
    pub fn mark_used(&mut self) {
        self.used = true;
    }

    /// Whether input was given that this call did not use, looked at just before the commit. This
    /// look waits for nothing but the rest of the grace (when the call is that quick): whatever
    /// has arrived by then counts, and the input is not read to its end, since it is refused
    /// either way (a writer that keeps the pipe open cannot hold the call, and the execution's
    /// lock, until it closes it).
    pub fn unused(&mut self) -> bool {
        if self.used {
            return false;
        }
        self.pump(Some(self.started + GRACE));
        self.take_arrived();
        self.has_text()
    }

    /// Whether an earlier look found no input (input there now arrived while the call worked).
    pub fn arrived_late(&self) -> bool {
        self.found_none
    }

    /// What became of standard input at the end of a call, when the user should hear of it: still
    /// open with nothing read from it, or input that arrived after the call's last look (neither
    /// is ever read). Does not wait.
    pub fn at_end(&mut self) -> Option<Unread> {
        if self.rx.is_none() || self.used || self.ended {
            return None;
        }
        let before = self.bytes.len();
        self.take_arrived();
        if self.bytes.len() > before {
            Some(Unread::ArrivedAfterCommit)
        } else if self.bytes.is_empty() && !self.ended {
            Some(Unread::StillOpen)
        } else {
            None
        }
    }
}

/// Standard input a call ends without reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unread {
    /// Open, nothing arrived: what comes later is not read.
    StillOpen,
    /// Input arrived after the call's last look (it had committed its work by then).
    ArrivedAfterCommit,
}

impl Unread {
    /// The note shown on stderr.
    pub fn note(self) -> String {
        match self {
            Self::StillOpen => format!(
                "Note: standard input is still open, and nothing arrived on it within {} ms of the call's start; input that comes later is not read (close stdin, e.g. `< /dev/null`, when there is nothing to answer)",
                GRACE.as_millis()
            ),
            Self::ArrivedAfterCommit => "Warning: input arrived on stdin after this call had saved its work; it was not read (give the answer to the call that shows the request, or to the next one)".to_string(),
        }
    }
}
