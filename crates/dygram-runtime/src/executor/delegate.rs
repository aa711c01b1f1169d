//! Agent nodes (`@Agent("path")`): one model turn of the node's agent run per unit of work, the
//! machine tools it called applied from its journal ([`crate::agents`]).
//!
//! A unit first applies what the run journaled past the line the execution applied last (left by
//! a call killed before its commit), then takes the turn on the caught-up execution: the tools
//! offered, the answers of the machine's tools during the turn and the effects applied after it
//! all see the same state.

use serde_json::{Map, Value, json};

use super::*;
use crate::agents::{
    self, AgentCall, AgentDriver, AgentStop, AgentTurn, MachineCall, MachineTools, ToolAnswer,
};
use crate::state::AgentLink;

impl<'c> Executor<'c> {
    /// Runs the agents of agent nodes through `driver` (without one such a node stops the call
    /// with [`RuntimeError::NoAgents`]).
    pub fn with_agents(&mut self, driver: &'c dyn AgentDriver) {
        self.agents = Some(driver);
    }

    /// The question an agent node's run waits on: the path, its node and the question.
    pub fn agent_question(&self) -> Option<(&str, &str, &str)> {
        self.state.agent_question()
    }

    /// Gives the answer to the pending question of an agent node's run: the next turn of a node
    /// whose run waits for that question takes it ([`Executor::agent_answer_taken`]).
    pub fn answer_agent(&mut self, answer: String) {
        self.agent_answer = Some(answer);
    }

    /// Whether the answer given with [`Executor::answer_agent`] reached the question it was for.
    pub fn agent_answer_taken(&self) -> bool {
        self.agent_answer_taken
    }

    /// Whether the path is at the agent node its agent link names (a visit under way).
    pub(super) fn in_agent_visit(&self, id: &str) -> bool {
        self.state.path(id).is_some_and(|p| {
            p.agent
                .as_ref()
                .is_some_and(|link| link.node == p.current_node)
        })
    }

    /// Whether path `id`'s agent waits for an answer this call does not bring.
    fn waits_unanswered(&self, id: &str) -> bool {
        self.agent_answer.is_none()
            && self
                .state
                .path(id)
                .and_then(|p| p.agent.as_ref())
                .is_some_and(|l| l.question.is_some())
    }

    /// Whether every active path waits for an agent's answer nobody gave.
    pub(super) fn awaits_agent_answer(&self) -> bool {
        let mut active = self
            .state
            .paths
            .iter()
            .filter(|p| p.status == PathStatus::Active)
            .peekable();
        active.peek().is_some() && active.all(|p| self.waits_unanswered(&p.id))
    }

    /// Drives the visit of path `id` to its end, a turn at a time, within the turn limit: until
    /// the path leaves the node, or its agent waits for an answer nobody gave.
    pub(super) fn finish_visit(&mut self, id: &str) -> Result<(), RuntimeError> {
        for _ in 0..self.state.limits.max_turns.max(1) {
            let outcome = self.delegate(id)?;
            if outcome == TurnOutcome::Idle || !self.in_agent_visit(id) || self.waits_unanswered(id)
            {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Begins path `id`'s visit of agent node `node`: limits counted, the run named. False when
    /// the path failed.
    pub(super) fn begin_visit(&mut self, id: &str, node: &str) -> bool {
        self.enter(id) && self.check_cycle(id) && self.name_visit(id, node)
    }

    /// Names the run of the visit path `id` begins at `node` (entered already).
    pub(super) fn name_visit(&mut self, id: &str, node: &str) -> bool {
        let agent = self
            .machine
            .node(node)
            .and_then(agent_of)
            .unwrap_or_default();
        let Some(path) = self.state.path_mut(id) else {
            return false;
        };
        let visit = path.node_invocation_counts.get(node).copied().unwrap_or(1);
        path.agent = Some(AgentLink {
            node: node.to_string(),
            agent,
            run_id: agents::run_id(node, id, visit),
            applied_seq: 0,
            iterations: 0,
            question: None,
            question_id: None,
        });
        true
    }

    /// One unit of the agent of path `id`'s node: the visit begun on the first (limits counted,
    /// the run named); what the run journaled past the last line applied caught up; then one
    /// turn. `Idle` when the run waits, as it did, for an answer this call does not bring.
    pub(super) fn delegate(&mut self, id: &str) -> Result<TurnOutcome, RuntimeError> {
        let node = self
            .state
            .path(id)
            .map(|p| p.current_node.clone())
            .unwrap_or_default();
        let Some(driver) = self.agents else {
            return Err(RuntimeError::NoAgents { node });
        };
        if !self.in_agent_visit(id) && !self.begin_visit(id, &node) {
            return Ok(TurnOutcome::Stepped);
        }
        let Some(mut link) = self.state.path(id).and_then(|p| p.agent.clone()) else {
            return Ok(TurnOutcome::Stepped);
        };
        let (agent, run_id, question_id) = (
            link.agent.clone(),
            link.run_id.clone(),
            link.question_id.clone(),
        );
        let task = self.agent_task(id, &node);
        let names = self.machine_tool_names(&node);
        let agent_error = |source| RuntimeError::Agent {
            node: node.clone(),
            source,
        };
        // What an earlier call left journaled, applied first.
        let mut call = AgentCall {
            node: &node,
            agent: &agent,
            run_id: &run_id,
            task: &task,
            tools: &[],
            names: &names,
            answer: None,
            question_id: question_id.as_deref(),
            applied_seq: link.applied_seq,
        };
        let journaled = driver.journaled(&call).map_err(agent_error)?;
        let caught_up = !journaled.calls.is_empty();
        let moved = self.apply_calls(id, &node, &run_id, &journaled.calls);
        link.applied_seq = link.applied_seq.max(journaled.last_seq);
        if let Some(target) = moved {
            self.set_link(id, None);
            let output = Some(journaled.text).filter(|t| !t.is_empty());
            self.take_chosen(id, &node, &target, output);
            return Ok(TurnOutcome::TurnEnded);
        }
        self.set_link(id, Some(link.clone()));
        // The turn, on a copy of the caught-up execution.
        let defs = self.machine_tool_definitions(id, &node);
        let mut machine_tools = ScratchTools {
            executor: self.scratch(),
            path: id.to_string(),
            node: node.clone(),
            offered: defs.iter().map(|d| d.name.clone()).collect(),
            chosen: None,
        };
        call.tools = &defs;
        call.applied_seq = link.applied_seq;
        let answer = self
            .agent_answer
            .clone()
            .filter(|_| link.question.is_some());
        call.answer = answer.as_deref();
        let turn = driver
            .turn(&call, &mut machine_tools)
            .map_err(agent_error)?;
        if turn.answer_taken {
            self.agent_answer = None;
            self.agent_answer_taken = true;
        }
        let unchanged = !caught_up
            && turn.calls.is_empty()
            && matches!(&turn.stop, AgentStop::Waiting { id: q, .. } if link.question_id.as_ref() == Some(q));
        if unchanged {
            return Ok(TurnOutcome::Idle);
        }
        Ok(self.apply_agent_turn(id, &node, link, turn))
    }

    /// The node's prompt with its templates filled: the agent's task.
    fn agent_task(&self, id: &str, node: &str) -> String {
        let prompt = self
            .machine
            .node(node)
            .and_then(Node::prompt)
            .unwrap_or_default();
        match self.state.path(id) {
            Some(path) => prompt::expand_templates(&prompt, &self.variables(path)),
            None => prompt,
        }
    }

    /// The machine's tools an agent node offers its agent: its open transitions, and reads and
    /// writes of the contexts it may use.
    fn machine_tool_definitions(&self, id: &str, node: &str) -> Vec<llm::ToolDefinition> {
        let mut defs: Vec<llm::ToolDefinition> = Vec::new();
        for e in self.choice_edges(node) {
            let def = tools::transition(&e.target);
            if self.edge_open(id, e) && !defs.iter().any(|d| d.name == def.name) {
                defs.push(def);
            }
        }
        defs.extend(self.node_context_tools(node));
        defs
    }

    /// Every machine tool of the node, whether open now or not: what is read back from a run's
    /// journal (a transition open when it was called may be closed now).
    fn machine_tool_names(&self, node: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .choice_edges(node)
            .iter()
            .map(|e| format!("{}{}", tools::TRANSITION, e.target))
            .collect();
        names.extend(self.node_context_tools(node).into_iter().map(|d| d.name));
        let mut seen = std::collections::HashSet::new();
        names.retain(|n| seen.insert(n.clone()));
        names
    }

    /// Reads and writes of the contexts the node may use.
    fn node_context_tools(&self, node: &str) -> Vec<llm::ToolDefinition> {
        self.machine
            .node(node)
            .map(|n| conversation::context_tools(&self.context_access(n)))
            .unwrap_or_default()
    }

    /// Applies machine tool calls a run journaled, in order: writes change the context, the
    /// first transition is the one taken (returned).
    fn apply_calls(
        &mut self,
        id: &str,
        node: &str,
        run: &str,
        calls: &[MachineCall],
    ) -> Option<String> {
        let mut chosen: Option<String> = None;
        for call in calls {
            let result = if call.name.starts_with(tools::READ) {
                Ok(json!({"success": true}))
            } else {
                self.run_tool(id, node, &call.name, &call.args, &mut chosen)
            };
            let (is_error, result) = match result {
                Ok(v) => (false, v.to_string()),
                Err(e) => (true, json!({"error": e.to_string()}).to_string()),
            };
            self.events.push(ExecutionEvent::ToolCall {
                path: id.to_string(),
                id: format!("{run}:{}", call.seq),
                name: call.name.clone(),
                input: call.args.clone(),
                is_error,
                result,
            });
        }
        chosen
    }

    /// Applies a turn: the machine tool calls it journaled, then where its run stands.
    fn apply_agent_turn(
        &mut self,
        id: &str,
        node: &str,
        mut link: AgentLink,
        turn: AgentTurn,
    ) -> TurnOutcome {
        let fresh: Vec<MachineCall> = turn
            .calls
            .iter()
            .filter(|c| c.seq > link.applied_seq)
            .cloned()
            .collect();
        let chosen = self.apply_calls(id, node, &link.run_id, &fresh);
        link.applied_seq = link.applied_seq.max(turn.last_seq);
        link.iterations = turn.iterations;
        self.events.push(ExecutionEvent::AgentTurn {
            path: id.to_string(),
            node: node.to_string(),
            run: link.run_id.clone(),
            run_dir: turn.run_dir.display().to_string(),
            iterations: turn.iterations,
            status: turn.stop.name().to_string(),
        });
        let text = match &turn.stop {
            AgentStop::Completed { answer } if !answer.is_empty() => {
                self.events.push(ExecutionEvent::Output {
                    path: id.to_string(),
                    text: answer.clone(),
                });
                Some(answer.clone())
            }
            _ => None,
        };
        if let Some(target) = chosen {
            self.set_link(id, None);
            self.take_chosen(id, node, &target, text);
            return TurnOutcome::TurnEnded;
        }
        match turn.stop {
            AgentStop::Paused => {
                link.question = None;
                link.question_id = None;
                self.set_link(id, Some(link));
                TurnOutcome::TurnContinues
            }
            AgentStop::Waiting {
                id: question_id,
                question,
            } => {
                self.events.push(ExecutionEvent::Waiting {
                    path: id.to_string(),
                    node: node.to_string(),
                    reason: format!("agent run {} asks: {question}", link.run_id),
                });
                link.question = Some(question);
                link.question_id = Some(question_id);
                self.set_link(id, Some(link));
                TurnOutcome::TurnContinues
            }
            AgentStop::Completed { .. } => {
                self.set_link(id, None);
                self.agent_done(id, node, &link.run_id, text);
                TurnOutcome::TurnEnded
            }
            AgentStop::Failed { error } => {
                self.set_link(id, None);
                self.fail(
                    id,
                    format!("Agent run {} at {node} failed: {error}", link.run_id),
                );
                TurnOutcome::TurnEnded
            }
        }
    }

    fn set_link(&mut self, id: &str, link: Option<AgentLink>) {
        if let Some(p) = self.state.path_mut(id) {
            p.agent = link;
        }
    }

    /// The agent ended without taking a transition: an open `@auto` transition or the one open
    /// transition is taken, a node without any completes, and anything else is an error
    /// (running the agent again would only repeat it).
    fn agent_done(&mut self, id: &str, node: &str, run: &str, output: Option<String>) {
        if let Some(index) = self
            .machine
            .outgoing(node)
            .into_iter()
            .find(|e| e.is_auto() && !self.machine.is_data_edge(e) && self.edge_open(id, e))
            .map(|e| e.index)
        {
            self.take_edge(id, index, "@auto annotation", output);
            return;
        }
        let choices = self.choice_edges(node);
        if choices.is_empty() {
            self.complete(id);
            return;
        }
        let open: Vec<usize> = choices
            .iter()
            .filter(|e| self.edge_open(id, e))
            .map(|e| e.index)
            .collect();
        let targets: Vec<String> = choices.iter().map(|e| e.target.clone()).collect();
        match open[..] {
            [only] => self.take_edge(id, only, "agent finished", output),
            _ => self.fail(
                id,
                format!(
                    "Agent run {run} at {node} ended without taking a transition, and {} of its transitions are open ({}): the agent must call one of its transition_to_ tools",
                    open.len(),
                    targets.join(", ")
                ),
            ),
        }
    }
}

/// The agent's folder a node's `@Agent("path")` names.
pub(super) fn agent_of(node: &Node) -> Option<String> {
    node.annotations
        .iter()
        .find(|a| a.name == dygram_core::json::AGENT_ANNOTATION)
        .map(|a| a.value.clone().unwrap_or_default())
}

/// Answers the machine's tools during an agent's turn, on a copy of the execution: the copy
/// sees the turn's own writes, and the execution itself changes only by what the run journaled.
struct ScratchTools {
    executor: Executor<'static>,
    path: String,
    node: String,
    offered: Vec<String>,
    chosen: Option<String>,
}

impl MachineTools for ScratchTools {
    fn call(&mut self, name: &str, args: &Map<String, Value>) -> ToolAnswer {
        let outcome = if self.offered.iter().any(|o| o == name) {
            self.executor.run_tool(
                &self.path,
                &self.node,
                name,
                &Value::Object(args.clone()),
                &mut self.chosen,
            )
        } else {
            Err(ToolError::Unknown(name.to_string()))
        };
        match outcome {
            Ok(v) => ToolAnswer {
                content: v.to_string(),
                ok: true,
                ends_run: name.starts_with(tools::TRANSITION),
            },
            Err(e) => ToolAnswer {
                content: json!({"error": e.to_string()}).to_string(),
                ok: false,
                ends_run: false,
            },
        }
    }
}

impl AgentStop {
    /// `paused`, `waiting`, `completed` or `failed`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Paused => "paused",
            Self::Waiting { .. } => "waiting",
            Self::Completed { .. } => "completed",
            Self::Failed { .. } => "failed",
        }
    }
}
