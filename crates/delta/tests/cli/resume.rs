//! `delta continue`, `run -w` auto-resume, crash recovery, forks and `list-runs`.
//!
//! Every test that resumes checks, on the requests the scripted server captured, that each assistant
//! message with tool calls is followed directly by one result per call (`assert_well_formed`).

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use crate::support::{
    ECHO_AND_WRITE, Output, Sandbox, agent_yaml, assert_well_formed, bodies, kinds, output,
    read_json, wait_for,
};

const SLOW: &str = "  - name: slow\n    shell: \"echo $$ > tool.pid; sleep 30\"\n";

fn agent_with_slow_tool() -> Sandbox {
    Sandbox::new(&agent_yaml(&format!("{ECHO_AND_WRITE}{SLOW}")))
}

fn continue_(sb: &Sandbox, server: Option<&ScriptedServer>, args: &[&str]) -> Output {
    let mut cmd = sb.delta(server);
    cmd.args(["continue", "-w", "ws"]).args(args);
    output(cmd)
}

fn spawn_run(sb: &Sandbox, server: &ScriptedServer, message: &str) -> Child {
    let mut cmd = sb.delta(Some(server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", message])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().unwrap()
}

/// A run stopped by SIGINT while its `slow` tool runs. The server has answered once.
fn interrupted_run(sb: &Sandbox, server: &ScriptedServer) {
    let child = spawn_run(sb, server, "start");
    wait_for(&sb.ws().join("tool.pid"));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert_eq!(sb.metadata()["status"], "INTERRUPTED");
    std::fs::remove_file(sb.ws().join("tool.pid")).unwrap();
}

fn user_messages(sb: &Sandbox) -> Vec<String> {
    sb.events("USER_MESSAGE")
        .iter()
        .map(|e| e["payload"]["content"].as_str().unwrap().to_string())
        .collect()
}

// --- The five scenarios of the design document (§7.3) ---

#[test]
fn continue_interrupted_without_message_resumes_directly() {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "slow", json!({})),
        Reply::text("resumed and done"),
    ]);
    let sb = agent_with_slow_tool();
    interrupted_run(&sb, &server);
    let out = continue_(&sb, Some(&server), &["--format", "raw"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "resumed and done\n");
    assert_eq!(user_messages(&sb), vec!["start"], "no new user message");
    assert_eq!(sb.metadata()["status"], "COMPLETED");
    assert_well_formed(&server);
}

#[test]
fn continue_interrupted_with_message_appends_user_message_then_resumes() {
    let server =
        ScriptedServer::start([Reply::tool_call("c1", "slow", json!({})), Reply::text("ok")]);
    let sb = agent_with_slow_tool();
    interrupted_run(&sb, &server);
    let out = continue_(
        &sb,
        Some(&server),
        &["-m", "Please add more details this time"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        user_messages(&sb),
        vec!["start", "Please add more details this time"]
    );
    // The interrupted call got its result before the new message.
    let k = kinds(&sb);
    let result = k.iter().rposition(|t| t == "ACTION_RESULT").unwrap();
    let user = k.iter().rposition(|t| t == "USER_MESSAGE").unwrap();
    assert!(result < user, "{k:?}");
    let last = bodies(&server).pop().unwrap();
    let roles: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, vec!["system", "user", "assistant", "tool", "user"]);
    assert_well_formed(&server);
}

#[test]
fn continue_waiting_for_input_with_message_writes_response_then_resumes() {
    let server = ScriptedServer::start([
        Reply::tool_call(
            "q1",
            "ask_human",
            json!({"prompt": "Do you want to proceed?", "input_type": "confirmation"}),
        ),
        Reply::text("Proceeding as you said."),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "deploy", &[]).code, 101);
    let out = continue_(&sb, Some(&server), &["-m", "yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("Response written to:"),
        "{}",
        out.stderr
    );
    let results = sb.events("ACTION_RESULT");
    assert_eq!(results[0]["payload"]["action_id"], "q1");
    assert_eq!(results[0]["payload"]["observation_content"], "yes");
    assert_eq!(
        user_messages(&sb),
        vec!["deploy"],
        "the answer is the call's result, not a user message"
    );
    assert!(
        !sb.run_dir().join("interaction/response.txt").exists(),
        "the response was consumed"
    );
    assert_well_formed(&server);
}

#[test]
fn continue_completed_with_message_extends_the_conversation() {
    let server = ScriptedServer::start([Reply::text("first answer"), Reply::text("second answer")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "first", &[]).code, 0);
    let run_id = sb.metadata()["run_id"].clone();
    let out = continue_(
        &sb,
        Some(&server),
        &["-m", "Now create a second file", "--format", "json"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["result"], "second answer");
    assert_eq!(result["run_id"], run_id, "the same run is extended");
    assert_eq!(
        user_messages(&sb),
        vec!["first", "Now create a second file"]
    );
    assert_eq!(sb.events("RUN_END").len(), 2);
    let last = bodies(&server).pop().unwrap();
    let contents: Vec<Value> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(
        contents[1..],
        [
            json!("first"),
            json!("first answer"),
            json!("Now create a second file")
        ]
    );
    assert_well_formed(&server);
}

#[test]
fn continue_completed_without_message_is_an_error() {
    let server = ScriptedServer::start([Reply::text("done")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "first", &[]).code, 0);
    let before = std::fs::read(sb.run_dir().join("journal.jsonl")).unwrap();
    let out = continue_(&sb, Some(&server), &[]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("Run is COMPLETED. To continue, provide a message using -m/--message"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("Example: delta continue -w"),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read(sb.run_dir().join("journal.jsonl")).unwrap(),
        before
    );
    assert_eq!(server.request_count(), 1);
}

// --- Beyond the five ---

#[test]
fn failed_runs_are_retried_with_guidance() {
    let server = ScriptedServer::start([Reply::error(400, "bad request"), Reply::text("fixed")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "try", &[]).code, 1);
    assert_eq!(sb.metadata()["status"], "FAILED");
    let out = continue_(&sb, Some(&server), &[]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("Run is FAILED. To retry, provide a message using -m/--message"),
        "{}",
        out.stderr
    );
    let out = continue_(
        &sb,
        Some(&server),
        &[
            "-m",
            "The API key is in ~/.config/api.key",
            "--format",
            "raw",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "fixed\n");
    assert_eq!(sb.metadata()["status"], "COMPLETED");
    assert!(sb.metadata().get("end_time").is_some());
    assert_well_formed(&server);
}

#[test]
fn no_run_and_unknown_run_ids_are_explained() {
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = continue_(&sb, None, &[]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("No existing run found in the work directory"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("Use `delta run` to start a new run"),
        "{}",
        out.stderr
    );
    let server = ScriptedServer::start([Reply::text("done")]);
    assert_eq!(sb.run(Some(&server), "x", &[]).code, 0);
    let out = continue_(&sb, None, &["--run-id", "nope", "-m", "x"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("Run 'nope' not found"),
        "{}",
        out.stderr
    );
    let out = continue_(&sb, None, &["--run-id", "../etc", "-m", "x"]);
    assert_eq!(out.code, 64, "{}", out.stderr);
}

#[test]
fn a_running_run_is_refused_while_its_process_lives() {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "slow", json!({})),
        Reply::text("unused"),
    ]);
    let sb = agent_with_slow_tool();
    let child = spawn_run(&sb, &server, "start");
    wait_for(&sb.ws().join("tool.pid"));
    let journal_before = std::fs::read(sb.run_dir().join("journal.jsonl")).unwrap();
    let out = continue_(&sb, Some(&server), &["-m", "hello?"]);
    assert_eq!(out.code, 75, "{}", out.stderr);
    assert!(
        out.stderr.contains("Run is currently executing"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("(delta run)"), "{}", out.stderr);
    assert_eq!(
        std::fs::read(sb.run_dir().join("journal.jsonl")).unwrap(),
        journal_before,
        "nothing touched"
    );
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    assert_eq!(child.wait_with_output().unwrap().status.code(), Some(130));
}

#[test]
fn sigint_mid_tool_then_continue_without_a_message() {
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new("c1", "slow", json!({})),
            ToolCallSpec::new("c2", "echo", json!({"message": "after"})),
        ]),
        Reply::text("done"),
    ]);
    let sb = agent_with_slow_tool();
    interrupted_run(&sb, &server);
    let out = continue_(&sb, Some(&server), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let results = sb.events("ACTION_RESULT");
    assert_eq!(results.len(), 2);
    assert!(
        results[0]["payload"]["observation_content"]
            .as_str()
            .unwrap()
            .contains("INTERRUPTED")
    );
    // The call that never started ran on resume.
    assert_eq!(
        results[1]["payload"]["observation_content"],
        "=== STDOUT ===\nafter\n\n=== EXIT CODE: 0 ==="
    );
    assert_eq!(sb.metadata()["iterations_completed"], 2);
    assert_well_formed(&server);
}

#[test]
fn sigkill_mid_tool_then_continue_recovers_the_run() {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "slow", json!({})),
        Reply::text("recovered fine"),
    ]);
    let sb = agent_with_slow_tool();
    let child = spawn_run(&sb, &server, "start");
    wait_for(&sb.ws().join("tool.pid"));
    std::thread::sleep(Duration::from_millis(50));
    let tool: i32 = std::fs::read_to_string(sb.ws().join("tool.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    child.wait_with_output().unwrap();
    // The tool's own group outlives a SIGKILLed delta, until `continue` stops it.
    assert!(!crate::support::group_members(tool).is_empty());
    assert_eq!(
        sb.metadata()["status"],
        "RUNNING",
        "a killed process could not record anything"
    );

    let mut cmd = sb.delta(Some(&server));
    cmd.args(["list-runs", "-w", "ws", "--format", "json"]);
    let listed: Value = serde_json::from_str(&output(cmd).stdout).unwrap();
    assert_eq!(listed[0]["status"], "INTERRUPTED");
    assert_eq!(listed[0]["crashed"], true);

    let out = continue_(&sb, Some(&server), &["--format", "raw"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("Recovered a crashed run"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout, "recovered fine\n");
    let warnings: Vec<Value> = sb
        .events("SYSTEM_MESSAGE")
        .into_iter()
        .filter(|e| e["payload"]["level"] == "WARN")
        .collect();
    assert!(
        warnings[0]["payload"]["content"]
            .as_str()
            .unwrap()
            .starts_with("Recovered a crashed run")
    );
    assert!(crate::support::group_members(tool).is_empty());
    let _ = killpg(Pid::from_raw(tool), Signal::SIGKILL);
    let result = &sb.events("ACTION_RESULT")[0]["payload"];
    assert_eq!(result["status"], "FAILED");
    let text = result["observation_content"].as_str().unwrap();
    assert!(text.contains("may or may not have taken effect"), "{text}");
    assert!(text.contains("was still running"), "{text}");
    assert_well_formed(&server);
}

#[test]
fn two_concurrent_continues_one_proceeds_one_is_busy() {
    let server = ScriptedServer::start([
        Reply::text("first"),
        Reply::text("slow second").delay(Duration::from_millis(1500)),
        Reply::text("unused"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "one", &[]).code, 0);
    let mut a = sb.delta(Some(&server));
    a.args(["continue", "-w", "ws", "-m", "two"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let a = a.spawn().unwrap();
    let start = Instant::now();
    while server.request_count() < 2 {
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    let b = continue_(&sb, Some(&server), &["-m", "three"]);
    assert_eq!(b.code, 75, "{}", b.stderr);
    let a = a.wait_with_output().unwrap();
    assert_eq!(a.status.code(), Some(0));
    let seqs: Vec<u64> = sb
        .journal()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "seq strictly increasing, no duplicates"
    );
    assert_eq!(user_messages(&sb), vec!["one", "two"]);
    assert_well_formed(&server);
}

#[test]
fn a_torn_last_journal_line_is_dropped_with_a_warning() {
    let server = ScriptedServer::start([Reply::text("done"), Reply::text("again")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "one", &[]).code, 0);
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(sb.run_dir().join("journal.jsonl"))
        .unwrap();
    f.write_all(br#"{"seq":99,"timestamp":"x","type":"USER_MESS"#)
        .unwrap();
    drop(f);
    let out = continue_(&sb, Some(&server), &["-m", "two"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("dropped a torn last line"),
        "{}",
        out.stderr
    );
    let system: Vec<String> = sb
        .events("SYSTEM_MESSAGE")
        .iter()
        .map(|e| e["payload"]["content"].as_str().unwrap().to_string())
        .collect();
    assert!(
        system.iter().any(|c| c.contains("torn last line")),
        "{system:?}"
    );
    assert_well_formed(&server);
}

#[test]
fn ask_human_with_sibling_calls_before_and_after() {
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new("c1", "echo", json!({"message": "before"})),
            ToolCallSpec::new("c2", "ask_human", json!({"prompt": "Colour?"})),
            ToolCallSpec::new(
                "c3",
                "write_to_file",
                json!({"filename": "after.txt", "content": "after"}),
            ),
        ]),
        Reply::text("all settled"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 101);
    assert!(!sb.ws().join("after.txt").exists());
    let out = continue_(&sb, Some(&server), &["-m", "Blue"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("after.txt")).unwrap(),
        "after"
    );
    let last = bodies(&server).pop().unwrap();
    let messages = last["messages"].as_array().unwrap();
    let tail: Vec<(&str, &str)> = messages[3..]
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap(),
                m["tool_call_id"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(tail, vec![("tool", "c1"), ("tool", "c2"), ("tool", "c3")]);
    assert_eq!(messages[4]["content"], "Blue");
    assert_well_formed(&server);
}

#[test]
fn a_waiting_run_without_an_answer_keeps_waiting() {
    let server = ScriptedServer::start([Reply::tool_call(
        "q1",
        "ask_human",
        json!({"prompt": "Name?"}),
    )]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 101);
    let out = continue_(&sb, Some(&server), &[]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("Run is WAITING_FOR_INPUT. Please provide a response using -m/--message. The question: Name?"), "{}", out.stderr);
    assert_eq!(sb.metadata()["status"], "WAITING_FOR_INPUT");
    assert_eq!(server.request_count(), 1);
    // An answer written to response.txt by hand is used by `continue` without -m.
    std::fs::write(sb.run_dir().join("interaction/response.txt"), "Ada\n").unwrap();
    let server2 = ScriptedServer::start([Reply::text("Hello Ada")]);
    let out = continue_(&sb, Some(&server2), &["--format", "raw"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        sb.events("ACTION_RESULT")[0]["payload"]["observation_content"],
        "Ada"
    );
    assert_well_formed(&server2);
}

#[test]
fn run_with_w_auto_resumes_and_says_what_happened_to_m() {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "slow", json!({})),
        Reply::text("done"),
    ]);
    let sb = agent_with_slow_tool();
    interrupted_run(&sb, &server);
    let run_id = sb.metadata()["run_id"].clone();
    let out = sb.run(Some(&server), "Resume task", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("Found a resumable run"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("the message given with -m is added to it"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("--run-id NEW"), "{}", out.stderr);
    assert_eq!(sb.metadata()["run_id"], run_id);
    assert_eq!(user_messages(&sb), vec!["start", "Resume task"]);
    assert_well_formed(&server);
}

#[test]
fn max_iterations_on_continue_applies_to_that_continuation() {
    let mut script = vec![Reply::text("done")];
    script.extend(
        (0..5).map(|i| Reply::tool_call(&format!("c{i}"), "echo", json!({"message": "x"}))),
    );
    let server = ScriptedServer::start(script);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "one", &[]).code, 0);
    let out = continue_(
        &sb,
        Some(&server),
        &["-m", "loop", "--max-iterations", "2", "--format", "raw"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "", "no final answer: raw prints nothing");
    assert!(out.stderr.contains("iteration limit (2)"), "{}", out.stderr);
    assert_eq!(server.request_count(), 3);
    assert_well_formed(&server);
}

#[test]
fn dotenv_files_are_loaded_on_resume() {
    let server = ScriptedServer::start([
        Reply::text("one"),
        Reply::tool_call("c1", "show", json!({})),
        Reply::text("two"),
    ]);
    let sb = Sandbox::new(&agent_yaml(
        "  - name: show\n    shell: \"echo $GREETING\"\n",
    ));
    assert_eq!(sb.run(Some(&server), "one", &[]).code, 0);
    sb.file("ws/.env", "GREETING=hello-from-dotenv\n");
    let out = continue_(&sb, Some(&server), &["-m", "two"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        sb.events("ACTION_RESULT")[0]["payload"]["observation_content"],
        "=== STDOUT ===\nhello-from-dotenv\n\n=== EXIT CODE: 0 ==="
    );
    assert_well_formed(&server);
}

#[test]
fn with_file_puts_the_file_into_the_message() {
    let server = ScriptedServer::start([Reply::text("one"), Reply::text("two")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "one", &[]).code, 0);
    sb.file("notes.md", "line 1\nline 2\n");
    let out = continue_(
        &sb,
        Some(&server),
        &["-m", "Use these notes", "--with-file", "notes.md"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        user_messages(&sb)[1],
        "Use these notes\n\n--- notes.md ---\nline 1\nline 2"
    );
    assert_well_formed(&server);
}

#[test]
fn last_continues_the_most_recently_used_workspace() {
    let server = ScriptedServer::start([Reply::text("one"), Reply::text("two")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "one", &[]).code, 0);
    let mut cmd = sb.delta(Some(&server));
    cmd.current_dir(sb.agent())
        .args(["continue", "--last", "-m", "two", "--format", "raw"]);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "two\n");
    assert_eq!(user_messages(&sb), vec!["one", "two"]);
    assert_well_formed(&server);
}

#[test]
fn from_iteration_forks_a_new_run_from_the_journal_prefix() {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "echo", json!({"message": "one"})),
        Reply::tool_call("c2", "echo", json!({"message": "two"})),
        Reply::text("original end"),
        Reply::text("forked end"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "task", &[]).code, 0);
    let source = sb.metadata()["run_id"].as_str().unwrap().to_string();
    let out = continue_(
        &sb,
        Some(&server),
        &[
            "--from-iteration",
            "1",
            "-m",
            "Try a different approach",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_ne!(result["run_id"], json!(source));
    assert_eq!(result["result"], "forked end");
    let meta = sb.metadata();
    assert_eq!(meta["forked_from"]["run_id"], json!(source));
    assert_eq!(meta["forked_from"]["iteration"], 1);
    let k = kinds(&sb);
    assert_eq!(
        k,
        [
            "RUN_START",
            "USER_MESSAGE",
            "THOUGHT",
            "ACTION_REQUEST",
            "ACTION_RESULT",
            "SYSTEM_MESSAGE",
            "USER_MESSAGE",
            "THOUGHT",
            "RUN_END"
        ]
    );
    assert_eq!(sb.journal()[0]["payload"]["run_id"], result["run_id"]);
    // The source run is untouched.
    let source_journal =
        crate::support::read_jsonl(&sb.ws().join(".delta").join(&source).join("journal.jsonl"));
    assert_eq!(source_journal.len(), 10);
    let last = bodies(&server).pop().unwrap();
    let contents: Vec<Value> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(contents.last().unwrap(), "Try a different approach");
    assert_well_formed(&server);
}

#[test]
fn a_fork_keeps_nothing_said_after_its_iteration() {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "echo", json!({"message": "one"})),
        Reply::text("first end"),
        Reply::text("later end"),
        Reply::text("forked end"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "task", &[]).code, 0);
    // A message given after iteration 2, and the answer to it (iteration 3).
    let out = continue_(&sb, Some(&server), &["-m", "Said after iteration two"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for (iteration, kept) in [
        ("2", vec!["task", "New direction"]),
        ("1", vec!["task", "New direction"]),
        ("0", vec!["task", "New direction"]),
    ] {
        server.push(Reply::text("forked end"));
        let source = sb.metadata()["forked_from"]["run_id"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| sb.metadata()["run_id"].as_str().unwrap().to_string());
        let out = continue_(
            &sb,
            Some(&server),
            &[
                "--run-id",
                &source,
                "--from-iteration",
                iteration,
                "-m",
                "New direction",
            ],
        );
        assert_eq!(out.code, 0, "{iteration}: {}", out.stderr);
        assert_eq!(user_messages(&sb), kept, "fork at {iteration}");
        let last = bodies(&server).pop().unwrap();
        let said: Vec<&str> = last["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        assert_eq!(said, kept, "fork at {iteration}: {last}");
        let k = kinds(&sb);
        assert_eq!(k.iter().filter(|t| *t == "RUN_END").count(), 1, "{k:?}");
        assert_well_formed(&server);
    }
}

#[test]
fn list_runs_in_every_format() {
    let server = ScriptedServer::start([
        Reply::text("a"),
        Reply::tool_call("q", "ask_human", json!({"prompt": "?"})),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(
        sb.run(Some(&server), "first", &["--run-id", "run-a"]).code,
        0
    );
    let mut cmd = sb.delta(Some(&server));
    cmd.env("DELTA_TEST_NOW", "2026-01-02T03:05:00Z");
    cmd.args([
        "run", "--agent", "agent", "-w", "ws", "-m", "second", "--run-id", "run-b",
    ]);
    assert_eq!(output(cmd).code, 101);
    let list = |args: &[&str]| {
        let mut cmd = sb.delta(None);
        cmd.args(["list-runs", "-w", "ws"]).args(args);
        output(cmd)
    };
    assert_eq!(list(&["--format", "raw"]).stdout, "run-b\nrun-a\n");
    assert_eq!(list(&["--first"]).stdout, "run-b\n");
    assert_eq!(list(&["--resumable", "--format", "raw"]).stdout, "run-b\n");
    assert_eq!(
        list(&["--status", "completed", "--format", "raw"]).stdout,
        "run-a\n"
    );
    let json: Value = serde_json::from_str(&list(&["--format", "json"]).stdout).unwrap();
    assert_eq!(json[0]["status"], "WAITING_FOR_INPUT");
    assert_eq!(json[1]["task"], "first");
    let text = list(&[]).stdout;
    insta::assert_snapshot!(text);
    let out = list(&["--status", "bogus"]);
    assert_eq!(out.code, 64);
    let mut cmd = sb.delta(None);
    cmd.args(["list-runs", "-w", "agent"]);
    let out = output(cmd);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("No .delta directory found"),
        "{}",
        out.stderr
    );
}

#[test]
fn run_ids_are_validated_and_never_reused() {
    let server = ScriptedServer::start([Reply::text("a"), Reply::text("b")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(
        sb.run(Some(&server), "first", &["--run-id", "mine"]).code,
        0
    );
    assert!(sb.ws().join(".delta/mine/journal.jsonl").is_file());
    let before = std::fs::read(sb.ws().join(".delta/mine/journal.jsonl")).unwrap();
    let out = sb.run(Some(&server), "second", &["--run-id", "mine"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("Run ID 'mine' already exists"),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read(sb.ws().join(".delta/mine/journal.jsonl")).unwrap(),
        before
    );
    let out = sb.run(Some(&server), "third", &["--run-id", "../escape"]);
    assert_eq!(out.code, 64);
    assert!(!sb.path("escape").exists());
    let meta = read_json(&sb.ws().join(".delta/mine/metadata.json"));
    assert_eq!(meta["task"], "first");
}
