//! How far an execution is, where the total is known: an execution whose answers are replayed
//! has as many turns as its recordings give (the turns so far and the recordings not served yet).
//! Other executions, and those that have ended, have no known total.

use serde::Serialize;

use super::{Executions, Metadata};

/// Turns so far, of a known total.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// LLM round trips so far.
    pub turns: u64,
    /// The turns the execution will have taken when its recordings are used up.
    pub total: u64,
}

impl Executions {
    /// The progress of the execution `meta` describes, when its total is known (see the module
    /// documentation); its recordings folder is read.
    pub fn progress(&self, meta: &Metadata) -> Option<Progress> {
        let config = &meta.client_config;
        if meta.status.is_finished() || config.kind != llm::SourceKind::Playback {
            return None;
        }
        let dir = self.base().join(config.playback_dir.as_deref()?);
        let files = llm::recording::recording_files(&dir).ok()?;
        let served = config
            .playback_state
            .as_ref()
            .map_or(&[][..], |s| s.used.as_slice());
        let left = files
            .iter()
            .filter_map(|f| f.file_name()?.to_str())
            .filter(|name| !served.iter().any(|s| s == name))
            .count() as u64;
        Some(Progress {
            turns: meta.turn_count,
            total: meta.turn_count + left,
        })
    }
}
