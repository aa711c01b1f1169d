//! `--playback DIR` for runs: answers come from recordings, which must fit the agent's tools, and the
//! recordings a run has used are kept in its folder (`playback.json`), so `delta continue --playback`
//! goes on with the first recording the run has not used yet.
//!
//! Matching is the LLM layer's `hybrid` mode: by signature (tool names and message count), else the
//! next unused recording in file order. A recording made with tools the agent does not offer, or whose
//! answer calls one, is an error rather than a replayed answer; so are used-up recordings.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use llm::{
    ChatRequest, ChatResponse, LlmClient, LlmError, PlaybackClient, PlaybackMode, PlaybackState,
};
use store::StoreError;

use crate::workspace::RunDir;

/// The file in a run's folder.
pub const STATE_FILE: &str = "playback.json";

/// What each recordings folder (by canonical path) has served to the run.
type Saved = BTreeMap<String, PlaybackState>;

/// A playback client that remembers, per run, which recordings it served.
pub struct RunPlayback {
    client: PlaybackClient,
    /// The recordings folder as a key of `playback.json`.
    key: String,
    /// `playback.json` of the bound run and its contents.
    bound: Mutex<Option<(PathBuf, Saved)>>,
}

impl std::fmt::Debug for RunPlayback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunPlayback")
            .field("client", &self.client)
            .finish()
    }
}

impl RunPlayback {
    /// Loads the recordings of `dir`.
    pub fn open(dir: &Path) -> Result<Self, LlmError> {
        let client = PlaybackClient::open(dir, PlaybackMode::Hybrid)?.require_offered_tools();
        let key = dir
            .canonicalize()
            .unwrap_or_else(|_| dir.to_path_buf())
            .display()
            .to_string();
        Ok(Self {
            client,
            key,
            bound: Mutex::new(None),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(PathBuf, Saved)>> {
        self.bound.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Continues where `run` left these recordings (nothing used for a new run) and saves what is
    /// served from now on into the run's folder.
    pub fn bind(&self, run: &RunDir) -> Result<(), StoreError> {
        let file = run.root.join(STATE_FILE);
        let saved: Saved = if file.is_file() {
            store::atomic::read_json(&file)?
        } else {
            Saved::new()
        };
        self.client
            .set_state(saved.get(&self.key).cloned().unwrap_or_default());
        *self.lock() = Some((file, saved));
        Ok(())
    }

    fn save(&self) -> Result<(), StoreError> {
        let mut bound = self.lock();
        if let Some((file, saved)) = bound.as_mut() {
            saved.insert(self.key.clone(), self.client.state());
            store::write_json_atomic(file, saved, true)?;
        }
        Ok(())
    }
}

impl LlmClient for RunPlayback {
    fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let response = self.client.complete(request)?;
        self.save()
            .map_err(|e| LlmError::Recording(format!("cannot save the playback state: {e}")))?;
        Ok(response)
    }

    fn describe(&self) -> String {
        self.client.describe()
    }
}
