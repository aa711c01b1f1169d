//! `delta tools`: every tool the model will see.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::report::agent_error;
use super::{CliError, print_out};

/// List every tool a run of the agent offers the model: its own, the built-in session tools (with
/// `sessions: true`), the tools of its MCP servers (started to be asked, then stopped) and ask_human.
///
/// Each with its name, description and parameters (JSON Schema); --format json prints the definitions
/// exactly as they are sent.
///
/// Example:
///   delta tools -a examples/shell-session
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ToolsArgs {
    /// Agent folder.
    #[arg(short = 'a', long = "agent", value_name = "DIR", default_value = ".")]
    agent: PathBuf,

    /// text, or json.
    #[arg(long, value_enum, default_value = "text")]
    format: ToolsFormat,
}

/// What `tools` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ToolsFormat {
    Text,
    Json,
}

pub fn cmd_tools(args: ToolsArgs) -> Result<(), CliError> {
    let agent = delta::agent::load(&args.agent).map_err(agent_error)?;
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut env = delta::env::Env::from_process();
    env.load_cascade(&cwd, &agent.dir, &cwd)
        .map_err(CliError::from_error)?;
    let (tools, warnings) = delta::mcp_servers::offered_tools(&agent, &env, &cwd).map_err(|e| {
        CliError::from_error(e)
            .hint("check the server's command or URL in mcp_servers: (delta tools starts each server to list its tools)")
    })?;
    for warning in &warnings {
        super::eprint_line(&format!("warning: {warning}"));
    }
    match args.format {
        ToolsFormat::Json => {
            let list: Vec<_> = tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
                .collect();
            print_out(&format!(
                "{}\n",
                serde_json::to_string_pretty(&json!(list)).unwrap_or_default()
            ));
        }
        ToolsFormat::Text => {
            let mut text = String::new();
            for t in &tools {
                let params: Vec<String> = t.parameters["properties"]
                    .as_object()
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                text.push_str(&format!("{}({})\n", t.name, params.join(", ")));
                if !t.description.is_empty() {
                    text.push_str(&format!(
                        "    {}\n",
                        t.description.lines().next().unwrap_or("")
                    ));
                }
            }
            super::print_text(&text);
        }
    }
    Ok(())
}
