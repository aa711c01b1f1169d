//! `delta continue`.

use std::path::{Path, PathBuf};

use clap::Args;
use delta::connect::LlmMode;
use delta::metadata::RunStatus;
use delta::resume::{self, Caller, Decision};
use delta::runs;

use super::result::Format;
use super::run::{
    Launch, ResumeOptions, agent_error, busy_error, clock_and_ids, connect_llm, launch,
    launch_resumed, show_agent,
};
use super::{CliError, Exit, eprint_line};

/// Continue a run: resume it, answer its question, extend it, or retry it.
///
/// What happens depends on the run's status:
///   INTERRUPTED        resumes where it stopped (-m optional: added as a new message)
///   WAITING_FOR_INPUT  -m is the answer to the agent's question (or write it to
///                      interaction/response.txt first and omit -m)
///   COMPLETED          -m is a new message: the same conversation goes on
///   FAILED             -m is guidance for a retry: the same conversation goes on
///   RUNNING            refused while its process is alive (exit 75), as is any run while another
///                      delta process works in the workspace; a RUNNING run whose process
///                      died is recovered as INTERRUPTED
///
/// The run is the workspace's latest (.delta/LATEST) unless --run-id says otherwise; the agent is the
/// one the run was started with.
///
/// Examples:
///   delta continue -w ./ws -m "yes"
///   delta continue -w ./ws
///   delta continue --last -m "Now write a summary"   (the last workspace of this user)
///   delta continue -w ./ws --from-iteration 3 -m "Try another approach"
///   delta continue -w ./ws --with-file notes.md -m "Use these notes"
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ContinueArgs {
    /// Workspace holding the run.
    #[arg(
        short = 'w',
        long = "work-dir",
        value_name = "PATH",
        required_unless_present = "last"
    )]
    work_dir: Option<PathBuf>,

    /// Use the workspace delta used last. The record is per user: ~/.delta/LAST_WORKSPACE in your home folder ($HOME), rewritten by every run and continue of that user.
    #[arg(long, conflicts_with = "work_dir")]
    last: bool,

    /// The run to continue (default: the workspace's latest).
    #[arg(long, value_name = "ID")]
    run_id: Option<String>,

    /// Message: the answer to a question, new instructions, or guidance for a retry.
    #[arg(short = 'm', long, value_name = "TEXT")]
    message: Option<String>,

    /// Add this file's content to the message.
    #[arg(long, value_name = "FILE")]
    with_file: Option<PathBuf>,

    /// Start a new run (a fork) from this run's first N iterations, then add -m.
    #[arg(long, value_name = "N", requires = "message")]
    from_iteration: Option<usize>,

    /// Iteration budget for this continuation (default: the agent's max_iterations).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_iterations: Option<u32>,

    /// Show loaded tools, hook runs and other details on stderr.
    #[arg(short, long)]
    verbose: bool,

    /// Answer ask_human questions on the terminal instead of pausing the run.
    #[arg(short, long)]
    interactive: bool,

    /// What to print on stdout when the run stops.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,

    /// Keep every LLM exchange as DIR/turn-<n>.json.
    #[arg(long, value_name = "DIR", conflicts_with = "playback")]
    record: Option<PathBuf>,

    /// Answer from recordings in DIR instead of calling an LLM.
    #[arg(long, value_name = "DIR")]
    playback: Option<PathBuf>,
}

fn compose(message: Option<String>, file: Option<&Path>) -> Result<Option<String>, CliError> {
    let Some(file) = file else { return Ok(message) };
    let content = std::fs::read_to_string(file)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", file.display())))?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let block = format!("--- {name} ---\n{}", content.trim_end());
    Ok(Some(match message {
        Some(m) if !m.trim().is_empty() => format!("{m}\n\n{block}"),
        _ => block,
    }))
}

fn no_run(ws: &Path) -> CliError {
    CliError::new(format!(
        "No existing run found in the work directory {}",
        ws.display()
    ))
    .hint("Use `delta run` to start a new run")
}

pub fn cmd_continue(args: ContinueArgs) -> Result<Exit, CliError> {
    let ws = match (&args.work_dir, args.last) {
        (Some(dir), _) => std::env::current_dir().unwrap_or_default().join(dir),
        (None, _) => match runs::last_workspace() {
            None => {
                return Err(CliError::new(
                    "no workspace has been used yet (nothing recorded in ~/.delta/LAST_WORKSPACE)",
                )
                .hint("name the workspace with -w PATH"));
            }
            Some(ws) if !ws.is_dir() => {
                return Err(CliError::new(format!(
                    "the workspace used last, {}, no longer exists (recorded in ~/.delta/LAST_WORKSPACE)",
                    ws.display()
                ))
                .hint("name the workspace with -w PATH"));
            }
            Some(ws) => ws,
        },
    };
    if !ws.join(".delta").is_dir() {
        return Err(no_run(&ws));
    }
    let ws = ws.canonicalize().unwrap_or(ws);
    if args.work_dir.is_none() {
        let record = runs::last_workspace_file()
            .map(|f| f.display().to_string())
            .unwrap_or_else(|| "~/.delta/LAST_WORKSPACE".into());
        eprint_line(&format!(
            "Using the last workspace: {} (recorded in {record})",
            ws.display()
        ));
    }
    if let Some(id) = &args.run_id {
        delta::workspace::validate_run_id(id)
            .map_err(|e| CliError::usage(e.to_string()).hint(e.hint()))?;
    }
    let run_id = || -> Result<String, CliError> {
        match &args.run_id {
            Some(id) => Ok(id.clone()),
            None => Ok(runs::latest(&ws).ok_or_else(|| no_run(&ws))?.run_id),
        }
    };
    let message = compose(args.message.clone(), args.with_file.as_deref())?;
    let mode = match (&args.record, &args.playback) {
        (_, Some(dir)) => LlmMode::Playback(dir.clone()),
        (Some(dir), None) => LlmMode::Record(dir.clone()),
        (None, None) => LlmMode::Live,
    };
    let opts = ResumeOptions {
        max_iterations: args.max_iterations,
        interactive: args.interactive,
        verbose: args.verbose,
        format: args.format,
        mode,
    };

    if let Some(iteration) = args.from_iteration {
        return fork(&ws, &run_id()?, iteration, message, opts);
    }

    // The workspace is locked before its latest run is looked up, so that the run acted on is the
    // latest one while this process works.
    let (clock, _) = clock_and_ids()?;
    let command = "delta continue";
    let workspace_lock =
        runs::lock_workspace(&ws, clock, command).map_err(|e| busy_error(e, &ws))?;
    let opened = runs::open_locked(&ws, &run_id()?, workspace_lock, clock, command)
        .map_err(|e| busy_error(e, &ws))?;
    let decision = resume::decide(&opened, message.as_deref(), Caller::Continue)
        .map_err(|refusal| CliError::new(refusal.to_string()).hint(refusal.hint(&ws)))?;
    let message = resume::prepare(&opened, &decision)?;
    let response = delta::engine::response_path(&opened.run);
    match &decision {
        Decision::Answer(_) => {
            eprint_line(&format!("Response written to: {}", response.display()));
        }
        Decision::AnswerFromFile => {
            eprint_line(&format!("Using the response in {}", response.display()));
        }
        Decision::Extend {
            status: RunStatus::Failed,
            ..
        } => eprint_line("Retrying the FAILED run with the new message..."),
        Decision::Extend { .. } => eprint_line("Extending the COMPLETED conversation..."),
        Decision::Resume { .. } | Decision::StartNew => {}
    }
    launch_resumed(&ws, opened, message, opts)
}

fn fork(
    ws: &Path,
    run_id: &str,
    iteration: usize,
    message: Option<String>,
    opts: ResumeOptions,
) -> Result<Exit, CliError> {
    let (clock, ids) = clock_and_ids()?;
    let source = delta::workspace::RunDir::new(ws, run_id);
    if !source.metadata().is_file() {
        return Err(no_run(ws));
    }
    let now = clock.now();
    let mut new_id = delta::workspace::new_run_id(now, &ids);
    while delta::workspace::RunDir::new(ws, &new_id).root.exists() {
        new_id = delta::workspace::new_run_id(now, &ids);
    }
    let session = delta::session::fork(&source, iteration, &new_id, clock, "delta continue")
        .map_err(|e| match e {
            delta::session::ForkError::Workspace(e) => busy_error(e, ws),
            e => {
                let hint = e.hint();
                CliError::new(e.to_string()).maybe_hint(hint)
            }
        })?;
    eprint_line(&format!(
        "Forked run {new_id} from {run_id} at iteration {iteration}."
    ));
    let agent = delta::agent::load(Path::new(&session.metadata.agent_ref)).map_err(agent_error)?;
    show_agent(&agent, opts.verbose);
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut env = delta::env::Env::from_process();
    env.load_cascade(ws, &agent.dir, &cwd)
        .map_err(|e| CliError::new(e.to_string()))?;
    let conn = connect_llm(&agent, &env, &opts.mode, clock, &ids)?;
    let max_iterations = opts.max_iterations.unwrap_or(agent.max_iterations);
    launch(Launch {
        workspace: ws.to_path_buf(),
        run: session.run,
        metadata: session.metadata,
        workspace_lock: session.workspace_lock,
        lock: session.lock,
        env,
        conn,
        max_iterations,
        interactive: opts.interactive,
        verbose: opts.verbose,
        format: opts.format,
        message,
        recovered: None,
        clock,
        ids,
        resuming: true,
        agent,
    })
}
