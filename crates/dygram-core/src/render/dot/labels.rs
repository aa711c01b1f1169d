//! Graphviz HTML-like labels: escaping, line wrapping, attribute tables with ports, headings.

use std::collections::HashMap;

use serde_json::Value as Json;

use crate::render::access::{
    annotations, attribute, attributes, get_str, js_string, js_truthy, json_pretty, node_name,
};
use crate::render::dot::syntax::sanitize_id;
use crate::render::markdown;
use crate::render::markdown::escape_html;
use crate::values::{js_number, js_trim, strip_quotes};

/// Length in UTF-16 code units, as JavaScript counts.
pub(super) fn js_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Splits after at most `n` UTF-16 units (at least one character, so that splitting progresses).
pub(super) fn split_js(s: &str, n: usize) -> (&str, &str) {
    let mut units = 0;
    for (i, c) in s.char_indices() {
        units += c.len_utf16();
        if units > n {
            let at = if i == 0 { c.len_utf8() } else { i };
            return s.split_at(at);
        }
    }
    (s, "")
}

/// Breaks text into lines of at most `max` characters at spaces, cutting longer words; with
/// `keep_breaks`, existing line breaks are kept.
pub(super) fn break_text(text: &str, max: usize, keep_breaks: bool) -> Vec<String> {
    let max = max.max(1);
    if js_len(text) <= max {
        return vec![text.to_string()];
    }
    if keep_breaks && text.contains('\n') {
        let mut out = Vec::new();
        for segment in text.split('\n') {
            if js_len(segment) <= max {
                out.push(segment.to_string());
            } else {
                out.extend(break_text(segment, max, false));
            }
        }
        return out;
    }
    let mut lines = Vec::new();
    let mut current = String::new();
    for word in text.split(' ') {
        if js_len(word) > max {
            if !current.is_empty() {
                lines.push(std::mem::take(&mut current));
            }
            let mut remaining = word;
            while js_len(remaining) > max {
                let (head, tail) = split_js(remaining, max);
                lines.push(head.to_string());
                remaining = tail;
            }
            current = remaining.to_string();
        } else if js_len(&current) + js_len(word) < max {
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(word);
        } else {
            if !current.is_empty() {
                lines.push(std::mem::take(&mut current));
            }
            current = word.to_string();
        }
    }
    if !current.is_empty() {
        lines.push(current);
    }
    if lines.is_empty() {
        lines.push(text.to_string());
    }
    lines
}

/// Wrapped lines, each through Markdown, joined with `sep`.
pub(super) fn wrapped_markdown(text: &str, max: usize, keep_breaks: bool, sep: &str) -> String {
    break_text(text, max, keep_breaks)
        .iter()
        .map(|l| markdown::to_html(l))
        .collect::<Vec<_>>()
        .join(sep)
}

/// Line lengths for wrapped text (machine `style` keys or attributes, else defaults).
#[derive(Debug, Clone, Copy)]
pub(super) struct Wrap {
    pub(super) edge_label: usize,
    pub(super) multiplicity: usize,
    pub(super) attribute_key: usize,
    pub(super) attribute_value: usize,
    pub(super) node_title: usize,
    pub(super) node_desc: usize,
    pub(super) node_prompt: usize,
}

impl Wrap {
    pub(super) const DEFAULT: Wrap = Wrap {
        edge_label: 40,
        multiplicity: 20,
        attribute_key: 25,
        attribute_value: 30,
        node_title: 40,
        node_desc: 60,
        node_prompt: 100,
    };

    pub(super) fn from_machine(machine: &Json) -> Wrap {
        let get = |name: &str, default: usize| -> usize {
            let to_len = |f: f64| {
                if f.is_nan() {
                    None
                } else {
                    Some(f.max(0.0).floor() as usize)
                }
            };
            let numeric = |v: &Json| match v {
                Json::Number(n) => n.as_f64(),
                Json::String(s) => js_number(s),
                Json::Bool(b) => Some(f64::from(u8::from(*b))),
                Json::Null => Some(0.0),
                _ => None,
            };
            if let Some(v) = machine.get("style").and_then(|s| s.get(name))
                && let Some(n) = numeric(v).and_then(to_len)
            {
                return n;
            }
            if let Some(v) = attribute(machine, name).and_then(|a| a.get("value")) {
                let v = match v {
                    Json::String(s) => Json::String(strip_quotes(s).to_string()),
                    other => other.clone(),
                };
                return numeric(&v).and_then(to_len).unwrap_or(default);
            }
            default
        };
        Wrap {
            edge_label: get("maxEdgeLabelLength", 40),
            multiplicity: get("maxMultiplicityLength", 20),
            attribute_key: get("maxAttributeKeyLength", 25),
            attribute_value: get("maxAttributeValueLength", 30),
            node_title: get("maxNodeTitleLength", 40),
            node_desc: get("maxNodeDescLength", 60),
            node_prompt: get("maxNodePromptLength", 100),
        }
    }
}

/// A port name part: quotes removed, runs of other characters as `_`, no outer `_`.
pub(super) fn sanitize_port(raw: &str) -> String {
    sanitize_id(js_trim(strip_quotes(raw)))
        .trim_matches('_')
        .to_string()
}

/// The key and value port names of each attribute (repeated names get `_1`, `_2`, …).
pub(super) fn port_names(attrs: &[&Json]) -> Vec<(String, String)> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    attrs
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let mut base = sanitize_port(get_str(a, "name").unwrap_or(""));
            if base.is_empty() {
                base = format!("attribute_{i}");
            }
            let count = seen.entry(base.clone()).or_insert(0);
            let suffix = if *count > 0 {
                format!("_{count}")
            } else {
                String::new()
            };
            *count += 1;
            (
                format!("{base}__key{suffix}"),
                format!("{base}__value{suffix}"),
            )
        })
        .collect()
}

/// The value port of the attribute an edge endpoint names (`attr` or `attr.path`).
pub(super) fn attribute_port(attrs: &[&Json], handle: &str) -> Option<String> {
    let cleaned = js_trim(strip_quotes(handle));
    if cleaned.is_empty() {
        return None;
    }
    let mut candidates = vec![cleaned.to_string(), sanitize_port(cleaned)];
    if let Some(dot) = cleaned.find('.')
        && dot > 0
    {
        let prefix = &cleaned[..dot];
        candidates.push(prefix.to_string());
        candidates.push(sanitize_port(prefix));
    }
    let ports = port_names(attrs);
    attrs.iter().zip(ports).find_map(|(a, (_, value_port))| {
        let name = get_str(a, "name").unwrap_or("");
        (candidates
            .iter()
            .any(|c| c == name || *c == sanitize_port(name)))
        .then_some(value_port)
    })
}

/// An attribute's display value: the inner `value` of an object that has one, formatted.
pub(super) fn display_value(a: &Json) -> String {
    let v = match a.get("value") {
        Some(Json::Object(m)) if m.get("value").is_some_and(|x| !x.is_null()) => m.get("value"),
        other => other,
    };
    match v {
        None | Some(Json::Null) => "null".into(),
        Some(Json::String(s)) => {
            let cleaned = strip_quotes(s);
            let t = js_trim(cleaned);
            if (t.starts_with('{') || t.starts_with('['))
                && let Ok(parsed @ (Json::Object(_) | Json::Array(_))) =
                    serde_json::from_str::<Json>(cleaned)
            {
                return json_pretty(&parsed);
            }
            cleaned.to_string()
        }
        Some(v @ (Json::Array(_) | Json::Object(_))) => json_pretty(v),
        Some(other) => js_string(other),
    }
}

/// The attribute table (ports on every cell).
pub(super) fn attribute_table(attrs: &[&Json], wrap: &Wrap) -> String {
    if attrs.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        r#"<table border="0" cellborder="1" cellspacing="0" cellpadding="2" align="left">"#,
    );
    for (a, (key_port, value_port)) in attrs.iter().zip(port_names(attrs)) {
        let value = wrapped_markdown(&display_value(a), wrap.attribute_value, true, "<BR/>");
        let name = get_str(a, "name").unwrap_or("");
        let name_html = if js_len(name) > wrap.attribute_key {
            wrapped_markdown(name, wrap.attribute_key, false, "<BR/>")
        } else {
            markdown::to_html(name)
        };
        let ty = match get_str(a, "type") {
            Some(t) if !t.is_empty() => format!(" : {}", escape_html(t)),
            _ => String::new(),
        };
        out.push_str(&format!(
            r#"<tr><td port="{key_port}" align="left" balign="left">{name_html}{ty}</td><td port="{value_port}" align="left" balign="left">{value}</td></tr>"#
        ));
    }
    out.push_str("</table>");
    out
}

/// `@A @B("value")`, without `@note` and `@style`, HTML-escaped; `None` when there are none.
pub(super) fn annotation_text(v: &Json) -> Option<String> {
    let parts: Vec<String> = annotations(v)
        .filter(|a| !matches!(get_str(a, "name"), Some("note" | "style")))
        .map(|a| {
            let name = escape_html(get_str(a, "name").unwrap_or(""));
            match a.get("value").filter(|x| js_truthy(x)) {
                Some(value) => format!("@{name}(\"{}\")", escape_html(&js_string(value))),
                None => format!("@{name}"),
            }
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// The first row of a node or cluster label: name, type, annotations.
pub(super) fn heading(node: &Json) -> String {
    let mut out = format!("<b>{}</b>", escape_html(node_name(node)));
    if let Some(t) = get_str(node, "type").filter(|t| !t.is_empty()) {
        out.push_str(&format!(" <i>&lt;{}&gt;</i>", escape_html(t)));
    }
    if let Some(a) = annotation_text(node) {
        out.push_str(&format!(" <i>{a}</i>"));
    }
    out
}

/// A node's attributes as its label shows them (not `desc`, `prompt`, `style`).
pub(super) fn display_attributes(node: &Json) -> Vec<&Json> {
    attributes(node)
        .filter(|a| !matches!(get_str(a, "name"), Some("desc" | "prompt" | "style")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_breaks_like_the_reference() {
        assert_eq!(
            break_text("{{ globalConfig.environment }}.results", 30, true),
            ["{{ globalConfig.environment", "}}.results"]
        );
        assert_eq!(break_text("abcdefgh", 3, false), ["abc", "def", "gh"]);
        assert_eq!(break_text("a\nbb", 1, true), ["a", "b", "b"]);
        assert_eq!(break_text("short", 0, false), ["s", "h", "o", "r", "t"]);
    }
}
