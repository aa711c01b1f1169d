//! The HTML view of an execution (`dygram exec show --format html`): one self-contained page (its
//! style and script inline, nothing fetched) with the execution's status, its machine drawn with
//! the trace ([`super::to_svg`]), its paths, and a timeline of the calls that advanced it: the
//! node, the model's text and each tool call with its arguments and result.
//!
//! Every text that comes from the execution (model text, tool arguments and results, errors,
//! names) is escaped: a model that writes `<script>` shows the characters, nothing runs.

use serde_json::Value;

use crate::outputs::svg::SvgError;
use crate::session::{HistoryEntry, Metadata, ToolCallRecord};
use crate::state::{ExecutionState, Path, PathStatus};
use dygram_core::render::markdown::escape_html as esc;

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// What the page shows.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    /// Execution id.
    pub id: &'a str,
    /// Its metadata (machine file, status, counters, times, where answers come from).
    pub meta: &'a Metadata,
    /// Its state.
    pub state: &'a ExecutionState,
    /// The lines of its `history.jsonl`.
    pub history: &'a [HistoryEntry],
}

/// The page, with the machine drawn by Graphviz. Where Graphviz cannot draw at all (missing, or
/// without formats), the page is made without the drawing (a note says why, and the rest of the
/// page needs no picture), and the error is given back beside it for the caller to say.
pub fn to_html(page: &Page<'_>) -> Result<(String, Option<SvgError>), SvgError> {
    match super::to_svg(page.state) {
        Ok(svg) => Ok((with_drawing(page, &svg), None)),
        Err(e) if e.is_unavailable() => {
            let note = format!(
                "<p class=\"no-drawing\">The machine is not drawn: {}{}</p>",
                esc(&e.to_string()),
                e.hint()
                    .map(|h| format!(" ({})", esc(&h)))
                    .unwrap_or_default()
            );
            Ok((with_drawing(page, &note), Some(e)))
        }
        Err(e) => Err(e),
    }
}

/// The page around an SVG drawing of the machine (Graphviz's output; what comes before its
/// `<svg` element, the XML prolog and doctype, is left out).
pub fn with_drawing(page: &Page<'_>, svg: &str) -> String {
    let drawing = svg.find("<svg").map_or(svg, |at| &svg[at..]);
    let title = format!("dygram · {}", page.id);
    let mut s = String::with_capacity(drawing.len() + 8192);
    s.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    // Nothing may be fetched: the policy blocks it even if something slipped through.
    s.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n",
    );
    s.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    s.push_str(&format!("<title>{}</title>\n", esc(&title)));
    s.push_str(&format!("<style>\n{STYLE}</style>\n</head>\n<body>\n"));
    s.push_str(&header(page));
    s.push_str("<main>\n<section id=\"machine\">\n<h2>Machine</h2>\n");
    s.push_str(
        "<p class=\"legend\"><span class=\"key visited\"></span> visited \
         <span class=\"key current\"></span> current \
         <span class=\"key taken\"></span> transition taken</p>\n",
    );
    s.push_str(&format!(
        "<div class=\"drawing\">\n{drawing}\n</div>\n</section>\n"
    ));
    s.push_str(&paths(page.state));
    s.push_str(&timeline(page));
    s.push_str("</main>\n");
    s.push_str(&format!("<script>\n{SCRIPT}</script>\n</body>\n</html>\n"));
    s
}

/// The execution's name, status and facts.
fn header(page: &Page<'_>) -> String {
    let m = page.meta;
    let status = m.status.as_str();
    let current = page.state.current_nodes();
    let at = if current.is_empty() {
        // A finished execution: where its paths ended.
        let mut ends: Vec<&str> = Vec::new();
        for p in &page.state.paths {
            if !ends.contains(&p.current_node.as_str()) {
                ends.push(&p.current_node);
            }
        }
        ("Ended at", none_if_empty(&ends.join(", ")))
    } else {
        ("Current node", current.join(", "))
    };
    let facts = [
        (
            "Machine",
            m.machine_file.as_deref().unwrap_or("(stdin)").to_string(),
        ),
        at,
        ("Turns", m.turn_count.to_string()),
        ("Steps", m.step_count.to_string()),
        ("Started", m.started_at.clone()),
        ("Last updated", m.last_executed_at.clone()),
        ("Mode", m.mode_text()),
    ];
    let mut s = format!(
        "<header>\n<h1>Execution <span class=\"id\">{}</span> \
         <span class=\"status status-{status}\" id=\"status\">{status}</span></h1>\n<dl>\n",
        esc(page.id)
    );
    for (name, value) in facts {
        s.push_str(&format!("<dt>{name}</dt><dd>{}</dd>\n", esc(&value)));
    }
    s.push_str("</dl>\n");
    if m.pending_request.is_some() {
        s.push_str(
            "<p class=\"note\">Waiting for an answer to the model's request (manual mode: \
             answer on stdin with the next call).</p>\n",
        );
    }
    s.push_str("</header>\n");
    s
}

fn none_if_empty(text: &str) -> String {
    if text.is_empty() {
        "(none)".into()
    } else {
        text.into()
    }
}

/// A table of the paths: status, where each stands, the transitions it took, its error.
fn paths(state: &ExecutionState) -> String {
    let mut s = String::from(
        "<section id=\"paths\">\n<h2>Paths</h2>\n<table>\n<thead><tr><th>Path</th><th>Status</th>\
         <th>At</th><th>Transitions</th></tr></thead>\n<tbody>\n",
    );
    for p in &state.paths {
        s.push_str(&path_row(p));
    }
    s.push_str("</tbody>\n</table>\n</section>\n");
    s
}

fn path_status(status: PathStatus) -> &'static str {
    match status {
        PathStatus::Active => "active",
        PathStatus::Waiting => "waiting",
        PathStatus::Completed => "completed",
        PathStatus::Failed => "failed",
        PathStatus::Cancelled => "cancelled",
    }
}

fn path_row(p: &Path) -> String {
    let status = path_status(p.status);
    let mut moves = String::new();
    for t in &p.history {
        moves.push_str(&format!(
            "<li><span class=\"node\">{}</span> → <span class=\"node\">{}</span> \
             <span class=\"why\">{}</span></li>",
            esc(&t.from),
            esc(&t.to),
            esc(&t.transition)
        ));
    }
    let mut row = format!(
        "<tr class=\"path path-{status}\"><td>{}</td><td><span class=\"status status-{status}\">\
         {status}</span></td><td class=\"node\">{}</td><td><ol class=\"moves\">{moves}</ol>",
        esc(&p.id),
        esc(&p.current_node)
    );
    if let Some(error) = &p.error {
        row.push_str(&format!("<p class=\"error\">{}</p>", esc(error)));
    }
    row.push_str("</td></tr>\n");
    row
}

/// The calls that advanced the execution, oldest first.
fn timeline(page: &Page<'_>) -> String {
    let mut s = String::from("<section id=\"timeline\">\n<h2>Timeline</h2>\n");
    if page.history.is_empty() {
        s.push_str("<p class=\"empty\">No call has advanced this execution yet.</p>\n");
    }
    s.push_str("<ol class=\"turns\">\n");
    for entry in page.history {
        s.push_str(&turn(entry));
    }
    s.push_str("</ol>\n</section>\n");
    s
}

/// One call: its node, status and time, the model's text and its tool calls.
fn turn(e: &HistoryEntry) -> String {
    let status = e.status.as_str();
    let mut s = format!(
        "<li class=\"turn\" data-node=\"{node}\" id=\"turn-{n}\">\n<h3><span class=\"n\">Turn {n}\
         </span> <span class=\"node\">{node}</span> <span class=\"status status-{status}\">\
         {status}</span> <time>{time}</time></h3>\n",
        n = e.turn,
        node = esc(&e.node),
        time = esc(&e.timestamp),
    );
    match e.text.as_deref().or(e.output.as_deref()) {
        Some(text) => s.push_str(&format!(
            "<div class=\"said\"><h4>Model</h4><pre class=\"text\">{}</pre></div>\n",
            esc(text)
        )),
        None if e.calls.is_empty() && e.tools.is_empty() => {
            s.push_str("<p class=\"quiet\">No answer of the model in this call.</p>\n");
        }
        None => {}
    }
    if e.calls.is_empty() && !e.tools.is_empty() {
        // A line written before the calls were kept: their names only.
        s.push_str(&format!(
            "<p class=\"tools\">Tools: {}</p>\n",
            esc(&e.tools.join(", "))
        ));
    }
    if !e.calls.is_empty() {
        s.push_str("<ul class=\"calls\">\n");
        for call in &e.calls {
            s.push_str(&tool_call(call));
        }
        s.push_str("</ul>\n");
    }
    s.push_str("</li>\n");
    s
}

/// One tool call: its name, whether it failed, its arguments and its result.
fn tool_call(c: &ToolCallRecord) -> String {
    let (class, mark) = if c.is_error {
        (
            "call failed",
            "<span class=\"status status-error\">failed</span>",
        )
    } else {
        ("call", "")
    };
    let input = serde_json::to_string_pretty(&c.input).unwrap_or_default();
    format!(
        "<li class=\"{class}\"><h4><span class=\"tool\">{}</span> {mark}</h4>\n\
         <details><summary>arguments</summary><pre class=\"input\">{}</pre></details>\n\
         <pre class=\"result\">{}</pre></li>\n",
        esc(&c.name),
        esc(&input),
        esc(&readable(&c.result))
    )
}

/// A tool result for people: JSON pretty-printed, a plain string as itself.
fn readable(result: &str) -> String {
    match serde_json::from_str::<Value>(result) {
        Ok(Value::String(text)) => text,
        Ok(v) => serde_json::to_string_pretty(&v).unwrap_or_else(|_| result.to_string()),
        Err(_) => result.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::executor::{Executor, Options};
    use crate::session::ClientConfig;
    use crate::state::Status;

    fn metadata(pending: bool) -> Metadata {
        Metadata {
            id: "x".into(),
            machine_file: Some("m<1>.dy".into()),
            machine_source: "file".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            last_executed_at: "2026-01-01T00:00:01Z".into(),
            turn_count: 1,
            step_count: 1,
            status: Status::Paused,
            mode: "interactive".into(),
            client_config: ClientConfig::default(),
            pending_request: pending.then(|| serde_json::json!({})),
            source_files: Vec::new(),
            source_fingerprint: None,
        }
    }

    #[test]
    fn the_page_escapes_the_execution_and_says_what_waits() {
        let source = "Task ask \"Ask\" { prompt: \"Go\"; }\nState end;\nstart -> ask -> end;";
        let machine = dygram_core::compile(dygram_syntax::source::SourceFile::new("m.dy", source))
            .json(Default::default());
        let state = Executor::start(machine, None, Options::default())
            .unwrap()
            .into_state();
        let meta = metadata(true);
        let history = [HistoryEntry {
            turn: 1,
            timestamp: "2026-01-01T00:00:01Z".into(),
            node: "ask".into(),
            tools: vec!["t<x>".into()],
            output: None,
            status: Status::Paused,
            text: Some("<img src=x onerror=alert(1)>".into()),
            calls: vec![ToolCallRecord {
                path: "path_0".into(),
                name: "t<x>".into(),
                input: serde_json::json!({"q": "</pre>"}),
                result: "{\"error\":\"<b>no</b>\"}".into(),
                is_error: true,
            }],
        }];
        let page = Page {
            id: "x",
            meta: &meta,
            state: &state,
            history: &history,
        };
        let html = with_drawing(
            &page,
            "<?xml version=\"1.0\"?>\n<svg><g class=\"node\"></g></svg>",
        );
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(!html.contains("<?xml"), "the prolog is left out");
        assert!(html.contains("<svg><g class=\"node\"></g></svg>"));
        for raw in ["<img src=x", "t<x>", "</pre>\"", "<b>no</b>", "m<1>.dy"] {
            assert!(!html.contains(raw), "{raw} unescaped");
        }
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert!(html.contains("Waiting for an answer"));
        assert!(html.contains("class=\"call failed\""));
        assert!(html.contains("id=\"status\">paused<"));
    }

    #[test]
    fn markup_in_texts_is_escaped() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert('x')&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(readable("{\"error\":\"no\"}"), "{\n  \"error\": \"no\"\n}");
        assert_eq!(readable("\"plain\""), "plain");
        assert_eq!(readable("not json"), "not json");
    }
}
