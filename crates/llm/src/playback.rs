//! Playback: answer requests from a directory of recordings, without any network.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::LlmClient;
use crate::error::LlmError;
use crate::recording::{Recording, Signature, file_name, recording_files};
use crate::types::{ChatRequest, ChatResponse};

/// How a request is matched to a recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlaybackMode {
    /// The first unused recording with the same signature (tool names, message count).
    Signature,
    /// The next recording in file order, whatever it is.
    Sequential,
    /// By signature; when nothing matches, the next unused recording in file order.
    #[default]
    Hybrid,
}

impl FromStr for PlaybackMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "signature" => Ok(Self::Signature),
            "sequential" => Ok(Self::Sequential),
            "hybrid" => Ok(Self::Hybrid),
            other => Err(format!(
                "unknown playback mode {other:?} (expected signature, sequential or hybrid)"
            )),
        }
    }
}

impl std::fmt::Display for PlaybackMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Signature => "signature",
            Self::Sequential => "sequential",
            Self::Hybrid => "hybrid",
        })
    }
}

/// Which recordings have been served; save it to continue playback in a later process.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PlaybackState {
    /// File names already served, in order.
    pub used: Vec<String>,
    /// Position of the sequential cursor.
    pub next_sequential: usize,
}

struct Entry {
    file: String,
    signature: Signature,
    response: ChatResponse,
}

/// A client that serves recorded answers.
pub struct PlaybackClient {
    dir: PathBuf,
    mode: PlaybackMode,
    entries: Vec<Entry>,
    state: Mutex<PlaybackState>,
    offered_tools_only: bool,
}

impl std::fmt::Debug for PlaybackClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlaybackClient")
            .field("dir", &self.dir)
            .field("mode", &self.mode)
            .field("recordings", &self.entries.len())
            .finish()
    }
}

/// Why playback could not answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PlaybackMiss {
    /// The recordings directory.
    pub dir: PathBuf,
    /// The matching mode.
    pub mode: PlaybackMode,
    /// The request's signature.
    pub requested: Signature,
    /// Every recording: file name, signature, already used.
    pub available: Vec<(String, Signature, bool)>,
    /// Why the recording the mode picked cannot answer (see
    /// [`PlaybackClient::require_offered_tools`]): `None` when none was found.
    pub problem: Option<String>,
}

impl std::fmt::Display for PlaybackMiss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dir = self.dir.display();
        let used_up = !self.available.is_empty() && self.available.iter().all(|(_, _, used)| *used);
        match (&self.problem, self.mode) {
            (Some(problem), _) => {
                writeln!(f, "{problem} (recordings in {dir}, mode {})", self.mode)?
            }
            (None, PlaybackMode::Sequential) => {
                writeln!(f, "no recording left in {dir} (mode {})", self.mode)?
            }
            (None, _) if used_up => writeln!(
                f,
                "the recordings in {dir} are used up: all {} have been served (mode {})",
                self.available.len(),
                self.mode
            )?,
            (None, _) => writeln!(
                f,
                "no recording matches this request in {dir} (mode {})",
                self.mode
            )?,
        }
        writeln!(f, "  requested: {}", self.requested)?;
        if self.available.is_empty() {
            write!(f, "  the directory holds no recordings")
        } else {
            write!(f, "  the directory holds:")?;
            for (file, sig, used) in &self.available {
                let used = if *used { " (already used)" } else { "" };
                write!(f, "\n    {file}: {sig}{used}")?;
            }
            Ok(())
        }
    }
}

impl std::error::Error for PlaybackMiss {}

impl PlaybackClient {
    /// Loads every `*.json` recording of `dir` (natural file order: `turn-9` before `turn-10`).
    ///
    /// A missing directory, or a file that is not a recording, is an error naming it.
    pub fn open(dir: impl Into<PathBuf>, mode: PlaybackMode) -> Result<Self, LlmError> {
        let dir = dir.into();
        if !dir.is_dir() {
            return Err(LlmError::Recording(format!(
                "recordings directory not found: {}",
                dir.display()
            )));
        }
        let entries = recording_files(&dir)?
            .into_iter()
            .map(|path| {
                let recording = Recording::load(&path)?;
                Ok(Entry {
                    file: file_name(&path),
                    signature: recording.signature(),
                    response: recording.chat_response(),
                })
            })
            .collect::<Result<Vec<_>, LlmError>>()?;
        Ok(Self {
            dir,
            mode,
            entries,
            state: Mutex::new(PlaybackState::default()),
            offered_tools_only: false,
        })
    }

    /// Refuses to serve a recording that does not belong to the request's tools: one recorded with a
    /// tool the request does not offer, or whose answer calls one. Without this (the original tools'
    /// behaviour), `hybrid` mode falls back to the next recording whatever it was made for, and a
    /// caller may replay answers meant for another agent. delta and dygram both ask for it.
    pub fn require_offered_tools(mut self) -> Self {
        self.offered_tools_only = true;
        self
    }

    /// Replaces the state (what has been served), e.g. with one saved by an earlier process.
    pub fn set_state(&self, state: PlaybackState) {
        *self.lock() = state;
    }

    /// Continues from a saved state.
    pub fn with_state(self, state: PlaybackState) -> Self {
        Self {
            state: Mutex::new(state),
            ..self
        }
    }

    /// The current state (what has been served).
    pub fn state(&self) -> PlaybackState {
        self.lock().clone()
    }

    /// The recordings directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Number of recordings loaded.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the directory holds no recordings.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PlaybackState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn find(&self, state: &mut PlaybackState, requested: &Signature) -> Option<usize> {
        let unused = |i: &usize| !state.used.contains(&self.entries[*i].file);
        let by_signature = || {
            (0..self.entries.len())
                .filter(unused)
                .find(|&i| self.entries[i].signature.matches(requested))
        };
        match self.mode {
            PlaybackMode::Signature => by_signature(),
            PlaybackMode::Sequential => {
                let i = state.next_sequential;
                (i < self.entries.len()).then(|| {
                    state.next_sequential += 1;
                    i
                })
            }
            PlaybackMode::Hybrid => by_signature().or_else(|| {
                let i = (state.next_sequential..self.entries.len()).find(|i| unused(i))?;
                state.next_sequential = i + 1;
                Some(i)
            }),
        }
    }
}

impl PlaybackClient {
    /// Why entry `i` cannot answer a request offering `offered`, if it cannot.
    fn misfit(&self, i: usize, offered: &[String]) -> Option<String> {
        let entry = &self.entries[i];
        let missing = |names: Vec<&str>| -> Vec<String> {
            let mut out: Vec<String> = names
                .into_iter()
                .filter(|n| !offered.iter().any(|o| o == n))
                .map(str::to_string)
                .collect();
            out.sort_unstable();
            out.dedup();
            out
        };
        let not_offered = missing(
            entry
                .signature
                .tool_names
                .iter()
                .map(String::as_str)
                .collect(),
        );
        if !not_offered.is_empty() {
            return Some(format!(
                "{} was recorded with tools that are not offered now: {}",
                entry.file,
                not_offered.join(", ")
            ));
        }
        let calls = missing(entry.response.tool_calls().map(|c| c.name).collect());
        (!calls.is_empty()).then(|| {
            format!(
                "{} answers with calls to tools that are not offered now: {}",
                entry.file,
                calls.join(", ")
            )
        })
    }

    fn miss(
        &self,
        state: &PlaybackState,
        requested: Signature,
        problem: Option<String>,
    ) -> LlmError {
        LlmError::PlaybackMiss(Box::new(PlaybackMiss {
            dir: self.dir.clone(),
            mode: self.mode,
            requested,
            available: self
                .entries
                .iter()
                .map(|e| {
                    (
                        e.file.clone(),
                        e.signature.clone(),
                        state.used.contains(&e.file),
                    )
                })
                .collect(),
            problem,
        }))
    }
}

impl LlmClient for PlaybackClient {
    fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let requested = Signature::of(request);
        let mut state = self.lock();
        let before = state.clone();
        match self.find(&mut state, &requested) {
            Some(i) => {
                if self.offered_tools_only
                    && let Some(problem) = self.misfit(i, &requested.tool_names)
                {
                    *state = before;
                    return Err(self.miss(&state, requested, Some(problem)));
                }
                state.used.push(self.entries[i].file.clone());
                Ok(self.entries[i].response.clone())
            }
            None => Err(self.miss(&state, requested, None)),
        }
    }

    fn describe(&self) -> String {
        format!("playback {} ({} mode)", self.dir.display(), self.mode)
    }
}
