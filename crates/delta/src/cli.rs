//! Command-line interface of `delta`.

use std::process::ExitCode;

use clap::Parser;

/// delta — an AI-agent engine.
///
/// An agent is a folder (agent.yaml, system_prompt.md, tools that are plain shell commands). delta runs
/// the Think–Act–Observe loop against an LLM and journals every event in the workspace, so any run can
/// be resumed, answered, extended or retried by a later, separate call.
///
/// This build is the foundation release: the LLM and durable-state layers are in place; the `run`,
/// `continue` and `init` commands arrive in the next releases (see CHANGELOG.md).
#[derive(Debug, Parser)]
#[command(name = "delta", version, max_term_width = 100)]
struct Cli {}

pub fn main() -> ExitCode {
    // clap prints help/version itself and exits 0, or prints a usage error and exits 2.
    let _cli = Cli::parse();
    ExitCode::SUCCESS
}
