//! Style maps: CSS-like keys normalised to Graphviz names, values to numbers and booleans.

use serde_json::{Map, Value as Json};

use crate::values::{js_number, js_trim, number, strip_quotes};

/// CSS-like keys and the Graphviz attribute they mean.
const KEYS: [(&str, &str); 12] = [
    ("stroke-width", "penwidth"),
    ("border-width", "penwidth"),
    ("stroke", "color"),
    ("border-color", "color"),
    ("fill", "fillcolor"),
    ("background-color", "fillcolor"),
    ("font-family", "fontname"),
    ("font-size", "fontsize"),
    ("font-weight", "fontweight"),
    ("text-align", "labeljust"),
    ("opacity", "alpha"),
    ("direction", "rankdir"),
];

/// The normalised key.
pub fn key(k: &str) -> String {
    let trimmed = js_trim(k);
    let lower = trimmed.to_lowercase();
    KEYS.iter()
        .find(|(css, _)| *css == lower)
        .map_or_else(|| trimmed.to_string(), |(_, gv)| (*gv).to_string())
}

/// The normalised value (`None`: nothing to set).
pub fn value(v: &Json) -> Option<Json> {
    match v {
        Json::Null => None,
        Json::Bool(_) | Json::Number(_) | Json::Array(_) => Some(v.clone()),
        Json::String(s) => {
            let t = js_trim(s);
            if t.is_empty() {
                return None;
            }
            let u = strip_quotes(t);
            match u.to_lowercase().as_str() {
                "true" => return Some(Json::Bool(true)),
                "false" => return Some(Json::Bool(false)),
                _ => {}
            }
            if !u.is_empty()
                && let Some(n) = js_number(u)
            {
                return Some(number(n));
            }
            Some(Json::String(u.to_string()))
        }
        Json::Object(_) => Some(v.clone()),
    }
}

/// Sets `k: v` (objects are flattened into their entries).
pub fn assign(target: &mut Map<String, Json>, k: &str, v: &Json) {
    if k.is_empty() {
        return;
    }
    if let Json::Object(entries) = v {
        for (k2, v2) in entries {
            assign(target, k2, v2);
        }
        return;
    }
    if let Some(v) = value(v) {
        target.insert(key(k), v);
    }
}

/// Parses `"color: red; stroke-width: 3px"`.
pub fn parse(s: &str) -> Option<Map<String, Json>> {
    let mut out = Map::new();
    for part in s.split(';').map(js_trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = part.split_once(':') else {
            continue;
        };
        if k.is_empty() {
            continue;
        }
        assign(&mut out, k, &Json::String(js_trim(v).to_string()));
    }
    (!out.is_empty()).then_some(out)
}

/// A style written as an attribute value: a style string or an object.
pub fn from_value(v: &Json) -> Option<Map<String, Json>> {
    match v {
        Json::String(s) => parse(s),
        Json::Object(entries) => {
            let mut out = Map::new();
            for (k, v) in entries {
                assign(&mut out, k, v);
            }
            (!out.is_empty()).then_some(out)
        }
        _ => None,
    }
}

/// The style given by serialized annotations named `style` (any case): their parameters, then their
/// string value parsed as a style string.
pub fn from_annotations(annotations: &[Json]) -> Option<Map<String, Json>> {
    let mut out = Map::new();
    for a in annotations {
        let is_style = a
            .get("name")
            .and_then(Json::as_str)
            .is_some_and(|n| n.eq_ignore_ascii_case("style"));
        if !is_style {
            continue;
        }
        if let Some(Json::Object(params)) = a.get("attributes") {
            for (k, v) in params {
                assign(&mut out, k, v);
            }
        }
        if let Some(parsed) = a.get("value").and_then(Json::as_str).and_then(parse) {
            for (k, v) in parsed {
                out.insert(k, v);
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Merges style maps in order (later values win; keys keep their first position).
pub fn merge(
    parts: impl IntoIterator<Item = Option<Map<String, Json>>>,
) -> Option<Map<String, Json>> {
    let mut out = Map::new();
    for part in parts.into_iter().flatten() {
        for (k, v) in part {
            if !v.is_null() {
                out.insert(k, v);
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn style_strings_normalise_keys_and_values() {
        let m =
            parse("color: red; stroke-width: 3px; gradientangle: 90; Fill: 'blue'; bad").unwrap();
        assert_eq!(
            Json::Object(m),
            json!({"color": "red", "penwidth": "3px", "gradientangle": 90, "fillcolor": "blue"})
        );
        assert_eq!(value(&json!("TRUE")), Some(json!(true)));
        assert_eq!(value(&json!("  ")), None);
        assert!(parse(" ; ").is_none());
    }
}
