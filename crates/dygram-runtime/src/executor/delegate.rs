//! Agent nodes (`@Agent("path")`): one model turn of the node's agent run per unit of work, the
//! machine tools it called applied from its journal ([`crate::agents`]).

use serde_json::{Map, Value, json};

use super::*;
use crate::agents::{self, AgentCall, AgentDriver, AgentStop, AgentTurn, MachineTools, ToolAnswer};
use crate::state::AgentLink;

impl<'c> Executor<'c> {
    /// Runs the agents of agent nodes through `driver` (without one such a node stops the call
    /// with [`RuntimeError::NoAgents`]).
    pub fn with_agents(&mut self, driver: &'c dyn AgentDriver) {
        self.agents = Some(driver);
    }

    /// The question an agent node's run waits on: the path, its node and the question.
    pub fn agent_question(&self) -> Option<(&str, &str, &str)> {
        self.state.paths.iter().find_map(|p| {
            let link = p
                .agent
                .as_ref()
                .filter(|_| p.status == PathStatus::Active)?;
            let q = link.question.as_deref()?;
            Some((p.id.as_str(), link.node.as_str(), q))
        })
    }

    /// Gives the answer to the pending question of an agent node's run: the next turn of that
    /// node takes it.
    pub fn answer_agent(&mut self, answer: String) {
        self.agent_answer = Some(answer);
    }

    /// Whether the path is at the agent node its agent link names (a visit under way).
    pub(super) fn in_agent_visit(&self, id: &str) -> bool {
        self.state.path(id).is_some_and(|p| {
            p.agent
                .as_ref()
                .is_some_and(|link| link.node == p.current_node)
        })
    }

    /// Whether the only thing left is an agent's question nobody answered in this call.
    pub(super) fn awaits_agent_answer(&self) -> bool {
        self.agent_answer.is_none()
            && self.agent_question().is_some()
            && self
                .state
                .paths
                .iter()
                .filter(|p| p.status == PathStatus::Active)
                .all(|p| p.agent.as_ref().is_some_and(|l| l.question.is_some()))
    }

    /// One turn of the agent of path `id`'s node: its visit begun on the first (limits counted,
    /// the run named), then the driver's turn applied.
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
        let Some(link) = self.state.path(id).and_then(|p| p.agent.clone()) else {
            return Ok(TurnOutcome::Stepped);
        };
        let task = self.agent_task(id, &node);
        let defs = self.machine_tool_definitions(id, &node);
        let answer = match link.question {
            Some(_) => self.agent_answer.take(),
            None => None,
        };
        let mut machine_tools = ScratchTools {
            executor: self.scratch(),
            path: id.to_string(),
            node: node.clone(),
            offered: defs.iter().map(|d| d.name.clone()).collect(),
            chosen: None,
        };
        let call = AgentCall {
            node: &node,
            agent: &link.agent,
            run_id: &link.run_id,
            task: &task,
            tools: &defs,
            answer: answer.as_deref(),
            applied_seq: link.applied_seq,
        };
        let turn =
            driver
                .turn(&call, &mut machine_tools)
                .map_err(|source| RuntimeError::Agent {
                    node: node.clone(),
                    source,
                })?;
        Ok(self.apply_agent_turn(id, &node, link, turn))
    }

    /// The first call of a visit: the node is entered (limits, counts) and its run named.
    fn begin_visit(&mut self, id: &str, node: &str) -> bool {
        if !self.enter(id) || !self.check_cycle(id) {
            return false;
        }
        self.name_visit(id, node)
    }

    /// Drives the visit of path `id` to its end, a turn at a time, within the turn limit: until
    /// the path leaves the node, or its agent asks a question nobody answered.
    pub(super) fn finish_visit(&mut self, id: &str) -> Result<(), RuntimeError> {
        for _ in 0..self.state.limits.max_turns.max(1) {
            let Some(link) = self.state.path(id).and_then(|p| p.agent.as_ref()) else {
                return Ok(());
            };
            if link.question.is_some() && self.agent_answer.is_none() {
                return Ok(());
            }
            self.delegate(id)?;
            if !self.in_agent_visit(id) {
                return Ok(());
            }
        }
        Ok(())
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
            run_id: agents::run_id(node, visit),
            applied_seq: 0,
            iterations: 0,
            question: None,
        });
        true
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
        if let Some(n) = self.machine.node(node) {
            for (ctx, p) in self.context_access(n) {
                if p.read {
                    defs.push(tools::read(&ctx.name));
                }
                if p.write {
                    defs.push(tools::write(&ctx.name));
                }
            }
        }
        defs
    }

    /// Applies what a turn of the agent journaled (machine tool calls first, in order), then
    /// where its run stands.
    fn apply_agent_turn(
        &mut self,
        id: &str,
        node: &str,
        mut link: AgentLink,
        turn: AgentTurn,
    ) -> TurnOutcome {
        let mut chosen: Option<String> = None;
        for call in turn.calls.iter().filter(|c| c.seq > link.applied_seq) {
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
                id: format!("{}:{}", link.run_id, call.seq),
                name: call.name.clone(),
                input: call.args.clone(),
                is_error,
                result,
            });
        }
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
        let answer = match &turn.stop {
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
            self.hand_back(id, node, &target, answer);
            return TurnOutcome::TurnEnded;
        }
        match turn.stop {
            AgentStop::Paused => {
                link.question = None;
                self.set_link(id, Some(link));
                TurnOutcome::TurnContinues
            }
            AgentStop::Waiting { question } => {
                self.events.push(ExecutionEvent::Waiting {
                    path: id.to_string(),
                    node: node.to_string(),
                    reason: format!("agent run {} asks: {question}", link.run_id),
                });
                link.question = Some(question);
                self.set_link(id, Some(link));
                TurnOutcome::TurnContinues
            }
            AgentStop::Completed { .. } => {
                self.set_link(id, None);
                self.agent_done(id, node, &link.run_id, answer);
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

    /// The transition the agent took: the path moves on, the agent's answer its output.
    fn hand_back(&mut self, id: &str, node: &str, target: &str, output: Option<String>) {
        let edge = self
            .choice_edges(node)
            .into_iter()
            .find(|e| e.target == target && self.edge_open(id, e))
            .or_else(|| {
                self.choice_edges(node)
                    .into_iter()
                    .find(|e| e.target == target)
            })
            .map(|e| e.index);
        match edge {
            Some(edge) => self.take_edge(id, edge, "agent_decision", output),
            None => self.move_to(id, target, "agent_decision", output),
        }
    }

    /// The agent ended without taking a transition: the one open transition is taken, a node
    /// without any completes, and anything else is an error (running the agent again would
    /// only repeat it).
    fn agent_done(&mut self, id: &str, node: &str, run: &str, output: Option<String>) {
        let choices = self.choice_edges(node);
        if let Some(e) = self
            .machine
            .outgoing(node)
            .into_iter()
            .find(|e| e.is_auto() && !self.machine.is_data_edge(e) && self.edge_open(id, e))
        {
            let index = e.index;
            self.take_edge(id, index, "@auto annotation", output);
            return;
        }
        if choices.is_empty() {
            self.complete(id);
            return;
        }
        let open: Vec<usize> = choices
            .iter()
            .filter(|e| self.edge_open(id, e))
            .map(|e| e.index)
            .collect();
        match open[..] {
            [only] => self.take_edge(id, only, "agent finished", output),
            _ => {
                let targets: Vec<&str> = choices.iter().map(|e| e.target.as_str()).collect();
                self.fail(
                    id,
                    format!(
                        "Agent run {run} at {node} ended without taking a transition, and {} of its transitions are open ({}): the agent must call one of its transition_to_ tools",
                        open.len(),
                        targets.join(", ")
                    ),
                );
            }
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
