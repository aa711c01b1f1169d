//! `dygram execute`: run a machine to the end in one call.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use dygram_runtime::executor::{ExecutionEvent, Executor, Options, RuntimeError};
use dygram_runtime::session::result::{
    Written, run_to_end, stream_finished, stream_line, stream_started, write_result,
};
use dygram_runtime::state::{ExecutionState, PathStatus, Status};

use super::client::{self, LlmArgs};
use super::generate::machine_json;
use super::live::{Live, Shows};
use super::{CliError, Exit, Verbosity, eprint_line, input, print_out};
use cli_edge::ExitStatus;

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
    /// One JSON object per line as the run goes (run_started, model_request, model_text,
    /// tool_started, tool_finished, transition, …, run_finished with the result object); one-shot
    /// runs only.
    #[value(name = "stream-json")]
    StreamJson,
}

/// Run a machine: to completion, or one turn per call with -i.
///
/// Nodes that need a decision ask the model (Anthropic by default, or an OpenAI-compatible
/// endpoint with --provider openai), or replay recorded answers with --playback DIR. Machines that
/// never need the model run without any key. The result is written to
/// <DEST>/<name>-result.json (DEST defaults to a `generated` folder beside the file).
///
/// With -i (or --step, --step-turn, --step-path) each call performs one unit of work on an
/// execution saved in .dygram/executions/<id>/ and exits: 0 more to do, 2 complete, 101 waiting
/// for an answer (no API key and no playback: answer the printed request on stdin next call),
/// 1 error. `dygram exec list|status|show|clean|rm` manage the saved executions. With
/// --store URL --id ID the execution lives in PostgreSQL instead, shared by every caller that
/// names it.
///
/// A task annotated @Agent("path/to/agent") runs that delta agent, one model turn per call (-i):
/// its run is kept in .dygram/executions/<id>/agents/<node>/, its question waits (exit 101) for
/// the answer on stdin, and --record/--playback cover its answers (docs/dygram/execution.md).
///
/// Examples:
///   dygram execute flow.dy
///   dygram e flow.dy --playback recordings/flow --format json
///   dygram e flow.dy --playback recordings/flow --format stream-json | jq -c 'select(.type == "model_text")'
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
    /// goes on (exit 0: more to do, 2: complete, 101: waiting for an answer on stdin, 1: error).
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
    /// The execution to create or resume (default: the most recent execution of FILE, else a new
    /// one).
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
    /// Share the execution through a store (with -i and --id): callers in other folders or on
    /// other machines advance the same execution, one call at a time. Each call takes the
    /// execution's lease (exit 1 "in use" while another caller holds it), works on a private copy
    /// and saves it back; a call whose lease ran out and was taken over saves nothing (exit 1).
    /// URL: postgres://… or postgresql://… (PostgreSQL), or file:///path (a folder every caller
    /// reaches); see docs/dygram/store.md.
    #[arg(long, value_name = "URL", env = "DYGRAM_STORE", hide_env_values = true)]
    pub store: Option<String>,
    #[command(flatten)]
    pub verbosity: Verbosity,
}

/// One line for an event (stderr progress); none for a tool starting (its line comes when it
/// has answered).
pub fn describe(event: &ExecutionEvent) -> Option<String> {
    Some(match event {
        ExecutionEvent::ToolStarted { .. } | ExecutionEvent::TextDelta { .. } => return None,
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
        ExecutionEvent::AgentTurn {
            path,
            node,
            run,
            run_dir,
            iterations,
            status,
        } => format!(
            "[{path}] agent at {node}: run {run} {status} after {iterations} turn(s) (delta show -w {} --run-id {run})",
            workspace_of(run_dir)
        ),
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
    })
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
        ExecFormat::Mermaid => dygram_runtime::outputs::execution::to_mermaid(state),
        _ => dygram_runtime::outputs::execution::to_dot(state),
    }
}

pub fn run(args: ExecuteArgs) -> Result<Exit, CliError> {
    super::interrupt::stop_on_signals(match args.format {
        ExecFormat::Json => super::interrupt::Reporting::Json,
        ExecFormat::StreamJson => super::interrupt::Reporting::Stream,
        _ => super::interrupt::Reporting::Text,
    })?;
    if args.interactive
        || args.step
        || args.step_turn
        || args.step_path
        || args.id.is_some()
        || args.queue
    {
        if args.format == ExecFormat::StreamJson {
            let e = CliError::usage("--format stream-json is for runs to the end (without -i)")
                .hint("use --format json with -i: one object per call");
            print_out(&stream_line(stream_finished(e.exit().code(), e.to_json())));
            return Err(e);
        }
        return super::interactive::run(args);
    }
    if args.force {
        return Err(
            CliError::usage("--force only applies to stateful execution")
                .hint("add -i (one turn per call), or leave --force out"),
        );
    }
    let finished = run_once(&args);
    if args.format == ExecFormat::StreamJson {
        // The stream ends with its result line, also when the run could not start.
        let (code, result) = match &finished {
            Ok(f) => (f.exit_code(), f.written.value.clone()),
            Err(e) => (e.exit().code(), e.to_json()),
        };
        print_out(&stream_line(stream_finished(code, result)));
    }
    let finished = finished?;
    match args.format {
        ExecFormat::Json => print_out(&finished.written.text),
        ExecFormat::Text => {
            super::print_text(&text_report(&finished.state));
            print_out(&format!("Result: {}\n", finished.written.file.display()));
        }
        ExecFormat::StreamJson => {}
        other => print_out(&diagram(other, &finished.state)),
    }
    finished.end()
}

/// A run to the end: its state, its result file, and the error that stopped it outside the
/// machine (the model could not be asked).
struct Finished {
    state: ExecutionState,
    written: Written,
    failure: Option<CliError>,
}

impl Finished {
    fn exit_code(&self) -> u8 {
        let ok = self.failure.is_none() && self.state.status() == Status::Complete;
        if ok { Exit::Ok } else { Exit::Failed }.code()
    }

    /// The exit, with the failed paths on stderr.
    fn end(self) -> Result<Exit, CliError> {
        if let Some(e) = self.failure {
            return Err(e);
        }
        if self.state.status() == Status::Complete {
            return Ok(Exit::Ok);
        }
        for p in self
            .state
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
}

/// Compiles, connects, runs the machine to its end and writes the result file; with
/// `--format stream-json` each event goes to stdout as it happens.
fn run_once(args: &ExecuteArgs) -> Result<Finished, CliError> {
    let input = input::read(&args.file, true)?;
    let Some(machine) = machine_json(&input, args.no_imports, false, args.verbosity)? else {
        return Err(super::invalid_machine());
    };
    let quiet = args.verbosity.quiet;
    let paint = super::paint();
    let live = (!quiet).then(|| Live::start(Shows::now(paint, true)));
    let llm_client = client::build(&args.llm, live.as_ref().map(Live::retry_hook))?;
    let options = Options {
        model: args.llm.model.clone(),
        default_model: client::default_model(args.llm.provider),
        max_tokens: args.llm.max_tokens.unwrap_or(4096),
        stream: live.as_ref().is_some_and(|l| l.streams()),
        ..Options::default()
    };
    let mut executor = Executor::start(machine, llm_client.as_deref(), options).map_err(|e| {
        CliError::new(e.to_string())
            .kind("invalid_machine")
            .hint("name a node `start`, or annotate one @start")
    })?;
    let stream_json = args.format == ExecFormat::StreamJson;
    if stream_json {
        print_out(&stream_line(stream_started(&input.name())));
    }
    if !quiet {
        eprint_line(&paint.blue(&format!("executing {}", input.name())));
    }
    listen(&mut executor, stream_json, live.clone());
    // The listener shows each event as it happens.
    let failure = run_to_end(&mut executor, |_| {});
    if let Some(live) = &live {
        live.finish();
    }
    let state = executor.into_state();
    let dest = args
        .destination
        .clone()
        .unwrap_or_else(|| result_folder(&input));
    let written = write_result(
        &dest,
        &input.stem(),
        &state,
        failure.as_ref(),
        &super::secrets(),
    )
    .map_err(|e| CliError::new(e.to_string()))?;
    let failure = failure.map(|e| run_error(&e, args));
    Ok(Finished {
        state,
        written,
        failure,
    })
}

/// Where the result file goes without -d: `generated/` beside the machine.
fn result_folder(input: &input::Input) -> PathBuf {
    input
        .path
        .as_ref()
        .and_then(|p| p.parent())
        .map(|p| p.join("generated"))
        .unwrap_or_else(|| PathBuf::from("generated"))
}

/// Each event, as it happens: a line on stdout with `--format stream-json` (not the pieces of
/// streamed text: `output` carries the whole), and the live display on stderr.
fn listen(executor: &mut Executor<'_>, stream_json: bool, live: Option<Arc<Live>>) {
    executor.listen(Box::new(move |event| {
        if stream_json && !matches!(event, ExecutionEvent::TextDelta { .. }) {
            print_out(&stream_line(event.to_json()));
        }
        if let Some(live) = &live {
            live.event(event);
        }
    }));
}

/// The error of a run stopped outside the machine.
fn run_error(e: &RuntimeError, args: &ExecuteArgs) -> CliError {
    match e {
        RuntimeError::NoClient { .. } => CliError::new(e.to_string())
            .kind("missing_api_key")
            .hint(client::missing_client_hint(args.llm.provider)),
        RuntimeError::NoAgents { .. } => CliError::new(e.to_string())
            .kind("agent")
            .hint("run it with dygram execute -i, one agent turn per call (while dygram e -i FILE; do :; done)"),
        _ => CliError::new(e.to_string()),
    }
}

/// The workspace of a delta run folder (`<workspace>/.delta/<run>`), as `delta show -w` takes it.
fn workspace_of(run_dir: &str) -> String {
    let dir = std::path::Path::new(run_dir);
    dir.parent()
        .and_then(std::path::Path::parent)
        .map_or_else(|| run_dir.to_string(), |w| w.display().to_string())
}
