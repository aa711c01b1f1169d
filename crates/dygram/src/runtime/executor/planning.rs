//! Planning: what a path does at its node (the step rules), the variables conditions see, and
//! which transitions are open.

use serde_json::{Map, Value, json};

use super::*;

impl Executor<'_> {
    // ---- planning --------------------------------------------------------------------------

    /// Variables conditions and templates see on a path.
    pub fn variables(&self, path: &Path) -> Map<String, Value> {
        let mut vars: Map<String, Value> = self.machine.attributes.clone();
        for n in &self.machine.nodes {
            if !n.attributes.is_empty() {
                vars.insert(n.name.clone(), Value::Object(n.attribute_object()));
            }
        }
        for (name, values) in &self.state.context_state {
            let mut merged = match vars.get(name) {
                Some(Value::Object(m)) => m.clone(),
                _ => Map::new(),
            };
            if let Value::Object(values) = values {
                for (k, v) in values {
                    merged.insert(k.clone(), v.clone());
                }
            }
            vars.insert(name.clone(), Value::Object(merged));
        }
        if let Some(m) = &path.map_context {
            vars.insert("_mapItem".into(), m.item.clone());
            vars.insert("_mapIndex".into(), json!(m.index));
            vars.insert("_mapSource".into(), json!(m.map_source));
            vars.insert("_mapGroupId".into(), json!(m.group_id));
        }
        let errors = self.state.metadata.error_count;
        vars.insert("errorCount".into(), json!(errors));
        vars.insert("errors".into(), json!(errors));
        vars.insert("activeState".into(), json!(self.state.active_state(path)));
        vars
    }

    /// Whether an edge's condition holds: Ok(None) without a condition, Err on evaluation error.
    pub(super) fn condition_holds(
        &self,
        edge: &Edge,
        vars: &Map<String, Value>,
    ) -> Result<Option<bool>, String> {
        let Some(c) = edge.condition() else {
            return Ok(None);
        };
        condition::evaluate(&c, vars).map(Some).map_err(|e| {
            format!(
                "Condition of edge {} -> {} cannot be evaluated: {e}",
                edge.source, edge.target
            )
        })
    }

    /// The edges the model chooses between at `node` (its transition tools): its own control
    /// edges, or its nearest ancestor's, that are neither `@auto`, async nor `@map`.
    pub(super) fn choice_edges(&self, node: &str) -> Vec<&Edge> {
        self.machine
            .outgoing(node)
            .into_iter()
            .filter(|e| {
                !self.machine.is_data_edge(e)
                    && !e.is_async()
                    && e.map_source().is_none()
                    && !e.is_auto()
            })
            .collect()
    }

    /// Whether an edge may be taken now on path `id`: it has no condition, or its condition
    /// holds (one that cannot be evaluated does not).
    pub(super) fn edge_open(&self, id: &str, edge: &Edge) -> bool {
        if edge.condition().is_none() {
            return true;
        }
        let Some(path) = self.state.path(id) else {
            return false;
        };
        let vars = self.variables(path);
        matches!(self.condition_holds(edge, &vars), Ok(Some(true)))
    }

    pub(super) fn plan(&self, id: &str) -> Plan {
        let fail = |e: String| Plan {
            spawns: Vec::new(),
            action: Action::Fail(e),
        };
        let Some(path) = self.state.path(id) else {
            return fail(format!("Path {id} not found"));
        };
        let Some(node) = self.machine.node(&path.current_node) else {
            return fail(format!("Node {} not found", path.current_node));
        };
        let outgoing = self.machine.outgoing(&node.name);
        let control: Vec<&Edge> = outgoing
            .iter()
            .copied()
            .filter(|e| !self.machine.is_data_edge(e))
            .collect();
        // The variables are only built when a condition needs them (they cover every node).
        let vars = if control.iter().any(|e| e.condition().is_some()) {
            self.variables(path)
        } else {
            Map::new()
        };
        let ty = node.effective_type();
        let has_prompt = node.attribute("prompt").is_some();
        let is_state = ty == Some("state");
        let agent_task = ty == Some("task") && has_prompt;
        // Conditions, evaluated once.
        let mut holds: Vec<(&Edge, Option<bool>)> = Vec::new();
        for e in &control {
            match self.condition_holds(e, &vars) {
                Ok(h) => holds.push((e, h)),
                Err(err) => return fail(err),
            }
        }
        let available = |e: &Edge| {
            holds
                .iter()
                .find(|(x, _)| x.index == e.index)
                .is_none_or(|(_, h)| h.unwrap_or(true))
        };
        let asyncs: Vec<usize> = control
            .iter()
            .filter(|e| e.is_async() && available(e))
            .map(|e| e.index)
            .collect();
        let maps: Vec<usize> = control
            .iter()
            .filter(|e| e.map_source().is_some() && !e.is_async())
            .map(|e| e.index)
            .collect();
        let plain: Vec<&Edge> = control
            .iter()
            .copied()
            .filter(|e| !e.is_async() && e.map_source().is_none())
            .collect();
        let non_auto: Vec<&Edge> = plain.iter().copied().filter(|e| !e.is_auto()).collect();
        let needs_agent = !is_state && (agent_task || non_auto.len() > 1);

        if !needs_agent {
            let mut spawns = asyncs.clone();
            spawns.extend(
                maps.iter()
                    .copied()
                    .filter(|&i| available(&self.machine.edges[i])),
            );
            if plain.is_empty() {
                return Plan {
                    spawns,
                    action: Action::Complete,
                };
            }
            // (a) a single edge from a state, an init node or a task without a prompt.
            if plain.len() == 1 && available(plain[0]) {
                let kind = match ty {
                    Some("state") => Some("state node"),
                    Some("init") => Some("init node"),
                    Some("task") if !has_prompt => Some("task node without prompt"),
                    _ => None,
                };
                if let Some(kind) = kind {
                    return Plan {
                        spawns,
                        action: Action::Move {
                            edge: plain[0].index,
                            reason: format!("Single edge from {kind}"),
                        },
                    };
                }
            }
            // (b) the first `@auto` edge whose condition holds.
            if let Some(e) = plain.iter().find(|e| e.is_auto() && available(e)) {
                return Plan {
                    spawns,
                    action: Action::Move {
                        edge: e.index,
                        reason: "@auto annotation".into(),
                    },
                };
            }
            // (c) the first edge with a simple condition that holds.
            if let Some(e) = plain.iter().find(|e| {
                e.condition().is_some_and(|c| condition::is_simple(&c))
                    && holds
                        .iter()
                        .any(|(x, h)| x.index == e.index && *h == Some(true))
            }) {
                return Plan {
                    spawns,
                    action: Action::Move {
                        edge: e.index,
                        reason: "Simple deterministic condition".into(),
                    },
                };
            }
            let open: Vec<&Edge> = non_auto.iter().copied().filter(|e| available(e)).collect();
            if open.len() == 1 {
                return Plan {
                    spawns,
                    action: Action::Move {
                        edge: open[0].index,
                        reason: open[0].condition().unwrap_or_else(|| "default".into()),
                    },
                };
            }
            return Plan {
                spawns,
                action: self.no_transition(node, &plain, open.len()),
            };
        }

        // An `@auto` edge whose condition holds is taken even at a node that would ask the model.
        if let Some(e) = plain.iter().find(|e| e.is_auto() && available(e)) {
            return Plan {
                spawns: Vec::new(),
                action: Action::Move {
                    edge: e.index,
                    reason: "@auto annotation".into(),
                },
            };
        }
        // An agent decision: what the model may do.
        let transitions: Vec<usize> = non_auto
            .iter()
            .filter(|e| available(e))
            .map(|e| e.index)
            .collect();
        let map_tools: Vec<usize> = maps;
        let contexts = self.context_access(node);
        let other_tools = !contexts.is_empty()
            || !asyncs.is_empty()
            || !map_tools.is_empty()
            || self.machine.meta_enabled(node)
            || !self.state.dynamic_tools.is_empty();
        if !other_tools && transitions.len() == 1 {
            return Plan {
                spawns: Vec::new(),
                action: Action::Move {
                    edge: transitions[0],
                    reason: "default".into(),
                },
            };
        }
        if !other_tools && transitions.is_empty() {
            if plain.is_empty() {
                return Plan {
                    spawns: Vec::new(),
                    action: Action::Complete,
                };
            }
            return Plan {
                spawns: Vec::new(),
                action: self.no_transition(node, &plain, 0),
            };
        }
        Plan {
            spawns: Vec::new(),
            action: Action::Agent {
                transitions,
                spawns: asyncs,
                maps: map_tools,
            },
        }
    }

    /// Edges exist but none can be taken now.
    pub(super) fn no_transition(&self, node: &Node, edges: &[&Edge], open: usize) -> Action {
        let conditional = edges.iter().any(|e| e.condition().is_some());
        if open > 1 || !conditional {
            return Action::Fail(format!(
                "No transition available for node: {} ({} outgoing edges and nothing to choose between them; \
                 give the edges conditions, mark one @auto, or give the node a prompt so the model decides)",
                node.name,
                edges.len()
            ));
        }
        let others_active = self
            .state
            .paths
            .iter()
            .filter(|p| p.status == PathStatus::Active)
            .count()
            > 1;
        if others_active {
            Action::Wait(format!(
                "every outgoing edge of {} has a false condition; waiting for other paths",
                node.name
            ))
        } else {
            let conditions: Vec<String> = edges
                .iter()
                .filter_map(|e| {
                    e.condition()
                        .map(|c| format!("{} ({})", e.target, condition::shown(&c)))
                })
                .collect();
            Action::Fail(format!(
                "No transition available for node: {} (every condition is false: {})",
                node.name,
                conditions.join(", ")
            ))
        }
    }

    /// Contexts a node can use, in node order, with permissions from the edges between them.
    pub(super) fn context_access(&self, node: &Node) -> Vec<(&Node, Permissions)> {
        let own = self.machine.own_outgoing(&node.name);
        let mut out = Vec::new();
        for ctx in self
            .machine
            .nodes
            .iter()
            .filter(|n| self.machine.is_context(n))
        {
            let mut p = Permissions::default();
            for e in &own {
                if e.target == ctx.name {
                    let kind = e.ty.as_deref().or(e.text()).unwrap_or("");
                    match kind.trim() {
                        "writes" | "stores" => p.write = true,
                        "reads" => p.read = true,
                        _ => {}
                    }
                }
            }
            if self
                .machine
                .own_outgoing(&ctx.name)
                .iter()
                .any(|e| e.target == node.name)
            {
                p.read = true;
            }
            if p.read || p.write {
                out.push((ctx, p));
            }
        }
        out
    }
}
