//! `dygram parseAndValidate`: check a machine.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::input;
use super::{CliError, Exit, Verbosity, print_out};

/// Check a machine: syntax, names, references, types; with its imports.
///
/// Errors and warnings go to stderr with the file, line and column, the source line and a caret.
/// On success stdout says so (or, with --json, every diagnostic as JSON whatever the outcome).
///
/// Examples:
///   dygram pv machine.dy
///   dygram pv machine.dy --json | jq '.diagnostics[] | select(.severity == "error")'
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ValidateArgs {
    /// The machine (.dy, .dygram, .mach), or - for standard input.
    file: PathBuf,
    /// Do not read imported files.
    #[arg(long)]
    no_imports: bool,
    /// Print {"valid": bool, "diagnostics": [...]} on stdout instead of the rendered messages.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    verbosity: Verbosity,
}

pub fn run(args: ValidateArgs) -> Result<Exit, CliError> {
    let input = input::read(&args.file, false)?;
    let project = input::compile(&input, args.no_imports);
    if args.json {
        let mut diagnostics = Vec::new();
        for module in project
            .modules
            .iter()
            .chain(std::iter::once(&project.entry))
        {
            let file = &module.compiled.file;
            for d in &module.compiled.diagnostics {
                let position = d.span.map(|s| file.position(s.start as usize));
                diagnostics.push(json!({
                    "severity": if d.is_error() { "error" } else { "warning" },
                    "stage": match d.stage {
                        dygram::diagnostic::Stage::Syntax => "syntax",
                        dygram::diagnostic::Stage::Validation => "validation",
                        dygram::diagnostic::Stage::Graph => "graph",
                    },
                    "message": d.message,
                    "file": file.name(),
                    "line": position.map(|p| p.line + 1),
                    "column": position.map(|p| p.character + 1),
                    "hint": d.hint,
                }));
            }
        }
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
