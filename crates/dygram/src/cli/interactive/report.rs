//! What a call of `execute -i` prints: the text report, one JSON object, or a diagram.

use serde_json::{Value, json};

use dygram_runtime::executor::ExecutionEvent;
use dygram_runtime::session::{Metadata, Report, Session};
use dygram_runtime::state::{ExecutionState, Status};

use super::super::execute::{ExecFormat, ExecuteArgs, describe, tool_error};
use super::super::{Exit, eprint_line, print_out, print_text};

/// Where a call saved the execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saved {
    /// `.dygram/executions/<id>` of the current folder.
    Folder,
    /// The store of `--store`.
    Store,
}

impl Saved {
    fn place(self, id: &str) -> String {
        match self {
            Self::Folder => format!(".dygram/executions/{id}"),
            Self::Store => format!("execution {id} in the store"),
        }
    }
}

/// What an opened session shows: its id, metadata and state, and where it is saved.
#[derive(Clone, Copy)]
pub struct Shown<'a> {
    pub id: &'a str,
    pub meta: &'a Metadata,
    pub state: &'a ExecutionState,
    pub saved: Saved,
}

impl<'a> Shown<'a> {
    /// `None` only for a session whose unit of work failed (never shown).
    pub fn of(session: &'a Session, saved: Saved) -> Option<Self> {
        Some(Self {
            id: session.id(),
            meta: session.metadata(),
            state: session.state()?,
            saved,
        })
    }
}

pub fn finish_already(args: &ExecuteArgs, shown: &Shown<'_>) -> Exit {
    let Shown {
        id, meta, state, ..
    } = *shown;
    let status = state.status();
    if args.format == ExecFormat::Json {
        print_out(&format!(
            "{}\n",
            json!({"id": id, "status": status.as_str(), "alreadyFinished": true,
                "turns": meta.turn_count, "steps": meta.step_count,
                "currentNodes": current_nodes(state), "visitedNodes": state.visited_nodes(),
                "contextState": state.context_state})
        ));
    } else if status == Status::Complete {
        print_out("✅ Execution already complete!\n");
        print_text(&final_results(id, state, meta));
    } else {
        print_out(&format!("❌ Execution {id} ended with an error.\n"));
        print_text(&final_results(id, state, meta));
    }
    if !args.verbosity.quiet {
        eprint_line(&format!(
            "To run the machine again: --force starts a new execution ({id} is kept), --id NAME starts another one beside it"
        ));
    }
    exit_for(status, false)
}

/// The exit code of a call from the execution's status: 3 while an answer is awaited, 2 complete,
/// 1 ended with an error, 0 more to do.
pub fn exit_for(status: Status, waiting: bool) -> Exit {
    if waiting {
        return Exit::Waiting;
    }
    match status {
        Status::Complete => Exit::Complete,
        Status::Error => Exit::Failed,
        Status::InProgress | Status::Paused => Exit::Ok,
    }
}

pub fn current_nodes(state: &ExecutionState) -> Vec<String> {
    state.current_nodes()
}

fn final_results(id: &str, state: &ExecutionState, meta: &Metadata) -> String {
    let mut s = String::from("📊 Final Results:\n");
    s.push_str(&format!("  Execution: {id}\n"));
    s.push_str(&format!("  Total turns: {}\n", meta.turn_count));
    s.push_str(&format!("  Total steps: {}\n", meta.step_count));
    s.push_str(&format!("  Status: {}\n", state.status().as_str()));
    s.push_str(&format!("  Started: {}\n", meta.started_at));
    s.push_str(&format!("  Last updated: {}\n", meta.last_executed_at));
    s.push_str("  Execution path:\n");
    for p in &state.paths {
        for t in &p.history {
            s.push_str(&format!(
                "    [{}] {} --({})--> {}\n",
                p.id, t.from, t.transition, t.to
            ));
        }
        if let Some(e) = &p.error {
            s.push_str(&format!(
                "    [{}] failed at {}: {e}\n",
                p.id, p.current_node
            ));
        }
    }
    s
}

pub fn print_report(args: &ExecuteArgs, r: &Report, shown: &Shown<'_>) {
    let Shown {
        id,
        meta,
        state,
        saved,
    } = *shown;
    if args.format == ExecFormat::Json {
        let out = r.to_json(id, meta, state);
        print_out(&format!("{out}\n"));
        return;
    }
    if matches!(args.format, ExecFormat::Dot | ExecFormat::Mermaid) {
        print_out(&super::super::execute::diagram(args.format, state));
        return;
    }
    let mut s = String::new();
    for e in &r.events {
        match e {
            ExecutionEvent::LlmCall { node, .. } => {
                s.push_str(&format!("📍 Turn {} - Node: {node}\n", meta.turn_count));
            }
            ExecutionEvent::ToolCall { .. } | ExecutionEvent::Output { .. } => {}
            other => {
                if let Some(line) = describe(other) {
                    s.push_str(&format!("{line}\n"));
                }
            }
        }
    }
    let tools: Vec<String> = r
        .events
        .iter()
        .filter_map(|e| match e {
            ExecutionEvent::ToolCall { name, is_error, .. } if *is_error => {
                Some(format!("{name} (failed)"))
            }
            ExecutionEvent::ToolCall { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    if !tools.is_empty() {
        s.push_str(&format!("  Tools: {}\n", tools.join(", ")));
    }
    for e in &r.events {
        if let ExecutionEvent::ToolCall {
            name,
            is_error: true,
            result,
            ..
        } = e
        {
            s.push_str(&format!("  {name} failed: {}\n", tool_error(result)));
        }
    }
    if let Some(text) = r.events.iter().find_map(|e| match e {
        ExecutionEvent::Output { text, .. } => Some(text),
        _ => None,
    }) {
        let short: String = text.chars().take(100).collect();
        let more = if text.chars().count() > 100 {
            "…"
        } else {
            ""
        };
        s.push_str(&format!("  Output: {}{more}\n", short.replace('\n', " ")));
    }
    if let Some(waiting) = &r.waiting {
        let store = if saved == Saved::Store {
            " --store URL"
        } else {
            ""
        };
        let answer_with = format!("dygram execute -i {} --id {id}{store}", args.file.display());
        s.push_str(&waiting_text(waiting, &answer_with));
    } else if r.status == Status::Complete {
        s.push_str("✅ Execution complete!\n");
        s.push_str(&final_results(id, state, meta));
    } else if r.status == Status::Error {
        s.push_str("❌ Execution ended with an error.\n");
        s.push_str(&final_results(id, state, meta));
    } else {
        let at = current_nodes(state).join(", ");
        s.push_str(&format!(
            "💾 State saved ({}); now at {at}. Run again to continue.\n",
            saved.place(id)
        ));
    }
    print_text(&s);
}

/// What a call that waits shows: an agent's question, or the request for a manual answer; how
/// to answer (`answer_with`: the command that takes the answer).
fn waiting_text(waiting: &dygram_runtime::session::Waiting, answer_with: &str) -> String {
    let req = &waiting.request;
    let node = req.get("node").and_then(Value::as_str).unwrap_or("?");
    if let Some(question) = waiting.question() {
        return format!(
            "⏸️  The agent at node {node} asks:\n  {question}\nAnswer with:\n  echo '<answer>' | {answer_with}\n"
        );
    }
    let tools: Vec<&str> = req
        .get("tools")
        .and_then(Value::as_array)
        .map(|t| {
            t.iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    format!(
        "⏸️  Waiting for LLM response at node {node}\nLLM REQUEST saved to {}\n  Tools: {}\nEXAMPLE RESPONSE:\n  {}\nAnswer with:\n  echo '<response>' | {answer_with}\n",
        waiting.file,
        tools.join(", "),
        waiting.example
    )
}
