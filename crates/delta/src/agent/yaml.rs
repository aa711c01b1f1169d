//! Reading YAML files users edit: located errors with field paths, and warnings for unknown keys.

use std::cell::RefCell;
use std::path::Path;

use serde::de::DeserializeOwned;

use crate::diag::Diagnostic;

/// What parsing produced besides the value.
#[derive(Debug, Default)]
pub struct Parsed<T> {
    /// The value.
    pub value: T,
    /// Keys that are not part of the schema (`llm.temprature`), in document order.
    pub unknown_keys: Vec<String>,
}

/// Parses `source` (the contents of `file`) into `T`.
///
/// Errors carry line and column, the field path and the source line. An empty document is reported as
/// such rather than as a confusing "missing field".
#[expect(
    clippy::result_large_err,
    reason = "parsing a config file is not a hot path"
)]
pub fn parse<T: DeserializeOwned>(file: &Path, source: &str) -> Result<Parsed<T>, Diagnostic> {
    if source.trim().is_empty()
        || source
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        return Err(Diagnostic::new(file, "the file is empty")
            .hint("it must be a YAML mapping (key: value lines)"));
    }
    let unknown = RefCell::new(Vec::new());
    let path_at_error = RefCell::new(String::new());
    let result = serde_saphyr::with_deserializer_from_str(source, |de| {
        let mut record =
            |path: serde_ignored::Path<'_>| unknown.borrow_mut().push(path.to_string());
        let ignored = serde_ignored::Deserializer::new(de, &mut record);
        serde_path_to_error::deserialize::<_, T>(ignored).map_err(|e| {
            *path_at_error.borrow_mut() = e.path().to_string();
            e.into_inner()
        })
    });
    match result {
        Ok(value) => Ok(Parsed {
            value,
            // serde-saphyr's location wrapper shows up as a key of its own; it is not the user's.
            unknown_keys: unknown
                .into_inner()
                .into_iter()
                .filter(|k| !k.contains("__serde_saphyr_private"))
                .map(|k| ignored_key_path(&k))
                .collect(),
        }),
        Err(err) => {
            let path = error_path(&path_at_error.into_inner());
            let message = clean_message(&err.without_snippet().to_string());
            let mut diag = Diagnostic::new(file, in_user_terms(&message, path.as_deref()));
            if let Some(path) = path {
                diag = diag.field(path);
            }
            if let Some(loc) = err.location() {
                diag = diag.at(source, loc.line() as usize, loc.column() as usize);
            }
            Err(diag)
        }
    }
}

/// Appends one step of a path: `[n]` for a list position, `.key` for a key.
fn push_step(out: &mut String, step: &str) {
    if !step.is_empty() && step.bytes().all(|b| b.is_ascii_digit()) {
        out.push_str(&format!("[{step}]"));
    } else {
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(step);
    }
}

/// The path of an unknown key as the user wrote it (`tools[0].parameters[0].bogus`) from
/// serde_ignored's (`tools.0.?.value.parameters.?.0.bogus`): `?` marks an optional value or a location
/// wrapper, and the wrapper's own `value` step follows it; neither is in the file.
fn ignored_key_path(raw: &str) -> String {
    let steps: Vec<&str> = raw.split('.').collect();
    let mut out = String::new();
    for (i, step) in steps.iter().enumerate() {
        let wrapper_value = *step == "value" && i > 0 && steps[i - 1] == "?" && i + 1 < steps.len();
        if *step == "?" || wrapper_value {
            continue;
        }
        push_step(&mut out, step);
    }
    out
}

/// The field of a type error as the user wrote it, from serde_path_to_error's path
/// (`tools[0].value.timeout_seconds`): the location wrapper's `value` steps are dropped (no schema key
/// is called `value`). `None` for the root, or when the path lost track (`?`).
fn error_path(raw: &str) -> Option<String> {
    if raw == "." || raw.is_empty() || raw.split('.').any(|s| s == "?") {
        return None;
    }
    let mut out = String::new();
    for step in raw.split('.').filter(|s| *s != "value") {
        push_step(&mut out, step);
    }
    (!out.is_empty()).then_some(out)
}

/// Keys whose value is a whole number (they are read as numbers and checked afterwards, so a type
/// error there says "floating point").
const INTEGER_KEYS: [&str; 5] = [
    "max_iterations",
    "max_tokens",
    "timeout_ms",
    "context_window",
    "keep_recent",
];

const INTEGER: &str = "an integer (a whole number such as 30)";
const LIST: &str = "a list (`- item` lines, or `[a, b]`)";
const MAPPING: &str = "a mapping (`key: value` lines)";

/// A serde or serde-saphyr type name (`f64`, `struct RawLlm`, `a sequence`) as the user would say it.
fn kind_in_user_terms(kind: &str, integer_key: bool) -> Option<&'static str> {
    let k = kind
        .trim()
        .trim_start_matches("a ")
        .trim_start_matches("an ");
    let number = || if integer_key { INTEGER } else { "a number" };
    Some(match k {
        "floating point" | "f64" | "f32" => number(),
        "integer" | "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16" | "i32" | "i64"
        | "isize" => INTEGER,
        "boolean" | "bool" => "true or false",
        "sequence" | "sequence start" | "list" | "array" => LIST,
        "mapping start" | "mapping" | "map" => MAPPING,
        _ if k.starts_with("struct ") || k.starts_with("map") => MAPPING,
        "string" | "string scalar" | "str" | "char" => "text",
        "scalar" => "a single value",
        _ => return None,
    })
}

/// What the user wrote instead, from serde's "unexpected" description (`integer \`3\``, `map`).
fn found_in_user_terms(found: &str) -> Option<String> {
    let found = found.trim();
    let (head, rest) = found.split_once(' ').unwrap_or((found, ""));
    Some(match head {
        "map" => "a mapping".into(),
        "sequence" => "a list".into(),
        "string" => format!("the text {rest}"),
        "integer" | "floating" => format!("the number {}", rest.trim_start_matches("point ")),
        "boolean" => rest.trim_matches('`').to_string(),
        "unit" | "null" => "nothing".into(),
        _ => return None,
    })
}

/// serde-saphyr's and serde's messages in the terms of someone editing the file: "invalid floating
/// point" becomes "expected a number" (or "expected an integer" for a whole-number key), "expected
/// sequence start" "expected a list", "missing field" "missing key", and so on. Messages not about
/// types are left as they are.
fn in_user_terms(message: &str, field: Option<&str>) -> String {
    let key = field
        .and_then(|f| f.rsplit('.').next())
        .map(|k| k.split('[').next().unwrap_or(k));
    let integer_key = key.is_some_and(|k| INTEGER_KEYS.contains(&k));
    let expected =
        |kind: &str| kind_in_user_terms(kind, integer_key).map(|k| format!("expected {k}"));
    if let Some(kind) = message.strip_prefix("invalid ")
        && !kind.starts_with("type:")
        && !kind.starts_with("value:")
        && !kind.starts_with("length")
        && let Some(text) = expected(kind.split(" (").next().unwrap_or(kind))
    {
        return text;
    }
    if let Some(kind) = message.strip_prefix("expected ")
        && let Some(text) = expected(kind)
    {
        return text;
    }
    if let Some(kind) = message.strip_suffix(" expected")
        && let Some(text) = expected(kind)
    {
        return text;
    }
    if let Some(name) = message.strip_prefix("missing field ") {
        return format!("missing key {name}");
    }
    if let Some(rest) = message.strip_prefix("duplicate mapping key: ") {
        // The parser's own advice ("set DuplicateKeyPolicy …") is about its API, not the file.
        let name = rest.split(", set ").next().unwrap_or(rest);
        return format!("the key {name} is given twice in the same mapping; keep one");
    }
    if let Some(rest) = message.strip_prefix("invalid type: ")
        && let Some((found, wanted)) = rest.split_once(", expected ")
        && let Some(text) = expected(wanted)
    {
        return match found_in_user_terms(found) {
            Some(found) => format!("{text}, found {found}"),
            None => text,
        };
    }
    message.to_string()
}

/// serde-saphyr's messages start with `error: line L column C: `; the location is shown separately.
fn clean_message(message: &str) -> String {
    let m = message.trim();
    let m = m.strip_prefix("error: ").unwrap_or(m);
    let m = match m.strip_prefix("line ") {
        Some(rest) => match rest.find(": ") {
            Some(idx) if rest[..idx].contains("column") => &rest[idx + 2..],
            _ => m,
        },
        None => m,
    };
    // Some messages end with " at line L, column C" instead.
    match m.rfind(" at line ") {
        Some(idx) if m[idx..].contains("column") => m[..idx].to_string(),
        _ => m.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        port: u16,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        name: String,
        servers: Vec<Inner>,
    }

    #[test]
    fn type_errors_have_location_path_and_snippet() {
        let src = "name: a\nservers:\n  - port: 1\n  - port: oops\n";
        let err = parse::<Outer>(Path::new("agent.yaml"), src).unwrap_err();
        assert_eq!(err.location, Some((4, 11)));
        assert_eq!(err.field.as_deref(), Some("servers[1].port"));
        assert_eq!(
            err.message, "expected an integer (a whole number such as 30)",
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with("agent.yaml:4:11: servers[1].port: "),
            "{err}"
        );
        assert!(err.to_string().contains("4 |   - port: oops"), "{err}");
    }

    #[test]
    fn syntax_errors_have_a_location() {
        let err = parse::<Outer>(Path::new("a.yaml"), "name: a\nservers: [\n").unwrap_err();
        assert_eq!(err.location, Some((2, 10)), "{err}");
        assert_eq!(err.message, "unclosed bracket '['");
    }

    #[test]
    fn paths_and_messages_are_in_the_users_terms() {
        assert_eq!(
            ignored_key_path("tools.0.?.value.parameters.?.0.bogus"),
            "tools[0].parameters[0].bogus"
        );
        assert_eq!(
            ignored_key_path("lifecycle_hooks.?.on_error.?.value.extra"),
            "lifecycle_hooks.on_error.extra"
        );
        assert_eq!(ignored_key_path("tools.0.?.value.value"), "tools[0].value");
        assert_eq!(ignored_key_path("llm.temprature"), "llm.temprature");
        assert_eq!(
            error_path("tools[0].value.timeout_seconds").as_deref(),
            Some("tools[0].timeout_seconds")
        );
        assert_eq!(error_path("."), None);
        assert_eq!(error_path("a.?.b"), None);
        let t = |m: &str, f: &str| in_user_terms(m, Some(f));
        assert_eq!(
            t("invalid floating point", "max_iterations"),
            "expected an integer (a whole number such as 30)"
        );
        assert_eq!(
            t("invalid floating point", "llm.temperature"),
            "expected a number"
        );
        assert_eq!(
            t(
                "duplicate mapping key: name, set DuplicateKeyPolicy in Options if acceptable",
                "tools[0]"
            ),
            "the key name is given twice in the same mapping; keep one"
        );
        assert_eq!(
            t("invalid u64", "hooks.x.timeout_ms"),
            "expected an integer (a whole number such as 30)"
        );
        assert_eq!(
            t("expected sequence start", "tools"),
            "expected a list (`- item` lines, or `[a, b]`)"
        );
        assert_eq!(t("expected string scalar", "name"), "expected text");
        assert_eq!(t("missing field `name`", "x"), "missing key `name`");
        assert_eq!(
            t("invalid type: integer `3`, expected struct RawLlm", "llm"),
            "expected a mapping (`key: value` lines), found the number `3`"
        );
        assert_eq!(t("duplicate tool name", "tools"), "duplicate tool name");
    }

    #[test]
    fn unknown_keys_are_reported() {
        let parsed = parse::<Outer>(
            Path::new("a.yaml"),
            "name: a\nnmae: b\nservers:\n  - port: 1\n    host: x\n",
        )
        .unwrap();
        assert_eq!(parsed.unknown_keys, vec!["nmae", "servers[0].host"]);
    }

    #[test]
    fn empty_files_say_so() {
        let err = parse::<Outer>(Path::new("a.yaml"), "# nothing\n\n").unwrap_err();
        assert_eq!(err.message, "the file is empty");
    }
}
