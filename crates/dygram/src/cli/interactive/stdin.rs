//! Input on stdin: the answer to the request a call reaches (manual mode), or refused with a
//! message; never dropped silently.
//!
//! Standard input is read on a thread from the start of the call, and the call decides by a fixed
//! rule whether input was given:
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

use std::io::{IsTerminal, Read};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError, sync_channel};
use std::time::{Duration, Instant};

use llm::ChatResponse;

use dygram::runtime::executor::{Event, Executor};
use dygram::session::ClientConfig;
use llm::SourceKind;
use llm::answer::parse_answer;

use super::super::CliError;

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

/// Standard input, as read so far.
pub struct Stdin {
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

impl Stdin {
    /// Starts reading standard input, unless it is a terminal or already the machine (`-`).
    pub fn start(is_machine: bool) -> Self {
        let mut s = Self {
            rx: None,
            started: Instant::now(),
            bytes: Vec::new(),
            ended: true,
            error: None,
            used: false,
            found_none: false,
        };
        if is_machine || std::io::stdin().is_terminal() {
            return s;
        }
        let (tx, rx) = sync_channel(AHEAD);
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; CHUNK];
            loop {
                match stdin.read(&mut buf) {
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

    /// The answer given on stdin, parsed; `None` when none was given (see [`Stdin::given`]). Once
    /// taken, the input counts as used.
    pub fn answer(&mut self) -> Result<Option<ChatResponse>, CliError> {
        let given = self.given();
        if let Some(e) = &self.error {
            return Err(CliError::new(format!("cannot read standard input: {e}")));
        }
        if !given {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&self.bytes).into_owned();
        let answer = parse_answer(&text).map_err(|e| {
            CliError::new(format!("Failed to parse response: {e}")).hint(
                "answer with plain text, {\"response\": \"…\", \"tools\": [{\"name\": \"…\", \"input\": {…}}]}, or {\"type\": \"llm_response\", \"response\": {\"content\": […]}}; nothing was changed",
            )
        })?;
        self.used = true;
        Ok(Some(answer))
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

/// The error for input a call cannot use: `why` says what the call does instead.
pub fn refused(why: &str, hint: &str) -> CliError {
    CliError::new(format!(
        "input was given on stdin, but {why}; it was not used, and nothing was changed"
    ))
    .hint(hint.to_string())
}

/// Input on stdin for an execution whose answers come from elsewhere.
pub fn refused_for_source(config: &ClientConfig) -> CliError {
    let source = match config.kind {
        SourceKind::Playback => format!(
            "this execution replays the recordings in {}",
            config.playback_dir.as_deref().unwrap_or("?")
        ),
        SourceKind::Queue => "this execution takes its answers from the file queue".to_string(),
        _ => format!("this execution asks the {} API", config.provider()),
    };
    refused(
        &source,
        "leave the input out; answers on stdin are for executions in manual mode (no API key, no --playback, no --queue)",
    )
}

/// Input on stdin that arrived after the call had looked for it and found none.
pub fn refused_late(config: &ClientConfig) -> CliError {
    let why = format!(
        "input arrived on stdin while this call was working, after it had looked for input (input counts when it starts within {} ms of the call's start); it was not used, and nothing was changed",
        GRACE.as_millis()
    );
    let hint = if config.kind == SourceKind::Manual {
        "run the call again with the input ready at its start (e.g. write the answer to a file and use `< answer.json`)".to_string()
    } else {
        format!(
            "answers on stdin are for executions in manual mode; run the call again without input{}",
            if config.kind == SourceKind::Queue {
                " (the queue's answer was not used either: the next call asks the queue again)"
            } else {
                ""
            }
        )
    };
    CliError::new(why).hint(hint)
}

/// Input on stdin for a call that does not reach a request for an answer.
pub fn refused_without_request(events: &[Event]) -> CliError {
    let did = events
        .iter()
        .find_map(|e| match e {
            Event::Transition { from, to, .. } => Some(format!(" ({from} -> {to})")),
            Event::Completed { node, .. } => Some(format!(" (completing at {node})")),
            _ => None,
        })
        .unwrap_or_default();
    refused(
        &format!(
            "this call does not reach a request for an answer: it takes an automatic step{did}"
        ),
        "run this call without input, and answer when a call shows a request (exit code 3)",
    )
}

/// Refuses a manual answer that would fail the execution for good (no tool call while every
/// transition is closed): the person can answer again, with the example's kind of answer.
pub fn check_answer(executor: &Executor<'_>, answer: &llm::ChatResponse) -> Result<(), CliError> {
    let Some(error) = executor.answer_would_fail(answer) else {
        return Ok(());
    };
    let node = executor
        .state()
        .turn_state
        .as_ref()
        .map(|t| t.node_name.clone())
        .unwrap_or_default();
    Err(CliError::new(format!(
        "this answer calls no tool, and no transition of {node} is open, so it would end the execution with an error ({error}); it was not used, and nothing was changed"
    ))
    .hint(format!(
        "answer with a tool call, e.g. {}",
        executor.example_answer()
    )))
}
