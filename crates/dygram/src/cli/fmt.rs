//! `dygram fmt`: machines rewritten in the printer's layout (the language server's formatting).

use std::path::{Path, PathBuf};

use clap::Args;
use dygram_analysis::format::{self, Indent, Refusal};
use serde_json::json;

use super::input;
use super::{CliError, Exit, eprint_line, print_out};

/// Format machines in place: the `.dy` layout of `dygram generate -f dsl`, comments kept.
///
/// A file is rewritten only when nothing is lost: the formatted text must give the same machine,
/// the same errors and warnings and every comment as written. A file that cannot be formatted so
/// (syntax errors, imports, a comment inside a statement), or cannot be read, is left untouched and
/// named on stderr with the reason while the others are formatted; the exit code is then 1. With --check nothing is written: the files that would
/// change are listed on stdout, and the exit code is 1 when there is any. With - the machine is
/// read from standard input and the formatted text printed. A file given through a link is
/// rewritten where the link points; the link stays.
///
/// Examples:
///   dygram fmt machine.dy
///   dygram fmt --check machines/*.dy          # in CI: exit 1 when a file is not formatted
///   dygram fmt --indent 2 machine.dy
///   cat machine.dy | dygram fmt -
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct FmtArgs {
    /// The machines (.dy, .dygram, .mach), or - for standard input.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Write nothing; list the files that would change (exit 1 when any would).
    #[arg(long)]
    check: bool,
    /// Spaces per level of indentation.
    #[arg(long, value_name = "N", default_value_t = 4, conflicts_with = "tabs",
          value_parser = clap::value_parser!(u32).range(1..=16))]
    indent: u32,
    /// Indent with tabs.
    #[arg(long)]
    tabs: bool,
    // json: {"files": [{"file", "status", "reason"?}], "changed": N, "refused": N} on stdout.
    #[command(flatten)]
    format: cli_edge::FormatFlag,
}

impl FmtArgs {
    pub fn json_output(&self) -> bool {
        self.format.is_json()
    }
}

/// What became of one file.
enum Outcome {
    /// Formatted already.
    Unchanged,
    /// Rewritten (or, with --check, would be).
    Changed,
    /// Left as it is, and why.
    Refused(Refusal),
    /// Not read (the others are formatted all the same).
    Unreadable(String),
}

pub fn run(args: FmtArgs) -> Result<Exit, CliError> {
    let indent = if args.tabs {
        Indent::Tab
    } else {
        Indent::Spaces(args.indent)
    };
    if args.files.iter().any(|f| f == Path::new("-")) {
        return standard_input(&args, indent);
    }
    let mut results = Vec::new();
    for file in &args.files {
        let read = match input::read(file, false) {
            Ok(read) => read,
            Err(e) if e.exit() == Exit::Usage => return Err(e),
            Err(e) => {
                results.push((file.clone(), Outcome::Unreadable(e.to_string())));
                continue;
            }
        };
        let outcome = match format::formatted(&read.text, indent) {
            Err(refusal) => Outcome::Refused(refusal),
            Ok(formatted) if formatted == read.text => Outcome::Unchanged,
            Ok(formatted) => {
                if !args.check {
                    write_formatted(file, &formatted)?;
                }
                Outcome::Changed
            }
        };
        results.push((file.clone(), outcome));
    }
    report(&args, &results);
    let changed = results.iter().any(|(_, o)| matches!(o, Outcome::Changed));
    let refused = results
        .iter()
        .any(|(_, o)| matches!(o, Outcome::Refused(_) | Outcome::Unreadable(_)));
    Ok(if refused || (args.check && changed) {
        Exit::Failed
    } else {
        Exit::Ok
    })
}

/// Replaces the text of `file` with `formatted`, atomically. A link is followed first: the file
/// it names is replaced, and the link stays a link.
fn write_formatted(file: &Path, formatted: &str) -> Result<(), CliError> {
    let target = std::fs::canonicalize(file).map_err(|e| unwritable(file, e))?;
    store::write_atomic(&target, formatted.as_bytes()).map_err(|e| unwritable(&target, e))
}

/// The error of a file that could not be written.
fn unwritable(path: &Path, e: impl std::error::Error + Send + Sync + 'static) -> CliError {
    CliError::with_source(format!("cannot write {}", path.display()), e).kind("unwritable_output")
}

/// `dygram fmt -`: the formatted text on stdout (or, refused, the text as it was, and why on
/// stderr); with --check, nothing on stdout and the exit code says.
fn standard_input(args: &FmtArgs, indent: Indent) -> Result<Exit, CliError> {
    if args.files.len() > 1 {
        return Err(
            CliError::usage("- (standard input) cannot be given with files")
                .hint("format the files in one call and standard input in another"),
        );
    }
    let read = input::read(Path::new("-"), false)?;
    match format::formatted(&read.text, indent) {
        Ok(formatted) if args.check => {
            let changed = formatted != read.text;
            if changed {
                eprint_line("<stdin>: not formatted");
            }
            Ok(if changed { Exit::Failed } else { Exit::Ok })
        }
        Ok(formatted) => {
            print_out(&formatted);
            Ok(Exit::Ok)
        }
        Err(refusal) => {
            Err(CliError::new(format!("<stdin>: not formatted: {refusal}")).kind("not_formatted"))
        }
    }
}

fn report(args: &FmtArgs, results: &[(PathBuf, Outcome)]) {
    if args.format.is_json() {
        let files: Vec<serde_json::Value> = results
            .iter()
            .map(|(file, outcome)| {
                let file = file.display().to_string();
                match outcome {
                    Outcome::Unchanged => json!({"file": file, "status": "unchanged"}),
                    Outcome::Changed if args.check => {
                        json!({"file": file, "status": "wouldChange"})
                    }
                    Outcome::Changed => json!({"file": file, "status": "formatted"}),
                    Outcome::Refused(why) => {
                        json!({"file": file, "status": "refused", "reason": why.to_string()})
                    }
                    Outcome::Unreadable(why) => {
                        json!({"file": file, "status": "unreadable", "reason": why})
                    }
                }
            })
            .collect();
        let count = |f: fn(&Outcome) -> bool| results.iter().filter(|(_, o)| f(o)).count();
        let out = json!({
            "files": files,
            "changed": count(|o| matches!(o, Outcome::Changed)),
            "refused": count(|o| matches!(o, Outcome::Refused(_))),
            "unreadable": count(|o| matches!(o, Outcome::Unreadable(_))),
        });
        print_out(&format!("{out}\n"));
        return;
    }
    for (file, outcome) in results {
        match outcome {
            Outcome::Unchanged => {}
            Outcome::Changed if args.check => {
                print_out(&format!("would reformat {}\n", file.display()));
            }
            Outcome::Changed => print_out(&format!("formatted {}\n", file.display())),
            Outcome::Refused(why) => {
                eprint_line(&format!("error: {}: not formatted: {why}", file.display()))
            }
            Outcome::Unreadable(why) => eprint_line(&format!("error: {why}")),
        }
    }
}
