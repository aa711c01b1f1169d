//! `delta run`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use delta::agent::{self, Agent, AgentError};
use delta::connect::{self, LlmMode};
use delta::engine::{Engine, EngineSetup, HumanInput, RunOutcome, response_path};
use delta::env::Env;
use delta::metadata::RunStatus;
use delta::resume::{Decision, RunInWorkspace};
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
///   delta run -a ./agent -m "Say hi" -w ./ws --playback ./agent/recordings
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

    /// Id for the new run (letters, digits, '-', '_', '.'); refused if the workspace has it already.
    #[arg(long, value_name = "ID")]
    run_id: Option<String>,

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
        terminal::choose_workspace(&root, &*terminal::install_signal_handlers()?)?
    } else {
        return Err(CliError::usage("no workspace chosen (stdin is not a terminal, so no menu)")
            .hint("pass -w PATH to use or create a workspace folder, or -y to create the next workspaces/Wnnn"));
    };
    Ok((root.join(&name), Some(name)))
}

/// Creates the workspace (once the run is sure to start) and records it as last used. With `-y` the
/// next numbered workspace is claimed now: another `delta run -y` may have taken the one named at first.
fn create_workspace(
    path: &Path,
    name: Option<&str>,
    agent: &Agent,
    fresh: bool,
) -> Result<PathBuf, CliError> {
    let root = workspace::workspaces_root(&agent.dir);
    let (ws, name) = if fresh {
        let (n, ws) = workspace::create_next(&root)?;
        eprint_line(&format!("Creating new workspace: {n}"));
        (ws, Some(n))
    } else {
        if !path.exists() {
            match name {
                Some(n) => eprint_line(&format!("Creating new workspace: {n}")),
                None => eprint_line(&format!("Created work directory: {}", path.display())),
            }
        }
        (workspace::prepare(path)?, name.map(str::to_string))
    };
    if let Some(n) = &name {
        workspace::set_last_used(&root, n)?;
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
    priced: bool,
) -> Exit {
    let ws = workspace.display().to_string();
    match outcome.status {
        RunStatus::Completed => match outcome.reason {
            None => eprint_line("\n✨ Agent completed successfully."),
            Some(reason) => eprint_line(&format!(
                "\n⚠️  Agent completed without a final answer: {}.",
                reason.describe()
            )),
        },
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
        priced,
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

/// Connects to the model for `agent`.
pub fn connect_llm(
    agent: &Agent,
    env: &Env,
    mode: &LlmMode,
    clock: Clock,
    ids: &IdSource,
) -> Result<connect::Connection, CliError> {
    let conn = connect::connect(
        &agent.llm,
        env,
        mode,
        Some(retry_printer()),
        clock,
        ids_clone(ids),
    )
    .map_err(|e| {
        let hint = e.hint();
        CliError::new(e.to_string()).maybe_hint(hint)
    })?;
    for notice in &conn.notices {
        eprint_line(&format!("note: {notice}"));
    }
    Ok(conn)
}

/// Everything needed to run the loop on a run (new or resumed).
pub struct Launch {
    pub agent: Agent,
    pub workspace: PathBuf,
    pub run: delta::workspace::RunDir,
    pub metadata: delta::metadata::RunMetadata,
    pub workspace_lock: store::RunLock,
    pub lock: store::RunLock,
    pub env: Env,
    pub conn: connect::Connection,
    pub max_iterations: u32,
    pub interactive: bool,
    pub verbose: bool,
    pub format: Format,
    /// Appended as a user message after the resume settled pending calls.
    pub message: Option<String>,
    /// Crash-recovery note.
    pub recovered: Option<String>,
    pub clock: Clock,
    pub ids: IdSource,
    pub resuming: bool,
}

/// Runs the loop and reports the outcome.
pub fn launch(l: Launch) -> Result<Exit, CliError> {
    delta::runs::remember_workspace(&l.workspace);
    if l.resuming {
        // A run whose process died still says RUNNING on disk; it is resumed as INTERRUPTED.
        let status = match l.recovered {
            Some(_) => RunStatus::Interrupted,
            None => l.metadata.status,
        };
        eprint_line(&format!("Resuming run {} ({status})...", l.run.run_id));
    } else {
        eprint_line("Starting delta...");
    }
    eprint_line(&format!(
        "  Agent:          {} {} ({})",
        l.agent.name,
        l.agent.version,
        l.agent.dir.display()
    ));
    eprint_line(&format!("  Work directory: {}", l.workspace.display()));
    eprint_line(&format!("  Run ID:         {}", l.run.run_id));
    eprint_line(&format!(
        "  Model:          {} via {}",
        l.agent.llm.model.as_deref().unwrap_or("(server default)"),
        l.conn.endpoint
    ));
    eprint_line(&format!("  Tools:          {}", l.agent.tools.len()));
    eprint_line(&format!("  Max iterations: {}", l.max_iterations));
    for file in &l.env.loaded_files {
        eprint_line(&format!("  Environment:    {}", file.display()));
    }
    if let Some(note) = &l.recovered {
        eprint_line(&format!("warning: {note}; it is resumed as INTERRUPTED"));
    }

    l.conn
        .bind_run(&l.run)
        .map_err(|e| CliError::new(e.to_string()))?;
    let interrupt = terminal::install_signal_handlers()?;
    // Replayed answers cost nothing: a playback run has no cost.
    let priced = l.conn.playback.is_none();
    let setup = EngineSetup {
        agent: l.agent.clone(),
        run: l.run.clone(),
        env: l.env,
        client: l.conn.client,
        max_iterations: l.max_iterations,
        interactive: l.interactive,
        clock: l.clock,
        ids: l.ids,
        redactor: l.conn.redactor.clone(),
        interrupt: Arc::clone(&interrupt),
        recovered: l.recovered.clone(),
        resuming: l.resuming,
    };
    let mut console = Console { verbose: l.verbose };
    let mut human = TerminalHuman {
        interrupt: Arc::clone(&interrupt),
    };
    let human_ref: Option<&mut dyn HumanInput> = if l.interactive {
        Some(&mut human)
    } else {
        None
    };
    let mut engine = Engine::new(setup, l.metadata.clone(), &mut console, human_ref)
        .map_err(|e| CliError::new(e.to_string()))?;
    let outcome = engine
        .run(l.message.as_deref())
        .map_err(|e| CliError::new(e.to_string()))?;
    // `run` has flushed every record. The process ends right after this, so the engine's memory is
    // left to the operating system: freeing a long run's events one by one costs about 1 ms per
    // 10 000 events (resume benchmark).
    std::mem::forget(engine);
    let code = finish(&outcome, &l.agent, &l.workspace, &l.run, l.format, priced);
    drop(l.lock);
    drop(l.workspace_lock);
    Ok(code)
}

/// Renders a failure to take a run (or its workspace) over.
pub fn busy_error(err: delta::runs::OpenError, ws: &Path) -> CliError {
    match err {
        delta::runs::OpenError::Busy { holder, .. } => CliError::new(format!(
            "Run is currently executing ({}). Wait for completion or interrupt first.",
            holder.map_or_else(|| "another process".to_string(), |h| h.describe())
        ))
        .hint(format!(
            "one delta process works in a workspace at a time; watch it with: delta list-runs -w {}",
            ws.display()
        ))
        .code(Exit::Busy),
        delta::runs::OpenError::NotFound(id) => {
            CliError::new(format!("Run '{id}' not found in {}", ws.display())).hint(format!(
                "list the runs with: delta list-runs -w {}",
                ws.display()
            ))
        }
        delta::runs::OpenError::Store(e) => CliError::from(e),
        e @ (delta::runs::OpenError::Layout(_) | delta::runs::OpenError::NoJournal { .. }) => {
            let hint = e.hint();
            CliError::new(e.to_string()).maybe_hint(hint)
        }
    }
}

/// Resumes `opened` (locked, with its workspace): loads its agent and environment, connects, and runs
/// the loop; `message` is added once the pending calls are settled.
pub fn launch_resumed(
    ws: &Path,
    opened: delta::runs::Opened,
    message: Option<String>,
    opts: ResumeOptions,
) -> Result<Exit, CliError> {
    let (clock, ids) = clock_and_ids()?;
    let agent = agent::load(Path::new(&opened.metadata.agent_ref)).map_err(agent_error)?;
    show_agent(&agent, opts.verbose);
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut env = Env::from_process();
    env.load_cascade(ws, &agent.dir, &cwd)
        .map_err(|e| CliError::new(e.to_string()))?;
    let conn = connect_llm(&agent, &env, &opts.mode, clock, &ids)?;
    workspace::set_latest(ws, &opened.run.run_id)?;
    let max_iterations = opts.max_iterations.unwrap_or(agent.max_iterations);
    launch(Launch {
        workspace: ws.to_path_buf(),
        run: opened.run,
        metadata: opened.metadata,
        workspace_lock: opened.workspace_lock,
        lock: opened.lock,
        env,
        conn,
        max_iterations,
        interactive: opts.interactive,
        verbose: opts.verbose,
        format: opts.format,
        message,
        recovered: opened.crashed,
        clock,
        ids,
        resuming: true,
        agent,
    })
}

/// Options shared by every way of resuming.
pub struct ResumeOptions {
    pub max_iterations: Option<u32>,
    pub interactive: bool,
    pub verbose: bool,
    pub format: Format,
    pub mode: LlmMode,
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
    if let Some(id) = &args.run_id {
        workspace::validate_run_id(id)
            .map_err(|e| CliError::usage(e.to_string()).hint(e.hint()))?;
    }
    let (clock, ids) = clock_and_ids()?;
    let agent = agent::load(&args.agent).map_err(agent_error)?;
    show_agent(&agent, args.verbose);
    let (ws_path, ws_name) = resolve_workspace(&args, &agent)?;

    // With -w (and no --run-id), a paused or interrupted run of the workspace is resumed. The
    // workspace stays locked from this decision until the process ends.
    let mut workspace_lock = None;
    if args.work_dir.is_some() && args.run_id.is_none() && ws_path.join(".delta").is_dir() {
        let ws = workspace::prepare(&ws_path)?;
        match delta::resume::claim_for_run(&ws, &message, clock, "delta run")
            .map_err(|e| busy_error(e, &ws))?
        {
            RunInWorkspace::Resume { opened, decision } => {
                announce_resume(&opened, &decision, &ws);
                let message = delta::resume::prepare(&opened, &decision)?;
                let opts = ResumeOptions {
                    max_iterations: args.max_iterations,
                    interactive: args.interactive,
                    verbose: args.verbose,
                    format: args.format,
                    mode: llm_mode(&args),
                };
                return launch_resumed(&ws, *opened, message, opts);
            }
            RunInWorkspace::New {
                workspace_lock: lock,
            } => workspace_lock = Some(lock),
        }
    }

    // .env files first (the workspace's may hold the key), then the key check, then create things.
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut env = Env::from_process();
    env.load_cascade(&ws_path, &agent.dir, &cwd)
        .map_err(|e| CliError::new(e.to_string()))?;
    let conn = connect_llm(&agent, &env, &llm_mode(&args), clock, &ids)?;
    let fresh = args.work_dir.is_none() && args.yes;
    let ws = create_workspace(&ws_path, ws_name.as_deref(), &agent, fresh)?;
    let new = session::NewRun {
        agent: &agent,
        workspace: &ws,
        task: &conn.redactor.redact(&message),
        run_id: args.run_id.as_deref(),
        command: "delta run",
    };
    let session = session::create(new, clock, &ids, workspace_lock).map_err(|e| match e {
        session::CreateError::Workspace(e) => busy_error(e, &ws),
        e => {
            let hint = e.hint();
            CliError::new(e.to_string()).maybe_hint(hint)
        }
    })?;
    let max_iterations = args.max_iterations.unwrap_or(agent.max_iterations);
    launch(Launch {
        workspace: ws,
        run: session.run,
        metadata: session.metadata,
        workspace_lock: session.workspace_lock,
        lock: session.lock,
        env,
        conn,
        max_iterations,
        interactive: args.interactive,
        verbose: args.verbose,
        format: args.format,
        message: None,
        recovered: None,
        clock,
        ids,
        resuming: false,
        agent,
    })
}

/// Says which run `delta run -w` resumes and what becomes of its message.
fn announce_resume(opened: &delta::runs::Opened, decision: &Decision, ws: &Path) {
    let died = if opened.crashed.is_some() {
        ", its process died"
    } else {
        ""
    };
    let what = match decision {
        Decision::Answer(_) => "the message given with -m answers its question",
        Decision::Resume { message: Some(_) } => {
            "resuming it; the message given with -m is added to it once its pending calls have \
             their results"
        }
        _ => "resuming it",
    };
    eprint_line(&format!(
        "Found a resumable run {} ({}{died}): {what}.",
        opened.run.run_id, opened.status
    ));
    eprint_line(&format!(
        "note: to start a new run here instead, give it an id: delta run -w {} --run-id NEW -m \"...\"",
        ws.display()
    ));
}

/// A second id source continuing the same deterministic sequence family (recorder request ids).
fn ids_clone(ids: &IdSource) -> IdSource {
    IdSource::seeded(ids.next_u64())
}
