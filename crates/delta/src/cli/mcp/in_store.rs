//! `delta mcp --store URL`: the tools on the runs of a store. `run` queues a run for the store's
//! workers (as `delta submit`), `continue` works on a run here in a working copy (as `delta
//! continue --store`), `list_runs` and `show` read the store's records (as `list-runs --store` and
//! `show --store`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use delta::agent;
use delta::fleet::work::{Ask, Parts, Settings, Worked, continue_run};
use delta::fleet::{self, Submission, admin};
use serde_json::{Map, Value, json};
use store::RunStore;

use super::super::fleet::{default_copies, fleet_error, store_transcript};
use super::super::report;
use super::{Call, ToolError, Tools, schema, text};
use crate::cli::CliError;
use mcp::server::ServerTool;

/// The tools as they take their arguments with a store: runs are named by `run_id`.
pub(super) fn tools() -> Vec<ServerTool> {
    let run_id = json!({"type": "string", "description": "The run, as the store names it."});
    vec![
        ServerTool {
            name: "run",
            description: "Queue a run of a delta agent in the store, for its workers (as `delta submit`): its run_id and status QUEUED; follow it with list_runs and show.",
            input_schema: schema(
                &["agent", "message"],
                json!({
                    "agent": {"type": "string", "description": "The agent folder (agent.yaml, system_prompt.md), relative to the server's folder."},
                    "message": {"type": "string", "description": "The task."},
                    "workspace": {"type": "string", "description": "Where the run works, relative to the server's folder (default: a working copy the worker makes)."},
                    "run_id": {"type": "string", "description": "An id for the new run (default: a generated one)."},
                    "max_iterations": {"type": "integer", "minimum": 1, "description": "The iteration budget (default: the agent's)."}
                }),
            ),
        },
        ServerTool {
            name: "continue",
            description: "Go on with a run of the store here, in a working copy (as `delta continue --store`): resume it, answer its question (message = the answer), extend or retry it. The result of `delta run --format json`.",
            input_schema: schema(
                &["run_id"],
                json!({
                    "run_id": run_id,
                    "message": {"type": "string", "description": "The answer, new instructions, or guidance for a retry."},
                    "max_iterations": {"type": "integer", "minimum": 1, "description": "The iteration budget of this call."}
                }),
            ),
        },
        ServerTool {
            name: "list_runs",
            description: "The runs of the store, newest first (as `delta list-runs --store URL --format json`).",
            input_schema: json!({"type": "object", "properties": {}}),
        },
        ServerTool {
            name: "show",
            description: "A run's transcript, from the store (as `delta show --store URL --format json`).",
            input_schema: schema(&["run_id"], json!({"run_id": run_id})),
        },
    ]
}

/// An open store.
pub(super) struct InStore {
    url: String,
    store: Arc<dyn RunStore>,
    /// Where working copies of continued runs go.
    copies: PathBuf,
}

impl InStore {
    pub(super) fn open(url: &str, root: &Path) -> Result<Self, CliError> {
        Ok(Self {
            url: url.to_string(),
            store: fleet::open(url).map_err(fleet_error)?,
            copies: root.join(default_copies()),
        })
    }

    /// Queues a run of the agent the arguments name: its id, QUEUED.
    pub(super) fn submit(
        &self,
        tools: &Tools,
        arguments: &Map<String, Value>,
    ) -> Result<Value, ToolError> {
        let agent_dir =
            tools.inside(&text(arguments, "agent").ok_or(ToolError::Missing("agent"))?)?;
        let message = text(arguments, "message")
            .filter(|m| !m.trim().is_empty())
            .ok_or(ToolError::Missing("message"))?;
        let loaded = agent::load(&agent_dir).map_err(report::agent_error)?;
        let workspace = match text(arguments, "workspace") {
            Some(ws) => Some(tools.inside(&ws)?),
            None => None,
        };
        let (clock, ids) = report::clock_and_ids()?;
        let submission = Submission {
            agent: loaded.dir.clone(),
            task: message,
            model: None,
            workspace,
            max_iterations: arguments
                .get("max_iterations")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n > 0),
            submitted: delta::events::timestamp(clock.now()),
        };
        let run_id = text(arguments, "run_id");
        let id = fleet::submit(&*self.store, &submission, run_id.as_deref(), clock, &ids)
            .map_err(fleet_error)?;
        Ok(json!({"run_id": id, "status": "QUEUED", "store": true}))
    }

    /// Goes on with the run the arguments name, here, in its working copy.
    pub(super) fn go_on(
        &self,
        tools: &Tools,
        arguments: &Map<String, Value>,
        call: &Call,
    ) -> Result<Value, ToolError> {
        let run_id = text(arguments, "run_id").ok_or(ToolError::Missing("run_id"))?;
        let settings = Settings {
            dir: self.copies.clone(),
            renew: self.store.renew_every(),
            shutdown: Arc::new(AtomicBool::new(false)),
        };
        let ask = Ask::Continue {
            message: text(arguments, "message"),
            with_file: None,
        };
        tools.drive_with(arguments, call, |runner| {
            let parts = Parts {
                options: runner.options,
                observer: runner.observer,
                host: runner.host,
                human: runner.human,
            };
            match continue_run(&self.store, &run_id, ask, &settings, parts).map_err(fleet_error)? {
                Worked::Stopped { finished, .. } => Ok(*finished),
                _ => Err(ToolError::Cli(format!(
                    "run {run_id} was lost to another process, or the store could not be reached, \
                     while it worked here; nothing more was written (continue it again)"
                ))),
            }
        })
    }

    /// The store's runs, newest first.
    pub(super) fn list(&self) -> Result<Value, ToolError> {
        let mut list = admin::list(&*self.store).map_err(fleet_error)?;
        list.sort_by(|a, b| b.created.cmp(&a.created).then(b.run_id.cmp(&a.run_id)));
        Ok(json!({"runs": serde_json::to_value(&list).map_err(|e| ToolError::Cli(e.to_string()))?}))
    }

    /// The transcript of the run the arguments name.
    pub(super) fn show(&self, arguments: &Map<String, Value>) -> Result<Value, ToolError> {
        let run_id = text(arguments, "run_id").ok_or(ToolError::Missing("run_id"))?;
        let transcript = store_transcript(&self.url, &run_id)?;
        serde_json::to_value(&transcript).map_err(|e| ToolError::Cli(e.to_string()))
    }
}
