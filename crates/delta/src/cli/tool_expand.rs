//! `delta tool:expand`.

use std::path::PathBuf;

use clap::Args;
use delta::agent::tools::{Syntax, Tool};
use serde_json::json;

use super::report::agent_error;
use super::{CliError, eprint_line, print_out};

/// Show the tools of an agent with every exec:/shell: tool expanded.
///
/// PATH is an agent folder, its agent.yaml, or any YAML file with tools: (such as an imported
/// module). Prints YAML on stdout: for each tool the exact argument vector (placeholders as ${name}),
/// its parameters and how each value is passed (--format json: the same as JSON). A summary goes to
/// stderr.
///
/// Example:
///   delta tool:expand examples/hello-world
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ToolExpandArgs {
    /// Agent folder or YAML file.
    #[arg(value_name = "PATH")]
    path: PathBuf,

    /// yaml, or json (the same document).
    #[arg(long, value_enum, default_value = "yaml")]
    format: ExpandFormat,
}

/// What `tool:expand` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExpandFormat {
    /// YAML.
    Yaml,
    /// JSON.
    Json,
}

pub fn cmd_tool_expand(args: ToolExpandArgs) -> Result<(), CliError> {
    if !args.path.exists() {
        return Err(CliError::new(format!("not found: {}", args.path.display()))
            .hint("give an agent folder or a YAML file with tools:"));
    }
    let tools = delta::agent::tools_at(&args.path).map_err(agent_error)?;
    let count = |s: Syntax| tools.iter().filter(|t| t.syntax == s).count();
    eprint_line(&format!(
        "# {} tools ({} exec:, {} shell:, {} command:) from {}",
        tools.len(),
        count(Syntax::Exec),
        count(Syntax::Shell),
        count(Syntax::Legacy),
        args.path.display()
    ));
    let doc = json!({"tools": tools.iter().map(Tool::expansion).collect::<Vec<_>>()});
    match args.format {
        ExpandFormat::Yaml => print_out(
            &serde_saphyr::to_string(&doc)
                .map_err(|e| CliError::new(format!("cannot write YAML: {e}")))?,
        ),
        ExpandFormat::Json => print_out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        )),
    }
    Ok(())
}
