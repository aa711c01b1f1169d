//! Shapes, colours, style maps, directions and grid layouts.

use serde_json::{Map, Value as Json};

use crate::render::access::{
    annotations, attributes, get_str, has_annotation, js_string, node_name,
};

use crate::render::dot::syntax::{attr, id};
use crate::values::{js_trim, strip_quotes};

pub(super) fn shape(node: &Json, kind: Option<&str>) -> &'static str {
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

pub(super) fn colours(kind: Option<&str>) -> (&'static str, &'static str) {
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
pub(super) fn style_attributes(style: &Map<String, Json>) -> String {
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
pub(super) fn style_node_style(style_node: &Json) -> Map<String, Json> {
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
pub(super) fn style_node_matches(style_node: &Json, element: &Json) -> bool {
    annotations(style_node).any(|s| {
        let name = get_str(s, "name");
        annotations(element).any(|a| get_str(a, "name") == name)
    })
}

/// Graphviz `rankdir` for a direction.
pub(super) fn direction(value: &str) -> String {
    match js_trim(value).to_lowercase().as_str() {
        "left-to-right" | "lr" | "column" => "LR".into(),
        "right-to-left" | "rl" => "RL".into(),
        "top-to-bottom" | "tb" | "row" => "TB".into(),
        "bottom-to-top" | "bt" => "BT".into(),
        _ => value.to_string(),
    }
}

/// Layout keys that are not Graphviz attributes.
pub(super) const LAYOUT_KEYS: [&str; 13] = [
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
pub(super) fn parse_int(v: &Json) -> Option<i64> {
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
pub(super) fn style_number(v: &Json, keys: &[&str]) -> Option<i64> {
    let style = v.get("style")?;
    let value = keys
        .iter()
        .find_map(|k| style.get(*k).filter(|x| !x.is_null()))?;
    parse_int(value)
}

pub(super) fn grid_size(v: &Json) -> Option<i64> {
    style_number(v, &["grid", "columns", "cols"]).filter(|n| *n > 0)
}

pub(super) fn grid_position(v: &Json) -> Option<i64> {
    style_number(v, &["grid-position", "grid-pos", "column", "col"])
}

/// Invisible rails and `rank=same` groups that lay nodes out in `size` columns.
pub(super) fn grid_layout(nodes: &[&Json], size: i64, prefix: &str, indent: &str) -> Vec<String> {
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
