//! Mermaid `stateDiagram-v2` output (renders on GitHub and anywhere Mermaid runs).
//!
//! [`to_mermaid`] reads the canonical machine JSON (see [`crate::json`]). The mapping:
//!
//! | machine | Mermaid |
//! |---|---|
//! | title | a `%% title` comment after the header line |
//! | machine `style` direction (`rankdir`) | `direction LR` (or `RL`, `TB`, `BT`) |
//! | leaf node | a state: `id` alone, `id : Title` for a title, `state "name" as id` when the id had to be changed |
//! | node with children | a composite state `state id { … }` holding its children |
//! | `note` node | `note right of id : text` (title, else `desc`/`prompt`, annotations first), next to the state; a note on a composite state becomes a `%%` comment |
//! | explicit edge | `a --> b : label`, placed in the innermost composite state holding both ends; the label is the edge text, else its condition (`when …`, `unless …`, `if …`), followed by its annotations (`@auto`). An edge from a composite state into its own contents becomes `[*] --> child` inside it, one from inside to an enclosing composite `child --> [*]` |
//! | start node (named `start`, `@start`, type `init`, or untyped without incoming edges and with outgoing ones) | `[*] --> id` in the block that holds it |
//! | `end` node (type `end` or named `end`) without outgoing edges | `id --> [*]` |
//! | node type | `classDef dy_<type>` with the DOT colours and `class a, b dy_<type>` for leaf states |
//!
//! Not drawn: `style` nodes, inferred attribute edges and inferred dependencies (they are data
//! references, not transitions), arrow kinds and multiplicities.
//!
//! Ids: Mermaid state ids may only use `[A-Za-z0-9_]`. Other characters become `_`, an id that
//! would be empty, start with a digit or start with `default` (which Mermaid reads as a keyword)
//! gets a `s_` prefix, Mermaid keywords (`state`, `note`, `end`, `class`, `direction`, …) get a `_`
//! suffix, and a clash gets `_2`, `_3`, …. The original name is then shown with
//! `state "name" as id`.
//!
//! Text (descriptions, labels, notes): line breaks and tabs become spaces, `:` becomes `∶` (U+2236,
//! which looks the same), `;` becomes `,`, `"` becomes `'`, `{`/`}` become `(`/`)`, a `<` that
//! could open an HTML tag gets a space after it, `%%` becomes `%`, `direction LR` (which Mermaid
//! would read as a statement) becomes `direction-LR`, and anything longer than 80 characters is
//! cut with `…`.

use std::collections::{HashMap, HashSet};

use serde_json::Value as Json;

use super::access::{attribute, is_note, js_string, node_kind, node_name};

/// Mermaid `stateDiagram-v2` text for a canonical machine JSON. Never fails: missing or ill-typed
/// keys are skipped.
pub fn to_mermaid(machine: &Json) -> String {
    Diagram::new(machine).render()
}

/// [`to_mermaid`] with an execution drawn on it: `visited` states get the class `dy_visited`
/// (green outline), `current` ones `dy_current` (filled).
pub fn to_mermaid_highlighted(machine: &Json, visited: &[String], current: &[String]) -> String {
    let diagram = Diagram::new(machine);
    let mut out = diagram.render();
    let ids = |names: &[String]| -> Vec<String> {
        let mut v: Vec<String> = names
            .iter()
            .filter(|n| diagram.children.get(n.as_str()).is_none_or(Vec::is_empty))
            .filter_map(|n| diagram.ids.get(n.as_str()).cloned())
            .collect();
        v.dedup();
        v
    };
    let visited = ids(visited);
    let current = ids(current);
    out.push_str("    classDef dy_visited stroke:#2E7D32,stroke-width:3px\n");
    out.push_str("    classDef dy_current fill:#A5D6A7,stroke:#1B5E20,stroke-width:3px\n");
    if !visited.is_empty() {
        out.push_str(&format!("    class {} dy_visited\n", visited.join(", ")));
    }
    if !current.is_empty() {
        out.push_str(&format!("    class {} dy_current\n", current.join(", ")));
    }
    out
}

/// Longest description or label kept (characters).
const MAX_TEXT: usize = 80;

/// Words Mermaid's state-diagram grammar reads as keywords.
const RESERVED: [&str; 22] = [
    // `root` names Mermaid's top-level document.
    "root",
    "state",
    "note",
    "end",
    "as",
    "direction",
    "class",
    "classdef",
    "style",
    "scale",
    "hide",
    "click",
    "left",
    "right",
    "of",
    "fork",
    "join",
    "choice",
    "default",
    "acctitle",
    "accdescr",
    "statediagram",
];

/// A Mermaid id for a name (before making it unique).
fn base_id(name: &str) -> String {
    let mut id: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // Mermaid reads a leading `default` as a keyword, whatever follows.
    if id.is_empty()
        || id.starts_with(|c: char| c.is_ascii_digit())
        || id.to_ascii_lowercase().starts_with("default")
    {
        id.insert_str(0, "s_");
    }
    if RESERVED.contains(&id.to_ascii_lowercase().as_str()) {
        id.push('_');
    }
    id
}

/// Text made safe for a description, label or note.
fn clean_text(text: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            ':' => out.push('∶'),
            ';' => out.push(','),
            '"' => out.push('\''),
            '{' => out.push('('),
            '}' => out.push(')'),
            '<' => {
                out.push('<');
                if chars
                    .get(i + 1)
                    .is_some_and(|n| n.is_ascii_alphabetic() || matches!(n, '/' | '!' | '?'))
                {
                    out.push(' ');
                }
            }
            c if c.is_control() => {}
            c => out.push(*c),
        }
    }
    // Collapse runs of spaces and trim.
    let mut collapsed = String::new();
    for word in out.split(' ').filter(|w| !w.is_empty()) {
        if !collapsed.is_empty() {
            collapsed.push(' ');
        }
        collapsed.push_str(word);
    }
    // Mermaid reads a whole line holding `direction LR` (any case) as a direction statement,
    // and `%%` as the start of a comment.
    collapsed = collapsed.replace("%%", "%");
    let lower = collapsed.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = lower[from..].find("direction ") {
        let at = from + pos + "direction".len();
        let rest = lower[at..].trim_start();
        if ["tb", "bt", "rl", "lr"].iter().any(|d| rest.starts_with(d)) {
            collapsed.replace_range(at..at + 1, "-");
        }
        from = at;
    }
    if collapsed.chars().count() > MAX_TEXT {
        collapsed = collapsed.chars().take(MAX_TEXT - 1).collect::<String>();
        collapsed = collapsed.trim_end().to_string();
        collapsed.push('…');
    }
    collapsed
}

fn get_str<'a>(v: &'a Json, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Json::as_str)
}

fn annotation_names(v: &Json) -> Vec<&str> {
    v.get("annotations")
        .and_then(Json::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter_map(|a| get_str(a, "name"))
        .collect()
}

struct Diagram<'a> {
    machine: &'a Json,
    edges: Vec<&'a Json>,
    all_edges: &'a [Json],
    /// Drawn nodes in order.
    nodes: Vec<&'a Json>,
    notes: Vec<&'a Json>,
    /// Mermaid id of each name.
    ids: HashMap<&'a str, String>,
    /// First drawn node of each name.
    by_name: HashMap<&'a str, &'a Json>,
    children: HashMap<&'a str, Vec<&'a Json>>,
}

impl<'a> Diagram<'a> {
    fn new(machine: &'a Json) -> Self {
        let all: Vec<&Json> = machine
            .get("nodes")
            .and_then(Json::as_array)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter(|n| get_str(n, "name").is_some_and(|s| !s.is_empty()))
            .collect();
        let is_style =
            |n: &Json| get_str(n, "type").is_some_and(|t| t.eq_ignore_ascii_case("style"));
        let nodes: Vec<&Json> = all
            .iter()
            .copied()
            .filter(|n| !is_style(n) && !is_note(n))
            .collect();
        let notes: Vec<&Json> = all.iter().copied().filter(|n| is_note(n)).collect();
        let all_edges = machine
            .get("edges")
            .and_then(Json::as_array)
            .map_or(&[][..], Vec::as_slice);
        let style_only: HashSet<&str> = {
            let drawn: HashSet<&str> = nodes.iter().map(|n| node_name(n)).collect();
            all.iter()
                .filter(|n| is_style(n))
                .map(|n| node_name(n))
                .filter(|n| !drawn.contains(n))
                .collect()
        };
        let edges: Vec<&Json> = all_edges
            .iter()
            .filter(|e| get_str(e, "type") != Some("inferred"))
            .filter(|e| {
                let s = get_str(e, "source").unwrap_or("");
                let t = get_str(e, "target").unwrap_or("");
                !s.is_empty() && !t.is_empty() && !style_only.contains(s) && !style_only.contains(t)
            })
            .collect();

        let mut by_name = HashMap::new();
        for n in &nodes {
            by_name.entry(node_name(n)).or_insert(*n);
        }
        let mut children: HashMap<&str, Vec<&Json>> = HashMap::new();
        for n in &nodes {
            if let Some(parent) = get_str(n, "parent")
                && by_name.contains_key(parent)
                && std::ptr::eq(by_name.get(node_name(n)).copied().unwrap_or(n), *n)
            {
                children.entry(parent).or_default().push(n);
            }
        }

        let mut ids = HashMap::new();
        let mut taken: HashSet<String> = HashSet::new();
        let names = nodes.iter().map(|n| node_name(n)).chain(
            edges
                .iter()
                .flat_map(|e| [get_str(e, "source"), get_str(e, "target")])
                .flatten(),
        );
        for name in names {
            if ids.contains_key(name) {
                continue;
            }
            let base = base_id(name);
            let mut id = base.clone();
            let mut i = 2;
            while taken.contains(&id) {
                id = format!("{base}_{i}");
                i += 1;
            }
            taken.insert(id.clone());
            ids.insert(name, id);
        }
        Diagram {
            machine,
            edges,
            all_edges,
            nodes,
            notes,
            ids,
            by_name,
            children,
        }
    }

    fn id(&self, name: &str) -> String {
        self.ids.get(name).cloned().unwrap_or_else(|| base_id(name))
    }

    fn is_composite(&self, name: &str) -> bool {
        self.children.get(name).is_some_and(|c| !c.is_empty())
    }

    /// The composite states around a name, innermost first.
    fn ancestors(&self, name: &str) -> Vec<&'a str> {
        let mut out: Vec<&str> = Vec::new();
        let mut current = self.by_name.get(name).and_then(|n| get_str(n, "parent"));
        while let Some(p) = current {
            if out.contains(&p) || !self.by_name.contains_key(p) {
                break;
            }
            out.push(p);
            current = self.by_name.get(p).and_then(|n| get_str(n, "parent"));
        }
        out
    }

    fn render(&self) -> String {
        let mut lines = vec!["stateDiagram-v2".to_string()];
        if let Some(title) = get_str(self.machine, "title").filter(|t| !t.trim().is_empty()) {
            lines.push(format!("    %% {}", clean_text(title)));
        }
        if let Some(dir) = self
            .machine
            .get("style")
            .and_then(|s| s.get("rankdir").or_else(|| s.get("direction")))
            .map(js_string)
            .and_then(|d| direction(&d))
        {
            lines.push(format!("    direction {dir}"));
        }
        let mut drawn = HashSet::new();
        let roots: Vec<&Json> = self
            .nodes
            .iter()
            .copied()
            .filter(|n| get_str(n, "parent").is_none_or(|p| !self.by_name.contains_key(p)))
            .collect();
        self.block(None, &roots, 1, &mut drawn, &mut lines);
        lines.extend(self.classes());
        let mut out = lines.join("\n");
        out.push('\n');
        out
    }

    /// The states of one block, then its start/end markers and transitions.
    fn block(
        &self,
        scope: Option<&'a str>,
        nodes: &[&'a Json],
        level: usize,
        drawn: &mut HashSet<String>,
        lines: &mut Vec<String>,
    ) {
        let indent = "    ".repeat(level);
        for node in nodes {
            let name = node_name(node);
            let id = self.id(name);
            if !drawn.insert(id.clone()) {
                continue;
            }
            let children = self.children.get(name).map_or(&[][..], Vec::as_slice);
            if !children.is_empty() && level < 64 {
                lines.push(format!("{indent}state {id} {{"));
                if name != id || get_str(node, "title").is_some() {
                    let mut text = name.to_string();
                    if let Some(t) = get_str(node, "title").filter(|t| !t.is_empty() && *t != name)
                    {
                        text = format!("{text} - {t}");
                    }
                    lines.push(format!("{indent}    %% {}", clean_text(&text)));
                }
                self.block(Some(name), children, level + 1, drawn, lines);
                lines.push(format!("{indent}}}"));
            } else {
                if name != id {
                    let shown = clean_text(name).replace(['\'', '<', '>', '[', ']'], "");
                    lines.push(format!("{indent}state \"{shown}\" as {id}"));
                }
                let title = get_str(node, "title")
                    .map(clean_text)
                    .filter(|t| !t.is_empty() && t != name);
                match title {
                    Some(t) => lines.push(format!("{indent}{id} : {t}")),
                    None if name == id => lines.push(format!("{indent}{id}")),
                    None => {}
                }
            }
            lines.extend(self.notes_for(name, &indent));
        }
        // Start and end markers.
        for node in nodes {
            let name = node_name(node);
            if self.is_start(node) {
                lines.push(format!("{indent}[*] --> {}", self.id(name)));
            }
        }
        for edge in &self.edges {
            let (edge_scope, transition) = self.transition(edge);
            if edge_scope != scope {
                continue;
            }
            let mut line = format!("{indent}{transition}");
            let label = edge_label(edge);
            if !label.is_empty() {
                line.push_str(" : ");
                line.push_str(&label);
            }
            lines.push(line);
        }
        for node in nodes {
            let name = node_name(node);
            if self.is_end(node) {
                lines.push(format!("{indent}{} --> [*]", self.id(name)));
            }
        }
    }

    /// Where an edge is drawn (the innermost composite holding both ends, `None`: the top) and
    /// its transition. An edge from a composite state into one of its own states is drawn as that
    /// composite's start (`[*] --> child`), and one from a state to a composite around it as the
    /// end of the state's composite (`child --> [*]`): Mermaid cannot link a composite state with
    /// its own contents.
    fn transition(&self, edge: &Json) -> (Option<&'a str>, String) {
        let source = get_str(edge, "source").unwrap_or("");
        let target = get_str(edge, "target").unwrap_or("");
        let a = self.ancestors(source);
        let b = self.ancestors(target);
        if source != target {
            if b.contains(&source) {
                return (b.first().copied(), format!("[*] --> {}", self.id(target)));
            }
            if a.contains(&target) {
                return (a.first().copied(), format!("{} --> [*]", self.id(source)));
            }
        }
        let scope = a.iter().copied().find(|x| b.contains(x));
        (
            scope,
            format!("{} --> {}", self.id(source), self.id(target)),
        )
    }

    fn is_start(&self, node: &Json) -> bool {
        let name = node_name(node);
        if self.is_composite(name) {
            return false;
        }
        name.eq_ignore_ascii_case("start")
            || annotation_names(node).contains(&"start")
            || node_kind(node, self.all_edges).as_deref() == Some("init")
    }

    fn is_end(&self, node: &Json) -> bool {
        let name = node_name(node);
        if self.is_composite(name) {
            return false;
        }
        let marked = get_str(node, "type").is_some_and(|t| t.eq_ignore_ascii_case("end"))
            || name.eq_ignore_ascii_case("end");
        marked
            && !self
                .edges
                .iter()
                .any(|e| get_str(e, "source") == Some(name))
    }

    fn notes_for(&self, name: &str, indent: &str) -> Vec<String> {
        let mut out = Vec::new();
        for note in self.notes.iter().filter(|n| node_name(n) == name) {
            let mut parts: Vec<String> = annotation_names(note)
                .iter()
                .map(|a| format!("@{a}"))
                .collect();
            let content = get_str(note, "title")
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .or_else(|| {
                    ["desc", "prompt"].iter().find_map(|k| {
                        attribute(note, k)
                            .and_then(|a| a.get("value"))
                            .map(js_string)
                    })
                });
            parts.extend(content);
            let text = clean_text(&parts.join(" "));
            if text.is_empty() {
                continue;
            }
            if self.is_composite(name) {
                out.push(format!("{indent}%% note on {}: {text}", self.id(name)));
            } else {
                out.push(format!("{indent}note right of {} : {text}", self.id(name)));
            }
        }
        out
    }

    /// `classDef` per node type and `class` lines for the leaf states.
    fn classes(&self) -> Vec<String> {
        const TYPES: [(&str, &str, &str); 5] = [
            ("task", "#E3F2FD", "#1976D2"),
            ("state", "#F3E5F5", "#7B1FA2"),
            ("context", "#E8F5E9", "#388E3C"),
            ("tool", "#FFF9C4", "#F57F17"),
            ("init", "#FFF3E0", "#F57C00"),
        ];
        let mut members: HashMap<&str, Vec<String>> = HashMap::new();
        let mut seen = HashSet::new();
        for n in &self.nodes {
            let name = node_name(n);
            if self.is_composite(name) || !seen.insert(name) {
                continue;
            }
            if let Some(kind) = node_kind(n, self.all_edges)
                && let Some((t, _, _)) = TYPES.iter().find(|(t, _, _)| *t == kind)
            {
                members.entry(t).or_default().push(self.id(name));
            }
        }
        let mut out = Vec::new();
        for (t, fill, stroke) in TYPES {
            if let Some(ids) = members.get(t) {
                out.push(format!("    classDef dy_{t} fill:{fill},stroke:{stroke}"));
                out.push(format!("    class {} dy_{t}", ids.join(", ")));
            }
        }
        out
    }
}

/// `LR`, `RL`, `TB` or `BT` for a direction.
fn direction(value: &str) -> Option<&'static str> {
    match value.trim().to_lowercase().as_str() {
        "lr" | "left-to-right" | "column" => Some("LR"),
        "rl" | "right-to-left" => Some("RL"),
        "tb" | "td" | "top-to-bottom" | "row" => Some("TB"),
        "bt" | "bottom-to-top" => Some("BT"),
        _ => None,
    }
}

/// An edge's label: its text, else its condition, then its annotations.
fn edge_label(edge: &Json) -> String {
    let attrs = edge.get("attributes");
    let get = |k: &str| {
        attrs
            .and_then(|a| a.get(k))
            .filter(|v| !v.is_null())
            .map(js_string)
            .filter(|s| !s.trim().is_empty())
    };
    let mut parts: Vec<String> = Vec::new();
    if let Some(text) = get("text") {
        parts.push(text);
    } else if let Some(c) = get("when") {
        parts.push(format!("when {c}"));
    } else if let Some(c) = get("unless") {
        parts.push(format!("unless {c}"));
    } else if let Some(c) = get("if") {
        parts.push(format!("if {c}"));
    }
    for a in annotation_names(edge) {
        if !matches!(
            a,
            "style" | "hideLabel" | "hideAnnotation" | "showAnnotation"
        ) {
            parts.push(format!("@{a}"));
        }
    }
    clean_text(&parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_are_mermaid_safe_and_unique() {
        assert_eq!(base_id("a-b c"), "a_b_c");
        assert_eq!(base_id("end"), "end_");
        assert_eq!(base_id("1st"), "s_1st");
        assert_eq!(base_id(""), "s_");
        assert_eq!(base_id("defaultPath"), "s_defaultPath");
        let m = to_mermaid(&json!({"nodes": [{"name": "a-b"}, {"name": "a_b"}], "edges": []}));
        assert!(m.contains("state \"a-b\" as a_b\n"), "{m}");
        assert!(m.contains("state \"a_b\" as a_b_2\n"), "{m}");
    }

    #[test]
    fn text_is_cleaned() {
        assert_eq!(clean_text("a: b; {c}\n\"d\" <x"), "a∶ b, (c) 'd' < x");
        assert_eq!(clean_text(&"x".repeat(100)).chars().count(), MAX_TEXT);
        assert_eq!(
            clean_text("go Direction  lr now %% x"),
            "go Direction-lr now % x"
        );
    }

    #[test]
    fn odd_json_does_not_panic() {
        for v in [
            json!(null),
            json!({"nodes": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]}),
            json!({"nodes": [{"name": "a"}, {"name": "b", "parent": "a"}, {"name": "a", "parent": "b"}],
                   "edges": [{"source": "a", "target": "b"}, {"source": 1}]}),
        ] {
            assert!(to_mermaid(&v).starts_with("stateDiagram-v2\n"));
        }
    }
}
