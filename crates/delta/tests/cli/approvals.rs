//! Approvals: `permissions:` rules that let a call run, refuse it, or pause the run (exit 101) until a
//! person answers yes, no or always.

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer};

use crate::support::{Output, Sandbox, output, read_json};

const AGENT: &str = "name: approving\nllm:\n  model: m\ntools:\n  - name: write\n    exec: \"touch ${file}\"\n  - name: run\n    exec: \"bash -c ${script}\"\npermissions:\n  default: allow\n  rules:\n    - {tool: \"write\", command: \"*secret*\", action: deny}\n    - {tool: \"write\", action: ask}\n";

fn write(id: &str, file: &str) -> Reply {
    Reply::tool_call(id, "write", json!({"file": file}))
}

fn continue_(sb: &Sandbox, server: &ScriptedServer, args: &[&str]) -> Output {
    let mut cmd = sb.delta(Some(server));
    cmd.args(["continue", "-w", "ws"]).args(args);
    output(cmd)
}

fn results(sb: &Sandbox) -> Vec<Value> {
    sb.events("ACTION_RESULT")
        .iter()
        .map(|e| e["payload"].clone())
        .collect()
}

/// The approval decisions journaled, each call's digest shown as `…` (its 64 hex digits checked).
fn decisions(sb: &Sandbox) -> Vec<String> {
    sb.events("SYSTEM_MESSAGE")
        .iter()
        .filter_map(|e| e["payload"]["content"].as_str())
        .filter(|c| c.starts_with("Approval: "))
        .map(|c| match c.split_once(" (call digest ") {
            Some((head, digest)) => {
                let hex = digest.trim_end_matches(')');
                assert!(
                    hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()),
                    "{c}"
                );
                format!("{head} (call digest …)")
            }
            None => c.to_string(),
        })
        .collect()
}

#[test]
fn an_ask_rule_pauses_the_run_and_no_leaves_the_files_alone() {
    let server = ScriptedServer::start([write("c1", "a.txt")]);
    let sb = Sandbox::new(AGENT);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 101, "{out:?}");
    let request = read_json(&sb.run_dir().join("interaction/request.json"));
    let prompt = request["prompt"].as_str().unwrap();
    assert!(
        prompt.starts_with("Allow write to run? touch a.txt"),
        "{prompt}"
    );
    assert_eq!(request["action_id"], "c1");
    assert!(
        sb.events("ACTION_REQUEST").is_empty(),
        "the call has not started"
    );

    server.push(Reply::text("understood"));
    let out = continue_(&sb, &server, &["-m", "no, not now"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!sb.ws().join("a.txt").exists());
    let refusal = results(&sb)[0]["observation_content"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        refusal,
        "Error: the user did not approve running write: no, not now"
    );
    let asked = server.requests();
    let last = asked.last().unwrap().json();
    let messages = last["messages"].as_array().unwrap();
    assert!(
        messages.iter().any(|m| m["content"] == refusal.as_str()),
        "the model receives the refusal"
    );
    assert_eq!(
        decisions(&sb),
        ["Approval: write refused by the user (call c1): no, not now"]
    );
}

#[test]
fn yes_runs_the_call_once_and_always_for_the_rest_of_the_run() {
    let server = ScriptedServer::start([write("c1", "a.txt")]);
    let sb = Sandbox::new(AGENT);
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 101);
    server.push(write("c2", "b.txt"));
    let out = continue_(&sb, &server, &["-m", "yes"]);
    assert_eq!(out.code, 101, "asked again for the next call: {out:?}");
    assert!(sb.ws().join("a.txt").is_file());
    assert!(!sb.ws().join("b.txt").exists());

    server.push(write("c3", "c.txt"));
    server.push(Reply::text("done"));
    let out = continue_(&sb, &server, &["-m", "always"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(sb.ws().join("b.txt").is_file() && sb.ws().join("c.txt").is_file());
    assert_eq!(
        decisions(&sb),
        [
            "Approval: call c1 of write approved by the user (call digest …)",
            "Approval: call c2 of write approved by the user for the rest of the run (call digest …)",
            "Approval: write allowed (call c3): the user approved it for the rest of the run",
        ]
    );
}

#[test]
fn deny_never_runs_and_approve_all_or_a_permissions_file_change_one_call() {
    let server = ScriptedServer::start([
        write("c1", "secret.txt"),
        Reply::tool_call("c2", "run", json!({"script": "touch free.txt"})),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(AGENT);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!sb.ws().join("secret.txt").exists());
    let denied = results(&sb)[0]["observation_content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        denied.starts_with("Error: write was not run: the agent's permissions deny it (rule 1"),
        "{denied}"
    );
    assert!(
        sb.ws().join("free.txt").is_file(),
        "the default allows the rest"
    );

    // --approve all: the ask rule does not ask.
    let server = ScriptedServer::start([write("c1", "a.txt"), Reply::text("done")]);
    let sb = Sandbox::new(AGENT);
    assert_eq!(sb.run(Some(&server), "go", &["--approve", "all"]).code, 0);
    assert!(sb.ws().join("a.txt").is_file());

    // --permissions FILE: its rules come first.
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "run", json!({"script": "touch x.txt"})),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(AGENT);
    let rules = sb.file("rules.yaml", "rules:\n  - {tool: \"run\", action: deny}\n");
    let out = sb.run(
        Some(&server),
        "go",
        &["--permissions", rules.to_str().unwrap()],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!sb.ws().join("x.txt").exists());
    assert!(
        decisions(&sb)[0].contains("run denied by rule 1"),
        "{:?}",
        decisions(&sb)
    );
}

#[test]
fn with_i_the_question_is_asked_on_the_terminal() {
    let server = ScriptedServer::start([
        write("c1", "a.txt"),
        write("c2", "b.txt"),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(AGENT);
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go", "-i"]);
    let out = crate::support::output_with_stdin(cmd, "yes\nno\n");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("Allow write to run? touch a.txt"),
        "{}",
        out.stderr
    );
    assert!(sb.ws().join("a.txt").is_file());
    assert!(!sb.ws().join("b.txt").exists());
}

#[test]
fn a_crash_after_the_approval_settles_the_call_as_interrupted_without_asking_again() {
    let agent = AGENT.replace(
        "    - {tool: \"write\", action: ask}\n",
        "    - {tool: \"write\", action: ask}\n    - {tool: \"run\", action: ask}\n",
    );
    let server = ScriptedServer::start([Reply::tool_call(
        "c1",
        "run",
        json!({"script": "touch started; sleep 30"}),
    )]);
    let sb = Sandbox::new(&agent);
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 101);
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws", "-m", "yes"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let start = std::time::Instant::now();
    while !sb.ws().join("started").exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "the approved call never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    server.push(Reply::text("recovered"));
    let out = continue_(&sb, &server, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let settled = results(&sb)[0]["observation_content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(settled.contains("INTERRUPTED"), "{settled}");
    assert_eq!(
        decisions(&sb),
        ["Approval: call c1 of run approved by the user (call digest …)"]
    );
}
