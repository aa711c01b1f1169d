//! Agent nodes (`@Agent("path")`) run by delta: each turn is one call of delta's runner on the
//! node's run, paused after one model turn, the machine's tools offered as the program's tools.
//! The run is an ordinary delta run in `<execution>/agents/<node>/`, so `delta show` reads it.
//!
//! A turn first finds where the run stands: a run whose journal never got its first line is
//! begun again (nothing of it happened); an ended run, or one waiting for an answer this call
//! does not bring (or brings for another question), takes no turn. Every other turn goes on with
//! delta's settling rules (a tool cut short by a kill is never run twice). The machine tool calls
//! are read back from the run's journal, past the line the execution applied last
//! ([`dygram_runtime::agents`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use delta::connect::{Connection, LlmMode};
use delta::engine::{HostResult, HostTools, InteractionRequest, Silent};
use delta::env::Env;
use delta::events::{ActionStatus, EndStatus, Envelope, Event};
use delta::metadata::{RunMetadata, RunStatus};
use delta::runner::{Continue, NewRun, Notice, Options, Request, Runner, WorkspaceRef};
use delta::workspace::RunDir;
use dygram_runtime::agents::{
    AgentCall, AgentDriver, AgentError, AgentStop, AgentTurn, Journaled, MachineCall, MachineTools,
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

/// What a turn does with the run.
enum Next {
    /// Asks the runner (`answered`: with the call's answer to the run's question).
    Run { request: Request, answered: bool },
    /// Takes no turn: the run stands here.
    Stands(AgentStop),
}

impl DeltaAgents {
    /// The agents of the execution at `place`, of a machine file in `base`.
    pub fn new(base: PathBuf, place: AgentPlace) -> Self {
        Self { base, place }
    }

    /// The run `call` names, in its node's workspace.
    fn run_dir(&self, call: &AgentCall<'_>) -> RunDir {
        let workspace = self.place.execution_dir.join("agents").join(call.node);
        RunDir::new(&workspace, call.run_id)
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
    fn next(&self, call: &AgentCall<'_>, run: &RunDir) -> Result<Next, AgentError> {
        if run.root.exists() && !begun(run)? {
            // Created, never begun: a kill between its folder and its first line.
            std::fs::remove_dir_all(&run.root).map_err(|e| {
                AgentError::new(format!("{}: cannot remove: {e}", run.root.display()))
            })?;
        }
        if !run.root.exists() {
            return self.new_run(call, run);
        }
        let envelopes = journal(run)?;
        if let Some(stop) = ended(&envelopes) {
            return Ok(Next::Stands(stop));
        }
        let status = RunMetadata::load(&run.metadata())
            .map(|m| m.status)
            .unwrap_or(RunStatus::Interrupted);
        let waiting =
            status == RunStatus::WaitingForInput && !delta::engine::response_path(run).is_file();
        if !waiting {
            return Ok(Next::Run {
                request: continue_with(call, run, None),
                answered: false,
            });
        }
        let asked = question(run)?;
        // An answer is only ever given to the question it answers.
        let answer = call
            .answer
            .filter(|_| call.question_id.is_none_or(|id| id == asked.request_id));
        match answer {
            Some(answer) => Ok(Next::Run {
                request: continue_with(call, run, Some(answer)),
                answered: true,
            }),
            None => Ok(Next::Stands(AgentStop::Waiting {
                id: asked.request_id,
                question: asked.prompt,
            })),
        }
    }

    /// The run's first turn: the agent loaded from its folder.
    fn new_run(&self, call: &AgentCall<'_>, run: &RunDir) -> Result<Next, AgentError> {
        let dir = self.base.join(call.agent);
        let agent = delta::agent::load(&dir).map_err(|e| {
            AgentError::new(format!("cannot load the agent in {}: {e}", dir.display()))
            .hint("@Agent(\"path\") names an agent folder (agent.yaml, system_prompt.md) relative to the machine file")
        })?;
        check_names(&agent, call)?;
        Ok(Next::Run {
            request: Request::Run(Box::new(NewRun {
                agent,
                workspace: run.workspace.clone(),
                workspace_name: None,
                next_workspace: false,
                auto_resume: false,
                message: call.task.to_string(),
                run_id: Some(call.run_id.to_string()),
            })),
            answered: false,
        })
    }

    /// One call of the runner, paused after a model turn.
    fn drive(
        &self,
        call: &AgentCall<'_>,
        request: Request,
        tools: &mut dyn MachineTools,
    ) -> Result<AgentStop, AgentError> {
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
        Ok(stop_of(&finished.outcome))
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
            confine_as: None,
            adopt: false,
        }
    }
}

impl AgentDriver for DeltaAgents {
    fn journaled(&self, call: &AgentCall<'_>) -> Result<Journaled, AgentError> {
        let run = self.run_dir(call);
        if !run.journal().is_file() {
            return Ok(Journaled::default());
        }
        let envelopes = journal(&run)?;
        Ok(Journaled {
            calls: machine_calls(&envelopes, call.names, call.applied_seq),
            last_seq: envelopes.last().map_or(0, |e| e.seq),
            text: last_text(&envelopes),
        })
    }

    fn turn(
        &self,
        call: &AgentCall<'_>,
        tools: &mut dyn MachineTools,
    ) -> Result<AgentTurn, AgentError> {
        let run = self.run_dir(call);
        let (stop, answer_taken) = match self.next(call, &run)? {
            Next::Stands(stop) => (stop, false),
            Next::Run { request, answered } => (self.drive(call, request, tools)?, answered),
        };
        let envelopes = journal(&run)?;
        // The model's own last words, however the run ended (a hand-back's too).
        let stop = match stop {
            AgentStop::Completed { .. } => AgentStop::Completed {
                answer: last_text(&envelopes),
            },
            other => other,
        };
        Ok(AgentTurn {
            calls: machine_calls(&envelopes, call.names, call.applied_seq),
            last_seq: envelopes.last().map_or(0, |e| e.seq),
            stop,
            iterations: envelopes.iter().filter(|e| e.kind == "THOUGHT").count() as u64,
            run_dir: run.root.clone(),
            answer_taken,
        })
    }
}

/// Going on with the run, `answer` given to its question.
fn continue_with(call: &AgentCall<'_>, run: &RunDir, answer: Option<&str>) -> Request {
    Request::Continue(Continue {
        workspace: WorkspaceRef::Dir(run.workspace.clone()),
        run_id: Some(call.run_id.to_string()),
        message: answer.map(str::to_string),
        with_file: None,
        fork_at: None,
    })
}

/// An agent whose own tools have the names of the node's machine tools would have its own
/// calls taken for the machine's: refused.
fn check_names(agent: &delta::agent::Agent, call: &AgentCall<'_>) -> Result<(), AgentError> {
    let clash: Vec<&str> = agent
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .filter(|n| call.names.iter().any(|m| m == n))
        .collect();
    if clash.is_empty() {
        return Ok(());
    }
    Err(AgentError::new(format!(
        "the agent's tools {} have the names of the node's machine tools",
        clash.join(", ")
    ))
    .hint("rename those tools of the agent: transition_to_*, read_* and write_* name the machine's tools at an agent node"))
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
        RunStatus::WaitingForInput => match &outcome.interaction {
            Some(i) => AgentStop::Waiting {
                id: i.request_id.clone(),
                question: i.prompt.clone(),
            },
            None => AgentStop::Paused,
        },
        RunStatus::Interrupted | RunStatus::Running => AgentStop::Paused,
    }
}

/// Whether the run's journal holds its first line (`RUN_START`); a journal that cannot be read
/// is an error, never a reason to begin again.
fn begun(run: &RunDir) -> Result<bool, AgentError> {
    if !run.journal().is_file() {
        return Ok(false);
    }
    Ok(journal(run)?
        .iter()
        .any(|e| matches!(e.event(), Some(Event::RunStart { .. }))))
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
    Some(match status {
        EndStatus::Completed => AgentStop::Completed {
            answer: last_text(envelopes),
        },
        EndStatus::Failed => AgentStop::Failed {
            error: envelopes
                .iter()
                .rev()
                .find_map(|e| match e.event() {
                    Some(Event::SystemMessage { content, .. }) => content
                        .strip_prefix(delta::engine::FATAL_PREFIX)
                        .map(str::to_string),
                    _ => None,
                })
                .unwrap_or_else(|| "the run failed".into()),
        },
    })
}

/// The model's last text in the journal (empty when it wrote none).
fn last_text(envelopes: &[Envelope]) -> String {
    envelopes
        .iter()
        .rev()
        .find_map(|e| match e.event() {
            Some(Event::Thought { content, .. }) => Some(content),
            _ => None,
        })
        .unwrap_or_default()
}

/// The pending question of a waiting run.
fn question(run: &RunDir) -> Result<InteractionRequest, AgentError> {
    let file = run.interaction().join("request.json");
    store::atomic::read_json::<InteractionRequest>(&file).map_err(|e| {
        AgentError::new(format!(
            "{}: cannot read the agent's question: {e}",
            file.display()
        ))
    })
}

/// The successful calls of the machine's tools (`names`) whose result is journaled after line
/// `after`, in journal order.
fn machine_calls(envelopes: &[Envelope], names: &[String], after: u64) -> Vec<MachineCall> {
    let mut requested: std::collections::HashMap<String, (String, Value)> = Default::default();
    let mut calls = Vec::new();
    for e in envelopes {
        match e.event() {
            Some(Event::ActionRequest {
                action_id,
                tool_name,
                tool_args,
                ..
            }) if names.contains(&tool_name) => {
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
