//! The generator: the graph, its label and style, the hierarchy of nodes and clusters.

use std::collections::{HashMap, HashSet};

use serde_json::Value as Json;

use super::expressions;
use crate::render::access::{
    annotations, attribute, attributes, clean_value, get_array, get_str, is_note, is_style_node,
    js_string, js_truthy, node_name,
};
use crate::render::dot::labels::{Wrap, attribute_table, heading, wrapped_markdown};
use crate::render::dot::styles::{LAYOUT_KEYS, direction, grid_layout, grid_size};
use crate::render::dot::syntax::{anchor, attr, escape_dot, html, id, name_token, sanitize_id};
use crate::render::markdown;
use crate::render::markdown::escape_html;
use crate::values::js_trim;

pub(super) struct Generator<'a> {
    pub(super) machine: &'a Json,
    pub(super) nodes: Vec<&'a Json>,
    pub(super) edges: &'a [Json],
    pub(super) style_nodes: Vec<&'a Json>,
    pub(super) wrap: Wrap,
    /// Renderable nodes by name (the last of a name wins).
    pub(super) by_name: HashMap<&'a str, &'a Json>,
    /// Children of each renderable node, by name.
    pub(super) children: HashMap<&'a str, Vec<&'a Json>>,
    /// Notes by the name of their parent (`None`: top level), with their DOT ids.
    pub(super) notes: HashMap<Option<&'a str>, Vec<(&'a Json, String)>>,
    /// Conditions and templates, with their contexts.
    pub(super) expressions: expressions::Expressions,
}

impl<'a> Generator<'a> {
    pub(super) fn new(machine: &'a Json) -> Self {
        let all: Vec<&Json> = get_array(machine, "nodes")
            .iter()
            .filter(|n| get_str(n, "name").is_some())
            .collect();
        let style_nodes: Vec<&Json> = all.iter().copied().filter(|n| is_style_node(n)).collect();
        let nodes: Vec<&Json> = all
            .iter()
            .copied()
            .filter(|n| !is_style_node(n) && !is_note(n))
            .collect();
        let mut by_name = HashMap::new();
        let mut children: HashMap<&str, Vec<&Json>> = HashMap::new();
        for n in &nodes {
            by_name.insert(node_name(n), *n);
        }
        for n in &nodes {
            if let Some(parent) = get_str(n, "parent")
                && by_name.contains_key(parent)
            {
                children.entry(parent).or_default().push(n);
            }
        }
        let mut notes: HashMap<Option<&str>, Vec<(&Json, String)>> = HashMap::new();
        let mut counters: HashMap<&str, usize> = HashMap::new();
        for n in all.iter().copied().filter(|n| is_note(n)) {
            let target = node_name(n);
            if target.is_empty() {
                continue;
            }
            let count = counters.entry(target).or_insert(0);
            let dot_id = format!("note_{}_{count}", sanitize_id(target));
            *count += 1;
            notes
                .entry(get_str(n, "parent"))
                .or_default()
                .push((n, dot_id));
        }
        Generator {
            machine,
            edges: get_array(machine, "edges"),
            style_nodes,
            wrap: Wrap::from_machine(machine),
            by_name,
            children,
            notes,
            expressions: expressions::Expressions::new(machine, &all),
            nodes,
        }
    }

    pub(super) fn is_cluster(&self, name: &str) -> bool {
        self.children.get(name).is_some_and(|c| !c.is_empty())
    }

    /// `{{ … }}` templates resolved against every node's attributes.
    pub(super) fn interpolate(&self, text: &str) -> String {
        self.expressions.resolve_templates(text)
    }

    pub(super) fn render(&self) -> String {
        let mut lines: Vec<String> = vec!["digraph {".into(), "  // Graph attributes".into()];
        let label = self.machine_label();
        if label.is_empty() {
            lines.push("  label=\"\";".into());
        } else {
            lines.push(format!("  label={};", html(&label)));
        }
        for l in [
            "  labelloc=\"t\";",
            "  fontsize=10;",
            "  fontname=\"Arial\";",
            "  compound=true;",
            "  rankdir=TB;",
            "  pad=0.25;",
        ] {
            lines.push(l.into());
        }
        lines.extend(self.graph_style_lines());
        lines.push("  node [fontname=\"Arial\", fontsize=10];".into());
        lines.push("  edge [fontname=\"Arial\", fontsize=9];".into());
        lines.push(String::new());

        let roots: Vec<&Json> = self
            .nodes
            .iter()
            .copied()
            .filter(|n| get_str(n, "parent").is_none())
            .collect();
        lines.push("  // Node definitions with nested namespaces".into());
        let mut visiting = HashSet::new();
        lines.push(self.hierarchy(&roots, 1, &mut visiting).join("\n"));
        lines.push(String::new());

        if let Some(notes) = self.notes.get(&None)
            && !notes.is_empty()
        {
            lines.push("  // Root-level notes".into());
            for (note, dot_id) in notes {
                lines.extend(self.note(note, dot_id, "  "));
            }
            lines.push(String::new());
        }

        if let Some(size) = grid_size(self.machine) {
            lines.push("  // Grid layout".into());
            lines.extend(grid_layout(&roots, size, "root", ""));
            lines.push(String::new());
        }

        if !self.edges.is_empty() {
            lines.push("  // Edges".into());
            lines.push(self.edges().join("\n"));
        }

        let deps = get_array(self.machine, "inferredDependencies");
        if !deps.is_empty() {
            lines.push(String::new());
            lines.push("  // Inferred Dependencies".into());
            for d in deps {
                lines.push(format!(
                    "  {} -> {} [label=\"{}\", style=dashed, color=blue];",
                    id(get_str(d, "source").unwrap_or("")),
                    id(get_str(d, "target").unwrap_or("")),
                    escape_dot(&d.get("reason").map(js_string).unwrap_or_default())
                ));
            }
        }
        lines.push("}".into());
        lines.join("\n")
    }

    /// The graph label's table, or `""` when it would have no rows.
    pub(super) fn machine_label(&self) -> String {
        let m = self.machine;
        let mut rows = String::new();
        if let Some(title) = get_str(m, "title").filter(|t| !t.is_empty()) {
            rows.push_str(&format!(
                r#"<tr><td align="center"><font point-size="12"><b>{}</b></font></td></tr>"#,
                markdown::to_html(title)
            ));
        }
        let version = attribute(m, "version");
        let has_annotations = annotations(m).next().is_some();
        if version.is_some() || has_annotations {
            let version_text = version
                .and_then(|a| a.get("value"))
                .map(clean_value)
                .unwrap_or_default();
            let ann: Vec<String> = annotations(m)
                .filter(|a| get_str(a, "name") != Some("style"))
                .map(|a| {
                    let name = get_str(a, "name").unwrap_or("");
                    match a.get("value").filter(|x| js_truthy(x)) {
                        Some(v) => format!("@{name}(\"{}\")", js_string(v)),
                        None => format!("@{name}"),
                    }
                })
                .collect();
            let v = if version.is_some() {
                format!("v{}", escape_html(&version_text))
            } else {
                String::new()
            };
            let content = format!("{v} {}", escape_html(&ann.join(" ")));
            let content = js_trim(&content);
            if !content.is_empty() {
                rows.push_str(&format!(
                    r#"<tr><td align="center"><font point-size="10">{content}</font></td></tr>"#
                ));
            }
        }
        if let Some(desc) =
            attributes(m).find(|a| matches!(get_str(a, "name"), Some("description" | "desc")))
        {
            let text = desc
                .get("value")
                .map_or_else(|| "undefined".into(), clean_value);
            rows.push_str(&format!(
                r#"<tr><td align="center"><font point-size="10"><i>{}</i></font></td></tr>"#,
                markdown::to_html(&self.interpolate(&text))
            ));
        }
        let shown: Vec<&Json> = attributes(m)
            .filter(|a| !matches!(get_str(a, "name"), Some("description" | "desc" | "version")))
            .collect();
        if !shown.is_empty() {
            rows.push_str(&format!(
                "<tr><td>{}</td></tr>",
                attribute_table(&shown, &Wrap::DEFAULT)
            ));
        }
        if rows.is_empty() {
            return String::new();
        }
        format!(
            r#"<table border="0" cellborder="0" cellspacing="0" cellpadding="4">{rows}</table>"#
        )
    }

    /// The machine `style` as graph attributes.
    pub(super) fn graph_style_lines(&self) -> Vec<String> {
        let Some(Json::Object(style)) = self.machine.get("style") else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (k, v) in style {
            if v.is_null() {
                continue;
            }
            let lower = js_trim(k).to_lowercase();
            if LAYOUT_KEYS.contains(&lower.as_str()) {
                continue;
            }
            let key = crate::style::key(k);
            let mut value = js_string(v);
            if key == "rankdir" || lower == "direction" {
                value = direction(&value);
            }
            out.push(format!("  {};", attr(&key, &value)));
        }
        out
    }

    pub(super) fn hierarchy(
        &self,
        nodes: &[&'a Json],
        level: usize,
        visiting: &mut HashSet<&'a str>,
    ) -> Vec<String> {
        let indent = "  ".repeat(level);
        let mut lines = Vec::new();
        for node in nodes {
            let name = node_name(node);
            let notes = self.notes.get(&Some(name)).map_or(&[][..], Vec::as_slice);
            let children = self.children.get(name).map_or(&[][..], Vec::as_slice);
            if !children.is_empty() && !visiting.contains(name) && level < 100 {
                visiting.insert(name);
                lines.extend(self.cluster(node, children, notes, level, visiting));
                visiting.remove(name);
            } else {
                lines.push(self.node_definition(node, &indent));
                for (note, dot_id) in notes {
                    lines.extend(self.note(note, dot_id, &indent));
                }
            }
        }
        lines
    }

    pub(super) fn cluster(
        &self,
        node: &'a Json,
        children: &[&'a Json],
        notes: &[(&'a Json, String)],
        level: usize,
        visiting: &mut HashSet<&'a str>,
    ) -> Vec<String> {
        let indent = "  ".repeat(level);
        let name = node_name(node);
        let mut lines = vec![
            format!(
                "{indent}subgraph {} {{",
                name_token(&format!("cluster_{name}"))
            ),
            format!("{indent}  label={};", html(&self.cluster_label(node))),
            format!("{indent}  labelloc=\"t\";"),
        ];
        for l in self.cluster_style(node) {
            lines.push(format!("{indent}  {l}"));
        }
        let own: Vec<&Json> = attributes(node)
            .filter(|a| {
                !matches!(
                    get_str(a, "name"),
                    Some("description" | "desc" | "prompt" | "style")
                )
            })
            .collect();
        if !own.is_empty() {
            lines.push(format!(
                "{indent}  {} [label={}, shape=plain, margin=0];",
                id(name),
                html(&attribute_table(&own, &self.wrap))
            ));
        }
        lines.push(format!(
            "{indent}  {} [shape=point, width=0.01, height=0.01, label=\"\", style=invis, fixedsize=true];",
            id(&anchor(name))
        ));
        lines.push(String::new());
        lines.push(self.hierarchy(children, level + 1, visiting).join("\n"));
        if !notes.is_empty() {
            lines.push(String::new());
            let inner = format!("{indent}  ");
            for (note, dot_id) in notes {
                lines.extend(self.note(note, dot_id, &inner));
            }
        }
        if let Some(size) = grid_size(node) {
            let leaves: Vec<&Json> = children
                .iter()
                .copied()
                .filter(|c| !self.is_cluster(node_name(c)))
                .collect();
            if !leaves.is_empty() {
                lines.push(String::new());
                lines.push(format!("{indent}  // Grid layout for cluster {name}"));
                lines.extend(grid_layout(
                    &leaves,
                    size,
                    &format!("cluster_{name}"),
                    &indent,
                ));
            }
        }
        lines.push(format!("{indent}}}"));
        lines
    }

    pub(super) fn cluster_label(&self, node: &Json) -> String {
        let mut out = format!(
            r#"<table border="0" cellborder="0" cellspacing="0" cellpadding="2"><tr><td align="center">{}</td></tr>"#,
            heading(node)
        );
        let title = get_str(node, "title").filter(|t| !t.is_empty());
        let desc = attributes(node)
            .find(|a| matches!(get_str(a, "name"), Some("description" | "desc" | "prompt")));
        if title.is_some() || desc.is_some() {
            let title_text = title
                .map(|t| crate::values::strip_double_quotes(t).to_string())
                .unwrap_or_default();
            let desc_text = desc
                .and_then(|d| d.get("value"))
                .filter(|v| js_truthy(v))
                .map(clean_value)
                .filter(|d| !d.is_empty());
            let mut row = String::new();
            if !title_text.is_empty() && title_text != node_name(node) {
                row.push_str(&format!(
                    "<b>{}</b>",
                    wrapped_markdown(&title_text, self.wrap.node_title, false, "<br/>")
                ));
            }
            if let Some(d) = desc_text {
                if !row.is_empty() {
                    row.push_str(" — ");
                }
                row.push_str(&format!(
                    "<i>{}</i>",
                    wrapped_markdown(&d, self.wrap.node_desc, false, "<br/>")
                ));
            }
            if !row.is_empty() {
                out.push_str(&format!(r#"<tr><td align="center">{row}</td></tr>"#));
            }
        }
        out.push_str("</table>");
        out
    }

    pub(super) fn cluster_style(&self, node: &Json) -> Vec<String> {
        let mut out: Vec<String> = [
            "style=filled;",
            "fontsize=10;",
            "fillcolor=\"#FFFFFF\";",
            "color=\"#999999\";",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .collect();
        if let Some(Json::Object(style)) = attribute(node, "style").and_then(|a| a.get("value")) {
            for (k, v) in style {
                if !v.is_null() {
                    out.push(format!("{};", attr(&crate::style::key(k), &js_string(v))));
                }
            }
        }
        for a in annotations(node).filter(|a| get_str(a, "name") == Some("style")) {
            if let Some(Json::Object(params)) = a.get("attributes") {
                for (k, v) in params {
                    out.push(format!("{};", attr(k, &js_string(v))));
                }
            } else if let Some(value) = get_str(a, "value") {
                for part in value.split(';').map(js_trim).filter(|p| !p.is_empty()) {
                    let Some((k, v)) = part.split_once(':') else {
                        continue;
                    };
                    let lower = js_trim(k).to_lowercase();
                    if k.is_empty()
                        || ["columns", "cols", "col", "column"].contains(&lower.as_str())
                    {
                        continue;
                    }
                    let key = crate::style::key(k);
                    let mut v = js_trim(v).to_string();
                    if key == "rankdir" || lower == "direction" {
                        v = direction(&v);
                    }
                    out.push(format!("{};", attr(&key, &v)));
                }
            }
        }
        for s in &self.style_nodes {
            for selector in annotations(s) {
                let name = get_str(selector, "name");
                if annotations(node).any(|a| get_str(a, "name") == name) {
                    for a in attributes(s) {
                        let value = a
                            .get("value")
                            .map_or_else(|| "undefined".into(), clean_value);
                        out.push(format!(
                            "{};",
                            attr(get_str(a, "name").unwrap_or(""), &value)
                        ));
                    }
                }
            }
        }
        out
    }
}
