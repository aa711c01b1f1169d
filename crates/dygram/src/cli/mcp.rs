//! `dygram mcp`: dygram as an MCP server on stdio, for agents that speak the Model Context
//! Protocol: `validate` (the diagnostics of `pv --format json`), `render` (a machine's outputs) and
//! `execute` (one turn of an execution, as `dygram execute -i` in the server's folder takes it).

use std::path::{Path, PathBuf};

use clap::Args;
use dygram_core::imports::{self, Project};
use dygram_runtime::files::Disk;
use dygram_runtime::outputs::{self, Format};
use dygram_syntax::source::SourceFile;
use mcp::server::{Handler, ServerInfo, ServerTool, ToolOutcome};
use serde_json::{Map, Value, json};

use super::serve::turn::{self, StepRequest};
use super::{CliError, Exit};

/// Serve dygram's tools over MCP on stdin/stdout, for agents and editors that speak it.
///
/// Tools: `validate` (a machine's errors and warnings, as `dygram pv --format json` gives them),
/// `render` (its canonical JSON, DOT, SVG, Mermaid or .dy source, as `dygram generate`) and
/// `execute` (one turn of an execution of a machine file, in .dygram/executions/ of the server's
/// folder, as `dygram execute -i` run there: the same JSON report; `playback` names recordings,
/// `answer` answers a waiting turn). A machine is given as `file` (relative to the folder the
/// server runs in; its imports are read) or as `text`. Point an MCP client at `dygram mcp`.
///
/// Examples:
///   dygram mcp                                   # started by the client, which talks on stdio
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct McpArgs {}

pub fn run(_: McpArgs) -> Result<Exit, CliError> {
    let info = ServerInfo {
        name: "dygram".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    mcp::server::serve(&mut Tools, &info, stdin.lock(), stdout.lock())
        .map_err(|e| CliError::new(format!("the MCP connection failed: {e}")))?;
    Ok(Exit::Ok)
}

/// dygram's tools.
struct Tools;

/// Why a tool call failed: told to the caller as a result with `isError`.
#[derive(Debug, thiserror::Error)]
enum ToolError {
    /// Neither `file` nor `text`, or both.
    #[error("give the machine as `file` or as `text` (one of them)")]
    NoMachine,
    /// `execute` without its file.
    #[error("give the machine file as `file`")]
    NoFile,
    /// The machine file could not be read.
    #[error("cannot read {file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    /// An unknown output format.
    #[error("{0}; formats: {names}", names = Format::names())]
    Format(#[from] outputs::FormatError),
    /// The machine has errors: its diagnostics, as `validate` gives them.
    #[error("the machine has errors: {0}")]
    Invalid(Value),
    /// The output could not be made (Graphviz missing, for SVG).
    #[error(transparent)]
    Render(#[from] outputs::RenderError),
    /// The turn was not taken.
    #[error(transparent)]
    Turn(#[from] turn::TurnError),
    /// The server's folder is unknown.
    #[error("cannot read the current folder: {0}")]
    Folder(std::io::Error),
}

/// The arguments that name a machine.
fn machine_schema(extra: Value) -> Value {
    let mut properties = json!({
        "file": {"type": "string", "description": "A machine file (.dy, .dygram, .mach), relative to the server's folder; its imports are read."},
        "text": {"type": "string", "description": "The machine's source, instead of a file."},
    });
    if let (Value::Object(p), Value::Object(more)) = (&mut properties, extra) {
        p.extend(more);
    }
    json!({"type": "object", "properties": properties})
}

impl Handler for Tools {
    fn tools(&self) -> Vec<ServerTool> {
        vec![
            ServerTool {
                name: "validate",
                description: "Check a DyGram machine: its errors and warnings with file, line, column and hint.",
                input_schema: machine_schema(json!({})),
            },
            ServerTool {
                name: "render",
                description: "A DyGram machine as canonical JSON, Graphviz DOT, SVG, Mermaid or .dy source.",
                input_schema: machine_schema(json!({
                    "format": {"type": "string", "enum": ["json", "dot", "svg", "mermaid", "dsl"], "description": "The output (default json)."}
                })),
            },
            ServerTool {
                name: "execute",
                description: "Take one turn of an execution of a DyGram machine file (starting one, or going on with the file's most recent or the one named by id): the report of `dygram execute -i --format json`, where it stands and the turns so far.",
                input_schema: json!({
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "description": "The machine file, relative to the server's folder."},
                        "id": {"type": "string", "description": "The execution (default: the file's most recent, or a new one)."},
                        "playback": {"type": "string", "description": "A folder of recorded answers, relative to the server's folder (for a new execution)."},
                        "answer": {"type": "string", "description": "The answer to a turn that waits for one."}
                    }
                }),
            },
        ]
    }

    fn call(&mut self, name: &str, arguments: &Map<String, Value>) -> Option<ToolOutcome> {
        let outcome = match name {
            "validate" => project(arguments).map(|project| {
                json!({"valid": !project.has_errors(), "diagnostics": project.diagnostics_json()})
            }),
            "render" => project(arguments).and_then(|project| render(&project, arguments)),
            "execute" => execute(arguments),
            _ => return None,
        };
        Some(match outcome {
            Ok(value) => ToolOutcome::Done(value),
            Err(why) => ToolOutcome::Failed(why.to_string()),
        })
    }
}

/// The machine the arguments name, loaded with its imports.
fn project(arguments: &Map<String, Value>) -> Result<Project, ToolError> {
    match (
        arguments.get("file").and_then(Value::as_str),
        arguments.get("text").and_then(Value::as_str),
    ) {
        (Some(file), None) => {
            let path = PathBuf::from(file);
            let text = std::fs::read_to_string(&path).map_err(|source| ToolError::Read {
                file: file.to_string(),
                source,
            })?;
            Ok(imports::load(
                SourceFile::new(file, text),
                Some(&path),
                &Disk,
            ))
        }
        (None, Some(text)) => Ok(imports::load(
            SourceFile::new("machine.dy", text),
            Some(Path::new("machine.dy")),
            &Disk,
        )),
        _ => Err(ToolError::NoMachine),
    }
}

fn render(project: &Project, arguments: &Map<String, Value>) -> Result<Value, ToolError> {
    let name = arguments
        .get("format")
        .and_then(Value::as_str)
        .unwrap_or("json");
    let format = Format::parse(name)?;
    if project.has_errors() {
        return Err(ToolError::Invalid(json!(project.diagnostics_json())));
    }
    let machine = project.entry().json(Default::default());
    let output = outputs::render(format, &machine)?;
    Ok(json!({"format": format.extension(), "output": output}))
}

/// One turn of the execution the arguments name, in the server's folder.
fn execute(arguments: &Map<String, Value>) -> Result<Value, ToolError> {
    let text = |key: &str| {
        arguments
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let path = text("file").ok_or(ToolError::NoFile)?;
    let request = StepRequest {
        path,
        id: text("id"),
        playback: text("playback"),
        answer: text("answer"),
    };
    let folder = std::env::current_dir().map_err(ToolError::Folder)?;
    Ok(turn::step(&folder, request)?)
}
