//! `dygram generate`: outputs of a machine.

use std::path::{Path, PathBuf};

use clap::Args;
use dygram_core::json::JsonOptions;
use dygram_core::render::json::ReadError;
use dygram_runtime::outputs::{self, Format, FormatError, RenderError, WriteError};

use super::input::{self, Input};
use super::{CliError, Exit, Verbosity, eprint_line, print_out};

/// Generate outputs from a machine: canonical JSON, Graphviz DOT, SVG, Mermaid or .dy source.
///
/// Without -d, the one requested format goes to stdout and nothing else does. With -d DIR, each
/// format is written to DIR/<name>.<ext> (json, dot, svg, mmd, dy) and the written paths are
/// listed on stdout. The input can also be canonical JSON (a .json file), e.g. to turn JSON back
/// into .dy with -f dsl. svg needs Graphviz's `dot` program.
///
/// Examples:
///   dygram generate machine.dy > machine.json
///   dygram g machine.dy -f dot | dot -Tpng > machine.png
///   dygram g machine.dy -f json,dot,svg,mermaid -d out/
///   dygram g machine.json -f dsl > machine.dy
///   cat machine.dy | dygram g - -f mermaid
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct GenerateArgs {
    /// The machine (.dy, .dygram, .mach or .json), or - for standard input.
    file: PathBuf,
    /// Formats, comma-separated: json, dot (also: graphviz), svg, mermaid, dsl.
    #[arg(short, long, default_value = "json", value_delimiter = ',')]
    format: Vec<String>,
    /// Write the outputs into this folder (created if missing) instead of stdout.
    #[arg(short, long, value_name = "DIR")]
    destination: Option<PathBuf>,
    /// Do not read imported files.
    #[arg(long)]
    no_imports: bool,
    /// Add $sourceRange (0-based source positions) to nodes and edges in JSON.
    #[arg(long)]
    source_ranges: bool,
    #[command(flatten)]
    verbosity: Verbosity,
}

/// The formats a `-f` list names.
pub fn formats(list: &[String]) -> Result<Vec<Format>, CliError> {
    Format::parse_list(list).map_err(|e| {
        let hint = match e {
            FormatError::Unknown(_) => format!("formats: {}", Format::names()),
            FormatError::Empty => "e.g. -f json or -f dot,svg".to_string(),
        };
        CliError::usage(e.to_string()).hint(hint)
    })
}

/// The machine JSON of an input: compiled (diagnostics shown), or read as JSON.
/// `Ok(None)`: the machine has errors (already shown).
pub fn machine_json(
    input: &Input,
    no_imports: bool,
    source_ranges: bool,
    verbosity: Verbosity,
) -> Result<Option<serde_json::Value>, CliError> {
    if input.is_json() {
        return dygram_core::render::json::read(&input.text)
            .map(Some)
            .map_err(|e| {
                let hint = match e {
                    ReadError::TooDeep { .. } => "flatten the machine: fewer nodes inside nodes",
                    ReadError::NotJson(_) | ReadError::NotMachine => {
                        "a .json input must be canonical machine JSON (dygram generate -f json)"
                    }
                };
                CliError::new(format!("{}: {e}", input.name())).hint(hint)
            });
    }
    let project = input::compile(input, no_imports);
    if input::show_diagnostics(&project, verbosity) > 0 {
        return Ok(None);
    }
    Ok(Some(project.entry().json(JsonOptions { source_ranges })))
}

/// One output.
pub fn render(format: Format, machine: &serde_json::Value) -> Result<String, CliError> {
    outputs::render(format, machine).map_err(|e| match e {
        RenderError::Svg(ref svg) => {
            let hint = svg.hint();
            CliError::new(e.to_string()).maybe_hint(hint)
        }
        RenderError::Json(_) => CliError::new(e.to_string()),
    })
}

/// Writes outputs to `dir/<stem>.<ext>`; returns the written paths.
pub fn write_all(
    dir: &Path,
    stem: &str,
    source: Option<&Path>,
    outputs: &[(Format, String)],
) -> Result<Vec<PathBuf>, CliError> {
    outputs::write_all(dir, stem, source, outputs).map_err(|e| {
        let refused = matches!(e, WriteError::WouldOverwriteInput { .. });
        let error = CliError::new(e.to_string());
        if refused {
            error.hint("choose another destination folder with -d")
        } else {
            error
        }
    })
}

pub fn run(args: GenerateArgs) -> Result<Exit, CliError> {
    let formats = formats(&args.format)?;
    if formats.len() > 1 && args.destination.is_none() {
        return Err(CliError::usage(
            "several formats need a destination folder (one file per format)",
        )
        .hint("add -d DIR, or ask for one format at a time"));
    }
    let input = input::read(&args.file, true)?;
    let Some(machine) = machine_json(&input, args.no_imports, args.source_ranges, args.verbosity)?
    else {
        return Ok(Exit::Failed);
    };
    let mut outputs = Vec::new();
    for format in &formats {
        outputs.push((*format, render(*format, &machine)?));
    }
    match &args.destination {
        None => {
            if let Some((_, text)) = outputs.first() {
                print_out(text);
            }
        }
        Some(dir) => {
            let written = write_all(dir, &input.stem(), input.path.as_deref(), &outputs)?;
            let list: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
            print_out(&format!("{}\n", list.join("\n")));
            if args.verbosity.verbose {
                eprint_line(&format!(
                    "generated {} file(s) from {}",
                    written.len(),
                    input.name()
                ));
            }
        }
    }
    Ok(Exit::Ok)
}
