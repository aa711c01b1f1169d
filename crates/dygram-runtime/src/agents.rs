//! Agent nodes: a task node annotated `@Agent("path")` runs an agent (a delta agent folder)
//! instead of asking the model itself. The executor plans and applies; an [`AgentDriver`] (the
//! `dygram` binary's drives delta's runner) advances the agent's run by one model turn per call.
//!
//! The agent's run keeps its own durable journal. The machine's tools it calls (the node's
//! transitions and context reads and writes) are answered by [`MachineTools`] during the turn,
//! and their effect on the execution is taken from the run's journal afterwards
//! ([`AgentTurn::calls`]): the execution remembers the last journal line it applied
//! ([`crate::state::AgentLink::applied_seq`]). Each unit first catches up what a call killed
//! between the run's journal and the execution's commit left ([`AgentDriver::journaled`]), then
//! takes its turn on the caught-up execution, so no effect is applied twice or lost.

use std::path::PathBuf;

use serde_json::{Map, Value};

use llm::ToolDefinition;

/// What one turn of an agent node needs.
#[derive(Debug, Clone)]
pub struct AgentCall<'a> {
    /// The node.
    pub node: &'a str,
    /// The agent's folder as the annotation names it (relative to the machine file).
    pub agent: &'a str,
    /// The run's id (the node and its visit: the same on every call of one visit).
    pub run_id: &'a str,
    /// The task: the node's prompt, its templates filled.
    pub task: &'a str,
    /// The machine's tools offered to the agent now, besides its own.
    pub tools: &'a [ToolDefinition],
    /// Every machine tool the node has (open or not): the calls read back from the journal.
    pub names: &'a [String],
    /// An answer to the run's pending question, given to this call.
    pub answer: Option<&'a str>,
    /// The id of the question the answer is for (the one the execution showed).
    pub question_id: Option<&'a str>,
    /// The last journal line whose machine-tool result the execution has applied.
    pub applied_seq: u64,
}

/// A machine tool call found in the run's journal with a successful result.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineCall {
    /// The journal line of its result.
    pub seq: u64,
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub args: Value,
}

/// Where the agent's run stands after a turn.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentStop {
    /// It goes on: the next call takes its next turn.
    Paused,
    /// It asks a question (`ask_human`): the execution waits for the answer.
    Waiting {
        /// The question's id (an answer is given to this question only).
        id: String,
        /// The question.
        question: String,
    },
    /// It ended with an answer (or handed the work back through a transition).
    Completed {
        /// The model's last text (empty when it wrote none).
        answer: String,
    },
    /// It failed.
    Failed {
        /// Why.
        error: String,
    },
}

/// What a turn did.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentTurn {
    /// Machine tool calls journaled after [`AgentCall::applied_seq`] with a successful result,
    /// in journal order (those of earlier, killed calls first).
    pub calls: Vec<MachineCall>,
    /// The run's last journal line now.
    pub last_seq: u64,
    /// Where the run stands.
    pub stop: AgentStop,
    /// The run's model turns so far.
    pub iterations: u64,
    /// The run's folder.
    pub run_dir: PathBuf,
    /// Whether the answer given ([`AgentCall::answer`]) went to the run's question.
    pub answer_taken: bool,
}

/// What a run journaled that the execution has not applied yet.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Journaled {
    /// The machine tool calls past [`AgentCall::applied_seq`] with a successful result.
    pub calls: Vec<MachineCall>,
    /// The run's last journal line (0: no run yet).
    pub last_seq: u64,
    /// The model's last text.
    pub text: String,
}

/// The answer to a machine tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolAnswer {
    /// What the model reads (JSON text).
    pub content: String,
    /// Whether it did what was asked.
    pub ok: bool,
    /// A transition taken: the agent's run ends here (its work is handed back).
    pub ends_run: bool,
}

/// The machine's tools, answered during a turn.
pub trait MachineTools {
    /// Answers `name` with `args`.
    fn call(&mut self, name: &str, args: &Map<String, Value>) -> ToolAnswer;
}

/// Why an agent node could not take its turn (nothing of the execution changes).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct AgentError {
    /// What went wrong.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
    /// The cause.
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl AgentError {
    /// An error with a message only.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            hint: None,
            source: None,
        }
    }

    /// With a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// Runs the agents of agent nodes.
pub trait AgentDriver {
    /// What the run of `call` journaled past [`AgentCall::applied_seq`] (nothing for a run not
    /// begun), read without running anything.
    fn journaled(&self, call: &AgentCall<'_>) -> Result<Journaled, AgentError>;

    /// Catches up and takes one model turn of the run `call` names (creating it on its first
    /// call): machine tools are answered by `tools`. A run that has ended, or that waits for an
    /// answer not given, takes no turn and says where it stands.
    fn turn(
        &self,
        call: &AgentCall<'_>,
        tools: &mut dyn MachineTools,
    ) -> Result<AgentTurn, AgentError>;
}

/// The run id of path `path`'s `visit` of an agent node (1 for its first): `<node>-<visit>` on
/// the first path, `<node>-<path>-<visit>` on the others (paths fanned out to one node get runs
/// of their own).
pub fn run_id(node: &str, path: &str, visit: u64) -> String {
    if path == "path_0" {
        format!("{node}-{visit}")
    } else {
        format!("{node}-{path}-{visit}")
    }
}
