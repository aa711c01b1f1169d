//! `delta run`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::Args;
use delta::agent::{self, Agent, AgentError};
use delta::connect::{self, LlmMode};
use delta::engine::{Engine, EngineSetup, HumanInput, RunOutcome, response_path};
use delta::env::Env;
use delta::metadata::RunStatus;
use delta::{session, workspace};
use store::{Clock, IdSource};

use super::console::Console;
use super::result::{self, Format, ResultContext};
use super::terminal::{self, TerminalHuman};
use super::{CliError, Exit, TEST_NOW_VAR, TEST_SEED_VAR, eprint_line, print_out};

/// Run an agent on a task.
///
/// Progress goes to stderr; the result (per --format) goes to stdout. Without -w, the run gets a
/// workspace under <agent>/workspaces: the next Wnnn with -y, or one chosen from a menu on a terminal.
///
/// Examples:
///   delta run --agent ./my-agent -m "Summarise notes.txt" -y
///   delta run -m "Create hello.txt" -w ./ws --format json
///   delta run --agent examples/hello-world -m "Say hi" -w /tmp/ws --playback examples/hello-world/recordings
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct RunArgs {
    /// Agent folder (agent.yaml, system_prompt.md, ...).
    #[arg(short = 'a', long, value_name = "PATH", default_value = ".")]
    agent: PathBuf,

    /// The task or message for the agent.
    #[arg(short = 'm', long, value_name = "TEXT")]
    message: Option<String>,

    /// Workspace folder: where tools run and the run is journaled (created if missing).
    #[arg(short = 'w', long = "work-dir", value_name = "PATH")]
    work_dir: Option<PathBuf>,

    /// Iteration budget (default: the agent's max_iterations, else 30).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_iterations: Option<u32>,

    /// Show loaded tools, hook runs and other details on stderr.
    #[arg(short, long)]
    verbose: bool,

    /// Answer ask_human questions on the terminal instead of pausing the run.
    #[arg(short, long)]
    interactive: bool,

    /// Without -w: create the next workspace (Wnnn) without asking.
    #[arg(short = 'y', long)]
    yes: bool,

    /// What to print on stdout when the run stops.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,

    /// Keep every LLM exchange as DIR/turn-<n>.json (for --playback later).
    #[arg(long, value_name = "DIR", conflicts_with = "playback")]
    record: Option<PathBuf>,

    /// Answer from recordings in DIR instead of calling an LLM (offline, deterministic).
    #[arg(long, value_name = "DIR")]
    playback: Option<PathBuf>,

    /// Removed in v1.8: use -m/--message.
    #[arg(long, hide = true, value_name = "TEXT")]
    task: Option<String>,
}

/// Turns an agent loading error into a CLI error.
pub fn agent_error(err: AgentError) -> CliError {
    let hint = err.hint();
    CliError::new(err.to_string()).maybe_hint(hint)
}

/// The test hooks: pinned clock and seeded ids.
pub fn clock_and_ids() -> Result<(Clock, IdSource), CliError> {
    let clock = Clock::from_env(TEST_NOW_VAR).map_err(|e| CliError::new(e.to_string()))?;
    let ids = IdSource::from_env(TEST_SEED_VAR).map_err(|e| CliError::new(e.to_string()))?;
    Ok((clock, ids))
}

/// Where the run will live: the folder, and its name under `workspaces/` (for LAST_USED) when it is one
/// of the agent's numbered workspaces. Nothing is created yet.
fn resolve_workspace(args: &RunArgs, agent: &Agent) -> Result<(PathBuf, Option<String>), CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::new(format!("cannot read the current folder: {e}")))?;
    if let Some(dir) = &args.work_dir {
        return Ok((cwd.join(dir), None));
    }
    let root = workspace::workspaces_root(&agent.dir);
    let name = if args.yes {
        workspace::next_id(&root)
    } else if std::io::stdin().is_terminal() {
        terminal::choose_workspace(&root, &AtomicBool::new(false))?
    } else {
        return Err(CliError::usage("no workspace chosen (stdin is not a terminal, so no menu)")
            .hint("pass -w PATH to use or create a workspace folder, or -y to create the next workspaces/Wnnn"));
    };
    Ok((root.join(&name), Some(name)))
}

/// Creates the workspace (once the run is sure to start) and records it as last used.
fn create_workspace(path: &Path, name: Option<&str>, agent: &Agent) -> Result<PathBuf, CliError> {
    if !path.exists() {
        match name {
            Some(n) => eprint_line(&format!("Creating new workspace: {n}")),
            None => eprint_line(&format!("Created work directory: {}", path.display())),
        }
    }
    let ws = workspace::prepare(path)?;
    if let Some(n) = name {
        workspace::set_last_used(&workspace::workspaces_root(&agent.dir), n)?;
    }
    Ok(ws)
}

fn llm_mode(args: &RunArgs) -> LlmMode {
    match (&args.record, &args.playback) {
        (_, Some(dir)) => LlmMode::Playback(dir.clone()),
        (Some(dir), None) => LlmMode::Record(dir.clone()),
        (None, None) => LlmMode::Live,
    }
}

/// Prints what a stopped run means and how to go on (stderr), then the result (stdout).
pub fn finish(
    outcome: &RunOutcome,
    agent: &Agent,
    workspace: &Path,
    run: &delta::workspace::RunDir,
    format: Format,
) -> Exit {
    let ws = workspace.display().to_string();
    match outcome.status {
        RunStatus::Completed => eprint_line("\n✨ Agent completed successfully."),
        RunStatus::Failed => eprint_line(&format!(
            "\nerror: the run failed: {}",
            outcome.error.as_deref().unwrap_or("unknown error")
        )),
        RunStatus::WaitingForInput => {
            eprint_line("\n🔔 Agent paused and is waiting for your input.");
            if let Some(i) = &outcome.interaction {
                eprint_line(&format!("   Prompt: {}", i.prompt));
            }
            eprint_line(&format!(
                "   Answer with: delta continue -w {ws} -m \"<your answer>\""
            ));
            eprint_line(&format!(
                "   (or write it to {} and run: delta continue -w {ws})",
                response_path(run).display()
            ));
        }
        RunStatus::Interrupted => {
            eprint_line("\nRun interrupted.");
            eprint_line(&format!("   Resume with: delta continue -w {ws}"));
        }
        RunStatus::Running => {}
    }
    eprint_line(&format!("   Journal: {}", run.journal().display()));
    let response_file = response_path(run).display().to_string();
    let ctx = ResultContext {
        agent_name: &agent.name,
        model: agent.llm.model.as_deref(),
        workspace: &ws,
        response_file: &response_file,
    };
    print_out(&result::render(format, outcome, &ctx));
    match outcome.status {
        RunStatus::Completed => Exit::Ok,
        RunStatus::WaitingForInput => Exit::Waiting,
        RunStatus::Interrupted => Exit::Interrupted,
        RunStatus::Failed | RunStatus::Running => Exit::Error,
    }
}

/// Prints the notices of loading an agent.
pub fn show_agent(agent: &Agent, verbose: bool) {
    for w in &agent.warnings {
        eprint_line(&format!("warning: {w}"));
    }
    if verbose {
        eprint_line("Loaded tools:");
        for t in &agent.tools {
            eprint_line(&format!("  - {}: {}", t.name, t.display_command()));
        }
    }
}

/// The retry notice printer handed to the LLM client.
pub fn retry_printer() -> llm::RetryHook {
    Arc::new(|n: &llm::RetryNotice| {
        eprint_line(&format!(
            "⏳ LLM request failed ({}); retrying in {:.1} s (attempt {} of {})",
            n.error,
            n.delay.as_secs_f64(),
            n.attempt + 1,
            n.max_attempts
        ));
    })
}

pub fn cmd_run(args: RunArgs) -> Result<Exit, CliError> {
    if args.task.is_some() {
        return Err(CliError::usage("--task was replaced by -m/--message")
            .hint("delta run --agent <path> -m \"your task\""));
    }
    let Some(message) = args.message.clone().filter(|m| !m.trim().is_empty()) else {
        return Err(
            CliError::usage("missing -m/--message: what should the agent do?")
                .hint("delta run --agent <path> -m \"your task\""),
        );
    };
    let (clock, ids) = clock_and_ids()?;
    let agent = agent::load(&args.agent).map_err(agent_error)?;
    show_agent(&agent, args.verbose);
    let (ws_path, ws_name) = resolve_workspace(&args, &agent)?;

    // .env files first (the workspace's may hold the key), then the key check, then create things.
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut env = Env::from_process();
    env.load_cascade(&ws_path, &agent.dir, &cwd)
        .map_err(|e| CliError::new(e.to_string()))?;
    let conn = connect::connect(
        &agent.llm,
        &env,
        &llm_mode(&args),
        Some(retry_printer()),
        clock,
        ids_clone(&ids),
    )
    .map_err(|e| {
        let hint = e.hint();
        CliError::new(e.to_string()).maybe_hint(hint)
    })?;
    for notice in &conn.notices {
        eprint_line(&format!("note: {notice}"));
    }
    let ws = create_workspace(&ws_path, ws_name.as_deref(), &agent)?;

    let session = session::create(&agent, &ws, &message, clock, &ids, "delta run")?;
    let max_iterations = args.max_iterations.unwrap_or(agent.max_iterations);
    eprint_line("Starting delta...");
    eprint_line(&format!(
        "  Agent:          {} {} ({})",
        agent.name,
        agent.version,
        agent.dir.display()
    ));
    eprint_line(&format!("  Work directory: {}", ws.display()));
    eprint_line(&format!("  Run ID:         {}", session.run.run_id));
    eprint_line(&format!(
        "  Model:          {} via {}",
        agent.llm.model.as_deref().unwrap_or("(server default)"),
        conn.endpoint
    ));
    eprint_line(&format!("  Tools:          {}", agent.tools.len()));
    eprint_line(&format!("  Max iterations: {max_iterations}"));
    for file in &env.loaded_files {
        eprint_line(&format!("  Environment:    {}", file.display()));
    }

    let interrupt = terminal::install_signal_handlers()?;
    let run_dir = session.run.clone();
    let setup = EngineSetup {
        agent: agent.clone(),
        run: session.run.clone(),
        env,
        client: conn.client,
        max_iterations,
        interactive: args.interactive,
        clock,
        ids,
        secrets: conn.secrets,
        interrupt: Arc::clone(&interrupt),
    };
    let mut console = Console {
        verbose: args.verbose,
    };
    let mut human = TerminalHuman {
        interrupt: Arc::clone(&interrupt),
    };
    let human_ref: Option<&mut dyn HumanInput> = if args.interactive {
        Some(&mut human)
    } else {
        None
    };
    let mut engine = Engine::new(setup, session.metadata.clone(), &mut console, human_ref)
        .map_err(|e| CliError::new(e.to_string()))?;
    let outcome = engine.run(None).map_err(|e| CliError::new(e.to_string()))?;
    drop(engine);
    let code = finish(&outcome, &agent, &ws, &run_dir, args.format);
    drop(session.lock);
    Ok(code)
}

/// A second id source continuing the same deterministic sequence family (recorder request ids).
fn ids_clone(ids: &IdSource) -> IdSource {
    IdSource::seeded(ids.next_u64())
}
