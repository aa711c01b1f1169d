//! `metadata.json`: the run's summary, rewritten atomically on every change.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use store::StoreError;

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RunStatus {
    /// A process is working on it (or died doing so: see the run lock).
    Running,
    /// Paused on an `ask_human` question.
    WaitingForInput,
    /// Finished.
    Completed,
    /// Stopped by an error.
    Failed,
    /// Stopped by a signal.
    Interrupted,
}

impl RunStatus {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "RUNNING",
            Self::WaitingForInput => "WAITING_FOR_INPUT",
            Self::Completed => "COMPLETED",
            Self::Failed => "FAILED",
            Self::Interrupted => "INTERRUPTED",
        }
    }

    /// Every status.
    pub const ALL: [Self; 5] = [
        Self::Running,
        Self::WaitingForInput,
        Self::Completed,
        Self::Failed,
        Self::Interrupted,
    ];

    /// The status spelled `text` (in any case).
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str().eq_ignore_ascii_case(text))
    }

    /// Whether the run stopped before it finished: INTERRUPTED (`delta continue` resumes it as it
    /// is) or WAITING_FOR_INPUT (`delta continue -m ANSWER` answers its question).
    pub fn is_resumable(self) -> bool {
        matches!(self, Self::Interrupted | Self::WaitingForInput)
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Token totals over a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TokenTotals {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Both.
    pub total_tokens: u64,
    /// LLM calls made.
    #[serde(default)]
    pub llm_calls: u64,
}

impl TokenTotals {
    /// Adds one call's usage.
    pub fn add(&mut self, usage: llm::Usage) {
        self.input_tokens += usage.input_tokens;
        self.output_tokens += usage.output_tokens;
        self.total_tokens = self.input_tokens + self.output_tokens;
        self.llm_calls += 1;
    }

    /// Adds the totals of `other` (calls counted apart).
    pub fn absorb(&mut self, other: TokenTotals) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens = self.input_tokens + self.output_tokens;
        self.llm_calls += other.llm_calls;
    }
}

/// The contents of `metadata.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMetadata {
    /// Run id.
    pub run_id: String,
    /// When it started (UTC, milliseconds).
    pub start_time: String,
    /// Absolute agent folder.
    pub agent_ref: String,
    /// The first message.
    pub task: String,
    /// Where it stands.
    pub status: RunStatus,
    /// Iterations that ran tools, over all processes.
    pub iterations_completed: u64,
    /// Process id of the last process that worked on it.
    pub pid: u32,
    /// Host of that process.
    pub hostname: String,
    /// `start_time` in milliseconds since the epoch.
    pub start_time_unix: i64,
    /// Name of that process's program.
    pub process_name: String,
    /// The boot that process ran in (`/proc/sys/kernel/random/boot_id`): a process taking the run over
    /// in the same boot knows that files the previous one wrote without flushing are there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// When it last stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// Token totals.
    #[serde(default)]
    pub usage: TokenTotals,
    /// Fields written by newer versions, kept as they are.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl RunMetadata {
    /// Writes the file atomically (pretty JSON, two-space indent, no final newline).
    pub fn save(&self, path: &Path) -> Result<(), StoreError> {
        store::write_json_atomic(path, self, true)
    }

    /// Rewrites the file atomically without flushing it to disk, for progress updates (iteration count,
    /// token totals) that the journal can reconstruct.
    pub fn save_progress(&self, path: &Path) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec_pretty(self).map_err(|source| StoreError::Serialize {
            path: path.to_path_buf(),
            source,
        })?;
        store::write_atomic_lazy(path, &bytes)
    }

    /// Sends the metadata to the run's store, when the run lives in one.
    pub fn send(&self, upstream: Option<&dyn crate::events::Upstream>) -> Result<(), StoreError> {
        let Some(upstream) = upstream else {
            return Ok(());
        };
        let bytes = serde_json::to_vec_pretty(self).map_err(|source| StoreError::Serialize {
            path: "metadata.json".into(),
            source,
        })?;
        upstream.put("metadata.json", &bytes)
    }

    /// Reads the file.
    pub fn load(path: &Path) -> Result<Self, StoreError> {
        store::atomic::read_json(path)
    }
}

/// The name of the current program (`delta`).
pub fn process_name() -> String {
    std::env::args_os()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "delta".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_and_round_trip() {
        let m = RunMetadata {
            run_id: "r".into(),
            start_time: "s".into(),
            agent_ref: "/a".into(),
            task: "t".into(),
            status: RunStatus::WaitingForInput,
            iterations_completed: 2,
            pid: 7,
            hostname: "h".into(),
            start_time_unix: 1,
            process_name: "delta".into(),
            boot_id: Some("b".into()),
            end_time: None,
            usage: TokenTotals::default(),
            extra: Map::new(),
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metadata.json");
        m.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("{\n  \"run_id\": \"r\",\n  \"start_time\""),
            "{text}"
        );
        assert!(text.contains("\"status\": \"WAITING_FOR_INPUT\""));
        assert!(!text.ends_with('\n'));
        assert_eq!(RunMetadata::load(&path).unwrap(), m);
    }
}
