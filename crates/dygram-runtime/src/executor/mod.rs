//! Running a machine: steps over all paths, LLM turns at agent nodes, tool calls.
//!
//! A **step** advances every active path by one node: automatic transitions, forks and fan-outs
//! happen at once; a path at an agent node holds a whole conversation with the model (as many round
//! trips as the model needs, up to the turn limit). A **turn** is one round trip: [`Executor::step_turn`]
//! performs exactly one, or one step when no path needs the model, so that a caller can stop and save
//! between any two.

use std::time::Instant;

use serde_json::{Map, Value};

use llm::{ChatRequest, LlmClient};

use super::js;
use super::machine::{Edge, MachineIndex, Node};
use super::prompt::{self, Permissions, PromptInput};
use super::state::{
    Barrier, Counters, DynamicTool, ExecutionState, Limits, MapContext, Path, PathStatus,
    PendingMove, STATE_VERSION, StateEntry, Status, Transition, TurnState,
};
use super::tools;
use dygram_core::condition;

mod by_hand;
mod conversation;
mod delegate;
mod events;
mod planning;
mod tool_calls;
mod window;

pub use by_hand::{MAX_TRIALS, UnknownTool};
pub use events::{EventLog, ExecutionEvent, Listener};
pub use tool_calls::{MapError, ToolError};
pub use window::{CONTEXT_WINDOW, KEEP_RECENT, MIN_CONTEXT_WINDOW};

/// Errors that stop the execution call (path errors are recorded in the state instead).
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The machine has no node to start from.
    #[error("Machine has no start nodes")]
    NoStartNodes,
    /// A node needs the model and there is none.
    #[error("node '{node}' needs an LLM decision, but no LLM client is configured")]
    NoClient {
        /// The node.
        node: String,
    },
    /// A node runs an agent (`@Agent`) and nothing runs agents here.
    #[error(
        "node '{node}' runs an agent (@Agent), and this program does not run agents (dygram execute -i does)"
    )]
    NoAgents {
        /// The node.
        node: String,
    },
    /// The agent of an agent node could not take its turn.
    #[error("agent at node '{node}': {source}")]
    Agent {
        /// The node.
        node: String,
        /// Why.
        #[source]
        source: crate::agents::AgentError,
    },
    /// The model could not be asked.
    #[error("LLM request at node '{node}' failed: {source}")]
    Llm {
        /// The node.
        node: String,
        /// Why.
        #[source]
        source: llm::LlmError,
    },
}

/// Options of an execution.
#[derive(Debug, Clone)]
pub struct Options {
    /// Model given on the command line (wins over everything).
    pub model: Option<String>,
    /// Model when neither the command line nor the machine names one.
    pub default_model: String,
    /// Limits (a machine's `maxSteps` attribute overrides `max_steps`).
    pub limits: Limits,
    /// Limits of code run by dynamic tools.
    pub js_limits: js::Limits,
    /// Clock in milliseconds since the Unix epoch (injectable for deterministic output).
    pub clock: fn() -> i64,
    /// Output limit of each model answer.
    pub max_tokens: u32,
    /// Ask the model for its answers as a stream, so that its text is reported as it arrives
    /// ([`ExecutionEvent::TextDelta`]); a server that refuses a streamed request (some cannot
    /// stream with tools) is asked again without, and from then on.
    pub stream: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            model: None,
            default_model: "claude-3-5-haiku-20241022".to_string(),
            limits: Limits::default(),
            js_limits: js::Limits::default(),
            clock: now_ms,
            max_tokens: 4096,
            stream: false,
        }
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// What one call to [`Executor::step_turn`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    /// One round trip with the model; the conversation goes on.
    TurnContinues,
    /// One round trip with the model that ended the conversation.
    TurnEnded,
    /// One step without the model.
    Stepped,
    /// Nothing left to do.
    Idle,
}

/// What [`Executor::next_unit`] prepared.
#[derive(Debug, Clone, PartialEq)]
pub enum NextUnit {
    /// A request for the model is waiting (the conversation is open).
    Request(ChatRequest),
    /// An agent node's run took one turn (or said it waits for an answer).
    AgentTurn,
    /// One step without the model was performed.
    Stepped,
    /// Nothing left to do.
    Idle,
}

/// What a path does at its node.
#[derive(Debug, Clone)]
struct Plan {
    /// Edges whose targets get new paths (async edges), or list fan-outs (`@map`).
    spawns: Vec<usize>,
    action: Action,
}

#[derive(Debug, Clone)]
enum Action {
    Move {
        edge: usize,
        reason: String,
    },
    Complete,
    Agent {
        transitions: Vec<usize>,
        spawns: Vec<usize>,
        maps: Vec<usize>,
    },
    Wait(String),
    Fail(String),
    /// The node runs an agent (`@Agent`).
    Delegate,
}

/// An execution in memory.
pub struct Executor<'c> {
    state: ExecutionState,
    machine: MachineIndex,
    client: Option<&'c dyn LlmClient>,
    options: Options,
    events: EventLog<'c>,
    machine_changed: bool,
    /// The server refused a streamed request: ask whole from now on.
    stream_refused: bool,
    /// Runs the agents of agent nodes.
    agents: Option<&'c dyn crate::agents::AgentDriver>,
    /// The answer to an agent's pending question, for its next turn.
    agent_answer: Option<String>,
    /// Whether that answer reached its question.
    agent_answer_taken: bool,
}

impl<'c> Executor<'c> {
    /// A new execution of `machine_json` (canonical JSON), one path per start node.
    pub fn start(
        machine_json: Value,
        client: Option<&'c dyn LlmClient>,
        options: Options,
    ) -> Result<Self, RuntimeError> {
        let machine = MachineIndex::from_json(&machine_json);
        let starts = machine.start_nodes();
        if starts.is_empty() {
            return Err(RuntimeError::NoStartNodes);
        }
        let now = (options.clock)();
        let mut limits = options.limits.clone();
        if let Some(max) = machine.number_attribute("maxSteps").filter(|m| *m >= 1.0) {
            limits.max_steps = max as u64;
        }
        let paths: Vec<Path> = starts
            .iter()
            .enumerate()
            .map(|(i, s)| Path::new(format!("path_{i}"), machine.entry_of(s), now))
            .collect();
        let state = ExecutionState {
            version: STATE_VERSION.to_string(),
            context_state: initial_context(&machine),
            machine_snapshot: machine_json,
            metadata: Counters {
                start_time: now,
                next_path: paths.len() as u64,
                ..Counters::default()
            },
            paths,
            limits,
            turn_state: None,
            barriers: Default::default(),
            dynamic_tools: Vec::new(),
            proposals: Vec::new(),
            model_windows: Default::default(),
        };
        Ok(Self::assemble(state, machine, client, options))
    }

    /// Goes on with a saved execution.
    pub fn resume(
        state: ExecutionState,
        client: Option<&'c dyn LlmClient>,
        options: Options,
    ) -> Self {
        let machine = MachineIndex::from_json(&state.machine_snapshot);
        Self::assemble(state, machine, client, options)
    }

    /// An executor of `state` on `machine`, with nothing run yet in this process.
    fn assemble(
        state: ExecutionState,
        machine: MachineIndex,
        client: Option<&'c dyn LlmClient>,
        options: Options,
    ) -> Self {
        Self {
            state,
            machine,
            client,
            options,
            events: EventLog::default(),
            machine_changed: false,
            stream_refused: false,
            agents: None,
            agent_answer: None,
            agent_answer_taken: false,
        }
    }

    /// A copy of the execution that asks no model and runs no agent, to try something on.
    fn scratch(&self) -> Executor<'static> {
        Executor::assemble(
            self.state.clone(),
            self.machine.clone(),
            None,
            self.options.clone(),
        )
    }

    /// The state.
    pub fn state(&self) -> &ExecutionState {
        &self.state
    }

    /// The state, taken.
    pub fn into_state(self) -> ExecutionState {
        self.state
    }

    /// The machine as it runs.
    pub fn machine(&self) -> &MachineIndex {
        &self.machine
    }

    /// Whether meta tools changed the machine since this executor was created.
    pub fn machine_changed(&self) -> bool {
        self.machine_changed
    }

    /// Events since the last call, taken.
    pub fn take_events(&mut self) -> Vec<ExecutionEvent> {
        self.events.take()
    }

    /// Gives every event to `listener` the moment it happens (besides keeping it for
    /// [`Executor::take_events`]): a caller that streams progress sees a tool start before the model
    /// is asked again.
    pub fn listen(&mut self, listener: Listener<'c>) {
        self.events.listen(listener);
    }

    /// Overall status.
    pub fn status(&self) -> Status {
        self.state.status()
    }

    /// Runs steps until no path is active (or `max_steps` calls). Returns the final status.
    pub fn run(&mut self, max_steps: usize) -> Result<Status, RuntimeError> {
        for _ in 0..max_steps {
            if !self.step()? || self.awaits_agent_answer() {
                break;
            }
        }
        Ok(self.status())
    }

    /// One step of every active path. Returns whether any path is still active.
    pub fn step(&mut self) -> Result<bool, RuntimeError> {
        let started = Instant::now();
        let result = self.step_inner(None);
        self.account(started);
        result?;
        Ok(self.state.has_active())
    }

    /// One step of one path, taking the active paths in turn. Returns whether any is still active.
    pub fn step_path(&mut self) -> Result<bool, RuntimeError> {
        let started = Instant::now();
        let active: Vec<String> = self
            .state
            .paths
            .iter()
            .filter(|p| p.status == PathStatus::Active)
            .map(|p| p.id.clone())
            .collect();
        if let Some(id) = active
            .get(self.state.metadata.next_path_index % active.len().max(1))
            .cloned()
        {
            self.state.metadata.next_path_index += 1;
            let result = self.step_inner(Some(&id));
            self.account(started);
            result?;
        }
        Ok(self.state.has_active())
    }

    /// Exactly one LLM round trip, or one step when no path needs the model.
    pub fn step_turn(&mut self) -> Result<TurnOutcome, RuntimeError> {
        let started = Instant::now();
        let result = self.step_turn_inner();
        self.account(started);
        result
    }

    fn account(&mut self, started: Instant) {
        self.state.metadata.elapsed_time += started.elapsed().as_millis() as u64;
    }

    fn step_turn_inner(&mut self) -> Result<TurnOutcome, RuntimeError> {
        match self.next_unit()? {
            NextUnit::Request(_) => self.round_trip(),
            NextUnit::AgentTurn => Ok(TurnOutcome::TurnContinues),
            NextUnit::Stepped => Ok(TurnOutcome::Stepped),
            NextUnit::Idle => Ok(TurnOutcome::Idle),
        }
    }

    /// Prepares the next unit of work without calling the model: the request the open
    /// conversation (or the first path that needs the model, whose conversation this opens) sends
    /// next; otherwise one step without the model is performed.
    pub fn next_unit(&mut self) -> Result<NextUnit, RuntimeError> {
        if self.state.turn_state.is_some() {
            return Ok(self
                .pending_request()
                .map_or(NextUnit::Idle, NextUnit::Request));
        }
        if !self.state.has_active() {
            return Ok(NextUnit::Idle);
        }
        let ids: Vec<String> = self.active_ids();
        for id in ids {
            let Some(path) = self.state.path(&id) else {
                continue;
            };
            let node = path.current_node.clone();
            if path.pending.is_some() {
                // A transition held at a barrier that has opened: the step below makes it.
                continue;
            }
            if self.in_agent_visit(&id) {
                // An agent that waits, as it did, for an answer not given leaves the unit to
                // the other paths.
                if self.delegate(&id)? == TurnOutcome::Idle {
                    continue;
                }
                return Ok(NextUnit::AgentTurn);
            }
            let plan = self.plan(&id);
            if matches!(plan.action, Action::Delegate) {
                if self.begin_visit(&id, &node) {
                    self.spawn_all(&id, &plan.spawns);
                    if self
                        .state
                        .path(&id)
                        .is_some_and(|p| p.status == PathStatus::Active)
                    {
                        self.delegate(&id)?;
                    }
                }
                return Ok(NextUnit::AgentTurn);
            }
            if let Action::Agent {
                transitions,
                spawns,
                maps,
            } = plan.action
            {
                if !self.enter(&id) {
                    return Ok(NextUnit::Stepped);
                }
                self.spawn_all(&id, &plan.spawns);
                self.open_turn(&id, &node, &transitions, &spawns, &maps);
                return Ok(self
                    .pending_request()
                    .map_or(NextUnit::Stepped, NextUnit::Request));
            }
        }
        self.step_inner(None)?;
        Ok(NextUnit::Stepped)
    }

    /// Ends the execution on an error that stopped a call (the model could not be asked): the
    /// path that needed the model fails with the error's message, so the status, the error count
    /// and every report agree that the execution ended with an error.
    pub fn abort(&mut self, error: &RuntimeError) {
        let node = match error {
            RuntimeError::NoClient { node }
            | RuntimeError::Llm { node, .. }
            | RuntimeError::NoAgents { node }
            | RuntimeError::Agent { node, .. } => Some(node.as_str()),
            RuntimeError::NoStartNodes => None,
        };
        let id = self
            .state
            .turn_state
            .as_ref()
            .map(|t| t.path_id.clone())
            .or_else(|| {
                self.state
                    .paths
                    .iter()
                    .find(|p| {
                        p.status == PathStatus::Active && node.is_none_or(|n| p.current_node == n)
                    })
                    .map(|p| p.id.clone())
            });
        if let Some(id) = id {
            self.fail(&id, error.to_string());
        }
    }

    /// Answers the open conversation with a response obtained elsewhere (a person, a queue).
    pub fn answer(&mut self, response: llm::ChatResponse) -> TurnOutcome {
        let Some(turn) = self.state.turn_state.clone() else {
            return TurnOutcome::Idle;
        };
        let model = self.model_for(&turn);
        self.events.push(ExecutionEvent::LlmCall {
            path: turn.path_id.clone(),
            node: turn.node_name.clone(),
            tools: turn.tools.iter().map(|t| t.name.clone()).collect(),
            messages: turn.messages.len(),
            model,
        });
        self.apply_response(turn, response)
    }

    fn active_ids(&self) -> Vec<String> {
        self.state
            .paths
            .iter()
            .filter(|p| p.status == PathStatus::Active)
            .map(|p| p.id.clone())
            .collect()
    }

    fn step_inner(&mut self, only: Option<&str>) -> Result<(), RuntimeError> {
        // A conversation left open by the turn API is finished first.
        while self.state.turn_state.is_some() {
            self.round_trip()?;
        }
        let ids: Vec<String> = match only {
            Some(id) => vec![id.to_string()],
            None => self.active_ids(),
        };
        for id in ids {
            if self
                .state
                .path(&id)
                .is_none_or(|p| p.status != PathStatus::Active)
            {
                continue;
            }
            // An agent node's visit goes on (its agent's question waits for an answer).
            if self.in_agent_visit(&id) {
                self.finish_visit(&id)?;
                continue;
            }
            // A transition held at a barrier that has opened since.
            if let Some(pending) = self.state.path_mut(&id).and_then(|p| p.pending.take()) {
                self.move_to(&id, &pending.target, &pending.reason, pending.output);
                continue;
            }
            // What entering changes, to take it back if the path only waits (bounded in size).
            let before = self.state.path(&id).map(|p| {
                (
                    p.node_invocation_counts.get(&p.current_node).copied(),
                    p.step_count,
                    p.state_transitions.clone(),
                    self.state.metadata.step_count,
                )
            });
            if !self.enter(&id) {
                continue;
            }
            let plan = self.plan(&id);
            let node = self
                .state
                .path(&id)
                .map(|p| p.current_node.clone())
                .unwrap_or_default();
            if let Action::Wait(reason) = plan.action {
                // Waiting is not running the node: no counts, no loop.
                if let Some((count, path_steps, entries, steps)) = before {
                    self.state.metadata.step_count = steps;
                    if let Some(p) = self.state.path_mut(&id) {
                        match count {
                            Some(c) => {
                                p.node_invocation_counts.insert(p.current_node.clone(), c);
                            }
                            None => {
                                p.node_invocation_counts.remove(&p.current_node);
                            }
                        }
                        p.step_count = path_steps;
                        p.state_transitions = entries;
                    }
                }
                self.events.push(ExecutionEvent::Waiting {
                    path: id.clone(),
                    node,
                    reason,
                });
                continue;
            }
            if !self.check_cycle(&id) {
                continue;
            }
            self.spawn_all(&id, &plan.spawns);
            if self
                .state
                .path(&id)
                .is_none_or(|p| p.status != PathStatus::Active)
            {
                continue;
            }
            match plan.action {
                Action::Move { edge, reason } => self.take_edge(&id, edge, &reason, None),
                Action::Complete => self.complete(&id),
                Action::Wait(_) => {}
                Action::Fail(error) => self.fail(&id, error),
                Action::Delegate => {
                    // Entered above: the visit is named here, and driven to its end.
                    self.name_visit(&id, &node);
                    self.finish_visit(&id)?;
                }
                Action::Agent {
                    transitions,
                    spawns,
                    maps,
                } => {
                    self.open_turn(&id, &node, &transitions, &spawns, &maps);
                    while self.state.turn_state.is_some() {
                        self.round_trip()?;
                    }
                }
            }
        }
        Ok(())
    }

    // ---- entering a node -------------------------------------------------------------------

    /// Limit checks and counters when a path runs its node. False when the path failed.
    fn enter(&mut self, id: &str) -> bool {
        let limits = self.state.limits.clone();
        let steps = self.state.metadata.step_count;
        let elapsed = self.state.metadata.elapsed_time;
        let Some(path) = self.state.path(id) else {
            return false;
        };
        let node = path.current_node.clone();
        if self.machine.node(&node).is_none() {
            self.fail(id, format!("Node {node} not found"));
            return false;
        }
        let invocations = path.node_invocation_counts.get(&node).copied().unwrap_or(0);
        let error = if steps >= limits.max_steps {
            Some(format!(
                "Execution exceeded maximum steps ({})",
                limits.max_steps
            ))
        } else if invocations >= limits.max_node_invocations {
            Some(format!(
                "Node '{node}' exceeded maximum invocation limit ({})",
                limits.max_node_invocations
            ))
        } else if elapsed > limits.timeout {
            Some(format!("Execution timeout exceeded ({}ms)", limits.timeout))
        } else {
            None
        };
        if let Some(e) = error {
            self.fail(id, e);
            return false;
        }
        let now = (self.options.clock)();
        let is_state = self
            .machine
            .node(&node)
            .is_some_and(|n| n.ty.as_deref() == Some("state"));
        self.state.metadata.step_count += 1;
        let Some(path) = self.state.path_mut(id) else {
            return false;
        };
        *path.node_invocation_counts.entry(node.clone()).or_default() += 1;
        path.step_count += 1;
        if is_state {
            path.state_transitions.push(StateEntry {
                state: node,
                timestamp: now,
            });
            // Only the recent entries matter (loop detection, `activeState`): the list stays short
            // however long the execution runs.
            let keep = limits.cycle_detection_window.max(1) * 2;
            if path.state_transitions.len() > keep {
                let extra = path.state_transitions.len() - keep;
                path.state_transitions.drain(..extra);
            }
        }
        true
    }

    /// Fails the path when its recent state entries loop. False when it failed.
    fn check_cycle(&mut self, id: &str) -> bool {
        let window = self.state.limits.cycle_detection_window;
        let cycle = self
            .state
            .path(id)
            .and_then(|p| detect_cycle(&p.state_transitions, window));
        match cycle {
            Some(cycle) => {
                self.fail(id, format!("Infinite loop detected: {cycle}"));
                false
            }
            None => true,
        }
    }

    // ---- moving paths ----------------------------------------------------------------------

    fn take_edge(&mut self, id: &str, edge: usize, reason: &str, output: Option<String>) {
        let Some(e) = self.machine.edges.get(edge).cloned() else {
            return;
        };
        if let Some((barrier, merge)) = e.barrier()
            && !self.arrive(id, &barrier, merge)
        {
            // Held: the transition is made when the barrier opens, without running the node again.
            if let Some(p) = self.state.path_mut(id) {
                p.pending = Some(PendingMove {
                    target: e.target.clone(),
                    reason: reason.to_string(),
                    output,
                });
            }
            return;
        }
        self.move_to(id, &e.target, reason, output);
    }

    fn move_to(&mut self, id: &str, target: &str, reason: &str, output: Option<String>) {
        let entry = self.machine.entry_of(target);
        let reason = if entry == target {
            reason.to_string()
        } else {
            format!("{reason} (module entry: {target} -> {entry})")
        };
        let now = (self.options.clock)();
        let Some(path) = self.state.path_mut(id) else {
            return;
        };
        let from = std::mem::replace(&mut path.current_node, entry.clone());
        path.history.push(Transition {
            from: from.clone(),
            to: entry.clone(),
            transition: reason.clone(),
            timestamp: now,
            output,
        });
        self.events.push(ExecutionEvent::Transition {
            path: id.to_string(),
            from,
            to: entry,
            reason,
        });
    }

    /// A path reaches a barrier: true when it may go on.
    fn arrive(&mut self, id: &str, barrier: &str, merge: bool) -> bool {
        let required: Vec<String> = self
            .state
            .paths
            .iter()
            .filter(|p| matches!(p.status, PathStatus::Active | PathStatus::Waiting))
            .map(|p| p.id.clone())
            .collect();
        let b = self
            .state
            .barriers
            .entry(barrier.to_string())
            .or_insert_with(|| Barrier {
                required_paths: required,
                waiting_paths: Vec::new(),
                is_released: false,
                merge,
            });
        if b.is_released {
            return true;
        }
        if !b.waiting_paths.iter().any(|p| p == id) {
            b.waiting_paths.push(id.to_string());
        }
        let all = b.required_paths.iter().all(|p| b.waiting_paths.contains(p));
        if !all {
            let node = self
                .state
                .path(id)
                .map(|p| p.current_node.clone())
                .unwrap_or_default();
            if let Some(p) = self.state.path_mut(id) {
                p.status = PathStatus::Waiting;
            }
            self.events.push(ExecutionEvent::Waiting {
                path: id.to_string(),
                node,
                reason: format!("at barrier {barrier}"),
            });
            return false;
        }
        b.is_released = true;
        let others: Vec<String> = b
            .waiting_paths
            .iter()
            .filter(|p| *p != id)
            .cloned()
            .collect();
        let merge = b.merge;
        for other in others {
            if let Some(p) = self.state.path_mut(&other) {
                p.status = if merge {
                    PathStatus::Completed
                } else {
                    PathStatus::Active
                };
            }
        }
        true
    }

    fn complete(&mut self, id: &str) {
        if let Some(p) = self.state.path_mut(id) {
            p.status = PathStatus::Completed;
            let node = p.current_node.clone();
            self.events.push(ExecutionEvent::Completed {
                path: id.to_string(),
                node,
            });
        }
    }

    fn fail(&mut self, id: &str, error: String) {
        self.state.metadata.error_count += 1;
        if let Some(p) = self.state.path_mut(id) {
            p.status = PathStatus::Failed;
            p.error = Some(error.clone());
            let node = p.current_node.clone();
            self.events.push(ExecutionEvent::Failed {
                path: id.to_string(),
                node,
                error,
            });
        }
        if self
            .state
            .turn_state
            .as_ref()
            .is_some_and(|t| t.path_id == id)
        {
            self.state.turn_state = None;
        }
    }

    fn new_path(&mut self, parent: &str, target: &str, map: Option<MapContext>) -> String {
        let id = format!("path_{}", self.state.metadata.next_path);
        self.state.metadata.next_path += 1;
        let node = self.machine.entry_of(target);
        let mut path = Path::new(id.clone(), node.clone(), (self.options.clock)());
        path.map_context = map;
        self.state.paths.push(path);
        self.events.push(ExecutionEvent::Spawned {
            path: id.clone(),
            node,
            parent: parent.to_string(),
        });
        id
    }

    /// New paths for async edges and `@map` fan-outs taken automatically.
    fn spawn_all(&mut self, id: &str, edges: &[usize]) {
        for &i in edges {
            let Some(e) = self.machine.edges.get(i).cloned() else {
                continue;
            };
            if let Some(source) = e.map_source() {
                if let Err(err) = self.map_spawn(id, &e, &source) {
                    self.fail(id, err.to_string());
                }
            } else {
                self.new_path(id, &e.target, None);
            }
        }
    }

    /// One path per item of the list at `source` (`Ctx.items`). Returns the new path ids.
    fn map_spawn(&mut self, id: &str, edge: &Edge, source: &str) -> Result<Vec<String>, MapError> {
        let source = source.trim().trim_matches('"').to_string();
        if source.is_empty() {
            return Err(MapError::NoSource);
        }
        let vars = match self.state.path(id) {
            Some(p) => self.variables(p),
            None => Map::new(),
        };
        let list = prompt::lookup(&source, &vars)
            .cloned()
            .ok_or_else(|| MapError::Unresolved(source.clone()))?;
        let Value::Array(items) = list else {
            return Err(MapError::NotAnArray {
                list: source,
                got: type_name(&list),
            });
        };
        let group = edge.map_group().unwrap_or_else(|| source.replace('.', "_"));
        let mut ids = Vec::new();
        for (index, item) in items.into_iter().enumerate() {
            let map = MapContext {
                source_path_id: id.to_string(),
                map_source: source.clone(),
                item,
                index,
                group_id: group.clone(),
            };
            ids.push(self.new_path(id, &edge.target, Some(map)));
        }
        Ok(ids)
    }
}

/// Initial values of context nodes (type `context`, at least one attribute).
fn initial_context(machine: &MachineIndex) -> Map<String, Value> {
    let mut out = Map::new();
    for n in &machine.nodes {
        if n.ty.as_deref() != Some("context") || n.attributes.is_empty() {
            continue;
        }
        let mut values = Map::new();
        for (k, v) in &n.attributes {
            values.insert(k.clone(), context_value(v));
        }
        out.insert(n.name.clone(), Value::Object(values));
    }
    out
}

/// A context attribute's value: JSON written inside a string is read as JSON.
fn context_value(v: &Value) -> Value {
    if let Value::String(s) = v {
        let t = s.trim();
        let json_like =
            (t.starts_with('{') && t.ends_with('}')) || (t.starts_with('[') && t.ends_with(']'));
        if json_like && let Ok(parsed) = serde_json::from_str::<Value>(t) {
            return parsed;
        }
    }
    v.clone()
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A loop among recent state entries: the last `k` entries repeat the `k` before them (k ≥ 2).
fn detect_cycle(entries: &[StateEntry], window: usize) -> Option<String> {
    let start = entries.len().saturating_sub(window);
    let recent: Vec<&str> = entries[start..].iter().map(|e| e.state.as_str()).collect();
    let n = recent.len();
    for k in 2..=n / 2 {
        if recent[n - k..] == recent[n - 2 * k..n - k] {
            let mut cycle: Vec<&str> = recent[n - k..].to_vec();
            cycle.push(recent[n - k]);
            return Some(cycle.join(" -> "));
        }
    }
    None
}
