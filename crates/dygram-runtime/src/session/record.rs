//! Recording the answers of a saved execution (`execute -i --record DIR`) so that a call redone
//! after a kill replaces its own recording instead of adding a second one.
//!
//! Each answer the execution receives is written as `turn-<n>.json` in the playback format. Where
//! the execution stands in its recordings folder is part of its committed state
//! ([`RecordPosition`], in the client configuration): how many answers it recorded, and the file
//! number its next recording starts looking at. Every recording carries a request id made of the
//! execution's id, its start time and the answer's number (`req-<id>-<started>-<k>`), so a call
//! recognises a file a killed attempt of the same call left: that file is replaced, atomically.
//! A file of anyone else (another execution recording into the same folder) is never touched:
//! the recording moves on to the next free number, as `llm::Recorder` does.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use llm::{ChatRequest, ChatResponse, LlmClient, LlmError, Recording, Redactor, StreamEvent};

/// Where an execution stands in its recordings folder (committed with each call).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordPosition {
    /// Answers recorded into the folder so far.
    pub recorded: u64,
    /// The file number the next recording looks at first (`None` before the first one: the
    /// folder is then searched for a recording of the same answer left by a killed call, else the
    /// numbering continues after the highest file there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_file: Option<u64>,
}

/// A client that forwards to `inner` and records every answer of one execution (see the module
/// documentation).
pub struct ExecutionRecorder<C> {
    inner: C,
    dir: PathBuf,
    /// `req-<id>-<started>-`: the request ids of this execution's recordings start with it.
    prefix: String,
    redactor: Redactor,
    position: Mutex<RecordPosition>,
}

/// The part of a recording file that tells whose it is.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Owner {
    request: OwnerRequest,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnerRequest {
    #[serde(default)]
    request_id: String,
}

fn recording_error(path: &Path, e: impl std::fmt::Display) -> LlmError {
    LlmError::Recording(format!("{}: {e}", path.display()))
}

impl<C: LlmClient> ExecutionRecorder<C> {
    /// Records the answers of execution `id` (started at `started_at`, RFC 3339) into `dir`
    /// (created if needed), from `position` on.
    pub fn new(
        inner: C,
        dir: impl Into<PathBuf>,
        id: &str,
        started_at: &str,
        position: RecordPosition,
    ) -> Result<Self, LlmError> {
        let dir = dir.into();
        store::atomic::create_dir_all_durable(&dir).map_err(|e| recording_error(&dir, e))?;
        let started: String = started_at.chars().filter(char::is_ascii_digit).collect();
        Ok(Self {
            inner,
            dir,
            prefix: format!("req-{id}-{started}-"),
            redactor: Redactor::default(),
            position: Mutex::new(position),
        })
    }

    /// The recorder of the execution `meta` describes, when it records (its client configuration
    /// names a recordings folder), from where it stands there.
    pub fn for_execution(inner: C, meta: &super::Metadata) -> Result<Option<Self>, LlmError> {
        let config = &meta.client_config;
        let Some(dir) = &config.recordings_dir else {
            return Ok(None);
        };
        Self::new(
            inner,
            dir,
            &meta.id,
            &meta.started_at,
            config.recording.unwrap_or_default(),
        )
        .map(Some)
    }

    /// Scrubs the secrets of `redactor` from every recording.
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// Where the execution stands now (commit it with the call).
    pub fn position(&self) -> RecordPosition {
        *self.position.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The request id of the file at `path`: `None` when there is no such file, `Some("")` when it
    /// cannot be read as a recording (someone else's).
    fn owner(path: &Path) -> Result<Option<String>, LlmError> {
        match std::fs::read(path) {
            Ok(bytes) => Ok(Some(
                serde_json::from_slice::<Owner>(&bytes)
                    .map(|o| o.request.request_id)
                    .unwrap_or_default(),
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(recording_error(path, e)),
        }
    }

    fn path(&self, n: u64) -> PathBuf {
        self.dir.join(format!("turn-{n}.json"))
    }

    /// Where the first recording of this execution into the folder goes: the file a killed call
    /// left with the same request id, else after the highest number there.
    fn first_file(&self, request_id: &str) -> Result<u64, LlmError> {
        let files = llm::recording::recording_files(&self.dir)?;
        let mut highest = 0;
        for path in files {
            let Some(n) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("turn-")?.strip_suffix(".json"))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            if Self::owner(&path)?.as_deref() == Some(request_id) {
                return Ok(n);
            }
            highest = highest.max(n);
        }
        Ok(highest + 1)
    }

    fn record(
        &self,
        request: &ChatRequest,
        response: &ChatResponse,
        requested_at: jiff::Timestamp,
    ) -> Result<(), LlmError> {
        let mut position = self.position.lock().unwrap_or_else(|p| p.into_inner());
        let k = position.recorded + 1;
        let request_id = format!("{}{k}", self.prefix);
        let recording = Recording::new(
            request,
            response,
            &request_id,
            &requested_at.to_string(),
            &jiff::Timestamp::now().to_string(),
        );
        let encode = |e: serde_json::Error| {
            LlmError::Recording(format!("cannot encode a recording of {request_id}: {e}"))
        };
        let mut value = serde_json::to_value(&recording).map_err(encode)?;
        self.redactor.redact_json(&mut value);
        let bytes = serde_json::to_vec_pretty(&value).map_err(encode)?;
        let mut n = match position.next_file {
            Some(n) => n,
            None => self.first_file(&request_id)?,
        };
        loop {
            let path = self.path(n);
            match Self::owner(&path)? {
                None => {
                    if store::atomic::create_atomic(&path, &bytes)
                        .map_err(|e| recording_error(&path, e))?
                    {
                        break;
                    }
                    // Taken by another process between the look and the write: look again.
                }
                // Left by a killed attempt of this very call: replaced.
                Some(owner) if owner == request_id => {
                    store::atomic::write_atomic(&path, &bytes)
                        .map_err(|e| recording_error(&path, e))?;
                    break;
                }
                Some(_) => n += 1,
            }
        }
        *position = RecordPosition {
            recorded: k,
            next_file: Some(n + 1),
        };
        Ok(())
    }
}

impl<C: LlmClient> LlmClient for ExecutionRecorder<C> {
    fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let requested_at = jiff::Timestamp::now();
        let response = self.inner.complete(request)?;
        self.record(request, &response, requested_at)?;
        Ok(response)
    }

    fn complete_streaming(
        &self,
        request: &ChatRequest,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<ChatResponse, LlmError> {
        let requested_at = jiff::Timestamp::now();
        let response = self.inner.complete_streaming(request, on_event)?;
        self.record(request, &response, requested_at)?;
        Ok(response)
    }

    fn describe(&self) -> String {
        format!(
            "{} (recording to {})",
            self.inner.describe(),
            self.dir.display()
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use llm::answer::Given;
    use llm::{ContentBlock, Message};

    fn answer(text: &str) -> Given {
        Given(ChatResponse::given(vec![ContentBlock::text(text)]))
    }

    fn request() -> ChatRequest {
        ChatRequest::new("m", vec![Message::user("go")])
    }

    fn files(dir: &Path) -> Vec<(String, String)> {
        llm::recording::recording_files(dir)
            .unwrap()
            .iter()
            .map(|p| {
                let r = Recording::load(p).unwrap();
                (
                    p.file_name().unwrap().to_string_lossy().into_owned(),
                    r.chat_response().text(),
                )
            })
            .collect()
    }

    /// Records `text` for execution `id` from `position`; returns the position after it.
    fn record(dir: &Path, id: &str, position: RecordPosition, text: &str) -> RecordPosition {
        let rec =
            ExecutionRecorder::new(answer(text), dir, id, "2026-01-01T00:00:00.000Z", position)
                .unwrap();
        rec.complete(&request()).unwrap();
        rec.position()
    }

    fn names(v: &[(String, String)]) -> Vec<&str> {
        v.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn a_redone_answer_replaces_the_file_its_killed_attempt_left() {
        let dir = tempfile::tempdir().unwrap();
        let p1 = record(dir.path(), "x", RecordPosition::default(), "one");
        assert_eq!(
            p1,
            RecordPosition {
                recorded: 1,
                next_file: Some(2)
            }
        );
        // The second answer is recorded, then its call is killed before the commit (p1 stays
        // committed) and redone with another answer.
        record(dir.path(), "x", p1, "two (lost)");
        let p2 = record(dir.path(), "x", p1, "two");
        assert_eq!(p2.next_file, Some(3));
        let got = files(dir.path());
        assert_eq!(names(&got), ["turn-1.json", "turn-2.json"]);
        assert_eq!(got[1].1, "two");
    }

    #[test]
    fn the_first_answer_redone_finds_its_file_among_others() {
        let dir = tempfile::tempdir().unwrap();
        // Two answers of another execution are there already.
        let other = record(dir.path(), "other", RecordPosition::default(), "a");
        record(dir.path(), "other", other, "b");
        // Killed after its first recording, before anything was committed: redone from nothing.
        record(dir.path(), "x", RecordPosition::default(), "first (lost)");
        let p = record(dir.path(), "x", RecordPosition::default(), "first");
        assert_eq!(p.next_file, Some(4));
        let got = files(dir.path());
        assert_eq!(names(&got), ["turn-1.json", "turn-2.json", "turn-3.json"]);
        assert_eq!(got[2].1, "first");
    }

    #[test]
    fn files_of_another_execution_are_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let x = record(dir.path(), "x", RecordPosition::default(), "x1");
        // Another execution takes the next number before x records again.
        record(
            dir.path(),
            "y",
            RecordPosition {
                recorded: 0,
                next_file: Some(2),
            },
            "y1",
        );
        let x = record(dir.path(), "x", x, "x2");
        assert_eq!(x.next_file, Some(4));
        // Unreadable files are someone else's too.
        std::fs::write(dir.path().join("turn-4.json"), "not a recording").unwrap();
        let x = record(dir.path(), "x", x, "x3");
        assert_eq!(x.next_file, Some(6));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("turn-4.json")).unwrap(),
            "not a recording"
        );
        let texts: Vec<String> = [1, 2, 3, 5]
            .iter()
            .map(|n| {
                Recording::load(&dir.path().join(format!("turn-{n}.json")))
                    .unwrap()
                    .chat_response()
                    .text()
            })
            .collect();
        assert_eq!(texts, ["x1", "y1", "x2", "x3"]);
    }

    #[test]
    fn secrets_are_scrubbed_from_recordings() {
        let dir = tempfile::tempdir().unwrap();
        let rec = ExecutionRecorder::new(
            answer("the key is sk-secret-123"),
            dir.path(),
            "x",
            "2026-01-01T00:00:00.000Z",
            RecordPosition::default(),
        )
        .unwrap()
        .with_redactor(Redactor::new(["sk-secret-123"]));
        rec.complete(&request()).unwrap();
        let text = std::fs::read_to_string(dir.path().join("turn-1.json")).unwrap();
        assert!(!text.contains("sk-secret-123"), "{text}");
        assert!(text.contains("[REDACTED]"), "{text}");
    }
}
