//! The library's errors of a call, with the hints the command line adds.

use dygram_runtime::executor::RuntimeError;
use dygram_runtime::session::shared::SharedError;
use dygram_runtime::session::{CallError, ClientConfig, Metadata, Refusal, SessionError};

use super::super::client;
use super::super::{CliError, Exit};

/// An error of the execution store.
pub fn session_error(e: SessionError) -> CliError {
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
            .hint("wait for the other call to finish; each execution runs one call at a time")
            .code(Exit::Busy),
        other => CliError::new(other.to_string()),
    }
}

/// An error of the store of a shared execution (`--store`). A turn refused because another
/// caller took the execution over exits 1, as every failed call does; a held one is busy (75).
pub fn shared_error(e: SharedError) -> CliError {
    let hint = match &e {
        SharedError::Busy { .. } => Some(
            "wait for the other call to finish; each execution runs one call at a time (a caller that died holds it until its lease runs out, 30 seconds after its last renewal)",
        ),
        SharedError::Fenced { .. } => {
            Some("run the call again: it goes on from what the caller that took over saved")
        }
        SharedError::Connect(_) => Some(
            "check the URL of --store (or DYGRAM_STORE) and that the PostgreSQL server accepts the connection",
        ),
        SharedError::Corrupted { .. } => Some(
            "the execution's documents in the store need a look (table documents, namespace dygram); another --id starts a new execution",
        ),
        SharedError::NoId => Some("add --id NAME"),
        SharedError::NoPostgres(_) => Some(
            "build dygram with the cargo feature `postgres` (on by default), or share through a folder: --store file:///path",
        ),
        SharedError::NotFound(_) => {
            Some("`dygram exec list --store URL` lists the executions of the store")
        }
        SharedError::Store { .. } | SharedError::Io { .. } => None,
    };
    let kind = match &e {
        SharedError::NotFound(_) => "not_found",
        SharedError::Busy { .. } => "busy",
        _ => "failed",
    };
    let busy = kind == "busy";
    let error = CliError::from_error(e)
        .maybe_hint(hint.map(str::to_string))
        .kind(kind);
    if busy { error.code(Exit::Busy) } else { error }
}

/// An error of a call; `meta` is the execution's when it was opened (its answer source names
/// the hint for a missing API key).
pub fn call_error(e: CallError<CliError>, meta: Option<&Metadata>) -> CliError {
    let kind = call_kind(&e);
    let error = call_error_with_hint(e, meta);
    match kind {
        Some(kind) if error.exit() != super::super::Exit::Usage => error.kind(kind),
        _ => error,
    }
}

/// The kind of a call's error for programs (`kind` of the JSON error object), where it is more
/// than `failed`.
fn call_kind(e: &CallError<CliError>) -> Option<&'static str> {
    Some(match e {
        CallError::Store(SessionError::Busy { .. }) => "busy",
        CallError::Store(SessionError::NotFound(_)) => "not_found",
        CallError::MachineChanged { .. } => "machine_changed",
        CallError::Runtime(RuntimeError::NoClient { .. }) => "missing_api_key",
        CallError::Runtime(RuntimeError::Agent { .. } | RuntimeError::NoAgents { .. }) => "agent",
        CallError::Llm { .. } => "llm",
        CallError::BadAnswer(_) => "bad_answer",
        CallError::NoStart(_) => "invalid_machine",
        _ => return None,
    })
}

fn call_error_with_hint(e: CallError<CliError>, meta: Option<&Metadata>) -> CliError {
    let message = e.to_string();
    let hint = match e {
        CallError::Store(e) => return session_error(e),
        CallError::Shared(e) => return shared_error(*e),
        CallError::Host(e) => return e,
        CallError::MachineChanged { id, .. } => format!(
            "use --force to start a new execution, restore the original machine definition, or use --id to start a parallel execution (this one is {id})"
        ),
        CallError::Restore { id, .. } => {
            format!("start over with --force (the folder is .dygram/executions/{id})")
        }
        CallError::NoStart(_) => "name a node `start`, or annotate one @start".into(),
        CallError::Runtime(RuntimeError::NoClient { .. }) => {
            let config = meta.map(|m| &m.client_config).cloned().unwrap_or_default();
            client::missing_client_hint(config.provider()).into()
        }
        CallError::Runtime(RuntimeError::Agent { source, .. }) => source.hint.clone().map_or_else(
            || "the execution is unchanged; run the call again".into(),
            |hint| format!("{hint}; the execution is unchanged"),
        ),
        CallError::Runtime(RuntimeError::NoAgents { .. }) => {
            "step it with dygram execute -i, which runs the agent one turn per call".into()
        }
        CallError::Llm { .. } => "the execution is unchanged; run the call again".into(),
        CallError::Recorder(_) => "the execution is unchanged; check the --record folder".into(),
        CallError::Record(_) => "nothing was changed; run the call again".into(),
        CallError::BadAnswer(_) => "answer with plain text, {\"response\": \"…\", \"tools\": [{\"name\": \"…\", \"input\": {…}}]}, or {\"type\": \"llm_response\", \"response\": {\"content\": […]}}; nothing was changed".into(),
        CallError::Refused(refusal) => refusal_hint(&refusal).into(),
        CallError::Late(config) => late_hint(&config),
        CallError::WouldFail { example, .. } => format!("answer with a tool call, e.g. {example}"),
        CallError::UnknownTools { example, .. } => {
            format!("answer with the tools the request offers, e.g. {example}")
        }
        CallError::Runtime(_)
        | CallError::Queue(_)
        | CallError::InputUnreadable(_)
        | CallError::Unsettled(_)
        | CallError::Result(_) => return CliError::new(message),
    };
    CliError::new(message).hint(hint)
}

fn refusal_hint(refusal: &Refusal) -> &'static str {
    match refusal {
        Refusal::Source(_) => {
            "leave the input out; answers on stdin are for executions in manual mode (no API key, no --playback, no --queue)"
        }
        Refusal::NoRequest { .. } => {
            "run this call without input, and answer when a call shows a request (exit code 101)"
        }
        Refusal::Ended => "start a new execution with --force, or another one with --id",
        Refusal::AgentAsks(_) => "answer the question shown, in the next call",
    }
}

/// The hint for input that arrived after the call had looked for it.
fn late_hint(config: &ClientConfig) -> String {
    if config.kind == llm::SourceKind::Manual {
        return "run the call again with the input ready at its start (e.g. write the answer to a file and use `< answer.json`)".to_string();
    }
    format!(
        "answers on stdin are for executions in manual mode; run the call again without input{}",
        if config.kind == llm::SourceKind::Queue {
            " (the queue's answer was not used either: the next call asks the queue again)"
        } else {
            ""
        }
    )
}

/// The warning for an execution restarted after corruption whose answer source could not be read
/// from any of its files: what the fresh execution does instead, and how to give the source again.
pub fn source_lost(id: &str, now: &ClientConfig) -> String {
    let instead = match now.kind {
        llm::SourceKind::Api => format!("asks the {} API", now.provider()),
        _ => "takes its answers on stdin (manual mode)".to_string(),
    };
    format!(
        "⚠️  Warning: where the answers of {id} came from is lost with its state (state.json and metadata.json cannot be read); the fresh execution {instead}. If they came from elsewhere, give the source again on the next call: --playback DIR, --queue, or an API key (and --record DIR to record)"
    )
}
