//! `dygram execute`: run a machine to the end in one call.

use std::path::PathBuf;

use serde_json::Value;

use dygram::runtime::executor::{ExecutionEvent, Executor, Options, RuntimeError};
use dygram::runtime::state::{ExecutionState, PathStatus, Status};
use dygram::session::result::{run_to_end, write_result};

use super::client::{self, LlmArgs};
use super::generate::machine_json;
use super::{CliError, Exit, Verbosity, eprint_line, input, print_out};

/// Output formats of `execute`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExecFormat {
    /// The path taken and a summary.
    Text,
    /// The result object (the same as the result file).
    Json,
    /// Graphviz DOT of the machine with the path taken highlighted.
    Dot,
    /// Mermaid state diagram with the path taken highlighted.
    Mermaid,
}

/// Run a machine: to completion, or one turn per call with -i.
///
/// Nodes that need a decision ask the model (Anthropic by default, or an OpenAI-compatible
/// endpoint with --provider openai), or replay recorded answers with --playback DIR. Machines that
/// never need the model run without any key. The result is written to
/// <DEST>/<name>-result.json (DEST defaults to a `generated` folder beside the file).
///
/// With -i (or --step, --step-turn, --step-path) each call performs one unit of work on an
/// execution saved in .dygram/executions/<id>/ and exits: 0 more to do, 2 complete, 3 waiting
/// for an answer (no API key and no playback: answer the printed request on stdin next call),
/// 1 error. `dygram exec list|status|show|clean|rm` manage the saved executions. With
/// --store URL --id ID the execution lives in PostgreSQL instead, shared by every caller that
/// names it.
///
/// Examples:
///   dygram execute flow.dy
///   dygram e flow.dy --playback recordings/flow --format json
///   dygram e flow.dy --record recordings/flow -m claude-3-5-sonnet-latest
///   OPENAI_BASE_URL=http://127.0.0.1:8080/v1 dygram e flow.dy --provider openai
///   while dygram e -i flow.dy --playback recordings/flow; do :; done
///   echo '{"tools": [{"name": "transition_to_done", "input": {}}]}' | dygram e -i flow.dy --id review
///   dygram e -i flow.dy --id review --store postgresql://dygram@db.example.com/dygram
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct ExecuteArgs {
    /// The machine (.dy, .dygram, .mach, canonical .json), or - for standard input.
    pub file: PathBuf,
    #[command(flatten)]
    pub llm: LlmArgs,
    /// Folder for the result file (with -i: written when the execution ends).
    #[arg(short = 'd', long = "destination", value_name = "DIR")]
    pub destination: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ExecFormat,
    /// Do not follow imports.
    #[arg(long)]
    pub no_imports: bool,
    /// One turn per call: the execution is saved in .dygram/executions/<id>/ and the next call
    /// goes on (exit 0: more to do, 2: complete, 3: waiting for an answer on stdin, 1: error).
    #[arg(short = 'i', long)]
    pub interactive: bool,
    /// One step of every path per call (conversations with the model run to their end).
    #[arg(long, conflicts_with_all = ["step_turn", "step_path"])]
    pub step: bool,
    /// One LLM round trip (or one step without the model) per call; the same as -i.
    #[arg(long, conflicts_with = "step_path")]
    pub step_turn: bool,
    /// One step of one path per call, taking the active paths in turn.
    #[arg(long)]
    pub step_path: bool,
    /// The execution to create or resume (default: the last one).
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// Start a new execution even if one exists (an existing --id is moved aside, not deleted).
    #[arg(long)]
    pub force: bool,
    /// Take answers from the file queue .dygram/interactive-queue/: each request is written to
    /// requests/<id>.json and a responder writes responses/<id>.json (kept for later calls).
    #[arg(long, conflicts_with = "playback")]
    pub queue: bool,
    /// Seconds to wait for a queued answer.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub queue_timeout: u64,
    /// Share the execution through PostgreSQL (with -i and --id): callers in other folders or on
    /// other machines advance the same execution, one call at a time. Each call takes the
    /// execution's lease (exit 1 "in use" while another caller holds it), works on a private copy
    /// and saves it back; a call whose lease ran out and was taken over saves nothing (exit 1).
    /// URL: postgres://… or postgresql://…; see docs/dygram/store.md.
    #[arg(long, value_name = "URL", env = "DYGRAM_STORE", hide_env_values = true)]
    pub store: Option<String>,
    #[command(flatten)]
    pub verbosity: Verbosity,
}

/// One line for an event (stderr progress).
pub fn describe(event: &ExecutionEvent) -> String {
    match event {
        ExecutionEvent::Transition {
            path,
            from,
            to,
            reason,
        } => format!("[{path}] {from} --({reason})--> {to}"),
        ExecutionEvent::LlmCall {
            path,
            node,
            tools,
            messages,
            model,
        } => format!(
            "[{path}] asking {model} at {node} ({} message{}, tools: {})",
            messages,
            if *messages == 1 { "" } else { "s" },
            tools.join(", ")
        ),
        ExecutionEvent::ToolCall {
            path,
            name,
            is_error,
            result,
            ..
        } => {
            if *is_error {
                format!("[{path}]   tool {name} (failed: {})", tool_error(result))
            } else {
                format!("[{path}]   tool {name}")
            }
        }
        ExecutionEvent::Output { path, text } => {
            let short: String = text.chars().take(100).collect();
            let more = if text.chars().count() > 100 {
                "…"
            } else {
                ""
            };
            format!("[{path}]   model: {}{more}", short.replace('\n', " "))
        }
        ExecutionEvent::Spawned { path, node, parent } => {
            format!("[{parent}] started {path} at {node}")
        }
        ExecutionEvent::Completed { path, node } => format!("[{path}] completed at {node}"),
        ExecutionEvent::Failed { path, node, error } => {
            format!("[{path}] failed at {node}: {error}")
        }
        ExecutionEvent::Waiting { path, node, reason } => {
            format!("[{path}] waiting at {node}: {reason}")
        }
        ExecutionEvent::Compacted {
            path,
            node,
            answers,
            strategy,
            window,
            tokens_before,
            tokens_after,
        } => {
            let what = match strategy.as_str() {
                "summarize" => format!("{answers} answer(s) summarized"),
                "truncate" => format!("{answers} answer(s) left out"),
                _ => "long texts of the recent exchanges shortened".to_string(),
            };
            format!(
                "[{path}] compacted the conversation at {node} to fit the context window \
                 ({window} tokens): {what}, about {tokens_before} → {tokens_after} tokens"
            )
        }
    }
}

/// Why a tool call failed, from its result (`{"error": "…"}`), on one line of at most 300
/// characters.
pub fn tool_error(result: &str) -> String {
    let text = serde_json::from_str::<Value>(result)
        .ok()
        .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| result.to_string());
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 300 {
        format!("{}…", line.chars().take(300).collect::<String>())
    } else {
        line
    }
}

/// The path taken and the final summary.
pub fn text_report(state: &ExecutionState) -> String {
    let mut s = String::new();
    for p in &state.paths {
        s.push_str(&format!("Execution path ({}):\n", p.id));
        for t in &p.history {
            s.push_str(&format!("  {} --({})--> {}\n", t.from, t.transition, t.to));
        }
        if p.history.is_empty() {
            s.push_str(&format!("  (stayed at {})\n", p.current_node));
        }
    }
    s.push_str(&format!(
        "Status: {}\nSteps: {}\nVisited: {}\nErrors: {}\n",
        state.status().as_str(),
        state.metadata.step_count,
        state.visited_nodes_of_all_paths().join(", "),
        state.metadata.error_count
    ));
    for p in state
        .paths
        .iter()
        .filter(|p| p.status == PathStatus::Failed)
    {
        s.push_str(&format!(
            "Error: {} failed at {}: {}\n",
            p.id,
            p.current_node,
            p.error.as_deref().unwrap_or("unknown error")
        ));
    }
    s
}

/// Highlighted diagram of the execution (DOT, or Mermaid).
pub fn diagram(format: ExecFormat, state: &ExecutionState) -> String {
    match format {
        ExecFormat::Mermaid => dygram::render::execution::to_mermaid(state),
        _ => dygram::render::execution::to_dot(state),
    }
}

pub fn run(args: ExecuteArgs) -> Result<Exit, CliError> {
    if args.interactive
        || args.step
        || args.step_turn
        || args.step_path
        || args.id.is_some()
        || args.queue
    {
        return super::interactive::run(args);
    }
    if args.force {
        return Err(
            CliError::usage("--force only applies to stateful execution")
                .hint("add -i (one turn per call), or leave --force out"),
        );
    }
    let input = input::read(&args.file, true)?;
    let Some(machine) = machine_json(&input, args.no_imports, false, args.verbosity)? else {
        return Err(super::invalid_machine());
    };
    let llm_client = client::build(&args.llm)?;
    let options = Options {
        model: args.llm.model.clone(),
        default_model: client::default_model(args.llm.provider),
        max_tokens: args.llm.max_tokens.unwrap_or(4096),
        ..Options::default()
    };
    let mut executor = Executor::start(machine, llm_client.as_deref(), options).map_err(|e| {
        CliError::new(e.to_string()).hint("name a node `start`, or annotate one @start")
    })?;
    let quiet = args.verbosity.quiet;
    if !quiet {
        eprint_line(&format!("executing {}", input.name()));
    }
    let failure = run_to_end(&mut executor, |event| {
        if !quiet {
            eprint_line(&describe(&event));
        }
    });
    let state = executor.into_state();
    let dest = args.destination.clone().unwrap_or_else(|| {
        input
            .path
            .as_ref()
            .and_then(|p| p.parent())
            .map(|p| p.join("generated"))
            .unwrap_or_else(|| PathBuf::from("generated"))
    });
    let written = write_result(
        &dest,
        &input.stem(),
        &state,
        failure.as_ref(),
        &super::secrets(),
    )
    .map_err(|e| CliError::new(e.to_string()))?;
    match args.format {
        ExecFormat::Json => print_out(&written.text),
        ExecFormat::Text => {
            print_out(&text_report(&state));
            print_out(&format!("Result: {}\n", written.file.display()));
        }
        other => print_out(&diagram(other, &state)),
    }
    if let Some(e) = failure {
        let (hint, kind) = match &e {
            RuntimeError::NoClient { .. } => (
                Some(client::missing_client_hint(args.llm.provider)),
                "missing_api_key",
            ),
            _ => (None, "failed"),
        };
        let mut err = CliError::new(e.to_string()).kind(kind);
        if let Some(h) = hint {
            err = err.hint(h);
        }
        return Err(err);
    }
    if state.status() == Status::Complete {
        return Ok(Exit::Ok);
    }
    for p in state
        .paths
        .iter()
        .filter(|p| p.status == PathStatus::Failed)
    {
        eprint_line(&format!(
            "error: {} failed at node {}: {}",
            p.id,
            p.current_node,
            p.error.as_deref().unwrap_or("unknown error")
        ));
    }
    Ok(Exit::Failed)
}
