//! `delta tool:expand`.

use std::path::PathBuf;

use clap::Args;
use delta::agent::tools::{Inject, Syntax, Tool};
use serde_json::{Map, Value, json};

use super::report::agent_error;
use super::{CliError, eprint_line, print_out};

/// Show the tools of an agent with every exec:/shell: tool expanded.
///
/// PATH is an agent folder, its agent.yaml, or any YAML file with tools: (such as an imported
/// module). Prints YAML on stdout: for each tool the exact argument vector (placeholders as ${name}),
/// its parameters and how each value is passed. A summary goes to stderr.
///
/// Example:
///   delta tool:expand examples/hello-world
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ToolExpandArgs {
    /// Agent folder or YAML file.
    #[arg(value_name = "PATH")]
    path: PathBuf,
}

fn describe(tool: &Tool) -> Value {
    let mut t = Map::new();
    t.insert("name".into(), json!(tool.name));
    if let Some(d) = &tool.description {
        t.insert("description".into(), json!(d));
    }
    t.insert("command".into(), json!(tool.display_argv()));
    let params: Vec<Value> = tool
        .params
        .iter()
        .map(|p| {
            let mut m = Map::new();
            m.insert("name".into(), json!(p.name));
            m.insert("type".into(), json!(p.kind.as_str()));
            m.insert("inject_as".into(), json!(p.inject.as_str()));
            if let Inject::Option(flag) = &p.inject {
                m.insert("option_name".into(), json!(flag));
            }
            if let Some(d) = &p.description {
                m.insert("description".into(), json!(d));
            }
            Value::Object(m)
        })
        .collect();
    t.insert("parameters".into(), Value::Array(params));
    t.insert("timeout_seconds".into(), json!(tool.timeout.as_secs_f64()));
    let mut meta = Map::new();
    meta.insert("syntax".into(), json!(tool.syntax.as_str()));
    if let Some(template) = &tool.template {
        meta.insert("original_template".into(), json!(template));
    }
    t.insert("__meta".into(), Value::Object(meta));
    Value::Object(t)
}

pub fn cmd_tool_expand(args: ToolExpandArgs) -> Result<(), CliError> {
    if !args.path.exists() {
        return Err(CliError::new(format!("not found: {}", args.path.display()))
            .hint("give an agent folder or a YAML file with tools:"));
    }
    let is_agent_file = args
        .path
        .file_name()
        .is_some_and(|n| n == "agent.yaml" || n == "config.yaml");
    let tools = if args.path.is_dir() {
        delta::agent::load(&args.path).map_err(agent_error)?.tools
    } else if is_agent_file {
        // An agent's own configuration: load the whole agent, so agent-wide settings apply.
        let dir = args
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        delta::agent::load(dir).map_err(agent_error)?.tools
    } else {
        delta::agent::load_tools(&args.path).map_err(agent_error)?
    };
    let count = |s: Syntax| tools.iter().filter(|t| t.syntax == s).count();
    eprint_line(&format!(
        "# {} tools ({} exec:, {} shell:, {} command:) from {}",
        tools.len(),
        count(Syntax::Exec),
        count(Syntax::Shell),
        count(Syntax::Legacy),
        args.path.display()
    ));
    let doc = json!({"tools": tools.iter().map(describe).collect::<Vec<_>>()});
    let yaml = serde_saphyr::to_string(&doc)
        .map_err(|e| CliError::new(format!("cannot write YAML: {e}")))?;
    print_out(&yaml);
    Ok(())
}
