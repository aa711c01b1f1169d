//! `dygram execute -i`: one turn per call, the execution saved under `.dygram/executions/<id>/`.

use std::io::{IsTerminal, Read};
use std::path::Path;

use serde_json::{Value, json};

use dygram::answer::{Given, parse_answer, request_json};
use dygram::queue::QueueClient;
use dygram::runtime::executor::{Event, Executor, NextUnit, Options, RuntimeError};
use dygram::runtime::state::{PathStatus, Status};
use dygram::session::{self, ClientConfig, Executions, HistoryEntry, Metadata, SessionError};
use llm::{ChatResponse, LlmClient, Recorder};

use super::client::{self, Provider};
use super::execute::{ExecFormat, ExecuteArgs, describe};
use super::{CliError, Exit, eprint_line, input, print_out};

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

fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

fn rfc3339(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

fn session_error(e: SessionError) -> CliError {
    match e {
        SessionError::InvalidId(_) => CliError::usage(e.to_string()),
        SessionError::Busy { .. } => CliError::new(e.to_string())
            .hint("wait for the other call to finish; each execution runs one call at a time"),
        other => CliError::new(other.to_string()),
    }
}

/// Where answers come from for this call.
fn client_config(args: &ExecuteArgs, previous: Option<&ClientConfig>) -> ClientConfig {
    let mut config = previous.cloned().unwrap_or_default();
    if args.queue {
        config.kind = "queue".into();
        config.playback_dir = None;
        config.playback_state = None;
    }
    if let Some(dir) = &args.llm.playback {
        config.kind = "playback".into();
        config.playback_dir = Some(dir.display().to_string());
        config.playback_state = None;
    }
    if let Some(dir) = &args.llm.record {
        config.recordings_dir = Some(dir.display().to_string());
    }
    if let Some(model) = &args.llm.model {
        config.model = Some(model.clone());
    }
    if let Some(n) = args.llm.max_tokens {
        config.max_tokens = Some(n);
    }
    if previous.is_none() || args.llm.provider != Provider::Anthropic {
        config.provider = Some(
            match args.llm.provider {
                Provider::Anthropic => "anthropic",
                Provider::Openai => "openai",
            }
            .into(),
        );
    }
    if config.kind.is_empty()
        || (!matches!(config.kind.as_str(), "playback" | "queue") && args.llm.playback.is_none())
    {
        let provider = provider_of(&config);
        config.kind = if client::api_configured(provider) {
            "api".into()
        } else {
            "manual".into()
        };
    }
    config
}

fn provider_of(config: &ClientConfig) -> Provider {
    match config.provider.as_deref() {
        Some("openai") => Provider::Openai,
        _ => Provider::Anthropic,
    }
}

fn mode_of(config: &ClientConfig) -> &'static str {
    match config.kind.as_str() {
        "playback" => "playback",
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

/// Output of one call.
struct Report {
    id: String,
    started: bool,
    events: Vec<Event>,
    status: Status,
    unit: &'static str,
    waiting: Option<(Value, String)>,
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
    let store = Executions::under(&cwd);
    if let Some(id) = &args.id
        && !session::valid_id(id)
    {
        return Err(session_error(SessionError::InvalidId(id.clone())));
    }
    let quiet = args.verbosity.quiet;
    let say = |line: &str| {
        if !quiet {
            eprint_line(line);
        }
    };

    // Which execution: --id, else the last one (unless --force), else a new one.
    let mut id = args
        .id
        .clone()
        .or_else(|| if args.force { None } else { store.last() });
    if args.force
        && let Some(existing) = id.as_ref().filter(|i| store.exists(i))
    {
        // Not while another call works on it.
        let lock = store
            .lock(existing, "dygram execute -i --force")
            .map_err(session_error)?;
        let aside = store
            .set_aside(existing, "replaced", now())
            .map_err(session_error)?;
        drop(lock);
        say(&format!(
            "Starting over: the previous execution {existing} was moved to {}",
            aside.display()
        ));
    }
    // The machine is compiled only when needed: for a new execution, or when the sources differ
    // from the ones the execution started with (then the machine hash decides).
    let mut compiled: Option<Compiled> = None;
    let compile = |compiled: &mut Option<Compiled>| -> Result<bool, CliError> {
        if compiled.is_none() {
            let project = input::compile(&input, args.no_imports);
            if input::show_diagnostics(&project, args.verbosity) > 0 {
                return Ok(false);
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
        Ok(true)
    };
    let mut loaded = None;
    if let Some(existing) = id.clone().filter(|i| store.exists(i)) {
        let lock = store
            .lock(&existing, "dygram execute -i")
            .map_err(session_error)?;
        match store.load(&existing) {
            Ok(files) => loaded = Some((existing, files, lock)),
            Err(SessionError::Corrupted { reason, .. }) => {
                let aside = store
                    .set_aside(&existing, "corrupted", now())
                    .map_err(session_error)?;
                drop(lock);
                eprint_line(&format!(
                    "⚠️  Warning: State file corrupted, starting fresh execution ({reason}; the old folder was kept as {})",
                    aside.display()
                ));
                if args.id.is_none() {
                    id = None;
                }
            }
            Err(e) => return Err(session_error(e)),
        }
    }

    let (id, mut state_file, mut meta, snapshot, _lock, started) = match loaded {
        Some((id, (state_file, meta, snapshot), lock)) => {
            let unchanged = meta.source_fingerprint.as_deref()
                == Some(session::source_fingerprint(&input.text, &meta.source_files).as_str());
            if !unchanged && !compile(&mut compiled)? {
                return Ok(Exit::Failed);
            }
            let hash = compiled
                .as_ref()
                .map_or(state_file.machine_hash.as_str(), |c| c.hash.as_str());
            if state_file.machine_hash != hash {
                return Err(CliError::new(format!(
                    "Machine definition has changed since execution started.\n   Original hash: {}\n   Current hash:  {}",
                    short(&state_file.machine_hash),
                    short(hash)
                ))
                .hint(format!(
                    "use --force to start a new execution, restore the original machine definition, or use --id to start a parallel execution (this one is {id})"
                )));
            }
            // The counters of a call killed between the two writes are in the state file.
            let mut meta = meta;
            meta.turn_count = meta.turn_count.max(state_file.turn_count);
            meta.step_count = meta.step_count.max(state_file.call_count);
            (id, Some(state_file), meta, snapshot, lock, false)
        }
        None => {
            if !compile(&mut compiled)? {
                return Ok(Exit::Failed);
            }
            let new_id = id.unwrap_or_else(|| store.new_id(now()));
            // Another process may take an id in the same second: the next free one is taken.
            let mut attempt = store.create_dir(&new_id);
            if args.id.is_none() {
                for _ in 0..100 {
                    if attempt.is_ok() {
                        break;
                    }
                    attempt = store.create_dir(&store.new_id(now()));
                }
            }
            let dir = attempt.map_err(session_error)?;
            let new_id = dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or(&new_id)
                .to_string();
            let lock = store
                .lock(&new_id, "dygram execute -i")
                .map_err(session_error)?;
            let Some(c) = compiled.as_ref() else {
                return Ok(Exit::Failed);
            };
            store
                .save_machine(&new_id, &c.machine)
                .map_err(session_error)?;
            let t = rfc3339(now());
            let config = client_config(&args, None);
            let meta = Metadata {
                id: new_id.clone(),
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
                status: Status::InProgress.as_str().into(),
                mode: mode_of(&config).into(),
                client_config: config,
                pending_request: None,
                source_files: c.files.clone(),
                source_fingerprint: Some(c.fingerprint.clone()),
            };
            (new_id, None, meta, Value::Null, lock, true)
        }
    };
    if started {
        say(&format!("⚡ Starting interactive execution: {id}"));
    } else {
        say(&format!("⚡ Resuming execution: {id}"));
    }
    meta.client_config = client_config(&args, Some(&meta.client_config));
    meta.mode = mode_of(&meta.client_config).into();

    let options = Options {
        model: meta.client_config.model.clone(),
        default_model: client::default_model(provider_of(&meta.client_config)),
        max_tokens: meta.client_config.max_tokens.unwrap_or(4096),
        ..Options::default()
    };
    // The source of answers.
    let mut playback = None;
    let api;
    let queue;
    let mut inner: Option<&dyn LlmClient> = None;
    if meta.client_config.kind == "playback" {
        let dir = meta.client_config.playback_dir.clone().unwrap_or_default();
        let p = client::open_playback(Path::new(&dir))?;
        let p = match &meta.client_config.playback_state {
            Some(s) => p.with_state(s.clone()),
            None => p,
        };
        playback = Some(p);
        inner = playback.as_ref().map(|p| p as &dyn LlmClient);
    } else if meta.client_config.kind == "queue" {
        let dir = cwd.join(".dygram").join("interactive-queue");
        queue = QueueClient::new(
            &dir,
            std::time::Duration::from_secs(args.queue_timeout),
            &id,
        )
        .map_err(|e| CliError::new(e.to_string()))?;
        inner = Some(&queue as &dyn LlmClient);
    } else if meta.client_config.kind == "api" {
        api = client::api_client(provider_of(&meta.client_config));
        inner = api.as_deref();
    }
    let recorder = match (&meta.client_config.recordings_dir, inner) {
        (Some(dir), Some(inner)) => Some(
            Recorder::new(inner, dir)
                .map_err(|e| CliError::new(format!("cannot record into {dir}: {e}")))?,
        ),
        _ => None,
    };
    let client: Option<&dyn LlmClient> = match &recorder {
        Some(r) => Some(r),
        None => inner,
    };

    let saved_hash = state_file.as_ref().map(|sf| sf.machine_hash.clone());
    let mut executor = match state_file.take() {
        Some(sf) => {
            let state = sf.restore(snapshot).map_err(|e| {
                CliError::new(format!(
                    "the state of execution {id} cannot be restored: {e}"
                ))
                .hint(format!(
                    "start over with --force (the folder is .dygram/executions/{id})"
                ))
            })?;
            Executor::resume(state, client, options)
        }
        None => Executor::start(
            compiled
                .as_ref()
                .map(|c| c.machine.clone())
                .unwrap_or_default(),
            client,
            options,
        )
        .map_err(|e| CliError::new(e.to_string()))?,
    };

    if started {
        // A new execution is saved before any work, so a failed or killed first call leaves a
        // complete execution behind.
        let hash = compiled
            .as_ref()
            .map(|c| c.hash.clone())
            .unwrap_or_default();
        let sf =
            session::state_json(executor.state(), &hash, &rfc3339(now()), 0, 0).map_err(|e| {
                CliError::new(format!("cannot serialise the state of execution {id}: {e}"))
            })?;
        store.save(&id, &sf, &meta).map_err(session_error)?;
        store.set_last(&id).map_err(session_error)?;
    }
    let status_before = executor.status();
    if !started && matches!(status_before, Status::Complete | Status::Error) {
        return finish_already(&args, &id, &executor, &meta);
    }

    // One unit of work.
    let mut waiting = None;
    let llm_calls_before = meta.turn_count;
    let unit_name;
    match unit {
        Unit::Turn => {
            unit_name = "turn";
            match executor.next_unit() {
                Ok(NextUnit::Request(request)) => {
                    let node = executor
                        .state()
                        .turn_state
                        .as_ref()
                        .map(|t| t.node_name.clone())
                        .unwrap_or_default();
                    if let Some(c) = client {
                        match c.complete(&request) {
                            Ok(response) => {
                                executor.answer(response);
                                meta.turn_count += 1;
                            }
                            Err(e) => {
                                // Nothing is saved: the next call asks again from the saved state.
                                return Err(CliError::new(format!(
                                    "LLM request at node '{node}' failed: {e}"
                                ))
                                .hint("the execution is unchanged; run the call again"));
                            }
                        }
                    } else {
                        // Manual mode: an answer on stdin, or the request is saved and shown.
                        let answer = if meta.pending_request.is_some() {
                            read_stdin_answer()?
                        } else {
                            None
                        };
                        match answer {
                            Some(response) => {
                                if let Some(dir) = &meta.client_config.recordings_dir {
                                    let given = Given(response.clone());
                                    let rec = Recorder::new(&given, dir).map_err(|e| {
                                        CliError::new(format!("cannot record into {dir}: {e}"))
                                    })?;
                                    rec.complete(&request).map_err(|e| {
                                        CliError::new(format!("cannot record into {dir}: {e}"))
                                    })?;
                                }
                                executor.answer(response);
                                meta.turn_count += 1;
                                meta.pending_request = None;
                                if let Ok(dir) = store.dir(&id) {
                                    let _ = std::fs::remove_file(dir.join("pending-request.json"));
                                }
                            }
                            None => {
                                let request_id = format!("{id}-turn-{}", meta.turn_count + 1);
                                let req =
                                    request_json(&request, &request_id, &node, &rfc3339(now()));
                                let file = store
                                    .dir(&id)
                                    .map_err(session_error)?
                                    .join("pending-request.json");
                                store::atomic::write_json_atomic(&file, &req, true).map_err(
                                    |e| {
                                        CliError::new(format!(
                                            "cannot write {}: {e}",
                                            file.display()
                                        ))
                                    },
                                )?;
                                meta.pending_request = Some(req.clone());
                                waiting = Some((req, file.display().to_string()));
                            }
                        }
                    }
                }
                Ok(NextUnit::Stepped | NextUnit::Idle) => {}
                Err(e) => return Err(runtime_error(e, &meta)),
            }
        }
        Unit::Step => {
            unit_name = "step";
            if let Err(e) = executor.step() {
                return Err(runtime_error(e, &meta));
            }
        }
        Unit::Path => {
            unit_name = "path step";
            if let Err(e) = executor.step_path() {
                return Err(runtime_error(e, &meta));
            }
        }
    }
    let events = executor.take_events();
    if unit != Unit::Turn {
        meta.turn_count += events
            .iter()
            .filter(|e| matches!(e, Event::LlmCall { .. }))
            .count() as u64;
    }
    let _ = llm_calls_before;

    // Save: machine (when meta tools changed it), state, metadata, history.
    let state = executor.state();
    if executor.machine_changed() {
        store
            .save_machine(&id, &state.machine_snapshot)
            .map_err(session_error)?;
    }
    let t = now();
    let status = state.status();
    if waiting.is_none() {
        meta.step_count += 1;
    }
    meta.status = if waiting.is_some() {
        "paused".into()
    } else {
        status.as_str().into()
    };
    meta.last_executed_at = rfc3339(t);
    if let Some(p) = &playback {
        meta.client_config.playback_state = Some(p.state());
    }
    let hash = match (&compiled, saved_hash) {
        (Some(c), _) => c.hash.clone(),
        (None, Some(h)) => h,
        (None, None) => String::new(),
    };
    if let Some(c) = &compiled {
        meta.source_files = c.files.clone();
        meta.source_fingerprint = Some(c.fingerprint.clone());
    }
    let sf = session::state_json(state, &hash, &rfc3339(t), meta.turn_count, meta.step_count)
        .map_err(|e| CliError::new(format!("cannot serialise the state of execution {id}: {e}")))?;
    store.save(&id, &sf, &meta).map_err(session_error)?;
    if waiting.is_none() {
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
        store
            .append_history(
                &id,
                &HistoryEntry {
                    turn: meta.step_count,
                    timestamp: rfc3339(t),
                    node,
                    tools,
                    output,
                    status: meta.status.clone(),
                },
            )
            .map_err(session_error)?;
    }
    let report = Report {
        id: id.clone(),
        started,
        events,
        status,
        unit: unit_name,
        waiting,
    };
    // With -d, an execution that ended leaves its result file there too (as one-shot runs do).
    if let Some(dest) = &args.destination
        && matches!(status, Status::Complete | Status::Error)
    {
        let file = dest.join(format!("{}-result.json", input.stem()));
        let mut text = serde_json::to_string_pretty(&super::execute::result_json(executor.state()))
            .map_err(|e| CliError::new(format!("cannot write the result: {e}")))?;
        text.push('\n');
        store::atomic::create_dir_all_durable(dest)
            .map_err(|e| CliError::new(format!("cannot create {}: {e}", dest.display())))?;
        store::atomic::write_atomic(&file, text.as_bytes())
            .map_err(|e| CliError::new(format!("cannot write {}: {e}", file.display())))?;
    }
    print_report(&args, &report, &executor, &meta);
    // The process ends here: tearing down the machine's data structures one by one would only
    // cost time.
    std::mem::forget(executor);
    if report.waiting.is_some() {
        return Ok(Exit::Waiting);
    }
    Ok(match status {
        Status::Complete => Exit::Complete,
        Status::Error => Exit::Failed,
        _ => Exit::Ok,
    })
}

fn short(hash: &str) -> String {
    format!("{}…", hash.chars().take(12).collect::<String>())
}

fn runtime_error(e: RuntimeError, meta: &Metadata) -> CliError {
    let hint = matches!(e, RuntimeError::NoClient { .. })
        .then(|| client::missing_client_hint(provider_of(&meta.client_config)));
    let err = CliError::new(e.to_string());
    match hint {
        Some(h) => err.hint(h),
        None => err,
    }
}

/// An answer from stdin when one is piped in (`None` for a terminal or an empty input).
fn read_stdin_answer() -> Result<Option<ChatResponse>, CliError> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Ok(None);
    }
    let mut text = String::new();
    stdin
        .lock()
        .read_to_string(&mut text)
        .map_err(|e| CliError::new(format!("cannot read standard input: {e}")))?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    parse_answer(&text).map(Some).map_err(|e| {
        CliError::new(format!("Failed to parse response: {e}")).hint(
            "answer with plain text, {\"response\": \"…\", \"tools\": [{\"name\": \"…\", \"input\": {…}}]}, or {\"type\": \"llm_response\", \"response\": {\"content\": […]}}; nothing was changed",
        )
    })
}

fn finish_already(
    args: &ExecuteArgs,
    id: &str,
    executor: &Executor<'_>,
    meta: &Metadata,
) -> Result<Exit, CliError> {
    let state = executor.state();
    let status = state.status();
    if args.format == ExecFormat::Json {
        print_out(&format!(
            "{}\n",
            json!({"id": id, "status": status.as_str(), "alreadyFinished": true,
                "turns": meta.turn_count, "steps": meta.step_count,
                "currentNodes": current_nodes(executor), "visitedNodes": state.visited_nodes(),
                "contextState": state.context_state})
        ));
    } else if status == Status::Complete {
        print_out("✅ Execution already complete!\n");
        print_out(&final_results(id, executor, meta));
    } else {
        print_out(&format!("❌ Execution {id} ended with an error.\n"));
        print_out(&final_results(id, executor, meta));
    }
    Ok(if status == Status::Complete {
        Exit::Complete
    } else {
        Exit::Failed
    })
}

fn current_nodes(executor: &Executor<'_>) -> Vec<String> {
    let mut v: Vec<String> = executor
        .state()
        .paths
        .iter()
        .filter(|p| matches!(p.status, PathStatus::Active | PathStatus::Waiting))
        .map(|p| p.current_node.clone())
        .collect();
    v.dedup();
    v
}

fn final_results(id: &str, executor: &Executor<'_>, meta: &Metadata) -> String {
    let state = executor.state();
    let mut s = String::from("📊 Final Results:\n");
    s.push_str(&format!("  Execution: {id}\n"));
    s.push_str(&format!("  Total turns: {}\n", meta.turn_count));
    s.push_str(&format!("  Total steps: {}\n", meta.step_count));
    s.push_str(&format!("  Status: {}\n", state.status().as_str()));
    s.push_str(&format!("  Started: {}\n", meta.started_at));
    s.push_str(&format!("  Last updated: {}\n", meta.last_executed_at));
    s.push_str("  Execution path:\n");
    for p in &state.paths {
        for t in &p.history {
            s.push_str(&format!(
                "    [{}] {} --({})--> {}\n",
                p.id, t.from, t.transition, t.to
            ));
        }
        if let Some(e) = &p.error {
            s.push_str(&format!(
                "    [{}] failed at {}: {e}\n",
                p.id, p.current_node
            ));
        }
    }
    s
}

fn print_report(args: &ExecuteArgs, r: &Report, executor: &Executor<'_>, meta: &Metadata) {
    let state = executor.state();
    if args.format == ExecFormat::Json {
        let events: Vec<Value> = r.events.iter().filter_map(event_json).collect();
        let mut out = json!({
            "id": r.id,
            "started": r.started,
            "unit": r.unit,
            "status": if r.waiting.is_some() { "waiting" } else { r.status.as_str() },
            "turns": meta.turn_count,
            "steps": meta.step_count,
            "currentNodes": current_nodes(executor),
            "events": events,
            "contextState": state.context_state,
        });
        if let Some((req, file)) = &r.waiting {
            out["request"] = req.clone();
            out["requestFile"] = json!(file);
        }
        print_out(&format!("{out}\n"));
        return;
    }
    if matches!(args.format, ExecFormat::Dot | ExecFormat::Mermaid) {
        print_out(&super::execute::diagram(args.format, state));
        return;
    }
    let mut s = String::new();
    for e in &r.events {
        match e {
            Event::LlmCall { node, .. } => {
                s.push_str(&format!("📍 Turn {} - Node: {node}\n", meta.turn_count));
            }
            Event::ToolCall { .. } | Event::Output { .. } => {}
            other => {
                s.push_str(&format!("{}\n", describe(other)));
            }
        }
    }
    let tools: Vec<String> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall { name, is_error, .. } if *is_error => Some(format!("{name} (failed)")),
            Event::ToolCall { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    if !tools.is_empty() {
        s.push_str(&format!("  Tools: {}\n", tools.join(", ")));
    }
    if let Some(text) = r.events.iter().find_map(|e| match e {
        Event::Output { text, .. } => Some(text),
        _ => None,
    }) {
        let short: String = text.chars().take(100).collect();
        let more = if text.chars().count() > 100 {
            "…"
        } else {
            ""
        };
        s.push_str(&format!("  Output: {}{more}\n", short.replace('\n', " ")));
    }
    if let Some((req, file)) = &r.waiting {
        let node = req.get("node").and_then(Value::as_str).unwrap_or("?");
        let tools: Vec<&str> = req
            .get("tools")
            .and_then(Value::as_array)
            .map(|t| {
                t.iter()
                    .filter_map(|t| t.get("name").and_then(Value::as_str))
                    .collect()
            })
            .unwrap_or_default();
        s.push_str(&format!("⏸️  Waiting for LLM response at node {node}\n"));
        s.push_str(&format!("LLM REQUEST saved to {file}\n"));
        s.push_str(&format!("  Tools: {}\n", tools.join(", ")));
        s.push_str("EXAMPLE RESPONSE:\n");
        s.push_str(&format!("  {}\n", executor.example_answer()));
        let file_arg = args.file.display();
        s.push_str(&format!(
            "Answer with:\n  echo '<response>' | dygram execute -i {file_arg} --id {}\n",
            r.id
        ));
    } else if r.status == Status::Complete {
        s.push_str("✅ Execution complete!\n");
        s.push_str(&final_results(&r.id, executor, meta));
    } else if r.status == Status::Error {
        s.push_str("❌ Execution ended with an error.\n");
        s.push_str(&final_results(&r.id, executor, meta));
    } else {
        let at = current_nodes(executor).join(", ");
        s.push_str(&format!(
            "💾 State saved (.dygram/executions/{}); now at {at}. Run again to continue.\n",
            r.id
        ));
    }
    print_out(&s);
}

fn event_json(e: &Event) -> Option<Value> {
    Some(match e {
        Event::Transition {
            path,
            from,
            to,
            reason,
        } => {
            json!({"type": "transition", "path": path, "from": from, "to": to, "transition": reason})
        }
        Event::LlmCall {
            path,
            node,
            tools,
            messages,
            model,
        } => json!({"type": "llm_call", "path": path, "node": node, "tools": tools,
            "messages": messages, "model": model}),
        Event::ToolCall {
            path,
            name,
            is_error,
            result,
        } => {
            json!({"type": "tool", "path": path, "name": name, "isError": is_error, "result": result})
        }
        Event::Output { path, text } => json!({"type": "output", "path": path, "text": text}),
        Event::Spawned { path, node, parent } => {
            json!({"type": "spawned", "path": path, "node": node, "parent": parent})
        }
        Event::Completed { path, node } => json!({"type": "completed", "path": path, "node": node}),
        Event::Failed { path, node, error } => {
            json!({"type": "failed", "path": path, "node": node, "error": error})
        }
        Event::Waiting { path, node, reason } => {
            json!({"type": "waiting", "path": path, "node": node, "reason": reason})
        }
    })
}
