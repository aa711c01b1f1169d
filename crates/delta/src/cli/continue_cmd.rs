//! `delta continue`.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;
use delta::runner::{Continue, Request, WorkspaceRef};

use super::fleet::{self, StoreContinue};
use super::report::{self, Flags, clock_and_ids};
use super::result::RunFormat;
use super::{CliError, Exit};

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
///   delta continue --store postgres://db/delta --run-id R -m "And now?"   (a run kept in a store)
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ContinueArgs {
    /// Workspace holding the run.
    #[arg(
        short = 'w',
        long = "work-dir",
        value_name = "PATH",
        required_unless_present_any = ["last", "store"]
    )]
    work_dir: Option<PathBuf>,

    /// Continue a run kept in this store (a PostgreSQL URL; also DELTA_STORE) instead of a
    /// workspace's: needs --run-id. The run is worked on here, in its working copy.
    #[arg(long, value_name = "URL", env = "DELTA_STORE", conflicts_with_all = ["work_dir", "last", "from_iteration"], requires = "run_id")]
    store: Option<String>,

    /// With --store: where a working copy is made when the run's own cannot be used.
    #[arg(long, value_name = "DIR", requires = "store")]
    dir: Option<PathBuf>,

    /// Use the workspace delta used last. The record is per user: ~/.delta/LAST_WORKSPACE in your home folder ($HOME), rewritten by every run and continue of that user.
    #[arg(long, conflicts_with = "work_dir")]
    last: bool,

    /// The run to continue (default: the workspace's latest).
    #[arg(long, value_name = "ID")]
    run_id: Option<String>,

    /// Message: the answer to a question, new instructions, or guidance for a retry ("-": read it
    /// from standard input).
    #[arg(short = 'm', long, value_name = "TEXT")]
    message: Option<String>,

    /// The model to ask instead of the agent's llm.model (also DELTA_MODEL).
    #[arg(long, value_name = "NAME", env = "DELTA_MODEL")]
    model: Option<String>,

    #[command(flatten)]
    confine: super::report::SandboxArgs,

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

    /// Quiet: no progress or notices on stderr, only errors (the result still goes to stdout).
    #[arg(short, long, conflicts_with = "verbose")]
    quiet: bool,

    /// Answer ask_human questions on the terminal instead of pausing the run.
    #[arg(short, long)]
    interactive: bool,

    /// Take a run that has no seal as it is found: one made before delta sealed runs, or whose
    /// workspace moved (a run without a seal is refused otherwise; see docs/security.md).
    #[arg(long)]
    adopt: bool,

    /// What to print on stdout.
    #[arg(long, value_enum, default_value = "text")]
    format: RunFormat,

    /// Keep every LLM exchange as DIR/turn-<n>.json.
    #[arg(long, value_name = "DIR", conflicts_with = "playback")]
    record: Option<PathBuf>,

    /// Answer from recordings in DIR instead of calling an LLM.
    #[arg(long, value_name = "DIR")]
    playback: Option<PathBuf>,
}

pub fn cmd_continue(args: ContinueArgs) -> Result<Exit, CliError> {
    let format = args.format;
    super::result::with_json_error(format, continue_run(args))
}

fn continue_run(args: ContinueArgs) -> Result<Exit, CliError> {
    let (clock, ids) = clock_and_ids()?;
    let message = super::message_arg(args.message)?;
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
        adopt: args.adopt,
    };
    if let (Some(url), Some(run_id)) = (args.store, &args.run_id) {
        let cont = StoreContinue {
            url,
            run_id: run_id.clone(),
            message,
            with_file: args.with_file,
            dir: args.dir.unwrap_or_else(fleet::default_copies),
        };
        return fleet::continue_in_store(cont, &flags, clock, ids);
    }
    let run_id = match (&args.run_id, &args.work_dir) {
        (None, Some(dir)) => pick_run(dir, args.quiet)?,
        _ => args.run_id,
    };
    let request = Request::Continue(Continue {
        workspace: match args.work_dir {
            Some(dir) => WorkspaceRef::Dir(dir),
            None => WorkspaceRef::Last,
        },
        run_id,
        message,
        with_file: args.with_file,
        fork_at: args.from_iteration,
    });
    report::execute(request, &flags, clock, ids)
}

/// Which run of the workspace `dir` to continue when `--run-id` is not given and it has several:
/// the user's choice on a terminal; otherwise the newest (as `LATEST` names it), said on stderr
/// (unless `quiet`).
fn pick_run(dir: &std::path::Path, quiet: bool) -> Result<Option<String>, CliError> {
    let ws = std::env::current_dir().unwrap_or_default().join(dir);
    let Ok(runs) = delta::runs::list(&ws) else {
        return Ok(None);
    };
    if runs.len() < 2 {
        return Ok(None);
    }
    if std::io::stdin().is_terminal() {
        let interrupt = super::terminal::install_signal_handlers()?;
        return super::terminal::choose_run(&runs, &interrupt).map(Some);
    }
    if let Some(latest) = delta::runs::latest(&ws).filter(|_| !quiet) {
        super::eprint_line(&format!(
            "Continuing run {} (the latest of {} runs in {}; --run-id picks another, delta list-runs -w {} lists them)",
            latest.run_id,
            runs.len(),
            dir.display(),
            dir.display()
        ));
    }
    Ok(None)
}
