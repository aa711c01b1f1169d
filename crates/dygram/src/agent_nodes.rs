//! Agent nodes (`@Agent("path")`) run by delta: each turn is one call of delta's runner on the
//! node's run, paused after one model turn, the machine's tools offered as the program's tools.
//! The run is an ordinary delta run in `<execution>/agents/<node>/`, so `delta show` reads it.
//!
//! A call first finds where the run stands: a run never journaled is begun again (nothing of it
//! happened); an ended run, or one waiting for an answer this call does not bring, takes no turn.
//! Every other call goes on with delta's settling rules (a tool cut short by a kill is never run
//! twice). The machine tool calls are then read from the run's journal, past the line the
//! execution applied last ([`dygram_runtime::agents`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use delta::connect::{Connection, LlmMode};
use delta::engine::{HostResult, HostTools, Silent};
use delta::env::Env;
use delta::events::{ActionStatus, Envelope, Event};
use delta::metadata::{RunMetadata, RunStatus};
use delta::runner::{Continue, NewRun, Notice, Options, Request, Runner, WorkspaceRef};
use delta::workspace::RunDir;
use dygram_runtime::agents::{
    AgentCall, AgentDriver, AgentError, AgentStop, AgentTurn, MachineCall, MachineTools,
};
use dygram_runtime::session::AgentPlace;
use llm::ToolDefinition;
use serde_json::{Map, Value};
use store::{Clock, IdSource};

/// Runs agent nodes with delta, agent folders taken relative to `base` (the machine file's
/// folder).
pub struct DeltaAgents {
    base: PathBuf,
    place: AgentPlace,
}

impl DeltaAgents {
    /// The agents of the execution at `place`, of a machine file in `base`.
    pub fn new(base: PathBuf, place: AgentPlace) -> Self {
        Self { base, place }
    }

    /// Where the node's answers come from: recorded or replayed per run, or the agent's model.
    fn mode(&self, node: &str, run_id: &str) -> LlmMode {
        let per_run = |dir: &Path| dir.join(node).join(run_id);
        match (&self.place.playback, &self.place.recordings) {
            (Some(dir), _) => LlmMode::Playback(per_run(dir)),
            (None, Some(dir)) => LlmMode::Record(per_run(dir)),
            (None, None) => LlmMode::Live,
        }
    }

    /// What to ask the runner for, or where the run stands when it takes no turn now.
    fn request(&self, call: &AgentCall<'_>, run: &RunDir) -> Result<Next, AgentError> {
        if run.root.exists() && !journaled(run) {
            // Created, never begun: a kill between its folder and its first line.
            std::fs::remove_dir_all(&run.root).map_err(|e| {
                AgentError::new(format!("{}: cannot remove: {e}", run.root.display()))
            })?;
        }
        if !run.root.exists() {
            let dir = self.base.join(call.agent);
            let agent = delta::agent::load(&dir).map_err(|e| {
                AgentError::new(format!(
                    "node '{}': cannot load the agent in {}: {e}",
                    call.node,
                    dir.display()
                ))
                .hint("@Agent(\"path\") names an agent folder (agent.yaml, system_prompt.md) relative to the machine file")
            })?;
            return Ok(Next::Run(Request::Run(Box::new(NewRun {
                agent,
                workspace: run.workspace.clone(),
                workspace_name: None,
                next_workspace: false,
                auto_resume: false,
                message: call.task.to_string(),
                run_id: Some(call.run_id.to_string()),
            }))));
        }
        let envelopes = journal(run)?;
        if let Some(stop) = ended(&envelopes) {
            return Ok(Next::Stands(stop));
        }
        // A transition journaled by a call killed before the run's end: the work was handed
        // back, and the model is not asked again.
        let names: Vec<&str> = call.tools.iter().map(|t| t.name.as_str()).collect();
        if machine_calls(&envelopes, &names, call.applied_seq)
            .iter()
            .any(|c| c.name.starts_with(dygram_runtime::tools::TRANSITION))
        {
            return Ok(Next::Stands(AgentStop::Completed {
                answer: String::new(),
            }));
        }
        let status = RunMetadata::load(&run.metadata())
            .map(|m| m.status)
            .unwrap_or(RunStatus::Interrupted);
        let waiting =
            status == RunStatus::WaitingForInput && !delta::engine::response_path(run).is_file();
        if waiting && call.answer.is_none() {
            return Ok(Next::Stands(AgentStop::Waiting {
                question: question(run),
            }));
        }
        Ok(Next::Run(Request::Continue(Continue {
            workspace: WorkspaceRef::Dir(run.workspace.clone()),
            run_id: Some(call.run_id.to_string()),
            // An answer is only ever given to the question it answers.
            message: call.answer.filter(|_| waiting).map(str::to_string),
            with_file: None,
            fork_at: None,
        })))
    }

    fn options(&self) -> Options {
        Options {
            max_iterations: None,
            pause_after: Some(1),
            model: None,
            sandbox: None,
            network: None,
            approvals: Default::default(),
            stream_text: false,
            interactive: false,
            env: Env::from_process(),
            cwd: self.base.clone(),
            clock: Clock::System,
            ids: IdSource::random(),
            interrupt: Arc::new(AtomicBool::new(false)),
            last_workspace_record: None,
            process_ends: false,
            upstream: None,
            depth: 0,
        }
    }
}

/// What a call does with the run.
enum Next {
    /// Asks the runner.
    Run(Request),
    /// Takes no turn: the run stands here.
    Stands(AgentStop),
}

impl AgentDriver for DeltaAgents {
    fn turn(
        &self,
        call: &AgentCall<'_>,
        tools: &mut dyn MachineTools,
    ) -> Result<AgentTurn, AgentError> {
        let workspace = self.place.execution_dir.join("agents").join(call.node);
        let run = RunDir::new(&workspace, call.run_id);
        let stop = match self.request(call, &run)? {
            Next::Stands(stop) => stop,
            Next::Run(request) => {
                let mut host = AgentHost {
                    mode: self.mode(call.node, call.run_id),
                };
                let mut bridge = Bridge {
                    definitions: call.tools.to_vec(),
                    tools,
                };
                let runner = Runner {
                    options: self.options(),
                    observer: &mut Silent,
                    human: None,
                    host: &mut host,
                    tools: Some(&mut bridge),
                };
                let finished = runner.run(request).map_err(|e| {
                    let error = AgentError::new(format!("run {}: {}", call.run_id, e.message()));
                    match e.hint() {
                        Some(hint) => error.hint(hint),
                        None => error,
                    }
                })?;
                stop_of(&finished.outcome)
            }
        };
        let envelopes = journal(&run)?;
        let names: Vec<&str> = call.tools.iter().map(|t| t.name.as_str()).collect();
        Ok(AgentTurn {
            calls: machine_calls(&envelopes, &names, call.applied_seq),
            last_seq: envelopes.last().map_or(0, |e| e.seq),
            stop,
            iterations: envelopes.iter().filter(|e| e.kind == "THOUGHT").count() as u64,
            run_dir: run.root.clone(),
        })
    }
}

/// Where a run that stopped stands.
fn stop_of(outcome: &delta::engine::RunOutcome) -> AgentStop {
    match outcome.status {
        RunStatus::Completed => AgentStop::Completed {
            answer: outcome.final_response.clone().unwrap_or_default(),
        },
        RunStatus::Failed => AgentStop::Failed {
            error: outcome.error.clone().unwrap_or_default(),
        },
        RunStatus::WaitingForInput => AgentStop::Waiting {
            question: outcome
                .interaction
                .as_ref()
                .map(|i| i.prompt.clone())
                .unwrap_or_default(),
        },
        RunStatus::Interrupted | RunStatus::Running => AgentStop::Paused,
    }
}

/// Whether the run's journal holds its first line (`RUN_START`).
fn journaled(run: &RunDir) -> bool {
    delta::events::read(&run.journal()).is_ok_and(|(lines, _)| {
        lines
            .iter()
            .any(|e| matches!(e.event(), Some(Event::RunStart { .. })))
    })
}

/// The run's journal (a torn last line left out).
fn journal(run: &RunDir) -> Result<Vec<Envelope>, AgentError> {
    delta::events::read(&run.journal())
        .map(|(lines, _)| lines)
        .map_err(|e| AgentError::new(format!("cannot read the agent's journal: {e}")))
}

/// How an ended run ended, from its journal.
fn ended(envelopes: &[Envelope]) -> Option<AgentStop> {
    let status = envelopes.iter().rev().find_map(|e| match e.event() {
        Some(Event::RunEnd { status }) => Some(status),
        _ => None,
    })?;
    let events: Vec<Event> = envelopes.iter().filter_map(Envelope::event).collect();
    Some(match status {
        delta::events::EndStatus::Completed => AgentStop::Completed {
            answer: events
                .iter()
                .rev()
                .find_map(|e| match e {
                    Event::Thought { content, .. } => Some(content.clone()),
                    _ => None,
                })
                .unwrap_or_default(),
        },
        delta::events::EndStatus::Failed => AgentStop::Failed {
            error: events
                .iter()
                .rev()
                .find_map(|e| match e {
                    Event::SystemMessage { content, .. } => content
                        .strip_prefix(delta::engine::FATAL_PREFIX)
                        .map(str::to_string),
                    _ => None,
                })
                .unwrap_or_else(|| "the run failed".into()),
        },
    })
}

/// The pending question of a waiting run.
fn question(run: &RunDir) -> String {
    store::atomic::read_json::<delta::engine::InteractionRequest>(
        &run.interaction().join("request.json"),
    )
    .map(|r| r.prompt)
    .unwrap_or_default()
}

/// The successful calls of the machine's tools (`names`) whose result is journaled after line
/// `after`, in journal order.
fn machine_calls(envelopes: &[Envelope], names: &[&str], after: u64) -> Vec<MachineCall> {
    let mut requested: std::collections::HashMap<String, (String, Value)> = Default::default();
    let mut calls = Vec::new();
    for e in envelopes {
        match e.event() {
            Some(Event::ActionRequest {
                action_id,
                tool_name,
                tool_args,
                ..
            }) if names.contains(&tool_name.as_str()) => {
                requested.insert(action_id, (tool_name, tool_args));
            }
            Some(Event::ActionResult {
                action_id,
                status: ActionStatus::Success,
                ..
            }) if e.seq > after => {
                if let Some((name, args)) = requested.get(&action_id) {
                    calls.push(MachineCall {
                        seq: e.seq,
                        name: name.clone(),
                        args: args.clone(),
                    });
                }
            }
            _ => {}
        }
    }
    calls
}

/// The machine's tools as the program's tools of the run.
struct Bridge<'t> {
    definitions: Vec<ToolDefinition>,
    tools: &'t mut dyn MachineTools,
}

impl HostTools for Bridge<'_> {
    fn definitions(&self) -> Vec<ToolDefinition> {
        self.definitions.clone()
    }

    fn call(&mut self, name: &str, args: &Map<String, Value>) -> HostResult {
        let answer = self.tools.call(name, args);
        HostResult {
            content: answer.content,
            ok: answer.ok,
            ends_run: answer.ends_run,
        }
    }
}

/// The runner's host for an agent node: quiet, connected the way the execution's answers come.
struct AgentHost {
    mode: LlmMode,
}

impl delta::runner::Host for AgentHost {
    fn notice(&mut self, _notice: Notice<'_>) {}

    fn connect(
        &mut self,
        agent: &delta::agent::Agent,
        env: &Env,
        ids: IdSource,
    ) -> Result<Connection, delta::connect::ConnectError> {
        delta::connect::connect(&agent.llm, env, &self.mode, None, Clock::System, ids)
    }

    fn records_or_replays(&self) -> bool {
        !matches!(self.mode, LlmMode::Live)
    }
}
