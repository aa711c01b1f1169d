//! Replayed answers served by node: a request made at a node is answered from the recordings made
//! at that node.
//!
//! The LLM layer's playback matches a request by its tools and message count (and, in dygram's
//! hybrid mode, falls back to the next unused recording in file order). Two nodes that offer the
//! same tools, such as the parallel `flights` and `hotels` of `examples/dygram/trip.dy`, then get
//! each other's answers whenever their paths run in another order than when they were recorded.
//! [`NodePlayback`] narrows the choice to the node's own recordings: for each request it hides
//! the recordings of other nodes from the playback client (marking them served for the time of
//! the request), and gives them back afterwards. The node is the one the runtime's system prompt
//! names (`- **Node**: …`), in the request and in each recording; a recording that names none (made
//! by other tools) may answer any node, as before.

use std::path::Path;
use std::sync::Arc;

use llm::recording::{Recording, recording_files};
use llm::{ChatRequest, ChatResponse, LlmClient, LlmError, PlaybackClient, StreamEvent};

use crate::prompt::node_named_in;

/// A client that answers through `client`, whose recordings come from `playback`, with each
/// request served a recording of its own node.
pub struct NodePlayback {
    client: Arc<dyn LlmClient>,
    playback: Arc<PlaybackClient>,
    /// Every recording, in the playback client's file order: its file name and the node it was
    /// made at (`None`: it names none).
    recordings: Vec<(String, Option<String>)>,
}

impl NodePlayback {
    /// Reads the node of each recording in `dir`, which `playback` replays.
    pub fn new(
        client: Arc<dyn LlmClient>,
        playback: Arc<PlaybackClient>,
        dir: &Path,
    ) -> Result<Self, LlmError> {
        let recordings = recording_files(dir)?
            .into_iter()
            .map(|path| {
                let recording = Recording::load(&path)?;
                let prompt = recording.request.system_prompt.as_deref().unwrap_or("");
                let node = node_named_in(prompt).map(str::to_string);
                let file = path.file_name().map(|n| n.to_string_lossy().into_owned());
                Ok((file.unwrap_or_default(), node))
            })
            .collect::<Result<Vec<_>, LlmError>>()?;
        Ok(Self {
            client,
            playback,
            recordings,
        })
    }

    /// `answer` with the recordings of nodes other than the request's hidden from the playback
    /// client; a miss says when a recording of another node was passed over.
    fn served<T>(
        &self,
        request: &ChatRequest,
        answer: impl FnOnce() -> Result<T, LlmError>,
    ) -> Result<T, LlmError> {
        let node = crate::prompt::node_of(request);
        if node.is_empty() {
            return answer();
        }
        let before = self.playback.state();
        let hidden: Vec<(usize, &str, &str)> = self
            .recordings
            .iter()
            .enumerate()
            .filter_map(|(i, (file, made_at))| {
                let other = made_at.as_deref().filter(|n| *n != node)?;
                (!before.used.contains(file)).then_some((i, file.as_str(), other))
            })
            .collect();
        if hidden.is_empty() {
            return answer();
        }
        let mut masked = before.clone();
        masked
            .used
            .extend(hidden.iter().map(|(_, file, _)| file.to_string()));
        self.playback.set_state(masked);
        let result = answer();
        let mut after = self.playback.state();
        after
            .used
            .retain(|f| !hidden.iter().any(|(_, h, _)| h == f));
        // The fallback's cursor does not move past a recording that was only hidden.
        if let Some(first) = hidden
            .iter()
            .map(|(i, ..)| *i)
            .filter(|i| *i >= before.next_sequential)
            .min()
        {
            after.next_sequential = after.next_sequential.min(first);
        }
        self.playback.set_state(after);
        result.map_err(|e| explain_miss(e, &node, &hidden))
    }
}

/// A playback miss with the recordings of other nodes told apart from used ones.
fn explain_miss(error: LlmError, node: &str, hidden: &[(usize, &str, &str)]) -> LlmError {
    let LlmError::PlaybackMiss(mut miss) = error else {
        return error;
    };
    for (file, _, used) in &mut miss.available {
        if hidden.iter().any(|(_, h, _)| h == file) {
            *used = false;
        }
    }
    if miss.problem.is_none() {
        let others: Vec<String> = hidden
            .iter()
            .map(|(_, file, at)| format!("{file} (made at {at})"))
            .collect();
        miss.problem = Some(format!(
            "no recording made at node {node} is left for this request; the recordings of other nodes are not served to it: {}",
            others.join(", ")
        ));
    }
    LlmError::PlaybackMiss(miss)
}

impl LlmClient for NodePlayback {
    fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.served(request, || self.client.complete(request))
    }

    fn complete_streaming(
        &self,
        request: &ChatRequest,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<ChatResponse, LlmError> {
        self.served(request, || {
            self.client.complete_streaming(request, on_event)
        })
    }

    fn describe(&self) -> String {
        self.client.describe()
    }
}
