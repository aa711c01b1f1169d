//! `delta run`.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;
use delta::agent::{self, Agent};
use delta::runner::{NewRun, Request};
use delta::workspace;

use super::report::{self, Flags, agent_error, clock_and_ids, show_agent};
use super::result::RunFormat;
use super::terminal;
use super::{CliError, Exit};

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

    /// The task or message for the agent ("-": read it from standard input).
    #[arg(short = 'm', long, value_name = "TEXT")]
    message: Option<String>,

    /// The model to ask instead of the agent's llm.model (also DELTA_MODEL).
    #[arg(long, value_name = "NAME", env = "DELTA_MODEL")]
    model: Option<String>,

    #[command(flatten)]
    confine: super::report::SandboxArgs,

    /// Workspace folder: where tools run and the run is journaled (created if missing).
    #[arg(short = 'w', long = "work-dir", value_name = "PATH")]
    work_dir: Option<PathBuf>,

    /// Iteration budget (default: the agent's max_iterations, else 30).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_iterations: Option<u32>,

    /// Show loaded tools, hook runs and other details on stderr.
    #[arg(short, long)]
    verbose: bool,

    /// Quiet: no progress or notices on stderr, only errors (the result still goes to stdout).
    #[arg(short, long, conflicts_with = "verbose")]
    quiet: bool,

    /// Answer ask_human questions on the terminal instead of pausing the run.
    #[arg(short, long)]
    interactive: bool,

    /// Without -w: create the next workspace (Wnnn) without asking.
    #[arg(short = 'y', long)]
    yes: bool,

    /// What to print on stdout.
    #[arg(long, value_enum, default_value = "text")]
    format: RunFormat,

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

pub fn cmd_run(args: RunArgs) -> Result<Exit, CliError> {
    let format = args.format;
    super::result::with_json_error(format, run(args))
}

fn run(args: RunArgs) -> Result<Exit, CliError> {
    if args.task.is_some() {
        return Err(CliError::usage("--task was replaced by -m/--message")
            .hint("delta run --agent <path> -m \"your task\""));
    }
    let Some(message) = super::message_arg(args.message.clone())?.filter(|m| !m.trim().is_empty())
    else {
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
    if !args.quiet {
        show_agent(&agent, args.verbose);
    }
    let (workspace, workspace_name) = resolve_workspace(&args, &agent)?;
    let request = Request::Run(Box::new(NewRun {
        agent,
        workspace,
        workspace_name,
        next_workspace: args.work_dir.is_none() && args.yes,
        auto_resume: args.work_dir.is_some() && args.run_id.is_none(),
        message,
        run_id: args.run_id,
    }));
    let flags = Flags {
        quiet: args.quiet,
        max_iterations: args.max_iterations,
        model: args.model,
        sandbox: args.confine.sandbox,
        network: args.confine.network.map(super::report::Switch::is_on),
        approvals: args.confine.approvals()?,
        interactive: args.interactive,
        verbose: args.verbose,
        format: args.format,
        mode: Flags::mode(args.record.as_deref(), args.playback.as_deref()),
        adopt: false,
    };
    report::execute(request, &flags, clock, ids)
}
