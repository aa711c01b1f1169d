//! `delta rm`: removing a run.

use clap::Args;
use delta::runs::{self, RemoveError};
use serde_json::json;

use super::report::clock_and_ids;
use super::{CliError, Exit, WorkspaceArg, eprint_line, print_out};

/// Remove a run: its journal, metadata and io/ records, for good.
///
/// The run must be named (no default: removing is not undone). A run a live process works on is
/// refused (exit 75). What the run started that outlives delta (the processes of its shell
/// sessions, as while it waits for an answer, and MCP servers a killed process left) is stopped
/// first. A local run whose record is kept in a store is refused: remove it from the
/// store with --store (its working copy stays on disk). With --store, the run leaves the store
/// (queue included); its working copy, if any, is left as it is.
///
/// Examples:
///   delta rm -w ./ws --run-id 20251013_110024_a1b2c3
///   delta rm --store postgres://db/delta --run-id R --format json
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct RmArgs {
    #[command(flatten)]
    workspace: WorkspaceArg,

    /// The run to remove.
    #[arg(long, value_name = "ID")]
    run_id: String,

    /// Remove a run of this store (a PostgreSQL URL; also DELTA_STORE) instead of a workspace's.
    #[arg(long, value_name = "URL", env = "DELTA_STORE")]
    store: Option<String>,

    /// text: the removed run's id; json: {"removed": ID}.
    #[arg(long, value_enum, default_value = "text")]
    format: cli_edge::TextOrJson,
}

pub fn cmd_rm(args: RmArgs) -> Result<(), CliError> {
    let (clock, _) = clock_and_ids()?;
    let place = match &args.store {
        Some(url) => {
            super::fleet::remove_from_store(url, &args.run_id, clock)?;
            "the store".to_string()
        }
        None => {
            let ws = args.workspace.existing()?;
            runs::remove(&ws, &args.run_id, clock).map_err(remove_error)?;
            ws.display().to_string()
        }
    };
    eprint_line(&format!("Removed run {} from {place}", args.run_id));
    print_out(&match args.format {
        cli_edge::TextOrJson::Text => format!("{}\n", args.run_id),
        cli_edge::TextOrJson::Json => format!("{}\n", json!({"removed": args.run_id})),
    });
    Ok(())
}

fn remove_error(e: RemoveError) -> CliError {
    match e {
        RemoveError::Open(runs::OpenError::Busy { .. }) => CliError::from_error(e)
            .code(Exit::Busy)
            .hint("a live process works on the run or in its workspace; stop it first, or wait"),
        RemoveError::Open(runs::OpenError::NotFound(_)) => {
            CliError::from_error(e).hint("delta list-runs -w WORKSPACE lists the runs")
        }
        RemoveError::KeptInStore(ref id) => {
            let hint = format!("remove it from the store: delta rm --store URL --run-id {id}");
            CliError::from_error(e).hint(hint)
        }
        RemoveError::Open(ref open) => {
            let hint = open.hint();
            CliError::from_error(e).maybe_hint(hint)
        }
        RemoveError::InvalidId(ref invalid) => {
            let hint = invalid.hint();
            CliError::usage(e.to_string()).hint(hint)
        }
        RemoveError::Sessions { .. } => CliError::from_error(e).hint(
            "nothing was removed; check the sessions folder (.sessions) of the workspace, then run \
             delta rm again",
        ),
        RemoveError::Store(s) => super::store_error(s),
    }
}
