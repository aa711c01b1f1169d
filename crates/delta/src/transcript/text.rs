//! The transcript as text, for a terminal or a pager.

use std::fmt::Write;

use super::{Entry, ToolEntry, Transcript, clip};
use crate::events::Level;

/// Most characters of a tool's output shown; the rest is in its record.
pub const OUTPUT_LIMIT: usize = 2000;

/// The clock time of a journal timestamp (`11:00:24`).
fn clock(time: &str) -> &str {
    time.get(11..19).unwrap_or(time)
}

/// `text` with each line indented by `prefix`.
fn indented(text: &str, prefix: &str) -> String {
    text.lines().map(|l| format!("{prefix}{l}\n")).collect()
}

/// The whole transcript.
pub fn render(t: &Transcript) -> String {
    let mut out = header(t);
    for entry in &t.entries {
        out.push('\n');
        out.push_str(&entry_text(entry));
    }
    out.push_str(&footer(t));
    out
}

fn header(t: &Transcript) -> String {
    let mut out = String::new();
    let crashed = if t.crashed { " (its process died)" } else { "" };
    let _ = writeln!(out, "Run {}: {}{crashed}", t.run_id, t.status);
    let _ = writeln!(out, "Task:       {}", t.task.trim());
    let _ = writeln!(out, "Agent:      {}", t.agent_ref);
    if let Some(model) = &t.model {
        let _ = writeln!(out, "Model:      {model}");
    }
    let _ = writeln!(
        out,
        "Started:    {}{}",
        t.start_time,
        t.end_time
            .as_deref()
            .map(|e| format!("   stopped: {e}"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "Tokens:     {} in, {} out, {} model calls; {} tool iterations",
        t.usage.input_tokens, t.usage.output_tokens, t.usage.llm_calls, t.iterations
    );
    let _ = writeln!(out, "Folder:     {}", t.run_dir.display());
    if let Some(damage) = &t.damaged {
        let _ = writeln!(
            out,
            "Damaged:    {damage}; the facts above were read from the journal"
        );
    }
    out
}

fn entry_text(entry: &Entry) -> String {
    match entry {
        Entry::User { time, text } => format!("[{}] user\n{}", clock(time), indented(text, "  ")),
        Entry::Model(m) => {
            let body = if m.text.trim().is_empty() {
                String::new()
            } else {
                indented(m.text.trim(), "  ")
            };
            format!(
                "[{}] model, call {} ({})\n{body}",
                clock(&m.time),
                m.call,
                m.facts().join(", ")
            )
        }
        Entry::Tool(tool) => tool_text(tool),
        Entry::FailedRequest {
            time,
            error_kind,
            message,
            http_status,
            record,
            record_id,
        } => format!(
            "[{}] model request failed ({error_kind}{})\n{}  record: {}\n",
            clock(time),
            http_status
                .map(|s| format!(", HTTP {s}"))
                .unwrap_or_default(),
            indented(message, "  "),
            super::record_label(record, Some(record_id))
        ),
        Entry::Compaction(c) => format!(
            "[{}] {}\n{}",
            clock(&c.time),
            c.headline(),
            indented(&c.summary, "  | ")
        ),
        Entry::Note { time, level, text } => {
            let label = match level {
                Level::Info => "note",
                Level::Warn => "warning",
                Level::Error => "error",
            };
            format!("[{}] {label}: {}\n", clock(time), text.trim())
        }
        Entry::HookFailed { time, name } => format!("[{}] hook {name} failed\n", clock(time)),
        Entry::End { time, status } => format!("[{}] run ended: {status}\n", clock(time)),
    }
}

/// A tool call: name, arguments, outcome, and its output (clipped).
fn tool_text(tool: &ToolEntry) -> String {
    let mut out = format!(
        "[{}] tool {} {}\n",
        clock(&tool.time),
        tool.name,
        serde_json::to_string(&tool.arguments).unwrap_or_default()
    );
    if !tool.command.is_empty() {
        let _ = writeln!(out, "  $ {}", tool.command);
    }
    let facts = tool.facts();
    let _ = writeln!(out, "  {}", facts.join(", "));
    let (shown, rest) = clip(&tool.output, OUTPUT_LIMIT);
    out.push_str(&indented(shown, "  | "));
    if rest > 0 {
        let _ = writeln!(out, "  | ... {rest} more characters");
    }
    if let Some(record) = &tool.record
        && (rest > 0 || tool.output.contains("total characters]"))
    {
        let label = super::record_label(record, tool.record_id.as_deref());
        let _ = writeln!(out, "  full output: {label}");
    }
    if let Some(child) = &tool.sub_run {
        let _ = writeln!(
            out,
            "  sub-agent run {} ({}), in {}:",
            child.run_id,
            child.status,
            child.run_dir.display()
        );
        out.push_str(&indented(&render(child), "  ┊ "));
    }
    out
}

fn footer(t: &Transcript) -> String {
    let mut out = String::new();
    if let Some(answer) = &t.final_answer {
        let _ = write!(out, "\nFinal answer:\n{}", indented(answer.trim(), "  "));
    }
    if let Some(question) = &t.pending_question {
        let _ = write!(
            out,
            "\nWaiting for an answer to:\n{}  (answer with: delta continue -w WORKSPACE -m \"...\")\n",
            indented(question.trim(), "  ")
        );
    }
    if t.torn_tail {
        out.push_str("\n(the journal's last line was cut short by a crash and is left out)\n");
    }
    out
}
