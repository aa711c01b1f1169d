//! The machine as the runtime sees it: an index over the canonical machine JSON.
//!
//! Execution works from the canonical JSON (see [`dygram_core::json`]) rather than from the linked
//! syntax tree ([`dygram_core::model::Machine`]), because that JSON is what an execution saves and what
//! meta tools may rewrite while it runs: the two are stages of one machine, not two models of it.
//! The linked tree keeps what only the source has (spans, the written form of values, for
//! diagnostics); the index keeps what running needs (nodes by name, outgoing edges, parents).

use rustc_hash::FxHashMap as HashMap;
use serde_json::{Map, Value};

/// One node.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Simple name.
    pub name: String,
    /// Declared type, lower-cased (`task`, `state`, `context`, …).
    pub ty: Option<String>,
    /// The enclosing node.
    pub parent: Option<String>,
    /// Attributes in declaration order: name and value.
    pub attributes: Vec<(String, Value)>,
    /// Declared attribute types as the canonical JSON writes them (`number`, `Array<string>`,
    /// `Date?`), for the attributes that have one.
    pub types: Vec<(String, String)>,
    /// Annotation names with their value (if any).
    pub annotations: Vec<Annotation>,
}

/// An annotation on a node or an edge.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    /// Name as written (without `@`).
    pub name: String,
    /// A single value (`@barrier("join")`, `@map(Ctx.items)`).
    pub value: Option<String>,
    /// Named arguments (`@barrier(id: x; merge: true)`).
    pub arguments: Map<String, Value>,
}

impl Annotation {
    fn from_json(v: &Value) -> Option<Self> {
        let name = v.get("name")?.as_str()?.to_string();
        let value = v
            .get("value")
            .or_else(|| v.get("qualifiedValue"))
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
        let arguments = v
            .get("attributes")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        Some(Self {
            name,
            value,
            arguments,
        })
    }

    /// Whether `@x(false)` or `@x(enabled: false)` turns it off.
    pub fn disabled(&self) -> bool {
        let off = |v: &str| v.trim().eq_ignore_ascii_case("false");
        self.value.as_deref().is_some_and(off)
            || self
                .arguments
                .get("enabled")
                .is_some_and(|v| v.as_str().is_some_and(off) || v == &Value::Bool(false))
    }
}

/// One edge (a single source → target record of the JSON).
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    /// Position in the machine's edge list.
    pub index: usize,
    /// Source node.
    pub source: String,
    /// Target node (or `Node.attribute`).
    pub target: String,
    /// The label pairs (`text`, `when`, …).
    pub attributes: Map<String, Value>,
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Semantic type: `writes`, `reads`, `catch`.
    pub ty: Option<String>,
}

/// Kinds of edge annotation that change how an edge is taken.
const ASYNC: [&str; 4] = ["async", "spawn", "fork", "parallel"];
const BARRIER: [&str; 3] = ["barrier", "wait", "sync"];
const MERGE: [&str; 2] = ["join", "merge"];
const MAP: [&str; 3] = ["map", "foreach", "each"];

impl Edge {
    fn from_json(index: usize, v: &Value) -> Option<Self> {
        Some(Self {
            index,
            source: v.get("source")?.as_str()?.to_string(),
            target: v.get("target")?.as_str()?.to_string(),
            attributes: v
                .get("attributes")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            annotations: annotations(v),
            ty: v.get("type").and_then(Value::as_str).map(str::to_string),
        })
    }

    fn annotation(&self, names: &[&str]) -> Option<&Annotation> {
        self.annotations
            .iter()
            .find(|a| names.contains(&a.name.to_ascii_lowercase().as_str()))
    }

    /// The label text (`-go->`).
    pub fn text(&self) -> Option<&str> {
        self.attributes.get("text").and_then(Value::as_str)
    }

    /// `@auto` (exact lower case, as in the reference).
    pub fn is_auto(&self) -> bool {
        self.annotations.iter().any(|a| a.name == "auto")
    }

    /// An enabled `@async` / `@spawn` / `@fork` / `@parallel`.
    pub fn is_async(&self) -> bool {
        self.annotation(&ASYNC).is_some_and(|a| !a.disabled())
    }

    /// `@parallel` exactly.
    pub fn is_parallel(&self) -> bool {
        self.annotations.iter().any(|a| a.name == "parallel")
    }

    /// The `@map` source (`Ctx.items`), when the edge fans out over a list.
    pub fn map_source(&self) -> Option<String> {
        let a = self.annotation(&MAP)?;
        a.value.clone().or_else(|| {
            a.arguments
                .get("items")
                .or_else(|| a.arguments.get("source"))
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
        })
    }

    /// The `@map` group name (`group:` argument), when given.
    pub fn map_group(&self) -> Option<String> {
        let a = self.annotation(&MAP)?;
        a.arguments
            .get("group")
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
    }

    /// The barrier this edge synchronises on: id and whether arrivals merge.
    pub fn barrier(&self) -> Option<(String, bool)> {
        let (a, mut merge) = match self.annotation(&BARRIER) {
            Some(a) => (a, false),
            None => (self.annotation(&MERGE)?, true),
        };
        if let Some(m) = a.arguments.get("merge") {
            merge = m == &Value::Bool(true) || m.as_str() == Some("true");
        }
        let id = a
            .arguments
            .get("id")
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .or_else(|| a.value.clone())
            .map(|id| id.replace('.', "_"))
            .unwrap_or_else(|| "default".to_string());
        Some((id, merge))
    }

    /// The condition guarding this edge, as CEL text (`unless` negated), if any.
    pub fn condition(&self) -> Option<String> {
        let text = |k: &str| {
            self.attributes.get(k).map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
        };
        if let Some(c) = text("when").or_else(|| text("if")) {
            return Some(c);
        }
        if let Some(c) = text("unless") {
            return Some(format!("!({c})"));
        }
        // `-when: x-` written in the label text.
        let label = self.text()?;
        for (key, negate) in [("when", false), ("if", false), ("unless", true)] {
            if let Some(rest) = label.trim().strip_prefix(key)
                && let Some(expr) = rest.trim_start().strip_prefix(':')
            {
                let expr = expr.trim().to_string();
                return Some(if negate { format!("!({expr})") } else { expr });
            }
        }
        None
    }
}

fn annotations(v: &Value) -> Vec<Annotation> {
    v.get("annotations")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Annotation::from_json).collect())
        .unwrap_or_default()
}

/// The machine with indexes for the runtime.
#[derive(Debug, Clone)]
pub struct MachineIndex {
    /// Title.
    pub title: String,
    /// Machine-level attributes.
    pub attributes: Map<String, Value>,
    /// Machine-level annotations.
    pub annotations: Vec<Annotation>,
    /// Nodes, in the JSON's (pre-)order.
    pub nodes: Vec<Node>,
    /// Edges, in the JSON's order.
    pub edges: Vec<Edge>,
    by_name: HashMap<String, usize>,
    outgoing: HashMap<String, Vec<usize>>,
    incoming: HashMap<String, usize>,
    children: HashMap<String, Vec<usize>>,
}

impl MachineIndex {
    /// Indexes a canonical machine JSON.
    pub fn from_json(json: &Value) -> Self {
        let title = json
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let attributes = json
            .get("attributes")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|a| Some((a.get("name")?.as_str()?.to_string(), attr_value(a))))
                    .collect()
            })
            .unwrap_or_default();
        let nodes: Vec<Node> = json
            .get("nodes")
            .and_then(Value::as_array)
            .map(|nodes| {
                nodes
                    .iter()
                    .filter_map(|n| {
                        Some(Node {
                            name: n.get("name")?.as_str()?.to_string(),
                            ty: n
                                .get("type")
                                .and_then(Value::as_str)
                                .filter(|t| !t.is_empty())
                                .map(str::to_ascii_lowercase),
                            parent: n.get("parent").and_then(Value::as_str).map(str::to_string),
                            attributes: n
                                .get("attributes")
                                .and_then(Value::as_array)
                                .map(|a| {
                                    a.iter()
                                        .filter_map(|a| {
                                            Some((
                                                a.get("name")?.as_str()?.to_string(),
                                                attr_value(a),
                                            ))
                                        })
                                        .collect()
                                })
                                .unwrap_or_default(),
                            types: n
                                .get("attributes")
                                .and_then(Value::as_array)
                                .map(|a| {
                                    a.iter()
                                        .filter_map(|a| {
                                            let ty = a.get("type")?.as_str()?;
                                            let name = a.get("name")?.as_str()?;
                                            (!ty.is_empty())
                                                .then(|| (name.to_string(), ty.to_string()))
                                        })
                                        .collect()
                                })
                                .unwrap_or_default(),
                            annotations: annotations(n),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let edges: Vec<Edge> = json
            .get("edges")
            .and_then(Value::as_array)
            .map(|edges| {
                edges
                    .iter()
                    .enumerate()
                    .filter_map(|(i, e)| Edge::from_json(i, e))
                    .collect()
            })
            .unwrap_or_default();
        let mut m = Self {
            title,
            attributes,
            annotations: annotations(json),
            nodes,
            edges,
            by_name: HashMap::default(),
            outgoing: HashMap::default(),
            incoming: HashMap::default(),
            children: HashMap::default(),
        };
        for (i, n) in m.nodes.iter().enumerate() {
            m.by_name.entry(n.name.clone()).or_insert(i);
            if let Some(p) = &n.parent {
                m.children.entry(p.clone()).or_default().push(i);
            }
        }
        for (i, e) in m.edges.iter().enumerate() {
            m.outgoing.entry(e.source.clone()).or_default().push(i);
            *m.incoming.entry(e.target.clone()).or_default() += 1;
        }
        m
    }

    /// A node by simple name.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.by_name.get(name).map(|&i| &self.nodes[i])
    }

    /// The node's own outgoing edges, or its nearest ancestor's when it has none ("module exit").
    pub fn outgoing(&self, name: &str) -> Vec<&Edge> {
        let mut current = Some(name.to_string());
        let mut guard = 0;
        while let Some(n) = current {
            if let Some(list) = self.outgoing.get(&n) {
                return list.iter().map(|&i| &self.edges[i]).collect();
            }
            current = self.node(&n).and_then(|n| n.parent.clone());
            guard += 1;
            if guard > self.nodes.len() {
                break;
            }
        }
        Vec::new()
    }

    /// The node's own outgoing edges only.
    pub fn own_outgoing(&self, name: &str) -> Vec<&Edge> {
        self.outgoing
            .get(name)
            .map(|l| l.iter().map(|&i| &self.edges[i]).collect())
            .unwrap_or_default()
    }

    /// Children of a node, in order.
    pub fn children(&self, name: &str) -> Vec<&Node> {
        self.children
            .get(name)
            .map(|l| l.iter().map(|&i| &self.nodes[i]).collect())
            .unwrap_or_default()
    }

    /// Where a transition into `name` lands: a node with children is a module, entered at its first
    /// child (a task first, then a state, then anything not a context), recursively.
    pub fn entry_of(&self, name: &str) -> String {
        let mut current = name.to_string();
        for _ in 0..=self.nodes.len() {
            let children = self.children(&current);
            if children.is_empty() {
                break;
            }
            let pick = children
                .iter()
                .find(|c| c.ty.as_deref() == Some("task"))
                .or_else(|| children.iter().find(|c| c.ty.as_deref() == Some("state")))
                .or_else(|| children.iter().find(|c| !self.is_context(c)))
                .or_else(|| children.first());
            match pick {
                Some(c) => current = c.name.clone(),
                None => break,
            }
        }
        current
    }

    /// Whether the machine (or the node) asks for the meta-programming tools.
    pub fn meta_enabled(&self, node: &Node) -> bool {
        let on = |a: &Annotation| a.name.eq_ignore_ascii_case("meta") && !a.disabled();
        self.annotations.iter().any(on) || node.annotations.iter().any(on)
    }

    /// A node that stores data: type `context`, or a name containing "context".
    pub fn is_context(&self, node: &Node) -> bool {
        node.ty.as_deref() == Some("context") || node.name.to_ascii_lowercase().contains("context")
    }

    /// Whether the edge carries data rather than control.
    pub fn is_data_edge(&self, edge: &Edge) -> bool {
        let data = |t: &str| matches!(t, "writes" | "reads" | "stores");
        edge.ty.as_deref().is_some_and(data)
            || edge.text().is_some_and(|t| data(t.trim()))
            || self.node(&edge.target).is_some_and(|n| self.is_context(n))
            || self.node(&edge.source).is_some_and(|n| self.is_context(n))
    }

    /// Start nodes: nodes named `start` (any case) or annotated `@start`; else every node (not a
    /// context or style) without incoming edges; else the first such node.
    pub fn start_nodes(&self) -> Vec<String> {
        let named: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| {
                n.name.eq_ignore_ascii_case("start")
                    || n.annotations.iter().any(|a| a.name == "start")
            })
            .map(|n| n.name.clone())
            .collect();
        if !named.is_empty() {
            return named;
        }
        let candidates: Vec<&Node> = self
            .nodes
            .iter()
            .filter(|n| !self.is_context(n) && n.ty.as_deref() != Some("style"))
            .filter(|n| n.ty.as_deref() != Some("note") && n.parent.is_none())
            .collect();
        let free: Vec<String> = candidates
            .iter()
            .filter(|n| !self.incoming.contains_key(&n.name))
            .map(|n| n.name.clone())
            .collect();
        if !free.is_empty() {
            return free;
        }
        candidates
            .first()
            .map(|n| vec![n.name.clone()])
            .unwrap_or_default()
    }

    /// A machine-level attribute as a number (`maxSteps`).
    pub fn number_attribute(&self, name: &str) -> Option<f64> {
        match self.attributes.get(name)? {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
}

impl Node {
    /// An attribute's value.
    pub fn attribute(&self, name: &str) -> Option<&Value> {
        self.attributes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    /// The `prompt` attribute as text.
    pub fn prompt(&self) -> Option<String> {
        self.attribute("prompt").map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }

    /// The type the runtime acts on: the declared one, else `task` for a node with a prompt.
    pub fn effective_type(&self) -> Option<&str> {
        match self.ty.as_deref() {
            Some(t) => Some(t),
            None if self.attribute("prompt").is_some() => Some("task"),
            None => None,
        }
    }

    /// The node's attributes as one JSON object.
    pub fn attribute_object(&self) -> Map<String, Value> {
        self.attributes.iter().cloned().collect()
    }
}

fn attr_value(a: &Value) -> Value {
    a.get("value").cloned().unwrap_or(Value::Null)
}
