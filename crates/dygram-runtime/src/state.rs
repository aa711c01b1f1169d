//! Execution state: everything needed to stop between two turns and go on in another process.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Version of the saved state layout.
pub const STATE_VERSION: &str = "2.0.0";

/// What a path is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PathStatus {
    /// Has work to do.
    Active,
    /// Waits at a barrier for other paths.
    Waiting,
    /// Reached a node without outgoing edges, or handed over to paths it spawned.
    Completed,
    /// Stopped by an error (see [`Path::error`]).
    Failed,
    /// Stopped because another path took over (merge barriers).
    Cancelled,
}

/// One transition taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    /// Node left.
    pub from: String,
    /// Node entered.
    pub to: String,
    /// Why: `agent_decision`, `default`, `Single edge from state node`, a condition, …
    pub transition: String,
    /// When (milliseconds since the Unix epoch).
    pub timestamp: i64,
    /// The model's text, for agent decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// An entry into a `state` node (for loop detection).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateEntry {
    /// The state node.
    pub state: String,
    /// When (milliseconds since the Unix epoch).
    pub timestamp: i64,
}

/// The item a `@map` path works on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MapContext {
    /// The path that fanned out.
    pub source_path_id: String,
    /// The list it fanned out over (`Ctx.items`).
    pub map_source: String,
    /// This path's item.
    pub item: Value,
    /// Its index in the list.
    pub index: usize,
    /// The fan-out's group id.
    pub group_id: String,
}

/// One thread of execution through the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Path {
    /// `path_<n>`.
    pub id: String,
    /// Where it is.
    pub current_node: String,
    /// Status.
    pub status: PathStatus,
    /// Transitions taken, in order.
    pub history: Vec<Transition>,
    /// Steps this path has run.
    pub step_count: u64,
    /// How many times each node ran on this path.
    pub node_invocation_counts: std::collections::BTreeMap<String, u64>,
    /// Entries into `state` nodes.
    pub state_transitions: Vec<StateEntry>,
    /// When the path started (milliseconds since the Unix epoch).
    pub start_time: i64,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The item of a `@map` path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_context: Option<MapContext>,
    /// A transition held at a barrier, made when the barrier opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingMove>,
    /// Conversations of this path compacted to fit the model's context window, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compactions: Vec<Compaction>,
    /// The agent run of the agent node (`@Agent`) the path is at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentLink>,
}

/// A path at an agent node (`@Agent`): the run that works there, and how far the execution has
/// taken in what it journaled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentLink {
    /// The node.
    pub node: String,
    /// The agent's folder, as the annotation names it.
    pub agent: String,
    /// The run's id (`<node>-<visit>`), in the node's workspace
    /// (`.dygram/executions/<id>/agents/<node>/`).
    pub run_id: String,
    /// The last line of the run's journal whose machine-tool result the execution applied.
    pub applied_seq: u64,
    /// The run's model turns so far.
    pub iterations: u64,
    /// The run's pending question: the execution waits for its answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The pending question's id: an answer goes to that question only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question_id: Option<String>,
}

/// A conversation compacted to fit the model's context window: its oldest answers (with their
/// tool results) were replaced by a summary, or by a note when no summary could be had.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compaction {
    /// The agent node of the conversation.
    pub node: String,
    /// The conversation's round trips when it was compacted.
    pub turn: u64,
    /// Answers of the model replaced (with their tool results), this time.
    pub answers: u64,
    /// `summarize` (the model wrote the summary) or `truncate` (a note stands for them).
    pub strategy: String,
    /// What now stands for every answer replaced so far in this conversation.
    pub summary: String,
    /// The window, in tokens.
    pub window: u32,
    /// Estimated tokens of the next request before and after.
    pub tokens_before: u32,
    /// See `tokens_before`.
    pub tokens_after: u32,
    /// When (milliseconds since the Unix epoch).
    pub timestamp: i64,
}

/// What an execution learned of a model's context window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelWindow {
    /// The window a server named when it refused a request for its length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u32>,
    /// Characters per token, calibrated by the prompt tokens the server reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chars_per_token: Option<f64>,
}

/// Earlier answers of an open conversation that compaction replaced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compacted {
    /// Answers replaced so far.
    pub answers: u64,
    /// The summary (or note) that stands for them, given with the prompt.
    pub summary: String,
}

/// A transition decided but held at a barrier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingMove {
    /// Where the path goes.
    pub target: String,
    /// Why (as recorded in the history).
    pub reason: String,
    /// The model's text, for agent decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

impl Path {
    /// A new active path at `node`.
    pub fn new(id: String, node: String, now: i64) -> Self {
        Self {
            id,
            current_node: node,
            status: PathStatus::Active,
            history: Vec::new(),
            step_count: 0,
            node_invocation_counts: Default::default(),
            state_transitions: Vec::new(),
            start_time: now,
            error: None,
            map_context: None,
            pending: None,
            compactions: Vec::new(),
            agent: None,
        }
    }
}

/// Execution limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Steps over all paths (a machine's `maxSteps` attribute overrides it).
    pub max_steps: u64,
    /// Runs of one node on one path.
    pub max_node_invocations: u64,
    /// Time spent executing, in milliseconds (waiting between CLI calls does not count).
    pub timeout: u64,
    /// How many recent state entries loop detection looks at.
    pub cycle_detection_window: usize,
    /// LLM round trips within one node visit.
    pub max_turns: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_steps: 1000,
            max_node_invocations: 100,
            timeout: 300_000,
            cycle_detection_window: 20,
            max_turns: 50,
        }
    }
}

/// Counters over the whole execution.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counters {
    /// Steps over all paths.
    pub step_count: u64,
    /// When the execution started (milliseconds since the Unix epoch).
    pub start_time: i64,
    /// Time spent executing, in milliseconds.
    pub elapsed_time: u64,
    /// Errors so far.
    pub error_count: u64,
    /// Next path number.
    pub next_path: u64,
    /// Next round-robin position for path-by-path stepping.
    #[serde(default)]
    pub next_path_index: usize,
}

/// A conversation with the model inside one node visit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnState {
    /// The path it belongs to.
    pub path_id: String,
    /// The node.
    pub node_name: String,
    /// Messages so far (provider-neutral form).
    pub messages: Vec<llm::Message>,
    /// Tools offered.
    pub tools: Vec<llm::ToolDefinition>,
    /// Text the model wrote so far.
    pub accumulated_text: String,
    /// Round trips so far.
    pub turn_count: u64,
    /// The system prompt (first user message).
    pub system_prompt: String,
    /// Model for this node, when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
    /// The earlier answers compaction replaced; `messages` then starts with the prompt followed by
    /// their summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted: Option<Compacted>,
}

/// A synchronisation point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Barrier {
    /// Paths that must arrive.
    pub required_paths: Vec<String>,
    /// Paths that have arrived.
    pub waiting_paths: Vec<String>,
    /// Whether it opened.
    pub is_released: bool,
    /// Whether arriving paths merge into the last one.
    pub merge: bool,
}

/// A tool built at run time by `construct_tool`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DynamicTool {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// JSON schema of its input.
    pub input_schema: Value,
    /// `code_generation`, `agent_backed` or `composition`.
    pub strategy: String,
    /// Code, prompt or composition.
    pub implementation: String,
}

/// The whole execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionState {
    /// Layout version.
    pub version: String,
    /// The machine as it runs (meta tools may change it).
    #[serde(default)]
    pub machine_snapshot: Value,
    /// Paths, in creation order.
    pub paths: Vec<Path>,
    /// Limits.
    pub limits: Limits,
    /// Counters.
    pub metadata: Counters,
    /// Values of context nodes: `{Ctx: {field: value}}`.
    #[serde(default)]
    pub context_state: Map<String, Value>,
    /// An open conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_state: Option<TurnState>,
    /// Barriers by id.
    #[serde(default)]
    pub barriers: std::collections::BTreeMap<String, Barrier>,
    /// Tools built at run time.
    #[serde(default)]
    pub dynamic_tools: Vec<DynamicTool>,
    /// Improvement proposals recorded by `propose_tool_improvement`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proposals: Vec<Value>,
    /// What the execution learned of each model's context window, by model name.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub model_windows: std::collections::BTreeMap<String, ModelWindow>,
}

/// The overall status of an execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Some path can still run.
    InProgress,
    /// A conversation is open.
    Paused,
    /// Every path ended and none failed.
    Complete,
    /// Every path ended and at least one failed.
    Error,
}

impl Status {
    /// As written in files and output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InProgress => "in_progress",
            Self::Paused => "paused",
            Self::Complete => "complete",
            Self::Error => "error",
        }
    }

    /// Whether nothing is left to do (complete, or ended with an error).
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Complete | Self::Error)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ExecutionState {
    /// Whether any path can still run.
    pub fn has_active(&self) -> bool {
        self.paths.iter().any(|p| p.status == PathStatus::Active)
    }

    /// The status judged over all paths.
    pub fn status(&self) -> Status {
        if self.turn_state.is_some() {
            return Status::Paused;
        }
        if self.has_active() {
            return Status::InProgress;
        }
        if self.paths.iter().any(|p| p.status == PathStatus::Failed) {
            return Status::Error;
        }
        // Paths left waiting at a barrier that can never open end the execution too.
        if self.paths.iter().any(|p| p.status == PathStatus::Waiting) {
            return Status::Error;
        }
        Status::Complete
    }

    /// The question an agent node's run (`@Agent`) waits on: the path, its node and the
    /// question.
    pub fn agent_question(&self) -> Option<(&str, &str, &str)> {
        self.paths.iter().find_map(|p| {
            let link = p
                .agent
                .as_ref()
                .filter(|_| p.status == PathStatus::Active)?;
            let q = link.question.as_deref()?;
            Some((p.id.as_str(), link.node.as_str(), q))
        })
    }

    /// A path by id.
    pub fn path(&self, id: &str) -> Option<&Path> {
        self.paths.iter().find(|p| p.id == id)
    }

    /// A path by id, mutable.
    pub fn path_mut(&mut self, id: &str) -> Option<&mut Path> {
        self.paths.iter_mut().find(|p| p.id == id)
    }

    /// The path the legacy single-path views describe: the first active one, else the first.
    pub fn main_path(&self) -> Option<&Path> {
        self.paths
            .iter()
            .find(|p| p.status == PathStatus::Active)
            .or_else(|| self.paths.first())
    }

    /// Distinct nodes of the main path, in first-seen order (history sources and targets, then the
    /// current node).
    pub fn visited_nodes(&self) -> Vec<String> {
        distinct_nodes(self.main_path())
    }

    /// Distinct nodes of every path, in order of the paths and of their visits (the reference's
    /// `visitedNodes`, [`ExecutionState::visited_nodes`], covers the main path only).
    pub fn visited_nodes_of_all_paths(&self) -> Vec<String> {
        distinct_nodes(&self.paths)
    }

    /// Where the paths that can still go on stand (active, or waiting at a barrier), each node
    /// once.
    pub fn current_nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = Vec::new();
        for p in &self.paths {
            if matches!(p.status, PathStatus::Active | PathStatus::Waiting)
                && !nodes.contains(&p.current_node)
            {
                nodes.push(p.current_node.clone());
            }
        }
        nodes
    }

    /// The last `state` node entered by the path (`activeState` in conditions).
    pub fn active_state(&self, path: &Path) -> String {
        path.state_transitions
            .last()
            .map(|s| s.state.clone())
            .unwrap_or_default()
    }
}

/// The nodes `paths` went through (each transition's source and target, then the current node), each
/// once, in first-seen order.
fn distinct_nodes<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Vec<String> {
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut out = Vec::new();
    for p in paths {
        let names = p
            .history
            .iter()
            .flat_map(|t| [t.from.as_str(), t.to.as_str()])
            .chain(std::iter::once(p.current_node.as_str()));
        for n in names {
            if seen.insert(n) {
                out.push(n.to_string());
            }
        }
    }
    out
}
