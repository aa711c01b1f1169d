//! `delta compact`.

use std::path::PathBuf;

use clap::Args;
use delta::engine::CompactNow;
use delta::runner::{CompactRun, Runner};
use serde_json::json;

use super::console::Console;
use super::report::{self, CliHost, Flags, clock_and_ids};
use super::result::Format;
use super::terminal;
use super::{CliError, eprint_line, print_out};

/// Compact a run's conversation now, without going on with the run.
///
/// The oldest iterations, all but the agent's keep_recent (context.yaml compaction:), are replaced
/// as its strategy says: summarized by the model (one call, no tools) or dropped with a note. A
/// COMPACTION event records it; the run's status does not change, and a later continue sends the
/// compacted conversation. Runs compact by themselves when a request would not fit the model's
/// context window: this is for doing it ahead of time.
///
/// Examples:
///   delta compact -w ./ws
///   delta compact -w ./ws --run-id R --format json
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct CompactArgs {
    /// Workspace holding the run.
    #[arg(short = 'w', long = "work-dir", value_name = "PATH")]
    work_dir: PathBuf,

    /// The run (default: the workspace's latest).
    #[arg(long, value_name = "ID")]
    run_id: Option<String>,

    /// text: a line; json: {run_id, compacted, iterations, strategy, tokens_before, tokens_after} or
    /// {run_id, compacted: false, reason}.
    #[arg(long, value_enum, default_value = "text", hide_possible_values = true)]
    format: Format,

    /// Keep the summarizing LLM exchange as DIR/turn-<n>.json.
    #[arg(long, value_name = "DIR", conflicts_with = "playback")]
    record: Option<PathBuf>,

    /// Answer from recordings in DIR instead of calling an LLM.
    #[arg(long, value_name = "DIR")]
    playback: Option<PathBuf>,
}

pub fn cmd_compact(args: CompactArgs) -> Result<(), CliError> {
    let (clock, ids) = clock_and_ids()?;
    let interrupt = terminal::install_signal_handlers()?;
    let flags = Flags {
        quiet: false,
        model: None,
        sandbox: None,
        network: None,
        approvals: Default::default(),
        max_iterations: None,
        interactive: false,
        verbose: false,
        format: match args.format {
            Format::Json => super::result::RunFormat::Json,
            _ => super::result::RunFormat::Text,
        },
        mode: Flags::mode(args.record.as_deref(), args.playback.as_deref()),
        adopt: false,
    };
    let mut console = Console::new(false, false, false);
    let mut host = CliHost::new(&flags, clock);
    host.quiet = true;
    let runner = Runner {
        options: report::options(&flags, clock, ids, interrupt),
        observer: &mut console,
        human: None,
        host: &mut host,
        tools: None,
    };
    let done = runner
        .compact(CompactRun {
            workspace: args.work_dir,
            run_id: args.run_id,
        })
        .map_err(report::runner_error)?;
    let run_id = &done.run.run_id;
    let nothing = |keep_recent: u32| {
        format!(
            "nothing to compact: beyond what was compacted before, the run has no more than its \
             {keep_recent} most recent iteration(s), which are kept (context.yaml keep_recent)"
        )
    };
    match (&done.compaction, args.format) {
        (CompactNow::Compacted(c), Format::Json) => print_out(&format!(
            "{}\n",
            json!({"run_id": run_id, "compacted": true, "iterations": c.iterations, "strategy": c.strategy,
                   "tokens_before": c.tokens_before, "tokens_after": c.tokens_after})
        )),
        (CompactNow::NothingToCompact { keep_recent }, Format::Json) => print_out(&format!(
            "{}\n",
            json!({"run_id": run_id, "compacted": false, "reason": nothing(*keep_recent)})
        )),
        (CompactNow::Compacted(c), _) => print_out(&format!(
            "Compacted run {run_id}: {} iteration(s) {} (strategy {}), about {} → {} tokens\n",
            c.iterations,
            if c.strategy == "summarize" {
                "summarized"
            } else {
                "dropped"
            },
            c.strategy,
            c.tokens_before,
            c.tokens_after
        )),
        (CompactNow::NothingToCompact { keep_recent }, _) => {
            eprint_line(&format!("Run {run_id}: {}", nothing(*keep_recent)));
        }
    }
    Ok(())
}
