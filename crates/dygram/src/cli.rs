//! Command-line interface of `dygram`.

use std::process::ExitCode;

use clap::Parser;

/// dygram — an executable state-machine language.
///
/// A .dy file describes nodes, typed edges and annotations. `dygram execute` runs one turn per call and
/// keeps the execution under .dygram/executions/<id>/, so agents and scripts can drive a machine with
/// stateless calls; LLM responses can be recorded and played back.
///
/// This build is the foundation release: the LLM and durable-state layers are in place; the language
/// and its commands arrive in the next releases (see CHANGELOG.md).
#[derive(Debug, Parser)]
#[command(name = "dygram", version, max_term_width = 100)]
struct Cli {}

pub fn main() -> ExitCode {
    // clap prints help/version itself and exits 0, or prints a usage error and exits 2.
    let _cli = Cli::parse();
    ExitCode::SUCCESS
}
