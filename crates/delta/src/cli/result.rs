//! What commands print on stdout: `--format text` (default), `json`, `stream-json` (run and continue)
//! or `raw`.

use delta::engine::RunOutcome;
use delta::run_result::{self, ResultContext};
use serde_json::{Value, json};

use super::{CliError, Exit, print_out};

/// Output format of the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A readable summary block.
    Text,
    /// One JSON object (RunResult, schema 2.0).
    Json,
    /// The final response only (nothing unless the run completed).
    Raw,
}

/// What `delta run` and `delta continue` print on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RunFormat {
    /// A readable summary block.
    Text,
    /// One JSON object (RunResult, schema 2.0).
    Json,
    /// One JSON object per line as things happen, the last one (`run_finished`) holding the
    /// RunResult.
    StreamJson,
    /// The final response only (nothing unless the run completed).
    Raw,
}

/// Renders `outcome` in `format` (possibly empty for `raw`).
pub fn render(format: RunFormat, outcome: &RunOutcome, ctx: &ResultContext<'_>) -> String {
    match format {
        RunFormat::Text => run_result::text_result(outcome, ctx),
        RunFormat::Json => format!("{}\n", run_result::json_result(outcome, ctx)),
        RunFormat::StreamJson => format!(
            "{}\n",
            delta::stream::finished(run_result::json_result(outcome, ctx))
        ),
        RunFormat::Raw => run_result::raw_result(outcome),
    }
}

/// The result object of a run that could not start or go on (`--format json`): `is_error`, the
/// error's `type` (`UsageError`, `Busy`, `SetupError`, `InternalError`), message, causes and hints,
/// and the exit code.
pub fn error_json(error: &CliError) -> Value {
    let kind = match error.exit() {
        Exit::Usage => "UsageError",
        Exit::Busy => "Busy",
        Exit::Internal => "InternalError",
        _ => "SetupError",
    };
    // The object both tools print (`CliError::to_json`), in the RunResult's shape.
    let shared = error.to_json();
    json!({
        "schema_version": "2.0",
        "run_id": null,
        "status": null,
        "is_error": true,
        "error": {
            "type": kind,
            "kind": shared["kind"],
            "message": shared["message"],
            "causes": shared["causes"],
            "hints": shared["hints"],
        },
        "exit_code": shared["exit_code"],
    })
}

/// Passes `result` on; with `--format json` (or `stream-json`), an error is also printed as a
/// result object on stdout (the message stays on stderr too), so that a script reading stdout always
/// gets one.
pub fn with_json_error(
    format: RunFormat,
    result: Result<Exit, CliError>,
) -> Result<Exit, CliError> {
    match (format, &result) {
        (RunFormat::Json, Err(error)) => print_out(&format!("{}\n", error_json(error))),
        (RunFormat::StreamJson, Err(error)) => {
            print_out(&format!("{}\n", delta::stream::finished(error_json(error))))
        }
        _ => {}
    }
    result
}
