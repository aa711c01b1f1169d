//! `dygram generate`: outputs of a machine.

use std::path::{Path, PathBuf};

use clap::Args;
use dygram::json::JsonOptions;

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

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Dot,
    Svg,
    Mermaid,
    Dsl,
}

impl Format {
    pub fn parse(s: &str) -> Result<Self, CliError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "json" => Ok(Self::Json),
            "dot" | "graphviz" => Ok(Self::Dot),
            "svg" => Ok(Self::Svg),
            "mermaid" | "mmd" => Ok(Self::Mermaid),
            "dsl" | "dy" => Ok(Self::Dsl),
            other => Err(CliError::usage(format!("unknown format `{other}`"))
                .hint("formats: json, dot (or graphviz), svg, mermaid, dsl")),
        }
    }

    /// File extension of the output.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Dot => "dot",
            Self::Svg => "svg",
            Self::Mermaid => "mmd",
            Self::Dsl => "dy",
        }
    }
}

/// Parses a list of formats (duplicates removed, order kept).
pub fn formats(list: &[String]) -> Result<Vec<Format>, CliError> {
    let mut out = Vec::new();
    for f in list.iter().filter(|f| !f.trim().is_empty()) {
        let f = Format::parse(f)?;
        if !out.contains(&f) {
            out.push(f);
        }
    }
    if out.is_empty() {
        return Err(CliError::usage("no format given").hint("e.g. -f json or -f dot,svg"));
    }
    Ok(out)
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
        let value: serde_json::Value = serde_json::from_str(&input.text).map_err(|e| {
            CliError::new(format!("{}: not valid JSON: {e}", input.name()))
                .hint("a .json input must be canonical machine JSON (dygram generate -f json)")
        })?;
        if !value.get("nodes").is_some_and(serde_json::Value::is_array) {
            return Err(CliError::new(format!(
                "{}: not a machine (no \"nodes\" array)",
                input.name()
            ))
            .hint("a .json input must be canonical machine JSON (dygram generate -f json)"));
        }
        let depth = dygram::dsl::nesting_depth(&value);
        if depth > dygram::syntax::parser::MAX_NESTING {
            return Err(CliError::new(format!(
                "{}: nodes nested {depth} levels deep; at most {} levels are accepted",
                input.name(),
                dygram::syntax::parser::MAX_NESTING
            ))
            .hint("flatten the machine: fewer nodes inside nodes"));
        }
        return Ok(Some(value));
    }
    let project = input::compile(input, no_imports);
    if input::show_diagnostics(&project, verbosity) > 0 {
        return Ok(None);
    }
    Ok(Some(project.entry().json(JsonOptions { source_ranges })))
}

/// One output.
pub fn render(format: Format, machine: &serde_json::Value) -> Result<String, CliError> {
    Ok(match format {
        Format::Json => {
            let mut text = serde_json::to_string_pretty(machine)
                .map_err(|e| CliError::new(format!("cannot write JSON: {e}")))?;
            text.push('\n');
            text
        }
        Format::Dot => {
            let mut text = dygram::dot::to_dot(machine);
            text.push('\n');
            text
        }
        Format::Svg => {
            let dot = dygram::dot::to_dot(machine);
            dygram::dot::to_svg(&dot).map_err(|e| {
                CliError::new(e.to_string())
                    .hint("install Graphviz (e.g. apt-get install graphviz), or use -f dot")
            })?
        }
        Format::Mermaid => dygram::mermaid::to_mermaid(machine),
        Format::Dsl => dygram::dsl::to_dsl(machine),
    })
}

/// Writes outputs to `dir/<stem>.<ext>`; returns the written paths.
pub fn write_all(
    dir: &Path,
    stem: &str,
    source: Option<&Path>,
    outputs: &[(Format, String)],
) -> Result<Vec<PathBuf>, CliError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::new(format!("cannot create {}: {e}", dir.display())))?;
    let mut written = Vec::new();
    for (format, text) in outputs {
        let path = dir.join(format!("{stem}.{}", format.extension()));
        if let Some(source) = source
            && same_file(source, &path)
        {
            return Err(CliError::new(format!(
                "refusing to overwrite the input {} with the {} output",
                source.display(),
                format.extension()
            ))
            .hint("choose another destination folder with -d"));
        }
        std::fs::write(&path, text)
            .map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))?;
        written.push(path);
    }
    Ok(written)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
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
