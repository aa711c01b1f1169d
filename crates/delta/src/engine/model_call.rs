//! Calling the model: on a worker thread, so that SIGINT is noticed while waiting; with the model's
//! text reported as it arrives where that is asked for ([`EngineSetup::stream_text`]) and the server
//! can stream; and with a tick each second of the wait ([`Progress::Waiting`]).
//!
//! Streamed text is passed on in pieces that end at a blank (the rest is held back until more comes
//! or the answer is complete), so that a secret the redaction must hide never straddles two pieces.
//! A server that closes a streamed request without sending anything (llama.cpp's does, with tools)
//! is asked again without streaming, and is not streamed to for the rest of the run.
//!
//! [`EngineSetup::stream_text`]: super::EngineSetup::stream_text

use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use llm::{ChatRequest, ChatResponse, LlmClient, LlmError, StreamEvent};

use super::{Engine, Observer, Progress};

/// How often the wait looks at the interrupt flag.
const POLL: Duration = Duration::from_millis(25);
/// How often a wait is reported.
const TICK: Duration = Duration::from_secs(1);

/// What the worker sends back.
enum Reply {
    /// A piece of the model's text (streaming).
    Text(String),
    /// The answer, or why there is none.
    Done(Result<ChatResponse, LlmError>),
}

/// A request for the worker, whether to stream it, and where to answer.
pub(super) struct Job {
    request: Arc<ChatRequest>,
    stream: bool,
    reply: mpsc::Sender<Reply>,
}

/// Starts the worker thread for `client`.
pub(super) fn worker(client: Arc<dyn LlmClient>) -> mpsc::Sender<Job> {
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::spawn(move || {
        for Job {
            request,
            stream,
            reply,
        } in rx
        {
            let result = if stream {
                let reply = reply.clone();
                client.complete_streaming(&request, &mut |event| {
                    if let StreamEvent::TextDelta(text) = event {
                        let _ = reply.send(Reply::Text(text));
                    }
                })
            } else {
                client.complete(&request)
            };
            // Let go of the request before answering: the engine takes back what it lent to it.
            drop(request);
            let _ = reply.send(Reply::Done(result));
        }
    });
    tx
}

/// Streamed text not passed on yet: what follows the last blank.
#[derive(Default)]
struct HeldBack(String);

impl HeldBack {
    /// Adds `text`; returns what can be passed on (up to and including the last blank).
    fn push(&mut self, text: &str) -> Option<String> {
        self.0.push_str(text);
        let cut = self.0.rfind(char::is_whitespace)?;
        let end = cut + self.0[cut..].chars().next().map_or(1, char::len_utf8);
        let rest = self.0.split_off(end);
        Some(std::mem::replace(&mut self.0, rest))
    }

    fn rest(&mut self) -> Option<String> {
        Some(std::mem::take(&mut self.0)).filter(|s| !s.is_empty())
    }
}

fn worker_gone(message: &str) -> LlmError {
    LlmError::Transport {
        url: String::new(),
        message: message.into(),
    }
}

impl Engine<'_> {
    /// Calls the model; `None` when the run was interrupted meanwhile.
    pub(super) fn call_llm(
        &mut self,
        request: &Arc<ChatRequest>,
    ) -> Option<Result<ChatResponse, LlmError>> {
        if self.interrupted() {
            return None;
        }
        if let Err(e) = self.sync() {
            return Some(Err(LlmError::Recording(format!(
                "cannot flush the journal: {e}"
            ))));
        }
        let stream = self.setup.stream_text && !self.no_streaming;
        match self.wait_for_answer(request, stream)? {
            // Nothing came before the stream ended: this server does not stream such requests.
            (Err(LlmError::IncompleteStream { .. }), false) if stream => {
                self.no_streaming = true;
                self.log("The server sent nothing on a streamed request; asking without streaming");
                self.wait_for_answer(request, false)
                    .map(|(result, _)| result)
            }
            (result, _) => Some(result),
        }
    }

    /// Sends `request` to the worker and waits: the result, and whether any text was streamed.
    fn wait_for_answer(
        &mut self,
        request: &Arc<ChatRequest>,
        stream: bool,
    ) -> Option<(Result<ChatResponse, LlmError>, bool)> {
        let setup = &self.setup;
        let worker = self
            .llm_worker
            .get_or_insert_with(|| worker(Arc::clone(&setup.client)));
        let (reply, replies) = mpsc::channel();
        let job = Job {
            request: Arc::clone(request),
            stream,
            reply,
        };
        if worker.send(job).is_err() {
            return Some((Err(worker_gone("the LLM worker thread stopped")), false));
        }
        let started = Instant::now();
        let mut ticks = 0u64;
        let mut held = HeldBack::default();
        let mut streamed = false;
        loop {
            match replies.recv_timeout(POLL) {
                Ok(Reply::Text(text)) => {
                    streamed = true;
                    if let Some(piece) = held.push(&text) {
                        self.observer.progress(Progress::TextDelta(piece));
                    }
                }
                Ok(Reply::Done(result)) => {
                    if let Some(rest) = held.rest().filter(|_| result.is_ok()) {
                        self.observer.progress(Progress::TextDelta(rest));
                    }
                    return Some((result, streamed));
                }
                Err(mpsc::RecvTimeoutError::Timeout) if self.interrupted() => return None,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let seconds = started.elapsed().as_secs();
                    if !streamed && seconds > ticks && started.elapsed() >= TICK {
                        ticks = seconds;
                        self.observer.progress(Progress::Waiting { seconds });
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let gone = worker_gone("the request thread ended without an answer");
                    return Some((Err(gone), streamed));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_text_is_passed_on_in_pieces_that_end_at_a_blank() {
        let mut held = HeldBack::default();
        assert_eq!(held.push("sk-abc"), None);
        assert_eq!(held.push("def and"), Some("sk-abcdef ".into()));
        assert_eq!(held.push(" more\nlines é"), Some("and more\nlines ".into()));
        assert_eq!(held.rest(), Some("é".into()));
        assert_eq!(held.rest(), None);
    }
}
