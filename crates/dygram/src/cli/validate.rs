//! `dygram parseAndValidate`: check a machine.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::input;
use super::{CliError, Exit, Verbosity, print_out};

/// Check a machine: syntax, names, references, types; with its imports.
///
/// Errors and warnings go to stderr with the file, line and column, the source line and a caret.
/// On success stdout says so (or, with --format json, every diagnostic as JSON whatever the outcome).
///
/// Examples:
///   dygram pv machine.dy
///   dygram pv machine.dy --format json | jq '.diagnostics[] | select(.severity == "error")'
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ValidateArgs {
    /// The machine (.dy, .dygram, .mach), or - for standard input.
    file: PathBuf,
    /// Do not read imported files.
    #[arg(long)]
    no_imports: bool,
    // json: {"valid": bool, "diagnostics": [...]} on stdout instead of the rendered messages.
    #[command(flatten)]
    format: cli_edge::FormatFlag,
    #[command(flatten)]
    verbosity: Verbosity,
}

impl ValidateArgs {
    pub fn json_output(&self) -> bool {
        self.format.is_json()
    }
}

pub fn run(args: ValidateArgs) -> Result<Exit, CliError> {
    let input = input::read(&args.file, false)?;
    let project = input::compile(&input, args.no_imports);
    if args.format.is_json() {
        let diagnostics = project.diagnostics_json();
        let valid = !project.has_errors();
        let out = json!({"valid": valid, "diagnostics": diagnostics});
        print_out(&format!("{out}\n"));
        return Ok(if valid { Exit::Ok } else { Exit::Failed });
    }
    if input::show_diagnostics(&project, args.verbosity) > 0 {
        return Ok(Exit::Failed);
    }
    print_out(&format!(
        "✓ Parsed and validated {} successfully!\n",
        input.name()
    ));
    Ok(Exit::Ok)
}
