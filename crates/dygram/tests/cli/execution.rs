//! The 20 execution oracles of the conformance corpus: recorded machines replay through playback
//! with the reference's tool sets and message counts, and every machine takes the reference's
//! paths and ends with its context state.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Value, json};

use super::support::Dir;

use dygram_runtime::executor::{Executor, Options};
use dygram_runtime::state::{PathStatus, Status};
use dygram_syntax::source::SourceFile;
use llm::{ChatRequest, ChatResponse, LlmClient, LlmError, PlaybackClient, PlaybackMode};

/// The conformance corpus, or `None` (the test says SKIPPED) without it.
fn corpus() -> Option<PathBuf> {
    testkit::needs::conformance()
}

/// Playback that notes, for each request, the node, the sorted tool names and the message count.
struct Spy {
    inner: PlaybackClient,
    calls: Mutex<Vec<Value>>,
}

impl LlmClient for Spy {
    fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let first = request
            .messages
            .first()
            .map(|m| m.text())
            .unwrap_or_default();
        let node = first
            .lines()
            .find_map(|l| l.strip_prefix("- **Node**: "))
            .unwrap_or("?")
            .to_string();
        let mut tools: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
        tools.sort();
        let signature = llm::Signature::of(request);
        self.calls.lock().unwrap().push(json!({
            "node": node, "tools": tools, "messages": signature.message_count
        }));
        self.inner.complete(request)
    }
    fn describe(&self) -> String {
        "spy".into()
    }
}

fn compile(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    let compiled = dygram_core::compile(SourceFile::new(path.display().to_string(), text));
    assert!(!compiled.has_errors(), "{}", path.display());
    compiled.json(Default::default())
}

fn fixed_clock() -> i64 {
    1_700_000_000_000
}

struct Outcome {
    name: String,
    problems: Vec<String>,
}

fn run_oracle(corpus: &Path, dir: &Path) -> Outcome {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let machine = compile(
        &corpus
            .join("examples")
            .join(expected["machine"].as_str().unwrap()),
    );
    let spy = expected["recordings"].as_str().map(|r| Spy {
        inner: PlaybackClient::open(dir.join(r), PlaybackMode::Hybrid).unwrap(),
        calls: Mutex::new(Vec::new()),
    });
    let options = Options {
        clock: fixed_clock,
        ..Options::default()
    };
    let client: Option<&dyn LlmClient> = spy.as_ref().map(|s| s as &dyn LlmClient);
    let mut executor = Executor::start(machine, client, options).unwrap();
    let cap = expected["stepCap"].as_u64().unwrap_or(60);
    for _ in 0..cap {
        if !executor.step().unwrap() {
            break;
        }
    }
    let state = executor.into_state();
    let problems = std::cell::RefCell::new(Vec::new());
    let check = |what: &str, ours: Value, theirs: &Value| {
        if &ours != theirs {
            problems
                .borrow_mut()
                .push(format!("{what}: ours {ours}, reference {theirs}"));
        }
    };
    check(
        "visited",
        json!(state.visited_nodes()),
        &expected["visited"],
    );
    check(
        "contextState",
        Value::Object(state.context_state.clone()),
        &expected["contextState"],
    );
    let calls = spy
        .map(|s| Value::Array(s.calls.into_inner().unwrap()))
        .unwrap_or(json!([]));
    check("llm_calls", calls, &expected["llm_calls"]);
    let terminated = !state.has_active();
    if expected["terminated"] == json!(true) {
        check("status", json!(state.status().as_str()), &json!("complete"));
        let ours: Vec<Value> = state
            .paths
            .iter()
            .map(|p| {
                json!({"id": p.id, "status": p.status, "currentNode": p.current_node,
                    "history": p.history.iter().map(|t| json!({"from": t.from, "to": t.to,
                        "transition": t.transition})).collect::<Vec<_>>()})
            })
            .collect();
        check("paths", json!(ours), &expected["paths"]);
    } else {
        // The reference never ends this machine; we end it with an error at the same place.
        if !terminated || state.status() == Status::Complete {
            problems.borrow_mut().push(format!(
                "expected the execution to end by itself without completing, got {:?}",
                state.status()
            ));
        }
        let p = &state.paths[0];
        let theirs = &expected["paths"][0];
        check("currentNode", json!(p.current_node), &theirs["currentNode"]);
        check("history length", json!(p.history.len()), &json!(0));
        if p.status != PathStatus::Failed || p.error.is_none() {
            problems
                .borrow_mut()
                .push(format!("path should have failed with a reason: {p:?}"));
        }
    }
    Outcome {
        name,
        problems: problems.into_inner(),
    }
}

#[test]
fn every_execution_oracle_reaches_the_reference_outcome() {
    let Some(corpus) = corpus() else { return };
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(corpus.join("execution"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("expected.json").is_file())
        .collect();
    dirs.sort();
    assert_eq!(dirs.len(), 20, "the corpus has 20 execution oracles");
    let outcomes: Vec<Outcome> = dirs.iter().map(|d| run_oracle(&corpus, d)).collect();
    let failing: Vec<&Outcome> = outcomes.iter().filter(|o| !o.problems.is_empty()).collect();
    eprintln!(
        "execution oracles: {}/{} agree",
        outcomes.len() - failing.len(),
        outcomes.len()
    );
    for o in &failing {
        eprintln!("  {}:", o.name);
        for p in &o.problems {
            eprintln!("    {p}");
        }
    }
    assert!(failing.is_empty(), "{} oracle(s) disagree", failing.len());
}

#[test]
fn execute_replays_a_recorded_machine_and_writes_the_result() {
    let Some(corpus) = corpus() else { return };
    let dir = Dir::new();
    let machine = corpus.join("examples/execution-features/context-basic.dy");
    let recordings = corpus.join("execution/context-basic/recordings");
    let (machine, recordings) = (
        machine.display().to_string(),
        recordings.display().to_string(),
    );
    let out = dir.run(&[
        "execute",
        &machine,
        "--playback",
        &recordings,
        "--format",
        "json",
        "-d",
        ".",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    let printed = out.json();
    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("context-basic-result.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(printed, file, "stdout holds exactly the result file");
    assert_eq!(printed["status"], "complete");
    assert_eq!(printed["currentNode"], "end");
    assert_eq!(
        printed["visitedNodes"],
        json!(["start", "updateActivity", "displaySummary", "end"])
    );
    assert_eq!(printed["contextState"]["SessionData"]["activityCount"], 1);
    assert_eq!(printed["history"][0]["transition"], "agent_decision");
    assert!(out.stderr.contains("asking"), "{out:?}");
}

#[test]
fn execute_without_any_llm_source_fails_clearly_only_when_one_is_needed() {
    // No decision needed: runs without a key.
    let dir = Dir::with_file("simple.dy", "state a;\nstate b;\na -> b;\n");
    let out = dir.run(&["e", "simple.dy"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(dir.path().join("generated/simple-result.json").is_file());
    assert!(
        out.stdout
            .contains("a --(Single edge from state node)--> b"),
        "{out:?}"
    );
    // A decision needed: exit 1 naming the node, with a hint.
    dir.write(
        "agent.dy",
        "context Notes { text: \"\" }\ntask write { prompt: \"Write a note\" }\nwrite -writes-> Notes;\nwrite -> done;\n",
    );
    let out = dir.run(&["e", "agent.dy"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("node 'write' needs an LLM decision"),
        "{out:?}"
    );
    assert!(out.stderr.contains("ANTHROPIC_API_KEY"), "{out:?}");
}

#[test]
fn stateful_execution_writes_its_result_with_a_destination_when_it_ends() {
    let dir = Dir::with_file("m.dy", "state a;\nstate b;\na -> b;\n");
    let call = || dir.run(&["e", "-i", "m.dy", "-d", "out", "-q"]);
    let first = call();
    assert_eq!(first.code, 0, "{first:?}");
    assert!(
        !dir.path().join("out/m-result.json").exists(),
        "not before the end"
    );
    let second = call();
    assert_eq!(second.code, 2, "{second:?}");
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/m-result.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(result["status"], "complete");
    assert_eq!(result["visitedNodes"], json!(["a", "b"]));
}
