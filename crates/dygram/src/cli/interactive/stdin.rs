//! Input on stdin: the answer to the request a call reaches (manual mode), or refused with a
//! message; never dropped silently.
//!
//! Standard input is read on a thread from the start of the call, so a call can tell whether input
//! was given without blocking on a pipe that nobody writes to: it waits at most [`GRACE`] for the
//! first bytes or the end of the input, and only a call that uses the input waits for its end.

use std::io::{IsTerminal, Read};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use llm::ChatResponse;

use dygram::answer::parse_answer;

use super::super::CliError;

/// How long a call waits for input that may be on its way.
pub const GRACE: Duration = Duration::from_millis(150);

enum Chunk {
    Data(Vec<u8>),
    End,
    Failed(String),
}

/// Standard input, as read so far.
pub struct Stdin {
    rx: Option<Receiver<Chunk>>,
    bytes: Vec<u8>,
    ended: bool,
    error: Option<String>,
    /// Whether the input became this call's answer.
    used: bool,
}

impl Stdin {
    /// Starts reading standard input, unless it is a terminal or already the machine (`-`).
    pub fn start(is_machine: bool) -> Self {
        let mut s = Self {
            rx: None,
            bytes: Vec::new(),
            ended: true,
            error: None,
            used: false,
        };
        if is_machine || std::io::stdin().is_terminal() {
            return s;
        }
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; 64 * 1024];
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

    /// Takes what arrived, waiting until `deadline` (`None`: until the end of the input).
    fn pump(&mut self, deadline: Option<Instant>) {
        let Some(rx) = &self.rx else {
            return;
        };
        while !self.ended {
            let chunk = match deadline {
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(d) => rx.recv_timeout(d.saturating_duration_since(Instant::now())),
            };
            match chunk {
                Ok(Chunk::Data(b)) => self.bytes.extend(b),
                Ok(Chunk::End) | Err(RecvTimeoutError::Disconnected) => self.ended = true,
                Ok(Chunk::Failed(e)) => {
                    self.error = Some(e);
                    self.ended = true;
                }
                Err(RecvTimeoutError::Timeout) => return,
            }
            // Enough to know that something was given.
            if deadline.is_some() && self.has_text() {
                return;
            }
        }
    }

    fn has_text(&self) -> bool {
        self.bytes.iter().any(|b| !b.is_ascii_whitespace())
    }

    /// Whether input was given (anything but whitespace), waiting at most `grace` for it.
    pub fn given(&mut self, grace: Duration) -> bool {
        if !self.has_text() {
            self.pump(Some(Instant::now() + grace));
        }
        self.has_text()
    }

    /// The answer given on stdin, read to its end and parsed; `None` when none was given. Once
    /// taken, the input counts as used.
    pub fn answer(&mut self) -> Result<Option<ChatResponse>, CliError> {
        self.pump(None);
        if let Some(e) = &self.error {
            return Err(CliError::new(format!("cannot read standard input: {e}")));
        }
        if !self.has_text() {
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

    /// Whether input was given that this call did not use.
    pub fn unused(&mut self) -> bool {
        !self.used && self.given(GRACE)
    }
}

/// The error for input a call cannot use: `why` says what the call does instead.
pub fn refused(why: &str, hint: &str) -> CliError {
    CliError::new(format!(
        "input was given on stdin, but {why}; it was not used, and nothing was changed"
    ))
    .hint(hint.to_string())
}
