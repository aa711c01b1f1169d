//! `delta mcp`: delta as an MCP server (stdio or streamable HTTP), for agents that speak the Model
//! Context Protocol: `run` an agent, `continue` a run (a message, or the answer to its question),
//! `list_runs` of a workspace and `show` a run's transcript. A run goes through the library's
//! runner as `delta run` and `delta continue` do (locks, busy answers, redaction), reports each
//! iteration and tool call as progress, and stops, journaled as INTERRUPTED, when the client
//! cancels the call.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clap::Args;
use delta::agent;
use delta::connect::LlmMode;
use delta::engine::{Observer, Progress};
use delta::run_result::json_result;
use delta::runner::{Continue, Finished, NewRun, Request, Runner, WorkspaceRef};
use delta::transcript::{self, Transcript};
use delta::workspace;
use mcp::server::{Call, Handler, Listen, ServerInfo, ServerTool, ToolOutcome};
use serde_json::{Map, Value, json};

mod in_store;

use super::report::{self, CliHost, Flags};
use super::result::RunFormat;
use super::{CliError, Exit, eprint_line};

/// Serve delta's tools over MCP, for agents and editors that speak the Model Context Protocol.
///
/// On stdin/stdout by default (the client starts `delta mcp`); with --http ADDR on streamable HTTP
/// at http://ADDR/mcp (loopback only unless you say otherwise).
///
/// Tools: `run` (run an agent on a task, as `delta run --format json`), `continue` (go on with a
/// run: a new message, or the answer to the question it waits on, as `delta continue`),
/// `list_runs` (a workspace's runs, as `delta list-runs --format json`) and `show` (a run's
/// transcript, as `delta show --format json`). Paths (agent, workspace, playback) are relative to
/// the folder the server runs in and stay inside it. A run reports each iteration and tool call as
/// progress; a cancelled call interrupts its run, which `continue` resumes; a run that asks a
/// question returns it (status WAITING_FOR_INPUT) and `continue` with the answer goes on. The model
/// is reached as `delta run` reaches it (agent.yaml, DELTA_* and .env); the runs are the command
/// line's: `delta list-runs -w WS` shows them.
///
/// Examples:
///   delta mcp                                    # started by the client, which talks on stdio
///   delta mcp --http 127.0.0.1:8809              # a client connects to http://127.0.0.1:8809/mcp
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct McpArgs {
    /// Serve streamable HTTP on ADDR (host:port) at the path /mcp instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,

    /// The runs are kept in this store (a PostgreSQL URL, or file:///path; also DELTA_STORE):
    /// `run` queues a run for the store's workers, `continue` works on one here (a working copy
    /// under .delta-copies), `list_runs` and `show` read the store's (by run_id).
    #[arg(long, value_name = "URL", env = "DELTA_STORE")]
    store: Option<String>,
}

pub fn cmd_mcp(args: McpArgs) -> Result<Exit, CliError> {
    let info = ServerInfo {
        name: "delta".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let root = std::env::current_dir()
        .map_err(|e| CliError::new(format!("cannot read the current folder: {e}")))?;
    let store = match &args.store {
        Some(url) => Some(in_store::InStore::open(url, &root)?),
        None => None,
    };
    let tools = Tools {
        root,
        store,
        running: Mutex::new(Vec::new()),
        stopping: AtomicBool::new(false),
    };
    let interrupt = super::terminal::install_signal_handlers()?;
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| tools.stop_runs_on(&interrupt, &stop));
        let served = serve(&tools, &info, args.http.as_deref(), &stop);
        stop.store(true, Ordering::SeqCst);
        served
    })?;
    Ok(Exit::Ok)
}

fn serve(
    tools: &Tools,
    info: &ServerInfo,
    http: Option<&str>,
    stop: &AtomicBool,
) -> Result<(), CliError> {
    let listen = http.map_or(Listen::Stdio, Listen::Http);
    mcp::server::run(tools, info, listen, stop, |url| {
        eprint_line(&format!("MCP endpoint: {url}"));
    })
    .map_err(|e| CliError::new(e.to_string()).maybe_hint(e.hint().map(str::to_string)))
}

/// delta's tools, on the agents and workspaces of one folder (or the runs of a store).
struct Tools {
    root: PathBuf,
    /// `--store`: the runs are the store's.
    store: Option<in_store::InStore>,
    /// The interrupt flags of the runs in progress (raised together by a signal).
    running: Mutex<Vec<Arc<AtomicBool>>>,
    /// A signal asked the server to stop: no run starts any more.
    stopping: AtomicBool,
}

/// Why a tool call failed: told to the caller as a result with `isError`.
#[derive(Debug, thiserror::Error)]
enum ToolError {
    /// A required argument is missing.
    #[error("give `{0}`")]
    Missing(&'static str),
    /// A path outside the server's folder.
    #[error(transparent)]
    Path(#[from] cli_edge::paths::Outside),
    /// The command line's error: the message, then its hints.
    #[error("{0}")]
    Cli(String),
}

impl From<CliError> for ToolError {
    fn from(e: CliError) -> Self {
        let mut text = e.message().to_string();
        for hint in e.hints() {
            text.push_str(&format!(" (hint: {hint})"));
        }
        Self::Cli(text)
    }
}

/// A string argument.
fn text(arguments: &Map<String, Value>, key: &str) -> Option<String> {
    arguments
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
}

pub(super) fn schema(required: &[&str], properties: Value) -> Value {
    json!({"type": "object", "required": required, "properties": properties})
}

impl Handler for Tools {
    fn tools(&self) -> Vec<ServerTool> {
        if self.store.is_some() {
            return in_store::tools();
        }
        let workspace = json!({"type": "string", "description": "The workspace folder, relative to the server's folder."});
        let run_id =
            json!({"type": "string", "description": "The run (default: the workspace's latest)."});
        vec![
            ServerTool {
                name: "run",
                description: "Run a delta agent on a task until it completes, fails, or waits for an answer: the result of `delta run --format json` (status, final answer, the question of a waiting run, usage).",
                input_schema: schema(
                    &["agent", "message"],
                    json!({
                        "agent": {"type": "string", "description": "The agent folder (agent.yaml, system_prompt.md), relative to the server's folder."},
                        "message": {"type": "string", "description": "The task."},
                        "workspace": {"type": "string", "description": "Where the run works and is journaled, relative to the server's folder (default: the agent's next workspaces/Wnnn)."},
                        "run_id": {"type": "string", "description": "An id for the new run (default: a generated one)."},
                        "max_iterations": {"type": "integer", "minimum": 1, "description": "The iteration budget (default: the agent's)."},
                        "playback": {"type": "string", "description": "A folder of recorded answers to replay instead of calling the model, relative to the server's folder."}
                    }),
                ),
            },
            ServerTool {
                name: "continue",
                description: "Go on with a run: resume an interrupted one, answer the question of one that waits (message = the answer), extend a completed one or retry a failed one with a new message. The same result as run.",
                input_schema: schema(
                    &["workspace"],
                    json!({
                        "workspace": workspace,
                        "run_id": run_id,
                        "message": {"type": "string", "description": "The answer, new instructions, or guidance for a retry."},
                        "max_iterations": {"type": "integer", "minimum": 1, "description": "The iteration budget of this call."},
                        "playback": {"type": "string", "description": "A folder of recorded answers, relative to the server's folder."}
                    }),
                ),
            },
            ServerTool {
                name: "list_runs",
                description: "The runs of a workspace, newest first (as `delta list-runs --format json`): status, task, final answer or pending question.",
                input_schema: schema(&["workspace"], json!({"workspace": workspace})),
            },
            ServerTool {
                name: "show",
                description: "A run's transcript (as `delta show --format json`): its messages, tool calls and their results.",
                input_schema: schema(
                    &["workspace"],
                    json!({"workspace": workspace, "run_id": run_id}),
                ),
            },
        ]
    }

    fn call(&self, name: &str, arguments: &Map<String, Value>, call: &Call) -> Option<ToolOutcome> {
        let outcome = match (name, &self.store) {
            ("run", Some(store)) => store.submit(self, arguments),
            ("continue", Some(store)) => store.go_on(self, arguments, call),
            ("list_runs", Some(store)) => store.list(),
            ("show", Some(store)) => store.show(arguments),
            ("run", None) => self.start(arguments, call),
            ("continue", None) => self.go_on(arguments, call),
            ("list_runs", None) => self.list_runs(arguments),
            ("show", None) => self.show(arguments),
            _ => return None,
        };
        Some(match outcome {
            Ok(value) => ToolOutcome::Done(value),
            Err(why) => ToolOutcome::Failed(why.to_string()),
        })
    }
}

impl Tools {
    /// Raises every run's interrupt flag once the process is asked to stop (SIGINT, SIGTERM),
    /// waits for the runs to journal it (at most 10 s), and ends the process.
    fn stop_runs_on(&self, interrupt: &AtomicBool, stop: &AtomicBool) {
        while !stop.load(Ordering::SeqCst) {
            if interrupt.load(Ordering::SeqCst) {
                self.stopping.store(true, Ordering::SeqCst);
                for flag in self
                    .running
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                {
                    flag.store(true, Ordering::SeqCst);
                }
                for _ in 0..100 {
                    if self
                        .running
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .is_empty()
                    {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                std::process::exit(Exit::Interrupted as i32);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn inside(&self, relative: &str) -> Result<PathBuf, ToolError> {
        Ok(cli_edge::paths::inside(&self.root, relative)?)
    }

    fn start(&self, arguments: &Map<String, Value>, call: &Call) -> Result<Value, ToolError> {
        let agent_dir =
            self.inside(&text(arguments, "agent").ok_or(ToolError::Missing("agent"))?)?;
        let message = text(arguments, "message")
            .filter(|m| !m.trim().is_empty())
            .ok_or(ToolError::Missing("message"))?;
        if let Some(id) = text(arguments, "run_id") {
            workspace::validate_run_id(&id)
                .map_err(|e| CliError::usage(e.to_string()).hint(e.hint()))?;
        }
        let agent = agent::load(&agent_dir).map_err(report::agent_error)?;
        let (workspace, workspace_name, next) = match text(arguments, "workspace") {
            Some(ws) => (self.inside(&ws)?, None, false),
            None => {
                let root = workspace::workspaces_root(&agent.dir);
                let name = workspace::next_id(&root);
                (root.join(&name), Some(name), true)
            }
        };
        let request = Request::Run(Box::new(NewRun {
            agent,
            workspace,
            workspace_name,
            next_workspace: next,
            auto_resume: false,
            message,
            run_id: text(arguments, "run_id"),
        }));
        self.drive(request, arguments, call)
    }

    fn go_on(&self, arguments: &Map<String, Value>, call: &Call) -> Result<Value, ToolError> {
        let workspace =
            self.inside(&text(arguments, "workspace").ok_or(ToolError::Missing("workspace"))?)?;
        let request = Request::Continue(Continue {
            workspace: WorkspaceRef::Dir(workspace),
            run_id: text(arguments, "run_id"),
            message: text(arguments, "message"),
            with_file: None,
            fork_at: None,
        });
        self.drive(request, arguments, call)
    }

    /// Runs `request` until the run stops: the result object of `--format json`.
    fn drive(
        &self,
        request: Request,
        arguments: &Map<String, Value>,
        call: &Call,
    ) -> Result<Value, ToolError> {
        self.drive_with(arguments, call, |runner| {
            runner
                .run(request)
                .map_err(|e| report::runner_error(e).into())
        })
    }

    /// Hands `go` a runner set up for this call (its answer source, budget, progress and
    /// cancellation), and reports the run it stopped: the result object of `--format json`.
    fn drive_with(
        &self,
        arguments: &Map<String, Value>,
        call: &Call,
        go: impl FnOnce(Runner<'_>) -> Result<Finished, ToolError>,
    ) -> Result<Value, ToolError> {
        let mode = match text(arguments, "playback") {
            Some(dir) => LlmMode::Playback(self.inside(&dir)?),
            None => LlmMode::Live,
        };
        let max_iterations = arguments
            .get("max_iterations")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n > 0);
        let flags = Flags {
            quiet: true,
            max_iterations,
            model: None,
            sandbox: None,
            network: None,
            approvals: delta::runner::Approvals::default(),
            interactive: false,
            verbose: false,
            format: RunFormat::Json,
            mode,
            adopt: false,
        };
        let (clock, ids) = report::clock_and_ids()?;
        let interrupt = Arc::clone(call.cancelled());
        let mut options = report::options(&flags, clock, ids, Arc::clone(&interrupt));
        options.cwd = self.root.clone();
        options.process_ends = false;
        let mut host = CliHost::new(&flags, clock);
        host.quiet = true;
        let mut observer = Reporter { call, steps: 0.0 };
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&interrupt));
        // Registered first, looked at after: a stop either sees this run or this run sees it.
        if self.stopping.load(Ordering::SeqCst) {
            interrupt.store(true, Ordering::SeqCst);
        }
        let runner = Runner {
            options,
            observer: &mut observer,
            human: None,
            host: &mut host,
            tools: None,
        };
        let finished = go(runner);
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|flag| !Arc::ptr_eq(flag, &interrupt));
        let finished = finished?;
        let mut result =
            report::with_result_context(&finished, |ctx| json_result(&finished.outcome, ctx));
        let workspace = finished.workspace.display().to_string();
        result["workspace"] = json!(workspace);
        result["run_id"] = json!(finished.run.run_id);
        Ok(result)
    }

    fn list_runs(&self, arguments: &Map<String, Value>) -> Result<Value, ToolError> {
        let workspace =
            self.inside(&text(arguments, "workspace").ok_or(ToolError::Missing("workspace"))?)?;
        let runs = delta::runs::list(&workspace).map_err(super::store_error)?;
        let runs: Vec<Value> = runs.iter().map(super::list_runs::to_json).collect();
        Ok(json!({"runs": runs}))
    }

    fn show(&self, arguments: &Map<String, Value>) -> Result<Value, ToolError> {
        let workspace =
            self.inside(&text(arguments, "workspace").ok_or(ToolError::Missing("workspace"))?)?;
        let run_id = text(arguments, "run_id");
        if let Some(id) = &run_id {
            workspace::validate_run_id(id)
                .map_err(|e| CliError::usage(e.to_string()).hint(e.hint()))?;
        }
        let Some(run) = transcript::find_run(&workspace, run_id.as_deref()) else {
            return Err(ToolError::Cli(format!(
                "no run {} in {}",
                run_id.as_deref().unwrap_or("at all"),
                workspace.display()
            )));
        };
        let transcript = Transcript::load(&run).map_err(|e| match e {
            transcript::TranscriptError::Store(e) => super::store_error(e),
        })?;
        serde_json::to_value(&transcript).map_err(|e| ToolError::Cli(e.to_string()))
    }
}

/// Tells the client how a run gets on: each iteration, tool call, question and note.
struct Reporter<'a, 'c> {
    call: &'a Call<'c>,
    steps: f64,
}

impl Observer for Reporter<'_, '_> {
    fn progress(&mut self, event: Progress) {
        let message = match event {
            Progress::Iteration {
                n,
                max,
                run_iteration,
            } => format!("iteration {n} of at most {max} (the run's {run_iteration})"),
            Progress::ToolCall { name, .. } => format!("calling {name}"),
            Progress::ToolDone {
                exit_code, stopped, ..
            } => match stopped {
                Some(why) => format!("the tool stopped: {why}"),
                None => format!("the tool exited with {exit_code}"),
            },
            Progress::Paused(question) => format!("waiting for an answer: {question}"),
            Progress::Compacted { note, .. } | Progress::Note(note) => note,
            _ => return,
        };
        self.steps += 1.0;
        self.call.progress(self.steps, None, &message);
    }
}
