//! `--playback DIR` for runs: answers come from recordings, which must fit the agent's tools, and the
//! recordings a run has used are kept in its folder (`playback.json`), so `delta continue --playback`
//! goes on with the first recording the run has not used yet.
//!
//! Matching is the LLM layer's `hybrid` mode: by signature (tool names and message count), else the
//! next unused recording in file order. A recording made with tools the agent does not offer, or whose
//! answer calls one, is an error rather than a replayed answer; so are used-up recordings.
//!
//! The journal decides what a run was answered: a recording served just before the process was
//! killed, whose answer never reached the journal, is not counted as used. `playback.json` keeps the
//! state before the last recording served and which answer of the run (its `THOUGHT` number) that
//! recording was; a later process that finds fewer answers journaled goes back to that state.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use llm::{ChatRequest, ChatResponse, LlmClient, LlmError, PlaybackClient, PlaybackState};
use store::StoreError;

use crate::workspace::RunDir;

/// The file in a run's folder.
pub const STATE_FILE: &str = "playback.json";

/// What one recordings folder has served to the run.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Served {
    /// After the last recording served.
    state: PlaybackState,
    /// Before it.
    #[serde(default)]
    before_last: PlaybackState,
    /// The answer of the run (1-based `THOUGHT` number) the last recording served was for.
    #[serde(default)]
    last_answer: u64,
}

/// What each recordings folder (by canonical path) has served to the run.
type Saved = BTreeMap<String, Served>;

/// The run's bound state: `playback.json`, what it holds, and how many answers the run has journaled.
struct Bound {
    file: PathBuf,
    saved: Saved,
    answers: u64,
}

/// A playback client that remembers, per run, which recordings it served.
pub struct RunPlayback {
    client: Arc<PlaybackClient>,
    /// The recordings folder as a key of `playback.json`.
    key: String,
    /// `playback.json` of the bound run and its contents.
    bound: Mutex<Option<Bound>>,
}

impl std::fmt::Debug for RunPlayback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunPlayback")
            .field("client", &self.client)
            .finish()
    }
}

impl RunPlayback {
    /// Serves the recordings `client` replays (opened by the LLM layer), not yet bound to a run.
    pub fn new(client: Arc<PlaybackClient>) -> Self {
        let dir = client.dir();
        let key = dir
            .canonicalize()
            .unwrap_or_else(|_| dir.to_path_buf())
            .display()
            .to_string();
        Self {
            client,
            key,
            bound: Mutex::new(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Bound>> {
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
        let answers = if run.journal().is_file() {
            let (events, _) = crate::events::read(&run.journal())?;
            events.iter().filter(|e| e.kind == "THOUGHT").count() as u64
        } else {
            0
        };
        let state = match saved.get(&self.key) {
            None => PlaybackState::default(),
            // Served, but its answer never journaled: not used.
            Some(served) if served.last_answer > answers => served.before_last.clone(),
            Some(served) => served.state.clone(),
        };
        self.client.set_state(state);
        *self.lock() = Some(Bound {
            file,
            saved,
            answers,
        });
        Ok(())
    }

    /// Notes that the recording just served answers the run's next answer (`before`: the state before
    /// it). Not flushed to disk: the journal, which is, decides (see the module documentation).
    fn save(&self, before: PlaybackState) -> Result<(), StoreError> {
        let mut bound = self.lock();
        if let Some(b) = bound.as_mut() {
            b.answers += 1;
            let served = Served {
                state: self.client.state(),
                before_last: before,
                last_answer: b.answers,
            };
            b.saved.insert(self.key.clone(), served);
            let bytes =
                serde_json::to_vec_pretty(&b.saved).map_err(|source| StoreError::Serialize {
                    path: b.file.clone(),
                    source,
                })?;
            store::write_atomic_lazy(&b.file, &bytes)?;
        }
        Ok(())
    }
}

impl LlmClient for RunPlayback {
    fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let before = self.client.state();
        let response = self.client.complete(request)?;
        self.save(before)
            .map_err(|e| LlmError::Recording(format!("cannot save the playback state: {e}")))?;
        Ok(response)
    }

    fn describe(&self) -> String {
        self.client.describe()
    }
}
