//! What `delta run` and `delta continue` print on stdout: `--format text` (default), `json` or `raw`.

use delta::engine::RunOutcome;
use delta::run_result::{self, ResultContext};

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

/// Renders `outcome` in `format` (possibly empty for `raw`).
pub fn render(format: Format, outcome: &RunOutcome, ctx: &ResultContext<'_>) -> String {
    match format {
        Format::Text => run_result::text_result(outcome, ctx),
        Format::Json => format!("{}\n", run_result::json_result(outcome, ctx)),
        Format::Raw => run_result::raw_result(outcome),
    }
}
