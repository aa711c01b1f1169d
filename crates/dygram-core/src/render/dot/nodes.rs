//! Node definitions, node styles and notes.

use serde_json::Value as Json;

use crate::render::access::{
    annotations, attribute, attributes, clean_value, get_str, has_annotation, js_string, js_truthy,
    json_compact, node_kind, node_name,
};

use crate::render::dot::graph::Generator;
use crate::render::dot::labels::{attribute_table, display_attributes, heading, wrapped_markdown};
use crate::render::dot::styles::{
    colours, shape, style_attributes, style_node_matches, style_node_style,
};
use crate::render::dot::syntax::{anchor, html, id, source_fragment};
use crate::render::markdown::escape_html;
use crate::values::strip_quotes;

impl Generator<'_> {
    pub(super) fn node_definition(&self, node: &Json, indent: &str) -> String {
        let wrap = &self.wrap;
        let mut label = format!(
            r#"<table border="0" cellborder="0" cellspacing="0" cellpadding="4"><tr><td align="left">{}</td></tr>"#,
            heading(node)
        );
        if let Some(title) = get_str(node, "title")
            && !title.is_empty()
            && title != node_name(node)
        {
            let text = self.interpolate(strip_quotes(title));
            label.push_str(&format!(
                r#"<tr><td align="left">{}</td></tr>"#,
                wrapped_markdown(&text, wrap.node_title, false, "<br/>")
            ));
        }
        if let Some(desc) = attribute(node, "desc")
            .and_then(|a| a.get("value"))
            .filter(|v| js_truthy(v))
        {
            let text = self.interpolate(&clean_value(desc));
            label.push_str(&format!(
                r#"<tr><td align="left"><font point-size="9"><i>{}</i></font></td></tr>"#,
                wrapped_markdown(&text, wrap.node_desc, false, "<br/>")
            ));
        }
        if let Some(prompt) = attribute(node, "prompt")
            .and_then(|a| a.get("value"))
            .filter(|v| js_truthy(v))
        {
            let text = self.interpolate(&clean_value(prompt));
            label.push_str(&format!(
                r##"<tr><td align="left"><font point-size="8" color="#666666">→ {}</font></td></tr>"##,
                wrapped_markdown(&text, wrap.node_prompt, false, "<br/>")
            ));
        }
        let shown = display_attributes(node);
        if !shown.is_empty() {
            label.push_str(&format!(
                "<tr><td>{}</td></tr>",
                attribute_table(&shown, wrap)
            ));
        }
        label.push_str("</table>");

        let kind = node_kind(node, self.edges);
        let mut out = format!(
            "{indent}{} [label={}, pad=0.5, shape={}, {}",
            id(node_name(node)),
            html(&label),
            shape(node, kind.as_deref()),
            self.node_style(node, kind.as_deref())
        );
        if let Some(url) = source_fragment(node) {
            out.push_str(&format!(", URL=\"{url}\""));
        }
        out.push_str("];");
        out
    }

    pub(super) fn node_style(&self, node: &Json, kind: Option<&str>) -> String {
        let (fill, line) = colours(kind);
        let mut style = String::from("style=filled");
        let mut extra = String::new();
        if kind.is_none() && annotations(node).next().is_none() {
            return format!("fillcolor=\"{fill}\", style=filled, color=\"{line}\"");
        }
        if has_annotation(node, "Deprecated") {
            style = "style=\"filled,dashed\"".into();
            extra.push_str(", fontcolor=\"#999999\"");
        }
        if has_annotation(node, "Critical") {
            extra.push_str(", penwidth=3");
        }
        if has_annotation(node, "Singleton") {
            extra.push_str(", peripheries=2");
        }
        if has_annotation(node, "Abstract") {
            style = "style=\"filled,dashed\"".into();
        }
        let mut out = format!("fillcolor=\"{fill}\", {style}, color=\"{line}\"{extra}");
        if let Some(Json::Object(s)) = node.get("style") {
            out.push_str(&style_attributes(s));
        }
        for s in &self.style_nodes {
            if style_node_matches(s, node) {
                out.push_str(&style_attributes(&style_node_style(s)));
            }
        }
        out
    }

    pub(super) fn note(&self, note: &Json, dot_id: &str, indent: &str) -> Vec<String> {
        let target = node_name(note);
        let resolved = if self.is_cluster(target) {
            anchor(target)
        } else {
            target.to_string()
        };
        let content = match get_str(note, "title").filter(|t| !t.is_empty()) {
            Some(t) => Some(strip_quotes(t).to_string()),
            None => attributes(note)
                .find(|a| matches!(get_str(a, "name"), Some("desc" | "prompt")))
                .and_then(|a| a.get("value"))
                .filter(|v| js_truthy(v))
                .map(|v| match v {
                    Json::String(s) => strip_quotes(s).to_string(),
                    other => strip_quotes(&json_compact(other)).to_string(),
                }),
        };
        let mut label =
            String::from(r#"<table border="0" cellborder="0" cellspacing="0" cellpadding="4">"#);
        let ann: Vec<String> = annotations(note)
            .map(|a| {
                let name = get_str(a, "name").unwrap_or("");
                match a.get("value").filter(|x| js_truthy(x)) {
                    Some(v) => format!("@{name}({})", js_string(v)),
                    None => format!("@{name}"),
                }
            })
            .collect();
        if !ann.is_empty() {
            label.push_str(&format!(
                r#"<tr><td align="left"><i>{}</i></td></tr>"#,
                escape_html(&ann.join(" "))
            ));
        }
        if let Some(c) = content.filter(|c| !c.is_empty()) {
            label.push_str(&format!(
                r#"<tr><td align="left">{}</td></tr>"#,
                wrapped_markdown(&c, 40, false, "<br/>")
            ));
        }
        let shown: Vec<&Json> = attributes(note)
            .filter(|a| {
                !matches!(
                    get_str(a, "name"),
                    Some("target" | "desc" | "prompt" | "style")
                )
            })
            .collect();
        if !shown.is_empty() {
            label.push_str(&format!(
                "<tr><td>{}</td></tr>",
                attribute_table(&shown, &self.wrap)
            ));
        }
        label.push_str("</table>");
        let label = if label.contains("<tr>") {
            html(&label)
        } else {
            "\"\"".into()
        };
        vec![
            format!(
                "{indent}{} [label={label}, shape=note, fillcolor=\"#FFFACD\", style=filled, fontsize=9];",
                id(dot_id)
            ),
            format!(
                "{indent}{} -> {} [style=dashed, color=\"#999999\", arrowhead=none];",
                id(dot_id),
                id(&resolved)
            ),
        ]
    }
}
