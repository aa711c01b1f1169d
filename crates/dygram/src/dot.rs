//! Graphviz DOT output, and SVG through the external `dot` program.
//!
//! [`to_dot`] turns the canonical machine JSON (see [`crate::json`], with or without
//! `$sourceRange`) into a `digraph`. The layout follows the reference implementation's generator,
//! so that for most programs the text is byte for byte the reference's:
//!
//! * a graph label (an HTML table with the title, version and annotations, description and the
//!   machine attributes) and the machine `style` keys as graph attributes;
//! * one node per leaf node, with an HTML label (name, `<type>`, annotations, title, `desc`,
//!   prompt preview `→ …`, and an attribute table whose cells are ports `<attr>__key` /
//!   `<attr>__value`), a shape and colours chosen by its type (explicit or inferred), and
//!   `URL="#L<line>:<col>-<line>:<col>"` with the 0-based source range;
//! * a `cluster_<name>` subgraph per parent node, holding an invisible point node
//!   `<name>__cluster_anchor` that edges to and from the parent attach to (`lhead`/`ltail`), and a
//!   `shape=plain` node with the parent's own attributes;
//! * `note_<target>_<i>` note nodes with a dashed link to what they annotate;
//! * the edges, with HTML labels (text, annotations, attribute table), multiplicities as
//!   `taillabel`/`headlabel`, arrow styles per arrow type, inline label pairs and matching `style`
//!   nodes as DOT attributes, attribute ports, and condition styling;
//! * inferred dependencies as dashed blue edges.
//!
//! Titles, `desc` and prompts go through `{{ node.attribute }}` template resolution against every
//! node's attributes (one that cannot be resolved stays as written; a list value is written as
//! JSON, where the reference writes its CEL library's internal `{"_array":[…]}`, and a map as JSON
//! with its keys sorted), and through a
//! small inline Markdown converter (`**bold**`, `*italic*`, `~~strike~~`, `` `code` ``, links,
//! bare URLs and e-mail addresses) to Graphviz's HTML subset; all other text is HTML-escaped. The
//! text has no final line break, like the reference's.
//!
//! Where the reference would write DOT that Graphviz rejects, we deviate: an HTML table without
//! rows is left out (the graph label becomes `""`, an edge gets no label), text right after a tag
//! that starts with `]` is written `&#93;` (Graphviz 2.43 misreads `>]`), names that are not plain
//! DOT identifiers are quoted in `subgraph` statements, and attribute names that are not
//! identifiers are quoted. Node ids are always quoted.
//!
//! # Condition styling
//!
//! An edge whose attributes hold `when:`, `unless:` (negated) or `if:` gets `style=solid,
//! color="#4CAF50", penwidth=2` when its condition holds and `style=dashed, color="#9E9E9E",
//! penwidth=1` when it does not. Conditions, and the `{{ … }}` templates of labels, are evaluated
//! by the runtime's CEL evaluator ([`crate::runtime::condition`]); [`expressions`] says against
//! what, and how an outcome is drawn:
//!
//! * a condition that cannot be parsed is **inactive**;
//! * a condition that parses but fails while evaluating (an unknown name such as `Data.priority`
//!   when `Data` is not a machine attribute, a missing key, mismatched types) is **active**: the
//!   reference's CEL library returns an error *object* there, which JavaScript counts as true.
//!   The reference corpus relies on this (e.g. `when: "Data.priority == 'high'"` is drawn
//!   active), so we keep it.
//!
//! # SVG
//!
//! [`to_svg`] pipes DOT through `dot -Tsvg`; [`to_svg_with`] names another program.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Map, Value as Json};

use crate::values::{js_number, js_number_to_string, js_trim, strip_quotes};

/// Graphviz DOT for a canonical machine JSON. Never fails: missing or ill-typed keys are skipped.
pub fn to_dot(machine: &Json) -> String {
    Generator::new(machine).render()
}

/// Why [`to_svg`] failed.
#[derive(Debug, thiserror::Error)]
pub enum SvgError {
    /// The Graphviz program is not installed (or not on `PATH`).
    #[error(
        "cannot render SVG: the Graphviz program `{program}` was not found on PATH; install Graphviz (e.g. `apt-get install graphviz` or `brew install graphviz`)"
    )]
    NotInstalled {
        /// The program looked for.
        program: String,
    },
    /// The program could not be run or talked to.
    #[error("cannot render SVG: running `{program}` failed: {source}")]
    Io {
        /// The program run.
        program: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The program ran and reported an error.
    #[error("`{program} -Tsvg` failed ({status}): {stderr}")]
    Failed {
        /// The program run.
        program: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it wrote to stderr (trimmed).
        stderr: String,
    },
    /// The program wrote something that is not UTF-8.
    #[error("`{program} -Tsvg` wrote output that is not UTF-8")]
    NotUtf8 {
        /// The program run.
        program: String,
    },
}

/// [`to_dot`] with an execution drawn on it: visited nodes get a thick green outline, current
/// nodes are filled, and the transitions taken are drawn as bold green edges.
pub fn to_dot_highlighted(
    machine: &Json,
    visited: &[String],
    current: &[String],
    taken: &[(String, String)],
) -> String {
    let mut dot = to_dot(machine);
    let Some(end) = dot.rfind('}') else {
        return dot;
    };
    let parents: std::collections::HashSet<&str> = machine
        .get("nodes")
        .and_then(Json::as_array)
        .map(|nodes| {
            nodes
                .iter()
                .filter_map(|n| n.get("parent").and_then(Json::as_str))
                .collect()
        })
        .unwrap_or_default();
    // The ids `to_dot` gave the nodes (a parent is drawn through its cluster's anchor).
    let node_id = |name: &str| {
        if parents.contains(name) {
            id(&anchor(name))
        } else {
            id(name)
        }
    };
    let mut extra = String::from("  // execution\n");
    for n in visited.iter().filter(|n| !parents.contains(n.as_str())) {
        extra.push_str(&format!(
            "  {} [penwidth=3, color=\"#2E7D32\"];\n",
            node_id(n)
        ));
    }
    for n in current.iter().filter(|n| !parents.contains(n.as_str())) {
        extra.push_str(&format!(
            "  {} [penwidth=3, color=\"#1B5E20\", style=\"filled\", fillcolor=\"#A5D6A7\"];\n",
            node_id(n)
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for (from, to) in taken {
        if seen.insert((from, to)) {
            extra.push_str(&format!(
                "  {} -> {} [color=\"#2E7D32\", penwidth=3, constraint=false];\n",
                node_id(from),
                node_id(to)
            ));
        }
    }
    dot.insert_str(end, &extra);
    dot
}

/// SVG for a DOT text, by running Graphviz's `dot -Tsvg` (DOT on stdin, SVG on stdout).
pub fn to_svg(dot: &str) -> Result<String, SvgError> {
    to_svg_with("dot", dot)
}

/// Like [`to_svg`], with the Graphviz program to run (`dot`, a path to it, or another layout
/// engine such as `neato`).
pub fn to_svg_with(program: &str, dot: &str) -> Result<String, SvgError> {
    let io = |source: std::io::Error| SvgError::Io {
        program: program.to_string(),
        source,
    };
    let mut child = match Command::new(program)
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SvgError::NotInstalled {
                program: program.to_string(),
            });
        }
        Err(e) => return Err(io(e)),
    };
    // Write from another thread so that a large output cannot dead-lock against our input.
    let writer = child.stdin.take().map(|mut stdin| {
        let input = dot.as_bytes().to_vec();
        std::thread::spawn(move || stdin.write_all(&input))
    });
    let output = child.wait_with_output().map_err(io)?;
    if let Some(handle) = writer {
        match handle.join() {
            Ok(Ok(())) => {}
            // A program that exits early closes the pipe; its status and stderr say why.
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Ok(Err(e)) => return Err(io(e)),
            Err(_) => return Err(io(std::io::Error::other("the writer thread panicked"))),
        }
    }
    if !output.status.success() {
        return Err(SvgError::Failed {
            program: program.to_string(),
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    String::from_utf8(output.stdout).map_err(|_| SvgError::NotUtf8 {
        program: program.to_string(),
    })
}

// ---- JSON access ---------------------------------------------------------------------------------

/// The string at `key`, if it is one.
fn get_str<'a>(v: &'a Json, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Json::as_str)
}

/// The array at `key` (empty if missing or not an array).
fn get_array<'a>(v: &'a Json, key: &str) -> &'a [Json] {
    v.get(key)
        .and_then(Json::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A node's name (`""` if missing).
pub(crate) fn node_name(n: &Json) -> &str {
    get_str(n, "name").unwrap_or("")
}

/// The attribute entries of a node or machine that have a name.
pub(crate) fn attributes(v: &Json) -> impl Iterator<Item = &Json> {
    get_array(v, "attributes")
        .iter()
        .filter(|a| get_str(a, "name").is_some())
}

/// The first attribute of that name.
pub(crate) fn attribute<'a>(v: &'a Json, name: &str) -> Option<&'a Json> {
    attributes(v).find(|a| get_str(a, "name") == Some(name))
}

/// The annotation entries that have a name.
fn annotations(v: &Json) -> impl Iterator<Item = &Json> {
    get_array(v, "annotations")
        .iter()
        .filter(|a| get_str(a, "name").is_some())
}

fn has_annotation(v: &Json, name: &str) -> bool {
    annotations(v).any(|a| get_str(a, "name") == Some(name))
}

/// `String(value)` in JavaScript.
pub(crate) fn js_string(v: &Json) -> String {
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

fn number_string(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        n.to_string()
    } else {
        js_number_to_string(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// JavaScript truthiness.
fn js_truthy(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Json::String(s) => !s.is_empty(),
        Json::Array(_) | Json::Object(_) => true,
    }
}

/// Whole floats as integers, as JavaScript prints them.
fn js_numbers(v: &Json) -> Json {
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
fn json_pretty(v: &Json) -> String {
    serde_json::to_string_pretty(&js_numbers(v)).unwrap_or_default()
}

/// `JSON.stringify(v)`.
fn json_compact(v: &Json) -> String {
    serde_json::to_string(&js_numbers(v)).unwrap_or_default()
}

/// A string value with one leading and one trailing quote removed, anything else as `String(v)`.
fn clean_value(v: &Json) -> String {
    match v {
        Json::String(s) => strip_quotes(s).to_string(),
        other => js_string(other),
    }
}

// ---- text ----------------------------------------------------------------------------------------

/// Escapes text for an HTML-like label.
pub(crate) fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            // Control characters are not allowed in Graphviz's HTML labels.
            c if c.is_control() && !matches!(c, '\n' | '\t' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

/// Escapes text for a quoted DOT label (record delimiters too, as the reference does).
fn escape_dot(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            '{' => out.push_str("\\{"),
            '}' => out.push_str("\\}"),
            '|' => out.push_str("\\|"),
            c => out.push(c),
        }
    }
    out
}

/// A quoted DOT string. `"` is escaped as `\"`; Graphviz also reads `\\` as a pair, so backslashes
/// right before a quote (or at the end) are doubled. Other backslashes stay as they are.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    let mut backslashes = 0;
    for c in text.chars() {
        match c {
            '\\' => backslashes += 1,
            '"' => {
                out.push_str(&"\\".repeat(backslashes * 2 + 1));
                out.push('"');
                backslashes = 0;
            }
            c => {
                out.push_str(&"\\".repeat(backslashes));
                out.push(c);
                backslashes = 0;
            }
        }
    }
    out.push_str(&"\\".repeat(backslashes * 2));
    out.push('"');
    out
}

/// A node id: always quoted.
fn id(name: &str) -> String {
    quoted(name)
}

/// Whether a text is a plain DOT identifier (usable unquoted).
fn is_plain_id(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !["node", "edge", "graph", "digraph", "subgraph", "strict"]
            .contains(&s.to_ascii_lowercase().as_str())
}

/// An attribute name or subgraph name: as is when it is an identifier, else quoted.
fn name_token(s: &str) -> String {
    if is_plain_id(s) {
        s.to_string()
    } else {
        quoted(s)
    }
}

/// `key="value"` with the value's quotes escaped.
fn attr(key: &str, value: &str) -> String {
    format!("{}={}", name_token(key), quoted(value))
}

/// An HTML-like label value, `<…>`. Graphviz 2.43 rejects text starting with `]` right after a
/// tag, so such a `]` is written as a character reference.
fn html(label: &str) -> String {
    format!("<{}>", label.replace(">]", ">&#93;"))
}

/// Length in UTF-16 code units, as JavaScript counts.
fn js_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Splits after at most `n` UTF-16 units (at least one character, so that splitting progresses).
fn split_js(s: &str, n: usize) -> (&str, &str) {
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
fn break_text(text: &str, max: usize, keep_breaks: bool) -> Vec<String> {
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
fn wrapped_markdown(text: &str, max: usize, keep_breaks: bool, sep: &str) -> String {
    break_text(text, max, keep_breaks)
        .iter()
        .map(|l| markdown::to_html(l))
        .collect::<Vec<_>>()
        .join(sep)
}

// ---- wrapping configuration -----------------------------------------------------------------------

/// Line lengths for wrapped text (machine `style` keys or attributes, else defaults).
#[derive(Debug, Clone, Copy)]
struct Wrap {
    edge_label: usize,
    multiplicity: usize,
    attribute_key: usize,
    attribute_value: usize,
    node_title: usize,
    node_desc: usize,
    node_prompt: usize,
}

impl Wrap {
    const DEFAULT: Wrap = Wrap {
        edge_label: 40,
        multiplicity: 20,
        attribute_key: 25,
        attribute_value: 30,
        node_title: 40,
        node_desc: 60,
        node_prompt: 100,
    };

    fn from_machine(machine: &Json) -> Wrap {
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

// ---- node types ------------------------------------------------------------------------------------

/// Explicit types that mean a data node.
const CONTEXT_ALIASES: [&str; 7] = [
    "data", "input", "output", "result", "entity", "resource", "concept",
];

/// A node's effective type: its explicit type (lower-cased, data aliases as `context`), else one
/// inferred from its attributes, name and edges (`task`, `tool`, `context`, `init`), else none.
pub(crate) fn node_kind(node: &Json, edges: &[Json]) -> Option<String> {
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

fn is_style_node(n: &Json) -> bool {
    get_str(n, "type").is_some_and(|t| t.eq_ignore_ascii_case("style"))
}

pub(crate) fn is_note(n: &Json) -> bool {
    get_str(n, "type").is_some_and(|t| t.eq_ignore_ascii_case("note"))
}

fn shape(node: &Json, kind: Option<&str>) -> &'static str {
    if has_annotation(node, "Abstract") {
        return "egg";
    }
    match kind {
        Some("init" | "end") => "ellipse",
        Some("state") => "diamond",
        Some("context") => "folder",
        Some("tool") => "component",
        _ => "box",
    }
}

fn colours(kind: Option<&str>) -> (&'static str, &'static str) {
    match kind {
        Some("task") => ("#E3F2FD", "#1976D2"),
        Some("state") => ("#F3E5F5", "#7B1FA2"),
        Some("context") => ("#E8F5E9", "#388E3C"),
        Some("tool") => ("#FFF9C4", "#F57F17"),
        Some("init") => ("#FFF3E0", "#F57C00"),
        _ => ("#FFFFFF", "#000000"),
    }
}

/// `, key="value"` for each entry of a style map.
fn style_attributes(style: &Map<String, Json>) -> String {
    let mut out = String::new();
    for (k, v) in style {
        if v.is_null() {
            continue;
        }
        out.push_str(", ");
        out.push_str(&attr(k, &js_string(v)));
    }
    out
}

/// A style node's style map: its `style`, else its attributes with quotes removed.
fn style_node_style(style_node: &Json) -> Map<String, Json> {
    if let Some(Json::Object(m)) = style_node.get("style") {
        return m.clone();
    }
    let mut out = Map::new();
    for a in attributes(style_node) {
        let name = get_str(a, "name").unwrap_or("");
        let value = match a.get("value") {
            Some(Json::String(s)) => Json::String(strip_quotes(s).to_string()),
            Some(v) => v.clone(),
            None => continue,
        };
        out.insert(name.to_string(), value);
    }
    out
}

/// Whether a style node's selector annotation is among the element's annotations.
fn style_node_matches(style_node: &Json, element: &Json) -> bool {
    annotations(style_node).any(|s| {
        let name = get_str(s, "name");
        annotations(element).any(|a| get_str(a, "name") == name)
    })
}

/// Graphviz `rankdir` for a direction.
fn direction(value: &str) -> String {
    match js_trim(value).to_lowercase().as_str() {
        "left-to-right" | "lr" | "column" => "LR".into(),
        "right-to-left" | "rl" => "RL".into(),
        "top-to-bottom" | "tb" | "row" => "TB".into(),
        "bottom-to-top" | "bt" => "BT".into(),
        _ => value.to_string(),
    }
}

/// Layout keys that are not Graphviz attributes.
const LAYOUT_KEYS: [&str; 13] = [
    "grid",
    "grid-position",
    "grid-pos",
    "columns",
    "cols",
    "col",
    "column",
    "maxedgelabellength",
    "maxmultiplicitylength",
    "maxattributekeylength",
    "maxattributevaluelength",
    "maxnodetitlelength",
    "maxnotecontentlength",
];

/// `parseInt` of a value, if it gives a number.
fn parse_int(v: &Json) -> Option<i64> {
    let text = js_string(v);
    let t = js_trim(&text);
    let (sign, digits) = match t.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, t.strip_prefix('+').unwrap_or(t)),
    };
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse::<i64>().ok().map(|n| sign * n)
}

/// A grid size (`grid`, `columns` or `cols` in the style) or a grid position.
fn style_number(v: &Json, keys: &[&str]) -> Option<i64> {
    let style = v.get("style")?;
    let value = keys
        .iter()
        .find_map(|k| style.get(*k).filter(|x| !x.is_null()))?;
    parse_int(value)
}

fn grid_size(v: &Json) -> Option<i64> {
    style_number(v, &["grid", "columns", "cols"]).filter(|n| *n > 0)
}

fn grid_position(v: &Json) -> Option<i64> {
    style_number(v, &["grid-position", "grid-pos", "column", "col"])
}

/// The `` `#L<line>:<col>-<line>:<col>` `` of a `$sourceRange`.
fn source_fragment(v: &Json) -> Option<String> {
    let range = v.get("$sourceRange")?;
    let n = |p: &str, k: &str| range.get(p).and_then(|x| x.get(k)).and_then(Json::as_u64);
    Some(format!(
        "#L{}:{}-{}:{}",
        n("start", "line")?,
        n("start", "character")?,
        n("end", "line")?,
        n("end", "character")?
    ))
}

/// Keys of edge attributes that place an edge, not describe it.
const EDGE_METADATA_KEYS: [&str; 6] = [
    "sourceAttribute",
    "targetAttribute",
    "sourcePort",
    "targetPort",
    "sourceHandle",
    "targetHandle",
];

/// A port name part: quotes removed, runs of other characters as `_`, no outer `_`.
fn sanitize_port(raw: &str) -> String {
    sanitize_id(js_trim(strip_quotes(raw)))
        .trim_matches('_')
        .to_string()
}

/// The key and value port names of each attribute (repeated names get `_1`, `_2`, …).
fn port_names(attrs: &[&Json]) -> Vec<(String, String)> {
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
fn attribute_port(attrs: &[&Json], handle: &str) -> Option<String> {
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
fn display_value(a: &Json) -> String {
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
fn attribute_table(attrs: &[&Json], wrap: &Wrap) -> String {
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
fn annotation_text(v: &Json) -> Option<String> {
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
fn heading(node: &Json) -> String {
    let mut out = format!("<b>{}</b>", escape_html(node_name(node)));
    if let Some(t) = get_str(node, "type").filter(|t| !t.is_empty()) {
        out.push_str(&format!(" <i>&lt;{}&gt;</i>", escape_html(t)));
    }
    if let Some(a) = annotation_text(node) {
        out.push_str(&format!(" <i>{a}</i>"));
    }
    out
}

// ---- the generator --------------------------------------------------------------------------------

struct Generator<'a> {
    machine: &'a Json,
    nodes: Vec<&'a Json>,
    edges: &'a [Json],
    style_nodes: Vec<&'a Json>,
    wrap: Wrap,
    /// Renderable nodes by name (the last of a name wins).
    by_name: HashMap<&'a str, &'a Json>,
    /// Children of each renderable node, by name.
    children: HashMap<&'a str, Vec<&'a Json>>,
    /// Notes by the name of their parent (`None`: top level), with their DOT ids.
    notes: HashMap<Option<&'a str>, Vec<(&'a Json, String)>>,
    /// Conditions and templates, with their contexts.
    expressions: expressions::Expressions,
}

impl<'a> Generator<'a> {
    fn new(machine: &'a Json) -> Self {
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

    fn is_cluster(&self, name: &str) -> bool {
        self.children.get(name).is_some_and(|c| !c.is_empty())
    }

    /// `{{ … }}` templates resolved against every node's attributes.
    fn interpolate(&self, text: &str) -> String {
        self.expressions.resolve_templates(text)
    }

    fn render(&self) -> String {
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
    fn machine_label(&self) -> String {
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
    fn graph_style_lines(&self) -> Vec<String> {
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

    fn hierarchy(
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

    fn cluster(
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

    fn cluster_label(&self, node: &Json) -> String {
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

    fn cluster_style(&self, node: &Json) -> Vec<String> {
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

    fn node_definition(&self, node: &Json, indent: &str) -> String {
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

    fn node_style(&self, node: &Json, kind: Option<&str>) -> String {
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

    fn note(&self, note: &Json, dot_id: &str, indent: &str) -> Vec<String> {
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

    fn edges(&self) -> Vec<String> {
        self.edges
            .iter()
            .filter(|e| e.is_object())
            .map(|e| self.edge(e))
            .collect()
    }

    fn edge(&self, edge: &Json) -> String {
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
    fn endpoint(
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

    fn edge_label(&self, edge: &Json, values: &Map<String, Json>) -> Option<String> {
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

/// A node's attributes as its label shows them (not `desc`, `prompt`, `style`).
fn display_attributes(node: &Json) -> Vec<&Json> {
    attributes(node)
        .filter(|a| !matches!(get_str(a, "name"), Some("desc" | "prompt" | "style")))
        .collect()
}

/// The invisible node inside a cluster that edges attach to.
fn anchor(name: &str) -> String {
    format!("{name}__cluster_anchor")
}

/// Runs of characters other than `[A-Za-z0-9_]` as `_`.
fn sanitize_id(s: &str) -> String {
    let mut out = String::new();
    let mut in_run = false;
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('_');
            in_run = true;
        }
    }
    out
}

/// Graphviz attributes for an arrow type.
fn arrow_style(arrow: &str) -> &'static str {
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
fn condition(values: &Map<String, Json>) -> Option<String> {
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

/// Invisible rails and `rank=same` groups that lay nodes out in `size` columns.
fn grid_layout(nodes: &[&Json], size: i64, prefix: &str, indent: &str) -> Vec<String> {
    let size = size.clamp(1, 1000);
    let rail = |i: i64| format!("{prefix}__grid_rail_{i}");
    let mut lines = Vec::new();
    for i in 1..=size {
        lines.push(format!(
            "{indent}  {} [shape=point, width=0, height=0, label=\"\", style=invis, fixedsize=true];",
            id(&rail(i))
        ));
    }
    for i in 1..size {
        lines.push(format!(
            "{indent}  {} -> {} [style=invis];",
            id(&rail(i)),
            id(&rail(i + 1))
        ));
    }
    let mut by_position: Vec<Vec<&str>> = vec![Vec::new(); size as usize + 1];
    let mut unplaced = Vec::new();
    for n in nodes {
        match grid_position(n) {
            Some(p) if (1..=size).contains(&p) => by_position[p as usize].push(node_name(n)),
            Some(_) => {}
            None => unplaced.push(node_name(n)),
        }
    }
    let mut position = 1;
    for name in unplaced {
        by_position[position as usize].push(name);
        position = position % size + 1;
    }
    for (p, names) in by_position.iter().enumerate().skip(1) {
        if names.is_empty() {
            continue;
        }
        lines.push(format!("{indent}  // Grid position {p}"));
        let members: Vec<String> = std::iter::once(rail(p as i64))
            .chain(names.iter().map(|n| (*n).to_string()))
            .map(|n| id(&n))
            .collect();
        lines.push(format!(
            "{indent}  {{ rank=same; {}; }}",
            members.join("; ")
        ));
    }
    lines
}

// ---- Markdown --------------------------------------------------------------------------------------

/// Inline Markdown to Graphviz's HTML subset: `**bold**`, `*italic*`, `~~strike~~`, `` `code` ``,
/// `[links](…)` and bare URLs/e-mail addresses (underlined). Text without Markdown characters is
/// only escaped.
pub(crate) mod markdown {
    use super::escape_html;

    /// The HTML for one line of text.
    pub(crate) fn to_html(text: &str) -> String {
        if !text.contains(['*', '_', '`', '#', '[', ']', '~']) {
            return escape_html(text);
        }
        let chars: Vec<char> = text.chars().collect();
        inline(&chars, 0)
    }

    const CODE_OPEN: &str = r##"<font face="monospace" color="#6C757D">"##;

    fn is_punct(c: char) -> bool {
        c.is_ascii_punctuation()
    }

    fn inline(s: &[char], depth: usize) -> String {
        let mut out = String::new();
        let mut i = 0;
        let mut text = String::new();
        let flush = |text: &mut String, out: &mut String| {
            out.push_str(&escape_html(text));
            text.clear();
        };
        while i < s.len() {
            let c = s[i];
            let prev = if i == 0 { None } else { Some(s[i - 1]) };
            if c == '\\' && i + 1 < s.len() && is_punct(s[i + 1]) {
                text.push(s[i + 1]);
                i += 2;
                continue;
            }
            if c == '\n' {
                flush(&mut text, &mut out);
                out.push_str("<br/>");
                i += 1;
                continue;
            }
            if c == '`'
                && let Some((content, next)) = code_span(s, i)
            {
                flush(&mut text, &mut out);
                out.push_str(CODE_OPEN);
                out.push_str(&escape_html(&content));
                out.push_str("</font>");
                i = next;
                continue;
            }
            if depth < 8 {
                if (c == '[' || (c == '!' && s.get(i + 1) == Some(&'[')))
                    && let Some((label, next)) = link(s, if c == '!' { i + 1 } else { i })
                {
                    flush(&mut text, &mut out);
                    if c == '!' {
                        let alt: String = label.iter().collect();
                        out.push_str(&escape_html(if alt.is_empty() { "[image]" } else { &alt }));
                    } else {
                        out.push_str("<u>");
                        out.push_str(&inline(label, depth + 1));
                        out.push_str("</u>");
                    }
                    i = next;
                    continue;
                }
                if matches!(c, '*' | '_' | '~')
                    && let Some((tag, inner, next)) = emphasis(s, i)
                {
                    flush(&mut text, &mut out);
                    out.push_str(&format!("<{tag}>{}</{tag}>", inline(inner, depth + 1)));
                    i = next;
                    continue;
                }
            }
            if autolink_may_start(prev)
                && let Some(len) = url_len(&s[i..]).or_else(|| email_len(&s[i..]))
            {
                flush(&mut text, &mut out);
                let url: String = s[i..i + len].iter().collect();
                out.push_str(&format!("<u>{}</u>", escape_html(&url)));
                i += len;
                continue;
            }
            text.push(c);
            i += 1;
        }
        flush(&mut text, &mut out);
        out
    }

    /// A code span starting at `i` (a run of backticks): its content and the index after it.
    fn code_span(s: &[char], i: usize) -> Option<(String, usize)> {
        let run = s[i..].iter().take_while(|c| **c == '`').count();
        let mut j = i + run;
        while j < s.len() {
            if s[j] == '`' {
                let close = s[j..].iter().take_while(|c| **c == '`').count();
                if close == run {
                    let mut content: String = s[i + run..j]
                        .iter()
                        .map(|c| if *c == '\n' { ' ' } else { *c })
                        .collect();
                    if content.len() >= 2
                        && content.starts_with(' ')
                        && content.ends_with(' ')
                        && !content.trim().is_empty()
                    {
                        content = content[1..content.len() - 1].to_string();
                    }
                    return Some((content, j + close));
                }
                j += close;
            } else {
                j += 1;
            }
        }
        None
    }

    /// `[label](destination)` at `i`: the label and the index after it.
    fn link(s: &[char], i: usize) -> Option<(&[char], usize)> {
        let mut depth = 0;
        let mut j = i;
        let close = loop {
            match s.get(j)? {
                '\\' => j += 1,
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        break j;
                    }
                }
                _ => {}
            }
            j += 1;
        };
        if s.get(close + 1) != Some(&'(') {
            return None;
        }
        let mut k = close + 2;
        let mut parens = 0;
        while let Some(c) = s.get(k) {
            match c {
                '(' => parens += 1,
                ')' if parens == 0 => return Some((&s[i + 1..close], k + 1)),
                ')' => parens -= 1,
                '\n' => return None,
                _ => {}
            }
            k += 1;
        }
        None
    }

    /// Emphasis at `i` (`*`, `_` or `~` run): the tag, its content and the index after it.
    fn emphasis(s: &[char], i: usize) -> Option<(&'static str, &[char], usize)> {
        let c = s[i];
        let run = s[i..].iter().take_while(|x| **x == c).count();
        let prev = if i == 0 { None } else { Some(s[i - 1]) };
        let next = s.get(i + run).copied();
        if next.is_none_or(char::is_whitespace) {
            return None;
        }
        if c == '_' && prev.is_some_and(char::is_alphanumeric) {
            return None;
        }
        if c == '~' && run > 2 {
            return None;
        }
        // Try the widest match first: strong (2), then emphasis (1).
        let widths: &[usize] = match (c, run) {
            ('~', 2) => &[2],
            ('~', _) => &[1],
            (_, 1) => &[1],
            _ => &[2, 1],
        };
        for &w in widths {
            let start = i + w;
            let mut j = start;
            while j < s.len() {
                if s[j] == '`'
                    && let Some((_, next)) = code_span(s, j)
                {
                    j = next;
                    continue;
                }
                if s[j] == c {
                    let close = s[j..].iter().take_while(|x| **x == c).count();
                    let before = s[j - 1];
                    let after = s.get(j + close).copied();
                    let closes = !before.is_whitespace()
                        && j > start
                        && close >= w
                        && (c != '_' || !after.is_some_and(char::is_alphanumeric))
                        && (c != '~' || close == w);
                    if closes {
                        let tag = match (c, w) {
                            ('~', _) => "s",
                            (_, 2) => "b",
                            _ => "i",
                        };
                        return Some((tag, &s[start..j], j + w));
                    }
                    j += close;
                    continue;
                }
                j += 1;
            }
        }
        None
    }

    fn autolink_may_start(prev: Option<char>) -> bool {
        prev.is_none_or(|p| p.is_whitespace() || matches!(p, '(' | '*' | '_' | '~' | '"' | '\''))
    }

    /// The length of a bare URL at the start (`http://`, `https://`, `www.`), trailing punctuation
    /// and unbalanced `)` excluded.
    fn url_len(s: &[char]) -> Option<usize> {
        let starts = |p: &str| {
            p.chars().count() <= s.len()
                && s.iter()
                    .zip(p.chars())
                    .all(|(a, b)| a.eq_ignore_ascii_case(&b))
        };
        let prefix = ["https://", "http://", "www."]
            .into_iter()
            .find(|p| starts(p))?;
        let mut len = s
            .iter()
            .take_while(|c| !c.is_whitespace() && **c != '<')
            .count();
        loop {
            let last = s[..len].last().copied()?;
            if matches!(
                last,
                '?' | '!' | '.' | ',' | ':' | '*' | '_' | '~' | '\'' | '"'
            ) {
                len -= 1;
            } else if last == ')' {
                let open = s[..len].iter().filter(|c| **c == '(').count();
                let close = s[..len].iter().filter(|c| **c == ')').count();
                if close > open {
                    len -= 1;
                } else {
                    break;
                }
            } else {
                break;
            }
        }
        (len > prefix.len()).then_some(len)
    }

    /// The length of an e-mail address at the start.
    fn email_len(s: &[char]) -> Option<usize> {
        let local = s
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-'))
            .count();
        if local == 0 || s.get(local) != Some(&'@') {
            return None;
        }
        let mut j = local + 1;
        let mut dots = 0;
        let mut label = 0;
        while let Some(c) = s.get(j) {
            if c.is_ascii_alphanumeric() || *c == '-' || *c == '_' {
                label += 1;
            } else if *c == '.'
                && label > 0
                && s.get(j + 1).is_some_and(char::is_ascii_alphanumeric)
            {
                dots += 1;
                label = 0;
            } else {
                break;
            }
            j += 1;
        }
        let last = s[j - 1];
        (dots > 0 && label > 0 && last != '-' && last != '_').then_some(j)
    }
}

// ---- conditions and templates ---------------------------------------------------------------------

/// Edge conditions and `{{ … }}` templates in labels, evaluated by the runtime's CEL evaluator
/// ([`crate::runtime::condition`]): one language, one evaluator.
///
/// What the diagram adds is the context and the reading of the outcome:
///
/// * a condition is evaluated against the machine-level attributes (quotes removed; not
///   `description`, `desc`, `prompt`, `style`, `version`) plus `errorCount`/`errors` (0 unless
///   the machine sets `errorCount`) and `activeState` (`""`). One that cannot be parsed is
///   **inactive**; one that fails while evaluating (an unknown name, a missing key, mismatched
///   types) is **active**, as the reference draws it (its CEL library returns an error object,
///   which JavaScript counts as true, and the reference corpus relies on it); otherwise the
///   value's JavaScript truthiness decides;
/// * a template is evaluated against every node's attributes by node name (string values read
///   as JSON when they are JSON, typed values converted); one that cannot be evaluated stays as
///   written, and all stay as written when a `json`-typed value is not JSON.
pub(crate) mod expressions {
    use std::cell::RefCell;
    use std::collections::HashMap;

    use serde_json::{Map, Value as Json};

    use super::{attributes, get_str, js_string, js_truthy, json_compact, node_name};
    use crate::runtime::condition::{CompiledCondition, ConditionError};
    use crate::values::strip_quotes;

    /// The contexts of one machine, and the expressions compiled so far (a machine repeats them).
    pub(crate) struct Expressions {
        /// What conditions see.
        conditions: Map<String, Json>,
        /// What templates see (`None`: templates are left as written).
        templates: Option<Map<String, Json>>,
        /// Compiled expressions by text (`None`: the text does not parse).
        compiled: RefCell<HashMap<String, Option<CompiledCondition>>>,
    }

    impl Expressions {
        /// The contexts of `machine`, whose nodes are `nodes`.
        pub(crate) fn new(machine: &Json, nodes: &[&Json]) -> Self {
            Expressions {
                conditions: condition_context(machine),
                templates: template_context(nodes),
                compiled: RefCell::new(HashMap::new()),
            }
        }

        /// Whether an edge's condition is drawn as holding.
        pub(crate) fn condition_holds(&self, condition: &str) -> bool {
            match self.compiled(condition) {
                None => false,
                Some(compiled) => {
                    evaluate(&compiled, &self.conditions).map_or(true, |value| js_truthy(&value))
                }
            }
        }

        /// `text` with each `{{ expression }}` replaced by its value; one that cannot be evaluated
        /// stays as it is.
        pub(crate) fn resolve_templates(&self, text: &str) -> String {
            let Some(context) = &self.templates else {
                return text.to_string();
            };
            let mut out = String::new();
            let mut rest = text;
            while let Some(open) = rest.find("{{") {
                let after = &rest[open + 2..];
                // The expression: no `}` inside, then `}}`.
                let Some(end) = after.find('}') else { break };
                if !after[end..].starts_with("}}") || after[..end].trim().is_empty() {
                    out.push_str(&rest[..open + 2]);
                    rest = after;
                    continue;
                }
                out.push_str(&rest[..open]);
                let value = self
                    .compiled(after[..end].trim())
                    .and_then(|compiled| evaluate(&compiled, context).ok());
                match value {
                    Some(value) => out.push_str(&display(&value)),
                    None => out.push_str(&rest[open..open + 2 + end + 2]),
                }
                rest = &after[end + 2..];
            }
            out.push_str(rest);
            out
        }

        /// The compiled expression of a text (compiled once per machine).
        fn compiled(&self, text: &str) -> Option<CompiledCondition> {
            let mut cache = self.compiled.borrow_mut();
            cache
                .entry(text.to_string())
                .or_insert_with(|| CompiledCondition::compile(text).ok())
                .clone()
        }
    }

    /// The value of an expression in a context. Only the names it refers to are looked up: a
    /// context holds every node of the machine.
    fn evaluate(
        compiled: &CompiledCondition,
        context: &Map<String, Json>,
    ) -> Result<Json, ConditionError> {
        let variables: Map<String, Json> = compiled
            .references()
            .iter()
            .filter_map(|name| Some((name.clone(), context.get(name)?.clone())))
            .collect();
        compiled.value(&variables)
    }

    /// The machine attributes and the built-ins conditions see.
    fn condition_context(machine: &Json) -> Map<String, Json> {
        let mut context = Map::new();
        for a in attributes(machine) {
            let name = get_str(a, "name").unwrap_or("");
            if matches!(
                name,
                "description" | "desc" | "prompt" | "style" | "version"
            ) {
                continue;
            }
            let value = match a.get("value") {
                Some(Json::Object(m)) if m.get("value").is_some_and(|v| !v.is_null()) => {
                    m.get("value")
                }
                other => other,
            };
            let value = match value {
                Some(Json::String(s)) => Json::String(strip_quotes(s).to_string()),
                Some(v) => v.clone(),
                None => Json::Null,
            };
            context.insert(name.to_string(), value);
        }
        let errors = context
            .get("errorCount")
            .cloned()
            .unwrap_or_else(|| Json::from(0));
        context.insert("errorCount".into(), errors.clone());
        context.insert("errors".into(), errors);
        context.insert("activeState".into(), Json::String(String::new()));
        context
    }

    /// Every node's attributes by node name, for templates; `None` when a `json`-typed value is not
    /// JSON (the reference then leaves all templates alone).
    fn template_context(nodes: &[&Json]) -> Option<Map<String, Json>> {
        let mut context = Map::new();
        for n in nodes {
            let mut values = Map::new();
            for a in attributes(n) {
                let value = match a.get("value") {
                    None => Json::Null,
                    Some(Json::String(s)) => typed(s, get_str(a, "type"))?,
                    Some(v) => v.clone(),
                };
                values.insert(get_str(a, "name").unwrap_or("").to_string(), value);
            }
            if !values.is_empty() {
                context.insert(node_name(n).to_string(), Json::Object(values));
            }
        }
        Some(context)
    }

    /// A string attribute value as its type reads it (`None`: `json` that is not JSON).
    fn typed(s: &str, ty: Option<&str>) -> Option<Json> {
        let clean = strip_quotes(s);
        Some(match ty {
            None | Some("") => {
                serde_json::from_str::<Json>(s).unwrap_or_else(|_| Json::String(clean.to_string()))
            }
            Some("number") => {
                crate::values::number(crate::values::js_number(clean).unwrap_or(f64::NAN))
            }
            Some("boolean") => Json::Bool(clean.eq_ignore_ascii_case("true")),
            Some("json") => serde_json::from_str::<Json>(clean).ok()?,
            Some(_) => Json::String(clean.to_string()),
        })
    }

    /// A template's value as text.
    fn display(value: &Json) -> String {
        match value {
            Json::Null => String::new(),
            Json::String(s) => s.clone(),
            Json::Array(_) | Json::Object(_) => json_compact(value),
            other => js_string(other),
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use serde_json::json;

        fn machine() -> Expressions {
            let machine = json!({"attributes": [
                {"name": "status", "value": "valid"},
                {"name": "retryCount", "value": 0},
                {"name": "maxRetries", "value": 3},
                {"name": "limits", "value": {"max": 5}},
                {"name": "tags", "value": ["a", "b"]},
            ]});
            Expressions::new(&machine, &[])
        }

        #[test]
        fn conditions_evaluate_against_machine_attributes() {
            let e = machine();
            assert!(e.condition_holds("status == \"valid\""));
            assert!(!e.condition_holds("status == 'invalid'"));
            assert!(e.condition_holds("retryCount < maxRetries"));
            assert!(!e.condition_holds("errorCount > 0"));
            assert!(e.condition_holds("!(errorCount > 0)"));
            assert!(e.condition_holds("limits.max >= 5 && (1 + 2) * 2 == 6"));
            assert!(e.condition_holds("'a' in tags || false"));
            assert!(e.condition_holds("{{ status }} === 'valid'"));
            assert!(!e.condition_holds("retryCount > 0 ? true : false"));
            assert!(e.condition_holds("size(tags) > 1"));
        }

        #[test]
        fn unknown_names_are_active_and_syntax_errors_inactive() {
            let e = machine();
            assert!(e.condition_holds("Data.priority == 'high'"));
            assert!(e.condition_holds("circuitOpen"));
            assert!(!e.condition_holds("false && unknown"));
            assert!(!e.condition_holds("status == 'unterminated"));
            assert!(!e.condition_holds("(((("));
        }

        #[test]
        fn values_other_than_booleans_count_by_truthiness() {
            let e = machine();
            assert!(e.condition_holds("status"));
            assert!(!e.condition_holds("retryCount"));
            assert!(!e.condition_holds("''"));
        }

        #[test]
        fn templates_resolve_or_stay() {
            let a = json!({"name": "a", "attributes": [
                {"name": "p", "value": "x"},
                {"name": "n", "value": "42"},
                {"name": "f", "value": 2.5},
            ]});
            let e = Expressions::new(&json!({}), &[&a]);
            assert_eq!(
                e.resolve_templates("{{ a.p }}-{{a.n}}-{{ b.q }}-{{ }}-{{ a.f * 2 }}"),
                "x-42-{{ b.q }}-{{ }}-5"
            );
        }

        #[test]
        fn templates_stay_when_a_json_value_is_not_json() {
            let a = json!({"name": "a", "attributes": [
                {"name": "p", "value": "x"},
                {"name": "j", "type": "json", "value": "{not json"},
            ]});
            let e = Expressions::new(&json!({}), &[&a]);
            assert_eq!(e.resolve_templates("{{ a.p }}"), "{{ a.p }}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn highlights_use_the_ids_of_the_drawn_nodes() {
        let machine = json!({
            "title": "M",
            "nodes": [
                {"name": "G", "attributes": []},
                {"name": "x\\y\"z", "attributes": [], "parent": "G"},
                {"name": "end", "attributes": []}
            ],
            "edges": [{"source": "x\\y\"z", "target": "end", "arrowType": "->"}]
        });
        let plain = to_dot(&machine);
        let drawn = to_dot_highlighted(
            &machine,
            &["G".into(), "x\\y\"z".into()],
            &["end".into()],
            &[("G".into(), "end".into())],
        );
        let odd = id("x\\y\"z");
        assert!(plain.contains(&odd), "{plain}");
        assert!(drawn.contains(&format!("{odd} [penwidth=3")), "{drawn}");
        // A parent is highlighted through its cluster's anchor, as edges to it are drawn.
        assert!(
            drawn.contains(&format!("{} -> \"end\"", id(&anchor("G")))),
            "{drawn}"
        );
        assert!(!drawn.contains("\"G\" [penwidth"), "{drawn}");
        assert!(drawn.contains("\"end\" [penwidth=3, color=\"#1B5E20\", style=\"filled\""));
    }

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

    #[test]
    fn markdown_becomes_graphviz_html() {
        assert_eq!(
            markdown::to_html("**Critical**: Run `npm test` *before*"),
            r##"<b>Critical</b>: Run <font face="monospace" color="#6C757D">npm test</font> <i>before</i>"##
        );
        assert_eq!(
            markdown::to_html("~~Old method~~ new"),
            "<s>Old method</s> new"
        );
        assert_eq!(
            markdown::to_html("See [docs](https://x.y) & more"),
            "See <u>docs</u> &amp; more"
        );
        assert_eq!(
            markdown::to_html("Docs](https://api.example.com)"),
            "Docs](<u>https://api.example.com</u>)"
        );
        assert_eq!(markdown::to_html("snake_case_name"), "snake_case_name");
        assert_eq!(markdown::to_html("a < b"), "a &lt; b");
    }

    #[test]
    fn odd_json_does_not_panic() {
        for v in [
            json!(null),
            json!([]),
            json!({"nodes": 3}),
            json!({"nodes": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]}),
            json!({"nodes": [{"name": "a"}, {"name": "b", "parent": "a"}, {"name": "a", "parent": "b"}]}),
            json!({"nodes": [{"name": "x\"y\\"}], "edges": [{"source": 1}, "e"], "style": {"grid": 0}}),
        ] {
            let dot = to_dot(&v);
            assert!(dot.starts_with("digraph {"), "{dot}");
        }
    }

    #[test]
    fn ids_are_quoted_and_escaped() {
        assert_eq!(id("a\"b"), "\"a\\\"b\"");
        assert_eq!(id("a\\"), "\"a\\\\\"");
        assert_eq!(quoted("a\\\"b\\c"), "\"a\\\\\\\"b\\c\"");
        assert_eq!(name_token("cluster_a-b"), "\"cluster_a-b\"");
        assert_eq!(name_token("cluster_ab"), "cluster_ab");
    }
}
