//! `dygram debug`: the syntax tree of a machine as JSON.

use std::path::PathBuf;

use clap::Args;
use dygram_core::render::syntax_tree::{self, TreeOptions};

use super::input;
use super::{CliError, Exit, Verbosity, print_out};

/// Print the syntax tree of a machine as JSON: what the parser read, before names are linked.
///
/// Each part of the tree is an object with its `$type` (Node, Edge, Segment, Attribute, …) and
/// its fields. A machine with errors is not printed: its errors are, as `pv` prints them.
///
/// Examples:
///   dygram debug machine.dy | jq '.items[] | select(."$type" == "Edge")'
///   dygram d machine.dy -t -s -d out/      # writes out/machine-raw.json
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct DebugArgs {
    /// The machine (.dy, .dygram, .mach), or - for standard input.
    file: PathBuf,
    /// Add `$textRegion` to every part: where it was written (offsets, lines and characters).
    #[arg(short = 't', long)]
    text_regions: bool,
    /// Add `$sourceText` to the root: the whole text.
    #[arg(short = 's', long)]
    source_text: bool,
    /// Write the tree to DIR/<name>-raw.json (the folder is created if missing) instead of stdout.
    #[arg(short, long, value_name = "DIR")]
    destination: Option<PathBuf>,
    #[command(flatten)]
    verbosity: Verbosity,
}

pub fn run(args: DebugArgs) -> Result<Exit, CliError> {
    let input = input::read(&args.file, false)?;
    let project = input::compile(&input, false);
    if input::show_diagnostics(&project, args.verbosity) > 0 {
        return Ok(Exit::Failed);
    }
    let entry = project.entry();
    let options = TreeOptions {
        text_regions: args.text_regions,
        source_text: args.source_text,
    };
    let tree = syntax_tree::to_json(&entry.program, &entry.file, options);
    match &args.destination {
        None => print_out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&tree).unwrap_or_default()
        )),
        Some(dir) => {
            let path = dygram_runtime::outputs::write_syntax_tree(dir, &input.stem(), &tree)
                .map_err(|e| {
                    CliError::with_source("cannot write the syntax tree", e)
                        .hint("choose another folder with -d, or leave -d out for stdout")
                })?;
            print_out(&format!("{}\n", path.display()));
        }
    }
    Ok(Exit::Ok)
}
