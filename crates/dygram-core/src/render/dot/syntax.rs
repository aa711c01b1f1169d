//! DOT text: quoting, escaping, ids and attributes.

use serde_json::Value as Json;

/// Escapes text for a quoted DOT label (record delimiters too, as the reference does).
pub(super) fn escape_dot(text: &str) -> String {
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
pub(super) fn quoted(text: &str) -> String {
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
pub(super) fn id(name: &str) -> String {
    quoted(name)
}

/// Whether a text is a plain DOT identifier (usable unquoted).
pub(super) fn is_plain_id(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !["node", "edge", "graph", "digraph", "subgraph", "strict"]
            .contains(&s.to_ascii_lowercase().as_str())
}

/// An attribute name or subgraph name: as is when it is an identifier, else quoted.
pub(super) fn name_token(s: &str) -> String {
    if is_plain_id(s) {
        s.to_string()
    } else {
        quoted(s)
    }
}

/// `key="value"` with the value's quotes escaped.
pub(super) fn attr(key: &str, value: &str) -> String {
    format!("{}={}", name_token(key), quoted(value))
}

/// An HTML-like label value, `<…>`. Graphviz 2.43 rejects text starting with `]` right after a
/// tag, so such a `]` is written as a character reference.
pub(super) fn html(label: &str) -> String {
    format!("<{}>", label.replace(">]", ">&#93;"))
}

/// The invisible node inside a cluster that edges attach to.
pub(super) fn anchor(name: &str) -> String {
    format!("{name}__cluster_anchor")
}

/// Runs of characters other than `[A-Za-z0-9_]` as `_`.
pub(super) fn sanitize_id(s: &str) -> String {
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

/// The `` `#L<line>:<col>-<line>:<col>` `` of a `$sourceRange`.
pub(super) fn source_fragment(v: &Json) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_quoted_and_escaped() {
        assert_eq!(id("a\"b"), "\"a\\\"b\"");
        assert_eq!(id("a\\"), "\"a\\\\\"");
        assert_eq!(quoted("a\\\"b\\c"), "\"a\\\\\\\"b\\c\"");
        assert_eq!(name_token("cluster_a-b"), "\"cluster_a-b\"");
        assert_eq!(name_token("cluster_ab"), "cluster_ab");
    }
}
