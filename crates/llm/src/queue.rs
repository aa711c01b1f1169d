//! The file-queue LLM source: requests are written to `.dygram/interactive-queue/requests/`, and
//! a separate responder (a person, an agent, a script) writes the answer to
//! `responses/<request id>.json`. While waiting, `heartbeat.lock` says who is waiting and is
//! rewritten every 2 seconds, so responders can tell a live requester from a dead one.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::LlmClient;
use crate::answer::{AnswerError, parse_answer, request_json};
use crate::error::LlmError;
use crate::secret::Redactor;
use crate::types::{ChatRequest, ChatResponse};

/// How often the response folder is looked at.
const POLL: Duration = Duration::from_millis(100);
/// How often the heartbeat is rewritten.
const HEARTBEAT: Duration = Duration::from_secs(2);
/// How long a response that is not yet valid JSON may stay unchanged before it counts as written
/// (a responder writing it in place, without a rename, may be half-way).
const SETTLE: Duration = Duration::from_secs(1);

/// Errors of the queue.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// A folder of the queue could not be created.
    #[error("cannot create {path}: {source}")]
    Create {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A request file could not be written.
    #[error("recordings: cannot write {}: {source}", path.display())]
    Write {
        /// The request file.
        path: PathBuf,
        /// Why.
        source: Box<store::StoreError>,
    },
    /// The response file holds no answer that can be read.
    #[error(
        "the response to request {id} ({}) cannot be read: {source}; answer with text, {{\"response\", \"tools\"}} or {{\"type\": \"llm_invocation_response\", \"response\": {{\"content\": […]}}}}",
        path.display()
    )]
    Unreadable {
        /// The request.
        id: String,
        /// The response file.
        path: PathBuf,
        /// What is wrong with it.
        source: AnswerError,
    },
    /// Nobody answered in time.
    #[error(
        "Timeout waiting for response to request {id} ({seconds} s); run the call again to ask again"
    )]
    Timeout {
        /// The request.
        id: String,
        /// The time waited.
        seconds: u64,
    },
}

/// A client that asks through files.
pub struct QueueClient {
    dir: PathBuf,
    timeout: Duration,
    /// Prefix of request ids (the execution id).
    prefix: String,
    /// Requests made by this client (numbering within the call).
    counter: std::sync::atomic::AtomicU64,
    /// Secrets scrubbed from the request files.
    redactor: Redactor,
    /// Names what a request is for (the `node` of a request file).
    label: fn(&ChatRequest) -> String,
}

impl QueueClient {
    /// A queue in `dir` (created), waiting at most `timeout` per request.
    pub fn new(dir: &Path, timeout: Duration, prefix: &str) -> Result<Self, QueueError> {
        for sub in ["requests", "responses"] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d).map_err(|source| QueueError::Create { path: d, source })?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            timeout,
            prefix: prefix.to_string(),
            counter: Default::default(),
            redactor: Redactor::default(),
            label: |_| String::new(),
        })
    }

    /// Scrubs the secrets of `redactor` (the API keys in use) from the request files.
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// Names each request's purpose with `label` (the `node` field of a request file; empty
    /// without one).
    pub fn with_label(mut self, label: fn(&ChatRequest) -> String) -> Self {
        self.label = label;
        self
    }
}

impl LlmClient for QueueClient {
    fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let n = self.counter.fetch_add(1, Ordering::SeqCst);
        let millis = jiff::Timestamp::now().as_millisecond();
        let id = format!("{}-{millis}-{n}", self.prefix);
        let node = (self.label)(request);
        let now = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
            .to_string();
        let mut body = request_json(request, &id, &node, &now);
        self.redactor.redact_json(&mut body);
        let req_path = self.dir.join("requests").join(format!("{id}.json"));
        let resp_path = self.dir.join("responses").join(format!("{id}.json"));
        store::atomic::write_json_atomic(&req_path, &body, true).map_err(|source| {
            QueueError::Write {
                path: req_path.clone(),
                source: Box::new(source),
            }
        })?;
        // The heartbeat runs beside the wait.
        let stop = Arc::new(AtomicBool::new(false));
        let beat = {
            let stop = Arc::clone(&stop);
            let dir = self.dir.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    write_heartbeat(&dir, n);
                    let until = Instant::now() + HEARTBEAT;
                    while Instant::now() < until && !stop.load(Ordering::SeqCst) {
                        std::thread::sleep(POLL);
                    }
                }
            })
        };
        let started = Instant::now();
        // A response that is not valid JSON yet, and since when it has been exactly that.
        let mut unsettled: Option<(String, Instant)> = None;
        let unreadable = |source: AnswerError| QueueError::Unreadable {
            id: id.clone(),
            path: resp_path.clone(),
            source,
        };
        let result = loop {
            if let Ok(text) = std::fs::read_to_string(&resp_path) {
                match parse_answer(&text) {
                    Ok(answer) => break Ok(answer),
                    // A responder writing the file in place may be half-way: the same incomplete
                    // text for a while means it is all there is.
                    Err(e @ (AnswerError::NotJson(_) | AnswerError::Empty)) => match &unsettled {
                        Some((seen, since)) if *seen == text && since.elapsed() >= SETTLE => {
                            break Err(unreadable(e));
                        }
                        Some((seen, _)) if *seen == text => {}
                        _ => unsettled = Some((text, Instant::now())),
                    },
                    // Complete JSON of the wrong shape is reported at once.
                    Err(e) => break Err(unreadable(e)),
                }
            }
            if started.elapsed() > self.timeout {
                break Err(QueueError::Timeout {
                    id: id.clone(),
                    seconds: self.timeout.as_secs(),
                });
            }
            std::thread::sleep(POLL);
        };
        stop.store(true, Ordering::SeqCst);
        let _ = beat.join();
        let _ = std::fs::remove_file(self.dir.join("heartbeat.lock"));
        // Answered or given up: the request is no longer open (the next call asks anew).
        let _ = std::fs::remove_file(&req_path);
        let _ = std::fs::remove_file(&resp_path);
        Ok(result?)
    }

    fn describe(&self) -> String {
        format!("file queue {}", self.dir.display())
    }
}

/// Says who waits: rewritten every few seconds while a request is open.
fn write_heartbeat(dir: &Path, requests: u64) {
    let path = dir.join("heartbeat.lock");
    let body = json!({
        "pid": std::process::id(),
        "timestamp": jiff::Timestamp::now().to_string(),
        "requestsProcessed": requests,
    });
    let _ = store::atomic::write_json_atomic(&path, &body, true);
}
