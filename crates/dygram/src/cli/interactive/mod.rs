//! `dygram execute -i`: one unit of work per call, the execution saved under
//! `.dygram/executions/<id>/`. Opening, creating, committing and repairing executions are the
//! library's (`dygram::session`); this module chooses the execution, the answer source and the
//! unit, and reports.

mod report;
mod stdin;

use std::path::Path;

use serde_json::Value;

use dygram::runtime::executor::{Event, Executor, NextUnit, Options, RuntimeError};
use dygram::runtime::state::{ExecutionState, Status};
use dygram::session::{
    self, ClientConfig, Commit, ExecutionRecorder, Executions, Found, HistoryEntry, Metadata,
    NewId, SessionError,
};
use llm::answer::{Given, request_json};
use llm::{LlmClient, Provider, SourceKind};

use super::client;
use super::execute::ExecuteArgs;
use super::input::Input;
use super::{CliError, Exit, eprint_line, input};
use report::{Report, exit_for, finish_already, print_report};
use stdin::{
    Stdin, check_answer, refused, refused_for_source, refused_late, refused_without_request,
};

/// Which unit of work one call performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// One LLM round trip, or one step without the model (`-i`, `--step-turn`).
    Turn,
    /// One step of every path, conversations to their end (`--step`).
    Step,
    /// One step of one path, paths in turn (`--step-path`).
    Path,
}

const COMMAND: &str = "dygram execute -i";

fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

fn rfc3339(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

fn session_error(e: SessionError) -> CliError {
    match e {
        SessionError::InvalidId(_) | SessionError::InvalidName(_) => CliError::usage(e.to_string()),
        SessionError::Reserved => CliError::usage(e.to_string())
            .hint("leave --id out to resume the most recent execution, or choose another id"),
        SessionError::SetAsideName(ref name) => {
            let id = name.split('.').next().unwrap_or_default().to_string();
            CliError::usage(e.to_string()).hint(format!(
                "the execution that took its place is `--id {id}` (`--id {id} --force` starts it over)"
            ))
        }
        SessionError::Busy { .. } => CliError::new(e.to_string())
            .hint("wait for the other call to finish; each execution runs one call at a time"),
        other => CliError::new(other.to_string()),
    }
}

/// Where answers come from for this call: the execution's source (`previous`), changed by the
/// flags of this call.
fn client_config(args: &ExecuteArgs, previous: Option<&ClientConfig>) -> ClientConfig {
    let mut config = previous.cloned().unwrap_or_default();
    if args.queue {
        config.kind = SourceKind::Queue;
        config.playback_dir = None;
        config.playback_state = None;
    }
    if let Some(dir) = &args.llm.playback {
        let dir = dir.display().to_string();
        // The same recordings again go on where they were; other ones start from their beginning.
        if config.kind != SourceKind::Playback
            || config.playback_dir.as_deref() != Some(dir.as_str())
        {
            config.playback_state = None;
        }
        config.kind = SourceKind::Playback;
        config.playback_dir = Some(dir);
    }
    if let Some(dir) = &args.llm.record {
        let dir = dir.display().to_string();
        // Another folder: the execution's recordings there start with it.
        if config.recordings_dir.as_deref() != Some(dir.as_str()) {
            config.recording = None;
        }
        config.recordings_dir = Some(dir);
    }
    if let Some(model) = &args.llm.model {
        config.model = Some(model.clone());
    }
    if let Some(n) = args.llm.max_tokens {
        config.max_tokens = Some(n);
    }
    if previous.is_none() || args.llm.provider != Provider::Anthropic {
        config.provider = Some(args.llm.provider);
    }
    if !matches!(config.kind, SourceKind::Playback | SourceKind::Queue)
        && args.llm.playback.is_none()
    {
        config.kind = if client::api_configured(config.provider()) {
            SourceKind::Api
        } else {
            SourceKind::Manual
        };
    }
    config
}

fn mode_of(config: &ClientConfig) -> &'static str {
    match config.kind {
        SourceKind::Playback => "playback",
        _ => "interactive",
    }
}

/// The machine compiled from the sources.
struct Compiled {
    machine: Value,
    hash: String,
    fingerprint: String,
    files: Vec<String>,
}

/// Compiles the input once; `None` when it has errors (shown).
fn compile(args: &ExecuteArgs, input: &Input, compiled: &mut Option<Compiled>) -> Option<()> {
    if compiled.is_none() {
        let project = input::compile(input, args.no_imports);
        if input::show_diagnostics(&project, args.verbosity) > 0 {
            return None;
        }
        let machine = project.entry().json(dygram::json::JsonOptions {
            source_ranges: false,
        });
        let files: Vec<String> = project
            .modules
            .iter()
            .map(|m| m.path.display().to_string())
            .collect();
        *compiled = Some(Compiled {
            hash: session::machine_hash(&machine),
            fingerprint: session::source_fingerprint(&input.text, &files),
            machine,
            files,
        });
    }
    Some(())
}

/// The execution this call works on, locked.
struct Session {
    id: String,
    _lock: store::lock::Acquired,
    /// Taken by the executor.
    state: Option<ExecutionState>,
    meta: Metadata,
    hash: String,
    started: bool,
    last_call: Option<HistoryEntry>,
}

/// Prints progress on stderr unless `-q`.
fn say(args: &ExecuteArgs, line: &str) {
    if !args.verbosity.quiet {
        eprint_line(line);
    }
}

pub fn run(args: ExecuteArgs) -> Result<Exit, CliError> {
    let unit = if args.step {
        Unit::Step
    } else if args.step_path {
        Unit::Path
    } else {
        Unit::Turn
    };
    // A wrong playback folder is reported before anything is created.
    if let Some(dir) = &args.llm.playback {
        client::open_playback(dir)?;
    }
    let input = input::read(&args.file, true)?;
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::new(format!("cannot read the current folder: {e}")))?;
    let store = Executions::under(&cwd).with_redactor(super::secrets());
    if let Some(id) = &args.id {
        session::check_id(id).map_err(session_error)?;
    }
    let mut stdin = Stdin::start(args.file == Path::new("-"));
    let mut compiled: Option<Compiled> = None;
    let Some(mut session) = open_or_create(&args, &input, &store, &mut compiled, &mut stdin)?
    else {
        return Ok(Exit::Failed);
    };
    if session.started {
        say(
            &args,
            &format!("⚡ Starting interactive execution: {}", session.id),
        );
    } else {
        say(&args, &format!("⚡ Resuming execution: {}", session.id));
    }
    session.meta.client_config = client_config(&args, Some(&session.meta.client_config));
    session.meta.mode = mode_of(&session.meta.client_config).into();
    if let Some(c) = &compiled {
        session.meta.source_files = c.files.clone();
        session.meta.source_fingerprint = Some(c.fingerprint.clone());
    }
    work(&args, &input, &store, &cwd, unit, session, &mut stdin)
}

/// Finds the execution of this call: `--id`, else the last one (unless `--force`), else a new one.
/// `None` when the machine has errors.
fn open_or_create(
    args: &ExecuteArgs,
    input: &Input,
    store: &Executions,
    compiled: &mut Option<Compiled>,
    stdin: &mut Stdin,
) -> Result<Option<Session>, CliError> {
    let mut id = args
        .id
        .clone()
        .or_else(|| if args.force { None } else { store.last() });
    if args.force
        && let Some(existing) = &id
        && let Some(aside) = store
            .replace(existing, "dygram execute -i --force", now())
            .map_err(session_error)?
    {
        say(
            args,
            &format!(
                "Starting over: the previous execution {existing} was moved to {}",
                aside.display()
            ),
        );
    }
    let mut source = None;
    if let Some(existing) = id.clone().filter(|_| !args.force) {
        match store
            .open_or_set_aside(&existing, COMMAND, now())
            .map_err(session_error)?
        {
            Found::Opened(opened) => return resume(args, input, existing, *opened, compiled),
            Found::SetAside(restart) => {
                eprint_line(&format!(
                    "⚠️  Warning: State file corrupted, starting fresh execution ({}; the old folder was kept as {})",
                    restart.reason,
                    restart.folder.display()
                ));
                if restart.source.is_none() && args.llm.playback.is_none() && !args.queue {
                    eprint_line(&source_lost(&existing, &client_config(args, None)));
                }
                source = restart.source;
                if args.id.is_none() {
                    id = None;
                }
            }
            // Without --id, the last execution went away meanwhile: a new one.
            Found::Missing if args.id.is_none() => id = None,
            Found::Missing => {}
        }
    }
    create(args, input, store, id, source, compiled, stdin)
}

/// The warning for an execution restarted after corruption whose answer source could not be read
/// from any of its files: what the fresh execution does instead, and how to give the source again.
fn source_lost(id: &str, now: &ClientConfig) -> String {
    let instead = match now.kind {
        SourceKind::Api => format!("asks the {} API", now.provider()),
        _ => "takes its answers on stdin (manual mode)".to_string(),
    };
    format!(
        "⚠️  Warning: where the answers of {id} came from is lost with its state (state.json and metadata.json cannot be read); the fresh execution {instead}. If they came from elsewhere, give the source again on the next call: --playback DIR, --queue, or an API key (and --record DIR to record)"
    )
}

/// Resumes an opened execution after checking that its machine did not change.
fn resume(
    args: &ExecuteArgs,
    input: &Input,
    id: String,
    opened: session::Opened,
    compiled: &mut Option<Compiled>,
) -> Result<Option<Session>, CliError> {
    if !opened.repaired.is_empty() {
        say(
            args,
            &format!(
                "Note: the previous call on {id} was interrupted after it was saved; {} brought up to date",
                opened.repaired.join(", ")
            ),
        );
    }
    let meta = opened.metadata;
    let unchanged = meta.source_fingerprint.as_deref()
        == Some(session::source_fingerprint(&input.text, &meta.source_files).as_str());
    if !unchanged && compile(args, input, compiled).is_none() {
        return Ok(None);
    }
    let saved = opened.state.machine_hash.clone();
    let current = compiled
        .as_ref()
        .map_or(saved.as_str(), |c| c.hash.as_str());
    if saved != current {
        return Err(CliError::new(format!(
            "Machine definition has changed since execution started.\n   Original hash: {}\n   Current hash:  {}",
            short(&saved),
            short(current)
        ))
        .hint(format!(
            "use --force to start a new execution, restore the original machine definition, or use --id to start a parallel execution (this one is {id})"
        )));
    }
    let last_call = opened.state.last_call.clone();
    let state = opened.state.restore(&id, opened.machine).map_err(|e| {
        CliError::new(e.to_string()).hint(format!(
            "start over with --force (the folder is .dygram/executions/{id})"
        ))
    })?;
    Ok(Some(Session {
        id,
        _lock: opened.lock,
        state: Some(state),
        meta,
        hash: saved,
        started: false,
        last_call,
    }))
}

/// Creates a new execution (atomically: whole or not at all).
fn create(
    args: &ExecuteArgs,
    input: &Input,
    store: &Executions,
    id: Option<String>,
    source: Option<ClientConfig>,
    compiled: &mut Option<Compiled>,
    stdin: &mut Stdin,
) -> Result<Option<Session>, CliError> {
    if compile(args, input, compiled).is_none() {
        return Ok(None);
    }
    let Some(c) = compiled.as_ref() else {
        return Ok(None);
    };
    let state = Executor::start(c.machine.clone(), None, Options::default())
        .map_err(|e| {
            CliError::new(e.to_string()).hint("name a node `start`, or annotate one @start")
        })?
        .into_state();
    let t = rfc3339(now());
    let config = client_config(args, source.as_ref());
    // Input on stdin must be the answer to the request the first call reaches: checked (and the
    // answer read) before anything is created.
    if stdin.given() {
        if config.kind != SourceKind::Manual {
            return Err(refused_for_source(&config));
        }
        let mut dry = Executor::resume(state.clone(), None, Options::default());
        match dry.next_unit() {
            Ok(NextUnit::Request(_)) => {
                if let Some(answer) = stdin.answer()? {
                    check_answer(&dry, &answer)?;
                }
            }
            _ => return Err(refused_without_request(&dry.take_events())),
        }
    }
    let meta = Metadata {
        id: String::new(),
        machine_file: input.path.as_ref().map(|p| p.display().to_string()),
        machine_source: if input.path.is_some() {
            "file"
        } else {
            "stdin"
        }
        .into(),
        started_at: t.clone(),
        last_executed_at: t,
        turn_count: 0,
        step_count: 0,
        status: Status::InProgress,
        mode: mode_of(&config).into(),
        client_config: config,
        pending_request: None,
        source_files: c.files.clone(),
        source_fingerprint: Some(c.fingerprint.clone()),
    };
    let choice = match id {
        Some(id) => NewId::Given(id),
        None => NewId::Generated(now()),
    };
    let (id, lock) = store
        .create(choice, &state, &c.hash, meta.clone(), COMMAND)
        .map_err(session_error)?;
    Ok(Some(Session {
        meta: Metadata {
            id: id.clone(),
            ..meta
        },
        id,
        _lock: lock,
        state: Some(state),
        hash: c.hash.clone(),
        started: true,
        last_call: None,
    }))
}

/// Performs the call's unit of work on the execution, commits it and reports.
fn work(
    args: &ExecuteArgs,
    input: &Input,
    store: &Executions,
    cwd: &Path,
    unit: Unit,
    mut session: Session,
    stdin: &mut Stdin,
) -> Result<Exit, CliError> {
    if session.meta.client_config.kind != SourceKind::Manual && stdin.given() {
        return Err(refused_for_source(&session.meta.client_config));
    }
    let source = client::for_execution(
        &session.meta.client_config,
        cwd,
        std::time::Duration::from_secs(args.queue_timeout),
        &session.id,
    )?;
    let answering = source.as_ref().map(|c| c.client.as_ref());
    let recorder = match answering {
        Some(inner) => recorder(&session, inner)?,
        None => None,
    };
    let client: Option<&dyn LlmClient> = match &recorder {
        Some(r) => Some(r),
        None => answering,
    };
    let options = Options {
        model: session.meta.client_config.model.clone(),
        default_model: client::default_model(session.meta.client_config.provider()),
        max_tokens: session.meta.client_config.max_tokens.unwrap_or(4096),
        ..Options::default()
    };
    let Some(state) = session.state.take() else {
        return Ok(Exit::Failed);
    };
    let mut executor = Executor::resume(state, client, options);
    if !session.started && executor.status().is_finished() {
        if stdin.given() {
            return Err(refused(
                "the execution has already ended",
                "start a new execution with --force, or another one with --id",
            ));
        }
        write_result(args, input, &executor)?;
        let exit = finish_already(args, &session.id, &executor, &session.meta);
        std::mem::forget(executor);
        return Ok(exit);
    }

    let (unit_name, waiting) = match unit {
        Unit::Turn => (
            "turn",
            one_turn(&mut executor, client, &mut session, stdin)?,
        ),
        Unit::Step => {
            executor
                .step()
                .map_err(|e| runtime_error(e, &session.meta))?;
            ("step", None)
        }
        Unit::Path => {
            executor
                .step_path()
                .map_err(|e| runtime_error(e, &session.meta))?;
            ("path step", None)
        }
    };
    let events = executor.take_events();
    if stdin.unused() {
        // Nothing is committed: the unit of work is done again by the next call.
        if stdin.arrived_late() {
            return Err(refused_late(&session.meta.client_config));
        }
        return Err(refused_without_request(&events));
    }
    if unit != Unit::Turn {
        session.meta.turn_count += events
            .iter()
            .filter(|e| matches!(e, Event::LlmCall { .. }))
            .count() as u64;
    }

    // The commit: this call happened.
    let t = now();
    let status = executor.status();
    if let Some(p) = source.as_ref().and_then(|c| c.playback.as_ref()) {
        session.meta.client_config.playback_state = Some(p.state());
    }
    if let Some(r) = &recorder {
        session.meta.client_config.recording = Some(r.position());
    }
    session.meta.end_unit(rfc3339(t), waiting.clone(), status);
    if waiting.is_none() {
        session.last_call = Some(history_entry(&events, executor.state(), &session.meta, t));
    }
    let committed = store
        .commit(
            &session.id,
            &Commit {
                state: executor.state(),
                machine_hash: &session.hash,
                metadata: &session.meta,
                last_call: session.last_call.as_ref(),
                machine_changed: executor.machine_changed(),
                now: &session.meta.last_executed_at,
            },
        )
        .map_err(session_error)?;
    for e in &committed.unrepaired {
        eprint_line(&format!(
            "⚠️  Warning: this call was saved, but a file derived from its state.json could not be written ({e}); the next call brings it up to date"
        ));
    }

    if status.is_finished() {
        write_result(args, input, &executor)?;
    }
    let waiting = waiting.map(|req| {
        let file = store
            .dir(&session.id)
            .map(|d| d.join("pending-request.json").display().to_string())
            .unwrap_or_default();
        (req, file)
    });
    let report = Report {
        id: session.id.clone(),
        started: session.started,
        events,
        status,
        unit: unit_name,
        waiting,
    };
    print_report(args, &report, &executor, &session.meta);
    if let Some(unread) = stdin.at_end() {
        eprint_line(&unread.note());
    }
    let exit = exit_for(status, report.waiting.is_some());
    // The process ends here: tearing down the machine's data structures one by one would only
    // cost time.
    std::mem::forget(executor);
    Ok(exit)
}

/// One LLM round trip (or one step without the model). `Some(request)` when the call ends waiting
/// for a manual answer.
fn one_turn(
    executor: &mut Executor<'_>,
    client: Option<&dyn LlmClient>,
    session: &mut Session,
    stdin: &mut Stdin,
) -> Result<Option<Value>, CliError> {
    let request = match executor.next_unit() {
        Ok(NextUnit::Request(request)) => request,
        Ok(NextUnit::Stepped | NextUnit::Idle) => return Ok(None),
        Err(e) => return Err(runtime_error(e, &session.meta)),
    };
    let node = executor
        .state()
        .turn_state
        .as_ref()
        .map(|t| t.node_name.clone())
        .unwrap_or_default();
    if let Some(c) = client {
        let response = c.complete(&request).map_err(|e| {
            // Nothing is saved: the next call asks again from the saved state.
            CliError::new(format!("LLM request at node '{node}' failed: {e}"))
                .hint("the execution is unchanged; run the call again")
        })?;
        executor.answer(response);
        session.meta.turn_count += 1;
        return Ok(None);
    }
    // Manual mode: the answer on stdin, or the request is saved and shown.
    let Some(response) = stdin.answer()? else {
        let request_id = format!("{}-turn-{}", session.id, session.meta.turn_count + 1);
        return Ok(Some(request_json(
            &request,
            &request_id,
            &node,
            &rfc3339(now()),
        )));
    };
    check_answer(executor, &response)?;
    let given = Given(response.clone());
    if let Some(rec) = recorder(session, &given)? {
        rec.complete(&request).map_err(|e| {
            CliError::new(format!("cannot record the answer: {e}"))
                .hint("nothing was changed; run the call again")
        })?;
        session.meta.client_config.recording = Some(rec.position());
    }
    executor.answer(response);
    session.meta.turn_count += 1;
    Ok(None)
}

/// A recorder of the execution's answers around `inner`, when it records (`--record`).
fn recorder<C: LlmClient>(
    session: &Session,
    inner: C,
) -> Result<Option<ExecutionRecorder<C>>, CliError> {
    let rec = ExecutionRecorder::for_execution(inner, &session.meta).map_err(|e| {
        CliError::new(format!("cannot record the answers: {e}"))
            .hint("the execution is unchanged; check the --record folder")
    })?;
    Ok(rec.map(|r| r.with_redactor(super::secrets())))
}

/// The history line of a call that advanced the execution.
fn history_entry(
    events: &[Event],
    state: &ExecutionState,
    meta: &Metadata,
    t: jiff::Timestamp,
) -> HistoryEntry {
    let node = events
        .iter()
        .find_map(|e| match e {
            Event::LlmCall { node, .. } => Some(node.clone()),
            Event::Transition { from, .. } => Some(from.clone()),
            Event::Completed { node, .. } | Event::Failed { node, .. } => Some(node.clone()),
            _ => None,
        })
        .or_else(|| state.main_path().map(|p| p.current_node.clone()))
        .unwrap_or_default();
    let tools: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    let output: Option<String> = events.iter().find_map(|e| match e {
        Event::Output { text, .. } => Some(text.chars().take(100).collect()),
        _ => None,
    });
    HistoryEntry {
        turn: meta.step_count,
        timestamp: rfc3339(t),
        node,
        tools,
        output,
        status: meta.status,
    }
}

/// With `-d`, an execution that ended leaves its result file there too (as one-shot runs do).
fn write_result(
    args: &ExecuteArgs,
    input: &Input,
    executor: &Executor<'_>,
) -> Result<(), CliError> {
    let Some(dest) = &args.destination else {
        return Ok(());
    };
    let file = dest.join(format!("{}-result.json", input.stem()));
    let mut result = super::execute::result_json(executor.state());
    super::secrets().redact_json(&mut result);
    let mut text = serde_json::to_string_pretty(&result)
        .map_err(|e| CliError::new(format!("cannot write the result: {e}")))?;
    text.push('\n');
    store::atomic::create_dir_all_durable(dest)
        .map_err(|e| CliError::new(format!("cannot create {}: {e}", dest.display())))?;
    store::atomic::write_atomic(&file, text.as_bytes())
        .map_err(|e| CliError::new(format!("cannot write {}: {e}", file.display())))
}

fn short(hash: &str) -> String {
    format!("{}…", hash.chars().take(12).collect::<String>())
}

fn runtime_error(e: RuntimeError, meta: &Metadata) -> CliError {
    let hint = matches!(e, RuntimeError::NoClient { .. })
        .then(|| client::missing_client_hint(meta.client_config.provider()));
    let err = CliError::new(e.to_string());
    match hint {
        Some(h) => err.hint(h),
        None => err,
    }
}
