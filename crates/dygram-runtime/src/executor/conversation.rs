//! Conversations at agent nodes: opening one (tools and system prompt), round trips with the
//! model, and applying an answer.

use serde_json::{Map, Value, json};

use llm::{ChatRequest, ContentBlock, Message};

use super::*;

impl Executor<'_> {
    // ---- conversations ---------------------------------------------------------------------

    pub(super) fn open_turn(
        &mut self,
        id: &str,
        node_name: &str,
        transitions: &[usize],
        spawns: &[usize],
        maps: &[usize],
    ) {
        let Some(node) = self.machine.node(node_name) else {
            return;
        };
        let Some(path) = self.state.path(id) else {
            return;
        };
        let vars = self.variables(path);
        let contexts = self.context_access(node);
        let mut defs = Vec::new();
        let transition_edges: Vec<&Edge> = transitions
            .iter()
            .filter_map(|&i| self.machine.edges.get(i))
            .collect();
        for e in &transition_edges {
            defs.push(tools::transition(&e.target));
        }
        // The prompt names every transition, the closed ones with the condition that opens them.
        let prompt_transitions: Vec<(&Edge, bool)> = self
            .choice_edges(node_name)
            .into_iter()
            .map(|e| (e, transitions.contains(&e.index)))
            .collect();
        defs.extend(context_tools(&contexts));
        for &i in spawns {
            if let Some(e) = self.machine.edges.get(i) {
                defs.push(tools::spawn(&e.target));
            }
        }
        for &i in maps {
            if let Some(e) = self.machine.edges.get(i) {
                defs.push(tools::map_spawn(
                    &e.target,
                    &e.map_source().unwrap_or_default(),
                ));
            }
        }
        let meta = self.machine.meta_enabled(node);
        if meta {
            defs.extend(tools::meta());
        }
        defs.extend(self.state.dynamic_tools.iter().map(tools::dynamic));
        // One tool per name: the first wins (two edges to one target give one transition tool).
        let mut seen = std::collections::HashSet::new();
        defs.retain(|d| seen.insert(d.name.clone()));
        let prompt_contexts: Vec<(&Node, Permissions, Map<String, Value>)> = contexts
            .iter()
            .map(|(ctx, p)| {
                let values = match vars.get(&ctx.name) {
                    Some(Value::Object(m)) => m.clone(),
                    _ => Map::new(),
                };
                (*ctx, p.clone(), values)
            })
            .collect();
        let visited = {
            let mut v: Vec<&str> = path.history.iter().map(|t| t.from.as_str()).collect();
            v.sort_unstable();
            v.dedup();
            v.len()
        };
        let system_prompt = prompt::system_prompt(&PromptInput {
            machine: &self.machine,
            node,
            contexts: prompt_contexts,
            transitions: prompt_transitions,
            visited,
            error_count: self.state.metadata.error_count,
            meta,
            variables: &vars,
        });
        let model_id = node
            .attribute("modelId")
            .or_else(|| self.machine.attributes.get("modelId"))
            .map(prompt::display);
        self.state.turn_state = Some(TurnState {
            path_id: id.to_string(),
            node_name: node_name.to_string(),
            messages: vec![Message::user(system_prompt.clone())],
            tools: defs,
            accumulated_text: String::new(),
            turn_count: 0,
            system_prompt,
            model_id,
            compacted: None,
        });
    }

    /// Replaces the transition tools of an open conversation with the ones open now (first in
    /// the list, as when it was opened).
    fn refresh_transition_tools(&self, turn: &mut TurnState) {
        let mut defs: Vec<llm::ToolDefinition> = Vec::new();
        for e in self.choice_edges(&turn.node_name) {
            let name = format!("{}{}", tools::TRANSITION, e.target);
            if self.edge_open(&turn.path_id, e) && !defs.iter().any(|d| d.name == name) {
                defs.push(tools::transition(&e.target));
            }
        }
        let same = defs.iter().map(|d| &d.name).eq(turn
            .tools
            .iter()
            .filter(|t| t.name.starts_with(tools::TRANSITION))
            .map(|t| &t.name));
        if same {
            return;
        }
        defs.extend(
            turn.tools
                .iter()
                .filter(|t| !t.name.starts_with(tools::TRANSITION))
                .cloned(),
        );
        turn.tools = defs;
    }

    /// What the step rules do with path `id` at `node_name` when the node has transitions and all
    /// of them are closed (the path waits, or fails); `None` when one is open or it has none.
    pub(super) fn all_closed(&self, id: &str, node_name: &str) -> Option<Action> {
        let choices = self.choice_edges(node_name);
        if choices.is_empty() || choices.iter().any(|e| self.edge_open(id, e)) {
            return None;
        }
        let node = self.machine.node(node_name)?;
        Some(self.no_transition(node, &choices, 0))
    }

    /// The model for a conversation: `-m`, else the node's or machine's `modelId`, else the default.
    pub fn model_for(&self, turn: &TurnState) -> String {
        self.options
            .model
            .clone()
            .or_else(|| turn.model_id.clone())
            .unwrap_or_else(|| self.options.default_model.clone())
    }

    /// The request the open conversation sends next. With a known context window, the answer is
    /// limited to a part of it ([`llm::window::answer_limit`]).
    pub fn pending_request(&self) -> Option<ChatRequest> {
        let turn = self.state.turn_state.as_ref()?;
        let max_tokens = match self.context_window(turn) {
            Some(window) => llm::window::answer_limit(window, self.options.max_tokens),
            None => self.options.max_tokens,
        };
        Some(
            ChatRequest::new(self.model_for(turn), turn.messages.clone())
                .with_tools(turn.tools.clone())
                .with_max_tokens(max_tokens),
        )
    }

    /// One round trip of the open conversation.
    pub(super) fn round_trip(&mut self) -> Result<TurnOutcome, RuntimeError> {
        let Some(turn) = self.state.turn_state.as_ref() else {
            return Ok(TurnOutcome::Idle);
        };
        let node = turn.node_name.clone();
        let Some(client) = self.client else {
            return Err(RuntimeError::NoClient { node });
        };
        self.exchange(client)
            .map_err(|source| RuntimeError::Llm { node, source })
    }

    /// Applies the model's answer to the open conversation (also used when the answer comes from
    /// elsewhere, such as a person in manual mode).
    pub fn apply_response(
        &mut self,
        mut turn: TurnState,
        response: llm::ChatResponse,
    ) -> TurnOutcome {
        let id = turn.path_id.clone();
        let text = response.text();
        if !text.is_empty() {
            if !turn.accumulated_text.is_empty() {
                turn.accumulated_text.push('\n');
            }
            turn.accumulated_text.push_str(&text);
            self.events.push(ExecutionEvent::Output {
                path: id.clone(),
                text: text.clone(),
            });
        }
        turn.messages.push(response.to_message());
        let calls: Vec<(String, String, Value)> = response
            .tool_calls()
            .map(|c| (c.id.to_string(), c.name.to_string(), c.arguments.clone()))
            .collect();
        let offered: Vec<String> = turn.tools.iter().map(|t| t.name.clone()).collect();
        let mut results = Vec::new();
        let mut chosen: Option<String> = None;
        for (call_id, name, args) in &calls {
            // A transition may open during the answer (a write before it): the tool checks that.
            self.events.push(ExecutionEvent::ToolStarted {
                path: id.clone(),
                id: call_id.clone(),
                name: name.clone(),
                input: args.clone(),
            });
            let outcome = if !offered.contains(name) && !name.starts_with(tools::TRANSITION) {
                Err(ToolError::Unknown(name.clone()))
            } else {
                self.run_tool(&id, &turn.node_name, name, args, &mut chosen)
            };
            let (content, is_error) = match outcome {
                Ok(v) => (v.to_string(), false),
                Err(e) => (json!({"error": e.to_string()}).to_string(), true),
            };
            self.events.push(ExecutionEvent::ToolCall {
                path: id.clone(),
                id: call_id.clone(),
                name: name.clone(),
                input: args.clone(),
                is_error,
                result: content.clone(),
            });
            results.push(ContentBlock::tool_result(
                call_id.clone(),
                content,
                is_error,
            ));
        }
        if !results.is_empty() {
            turn.messages.push(Message::tool_results(results));
        }
        turn.turn_count += 1;
        // Tools built during this answer are offered from the next round trip on.
        for t in &self.state.dynamic_tools {
            if !turn.tools.iter().any(|d| d.name == t.name) {
                turn.tools.push(tools::dynamic(t));
            }
        }
        if let Some(target) = chosen {
            self.state.turn_state = None;
            let output = (!turn.accumulated_text.is_empty()).then(|| turn.accumulated_text.clone());
            self.take_chosen(&id, &turn.node_name, &target, output);
            return TurnOutcome::TurnEnded;
        }
        if calls.is_empty() {
            // The model answered without tools: the conversation ends. A node without transitions is
            // done; one with an open transition runs again at the next step; one whose transitions
            // are all closed is handled as the step rules handle it (the path waits for other paths
            // that may open them, or fails).
            self.state.turn_state = None;
            if self.choice_edges(&turn.node_name).is_empty() {
                self.complete(&id);
            } else {
                match self.all_closed(&id, &turn.node_name) {
                    Some(Action::Fail(error)) => self.fail(&id, error),
                    Some(Action::Wait(reason)) => self.events.push(ExecutionEvent::Waiting {
                        path: id.clone(),
                        node: turn.node_name.clone(),
                        reason,
                    }),
                    _ => {}
                }
            }
            return TurnOutcome::TurnEnded;
        }
        // What the answer wrote may have opened or closed transitions: the next round trip offers
        // the ones open then.
        self.refresh_transition_tools(&mut turn);
        if turn.turn_count >= self.state.limits.max_turns {
            self.state.turn_state = None;
            self.fail(
                &id,
                format!("Turn limit reached ({} turns)", turn.turn_count),
            );
            return TurnOutcome::TurnEnded;
        }
        self.state.turn_state = Some(turn);
        TurnOutcome::TurnContinues
    }
}

impl Executor<'_> {
    /// Takes the transition to `target` the model (or an agent) chose at `node`: an open edge to
    /// it, else any edge to it, else a move there; `output` is the model's text.
    pub(super) fn take_chosen(
        &mut self,
        id: &str,
        node: &str,
        target: &str,
        output: Option<String>,
    ) {
        let edge = self
            .choice_edges(node)
            .into_iter()
            .find(|e| e.target == target && self.edge_open(id, e))
            .or_else(|| {
                self.machine
                    .outgoing(node)
                    .into_iter()
                    .find(|e| e.target == target)
            })
            .map(|e| e.index);
        match edge {
            Some(edge) => self.take_edge(id, edge, "agent_decision", output),
            None => self.move_to(id, target, "agent_decision", output),
        }
    }
}

/// The read and write tools of the contexts a node may use (as [`Executor::context_access`]
/// lists them), in that order.
pub(super) fn context_tools(contexts: &[(&Node, Permissions)]) -> Vec<llm::ToolDefinition> {
    let mut defs = Vec::new();
    for (ctx, p) in contexts {
        if p.read {
            defs.push(tools::read(&ctx.name));
        }
        if p.write {
            defs.push(tools::write(&ctx.name));
        }
    }
    defs
}
