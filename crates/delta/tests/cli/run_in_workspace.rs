//! `delta run -w` on a workspace that already has runs: the message is used as `continue` would use it
//! (the answer to a pending question, a new message for an interrupted run), and one delta process works
//! in a workspace at a time (the others exit 75, as `continue` does on a busy run).

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use crate::support::{
    ECHO_AND_WRITE, Output, Sandbox, agent_yaml, assert_well_formed, kinds, wait_for,
};

const SLOW: &str = "  - name: slow\n    shell: \"echo $$ > tool.pid; sleep 30\"\n";

fn spawn_run(sb: &Sandbox, server: &ScriptedServer, message: &str) -> Child {
    let mut cmd = sb.delta(Some(server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", message])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().unwrap()
}

fn finish(child: Child) -> Output {
    let out = child.wait_with_output().unwrap();
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn contents(sb: &Sandbox, kind: &str) -> Vec<String> {
    sb.events(kind)
        .iter()
        .map(|e| {
            e["payload"]["content"]
                .as_str()
                .or(e["payload"]["observation_content"].as_str())
                .unwrap()
                .to_string()
        })
        .collect()
}

fn run_folders(sb: &Sandbox) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(sb.ws().join(".delta"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn run_w_on_a_paused_run_answers_its_question_with_the_message() {
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new("q1", "ask_human", json!({"prompt": "Colour?"})),
            ToolCallSpec::new("c2", "echo", json!({"message": "after"})),
        ]),
        Reply::text("Blue it is"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "paint", &[]).code, 101);
    let out = sb.run(Some(&server), "Blue", &["--format", "raw"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "Blue it is\n");
    assert!(
        out.stderr.contains("the message given with -m answers it"),
        "{}",
        out.stderr
    );
    assert_eq!(run_folders(&sb).len(), 1, "no new run");
    assert_eq!(
        contents(&sb, "ACTION_RESULT")[0],
        "Blue",
        "the message is the answer"
    );
    assert_eq!(
        contents(&sb, "USER_MESSAGE"),
        ["paint"],
        "not a user message"
    );
    let pauses = contents(&sb, "SYSTEM_MESSAGE")
        .into_iter()
        .filter(|c| c == "Agent pausing for human input")
        .count();
    assert_eq!(pauses, 1, "the run did not pause again");
    assert_eq!(sb.metadata()["status"], "COMPLETED");
    assert!(
        !sb.run_dir().join("interaction/response.txt").exists(),
        "the answer was consumed"
    );
    assert_well_formed(&server);
}

#[test]
fn run_w_on_an_interrupted_run_adds_the_message_after_settling_its_calls() {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "slow", json!({})),
        Reply::text("done with more details"),
    ]);
    let sb = Sandbox::new(&agent_yaml(&format!("{ECHO_AND_WRITE}{SLOW}")));
    let child = spawn_run(&sb, &server, "start");
    wait_for(&sb.ws().join("tool.pid"));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    assert_eq!(finish(child).code, 130);

    let out = sb.run(Some(&server), "Add more details", &["--format", "raw"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "done with more details\n");
    assert!(
        out.stderr
            .contains("the message given with -m is added to it"),
        "{}",
        out.stderr
    );
    assert_eq!(contents(&sb, "USER_MESSAGE"), ["start", "Add more details"]);
    let k = kinds(&sb);
    let result = k.iter().rposition(|t| t == "ACTION_RESULT").unwrap();
    let user = k.iter().rposition(|t| t == "USER_MESSAGE").unwrap();
    assert!(result < user, "{k:?}");
    assert_eq!(run_folders(&sb).len(), 1, "no new run");
    assert_well_formed(&server);
}

#[test]
fn run_w_while_a_run_of_the_workspace_is_executing_is_busy() {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "slow", json!({})),
        Reply::text("unused"),
        Reply::text("unused"),
    ]);
    let sb = Sandbox::new(&agent_yaml(&format!("{ECHO_AND_WRITE}{SLOW}")));
    let child = spawn_run(&sb, &server, "start");
    wait_for(&sb.ws().join("tool.pid"));
    let journal_before = std::fs::read(sb.run_dir().join("journal.jsonl")).unwrap();

    let out = sb.run(Some(&server), "something else", &[]);
    assert_eq!(out.code, 75, "{}", out.stderr);
    assert!(
        out.stderr.contains("Run is currently executing"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("(delta run)"), "{}", out.stderr);
    assert_eq!(run_folders(&sb).len(), 1, "no second run was started");
    assert_eq!(
        std::fs::read(sb.run_dir().join("journal.jsonl")).unwrap(),
        journal_before,
        "nothing touched"
    );
    assert_eq!(server.request_count(), 1);
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    assert_eq!(finish(child).code, 130);
}

/// Starts `n` `delta run -w ws -m <message>` at once and waits for all of them.
fn race(sb: &Sandbox, server: &ScriptedServer, n: usize, message: &str) -> Vec<Output> {
    let children: Vec<Child> = (0..n).map(|_| spawn_run(sb, server, message)).collect();
    children.into_iter().map(finish).collect()
}

fn codes(outs: &[Output]) -> Vec<i32> {
    let mut codes: Vec<i32> = outs.iter().map(|o| o.code).collect();
    codes.sort();
    codes
}

#[test]
fn concurrent_run_w_on_a_crashed_run_resume_it_once_and_the_others_are_busy() {
    // The run is killed (SIGKILL) while it waits for the model: RUNNING, with nobody holding it.
    let server =
        ScriptedServer::start([Reply::text("never delivered").delay(Duration::from_secs(30))]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let child = spawn_run(&sb, &server, "start");
    let start = Instant::now();
    while server.request_count() == 0 {
        assert!(start.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(10));
    }
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    finish(child);
    assert_eq!(sb.metadata()["status"], "RUNNING");

    // The resumed run takes a while, so the three callers overlap.
    let server2 =
        ScriptedServer::start([Reply::text("resumed once").delay(Duration::from_millis(1500))]);
    let outs = race(&sb, &server2, 3, "go on");
    assert_eq!(
        codes(&outs),
        [0, 75, 75],
        "{:#?}",
        outs.iter().map(|o| &o.stderr).collect::<Vec<_>>()
    );
    for out in outs.iter().filter(|o| o.code == 75) {
        assert!(
            out.stderr.contains("Run is currently executing"),
            "{}",
            out.stderr
        );
    }
    let winner = outs.iter().find(|o| o.code == 0).unwrap();
    assert!(
        winner.stderr.contains(" (INTERRUPTED)...") && !winner.stderr.contains("(RUNNING)"),
        "a crashed run is announced as the INTERRUPTED run it is resumed as: {}",
        winner.stderr
    );
    assert_eq!(run_folders(&sb).len(), 1, "no new run was started");
    assert_eq!(server2.request_count(), 1);
    let recovered = contents(&sb, "SYSTEM_MESSAGE")
        .into_iter()
        .filter(|c| c.starts_with("Recovered a crashed run"))
        .count();
    assert_eq!(recovered, 1, "recovered exactly once");
    assert_eq!(contents(&sb, "USER_MESSAGE"), ["start", "go on"]);
    let seqs: Vec<u64> = sb
        .journal()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(sb.metadata()["status"], "COMPLETED");
    assert_well_formed(&server2);
}

#[test]
fn concurrent_new_runs_in_one_workspace_start_one_and_the_others_are_busy() {
    let server = ScriptedServer::start([
        Reply::text("first"),
        Reply::text("slow").delay(Duration::from_millis(1500)),
        Reply::text("unused"),
        Reply::text("unused"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "first", &[]).code, 0);
    let outs = race(&sb, &server, 3, "next");
    assert_eq!(
        codes(&outs),
        [0, 75, 75],
        "{:#?}",
        outs.iter().map(|o| &o.stderr).collect::<Vec<_>>()
    );
    assert_eq!(run_folders(&sb).len(), 2, "one new run");
    assert_eq!(server.request_count(), 2);
}

#[test]
fn concurrent_runs_with_y_each_get_a_workspace_of_their_own() {
    let server = ScriptedServer::start(
        (0..3).map(|i| Reply::text(&format!("run {i}")).delay(Duration::from_millis(500))),
    );
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let children: Vec<Child> = (0..3)
        .map(|_| {
            let mut cmd = sb.delta(Some(&server));
            cmd.args(["run", "--agent", "agent", "-m", "hi", "-y"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    let outs: Vec<Output> = children.into_iter().map(finish).collect();
    assert_eq!(
        codes(&outs),
        [0, 0, 0],
        "{:#?}",
        outs.iter().map(|o| &o.stderr).collect::<Vec<_>>()
    );
    let root = sb.agent().join("workspaces");
    for name in ["W001", "W002", "W003"] {
        let runs = std::fs::read_dir(root.join(name).join(".delta"))
            .unwrap()
            .flatten()
            .filter(|e| e.path().join("journal.jsonl").is_file())
            .count();
        assert_eq!(runs, 1, "{name} has one run");
    }
    assert!(!root.join("W004").exists());
}
