//! The run's MCP servers in the loop: started before the first model request (and on resume, after
//! what a previous process left is stopped), their tools offered through the registry, each call
//! journaled like a shell tool's, the tool list followed when a server says it changed, and every
//! server stopped when the process is done with the run.

use serde_json::{Map, Value, json};

use super::act::{Begin, Requested};
use super::observation;
use super::registry::ToolRegistry;
use super::{Engine, EngineError, Observer, Progress, RunOutcome};
use crate::agent::HookName;
use crate::events::{ActionStatus, Event, Level};
use crate::mcp_servers::{McpServerError, McpServers, Places};

impl Engine<'_> {
    /// Starts the agent's MCP servers and offers their tools; an error message when one cannot be
    /// started (the run fails with it).
    pub(super) fn start_mcp(&mut self) -> Result<Option<String>, EngineError> {
        if self.setup.agent.mcp_servers.is_empty() {
            return Ok(None);
        }
        let created = {
            let lookup = crate::agent::mcp::lookup(&self.setup.env, &self.setup.agent.dir);
            let places = Places {
                run_root: Some(&self.setup.run.root),
                workspace: &self.setup.run.workspace,
                agent_dir: &self.setup.agent.dir,
            };
            McpServers::new(
                &self.setup.agent.mcp_servers,
                &lookup,
                &places,
                self.tool_env.clone(),
            )
        };
        let mut servers = match created {
            Ok((servers, _)) => servers,
            Err(e) => return Ok(Some(e.to_string())),
        };
        servers.set_redactor(self.setup.redactor.clone());
        servers.set_interrupt(std::sync::Arc::clone(&self.setup.interrupt));
        servers.set_sandbox(self.setup.agent.sandbox.clone());
        let stopped = servers.stop_leftovers();
        if !stopped.is_empty() {
            self.system(
                Level::Warn,
                &format!(
                    "Stopped MCP servers left running by the previous process: {}",
                    stopped.join(", ")
                ),
            )?;
        }
        let started = servers.start_all();
        self.mcp = Some(servers);
        if let Err(e) = started {
            return Ok(Some(e.to_string()));
        }
        self.offer_mcp_tools();
        Ok(None)
    }

    /// Rebuilds the registry with the servers' tools as they are now.
    fn offer_mcp_tools(&mut self) {
        let Some(servers) = &self.mcp else { return };
        let (tools, refused) = servers.tools();
        self.tools = ToolRegistry::with_mcp(&self.setup.agent, tools);
        self.offer_host_tools();
        for warning in crate::mcp_servers::left_out(&refused, self.tools.skipped_mcp()) {
            self.log(&warning);
            self.observer.progress(Progress::Note(warning));
        }
    }

    /// Follows the servers that said their tools changed (before each model request).
    pub(super) fn refresh_mcp(&mut self) {
        if self.mcp.as_mut().is_some_and(McpServers::refresh) {
            self.log("An MCP server's tools changed; the model is offered the new list");
            self.offer_mcp_tools();
        }
    }

    /// Stops the run's MCP servers (this process is done with the run).
    pub(super) fn stop_mcp(&mut self) {
        if let Some(mut servers) = self.mcp.take() {
            servers.stop_all();
        }
    }

    /// Runs call `id` of the MCP tool at `index` of the registry.
    pub(super) fn run_mcp_tool(
        &mut self,
        id: &str,
        name: &str,
        index: usize,
        args: &Map<String, Value>,
    ) -> Result<Option<RunOutcome>, EngineError> {
        let Some(tool) = self.tools.mcp_tool(index).cloned() else {
            self.error_result(id, format!("Error: {name}: the tool is no longer offered"))?;
            return Ok(None);
        };
        let resolved = format!("{name} {}", Value::Object(args.clone()));
        let call = match self.begin_call(id, name, args, &resolved)? {
            Begin::Run(call) => call,
            Begin::Done(outcome) => return Ok(outcome.map(|o| *o)),
        };
        let Some(servers) = &mut self.mcp else {
            self.error_result(id, format!("Error: {name}: its MCP server is not running"))?;
            return Ok(None);
        };
        let server = servers.name(tool.server).to_string();
        let called = servers.call(tool.server, &tool.info.name, args.clone());
        if let Err(McpServerError::Client {
            source: mcp::McpError::Cancelled { .. },
            ..
        }) = called
        {
            self.append(Event::ActionResult {
                action_id: id.to_string(),
                status: ActionStatus::Failed,
                observation_content: format!(
                    "=== INTERRUPTED: the run was stopped while {name} was running; the call was \
                     cancelled and may or may not have taken effect ==="
                ),
                execution_ref: String::new(),
            })?;
            return Ok(Some(self.interrupt_run()?));
        }
        self.finish_mcp_call(call, &server, called)
    }

    /// Journals an MCP call's result and keeps its record (request, raw result, the text the model
    /// reads) under `io/tool_executions/`.
    fn finish_mcp_call(
        &mut self,
        call: Requested<'_>,
        server: &str,
        called: Result<(mcp::CallResult, std::time::Duration), McpServerError>,
    ) -> Result<Option<RunOutcome>, EngineError> {
        let (status, text, raw, took) = match called {
            Ok((result, took)) => {
                let text = result.text();
                let status = if result.is_error {
                    ActionStatus::Failed
                } else {
                    ActionStatus::Success
                };
                (status, text, result.raw, took)
            }
            Err(e) => {
                let restart = match &e {
                    McpServerError::Client {
                        source: mcp::McpError::Rpc { .. },
                        ..
                    } => "",
                    _ => " It will be started again for the next call.",
                };
                let text = format!("Error: {e}.{restart}");
                (ActionStatus::Error, text, Value::Null, Default::default())
            }
        };
        let observation = match status {
            ActionStatus::Success if text.is_empty() => "(the tool returned no content)".into(),
            ActionStatus::Success => observation::clip(&text, "Output truncated"),
            ActionStatus::Failed => format!(
                "=== TOOL ERROR (reported by MCP server {server}) ===\n{}",
                observation::clip(&text, "Output truncated")
            ),
            _ => text.clone(),
        };
        let failed = status != ActionStatus::Success;
        let mut request = json!({"name": call.name, "arguments": call.args});
        let mut raw = raw;
        self.setup.redactor.redact_json(&mut request);
        self.setup.redactor.redact_json(&mut raw);
        let record = crate::process::Outcome {
            stdout: text.clone().into_bytes(),
            exit_code: i32::from(failed),
            duration: took,
            ..crate::process::Outcome::default()
        };
        self.write_execution_with(
            &call.exec_ref,
            call.resolved,
            &record,
            vec![("request", request), ("result", raw)],
        );
        self.observer.progress(Progress::ToolDone {
            id: call.id.to_string(),
            duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            exit_code: i32::from(failed),
            success: !failed,
            preview: observation::preview(&text, ""),
            chars: text.chars().count(),
            stopped: None,
        });
        self.append(Event::ActionResult {
            action_id: call.id.to_string(),
            status,
            observation_content: observation,
            execution_ref: call.exec_ref,
        })?;
        self.run_hook(
            HookName::PostToolExec,
            &json!({"tool_name": call.name, "exit_code": i32::from(failed), "stdout": text, "stderr": ""}),
        )?;
        Ok(None)
    }
}
