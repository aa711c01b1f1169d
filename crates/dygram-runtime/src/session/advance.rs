//! [`Session::advance`]: one unit of work on an opened execution, committed.

use serde_json::Value;

use super::call::{AgentPlace, CallError, Host, Notice, Refusal, Session, Unit};
use super::manual::ManualInput;
use super::open::{check_answer, now, refused_without_request, rfc3339, turn_node};
use super::sources::{Sources, recorder};
use super::{Commit, ExecutionRecorder, HistoryEntry, Metadata};
use crate::agents::AgentDriver;
use crate::executor::{ExecutionEvent, Executor, NextUnit, Options};
use crate::state::{ExecutionState, Status};
use llm::LlmClient;
use llm::answer::{Given, request_json};

/// A request that waits for a manual answer.
#[derive(Debug, Clone)]
pub struct Waiting {
    /// The request (as saved in `pending-request.json`).
    pub request: Value,
    /// `pending-request.json` of the execution.
    pub file: String,
    /// An answer that would do, for the person answering.
    pub example: Value,
}

impl Waiting {
    /// The question of an agent node's run (`@Agent`), when that is what waits: its answer is
    /// plain text, not a model's answer.
    pub fn question(&self) -> Option<&str> {
        if self.request.get("type").and_then(Value::as_str) != Some(AGENT_QUESTION) {
            return None;
        }
        self.request.get("question").and_then(Value::as_str)
    }
}

/// What one unit of work did (committed).
#[derive(Debug)]
pub struct Report {
    /// Whether this call created the execution.
    pub started: bool,
    /// The unit performed.
    pub unit: Unit,
    /// What happened, in order.
    pub events: Vec<ExecutionEvent>,
    /// The execution's status after the unit.
    pub status: Status,
    /// Set when the unit ends waiting for a manual answer.
    pub waiting: Option<Waiting>,
}

impl Report {
    /// The report as `dygram execute -i --format json` prints it (and the playground and other
    /// programs read it): the execution `id` with its metadata `meta` and state `state` after the
    /// unit.
    pub fn to_json(
        &self,
        id: &str,
        meta: &super::Metadata,
        state: &crate::state::ExecutionState,
    ) -> serde_json::Value {
        let events: Vec<serde_json::Value> =
            self.events.iter().map(ExecutionEvent::to_json).collect();
        let mut out = serde_json::json!({
            "id": id,
            "started": self.started,
            "unit": self.unit.name(),
            "status": if self.waiting.is_some() { "waiting" } else { self.status.as_str() },
            "turns": meta.turn_count,
            "steps": meta.step_count,
            "currentNodes": state.current_nodes(),
            "events": events,
            "contextState": state.context_state,
        });
        if let Some(waiting) = &self.waiting {
            out["request"] = waiting.request.clone();
            out["requestFile"] = serde_json::json!(waiting.file);
            out["example"] = waiting.example.clone();
        }
        out
    }
}

/// The answer sources of a unit of work.
struct Answers<'a> {
    /// The client that answers (`None`: manual answers).
    client: Option<&'a dyn LlmClient>,
    /// The sources opened for the call.
    sources: &'a Sources,
    /// The recorder around the client, when the execution records.
    recorder: Option<&'a ExecutionRecorder<&'a dyn LlmClient>>,
}

/// What [`Session::advance`] did.
#[derive(Debug)]
pub enum Advance {
    /// The execution had ended before this call: nothing was done.
    AlreadyFinished,
    /// A unit of work, committed.
    Done(Report),
}

impl Session {
    /// Performs one unit of work, commits it, and (when the execution ends, and the call asks for
    /// it) writes the result file. Nothing is committed when it fails, nor when `input` holds an
    /// answer the unit does not take (refused).
    pub fn advance<H: Host>(
        &mut self,
        host: &mut H,
        store: &super::Executions,
        input: &mut ManualInput,
    ) -> Result<Advance, CallError<H::Error>> {
        let agent_asks = self
            .state
            .as_ref()
            .is_some_and(|s| s.agent_question().is_some());
        if self.meta.client_config.kind != llm::SourceKind::Manual && !agent_asks && input.given() {
            return Err(CallError::Refused(Refusal::Source(Box::new(
                self.meta.client_config.clone(),
            ))));
        }
        let redactor = store.redactor();
        let queue_dir = store.queue_dir();
        let sources = Sources::open(
            &self.meta,
            &self.id,
            &*host,
            &queue_dir,
            self.request.queue_timeout,
        )?;
        let recorder = match sources.client() {
            Some(inner) => recorder(&self.meta, inner, redactor)?,
            None => None,
        };
        let client: Option<&dyn LlmClient> = match &recorder {
            Some(r) => Some(r),
            None => sources.client(),
        };
        let live = host.live();
        let options = Options {
            model: self.meta.client_config.model.clone(),
            default_model: host.default_model(&self.meta.client_config),
            max_tokens: self.meta.client_config.max_tokens.unwrap_or(4096),
            stream: live.is_some(),
            ..Options::default()
        };
        let driver = agent_driver(host, store, &self.id, &self.meta.client_config)?;
        let Some(state) = self.state.take() else {
            return Err(CallError::Unsettled(self.id.clone()));
        };
        let mut executor = Executor::resume(state, client, options);
        if let Some(driver) = driver.as_deref() {
            executor.with_agents(driver);
        }
        if let Some(listener) = live {
            executor.listen(listener);
        }
        let answers = Answers {
            client,
            sources: &sources,
            recorder: recorder.as_ref(),
        };
        let done = self.unit_of_work(&mut executor, &answers, host, store, input)?;
        // A failed unit leaves the state unsettled (not committed): the session must be opened
        // again; a done one goes on from its commit.
        self.state = Some(executor.into_state());
        Ok(done)
    }

    /// The unit of work with the executor set up, then the commit.
    fn unit_of_work<H: Host>(
        &mut self,
        executor: &mut Executor<'_>,
        answers: &Answers<'_>,
        host: &mut H,
        store: &super::Executions,
        input: &mut ManualInput,
    ) -> Result<Advance, CallError<H::Error>> {
        if !self.started && executor.status().is_finished() {
            if input.given() {
                return Err(CallError::Refused(Refusal::Ended));
            }
            self.write_result(store, executor.state())?;
            return Ok(Advance::AlreadyFinished);
        }
        let unit = self.request.unit;
        if executor.agent_question().is_some()
            && let Some(answer) = input.text()?
        {
            // Counted as used only once it reaches the question it answers.
            executor.answer_agent(answer);
        }
        let waiting = match unit {
            Unit::Turn => self.one_turn(executor, answers.client, store, input)?,
            Unit::Step => {
                executor.step().map_err(CallError::Runtime)?;
                None
            }
            Unit::Path => {
                executor.step_path().map_err(CallError::Runtime)?;
                None
            }
        }
        .or_else(|| agent_waiting(executor));
        let events = executor.take_events();
        if executor.agent_answer_taken() {
            input.mark_used();
        } else if let Some((_, _, question)) = executor.agent_question()
            && input.unused()
        {
            // Nothing is committed: the run asks another question than the one answered.
            return Err(CallError::Refused(Refusal::AgentAsks(question.to_string())));
        }
        if input.unused() {
            // Nothing is committed: the unit of work is done again by the next call.
            if input.arrived_late() {
                return Err(CallError::Late(Box::new(self.meta.client_config.clone())));
            }
            return Err(refused_without_request(&events));
        }
        if unit != Unit::Turn {
            self.meta.turn_count += events
                .iter()
                .filter(|e| matches!(e, ExecutionEvent::LlmCall { .. }))
                .count() as u64;
        }
        let status = executor.status();
        if let Some(p) = answers.sources.playback() {
            self.meta.client_config.playback_state = Some(p.state());
        }
        if let Some(r) = answers.recorder {
            self.meta.client_config.recording = Some(r.position());
        }
        self.commit(
            host,
            store,
            executor,
            &events,
            waiting.as_ref().map(|w| &w.request),
        )?;
        if status.is_finished() {
            self.write_result(store, executor.state())?;
        }
        let report = Report {
            started: self.started,
            unit,
            events,
            status,
            waiting,
        };
        // A later unit on the same session goes on from this commit.
        self.started = false;
        Ok(Advance::Done(report))
    }

    /// The commit: this call happened.
    fn commit<H: Host>(
        &mut self,
        host: &mut H,
        store: &super::Executions,
        executor: &Executor<'_>,
        events: &[ExecutionEvent],
        waiting: Option<&Value>,
    ) -> Result<(), CallError<H::Error>> {
        let t = now();
        let status = executor.status();
        self.meta.end_unit(rfc3339(t), waiting.cloned(), status);
        // A manual request is not a call that happened; an agent's turn that ended on a question
        // is (a call that found it still waiting did nothing).
        let asked = waiting.is_some_and(|w| w.get("type").is_some_and(|t| t == AGENT_QUESTION));
        if waiting.is_none() || (asked && !events.is_empty()) {
            self.last_call = Some(history_entry(events, executor.state(), &self.meta, t));
        }
        let committed = store.commit(
            &self.id,
            &Commit {
                state: executor.state(),
                machine_hash: &self.hash,
                metadata: &self.meta,
                last_call: self.last_call.as_ref(),
                machine_changed: executor.machine_changed(),
                now: &self.meta.last_executed_at,
            },
        )?;
        for e in &committed.unrepaired {
            host.notice(Notice::Unrepaired(e));
        }
        Ok(())
    }

    /// One LLM round trip (or one step without the model). `Some` when the call ends waiting for
    /// a manual answer.
    fn one_turn<E>(
        &mut self,
        executor: &mut Executor<'_>,
        client: Option<&dyn LlmClient>,
        store: &super::Executions,
        input: &mut ManualInput,
    ) -> Result<Option<Waiting>, CallError<E>> {
        let request = match executor.next_unit() {
            Ok(NextUnit::Request(request)) => request,
            Ok(NextUnit::AgentTurn) => {
                self.meta.turn_count += 1;
                return Ok(None);
            }
            Ok(NextUnit::Stepped | NextUnit::Idle) => return Ok(None),
            Err(e) => return Err(CallError::Runtime(e)),
        };
        let node = turn_node(executor);
        if let Some(c) = client {
            // Nothing is saved on failure: the next call asks again from the saved state.
            executor
                .exchange(c)
                .map_err(|error| CallError::Llm { node, error })?;
            self.meta.turn_count += 1;
            return Ok(None);
        }
        // Manual mode: the answer given, or the request is saved and shown.
        let Some(response) = input.answer()? else {
            let request_id = format!("{}-turn-{}", self.id, self.meta.turn_count + 1);
            let file = store
                .dir(&self.id)
                .map(|d| d.join("pending-request.json").display().to_string())
                .unwrap_or_default();
            return Ok(Some(Waiting {
                request: request_json(&request, &request_id, &node, &rfc3339(now())),
                file,
                example: executor.example_answer(),
            }));
        };
        check_answer(executor, &response)?;
        let given = Given(response.clone());
        if let Some(rec) = recorder(&self.meta, &given, store.redactor())? {
            rec.complete(&request).map_err(CallError::Record)?;
            self.meta.client_config.recording = Some(rec.position());
        }
        executor.answer(response);
        self.meta.turn_count += 1;
        Ok(None)
    }

    /// With a result folder, an execution that ended leaves its result file there too (as
    /// one-shot runs do).
    fn write_result<E>(
        &self,
        store: &super::Executions,
        state: &ExecutionState,
    ) -> Result<(), CallError<E>> {
        let Some((dir, stem)) = &self.request.result else {
            return Ok(());
        };
        super::result::write_result(dir, stem, state, None, store.redactor())
            .map(|_| ())
            .map_err(CallError::Result)
    }
}

/// The history line of a call that advanced the execution.
fn history_entry(
    events: &[ExecutionEvent],
    state: &ExecutionState,
    meta: &Metadata,
    t: jiff::Timestamp,
) -> HistoryEntry {
    let node = events
        .iter()
        .find_map(|e| match e {
            ExecutionEvent::LlmCall { node, .. } | ExecutionEvent::AgentTurn { node, .. } => {
                Some(node.clone())
            }
            ExecutionEvent::Transition { from, .. } => Some(from.clone()),
            ExecutionEvent::Completed { node, .. } | ExecutionEvent::Failed { node, .. } => {
                Some(node.clone())
            }
            _ => None,
        })
        .or_else(|| state.main_path().map(|p| p.current_node.clone()))
        .unwrap_or_default();
    let tools: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            ExecutionEvent::ToolCall { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    let output: Option<String> = events.iter().find_map(|e| match e {
        ExecutionEvent::Output { text, .. } => Some(text.chars().take(100).collect()),
        _ => None,
    });
    HistoryEntry {
        turn: meta.step_count,
        timestamp: rfc3339(t),
        node,
        tools,
        output,
        status: meta.status,
        text: super::history::text_of(events),
        calls: super::history::calls_of(events),
    }
}

/// `type` of the pending request of an execution whose agent node's run asks a question.
pub const AGENT_QUESTION: &str = "agent_question";

/// The agent question the execution waits on after a unit, as a waiting request.
fn agent_waiting(executor: &Executor<'_>) -> Option<Waiting> {
    let (path, node, question) = executor.agent_question()?;
    let run = executor
        .state()
        .path(path)
        .and_then(|p| p.agent.as_ref())
        .map(|a| a.run_id.clone())
        .unwrap_or_default();
    Some(Waiting {
        request: serde_json::json!({"type": AGENT_QUESTION, "path": path, "node": node,
            "run": run, "question": question}),
        file: String::new(),
        example: Value::String("the answer, as plain text".into()),
    })
}

/// What runs the agents of agent nodes in this call: the host's, in the execution's folder; an
/// execution worked on in a private copy (shared through a store) refuses them, since their runs
/// would live in the copy only.
fn agent_driver<H: Host>(
    host: &H,
    store: &super::Executions,
    id: &str,
    config: &super::ClientConfig,
) -> Result<Option<Box<dyn AgentDriver>>, CallError<H::Error>> {
    if store.is_private_copy() {
        return Ok(Some(Box::new(NotInCopies)));
    }
    let agents =
        |dir: &Option<String>| dir.as_ref().map(|d| std::path::Path::new(d).join("agents"));
    let place = AgentPlace {
        execution_dir: store.dir(id)?,
        recordings: agents(&config.recordings_dir),
        playback: match config.kind {
            llm::SourceKind::Playback => agents(&config.playback_dir),
            _ => None,
        },
    };
    Ok(host.agents(&place))
}

/// Refuses agent nodes in an execution shared through a store.
struct NotInCopies;

impl NotInCopies {
    fn refusal() -> crate::agents::AgentError {
        crate::agents::AgentError::new(
            "agent nodes (@Agent) do not run in executions shared through --store yet: their runs would live in this call's private copy",
        )
        .hint("run the execution in a folder (without --store)")
    }
}

impl AgentDriver for NotInCopies {
    fn journaled(
        &self,
        _call: &crate::agents::AgentCall<'_>,
    ) -> Result<crate::agents::Journaled, crate::agents::AgentError> {
        Err(Self::refusal())
    }

    fn turn(
        &self,
        _call: &crate::agents::AgentCall<'_>,
        _tools: &mut dyn crate::agents::MachineTools,
    ) -> Result<crate::agents::AgentTurn, crate::agents::AgentError> {
        Err(Self::refusal())
    }
}
