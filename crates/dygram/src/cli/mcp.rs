//! `dygram mcp`: dygram as an MCP server (stdio or streamable HTTP), for agents that speak the
//! Model Context Protocol: `validate` (the diagnostics of `pv --format json`), `render` (a
//! machine's outputs), `execute` and `answer` (one turn of an execution, as `dygram execute -i` in
//! the server's folder takes it), and `status`, `list`, `show` (as `dygram exec`).

use std::path::PathBuf;

use clap::Args;
use dygram_core::imports::{self, Project};
use dygram_runtime::outputs::{self, Format};
use dygram_syntax::source::SourceFile;
use mcp::server::{Call, Handler, Listen, ServerInfo, ServerTool, ToolOutcome};
use serde_json::{Map, Value, json};

use dygram_runtime::session::result::result_json;
use dygram_runtime::session::shared::{SharedError, SharedStore};
use dygram_runtime::session::{Executions, SessionError, summary_json};

use super::serve::files;
use super::serve::turn::{self, StepRequest};
use super::{CliError, Exit};

/// Serve dygram's tools over MCP, for agents and editors that speak the Model Context Protocol.
///
/// On stdin/stdout by default (the client starts `dygram mcp`); with --http ADDR on streamable HTTP
/// at http://ADDR/mcp (for clients that connect to a URL; loopback only unless you say otherwise).
///
/// Tools: `validate` (a machine's errors and warnings, as `dygram pv --format json` gives them),
/// `render` (its canonical JSON, DOT, SVG, Mermaid or .dy source, as `dygram generate`),
/// `execute` (one turn of an execution of a machine file, in .dygram/executions/ of the server's
/// folder, as `dygram execute -i` run there: the same JSON report; `playback` names recordings),
/// `answer` (the answer to a turn that waits for one, and the turn it lets go on), and `status`,
/// `list`, `show` (as `dygram exec status|list|show --format json`). A machine is given as `file`
/// (relative to the folder the server runs in; its imports are read) or as `text`. Imports are read
/// inside that folder only: one that leads out of it (`..`, an absolute path, a link) is an error. The server's
/// executions are the command line's: `dygram exec list` in that folder shows them.
///
/// Examples:
///   dygram mcp                                   # started by the client, which talks on stdio
///   dygram mcp --http 127.0.0.1:8808             # a client connects to http://127.0.0.1:8808/mcp
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct McpArgs {
    /// Serve streamable HTTP on ADDR (host:port) at the path /mcp instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,

    /// The executions are shared through this store (a PostgreSQL URL, or file:///path; also
    /// DYGRAM_STORE), named by id: execute and answer need `id`, status, list and show read the
    /// store's.
    #[arg(long, value_name = "URL", env = "DYGRAM_STORE")]
    store: Option<String>,
}

pub fn run(args: McpArgs) -> Result<Exit, CliError> {
    let info = ServerInfo {
        name: "dygram".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let root = std::env::current_dir()
        .map_err(|e| CliError::new(format!("cannot read the current folder: {e}")))?;
    let shared = match &args.store {
        // What is written to the store is scrubbed of secrets, as the command line's calls are.
        Some(url) => Some(
            super::interactive::shared_store(url)?
                .with_redactor(dygram_runtime::connect::redactor()),
        ),
        None => None,
    };
    let tools = Tools { root, shared };
    // A turn survives being stopped at any point: a signal ends the server as it comes.
    let never = std::sync::atomic::AtomicBool::new(false);
    let listen = args.http.as_deref().map_or(Listen::Stdio, Listen::Http);
    mcp::server::run(&tools, &info, listen, &never, |url| {
        super::eprint_line(&format!("MCP endpoint: {url}"));
    })
    .map_err(|e| CliError::new(e.to_string()).maybe_hint(e.hint().map(str::to_string)))?;
    Ok(Exit::Ok)
}

/// dygram's tools, on the files of one folder (and its executions, or a store's).
struct Tools {
    root: PathBuf,
    /// `--store`: the executions are the store's, named by id.
    shared: Option<SharedStore>,
}

/// Why a tool call failed: told to the caller as a result with `isError`.
#[derive(Debug, thiserror::Error)]
enum ToolError {
    /// Neither `file` nor `text`, or both.
    #[error("give the machine as `file` or as `text` (one of them)")]
    NoMachine,
    /// A required argument is missing.
    #[error("give `{0}`")]
    Missing(&'static str),
    /// A path outside the server's folder.
    #[error(transparent)]
    Path(#[from] files::PathError),
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
    /// The execution could not be read.
    #[error("{0}")]
    Execution(#[from] SessionError),
    /// The store could not be used.
    #[error("{0}")]
    Shared(#[from] SharedError),
}

/// The arguments that name a machine.
fn machine_schema(extra: Value) -> Value {
    let mut properties = json!({
        "file": {"type": "string", "description": "A machine file (.dy, .dygram, .mach), relative to the server's folder; its imports are read (inside that folder only)."},
        "text": {"type": "string", "description": "The machine's source, instead of a file."},
    });
    if let (Value::Object(p), Value::Object(more)) = (&mut properties, extra) {
        p.extend(more);
    }
    json!({"type": "object", "properties": properties})
}

/// The arguments that name an execution (default: the most recent).
fn execution_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "The execution (default: the most recent one)."}
        }
    })
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
                description: "Take one turn of an execution of a DyGram machine file (starting one, or going on with the file's most recent or the one named by id): the report of `dygram execute -i --format json`, where it stands and the turns so far. Call it again until the status is completed; a report whose status is waiting needs the answer tool.",
                input_schema: json!({
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "description": "The machine file, relative to the server's folder."},
                        "id": {"type": "string", "description": "The execution (default: the file's most recent, or a new one)."},
                        "playback": {"type": "string", "description": "A folder of recorded answers, relative to the server's folder (for a new execution)."}
                    }
                }),
            },
            ServerTool {
                name: "answer",
                description: "Answer the question of an execution that waits for one (its report said waiting), and take the turn the answer lets go on: the same report as execute.",
                input_schema: json!({
                    "type": "object",
                    "required": ["file", "text"],
                    "properties": {
                        "file": {"type": "string", "description": "The machine file, relative to the server's folder."},
                        "id": {"type": "string", "description": "The execution (default: the file's most recent)."},
                        "text": {"type": "string", "description": "The answer."}
                    }
                }),
            },
            ServerTool {
                name: "status",
                description: "Where an execution stands (as `dygram exec status --format json`): status, current nodes, turns, whether it waits for an answer.",
                input_schema: execution_schema(),
            },
            ServerTool {
                name: "list",
                description: "The executions of the server's folder (as `dygram exec list --format json`).",
                input_schema: json!({"type": "object", "properties": {}}),
            },
            ServerTool {
                name: "show",
                description: "An execution's snapshot without advancing it (as `dygram exec show --format json`): its context, paths and result so far.",
                input_schema: execution_schema(),
            },
        ]
    }

    fn call(&self, name: &str, arguments: &Map<String, Value>, _: &Call) -> Option<ToolOutcome> {
        let outcome = match name {
            "validate" => self.project(arguments).map(|project| {
                json!({"valid": !project.has_errors(), "diagnostics": project.diagnostics_json()})
            }),
            "render" => self
                .project(arguments)
                .and_then(|project| render(&project, arguments)),
            "execute" => self.step(arguments, None),
            "answer" => text(arguments, "text")
                .ok_or(ToolError::Missing("text"))
                .and_then(|answer| self.step(arguments, Some(answer))),
            "status" => self.status(arguments),
            "list" => self.list(),
            "show" => self.show(arguments),
            _ => return None,
        };
        Some(match outcome {
            Ok(value) => ToolOutcome::Done(value),
            Err(why) => ToolOutcome::Failed(why.to_string()),
        })
    }
}

/// A string argument.
fn text(arguments: &Map<String, Value>, key: &str) -> Option<String> {
    arguments
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
}

impl Tools {
    /// The machine the arguments name, loaded with its imports.
    fn project(&self, arguments: &Map<String, Value>) -> Result<Project, ToolError> {
        match (text(arguments, "file"), text(arguments, "text")) {
            (Some(file), None) => {
                let path = files::inside(&self.root, &file)?;
                let source = std::fs::read_to_string(&path).map_err(|source| ToolError::Read {
                    file: file.clone(),
                    source,
                })?;
                Ok(imports::load(
                    SourceFile::new(file, source),
                    Some(&path),
                    &files::Served::new(&self.root),
                ))
            }
            (None, Some(source)) => Ok(imports::load(
                SourceFile::new("machine.dy", source),
                Some(&self.root.join("machine.dy")),
                &files::Served::new(&self.root),
            )),
            _ => Err(ToolError::NoMachine),
        }
    }

    /// One turn of the execution the arguments name, in the server's folder.
    fn step(
        &self,
        arguments: &Map<String, Value>,
        answer: Option<String>,
    ) -> Result<Value, ToolError> {
        let request = StepRequest {
            path: text(arguments, "file").ok_or(ToolError::Missing("file"))?,
            id: text(arguments, "id"),
            playback: text(arguments, "playback"),
            answer,
        };
        Ok(turn::step(&self.root, request, self.shared.as_ref())?)
    }

    fn executions(&self) -> Executions {
        Executions::under(&self.root)
    }

    /// Hands `read` the executions that hold the execution the arguments name (this folder's, or
    /// a copy of the store's), with its id.
    fn with_execution<T>(
        &self,
        arguments: &Map<String, Value>,
        read: impl FnOnce(&Executions, &str) -> Result<T, ToolError>,
    ) -> Result<T, ToolError> {
        let id = text(arguments, "id");
        match &self.shared {
            Some(shared) => {
                let id = id.ok_or(ToolError::Missing("id"))?;
                let view = shared.view(&id)?;
                read(view.executions(), &id)
            }
            None => {
                let executions = self.executions();
                let id = executions.resolve(id.as_deref())?;
                read(&executions, &id)
            }
        }
    }

    fn status(&self, arguments: &Map<String, Value>) -> Result<Value, ToolError> {
        self.with_execution(arguments, |executions, id| Ok(executions.status_json(id)?))
    }

    fn list(&self) -> Result<Value, ToolError> {
        let rows: Vec<Value> = match &self.shared {
            Some(shared) => shared
                .list()?
                .iter()
                .map(|s| summary_json(s, None))
                .collect(),
            None => {
                let executions = self.executions();
                executions
                    .list()
                    .iter()
                    .map(|s| {
                        summary_json(s, s.metadata.as_ref().and_then(|m| executions.progress(m)))
                    })
                    .collect()
            }
        };
        Ok(json!({"executions": rows}))
    }

    fn show(&self, arguments: &Map<String, Value>) -> Result<Value, ToolError> {
        self.with_execution(arguments, show)
    }
}

/// An execution's snapshot, as `exec show --format json` prints it.
fn show(executions: &Executions, id: &str) -> Result<Value, ToolError> {
    let (state, meta) = executions.view(id)?;
    let mut shown = result_json(&state);
    shown["id"] = json!(id);
    shown["turns"] = json!(meta.turn_count);
    Ok(shown)
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
