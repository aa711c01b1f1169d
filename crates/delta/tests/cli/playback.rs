//! Playback tells the truth: recordings made for other tools, or used up, fail the run; a continuation
//! goes on with the recordings its run has not used yet.

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use crate::support::{ECHO_AND_WRITE, Output, Sandbox, agent_yaml, output};

/// A run that calls echo and write_to_file, then answers.
fn two_turns() -> Vec<Reply> {
    vec![
        Reply::tool_calls([
            ToolCallSpec::new("call_1", "echo", json!({"message": "hi there"})),
            ToolCallSpec::new(
                "call_2",
                "write_to_file",
                json!({"filename": "out.txt", "content": "hello file"}),
            ),
        ]),
        Reply::text("All done."),
    ]
}

/// Records a run (and its continuation, when `then` is given) into `rec/`, then removes the workspace.
fn record(sb: &Sandbox, then: Option<&str>) {
    let mut script = two_turns();
    if then.is_some() {
        script.push(Reply::text("Second answer."));
    }
    let server = ScriptedServer::start(script);
    let out = sb.run(Some(&server), "Say hi", &["--record", "rec"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    if let Some(message) = then {
        let out = continue_(sb, Some(&server), &["-m", message, "--record", "rec"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    std::fs::remove_dir_all(sb.ws()).unwrap();
}

fn continue_(sb: &Sandbox, server: Option<&ScriptedServer>, args: &[&str]) -> Output {
    let mut cmd = sb.delta(server);
    cmd.args(["continue", "-w", "ws"]).args(args);
    output(cmd)
}

#[test]
fn recordings_made_for_other_tools_fail_the_run() {
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    record(&sb, None);
    // The agent now offers other tools: the recordings do not belong to it.
    sb.file(
        "agent/agent.yaml",
        &agent_yaml("  - name: noop\n    exec: \"true\"\n"),
    );
    let out = sb.run(None, "Say hi", &["--playback", "rec", "--format", "json"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["status"], "FAILED");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(message.contains("turn-1.json"), "{message}");
    assert!(
        message.contains("(recordings in rec, mode hybrid)"),
        "names the recordings dir: {message}"
    );
    assert!(
        message.contains("recorded with tools that are not offered now: echo, write_to_file"),
        "{message}"
    );
    assert!(
        sb.events("ACTION_REQUEST").is_empty(),
        "no recorded tool call was replayed"
    );
    assert_eq!(sb.metadata()["status"], "FAILED");
}

#[test]
fn continue_with_playback_takes_the_next_unused_recording() {
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    record(&sb, Some("And again?"));
    // As if the continuation had been recorded with another context recipe: its signature no longer
    // matches, so only the order of the recordings can find it.
    let turn3 = sb.path("rec/turn-3.json");
    let mut recording: Value =
        serde_json::from_str(&std::fs::read_to_string(&turn3).unwrap()).unwrap();
    recording["signature"]["messageCount"] = json!(99);
    std::fs::write(&turn3, recording.to_string()).unwrap();

    let out = sb.run(None, "Say hi", &["--playback", "rec", "--format", "raw"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "All done.\n");
    let out = continue_(
        &sb,
        None,
        &["-m", "And again?", "--playback", "rec", "--format", "raw"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "Second answer.\n");
    assert_eq!(
        sb.events("ACTION_REQUEST").len(),
        2,
        "the first recording's tool calls were not replayed again"
    );
}

#[test]
fn used_up_recordings_fail_the_continuation() {
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    record(&sb, None);
    let out = sb.run(None, "Say hi", &["--playback", "rec"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = continue_(
        &sb,
        None,
        &["-m", "more", "--playback", "rec", "--format", "json"],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    let message = result["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("the recordings in rec are used up: all 2 have been served"),
        "{message}"
    );
    assert_eq!(
        sb.events("ACTION_REQUEST").len(),
        2,
        "nothing was replayed twice"
    );
    assert_eq!(sb.metadata()["status"], "FAILED");
}

#[test]
fn a_recording_served_but_never_journaled_is_served_again() {
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    record(&sb, Some("And again?"));
    let out = sb.run(None, "Say hi", &["--playback", "rec", "--format", "raw"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(sb.events("THOUGHT").len(), 2);
    // As a process killed after being served turn-3, before its answer reached the journal, leaves
    // it: playback.json counts turn-3 as served for the run's third answer.
    let file = sb.run_dir().join("playback.json");
    let mut saved: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let (_, served) = saved.as_object_mut().unwrap().iter_mut().next().unwrap();
    served["before_last"] = served["state"].clone();
    served["state"]["used"]
        .as_array_mut()
        .unwrap()
        .push(json!("turn-3.json"));
    served["last_answer"] = json!(3);
    std::fs::write(&file, serde_json::to_string(&saved).unwrap()).unwrap();

    let out = continue_(
        &sb,
        None,
        &["-m", "And again?", "--playback", "rec", "--format", "raw"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "Second answer.\n");
}
