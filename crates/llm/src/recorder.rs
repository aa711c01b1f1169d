//! Recording: wrap any client and keep every exchange as `turn-<n>.json`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use store::{Clock, IdSource};

use crate::LlmClient;
use crate::error::LlmError;
use crate::recording::{Recording, file_name, recording_files};
use crate::secret::Redactor;
use crate::types::{ChatRequest, ChatResponse, StreamEvent};

/// A client that forwards to `inner` and writes each successful exchange to a directory.
///
/// Files are numbered after the highest `turn-<n>.json` already there, so recording into a directory
/// across several processes continues the sequence instead of overwriting it. Only the neutral request
/// and response are written: no headers, so no API key reaches a recording that way; and every text in
/// a recording passes through the [`Redactor`] given with [`Recorder::with_redactor`], so a key the
/// model or a tool echoes is not written either.
pub struct Recorder {
    inner: Arc<dyn LlmClient>,
    dir: PathBuf,
    clock: Clock,
    ids: IdSource,
    redactor: Redactor,
    lock: Mutex<()>,
}

impl Recorder {
    /// Records the answers of `inner` into `dir`, creating it if needed.
    pub fn new(
        inner: impl Into<Arc<dyn LlmClient>>,
        dir: impl Into<PathBuf>,
    ) -> Result<Self, LlmError> {
        let dir = dir.into();
        store::atomic::create_dir_all_durable(&dir)
            .map_err(|e| LlmError::Recording(e.to_string()))?;
        Ok(Self {
            inner: inner.into(),
            dir,
            clock: Clock::System,
            ids: IdSource::random(),
            redactor: Redactor::default(),
            lock: Mutex::new(()),
        })
    }

    /// Uses `clock` for timestamps.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Uses `ids` for request ids.
    pub fn with_ids(mut self, ids: IdSource) -> Self {
        self.ids = ids;
        self
    }

    /// Scrubs the secrets of `redactor` from every recording.
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// The directory recordings go to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The wrapped client.
    pub fn inner(&self) -> &dyn LlmClient {
        &*self.inner
    }

    fn record(
        &self,
        request: &ChatRequest,
        response: &ChatResponse,
        requested_at: jiff::Timestamp,
    ) -> Result<PathBuf, LlmError> {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let request_id = format!("req-{}-{}", requested_at.as_millisecond(), self.ids.hex(9));
        let recording = Recording::new(
            request,
            response,
            &request_id,
            &requested_at.to_string(),
            &self.clock.now().to_string(),
        );
        let encode_error =
            |e: serde_json::Error| LlmError::Recording(format!("cannot encode a recording: {e}"));
        let mut value = serde_json::to_value(&recording).map_err(encode_error)?;
        self.redactor.redact_json(&mut value);
        let bytes = serde_json::to_vec_pretty(&value).map_err(encode_error)?;
        // Claim the next free number; another process recording into the same directory may take a
        // number between our look and our write, in which case we move on to the next one.
        let mut next = next_turn_number(&self.dir)?;
        let path = loop {
            let path = self.dir.join(format!("turn-{next}.json"));
            if store::create_atomic(&path, &bytes)
                .map_err(|e| LlmError::Recording(e.to_string()))?
            {
                break path;
            }
            next += 1;
        };
        Ok(path)
    }
}

/// One more than the highest `turn-<n>.json` in `dir` (1 for an empty directory).
pub fn next_turn_number(dir: &Path) -> Result<u64, LlmError> {
    let highest = recording_files(dir)?
        .iter()
        .filter_map(|p| {
            file_name(p)
                .strip_prefix("turn-")?
                .strip_suffix(".json")?
                .parse::<u64>()
                .ok()
        })
        .max()
        .unwrap_or(0);
    Ok(highest + 1)
}

impl LlmClient for Recorder {
    fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let requested_at = self.clock.now();
        let response = self.inner.complete(request)?;
        self.record(request, &response, requested_at)?;
        Ok(response)
    }

    fn complete_streaming(
        &self,
        request: &ChatRequest,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<ChatResponse, LlmError> {
        let requested_at = self.clock.now();
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
