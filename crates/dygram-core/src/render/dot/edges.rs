//! Edges: endpoints and ports, labels, arrow styles and condition styling.

use serde_json::{Map, Value as Json};

use crate::render::access::{annotations, get_str, js_string, js_truthy};
use crate::render::dot::graph::Generator;
use crate::render::dot::labels::{
    attribute_port, break_text, display_attributes, wrapped_markdown,
};
use crate::render::dot::styles::{style_attributes, style_node_matches, style_node_style};
use crate::render::dot::syntax::{anchor, escape_dot, html, id, quoted, source_fragment};
use crate::render::markdown::escape_html;
use crate::values::{js_trim, strip_quotes};

impl Generator<'_> {
    pub(super) fn edges(&self) -> Vec<String> {
        self.edges
            .iter()
            .filter(|e| e.is_object())
            .map(|e| self.edge(e))
            .collect()
    }

    pub(super) fn edge(&self, edge: &Json) -> String {
        let empty = Map::new();
        let values = edge
            .get("attributes")
            .and_then(Json::as_object)
            .unwrap_or(&empty);
        let source = get_str(edge, "source").unwrap_or("");
        let target = get_str(edge, "target").unwrap_or("");
        let mut attrs: Vec<String> = Vec::new();
        if let Some(label) = self.edge_label(edge, values) {
            attrs.push(format!("label={}", html(&label)));
        }
        for (key, dot_key) in [
            ("sourceMultiplicity", "taillabel"),
            ("targetMultiplicity", "headlabel"),
        ] {
            if let Some(m) = edge.get(key).filter(|v| js_truthy(v)) {
                let wrapped = break_text(&js_string(m), self.wrap.multiplicity, false).join("\\n");
                attrs.push(format!("{dot_key}=\"{}\"", escape_dot(&wrapped)));
            }
        }
        let arrow = arrow_style(get_str(edge, "arrowType").unwrap_or("->"));
        if !arrow.is_empty() {
            attrs.push(arrow.into());
        }
        attrs.push("labelOverlay=\"75%\"".into());
        match source_fragment(edge) {
            Some(url) => attrs.push(format!("edgeURL=\"{url}\"")),
            None => attrs.push("labelhref=\"#srcLineTBD\"".into()),
        }

        let handle = |key: &str| -> Option<String> {
            edge.get(key)
                .or_else(|| values.get(key))
                .filter(|v| !v.is_null())
                .map(|v| js_trim(strip_quotes(&js_string(v))).to_string())
                .filter(|s| !s.is_empty())
        };
        let (source_id, tail) =
            self.endpoint(source, handle("sourcePort"), handle("sourceAttribute"));
        let (target_id, head) =
            self.endpoint(target, handle("targetPort"), handle("targetAttribute"));
        if tail {
            attrs.push(format!("ltail={}", quoted(&format!("cluster_{source}"))));
        }
        if head {
            attrs.push(format!("lhead={}", quoted(&format!("cluster_{target}"))));
        }

        let mut custom = String::new();
        if let Some(Json::Object(s)) = edge.get("style") {
            custom.push_str(&style_attributes(s));
        }
        for s in &self.style_nodes {
            if style_node_matches(s, edge) {
                custom.push_str(&style_attributes(&style_node_style(s)));
            }
        }
        let condition = match condition(values).map(|c| self.expressions.condition_holds(&c)) {
            Some(true) => ", style=solid, color=\"#4CAF50\", penwidth=2",
            Some(false) => ", style=dashed, color=\"#9E9E9E\", penwidth=1",
            None => "",
        };
        format!(
            "  {source_id} -> {target_id} [{}{custom}{condition}];",
            attrs.join(", ")
        )
    }

    /// An edge endpoint (id with port) and whether it is a cluster's anchor.
    pub(super) fn endpoint(
        &self,
        name: &str,
        port: Option<String>,
        attribute_handle: Option<String>,
    ) -> (String, bool) {
        let explicit = port.filter(|p| p != "cluster" && p != "header");
        if explicit.is_none() && attribute_handle.is_none() && self.is_cluster(name) {
            return (id(&anchor(name)), true);
        }
        let port = explicit.or_else(|| {
            let node = self.by_name.get(name)?;
            attribute_port(&display_attributes(node), attribute_handle.as_deref()?)
        });
        match port {
            Some(p) => (format!("{}:{}", id(name), quoted(&p)), false),
            None => (id(name), false),
        }
    }

    pub(super) fn edge_label(&self, edge: &Json, values: &Map<String, Json>) -> Option<String> {
        let text = values.get("text").filter(|v| js_truthy(v)).map(js_string);
        let show_annotations = !annotations(edge).any(|a| {
            matches!(get_str(a, "name"), Some("hideLabel" | "hideAnnotation"))
                || (get_str(a, "name") == Some("showAnnotation")
                    && get_str(a, "value") == Some("false"))
        });
        let mut rows: Vec<(String, Json)> = values
            .iter()
            .filter(|(k, _)| *k != "text" && !EDGE_METADATA_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        // The reference's inferred edges carry `type: undefined` when the attribute has no type.
        if get_str(edge, "type") == Some("inferred")
            && values.contains_key("attribute")
            && !values.contains_key("type")
        {
            let at = rows
                .iter()
                .position(|(k, _)| k == "attribute")
                .map_or(0, |p| p + 1);
            rows.insert(at, ("type".into(), Json::String("undefined".into())));
        }
        let mut out = String::new();
        if let Some(t) = text {
            out.push_str(&format!(
                r#"<tr><td align="left" balign="left"><b>{}</b></td></tr>"#,
                wrapped_markdown(&t, self.wrap.edge_label, false, "<br/>")
            ));
        }
        if show_annotations {
            let ann: Vec<String> = annotations(edge)
                .filter(|a| get_str(a, "name") != Some("style"))
                .map(|a| {
                    let name = escape_html(get_str(a, "name").unwrap_or(""));
                    match a.get("value").filter(|x| js_truthy(x)) {
                        Some(v) => format!("@{name}(\"{}\")", escape_html(&js_string(v))),
                        None => format!("@{name}"),
                    }
                })
                .collect();
            if !ann.is_empty() {
                out.push_str(&format!(
                    r#"<tr><td align="left" balign="left"><i>{}</i></td></tr>"#,
                    ann.join(" ")
                ));
            }
        }
        if !rows.is_empty() {
            out.push_str(r#"<tr><td align="left"><table border="0" cellborder="1" cellspacing="0" cellpadding="2" align="left">"#);
            for (k, v) in &rows {
                out.push_str(&format!(
                    r#"<tr><td align="left" balign="left">{}</td><td align="left" balign="left">{}</td></tr>"#,
                    escape_html(k),
                    escape_html(&js_string(v))
                ));
            }
            out.push_str("</table></td></tr>");
        }
        if out.is_empty() {
            return None;
        }
        Some(format!(
            r#"<table border="0" cellborder="0" cellspacing="0" cellpadding="2" align="left">{out}</table>"#
        ))
    }
}

/// Keys of edge attributes that place an edge, not describe it.
pub(super) const EDGE_METADATA_KEYS: [&str; 6] = [
    "sourceAttribute",
    "targetAttribute",
    "sourcePort",
    "targetPort",
    "sourceHandle",
    "targetHandle",
];

/// Graphviz attributes for an arrow type.
pub(super) fn arrow_style(arrow: &str) -> &'static str {
    match arrow {
        "-->" => "style=\"dashed\"",
        "=>" => "penwidth=3, color=\"#D32F2F\"",
        "<-->" => "dir=both, arrowhead=normal, arrowtail=normal",
        "<|--" => "arrowhead=empty, dir=back",
        "*-->" => "arrowhead=diamond, arrowtail=diamond, dir=forward",
        "o-->" => "arrowhead=odiamond, arrowtail=none",
        _ => "",
    }
}

/// An edge's condition: `when`, else `!(unless)`, else `if` (attributes first, then the text).
pub(super) fn condition(values: &Map<String, Json>) -> Option<String> {
    let get = |k: &str| {
        values
            .get(k)
            .filter(|v| !v.is_null())
            .map(|v| js_trim(&js_string(v)).to_string())
            .filter(|s| !s.is_empty())
    };
    if let Some(c) = get("when") {
        return Some(c);
    }
    if let Some(c) = get("unless") {
        return Some(format!("!({c})"));
    }
    if let Some(c) = get("if") {
        return Some(c);
    }
    let text = get("text")?;
    let lower = text.to_ascii_lowercase();
    for (keyword, negate) in [("when:", false), ("unless:", true), ("if:", false)] {
        if let Some(pos) = lower.find(keyword) {
            let rest = text[pos + keyword.len()..].trim_start();
            let rest = rest.strip_prefix(['"', '\'']).unwrap_or(rest);
            let end = rest.find(['"', '\'']).unwrap_or(rest.len());
            let c = js_trim(&rest[..end]);
            if c.is_empty() {
                continue;
            }
            return Some(if negate {
                format!("!({c})")
            } else {
                c.to_string()
            });
        }
    }
    None
}
