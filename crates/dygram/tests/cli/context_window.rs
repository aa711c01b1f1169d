//! Agent-node conversations against a model with a small context window: the conversation is
//! compacted so that every request fits, the saved conversation is the compacted one, and the
//! execution completes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use super::support::{Dir, Out};

/// The window the scripted server enforces, in its own count of tokens.
const WINDOW: usize = 2048;
/// Steps the node's task asks for: each is one answer (a write, then a read of a long text).
const STEPS: usize = 8;

/// A machine whose agent node reads a long text at every step; `setting` is an attribute of the
/// machine, `node_setting` one of the node.
pub(super) fn machine(setting: &str, node_setting: &str) -> String {
    let text = "lorem ipsum dolor sit amet ".repeat(50);
    format!(
        "machine \"Window\" {{ {setting} }}\n\
         context Doc {{ log: \"[]\"; text: \"{text}\"; }}\n\
         task work \"Work\" {{ {node_setting} prompt: \"For steps 1 to {STEPS}, one per answer: append the step to Doc.log, then read Doc. Then go to done.\"; }}\n\
         state done;\n\
         work -reads-> Doc;\n\
         work -writes-> Doc;\n\
         work -> done;\n"
    )
}

/// The server's count: a token per four characters of what the model reads.
fn tokens(body: &Value) -> usize {
    let messages: usize = body["messages"]
        .as_array()
        .map(|m| m.iter().map(|m| m.to_string().len() + 8).sum())
        .unwrap_or(0);
    let tools = body.get("tools").map_or(0, |t| t.to_string().len());
    (messages + tools) / 4
}

/// The steps logged so far, as the last `read_Doc` result of the request shows them.
fn logged(body: &Value) -> Vec<u64> {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last_read = messages.iter().rev().find_map(|m| {
        let content = m["content"].as_str()?;
        let result: Value = serde_json::from_str(content).ok()?;
        (m["role"] == "tool" && result["context"] == "Doc").then_some(result)
    });
    last_read
        .and_then(|r| r["data"]["log"].as_array().cloned())
        .map(|log| log.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

/// What the scripted model did.
#[derive(Default)]
pub(super) struct Counts {
    /// Summary requests fail (HTTP 400).
    no_summaries: bool,
    refused: AtomicUsize,
    summaries: AtomicUsize,
    answers: AtomicUsize,
}

/// A model with a 2 048-token window: a request that does not fit (with its `max_tokens`) is
/// refused as OpenAI's and llama.cpp's servers do; a request without tools is a summary;
/// otherwise the next step is written and Doc read, then the transition.
pub(super) fn model(counts: Arc<Counts>) -> impl Fn(&Value) -> Reply + Send + Sync + 'static {
    move |body: &Value| {
        let asked = tokens(body);
        let completion = body["max_tokens"].as_u64().unwrap_or(0) as usize;
        if asked + completion > WINDOW {
            counts.refused.fetch_add(1, Ordering::SeqCst);
            return Reply::context_length_exceeded(WINDOW, asked, completion);
        }
        let usage = |r: Reply| r.usage(asked as u64, 20);
        if body
            .get("tools")
            .is_none_or(|t| t.as_array().is_none_or(Vec::is_empty))
        {
            let n = counts.summaries.fetch_add(1, Ordering::SeqCst) + 1;
            if counts.no_summaries {
                return Reply::error(400, "summaries are not served here");
            }
            return usage(Reply::text(&format!(
                "Summary {n}: the earlier steps were logged in Doc.log and Doc was read after each."
            )));
        }
        counts.answers.fetch_add(1, Ordering::SeqCst);
        let log = logged(body);
        if log.len() >= STEPS {
            return usage(Reply::tool_call("t", "transition_to_done", json!({})));
        }
        let step = log.len() as u64 + 1;
        let mut next = log;
        next.push(step);
        usage(Reply::tool_calls([
            ToolCallSpec::new(
                &format!("w{step}"),
                "write_Doc",
                json!({"data": {"log": next}}),
            ),
            ToolCallSpec::new(&format!("r{step}"), "read_Doc", json!({})),
        ]))
    }
}

fn result(d: &Dir) -> Value {
    let text = std::fs::read_to_string(d.path().join("generated/m-result.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn expected_log() -> Value {
    json!((1..=STEPS as u64).collect::<Vec<_>>())
}

/// Every compaction on record summarized answers into a smaller request.
fn assert_compactions(path: &Value, summaries: usize) -> usize {
    assert_compactions_by(path, summaries, "summarize")
}

fn assert_compactions_by(path: &Value, summaries: usize, strategy: &str) -> usize {
    let compactions = path["compactions"].as_array().cloned().unwrap_or_default();
    assert!(!compactions.is_empty(), "no compaction on record: {path}");
    for c in &compactions {
        assert_eq!(c["node"], "work", "{c}");
        assert_eq!(c["strategy"], strategy, "{c}");
        assert_eq!(c["window"], WINDOW, "{c}");
        assert!(c["answers"].as_u64() >= Some(1), "{c}");
        assert!(
            c["tokensAfter"].as_u64() < c["tokensBefore"].as_u64(),
            "{c}"
        );
        let summary = c["summary"].as_str().unwrap();
        if strategy == "summarize" {
            assert!(summary.starts_with("Summary "), "{c}");
        } else {
            assert!(summary.contains("were left out"), "{c}");
        }
    }
    assert_eq!(summaries, compactions.len());
    compactions.len()
}

/// Every request the server received answers each tool call right after it, and only those.
fn assert_well_formed(server: &ScriptedServer) {
    for request in server.requests() {
        let body = request.json();
        let mut open: Vec<String> = Vec::new();
        for m in body["messages"].as_array().unwrap() {
            if m["role"] == "tool" {
                let id = m["tool_call_id"].as_str().unwrap().to_string();
                assert!(open.contains(&id), "a result without its call: {body}");
                open.retain(|o| *o != id);
                continue;
            }
            assert!(open.is_empty(), "a call without its result: {body}");
            open = (m["tool_calls"].as_array().into_iter().flatten())
                .map(|c| c["id"].as_str().unwrap().to_string())
                .collect();
        }
    }
}

fn tool_lines(out: &Out, tool: &str) -> usize {
    let needle = format!("tool {tool}");
    out.stderr.lines().filter(|l| l.ends_with(&needle)).count()
}

#[test]
fn a_long_agent_conversation_is_compacted_after_a_refusal_and_completes() {
    let counts = Arc::new(Counts::default());
    let server = ScriptedServer::responding(model(Arc::clone(&counts)));
    let mut d = Dir::with_file("m.dy", &machine("", ""));
    d.env("OPENAI_BASE_URL", &server.openai_base());
    // Answers of 256 tokens: requests fit at first, until the conversation outgrows the window.
    let out = d.run(&[
        "e",
        "m.dy",
        "--provider",
        "openai",
        "--max-tokens",
        "256",
        "-d",
        "generated",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    let result = result(&d);
    assert_eq!(result["status"], "complete", "{result}");
    assert_eq!(result["contextState"]["Doc"]["log"], expected_log());
    assert_eq!(
        tool_lines(&out, "write_Doc"),
        STEPS,
        "each write ran once: {out:?}"
    );
    assert_eq!(counts.refused.load(Ordering::SeqCst), 1, "{out:?}");
    // One answer a step, then the transition: the refused request was asked again, once.
    assert_eq!(counts.answers.load(Ordering::SeqCst), STEPS + 1);
    let n = assert_compactions(&result["paths"][0], counts.summaries.load(Ordering::SeqCst));
    assert_eq!(
        out.stderr
            .matches("compacted the conversation at work")
            .count(),
        n,
        "{out:?}"
    );
    assert_well_formed(&server);
}

#[test]
fn turn_by_turn_calls_send_the_compacted_conversation() {
    let counts = Arc::new(Counts::default());
    let server = ScriptedServer::responding(model(Arc::clone(&counts)));
    let mut d = Dir::with_file("m.dy", &machine("", ""));
    d.env("OPENAI_BASE_URL", &server.openai_base());
    let call = || {
        d.run(&[
            "e",
            "-i",
            "m.dy",
            "--id",
            "x",
            "--provider",
            "openai",
            "-d",
            "generated",
        ])
    };
    let mut writes = 0;
    let mut saw_summary = false;
    for calls in 1.. {
        assert!(calls < 40, "no end after {calls} calls");
        let seen = server.request_count();
        let out = call();
        assert!(matches!(out.code, 0 | 2), "{out:?}");
        writes += out.stdout.matches("write_Doc").count();
        let requests = server.requests();
        let asked: Vec<Value> = requests[seen..]
            .iter()
            .map(|r| r.json())
            .filter(|b| {
                b.get("tools")
                    .is_some_and(|t| !t.as_array().unwrap().is_empty())
            })
            .collect();
        if saw_summary && let Some(first) = asked.first() {
            // A call after a compaction sends the saved, compacted conversation.
            let prompt = first["messages"][0]["content"].as_str().unwrap_or_default();
            assert!(prompt.contains("summarized to fit"), "{prompt}");
            assert!(prompt.contains("Summary "), "{prompt}");
            assert!(
                first["max_tokens"].as_u64() <= Some(WINDOW as u64 / 4),
                "{first}"
            );
        }
        if out.code == 2 {
            break;
        }
        let state = &d.read_json("x", "state.json")["executionState"];
        if let Some(compacted) = state["turnState"].get("compacted") {
            saw_summary = true;
            let first = state["turnState"]["messages"][0].to_string();
            assert!(
                first.contains(compacted["summary"].as_str().unwrap()),
                "the saved conversation carries the summary: {first}"
            );
            let windows = &state["runtime"]["modelWindows"];
            assert_eq!(windows.as_object().unwrap().len(), 1, "{state}");
        }
    }
    assert!(
        saw_summary,
        "no compaction: {} refused, {} summaries",
        counts.refused.load(Ordering::SeqCst),
        counts.summaries.load(Ordering::SeqCst)
    );
    assert_eq!(writes, STEPS, "each write ran once");
    // The window was learned from the first request's refusal (its answer limit did not fit), and
    // remembered by the later calls.
    assert_eq!(counts.refused.load(Ordering::SeqCst), 1);
    let result = result(&d);
    assert_eq!(result["status"], "complete", "{result}");
    assert_eq!(result["contextState"]["Doc"]["log"], expected_log());
    assert_compactions(&result["paths"][0], counts.summaries.load(Ordering::SeqCst));
}

#[test]
fn a_configured_window_compacts_before_any_refusal_and_the_recording_replays() {
    for (setting, node_setting) in [("contextWindow: 2048;", ""), ("", "contextWindow: 2048;")] {
        let counts = Arc::new(Counts::default());
        let server = ScriptedServer::responding(model(Arc::clone(&counts)));
        let mut d = Dir::with_file("m.dy", &machine(setting, node_setting));
        d.env("OPENAI_BASE_URL", &server.openai_base());
        let out = d.run(&[
            "e",
            "m.dy",
            "--provider",
            "openai",
            "--record",
            "rec",
            "-d",
            "generated",
        ]);
        assert_eq!(out.code, 0, "{setting}: {out:?}");
        assert_eq!(
            counts.refused.load(Ordering::SeqCst),
            0,
            "{setting}: {out:?}"
        );
        let live = result(&d);
        assert_eq!(live["contextState"]["Doc"]["log"], expected_log());
        assert_compactions(&live["paths"][0], counts.summaries.load(Ordering::SeqCst));
        // The summaries are ordinary answers of the recording: played back, the execution makes
        // the same compactions and ends in the same state.
        let replay = d.run(&["e", "m.dy", "--playback", "rec", "-d", "replay"]);
        assert_eq!(replay.code, 0, "{setting}: {replay:?}");
        let text = std::fs::read_to_string(d.path().join("replay/m-result.json")).unwrap();
        let replayed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(replayed["contextState"], live["contextState"]);
        let moves = |r: &Value| -> Vec<Value> {
            (r["history"].as_array().unwrap().iter())
                .map(|t| json!([t["from"], t["to"], t["transition"]]))
                .collect()
        };
        assert_eq!(moves(&replayed), moves(&live));
        assert_eq!(
            replayed["paths"][0]["compactions"].as_array().map(Vec::len),
            live["paths"][0]["compactions"].as_array().map(Vec::len)
        );
    }
}

#[test]
fn a_summary_that_cannot_be_had_leaves_a_note() {
    let counts = Arc::new(Counts {
        no_summaries: true,
        ..Counts::default()
    });
    let server = ScriptedServer::responding(model(Arc::clone(&counts)));
    let mut d = Dir::with_file("m.dy", &machine("contextWindow: 2048;", ""));
    d.env("OPENAI_BASE_URL", &server.openai_base());
    let out = d.run(&["e", "m.dy", "--provider", "openai", "-d", "generated"]);
    assert_eq!(out.code, 0, "{out:?}");
    let result = result(&d);
    assert_eq!(result["contextState"]["Doc"]["log"], expected_log());
    assert_eq!(counts.refused.load(Ordering::SeqCst), 0);
    assert_compactions_by(
        &result["paths"][0],
        counts.summaries.load(Ordering::SeqCst),
        "truncate",
    );
    assert!(out.stderr.contains("answer(s) left out"), "{out:?}");
}
