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
    ) -> Result<Option<bool>, EdgeConditionError> {
        let Some(c) = edge.condition() else {
            return Ok(None);
        };
        condition::evaluate(&c, vars)
            .map(Some)
            .map_err(|error| EdgeConditionError {
                from: edge.source.clone(),
                target: edge.target.clone(),
                error,
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

    /// What path `id` does next at its node: the step rules.
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
        let out = match self.classify(path, node) {
            Ok(out) => out,
            Err(err) => return fail(err.to_string()),
        };
        let ty = node.effective_type();
        if ty == Some("task") && delegate::agent_of(node).is_some() {
            // The agent decides; async edges start their paths as the node begins.
            return Plan {
                spawns: out.asyncs,
                action: Action::Delegate,
            };
        }
        let agent_task = ty == Some("task") && node.attribute("prompt").is_some();
        let needs_agent = ty != Some("state") && (agent_task || out.non_auto.len() > 1);
        if needs_agent {
            self.plan_agent_node(node, out)
        } else {
            self.plan_deterministic(node, &out)
        }
    }

    /// A node's control edges, sorted by kind, with their conditions evaluated once.
    fn classify<'m>(
        &'m self,
        path: &Path,
        node: &Node,
    ) -> Result<Outgoing<'m>, EdgeConditionError> {
        let control: Vec<&Edge> = self
            .machine
            .outgoing(&node.name)
            .into_iter()
            .filter(|e| !self.machine.is_data_edge(e))
            .collect();
        // The variables are only built when a condition needs them (they cover every node).
        let vars = if control.iter().any(|e| e.condition().is_some()) {
            self.variables(path)
        } else {
            Map::new()
        };
        let mut holds: Vec<(usize, Option<bool>)> = Vec::new();
        for e in &control {
            holds.push((e.index, self.condition_holds(e, &vars)?));
        }
        let asyncs = control
            .iter()
            .filter(|e| e.is_async() && available(&holds, e))
            .map(|e| e.index)
            .collect();
        let maps = control
            .iter()
            .filter(|e| e.map_source().is_some() && !e.is_async())
            .map(|e| e.index)
            .collect();
        let plain: Vec<&Edge> = control
            .iter()
            .copied()
            .filter(|e| !e.is_async() && e.map_source().is_none())
            .collect();
        let non_auto = plain.iter().copied().filter(|e| !e.is_auto()).collect();
        Ok(Outgoing {
            holds,
            asyncs,
            maps,
            plain,
            non_auto,
        })
    }

    /// The step rules of a node the model does not decide at: its only edge, an `@auto` edge, a
    /// simple condition that holds, or the one open edge.
    fn plan_deterministic(&self, node: &Node, out: &Outgoing<'_>) -> Plan {
        let ty = node.effective_type();
        let mut spawns = out.asyncs.clone();
        spawns.extend(
            out.maps
                .iter()
                .copied()
                .filter(|&i| out.available(&self.machine.edges[i])),
        );
        let plain = &out.plain;
        let action = if plain.is_empty() {
            Action::Complete
        } else if let Some(kind) = single_edge_kind(ty, node.attribute("prompt").is_some())
            .filter(|_| plain.len() == 1 && out.available(plain[0]))
        {
            // (a) a single edge from a state, an init node or a task without a prompt.
            Action::Move {
                edge: plain[0].index,
                reason: format!("Single edge from {kind}"),
            }
        } else if let Some(e) = plain.iter().find(|e| e.is_auto() && out.available(e)) {
            // (b) the first `@auto` edge whose condition holds.
            Action::Move {
                edge: e.index,
                reason: "@auto annotation".into(),
            }
        } else if let Some(e) = plain
            .iter()
            .find(|e| e.condition().is_some_and(|c| condition::is_simple(&c)) && out.holds_true(e))
        {
            // (c) the first edge with a simple condition that holds.
            Action::Move {
                edge: e.index,
                reason: "Simple deterministic condition".into(),
            }
        } else {
            let open: Vec<&Edge> = out
                .non_auto
                .iter()
                .copied()
                .filter(|e| out.available(e))
                .collect();
            match open[..] {
                [only] => Action::Move {
                    edge: only.index,
                    reason: only.condition().unwrap_or_else(|| "default".into()),
                },
                _ => self.no_transition(node, plain, open.len()),
            }
        };
        Plan { spawns, action }
    }

    /// The step rules of a node the model decides at: an `@auto` edge that holds is still taken;
    /// a single open transition with no other tool is taken without asking.
    fn plan_agent_node(&self, node: &Node, out: Outgoing<'_>) -> Plan {
        let plan = |action| Plan {
            spawns: Vec::new(),
            action,
        };
        if let Some(e) = out.plain.iter().find(|e| e.is_auto() && out.available(e)) {
            return plan(Action::Move {
                edge: e.index,
                reason: "@auto annotation".into(),
            });
        }
        let transitions: Vec<usize> = out
            .non_auto
            .iter()
            .filter(|e| out.available(e))
            .map(|e| e.index)
            .collect();
        let other_tools = !self.context_access(node).is_empty()
            || !out.asyncs.is_empty()
            || !out.maps.is_empty()
            || self.machine.meta_enabled(node)
            || !self.state.dynamic_tools.is_empty();
        match transitions[..] {
            [only] if !other_tools => plan(Action::Move {
                edge: only,
                reason: "default".into(),
            }),
            [] if !other_tools && out.plain.is_empty() => plan(Action::Complete),
            [] if !other_tools => plan(self.no_transition(node, &out.plain, 0)),
            _ => plan(Action::Agent {
                transitions,
                spawns: out.asyncs,
                maps: out.maps,
            }),
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

/// An edge whose condition cannot be evaluated: the path fails.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("Condition of edge {from} -> {target} cannot be evaluated: {error}")]
pub struct EdgeConditionError {
    /// The edge's source node.
    pub from: String,
    /// Its target.
    pub target: String,
    /// Why.
    pub error: condition::ConditionError,
}

/// A node's control edges, sorted by kind ([`Executor::classify`]).
struct Outgoing<'m> {
    /// Each control edge's condition: `None` without one.
    holds: Vec<(usize, Option<bool>)>,
    /// Async edges that may be taken.
    asyncs: Vec<usize>,
    /// `@map` edges (whether their condition holds is checked when they are spawned).
    maps: Vec<usize>,
    /// The edges that move the path itself: neither async nor `@map`.
    plain: Vec<&'m Edge>,
    /// Of those, the ones without `@auto`.
    non_auto: Vec<&'m Edge>,
}

impl Outgoing<'_> {
    /// Whether an edge may be taken: no condition, or one that holds.
    fn available(&self, e: &Edge) -> bool {
        available(&self.holds, e)
    }

    /// Whether an edge has a condition and it holds.
    fn holds_true(&self, e: &Edge) -> bool {
        self.holds
            .iter()
            .any(|(x, h)| *x == e.index && *h == Some(true))
    }
}

/// Whether an edge may be taken, given the evaluated conditions: no condition (or none
/// evaluated), or one that holds.
fn available(holds: &[(usize, Option<bool>)], e: &Edge) -> bool {
    holds
        .iter()
        .find(|(x, _)| *x == e.index)
        .is_none_or(|(_, h)| h.unwrap_or(true))
}

/// What kind of node a single edge is taken from without asking (a state, an init node, a task
/// without a prompt), for the reason shown.
fn single_edge_kind(ty: Option<&str>, has_prompt: bool) -> Option<&'static str> {
    match ty {
        Some("state") => Some("state node"),
        Some("init") => Some("init node"),
        Some("task") if !has_prompt => Some("task node without prompt"),
        _ => None,
    }
}
