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
                .collect(),
        }),
        Err(err) => {
            // serde-saphyr's location wrapper adds a `.value` step that is not part of the user's file.
            let path = path_at_error.into_inner().replace(".value", "");
            let mut diag = Diagnostic::new(file, clean_message(&err.without_snippet().to_string()));
            // serde_path_to_error says "." for the root and "?" where it lost track.
            if path != "." && !path.contains('?') {
                diag = diag.field(path);
            }
            if let Some(loc) = err.location() {
                diag = diag.at(source, loc.line() as usize, loc.column() as usize);
            }
            Err(diag)
        }
    }
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
        assert!(err.message.contains("u16"), "{err}");
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
    fn unknown_keys_are_reported() {
        let parsed = parse::<Outer>(
            Path::new("a.yaml"),
            "name: a\nnmae: b\nservers:\n  - port: 1\n    host: x\n",
        )
        .unwrap();
        assert_eq!(parsed.unknown_keys, vec!["nmae", "servers.0.host"]);
    }

    #[test]
    fn empty_files_say_so() {
        let err = parse::<Outer>(Path::new("a.yaml"), "# nothing\n\n").unwrap_err();
        assert_eq!(err.message, "the file is empty");
    }
}
