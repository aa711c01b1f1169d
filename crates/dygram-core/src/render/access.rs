//! Reading the canonical machine JSON as the reference's JavaScript reads it: keys that may be
//! missing or of the wrong kind, `String(value)`, truthiness, `JSON.stringify`, and the effective
//! type of a node. Shared by the DOT and Mermaid outputs.

use std::collections::HashMap;

use serde_json::Value as Json;

use crate::values::{js_number_to_string, strip_quotes};

/// The string at `key`, if it is one.
pub(super) fn get_str<'a>(v: &'a Json, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Json::as_str)
}

/// The array at `key` (empty if missing or not an array).
pub(super) fn get_array<'a>(v: &'a Json, key: &str) -> &'a [Json] {
    v.get(key)
        .and_then(Json::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A node's name (`""` if missing).
pub(super) fn node_name(n: &Json) -> &str {
    get_str(n, "name").unwrap_or("")
}

/// The attribute entries of a node or machine that have a name.
pub(super) fn attributes(v: &Json) -> impl Iterator<Item = &Json> {
    get_array(v, "attributes")
        .iter()
        .filter(|a| get_str(a, "name").is_some())
}

/// The first attribute of that name.
pub(super) fn attribute<'a>(v: &'a Json, name: &str) -> Option<&'a Json> {
    attributes(v).find(|a| get_str(a, "name") == Some(name))
}

/// The annotation entries that have a name.
pub(super) fn annotations(v: &Json) -> impl Iterator<Item = &Json> {
    get_array(v, "annotations")
        .iter()
        .filter(|a| get_str(a, "name").is_some())
}

pub(super) fn has_annotation(v: &Json, name: &str) -> bool {
    annotations(v).any(|a| get_str(a, "name") == Some(name))
}

/// `String(value)` in JavaScript.
pub(super) fn js_string(v: &Json) -> String {
    match v {
        Json::Null => "null".into(),
        Json::Bool(b) => b.to_string(),
        Json::Number(n) => number_string(n),
        Json::String(s) => s.clone(),
        Json::Array(items) => items
            .iter()
            .map(|i| match i {
                Json::Null => String::new(),
                other => js_string(other),
            })
            .collect::<Vec<_>>()
            .join(","),
        Json::Object(_) => "[object Object]".into(),
    }
}

pub(super) fn number_string(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        n.to_string()
    } else {
        js_number_to_string(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// JavaScript truthiness.
pub(super) fn js_truthy(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Json::String(s) => !s.is_empty(),
        Json::Array(_) | Json::Object(_) => true,
    }
}

/// Whole floats as integers, as JavaScript prints them.
pub(super) fn js_numbers(v: &Json) -> Json {
    match v {
        Json::Number(n) if !(n.is_i64() || n.is_u64()) => {
            crate::values::number(n.as_f64().unwrap_or(f64::NAN))
        }
        Json::Array(items) => Json::Array(items.iter().map(js_numbers).collect()),
        Json::Object(m) => {
            Json::Object(m.iter().map(|(k, v)| (k.clone(), js_numbers(v))).collect())
        }
        other => other.clone(),
    }
}

/// `JSON.stringify(v, null, 2)`.
pub(super) fn json_pretty(v: &Json) -> String {
    serde_json::to_string_pretty(&js_numbers(v)).unwrap_or_default()
}

/// `JSON.stringify(v)`.
pub(super) fn json_compact(v: &Json) -> String {
    serde_json::to_string(&js_numbers(v)).unwrap_or_default()
}

/// A string value with one leading and one trailing quote removed, anything else as `String(v)`.
pub(super) fn clean_value(v: &Json) -> String {
    match v {
        Json::String(s) => strip_quotes(s).to_string(),
        other => js_string(other),
    }
}

/// Explicit types that mean a data node.
pub(super) const CONTEXT_ALIASES: [&str; 7] = [
    "data", "input", "output", "result", "entity", "resource", "concept",
];

/// A node's effective type: its explicit type (lower-cased, data aliases as `context`), else one
/// inferred from its attributes, name and edges (`task`, `tool`, `context`, `init`), else none.
pub(super) fn node_kind(node: &Json, edges: &[Json]) -> Option<String> {
    if let Some(t) = get_str(node, "type").filter(|t| !t.is_empty()) {
        let t = t.to_lowercase();
        if CONTEXT_ALIASES.contains(&t.as_str()) {
            return Some("context".into());
        }
        return Some(t);
    }
    // Attribute names and whether the last one of each name has a value.
    let mut defined: HashMap<&str, bool> = HashMap::new();
    for a in attributes(node) {
        let name = get_str(a, "name").unwrap_or("");
        defined.insert(name, a.get("value").is_some_and(|v| !v.is_null()));
    }
    let has = |k: &str| defined.get(k).copied().unwrap_or(false);
    if has("prompt") {
        return Some("task".into());
    }
    if ["input", "output", "parameters", "schema", "returns"]
        .iter()
        .any(|k| has(k))
    {
        return Some("tool".into());
    }
    let name = node_name(node).to_lowercase();
    let context_name = name != "state"
        && [
            "context", "output", "input", "data", "result", "config", "state",
        ]
        .iter()
        .any(|p| name.contains(p));
    let only_data = !defined.is_empty()
        && !["prompt", "meta", "condition", "action"]
            .iter()
            .any(|k| has(k));
    if context_name || only_data {
        return Some("context".into());
    }
    let name = node_name(node);
    let incoming = edges.iter().any(|e| get_str(e, "target") == Some(name));
    let outgoing = edges.iter().any(|e| get_str(e, "source") == Some(name));
    if !incoming && outgoing {
        return Some("init".into());
    }
    None
}

pub(super) fn is_style_node(n: &Json) -> bool {
    get_str(n, "type").is_some_and(|t| t.eq_ignore_ascii_case("style"))
}

pub(super) fn is_note(n: &Json) -> bool {
    get_str(n, "type").is_some_and(|t| t.eq_ignore_ascii_case("note"))
}
