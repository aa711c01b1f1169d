//! The Think–Act–Observe loop.
//!
//! Every iteration: build the context from the journal (its events, or the conversation kept from
//! them: `history.rs`), ask the model, journal its answer, run the tools it asked for (in order)
//! and journal their results. The journal is written before each side effect and after it, so a
//! run stopped at any point can be resumed from the journal alone.

mod act;
mod agents;
mod approvals;
mod compact;
mod history;

pub use compact::{CompactNow, Compacted};
mod hook;
mod host_tools;
mod human;
pub mod io_writer;
mod mcp;
mod model_call;
pub mod observation;
mod progress;
mod reason;
mod records;
pub mod registry;
mod sandbox;
mod sessions;
mod settle;
pub(crate) use settle::call_progress;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use llm::{ChatRequest, ChatResponse, ContentBlock, LlmClient, LlmError, ToolChoice};
use serde_json::{Value, json};
use store::{Clock, IdSource, StoreError};

use crate::agent::{Agent, CompactionStrategy, HookName};
use crate::context::{self, ContextEnv};
use crate::env::Env;
use crate::events::{
    EndStatus, Event, FunctionRecord, Level, RunJournal, ToolCallRecord, timestamp,
};
use crate::hooks::HookRunner;
use crate::metadata::{RunMetadata, RunStatus, TokenTotals};
use crate::process;
use crate::process::record::{Leftover, Recorder};
use crate::redaction::{RedactingObserver, scrub_event};
use crate::workspace::RunDir;
pub use agents::{AGENTS_DIR, ChildCall, ChildStop, SubAgents, child_workspace};
pub use host_tools::{HostResult, HostTools};
pub use human::{HumanInput, InputType, InteractionRequest};
use io_writer::IoWriter;
pub use progress::{Observer, Progress, Silent};
pub use reason::EndReason;
pub(crate) use records::IoRecords;
pub use records::is_record_id;
pub use registry::{AskHumanArgs, ToolRegistry, ask_human_definition};

/// How the journal's note of the error that failed a run begins.
pub const FATAL_PREFIX: &str = "Fatal error: ";

/// Name of the built-in tool.
pub use crate::agent::tools::ASK_HUMAN;

/// How a run (or this part of it) ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// Final status.
    pub status: RunStatus,
    /// The model's final answer, as it gave it (COMPLETED; empty when it gave none: see `reason`).
    pub final_response: Option<String>,
    /// Why a COMPLETED run has no final answer.
    pub reason: Option<EndReason>,
    /// What went wrong (FAILED).
    pub error: Option<String>,
    /// The pending question (WAITING_FOR_INPUT).
    pub interaction: Option<InteractionRequest>,
    /// Metadata after the run.
    pub metadata: RunMetadata,
    /// Wall time of this process's part.
    pub duration: Duration,
}

/// Why the engine could not go on at all (not a FAILED run: those are outcomes).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The journal or metadata could not be written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A run to resume whose journal holds no `RUN_START`: there is nothing to resume from.
    #[error("{}: the journal holds no RUN_START event, so the run cannot be resumed", .0.display())]
    NothingToResume(PathBuf),
    /// A context source failed outside a run's loop (`delta compact`; in the loop it fails the
    /// run instead).
    #[error(transparent)]
    Context(#[from] context::SourceError),
    /// The run's seal could not be checked or written: its journal changed behind delta's back.
    #[error(transparent)]
    Seal(Box<crate::seal::SealError>),
}

impl From<crate::seal::SealError> for EngineError {
    fn from(e: crate::seal::SealError) -> Self {
        Self::Seal(Box::new(e))
    }
}

/// Everything a run needs.
pub struct EngineSetup {
    /// The agent.
    pub agent: Agent,
    /// The run's files.
    pub run: RunDir,
    /// Merged environment.
    pub env: Env,
    /// The model.
    pub client: Arc<dyn LlmClient>,
    /// Iteration budget for this process.
    pub max_iterations: u32,
    /// Stop after this many iterations of this process, the run left INTERRUPTED to be resumed
    /// (one model turn per call, for a program that steps a run): nothing is journaled for it.
    pub pause_after: Option<u32>,
    /// Answer `ask_human` on the terminal.
    pub interactive: bool,
    /// Clock.
    pub clock: Clock,
    /// Id source.
    pub ids: IdSource,
    /// Scrubs the API keys in use from everything the run writes or reports.
    pub redactor: llm::Redactor,
    /// Raised by SIGINT/SIGTERM.
    pub interrupt: Arc<AtomicBool>,
    /// Set when this process takes over a run whose previous process died (crash recovery): journaled
    /// as a warning when the run resumes.
    pub recovered: Option<String>,
    /// The run was started by an earlier process: its pending calls are settled before anything new
    /// is said. A new run (`false`) was created by `session::create`, with its first events.
    pub resuming: bool,
    /// The store holding the run of record, when the run's files are a working copy of it.
    pub upstream: Option<Arc<dyn crate::events::Upstream>>,
    /// Report the model's text as it arrives ([`Progress::TextDelta`]), where the server can stream.
    pub stream_text: bool,
    /// The person's answer given to this process (`continue -m`) for the question the run waits
    /// on: the only answer an approval takes besides one typed at the terminal (`-i`), never one
    /// found in a file a tool could have written.
    pub answer: Option<String>,
    /// Take a resumed run that has no seal as it is found (`continue --adopt`).
    pub adopt: bool,
}

/// The key of `metadata.json`'s extra fields that says the run was paused between turns as asked
/// ([`EngineSetup::pause_after`]), not stopped: its shell sessions are kept for the next process.
pub const PAUSED: &str = "paused_between_turns";

/// A run in progress.
pub struct Engine<'a> {
    setup: EngineSetup,
    journal: RunJournal,
    /// The journal's events (the context is rebuilt from them every iteration), or those from
    /// the model's last answer on where the rest is kept as the conversation (`kept`).
    typed: Vec<Event>,
    /// The run's seal, outside the workspace: the journal as delta wrote it, and what only a
    /// person decides (see [`crate::seal`]).
    seal: crate::seal::Seal,
    /// What is kept of the events before `typed`.
    kept: history::Kept,
    /// The journal has the run's first events (`RUN_START`).
    has_start: bool,
    /// Where the request out with the model holds the kept conversation.
    lent: Option<history::Lent>,
    /// The `seq` of each of `typed`.
    seqs: Vec<u64>,
    /// Model answers journaled before `typed` (the journal was read from its end).
    thoughts_before: u64,
    /// Fitting the conversation into the model's context window.
    window: compact::Window,
    metadata: RunMetadata,
    hooks: HookRunner,
    log: Option<std::fs::File>,
    observer: RedactingObserver<'a>,
    human: Option<&'a mut dyn HumanInput>,
    /// Runs the children of agent tools (none: such a call fails with a reason).
    children: Option<&'a mut dyn SubAgents>,
    /// The tools the program running the engine offers (none: the agent's only).
    host_tools: Option<&'a mut dyn HostTools>,
    tool_env: Vec<(String, String)>,
    started: Instant,
    io: IoWriter,
    llm_worker: Option<mpsc::Sender<model_call::Job>>,
    /// The server sent nothing on a streamed request: the rest of the run is not streamed.
    no_streaming: bool,
    programs: process::ProgramCache,
    /// The tools offered to the model, by name.
    tools: ToolRegistry,
    /// The agent's MCP servers, once started.
    mcp: Option<crate::mcp_servers::McpServers>,
    /// The sandbox the agent's tools and hooks run in, once prepared.
    confinement: Option<Arc<crate::sandbox::Confinement>>,
    progress_saved: Instant,
    /// `io/tool_executions/` folder names in use (the writer creates them later).
    exec_refs: std::collections::BTreeSet<String>,
    /// A tool's process group recorded by the process this one took the run over from, and what
    /// stopping it found (for the settled call's result).
    leftover: Option<Leftover>,
    /// Whether every process record the previous process wrote is here (it ran in this boot, in
    /// this copy), so that a started call without a record never started its program.
    records: settle::Records,
}

/// A tool call of the model's answer: its id, tool name and arguments (redacted).
type Call = (String, String, Value);

enum Step {
    Continue,
    Stop(Box<RunOutcome>),
}

/// What asking the model gave.
enum Asked {
    /// Its answer, with the call's `io/invocations/` id.
    Answer(String, ChatResponse),
    /// The run stops (interrupted, or the call failed).
    Stop(Step),
    /// The server refused the request for its length.
    TooLong(ChatRequest, llm::window::Overflow),
}

impl<'a> Engine<'a> {
    /// Opens the run's journal and prepares the loop. The caller holds the run lock.
    pub fn new(
        setup: EngineSetup,
        metadata: RunMetadata,
        observer: &'a mut dyn Observer,
        human: Option<&'a mut dyn HumanInput>,
    ) -> Result<Self, EngineError> {
        let mut metadata = metadata;
        let history::Opening {
            opened,
            kept,
            has_start,
        } = history::open(&setup, &mut metadata)?;
        let upstream = setup.upstream.clone();
        if let Some(upstream) = &upstream {
            let marker = setup.run.root.join(crate::events::UPSTREAM_MARKER);
            store::write_atomic(&marker, upstream.describe().as_bytes())?;
        }
        let mut tool_env = setup.env.for_child();
        tool_env.retain(|(k, _)| k != "AGENT_HOME");
        tool_env.push(("AGENT_HOME".into(), setup.agent.dir.display().to_string()));
        let mut hooks = HookRunner::new(
            setup.agent.hooks.clone(),
            &setup.run.hooks(),
            &setup.run.workspace,
            tool_env.clone(),
            &setup.run.run_id,
            setup.clock,
            setup.redactor.clone(),
        );
        hooks.record_processes(Recorder::new(setup.run.process_record()));
        // Tools see which run they serve (`delta sessions start` in a tool names it as the owner).
        tool_env.retain(|(k, _)| k != "DELTA_RUN_ID");
        tool_env.push(("DELTA_RUN_ID".into(), setup.run.run_id.clone()));
        let exec_refs = IoRecords::new(setup.run.tool_executions()).ids();
        let log = store::atomic::own_file(std::fs::OpenOptions::new().create(true).append(true))
            .open(setup.run.engine_log())
            .ok();
        let observer = RedactingObserver::new(observer, setup.redactor.clone());
        let tools = ToolRegistry::new(&setup.agent);
        let window = compact::Window::new(&setup.agent, &opened.events);
        // Not journaled: from this host's clock (packs sort by it, even where a test fixes the
        // run's clock) and random bits apart from the run's ids (which a test may fix too).
        let packs = uuid::Uuid::now_v7().to_string();
        let io = IoWriter::start(setup.run.root.clone(), packs);
        let mut journal = opened.journal.with_upstream(upstream);
        // Before anything acts on what was read: the journal must still start as delta left it.
        let mut seal = if setup.resuming {
            let seal = crate::seal::Seal::open(&setup.run, &mut journal)?;
            if !seal.found() && !setup.adopt && crate::seal::state_dir().is_some() {
                return Err(crate::seal::SealError::Unsealed {
                    run_id: setup.run.run_id.clone(),
                    workspace: setup.run.workspace.clone(),
                    seal: crate::seal::path_for(&setup.run).unwrap_or_default(),
                }
                .into());
            }
            seal
        } else {
            crate::seal::Seal::fresh(&setup.run, &mut journal)?
        };
        if seal.state.agent_ref.is_empty() {
            seal.state.agent_ref.clone_from(&metadata.agent_ref);
        }
        let mut engine = Self {
            setup,
            journal,
            seal,
            window,
            thoughts_before: opened.thoughts_before,
            seqs: opened.seqs,
            has_start,
            typed: opened.events,
            kept,
            lent: None,
            metadata,
            hooks,
            log,
            observer,
            human,
            children: None,
            host_tools: None,
            tool_env,
            started: Instant::now(),
            io,
            llm_worker: None,
            no_streaming: false,
            programs: process::ProgramCache::default(),
            tools,
            mcp: None,
            confinement: None,
            progress_saved: Instant::now(),
            exec_refs,
            leftover: None,
            records: settle::Records::NotHere,
        };
        if let Some(torn) = opened.recovered {
            let note =
                format!("Recovered the journal after a crash: dropped a torn last line ({torn})");
            engine.observer.progress(Progress::Note(note.clone()));
            engine.system(Level::Warn, &note)?;
        }
        Ok(engine)
    }

    /// The run's files.
    pub fn run_dir(&self) -> &RunDir {
        &self.setup.run
    }

    fn log(&mut self, message: &str) {
        let message = self.setup.redactor.redact(message);
        let line = format!("[{}] {message}\n", timestamp(self.setup.clock.now()));
        if let Some(f) = self.log.as_mut() {
            let _ = f.write_all(line.as_bytes());
        }
    }

    fn append(&mut self, event: Event) -> Result<(), EngineError> {
        let event = scrub_event(&self.setup.redactor, event);
        let stored = self.journal.append(&event)?;
        self.keep(stored.seq, event)
    }

    /// Appends without flushing: the next flushed append (or [`Engine::sync`], which runs before every
    /// hook, tool and LLM call) makes it durable.
    fn append_deferred(&mut self, event: Event) -> Result<(), EngineError> {
        let event = scrub_event(&self.setup.redactor, event);
        let stored = self.journal.append_deferred(&event)?;
        self.keep(stored.seq, event)
    }

    /// The run's `process.json`.
    fn recorder(&self) -> Recorder {
        Recorder::new(self.setup.run.process_record())
    }

    /// Empties `process.json` once what its process did is journaled. A record that cannot be emptied
    /// names a group that has ended, which the next recovery finds gone, so this is logged, not fatal.
    fn clear_record(&mut self) {
        if let Err(e) = self.recorder().clear() {
            self.log(&format!("cannot empty the process record: {e}"));
        }
    }

    fn sync(&mut self) -> Result<(), EngineError> {
        Ok(self.journal.sync()?)
    }

    fn system(&mut self, level: Level, content: &str) -> Result<(), EngineError> {
        self.append(Event::SystemMessage {
            level,
            content: content.to_string(),
        })
    }

    fn save_metadata(&mut self) -> Result<(), EngineError> {
        self.sync()?;
        self.metadata.save(&self.setup.run.metadata())?;
        self.metadata.send(self.setup.upstream.as_deref())?;
        self.progress_saved = Instant::now();
        self.seal_now();
        Ok(())
    }

    /// Seals the journal as written so far ([`crate::seal`]). A seal that cannot be written leaves
    /// the last one, which still holds (the journal only grew); it is noted, never fatal.
    fn seal_now(&mut self) {
        if let Err(e) = self.seal.save(&self.setup.run, &mut self.journal) {
            self.log(&format!("cannot seal the journal: {e}"));
        }
    }

    /// Progress (iteration count, tokens) is rewritten at most once a second while the run goes on;
    /// the journal holds it anyway, and every status change writes it durably.
    fn save_progress(&mut self) -> Result<(), EngineError> {
        if self.progress_saved.elapsed() >= Duration::from_secs(1) {
            self.metadata.save_progress(&self.setup.run.metadata())?;
            self.metadata.send(self.setup.upstream.as_deref())?;
            self.progress_saved = Instant::now();
            self.seal_now();
        }
        Ok(())
    }

    fn set_status(&mut self, status: RunStatus, ended: bool) -> Result<(), EngineError> {
        self.metadata.status = status;
        if ended {
            self.metadata.end_time = Some(timestamp(self.setup.clock.now()));
        }
        self.save_metadata()
    }

    fn interrupted(&self) -> bool {
        self.setup.interrupt.load(Ordering::SeqCst)
    }

    /// Says in the journal (and on the console) which `io/` records could not be written, so that a
    /// missing record is explained rather than found empty. With `flush`, every record queued so far
    /// is written first (when the run stops).
    fn report_io_failures(&mut self, flush: bool) -> Result<(), EngineError> {
        if flush {
            self.io.flush();
        }
        let failed = self.io.failures();
        if failed.is_empty() {
            return Ok(());
        }
        let root = &self.setup.run.root;
        let list: Vec<String> = failed
            .iter()
            .map(|f| {
                let path = f.path.strip_prefix(root).unwrap_or(&f.path);
                format!("{} ({})", path.display(), f.error)
            })
            .collect();
        let text = format!(
            "{} io/ record(s) could not be written and are missing (the journal has what the model \
             saw): {}",
            list.len(),
            list.join("; ")
        );
        self.observer.progress(Progress::Note(text.clone()));
        self.system(Level::Warn, &text)
    }

    fn redact(&self, text: &str) -> String {
        self.setup.redactor.redact(text).into_owned()
    }

    fn outcome(&self, status: RunStatus) -> RunOutcome {
        RunOutcome {
            status,
            final_response: None,
            reason: None,
            error: None,
            interaction: None,
            metadata: self.metadata.clone(),
            duration: self.started.elapsed(),
        }
    }

    /// Lets the run's agent tools run their children through `children` (the runner's).
    pub fn with_sub_agents(&mut self, children: &'a mut dyn SubAgents) {
        self.children = Some(children);
    }

    /// Offers the tools of `host` to the model, after the agent's own (a name the agent has
    /// already is not offered twice: the agent's wins, and the note says so).
    pub fn with_host_tools(&mut self, host: &'a mut dyn HostTools) {
        self.host_tools = Some(host);
        self.offer_host_tools();
    }

    /// Adds the host's tools to the registry (again after the MCP servers' tools are offered).
    pub(super) fn offer_host_tools(&mut self) {
        let Some(host) = self.host_tools.as_deref() else {
            return;
        };
        for name in self.tools.add_host(host.definitions()) {
            let note = format!(
                "The program's tool {name} was not offered: the agent has a tool of that name"
            );
            self.log(&note);
            self.observer.progress(Progress::Note(note));
        }
    }

    /// Runs the loop until the run completes, fails, waits for a human, or is interrupted.
    pub fn run(&mut self, initial_message: Option<&str>) -> Result<RunOutcome, EngineError> {
        let result = self.run_loop(initial_message);
        self.seal_now();
        self.io.flush();
        if let Err(e) = self.recorder().remove_if_empty() {
            self.log(&format!("cannot remove the empty process record: {e}"));
        }
        // A run that waits for an answer, or paused between turns as asked, goes on later with
        // its sessions; any other stop ends their processes.
        let goes_on = matches!(&result, Ok(o) if o.status == RunStatus::WaitingForInput)
            || self.metadata.extra.contains_key(PAUSED);
        if !goes_on {
            self.stop_sessions();
        }
        self.stop_mcp();
        result
    }

    fn run_loop(&mut self, message: Option<&str>) -> Result<RunOutcome, EngineError> {
        if !self.has_start {
            // A run's first events are journaled when it is created (`session::create`). A run
            // without them is never rebuilt from its metadata: that would run its tools again.
            return Err(EngineError::NothingToResume(self.setup.run.journal()));
        }
        if let Some(error) = self.prepare_sandbox() {
            return self.fail(error, 0);
        }
        // What this process applies, after flags and a parent's limits: said once per process.
        if crate::agent::policy::any(&self.setup.agent) {
            let line = format!(
                "{}{}",
                crate::agent::policy::JOURNAL_PREFIX,
                crate::agent::policy::describe(&self.setup.agent)
            );
            self.system(Level::Info, &line)?;
        }
        if !self.setup.resuming
            && let Some(error) = self.start_mcp()?
        {
            return self.fail(error, 0);
        }
        if self.setup.resuming {
            self.begin_resume()?;
            if let Some(error) = self.start_mcp()? {
                return self.fail(error, 0);
            }
            // Every call of the last answer gets its result before anything else is said.
            if let Some(stop) = self.settle()? {
                return Ok(stop);
            }
            // Only now do the process records speak for this boot: until every open call of the
            // previous process was settled, a missing record may not be read as "never started".
            self.metadata.boot_id = process::group::boot_id();
            if let Some(message) = message {
                self.append(Event::UserMessage {
                    content: message.to_string(),
                })?;
            }
        }
        self.log(&format!("Engine started: {}", self.setup.run.run_id));
        let max = self.setup.max_iterations;
        let mut iteration = 0;
        while iteration < max {
            if self.interrupted() {
                return self.interrupt_run();
            }
            iteration += 1;
            self.report_io_failures(false)?;
            self.observer.progress(Progress::Iteration {
                n: iteration,
                max,
                run_iteration: self.metadata.iterations_completed + 1,
            });
            self.log(&format!("Starting iteration {iteration}"));
            match self.iterate(iteration)? {
                Step::Continue => {}
                Step::Stop(outcome) => return Ok(*outcome),
            }
            // The budget wins over a pause that falls on its last iteration.
            if self.setup.pause_after == Some(iteration) && iteration < max {
                return self.pause_turns(iteration);
            }
        }
        let message = format!("Maximum iterations ({max}) reached");
        self.observer.progress(Progress::Note(format!(
            "{message}; the task may be incomplete"
        )));
        self.system(Level::Warn, &message)?;
        self.complete(String::new(), Some(EndReason::MaxIterations { limit: max }))
    }

    /// Ends the run as COMPLETED with the model's `final_response`, or without one for `reason`.
    fn complete(
        &mut self,
        final_response: String,
        reason: Option<EndReason>,
    ) -> Result<RunOutcome, EngineError> {
        self.report_io_failures(true)?;
        self.append(Event::RunEnd {
            status: EndStatus::Completed,
        })?;
        self.set_status(RunStatus::Completed, true)?;
        let iterations = self.metadata.iterations_completed;
        match reason {
            None => self.log(&format!(
                "Engine completed successfully after {iterations} iterations"
            )),
            Some(r) => self.log(&format!(
                "Engine completed after {iterations} iterations: {}",
                r.describe()
            )),
        }
        let mut payload = json!({"status": "COMPLETED", "final_response": final_response,
                                 "iterations_completed": iterations});
        if let Some(r) = reason {
            payload["reason"] = json!(r.as_str());
        }
        self.run_hook(HookName::OnRunEnd, &payload)?;
        let mut outcome = self.outcome(RunStatus::Completed);
        outcome.final_response = Some(final_response);
        outcome.reason = reason;
        Ok(outcome)
    }

    fn fail(&mut self, error: String, iteration: u32) -> Result<RunOutcome, EngineError> {
        let error = self.redact(&error);
        self.system(Level::Error, &format!("{FATAL_PREFIX}{error}"))?;
        self.log(&format!("Engine failed with error: {error}"));
        self.run_hook(
            HookName::OnError,
            &json!({"error_type": "FATAL_ERROR", "message": error,
                    "context": {"iteration": iteration, "run_id": self.setup.run.run_id}}),
        )?;
        self.report_io_failures(true)?;
        self.append(Event::RunEnd {
            status: EndStatus::Failed,
        })?;
        self.set_status(RunStatus::Failed, true)?;
        self.run_hook(
            HookName::OnRunEnd,
            &json!({"status": "FAILED", "error": error, "iterations_completed": self.metadata.iterations_completed}),
        )?;
        let mut outcome = self.outcome(RunStatus::Failed);
        outcome.error = Some(error);
        Ok(outcome)
    }

    /// Stops after `iterations` iterations, as [`EngineSetup::pause_after`] asks: the run is
    /// INTERRUPTED (resumable), its journal untouched, so the model's context is what it was.
    fn pause_turns(&mut self, iterations: u32) -> Result<RunOutcome, EngineError> {
        self.report_io_failures(true)?;
        self.log(&format!("Paused after {iterations} iteration(s), as asked"));
        // Saved with the status: the next process keeps the run's sessions.
        self.metadata.extra.insert(PAUSED.into(), json!(true));
        self.set_status(RunStatus::Interrupted, false)?;
        Ok(self.outcome(RunStatus::Interrupted))
    }

    fn interrupt_run(&mut self) -> Result<RunOutcome, EngineError> {
        self.report_io_failures(true)?;
        self.system(Level::Info, "Run interrupted by user")?;
        self.log("Run interrupted by signal");
        self.set_status(RunStatus::Interrupted, false)?;
        Ok(self.outcome(RunStatus::Interrupted))
    }

    fn build_request(&mut self) -> Result<ChatRequest, context::SourceError> {
        let env = self.tool_env.clone();
        let interrupt = Arc::clone(&self.setup.interrupt);
        let recorder = self.recorder();
        let ctx = ContextEnv {
            agent: &self.setup.agent,
            workspace: &self.setup.run.workspace,
            run_id: &self.setup.run.run_id,
            env: &env,
            interrupt: &interrupt,
            recorder: Some(&recorder),
            thoughts_before: self.thoughts_before,
        };
        let built = context::build(&ctx, self.past())?;
        // Skipping an `on_missing: skip` source is expected; it goes to engine.log only.
        for note in built.notes {
            self.log(&note);
        }
        let mut messages = built.messages;
        self.lend(&mut messages, built.journal_at);
        let llm = &self.setup.agent.llm;
        Ok(ChatRequest {
            model: llm.model.clone().unwrap_or_default(),
            messages,
            tools: self.tools.definitions().to_vec(),
            tool_choice: ToolChoice::Auto,
            temperature: llm.temperature,
            max_tokens: llm.max_tokens,
        })
    }

    fn call_info(&self, took: Duration) -> records::CallInfo {
        records::CallInfo {
            model: self.setup.agent.llm.model.clone(),
            client: self.setup.client.describe(),
            took,
            provider: self.setup.agent.llm.provider,
        }
    }

    fn save_invocation(
        &self,
        id: &str,
        request: Arc<ChatRequest>,
        response: &ChatResponse,
        took: Duration,
    ) {
        let parts = records::answered(
            self.call_info(took),
            request,
            response,
            || self.response_object(id, response),
            &self.setup.redactor,
        );
        self.io.write(self.invocation_record(id), parts);
    }

    /// `io/invocations/<id>.json`: the record's name (it goes in a pack unless too large for one).
    fn invocation_record(&self, id: &str) -> PathBuf {
        self.setup.run.invocations().join(format!("{id}.json"))
    }

    /// Keeps a failed call's request and error (and the server's body) in `io/invocations/`.
    fn save_failed_invocation(
        &self,
        id: &str,
        request: Arc<ChatRequest>,
        error: &LlmError,
        took: Duration,
    ) {
        let parts = records::failed(self.call_info(took), request, error, &self.setup.redactor);
        self.io.write(self.invocation_record(id), parts);
    }

    /// `response` as a chat-completion object (what hooks see, and the record of streamed answers).
    fn response_object(&self, invocation_id: &str, response: &ChatResponse) -> Value {
        let model = self.setup.agent.llm.model.as_deref().unwrap_or_default();
        let created = self.setup.clock.now().as_second();
        llm::openai::response_body(response, invocation_id, model, created)
    }

    /// One iteration: ask the model (through the request hooks), journal its answer, run its calls.
    /// A request the server refuses for its length is made to fit and sent again (at most
    /// [`compact::REFITS`] times: estimates without a tokenizer can be wrong on odd text).
    fn iterate(&mut self, iteration: u32) -> Result<Step, EngineError> {
        self.refresh_mcp();
        let mut refused = 0;
        let (invocation_id, response) = loop {
            let request = match self.build_request() {
                Ok(r) => r,
                Err(e) => return Ok(Step::Stop(Box::new(self.fail(e.to_string(), iteration)?))),
            };
            let request = match self.fit(request)? {
                Ok(r) => r,
                Err(compact::NoFit(why)) => {
                    return Ok(Step::Stop(Box::new(self.fail(why, iteration)?)));
                }
            };
            self.observer.progress(Progress::Thinking);
            let request = if self.hooks.has(HookName::PreLlmReq) {
                let request = self.pre_llm_request(request)?;
                if self.interrupted() {
                    return Ok(Step::Stop(Box::new(self.interrupt_run()?)));
                }
                request
            } else {
                request
            };
            match self.ask_model(request, iteration, refused < compact::REFITS)? {
                Asked::Answer(id, response) => break (id, response),
                Asked::Stop(step) => return Ok(step),
                Asked::TooLong(request, overflow) => {
                    refused += 1;
                    self.learn(&request, overflow, refused);
                    self.take_back(request)?;
                }
            }
        };
        let (content, calls) = self.journal_answer(&invocation_id, &response)?;
        if self.hooks.has(HookName::PostLlmResp) {
            self.post_llm_response(&invocation_id, &response)?;
            if self.interrupted() {
                return Ok(Step::Stop(Box::new(self.interrupt_run()?)));
            }
        }
        self.act_on(content, calls)
    }

    /// Sends `request` to the model and keeps the exchange in `io/invocations/`. The run stops
    /// when it is interrupted meanwhile or the request fails; a refusal for length is handed back
    /// when `may_refit` (and compaction is on).
    fn ask_model(
        &mut self,
        request: ChatRequest,
        iteration: u32,
        may_refit: bool,
    ) -> Result<Asked, EngineError> {
        // Shared, not copied: the LLM worker sends it and the io writer records it.
        let request = Arc::new(request);
        let invocation_id = self.setup.ids.uuid_v7(self.setup.clock.now()).to_string();
        let started = Instant::now();
        let response = match self.call_llm(&request) {
            None => {
                self.reclaim(request)?;
                return Ok(Asked::Stop(Step::Stop(Box::new(self.interrupt_run()?))));
            }
            Some(Ok(r)) => r,
            Some(Err(e)) => {
                let refit = may_refit
                    && self.setup.agent.context.compaction.strategy != CompactionStrategy::Off;
                let overflow = llm::window::overflow(&e).filter(|_| refit);
                self.save_failed_invocation(
                    &invocation_id,
                    Arc::clone(&request),
                    &e,
                    started.elapsed(),
                );
                if let Some(overflow) = overflow {
                    return Ok(Asked::TooLong(self.unshare(request), overflow));
                }
                self.reclaim(request)?;
                return Ok(Asked::Stop(Step::Stop(Box::new(self.fail(
                    format!(
                        "LLM request failed: {e}\n(the request and the error are kept in io/invocations/, record {invocation_id})"
                    ),
                    iteration,
                )?))));
            }
        };
        self.window
            .calibrate(llm::window::request_chars(&request), &response);
        self.save_invocation(
            &invocation_id,
            Arc::clone(&request),
            &response,
            started.elapsed(),
        );
        self.reclaim(request)?;
        self.metadata.usage.add(response.usage);
        Ok(Asked::Answer(invocation_id, response))
    }

    /// Journals the model's answer before anything acts on it; returns its text and its calls (id,
    /// name, arguments).
    fn journal_answer(
        &mut self,
        invocation_id: &str,
        response: &ChatResponse,
    ) -> Result<(String, Vec<Call>), EngineError> {
        // What the model said is journaled, shown and returned without the keys in use (it may echo one).
        let content = self.redact(&response.text());
        let mut calls: Vec<Call> = Vec::new();
        for (i, call) in response.tool_calls().enumerate() {
            // Ids and names are the model's text too: scrubbed here, they are scrubbed in the journal,
            // the `io/` folder names and the console alike.
            let id = if call.id.is_empty() {
                format!("call_{}_{i}", self.journal.next_seq())
            } else {
                self.redact(call.id)
            };
            // One id, one call: a second call of the answer with the same id gets another, so that
            // its approval, request and result can never be taken for the first's.
            let id = unique_id(id, &calls);
            calls.push((id, self.redact(call.name), call.arguments.clone()));
        }
        let records: Vec<ToolCallRecord> = calls
            .iter()
            .map(|(id, name, args)| ToolCallRecord {
                id: id.clone(),
                kind: "function".into(),
                function: FunctionRecord {
                    name: name.clone(),
                    arguments: match args {
                        Value::String(raw) => raw.clone(),
                        other => other.to_string(),
                    },
                },
            })
            .collect();
        self.append_deferred(Event::Thought {
            content: content.clone(),
            llm_invocation_ref: invocation_id.to_string(),
            tool_calls: (!records.is_empty()).then_some(records),
            usage: Some(response.usage),
        })?;
        // An iteration is one answer of the model (with the tools it asks for): counted as it is
        // journaled, so the count is the journal's, whatever happens next.
        self.metadata.iterations_completed += 1;
        if !content.trim().is_empty() {
            self.observer.progress(Progress::Thought(content.clone()));
        }
        Ok((content, calls))
    }

    /// Ends the run on an answer without calls, else runs the calls in order.
    fn act_on(&mut self, content: String, calls: Vec<Call>) -> Result<Step, EngineError> {
        if calls.is_empty() {
            // An answer without tool calls ends the run.
            if content.trim().is_empty() {
                let reason = EndReason::EmptyAnswer;
                self.system(Level::Warn, "The model's final answer was empty")?;
                return Ok(Step::Stop(Box::new(
                    self.complete(String::new(), Some(reason))?,
                )));
            }
            return Ok(Step::Stop(Box::new(self.complete(content, None)?)));
        }
        self.observer.progress(Progress::Executing(calls.len()));
        for (id, name, args) in calls {
            // Calls not started yet stay without a request; a resume runs them.
            if self.interrupted() {
                return Ok(Step::Stop(Box::new(self.interrupt_run()?)));
            }
            if let Some(stop) = self.act(&id, &name, args)? {
                return Ok(Step::Stop(Box::new(stop)));
            }
        }
        self.save_progress()?;
        if self.interrupted() {
            return Ok(Step::Stop(Box::new(self.interrupt_run()?)));
        }
        Ok(Step::Continue)
    }
}

/// `id`, or `id_2`, `id_3`, … when a call of `calls` has it already.
fn unique_id(id: String, calls: &[Call]) -> String {
    let taken = |candidate: &str| calls.iter().any(|(seen, _, _)| seen == candidate);
    if !taken(&id) {
        return id;
    }
    (2..)
        .map(|n| format!("{id}_{n}"))
        .find(|candidate| !taken(candidate))
        .unwrap_or(id)
}

/// Brings the counts of `metadata` up to the journal's `events`: the iterations are the model's answers
/// (`THOUGHT`s), and the tokens of answers journaled after the metadata was last saved (a process
/// killed in between) are added from their `THOUGHT.usage`. The journal is the source of truth;
/// `metadata.json` only caches its counts, at most once a second while a run goes on.
pub fn catch_up(metadata: &mut RunMetadata, events: &[Event]) {
    let mut tally = history::Tally::new(metadata);
    for event in events {
        tally.see(event);
    }
    tally.apply(metadata);
}

/// Token totals of a finished outcome (for result formats).
pub fn totals(outcome: &RunOutcome) -> TokenTotals {
    outcome.metadata.usage
}

/// The response file the human writes for a waiting run.
pub fn response_path(run: &RunDir) -> PathBuf {
    run.interaction().join("response.txt")
}

/// Whether `path` looks like a run folder.
pub fn is_run_dir(path: &Path) -> bool {
    path.join("metadata.json").is_file()
}

/// Extracts the text of tool-call blocks (used by tests and the CLI).
pub fn call_names(response: &ChatResponse) -> Vec<String> {
    response
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolCall { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thought(input: u64, output: u64) -> Event {
        Event::Thought {
            content: String::new(),
            llm_invocation_ref: "i".into(),
            tool_calls: None,
            usage: Some(llm::Usage {
                input_tokens: input,
                output_tokens: output,
            }),
        }
    }

    #[test]
    fn counts_left_behind_by_a_crash_are_rebuilt_from_the_journal() {
        let mut metadata: RunMetadata = serde_json::from_value(serde_json::json!({
            "run_id": "r", "start_time": "t", "agent_ref": "/a", "task": "x",
            "status": "RUNNING", "iterations_completed": 1, "pid": 1, "hostname": "h",
            "start_time_unix": 0, "process_name": "delta",
            "usage": {"input_tokens": 10, "output_tokens": 1, "total_tokens": 11, "llm_calls": 1}
        }))
        .unwrap();
        let user = Event::UserMessage {
            content: "go".into(),
        };
        let events = [user, thought(10, 1), thought(20, 2), thought(30, 3)];
        catch_up(&mut metadata, &events);
        assert_eq!(metadata.iterations_completed, 3);
        assert_eq!(metadata.usage.input_tokens, 60);
        assert_eq!(metadata.usage.output_tokens, 6);
        assert_eq!(metadata.usage.total_tokens, 66);
        assert_eq!(metadata.usage.llm_calls, 3);
        // Up to date: nothing changes.
        let before = metadata.clone();
        catch_up(&mut metadata, &events);
        assert_eq!(metadata, before);
    }
}
