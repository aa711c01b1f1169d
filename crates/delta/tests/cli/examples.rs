//! The agents in `examples/` replay offline from their recordings, as the README shows.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::{Sandbox, output};

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
        .canonicalize()
        .unwrap()
}

fn replay(name: &str, message: &str) -> Sandbox {
    let sb = Sandbox::new("name: unused\nllm: {}\ntools: []\n");
    let dir = example(name);
    let mut cmd = sb.delta(None);
    cmd.args(["run", "--agent"])
        .arg(&dir)
        .args(["-m", message, "-w", "ws", "--playback"])
        .arg(dir.join("recordings"));
    let out = output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    sb
}

#[test]
fn hello_world_replays_and_creates_its_file() {
    let sb = replay(
        "hello-world",
        "Create hello.txt with a greeting, then check it is there.",
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("hello.txt")).unwrap(),
        "Hello from delta!\n"
    );
    assert_eq!(sb.metadata()["status"], "COMPLETED");
    assert_eq!(sb.metadata()["usage"]["llm_calls"], 3);
}

#[test]
fn text_tools_replays_with_real_tool_output() {
    let sb = replay(
        "text-tools",
        "Write a short poem to poem.txt, count its words and find the lines with 'on'.",
    );
    assert!(
        std::fs::read_to_string(sb.ws().join("poem.txt"))
            .unwrap()
            .starts_with("The fog comes")
    );
    let results = sb.events("ACTION_RESULT");
    assert_eq!(
        results[1]["payload"]["observation_content"],
        "=== STDOUT ===\n21\n\n=== EXIT CODE: 0 ==="
    );
    assert!(
        results[2]["payload"]["observation_content"]
            .as_str()
            .unwrap()
            .contains("5:on silent haunches")
    );
}

/// Runs the long-reader example (answering its `ask_human` questions on stdin) with `extra` flags.
pub fn read_long(sb: &Sandbox, base_url: Option<&str>, extra: &[&str]) -> crate::support::Output {
    let dir = example("long-reader");
    let mut cmd = sb.delta(None);
    if let Some(url) = base_url {
        cmd.env("DELTA_BASE_URL", url);
    }
    cmd.args(["run", "--agent"])
        .arg(&dir)
        .args(["-m", "Read the book.", "-w", "ws", "-i"])
        .args(extra);
    let answers = "Keep reading the book with next_page.\n".repeat(40);
    crate::support::output_with_stdin(cmd, &answers)
}

/// A long run's journal: it completed after at least 15 tool iterations, compacted at least
/// `compactions` times, and every call that started has exactly one result (a call that could not
/// start, such as one with arguments that are not JSON, has a result and no request).
pub fn assert_long_run(sb: &Sandbox, compactions: usize) {
    assert_eq!(sb.metadata()["status"], "COMPLETED");
    let calls = sb
        .events("THOUGHT")
        .iter()
        .filter(|t| t["payload"]["tool_calls"].is_array())
        .count();
    assert!(calls >= 15, "{calls} tool iterations");
    assert!(sb.events("COMPACTION").len() >= compactions);
    let results: Vec<Value> = sb
        .events("ACTION_RESULT")
        .iter()
        .map(|r| r["payload"]["action_id"].clone())
        .collect();
    for request in sb.events("ACTION_REQUEST") {
        let id = &request["payload"]["action_id"];
        assert_eq!(results.iter().filter(|r| *r == id).count(), 1, "{id}");
    }
}

#[test]
fn long_reader_replays_with_its_compactions() {
    let sb = Sandbox::new("name: unused\nllm: {}\ntools: []\n");
    let recordings = example("long-reader").join("recordings");
    let out = read_long(&sb, None, &["--playback", recordings.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_long_run(&sb, 3);
    for c in sb.events("COMPACTION") {
        assert_eq!(c["payload"]["strategy"], "summarize", "{c}");
        assert_eq!(c["payload"]["window"], 1024);
    }
}

#[test]
fn shell_session_replays_with_state_kept_between_calls() {
    let sb = replay(
        "shell-session",
        "Make a notes folder with a todo.txt that says who wrote it, using one shell session.",
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("notes/todo.txt")).unwrap(),
        "written by delta\n",
        "the second command ran in the folder and with the variable the first one left"
    );
    let results = sb.events("ACTION_RESULT");
    assert_eq!(
        results[2]["payload"]["observation_content"],
        "=== STDOUT ===\nnotes\nwritten by delta\n\n=== EXIT CODE: 0 ==="
    );
    assert!(
        !sb.ws().join(".sessions/dev/host.json").exists(),
        "the run's end stopped its session"
    );
}

#[test]
fn mcp_notes_replays_through_its_mcp_server() {
    if testkit::needs::python3().is_none() {
        return;
    }
    let sb = replay(
        "mcp-notes",
        "Save a note called groceries: eggs, rice, lemons. Then check it.",
    );
    let notes: Value =
        serde_json::from_str(&std::fs::read_to_string(sb.ws().join("notes.json")).unwrap())
            .unwrap();
    assert_eq!(notes["groceries"], "eggs, rice, lemons");
    let results = sb.events("ACTION_RESULT");
    assert_eq!(
        results[2]["payload"]["observation_content"],
        "eggs, rice, lemons"
    );
    let requests = sb.events("ACTION_REQUEST");
    assert_eq!(
        requests[0]["payload"]["resolved_command"],
        r#"notes__add_note {"title":"groceries","text":"eggs, rice, lemons"}"#
    );
}
