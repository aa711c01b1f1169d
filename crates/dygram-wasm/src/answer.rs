//! What the playground asks of the language, and the answers, as JSON. Positions are UTF-16 code
//! units from the start of the text.
//!
//! | `op` | request | answer |
//! |---|---|---|
//! | `diagnose` | `text` | `diagnostics` (each `severity`, `message`, `hint`, `start`, `end`, `line`, `column`) |
//! | `draw` | `text` | `highlights` (`[start, end, kind]`), `svg` (the drawing), `nodes` (their names) |
//! | `check` | `text` | both |
//! | `complete` | `text`, `at` | `items` (each `label`, `kind`, `detail`, `start`, `end`) |
//! | `hover` | `text`, `at` | `markdown`, `start`, `end`, or `null` |
//! | `format` | `text`, `indent` (spaces; 0 for a tab) | `text`, or `refused` (why) |
//!
//! A request that cannot be read is answered `{"error": …}`.

use dygram_analysis::complete::CompletionKind;
use dygram_analysis::format::{self, Indent};
use dygram_analysis::highlight::{Kind, highlight};
use dygram_analysis::{complete, hover};
use dygram_core::diagnostic::Severity;
use dygram_core::json::JsonOptions;
use dygram_core::render::layout;
use dygram_syntax::source::SourceFile;
use serde_json::{Value, json};

/// The answer to a request's bytes, as bytes.
pub fn answer_bytes(request: &[u8]) -> Vec<u8> {
    let answer = match serde_json::from_slice::<Value>(request) {
        Ok(request) => answer(&request),
        Err(e) => json!({"error": format!("the request is not JSON: {e}")}),
    };
    answer.to_string().into_bytes()
}

/// The answer to `request`.
pub fn answer(request: &Value) -> Value {
    let text = request["text"].as_str().unwrap_or_default();
    let units = Units::new(text);
    let at = request["at"]
        .as_u64()
        .map(|at| units.byte(usize::try_from(at).unwrap_or(usize::MAX)));
    match (request["op"].as_str(), at) {
        (Some("diagnose"), _) => diagnose(text, &units),
        (Some("draw"), _) => draw(text, &units),
        (Some("check"), _) => {
            let mut both = diagnose(text, &units);
            if let (Value::Object(out), Value::Object(drawn)) = (&mut both, draw(text, &units)) {
                out.extend(drawn);
            }
            both
        }
        (Some("complete"), Some(at)) => json!({"items": completions(text, at, &units)}),
        (Some("hover"), Some(at)) => match hover::hover(text, at) {
            Some(h) => json!({
                "markdown": h.markdown,
                "start": units.unit(h.span.start as usize),
                "end": units.unit(h.span.end as usize),
            }),
            None => Value::Null,
        },
        (Some("format"), _) => {
            let indent = match request["indent"].as_u64() {
                Some(0) => Indent::Tab,
                Some(n) => Indent::Spaces(u32::try_from(n).unwrap_or(4)),
                None => Indent::default(),
            };
            match format::formatted(text, indent) {
                Ok(text) => json!({"text": text}),
                Err(why) => json!({"refused": why.to_string()}),
            }
        }
        (Some(op @ ("complete" | "hover")), None) => {
            json!({"error": format!("{op} needs `at`, a position in UTF-16 code units")})
        }
        (op, _) => json!({
            "error": format!("unknown op {op:?}: diagnose, draw, check, complete, hover or format")
        }),
    }
}

/// The diagnostics of `text`: what a keystroke needs first.
fn diagnose(text: &str, units: &Units) -> Value {
    let compiled = dygram_core::compile(SourceFile::new("machine.dy", text));
    let diagnostics: Vec<Value> = compiled
        .diagnostics
        .iter()
        .map(|d| {
            let (start, end) = d.span.map_or((0, 0), |s| {
                (units.unit(s.start as usize), units.unit(s.end as usize))
            });
            let (line, column) = units.line_column(d.span.map_or(0, |s| s.start as usize));
            json!({
                "severity": if d.severity == Severity::Error { "error" } else { "warning" },
                "message": d.message,
                "hint": d.hint,
                "start": start,
                "end": end,
                "line": line,
                "column": column,
            })
        })
        .collect();
    json!({"diagnostics": diagnostics})
}

/// The colours of `text`, the drawing of its machine and its nodes' names: what can come a frame
/// after a keystroke.
fn draw(text: &str, units: &Units) -> Value {
    let highlights: Vec<Value> = highlight(text)
        .into_iter()
        .map(|h| {
            json!([
                units.unit(h.span.start as usize),
                units.unit(h.span.end as usize),
                kind_name(h.kind)
            ])
        })
        .collect();
    let compiled = dygram_core::compile(SourceFile::new("machine.dy", text));
    let machine = compiled.json(JsonOptions {
        source_ranges: true,
    });
    let nodes: Vec<&str> = machine["nodes"]
        .as_array()
        .map(|n| n.iter().filter_map(|n| n["name"].as_str()).collect())
        .unwrap_or_default();
    json!({"highlights": highlights, "svg": layout::to_svg(&machine), "nodes": nodes})
}

fn completions(text: &str, at: usize, units: &Units) -> Vec<Value> {
    complete::complete(text, at)
        .into_iter()
        .map(|c| {
            json!({
                "label": c.label,
                "kind": completion_kind(c.kind),
                "detail": c.detail,
                "start": units.unit(c.replace.start),
                "end": units.unit(c.replace.end),
            })
        })
        .collect()
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Keyword => "keyword",
        Kind::Type => "type",
        Kind::Class => "node",
        Kind::Property => "property",
        Kind::Decorator => "annotation",
        Kind::String => "string",
        Kind::Number => "number",
        Kind::Comment => "comment",
        Kind::Operator => "arrow",
        Kind::Variable => "variable",
        Kind::Parameter => "parameter",
    }
}

fn completion_kind(kind: CompletionKind) -> &'static str {
    match kind {
        CompletionKind::Keyword => "keyword",
        CompletionKind::Class => "node",
        CompletionKind::Struct => "context",
        CompletionKind::Function => "task",
        CompletionKind::Method => "tool",
        CompletionKind::EnumMember => "state",
        CompletionKind::Field => "attribute",
        CompletionKind::Property => "property",
        CompletionKind::Variable => "variable",
        CompletionKind::Module => "annotation",
        CompletionKind::Reference => "type",
    }
}

/// Byte offsets and UTF-16 offsets of one text, both ways, and lines.
struct Units {
    /// The UTF-16 offset of each byte offset (a byte inside a character: that character's).
    unit_at: Vec<u32>,
    /// The byte offset of each UTF-16 offset (inside a surrogate pair: the character's start).
    byte_at: Vec<u32>,
    /// Where each line starts, in bytes.
    lines: Vec<usize>,
}

impl Units {
    fn new(text: &str) -> Self {
        let mut unit_at = Vec::with_capacity(text.len() + 1);
        let mut byte_at = Vec::with_capacity(text.len() + 1);
        let mut lines = vec![0];
        let mut unit = 0u32;
        for (i, c) in text.char_indices() {
            for _ in 0..c.len_utf8() {
                unit_at.push(unit);
            }
            for _ in 0..c.len_utf16() {
                byte_at.push(u32::try_from(i).unwrap_or(u32::MAX));
            }
            unit += c.len_utf16() as u32;
            if c == '\n' {
                lines.push(i + 1);
            }
        }
        unit_at.push(unit);
        byte_at.push(u32::try_from(text.len()).unwrap_or(u32::MAX));
        Self {
            unit_at,
            byte_at,
            lines,
        }
    }

    /// The UTF-16 offset of byte `at` (clamped to the text).
    fn unit(&self, at: usize) -> u32 {
        self.unit_at[at.min(self.unit_at.len() - 1)]
    }

    /// The byte offset of UTF-16 offset `at` (clamped to the text).
    fn byte(&self, at: usize) -> usize {
        self.byte_at[at.min(self.byte_at.len() - 1)] as usize
    }

    /// The line and column (from 1; the column in UTF-16 code units) of byte `at`.
    fn line_column(&self, at: usize) -> (usize, u32) {
        let line = self.lines.partition_point(|&s| s <= at).saturating_sub(1);
        let column = self.unit(at) - self.unit(self.lines[line]);
        (line + 1, column + 1)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ask(request: Value) -> Value {
        let bytes = answer_bytes(request.to_string().as_bytes());
        serde_json::from_slice(&bytes).unwrap()
    }

    #[test]
    fn a_syntax_error_is_placed_in_utf16_units_on_its_line() {
        let text = "state a \"é𝄞\";\nstate b;\nb -> ;\n";
        let a = ask(json!({"op": "check", "text": text}));
        let errors: Vec<&Value> = a["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["severity"] == "error")
            .collect();
        assert!(!errors.is_empty(), "{a}");
        assert_eq!(errors[0]["line"], 3, "{a}");
        // `;` of the last line, counted in UTF-16 units (𝄞 is two).
        let semicolon = text.encode_utf16().count() - 2;
        assert_eq!(errors[0]["start"], semicolon, "{a}");
        assert_eq!(errors[0]["column"], 6, "{a}");
        assert!(a["svg"].as_str().unwrap().starts_with("<svg"), "{a}");
    }

    #[test]
    fn a_valid_machine_has_its_drawing_nodes_and_highlights() {
        let a = ask(json!({"op": "check", "text": "start -> done;\n"}));
        assert_eq!(a["diagnostics"].as_array().map(Vec::len), Some(0), "{a}");
        assert_eq!(a["nodes"], json!(["start", "done"]), "{a}");
        assert!(
            a["svg"].as_str().unwrap().contains("data-node=\"done\""),
            "{a}"
        );
        assert!(
            a["highlights"]
                .as_array()
                .unwrap()
                .iter()
                .any(|h| h[2] == "arrow"),
            "{a}"
        );
    }

    #[test]
    fn completion_and_hover_take_utf16_positions() {
        let text = "Task pay \"Päy 𝄞\";\nstart -> pa";
        let at = text.encode_utf16().count();
        let a = ask(json!({"op": "complete", "text": text, "at": at}));
        let pay = a["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["label"] == "pay")
            .unwrap();
        assert_eq!(
            (pay["start"].as_u64(), pay["end"].as_u64()),
            (Some(at as u64 - 2), Some(at as u64))
        );
        let h = ask(json!({"op": "hover", "text": text, "at": 6}));
        assert!(h["markdown"].as_str().unwrap().contains("pay"), "{h}");
    }

    #[test]
    fn diagnose_and_draw_are_check_in_two() {
        let text = "start -> done;\n";
        let check = ask(json!({"op": "check", "text": text}));
        let diagnose = ask(json!({"op": "diagnose", "text": text}));
        let draw = ask(json!({"op": "draw", "text": text}));
        assert_eq!(check["diagnostics"], diagnose["diagnostics"]);
        assert_eq!(check["highlights"], draw["highlights"]);
        assert_eq!(check["svg"], draw["svg"]);
        assert!(diagnose.get("svg").is_none() && draw.get("diagnostics").is_none());
    }

    #[test]
    fn format_and_bad_requests() {
        let a = ask(json!({"op": "format", "text": "state   a;", "indent": 2}));
        assert_eq!(a["text"], "state a;\n", "{a}");
        assert!(ask(json!({"op": "nope"}))["error"].is_string());
        assert!(ask(json!({"op": "hover", "text": "a;"}))["error"].is_string());
        let garbage = answer_bytes(b"\xff{");
        assert!(String::from_utf8(garbage).unwrap().contains("error"));
    }
}
