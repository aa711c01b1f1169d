//! The library without the binary: `dygram_runtime::session::Session` drives a whole turn-by-turn
//! execution (open, advance one unit, commit), with answers from the scripted HTTP server of
//! `testkit` or given by hand, and the files it persists are checked after each call.

use std::io::Cursor;
use std::path::Path;

use serde_json::{Value, json};

use dygram_runtime::session::{
    Advance, CallRequest, ClientConfig, CompiledMachine, Executions, Host, ManualInput, Notice,
    Opening, Report, Session, Unit,
};
use dygram_runtime::state::Status;
use dygram_syntax::source::SourceFile;
use llm::openai::{OpenAiClient, OpenAiConfig};
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use super::answers::ORDER;
use super::support::Dir;

/// What the test gives the library: the machine text, an API (the scripted server) or none, and
/// a record of the notices.
struct TestHost {
    text: String,
    api: Option<String>,
    compiled: usize,
    notices: Vec<String>,
}

impl TestHost {
    fn new(text: &str, api: Option<String>) -> Self {
        Self {
            text: text.to_string(),
            api,
            compiled: 0,
            notices: Vec::new(),
        }
    }
}

impl Host for TestHost {
    type Error = llm::LlmError;

    fn compile(&mut self) -> Option<CompiledMachine> {
        self.compiled += 1;
        let compiled = dygram_core::compile(SourceFile::new("order.dy", self.text.clone()));
        if compiled.has_errors() {
            return None;
        }
        Some(CompiledMachine {
            machine: compiled.json(dygram_core::json::JsonOptions {
                source_ranges: false,
            }),
            files: Vec::new(),
        })
    }

    fn connect(
        &self,
        config: &ClientConfig,
        _: (&Path, std::time::Duration),
        _: &str,
    ) -> Result<Option<llm::Connection>, llm::LlmError> {
        // The scripted server stands in for the provider's API.
        let Some(base) = self
            .api
            .clone()
            .filter(|_| config.kind == llm::SourceKind::Api)
        else {
            return Ok(None);
        };
        Ok(Some(llm::Connection {
            client: std::sync::Arc::new(OpenAiClient::new(OpenAiConfig::new(base.clone(), None))),
            notices: Vec::new(),
            redactor: llm::Redactor::default(),
            endpoint: base,
            playback: None,
        }))
    }

    fn api_configured(&self, _: &ClientConfig) -> bool {
        self.api.is_some()
    }

    fn default_model(&self, _: &ClientConfig) -> String {
        "scripted".into()
    }

    fn notice(&mut self, notice: Notice<'_>) {
        self.notices.push(format!("{notice:?}"));
    }
}

fn request(id: &str) -> CallRequest {
    CallRequest {
        id: Some(id.to_string()),
        unit: Unit::Turn,
        machine_text: ORDER.to_string(),
        machine_file: Some("order.dy".into()),
        ..CallRequest::default()
    }
}

fn open(store: &Executions, host: &mut TestHost, input: &mut ManualInput) -> Box<Session> {
    match Session::open(request("lib"), store, host, input).unwrap() {
        Opening::Ready(session) => session,
        Opening::Invalid => panic!("the machine has errors: {:?}", host.notices),
    }
}

fn done(advance: Advance) -> Report {
    match advance {
        Advance::Done(report) => report,
        Advance::AlreadyFinished => panic!("the execution had already ended"),
    }
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_session_runs_an_execution_turn_by_turn_with_a_scripted_model() {
    let d = Dir::new();
    let server = ScriptedServer::start([Reply::tool_calls([
        ToolCallSpec::new("w1", "write_order", json!({"data": {"total": 7}})),
        ToolCallSpec::new("t1", "transition_to_shipped", json!({})),
    ])]);
    let store = Executions::under(d.path());
    let mut host = TestHost::new(ORDER, Some(server.openai_base()));
    let mut input = ManualInput::none();

    // First call: a new execution, one automatic step (start -> charge), no model.
    let mut session = open(&store, &mut host, &mut input);
    assert!(session.started());
    let first = done(session.advance(&mut host, &store, &mut input).unwrap());
    assert!(first.started);
    assert_eq!(first.status, Status::InProgress);
    assert_eq!(server.request_count(), 0);
    drop(session);
    let dir = d.exec_dir("lib");
    assert_eq!(read_json(&dir.join("metadata.json"))["stepCount"], 1);
    assert_eq!(d.history("lib").len(), 1);

    // Second call, in a new session on the saved execution: the model answers at `charge`; the
    // unchanged source is not compiled again.
    let compiled_before = host.compiled;
    let mut session = open(&store, &mut host, &mut input);
    assert!(!session.started());
    assert_eq!(host.compiled, compiled_before);
    let second = done(session.advance(&mut host, &store, &mut input).unwrap());
    assert_eq!(server.request_count(), 1);
    assert_eq!(second.unit, Unit::Turn);
    assert_eq!(session.metadata().turn_count, 1);

    // Further units on the same session, until the execution ends.
    let mut units = 2;
    let mut last = second.status;
    while !last.is_finished() {
        units += 1;
        assert!(units < 10, "no end after {units} units");
        last = done(session.advance(&mut host, &store, &mut input).unwrap()).status;
    }
    assert_eq!(last, Status::Complete);
    let state = session.state().unwrap();
    assert_eq!(state.context_state["order"], json!({"total": 7}));
    drop(session);

    let meta = read_json(&dir.join("metadata.json"));
    assert_eq!(meta["status"], "complete");
    assert_eq!(meta["turnCount"], 1);
    assert_eq!(meta["stepCount"], units);
    assert_eq!(meta["clientConfig"]["type"], "api");
    let saved = read_json(&dir.join("state.json"));
    assert_eq!(saved["status"], "complete");
    assert_eq!(
        saved["executionState"]["contextValues"]["order"]["total"],
        7
    );
    assert_eq!(d.history("lib").len(), units as usize);
    assert!(dir.join("machine.json").is_file());

    // A call on the ended execution does nothing.
    let mut session = open(&store, &mut host, &mut input);
    assert!(matches!(
        session.advance(&mut host, &store, &mut input).unwrap(),
        Advance::AlreadyFinished
    ));
    assert_eq!(server.request_count(), 1);
}

#[test]
fn a_session_waits_for_a_manual_answer_and_takes_it_on_the_next_call() {
    let d = Dir::new();
    let store = Executions::under(d.path());
    let mut host = TestHost::new(ORDER, None);
    let mut none = ManualInput::none();
    let mut session = open(&store, &mut host, &mut none);
    done(session.advance(&mut host, &store, &mut none).unwrap());
    let waiting = done(session.advance(&mut host, &store, &mut none).unwrap())
        .waiting
        .expect("a request waits for an answer");
    assert_eq!(waiting.request["node"], "charge");
    assert!(Path::new(&waiting.file).is_file());
    assert_eq!(session.metadata().status, Status::Paused);
    drop(session);

    let answer = r#"{"tools": [{"name": "write_order", "input": {"data": {"total": 42}}}]}"#;
    let mut given = ManualInput::start(Cursor::new(answer.as_bytes().to_vec()));
    let mut session = open(&store, &mut host, &mut given);
    let report = done(session.advance(&mut host, &store, &mut given).unwrap());
    assert!(report.waiting.is_none());
    assert_eq!(session.metadata().turn_count, 1);
    assert_eq!(session.state().unwrap().context_state["order"]["total"], 42);
    assert!(!d.exec_dir("lib").join("pending-request.json").exists());
    assert_eq!(
        read_json(&d.exec_dir("lib").join("metadata.json"))["pendingRequest"],
        Value::Null
    );
}
