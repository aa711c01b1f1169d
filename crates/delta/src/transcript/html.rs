//! The transcript as one self-contained HTML page: styles inline, no script, no request for anything
//! outside the page. Tool output folds away (`<details>`). Every text from the run is escaped.

use std::fmt::Write;

use super::{Entry, ToolEntry, Transcript, clip};
use crate::events::{ActionStatus, Level};
use crate::metadata::RunStatus;

/// Most characters of a tool's output put in the page; the rest is in its record.
pub const OUTPUT_LIMIT: usize = 20_000;

const STYLE: &str = r#"
:root { --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; --muted: #59636e; --line: #d1d9e0; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1f2328; background: #f6f8fa; }
main { max-width: 960px; margin: 0 auto; padding: 24px 16px 64px; }
h1 { font-size: 20px; margin: 0 0 8px; word-break: break-all; }
.status { display: inline-block; padding: 2px 10px; border-radius: 12px; font-size: 13px; font-weight: 600; color: #fff; vertical-align: middle; }
.s-COMPLETED { background: var(--ok); } .s-FAILED { background: var(--bad); }
.s-WAITING_FOR_INPUT { background: var(--warn); } .s-INTERRUPTED, .s-RUNNING { background: var(--muted); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 12px 0 20px; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; word-break: break-word; }
.box { border: 1px solid var(--line); border-radius: 8px; background: #fff; padding: 10px 14px; margin: 10px 0; }
.box.answer { border-left: 4px solid var(--ok); } .box.question { border-left: 4px solid var(--warn); }
.timeline { list-style: none; padding: 0; margin: 0; border-left: 2px solid var(--line); }
.timeline > li { position: relative; margin: 0 0 12px 18px; }
.timeline > li::before { content: ""; position: absolute; left: -25px; top: 14px; width: 10px; height: 10px; border-radius: 50%; background: var(--muted); }
.timeline > li.user::before { background: #0969da; } .timeline > li.model::before { background: #8250df; }
.timeline > li.tool.ok::before { background: var(--ok); } .timeline > li.tool.bad::before, .timeline > li.error::before { background: var(--bad); }
.meta { color: var(--muted); font-size: 13px; }
.label { font-weight: 600; margin-right: 6px; }
pre { white-space: pre-wrap; word-break: break-word; background: #f6f8fa; border: 1px solid var(--line); border-radius: 6px; padding: 8px; margin: 6px 0 0; font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace; }
.text { white-space: pre-wrap; word-break: break-word; margin-top: 4px; }
details > summary { cursor: pointer; }
code { font: 13px ui-monospace, SFMono-Regular, Menlo, monospace; }
"#;

/// Escapes `text` for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The page.
pub fn render(t: &Transcript) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>delta run {id}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n",
        id = escape(&t.run_id)
    );
    out.push_str(&header(t));
    out.push_str("<h2>Timeline</h2>\n<ol class=\"timeline\">\n");
    for entry in &t.entries {
        out.push_str(&entry_html(entry));
    }
    out.push_str("</ol>\n</main>\n</body>\n</html>\n");
    out
}

fn header(t: &Transcript) -> String {
    let mut out = format!(
        "<h1>Run {} <span class=\"status s-{}\" id=\"status\">{}</span></h1>\n<dl class=\"facts\">\n",
        escape(&t.run_id),
        t.status.as_str(),
        t.status.as_str()
    );
    let mut fact = |name: &str, value: &str| {
        let _ = writeln!(out, "<dt>{name}</dt><dd>{}</dd>", escape(value));
    };
    fact("Task", t.task.trim());
    fact("Agent", &t.agent_ref);
    if let Some(model) = &t.model {
        fact("Model", model);
    }
    fact("Started", &t.start_time);
    if let Some(end) = &t.end_time {
        fact("Stopped", end);
    }
    fact(
        "Tokens",
        &format!(
            "{} in, {} out, {} model calls",
            t.usage.input_tokens, t.usage.output_tokens, t.usage.llm_calls
        ),
    );
    fact("Tool iterations", &t.iterations.to_string());
    fact("Folder", &t.run_dir.display().to_string());
    if t.crashed {
        fact("Note", "its process died while it was running");
    }
    out.push_str("</dl>\n");
    out.push_str(&boxes(t));
    out
}

/// The final answer, the pending question, or why the run failed, in a box.
fn boxes(t: &Transcript) -> String {
    let mut out = String::new();
    if let Some(answer) = &t.final_answer {
        let _ = writeln!(
            out,
            "<div class=\"box answer\"><span class=\"label\">Final answer</span><div class=\"text\">{}</div></div>",
            escape(answer.trim())
        );
    }
    if let Some(question) = &t.pending_question {
        let _ = writeln!(
            out,
            "<div class=\"box question\"><span class=\"label\">Waiting for an answer to</span><div class=\"text\">{}</div></div>",
            escape(question.trim())
        );
    }
    if t.status == RunStatus::Failed
        && let Some(Entry::Note { text, .. }) = t.entries.iter().rev().find(|e| {
            matches!(
                e,
                Entry::Note {
                    level: Level::Error,
                    ..
                }
            )
        })
    {
        let _ = writeln!(
            out,
            "<div class=\"box question\"><span class=\"label\">Failed</span><div class=\"text\">{}</div></div>",
            escape(text.trim())
        );
    }
    out
}

/// One `<li>` of the timeline.
fn item(class: &str, time: &str, label: &str, body: &str) -> String {
    format!(
        "<li class=\"{class}\"><span class=\"label\">{}</span><span class=\"meta\">{}</span>{body}</li>\n",
        escape(label),
        escape(time)
    )
}

fn text_block(text: &str) -> String {
    if text.trim().is_empty() {
        String::new()
    } else {
        format!("<div class=\"text\">{}</div>", escape(text.trim()))
    }
}

fn entry_html(entry: &Entry) -> String {
    match entry {
        Entry::User { time, text } => item("user", time, "User", &text_block(text)),
        Entry::Model(m) => {
            let body = format!(
                " <span class=\"meta\">· {}</span>{}",
                escape(&m.facts().join(", ")),
                text_block(&m.text)
            );
            item("model", &m.time, &format!("Model, call {}", m.call), &body)
        }
        Entry::Tool(tool) => tool_html(tool),
        Entry::FailedRequest {
            time,
            error_kind,
            message,
            http_status,
            record,
            record_id,
        } => {
            let status = http_status
                .map(|s| format!(", HTTP {s}"))
                .unwrap_or_default();
            let body = format!(
                "{}<div class=\"meta\">record: <code>{}</code></div>",
                text_block(message),
                escape(&super::record_label(record, Some(record_id)))
            );
            item(
                "error",
                time,
                &format!("Model request failed ({error_kind}{status})"),
                &body,
            )
        }
        Entry::Compaction(c) => {
            let body = format!(
                "<details><summary>summary</summary><pre>{}</pre></details>",
                escape(&c.summary)
            );
            item("compaction", &c.time, &c.headline(), &body)
        }
        Entry::Note { time, level, text } => {
            let (class, label) = match level {
                Level::Info => ("note", "Note"),
                Level::Warn => ("note", "Warning"),
                Level::Error => ("error", "Error"),
            };
            item(class, time, label, &text_block(text))
        }
        Entry::HookFailed { time, name } => item("error", time, &format!("Hook {name} failed"), ""),
        Entry::End { time, status } => item("end", time, &format!("Run ended: {status}"), ""),
    }
}

/// A tool call: its name and outcome, its arguments and output folded away.
fn tool_html(tool: &ToolEntry) -> String {
    let class = match tool.status {
        Some(ActionStatus::Success) => "tool ok",
        Some(_) => "tool bad",
        None => "tool",
    };
    let facts = tool.facts();
    let arguments = serde_json::to_string_pretty(&tool.arguments).unwrap_or_default();
    let (shown, rest) = clip(&tool.output, OUTPUT_LIMIT);
    let mut body = format!(
        " <span class=\"meta\">· {}</span>\n<details{}><summary>arguments and output</summary>\n<pre class=\"arguments\">{}</pre>\n",
        escape(&facts.join(", ")),
        if tool.status == Some(ActionStatus::Success) {
            ""
        } else {
            " open"
        },
        escape(&arguments)
    );
    if !tool.command.is_empty() {
        let _ = writeln!(
            body,
            "<div class=\"meta\">command: <code>{}</code></div>",
            escape(&tool.command)
        );
    }
    if !shown.is_empty() {
        let _ = writeln!(body, "<pre class=\"output\">{}</pre>", escape(shown));
    }
    if rest > 0 {
        let _ = writeln!(body, "<div class=\"meta\">… {rest} more characters</div>");
    }
    if let Some(record) = &tool.record {
        let _ = writeln!(
            body,
            "<div class=\"meta\">full output: <code>{}</code></div>",
            escape(&super::record_label(record, tool.record_id.as_deref()))
        );
    }
    body.push_str("</details>");
    item(class, &tool.time, &format!("Tool {}", tool.name), &body)
}
