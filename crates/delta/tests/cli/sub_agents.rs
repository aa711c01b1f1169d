//! Agent tools: a parent agent calls a child agent (`agent: ./researcher`) whose run is journaled
//! under the parent's run folder, shown nested by `delta show`, resumed with its parent after a
//! kill (its tool run once), and whose question makes the parent wait.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer};

use crate::support::{Sandbox, output, read_jsonl};

/// A parent with the agent tool `research`, and its child `researcher` with the shell tool `note`,
/// which appends a line to `ran.log` in the sandbox (then sleeps when asked to).
fn family() -> Sandbox {
    let sb = Sandbox::new(
        "name: parent\nllm:\n  model: test-model\ntools:\n  - name: research\n    description: Ask the researcher.\n    agent: ./researcher\n",
    );
    let log = sb.path("ran.log");
    sb.file(
        "agent/researcher/agent.yaml",
        &format!(
            "name: researcher\nllm:\n  model: test-model\nmax_iterations: 5\ntools:\n  - name: note\n    shell: \"echo ran >> {} && sleep ${{seconds}}\"\n",
            log.display()
        ),
    );
    sb.file("agent/researcher/system_prompt.md", "You research.");
    sb
}

fn script(seconds: u64) -> Vec<Reply> {
    vec![
        Reply::tool_call("p1", "research", json!({"task": "find the answer"})),
        Reply::tool_call("n1", "note", json!({"seconds": seconds.to_string()})),
        Reply::text("The answer is 42."),
        Reply::text("The researcher says 42."),
    ]
}

fn runs_of_note(sb: &Sandbox) -> usize {
    std::fs::read_to_string(sb.path("ran.log"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// The child's workspace of call `p1` (named after the call and its journal line).
fn child_ws(sb: &Sandbox) -> std::path::PathBuf {
    let found: Vec<_> = std::fs::read_dir(sb.run_dir().join("agents"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("p1-"),
        "{found:?}"
    );
    found[0].clone()
}

#[test]
fn a_child_agent_answers_its_parent_and_is_shown_nested() {
    let server = ScriptedServer::start(script(0));
    let sb = family();
    let out = sb.run(Some(&server), "research it", &["--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["result"], "The researcher says 42.");
    assert_eq!(runs_of_note(&sb), 1);

    // The child's answer is the call's result; the child is an ordinary run under the parent's.
    let results = sb.events("ACTION_RESULT");
    assert!(
        results[0]["payload"]["observation_content"]
            .as_str()
            .unwrap()
            .contains("The answer is 42."),
        "{results:?}"
    );
    let latest = std::fs::read_to_string(child_ws(&sb).join(".delta/LATEST")).unwrap();
    let child_journal = read_jsonl(
        &child_ws(&sb)
            .join(".delta")
            .join(latest.trim())
            .join("journal.jsonl"),
    );
    assert!(child_journal.iter().any(|e| e["type"] == "ACTION_RESULT"));
    // The second request of the script was the child's: its own system prompt and task.
    let child_request = server.requests()[1].json();
    assert!(
        child_request.to_string().contains("find the answer"),
        "{child_request}"
    );

    let mut show = sb.delta(None);
    show.args(["show", "-w", "ws"]);
    let text = output(show).stdout;
    assert!(text.contains("sub-agent run"), "{text}");
    assert!(
        text.contains("tool note"),
        "the child's call, nested: {text}"
    );
    let mut show = sb.delta(None);
    show.args(["show", "-w", "ws", "--format", "json"]);
    let shown: Value = serde_json::from_str(&output(show).stdout).unwrap();
    let call = shown["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "tool")
        .unwrap();
    assert_eq!(call["sub_run"]["status"], "COMPLETED", "{call}");
    assert_eq!(call["sub_run"]["final_answer"], "The answer is 42.");
}

#[test]
fn a_kill_during_the_childs_tool_is_recovered_by_continue_with_the_tool_run_once() {
    let server = ScriptedServer::start(script(30));
    let sb = family();
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "research it"]);
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while runs_of_note(&sb) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the child's tool never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let mut cont = sb.delta(Some(&server));
    cont.args(["continue", "-w", "ws", "--format", "json"]);
    let out = output(cont);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["status"], "COMPLETED", "{result}");
    assert_eq!(result["result"], "The researcher says 42.");
    assert_eq!(runs_of_note(&sb), 1, "the child's tool ran once");
    crate::support::assert_no_process_under(sb.root.path());
    // The child's interrupted call was settled, not run again.
    let mut show = sb.delta(None);
    show.args(["show", "-w", "ws", "--format", "json"]);
    let shown: Value = serde_json::from_str(&output(show).stdout).unwrap();
    let text = shown.to_string();
    assert!(text.contains("INTERRUPTED"), "{text}");
}

#[test]
fn a_childs_question_makes_the_parent_wait_and_the_answer_reaches_the_child() {
    let server = ScriptedServer::start([
        Reply::tool_call("p1", "research", json!({"task": "ask them"})),
        Reply::tool_call(
            "q1",
            "ask_human",
            json!({"prompt": "Which colour?", "sensitive": true}),
        ),
        Reply::text("They like blue."),
        Reply::text("Blue, says the researcher."),
    ]);
    let sb = family();
    let out = sb.run(Some(&server), "research it", &["--format", "json"]);
    assert_eq!(out.code, 101, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["status"], "WAITING_FOR_INPUT");
    assert_eq!(result["interaction"]["prompt"], "Which colour?");
    // The parent asks the child's question as the child asked it: its answer is secret too.
    let asked = crate::support::read_json(&sb.run_dir().join("interaction/request.json"));
    assert_eq!(asked["sensitive"], true, "{asked}");

    let mut cont = sb.delta(Some(&server));
    cont.args(["continue", "-w", "ws", "-m", "Blue", "--format", "json"]);
    let out = output(cont);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["result"], "Blue, says the researcher.");
    // The child's model saw the answer as its question's result.
    let third = server.requests()[2].json().to_string();
    assert!(third.contains("Blue"), "{third}");
    assert!(!sb.run_dir().join("interaction/response.txt").exists());
}

#[test]
fn a_call_id_used_again_in_a_later_turn_gets_a_child_of_its_own() {
    // Some providers number their calls afresh in every answer.
    let server = ScriptedServer::start([
        Reply::tool_call("call_0", "research", json!({"task": "first question"})),
        Reply::text("First answer."),
        Reply::tool_call("call_0", "research", json!({"task": "second question"})),
        Reply::text("Second answer."),
        Reply::text("Both done."),
    ]);
    let sb = family();
    let out = sb.run(Some(&server), "research twice", &["--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let results = sb.events("ACTION_RESULT");
    let contents: Vec<&str> = results
        .iter()
        .map(|r| r["payload"]["observation_content"].as_str().unwrap())
        .collect();
    assert!(contents[0].contains("First answer."), "{contents:?}");
    assert!(contents[1].contains("Second answer."), "{contents:?}");
    let children = std::fs::read_dir(sb.run_dir().join("agents"))
        .unwrap()
        .count();
    assert_eq!(children, 2);
}

/// The model of both agents, answering by what it is asked (so that a request asked again after a
/// kill gets the same answer): the parent calls the researcher, the researcher calls `note` (which
/// sleeps `seconds`), then each answers.
fn family_model(seconds: &'static str) -> ScriptedServer {
    ScriptedServer::responding(move |body| {
        let text = body.to_string();
        let child = text.contains("You research.");
        let has_result = body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        match (child, has_result) {
            (false, false) => Reply::tool_call("p1", "research", json!({"task": "find it"})),
            (true, false) => Reply::tool_call("n1", "note", json!({"seconds": seconds})),
            (true, true) => Reply::text("The answer is 42."),
            (false, true) => Reply::text("The researcher says 42."),
        }
    })
}

#[test]
fn sigkill_at_random_moments_of_parent_and_child_then_continue_never_runs_the_childs_tool_twice() {
    let (seed, trials) = crate::support::crash_series(8);
    let started = Instant::now();
    let server = family_model("0.3");
    let mut state = seed;
    for n in 0..trials {
        // xorshift: a kill from 0 to 600 ms into the run (the child's tool runs about 300 ms).
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let delay = Duration::from_millis(state % 600);
        let context = format!("trial {n}, kill after {delay:?} (DELTA_CRASH_SEED={seed})");
        let sb = family();
        let mut cmd = sb.delta(Some(&server));
        cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "research it"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = cmd.spawn().unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        child.wait().unwrap();
        // The next calls finish what the killed one left: continue, or run again if it died before
        // its run existed; a run that ended before the kill is left as it is.
        for _ in 0..3 {
            let latest = sb.ws().join(".delta/LATEST").exists();
            if latest && sb.list_runs("ws")[0]["status"] == "COMPLETED" {
                break;
            }
            let mut next = sb.delta(Some(&server));
            if latest {
                next.args(["continue", "-w", "ws"]);
            } else {
                next.args(["run", "--agent", "agent", "-w", "ws", "-m", "research it"]);
            }
            output(next);
        }
        let run = &sb.list_runs("ws")[0];
        assert_eq!(run["status"], "COMPLETED", "{context}: {run}");
        assert_eq!(run["final_answer"], "The researcher says 42.", "{context}");
        let children = std::fs::read_dir(sb.run_dir().join("agents"))
            .unwrap()
            .count();
        assert_eq!(children, 1, "{context}: one child");
        // Never twice. Once, unless the kill fell between the tool's start being recorded and its
        // program running: then whether it ran cannot be known, and it is not run again.
        assert!(
            runs_of_note(&sb) <= 1,
            "{context}: the child's tool ran {} times",
            runs_of_note(&sb)
        );
        crate::support::assert_no_process_under(sb.root.path());
    }
    assert!(
        started.elapsed() < Duration::from_secs(90),
        "{trials} trials took {:?} (series {seed})",
        started.elapsed()
    );
}
