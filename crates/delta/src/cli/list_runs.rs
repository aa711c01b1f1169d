//! `delta list-runs`.

use clap::Args;
use delta::metadata::RunStatus;
use delta::runs::{self, RunSummary};
use delta::transcript::{self, Outcome};
use serde_json::{Value, json};

use super::result::Format;
use super::{CliError, WorkspaceArg, eprint_line, print_out, print_text};

/// List the runs of a workspace, newest first.
///
/// A RUNNING run whose process has died is shown as INTERRUPTED (crashed).
///
/// Examples:
///   delta list-runs -w ./ws
///   delta list-runs -w ./ws --resumable --first --format raw    # the id of the newest resumable run
///   delta list-runs -w ./ws --format json
///   delta list-runs --store postgres://db/delta --format json   # the runs of a store
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ListRunsArgs {
    #[command(flatten)]
    workspace: WorkspaceArg,

    /// List the runs of this store (a PostgreSQL URL; also DELTA_STORE) instead of a workspace's.
    /// Their status may also be QUEUED (no worker has started it yet) or NOT_STARTED.
    #[arg(
        long,
        value_name = "URL",
        env = "DELTA_STORE",
        conflicts_with = "resumable"
    )]
    store: Option<String>,

    /// Only runs with this status (RUNNING, WAITING_FOR_INPUT, COMPLETED, FAILED, INTERRUPTED).
    #[arg(long, value_name = "STATUS")]
    status: Option<String>,

    /// Only runs that stopped before they finished: INTERRUPTED (`delta continue` resumes it as it
    /// is) or WAITING_FOR_INPUT (`delta continue -m ANSWER` answers its question).
    #[arg(long)]
    resumable: bool,

    /// Only the newest: its id (text, raw) or its object (json).
    #[arg(long)]
    first: bool,

    /// text: a block per run; json: an array of objects; raw: one run id per line.
    #[arg(long, value_enum, default_value = "text", hide_possible_values = true)]
    format: Format,
}

/// The final answer, the pending question and the error that failed the run: whichever it has.
fn outcome(s: &RunSummary) -> (Option<String>, Option<String>, Option<String>) {
    match transcript::outcome(&s.run, s.status) {
        Some(Outcome::Answer(a)) => (Some(a), None, None),
        Some(Outcome::Question(q)) => (None, Some(q), None),
        Some(Outcome::Error(e)) => (None, None, Some(e)),
        None => (None, None, None),
    }
}

/// `text` on one line of at most `limit` characters.
fn one_line(text: &str, limit: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > limit {
        format!("{}...", flat.chars().take(limit).collect::<String>())
    } else {
        flat
    }
}

/// A run as `--format json` gives it (and `delta mcp`'s `list_runs`).
pub fn to_json(s: &RunSummary) -> Value {
    let m = &s.metadata;
    let (answer, question, error) = outcome(s);
    json!({
        "final_answer": answer,
        "pending_question": question,
        "error": error,
        "run_id": m.run_id,
        "status": s.status.as_str(),
        "crashed": s.crashed,
        "damaged": s.damaged,
        "start_time": m.start_time,
        "end_time": m.end_time,
        "task": m.task,
        "iterations_completed": m.iterations_completed,
        "agent_ref": m.agent_ref,
        "usage": m.usage,
        "forked_from": m.extra.get("forked_from"),
    })
}

pub fn cmd_list_runs(args: ListRunsArgs) -> Result<(), CliError> {
    if let Some(url) = &args.store {
        return super::fleet::list_in_store(url, args.status.as_deref(), args.first, args.format);
    }
    let wanted = match &args.status {
        Some(s) => Some(RunStatus::parse(s).ok_or_else(|| {
            CliError::usage(format!("unknown status {s:?}"))
                .hint("use RUNNING, WAITING_FOR_INPUT, COMPLETED, FAILED or INTERRUPTED")
        })?),
        None => None,
    };
    let ws = args.workspace.existing()?;
    let mut list: Vec<RunSummary> = runs::list(&ws)
        .map_err(super::store_error)?
        .into_iter()
        .filter(|r| wanted.is_none_or(|w| r.status == w))
        .filter(|r| !args.resumable || r.status.is_resumable())
        .collect();
    if args.first {
        list.truncate(1);
        return match (list.first(), args.format) {
            (None, Format::Json) => {
                print_out("null\n");
                Ok(())
            }
            (None, _) => Err(CliError::new("no matching run")),
            (Some(r), Format::Json) => {
                print_out(&format!("{}\n", to_json(r)));
                Ok(())
            }
            (Some(r), _) => {
                print_out(&format!("{}\n", r.run.run_id));
                Ok(())
            }
        };
    }
    match args.format {
        Format::Json => print_out(&format!(
            "{}\n",
            Value::Array(list.iter().map(to_json).collect())
        )),
        Format::Raw => print_out(
            &list
                .iter()
                .map(|r| format!("{}\n", r.run.run_id))
                .collect::<String>(),
        ),
        Format::Text => {
            if list.is_empty() {
                eprint_line("No runs found.");
            }
            print_text(&list.iter().map(text_block).collect::<String>());
        }
    }
    Ok(())
}

/// A run as `--format text` shows it: a rule, then a line per fact.
fn text_block(r: &RunSummary) -> String {
    let m = &r.metadata;
    let task: String = m.task.chars().take(60).collect();
    let ellipsis = if m.task.chars().count() > 60 {
        "..."
    } else {
        ""
    };
    let crashed = if r.crashed { " (crashed)" } else { "" };
    let mut out = format!(
        "{}\nRun ID:     {}\nStatus:     {}{crashed}\nStart Time: {}\nEnd Time:   {}\nIterations: {}\nTask:       {task}{ellipsis}\n",
        "-".repeat(80),
        m.run_id,
        r.status,
        m.start_time,
        m.end_time.as_deref().unwrap_or("-"),
        m.iterations_completed,
    );
    match outcome(r) {
        (Some(answer), _, _) => {
            out.push_str(&format!("Answer:     {}\n", one_line(&answer, 100)));
        }
        (_, Some(question), _) => {
            out.push_str(&format!("Question:   {}\n", one_line(&question, 100)));
        }
        (_, _, Some(error)) => out.push_str(&format!("Error:      {}\n", one_line(&error, 100))),
        _ => {}
    }
    if let Some(damage) = &r.damaged {
        out.push_str(&format!("Damaged:    {damage}; shown from the journal\n"));
    }
    out
}
