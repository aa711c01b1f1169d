//! `delta show` (alias `log`): a run's transcript.

use clap::Args;
use delta::transcript::{self, Transcript, TranscriptError};

use super::{CliError, WorkspaceArg, print_out, print_text};

/// Show what a run did: its transcript, or one of its records.
///
/// The user's messages, the model's text, each tool call with its arguments, exit code, duration and
/// output (clipped; the file with the full output is named, with the record's id), failed model
/// requests, compactions, token usage per call and in total, the run's status, and the question it
/// waits on. Reads the run's files only: it may be shown while another process works on it.
///
/// With --record ID, prints that record of io/ as one JSON object instead: a tool call's (its id,
/// as `record_id` in --format json) with its full stdout and stderr, or a model call's (the
/// invocation id) with its request and response, whichever way the run keeps them.
///
/// Examples:
///   delta show -w ./ws                              # the workspace's latest run
///   delta show -w ./ws --run-id 20251013_110024_a1b2c3 --format json
///   delta show -w ./ws --format html > run.html     # one self-contained page
///   delta show -w ./ws --record c1 | jq -r .stdout  # a tool call's full output
///   delta show --store postgres://db/delta --run-id R   # a run kept in a store
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ShowArgs {
    #[command(flatten)]
    workspace: WorkspaceArg,

    /// The run (default: the workspace's latest; required with --store).
    #[arg(long, value_name = "ID")]
    run_id: Option<String>,

    /// Show a run of this store (a PostgreSQL URL; also DELTA_STORE) instead of a workspace's.
    #[arg(long, value_name = "URL", env = "DELTA_STORE")]
    store: Option<String>,

    /// text: for reading; json: the transcript as one object; html: one self-contained page.
    #[arg(long, value_enum, default_value = "text")]
    format: ShowFormat,

    /// Print this record of the run's io/ (a tool call's or a model call's id) as JSON instead.
    #[arg(long, value_name = "ID", conflicts_with_all = ["store", "format"])]
    record: Option<String>,
}

/// What `delta show` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShowFormat {
    /// Readable text.
    Text,
    /// One JSON object.
    Json,
    /// One HTML page, no external assets.
    Html,
}

pub fn cmd_show(args: ShowArgs) -> Result<(), CliError> {
    if let Some(id) = &args.run_id {
        delta::workspace::validate_run_id(id)
            .map_err(|e| CliError::usage(e.to_string()).hint(e.hint()))?;
    }
    if let Some(url) = &args.store {
        let Some(run_id) = &args.run_id else {
            return Err(
                CliError::usage("--store needs --run-id: which run of the store")
                    .hint("list the store's runs with: delta list-runs --store URL"),
            );
        };
        let transcript = super::fleet::store_transcript(url, run_id)?;
        render(&transcript, args.format);
        return Ok(());
    }
    let ws = args.workspace.existing()?;
    let Some(run) = transcript::find_run(&ws, args.run_id.as_deref()) else {
        return Err(match &args.run_id {
            Some(id) => CliError::new(format!("no run {id} in {}", ws.display())),
            None => CliError::new(format!("no run in {}", ws.display())),
        }
        .hint("delta list-runs -w WORKSPACE lists the runs"));
    };
    let as_cli = |e| match e {
        TranscriptError::Store(e) => super::store_error(e),
    };
    if let Some(id) = &args.record {
        return print_record(&run, id, as_cli);
    }
    let transcript = Transcript::load(&run).map_err(as_cli)?;
    render(&transcript, args.format);
    Ok(())
}

/// `--record ID`: the record, pretty-printed.
fn print_record(
    run: &delta::workspace::RunDir,
    id: &str,
    as_cli: impl Fn(TranscriptError) -> CliError,
) -> Result<(), CliError> {
    if !transcript::is_record_id(id) {
        return Err(CliError::usage(format!("{id:?} is not a record id"))
            .hint("a record id is a tool call's id or an invocation id, never a path"));
    }
    match transcript::record(run, id).map_err(as_cli)? {
        Some(record) => {
            print_out(&format!(
                "{}\n",
                serde_json::to_string_pretty(&record).unwrap_or_default()
            ));
            Ok(())
        }
        None => Err(
            CliError::new(format!("no record {id} in run {}", run.run_id)).hint(
                "delta show --format json gives each tool call's record_id; a model call's is the \
                 llm_invocation_ref of its THOUGHT in the journal",
            ),
        ),
    }
}

fn render(transcript: &Transcript, format: ShowFormat) {
    match format {
        ShowFormat::Text => print_text(&transcript::text::render(transcript)),
        ShowFormat::Json => print_out(&format!(
            "{}\n",
            serde_json::to_string_pretty(transcript).unwrap_or_default()
        )),
        ShowFormat::Html => print_out(&transcript::html::render(transcript)),
    }
}
