//! ask_human: pausing for an answer (exit 101) and answering on the terminal (-i).

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use crate::support::{
    ECHO_AND_WRITE, Sandbox, agent_yaml, assert_well_formed, bodies, output, read_json,
};

fn ask_between_two_calls() -> Vec<Reply> {
    vec![Reply::tool_calls([
        ToolCallSpec::new("c1", "echo", json!({"message": "before"})),
        ToolCallSpec::new(
            "c2",
            "ask_human",
            json!({"prompt": "What is your favourite colour?"}),
        ),
        ToolCallSpec::new(
            "c3",
            "write_to_file",
            json!({"filename": "after.txt", "content": "later"}),
        ),
    ])]
}

#[test]
fn ask_human_pauses_the_run_with_exit_101() {
    let server = ScriptedServer::start(ask_between_two_calls());
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = sb.run(Some(&server), "ask me", &["--format", "json"]);
    assert_eq!(out.code, 101, "{}", out.stderr);
    assert_eq!(sb.metadata()["status"], "WAITING_FOR_INPUT");

    let request = read_json(&sb.run_dir().join("interaction/request.json"));
    assert_eq!(request["prompt"], "What is your favourite colour?");
    assert_eq!(request["input_type"], "text");
    assert_eq!(request["sensitive"], false);
    assert!(request["request_id"].as_str().is_some());

    // The call before the question ran; the one after it waits for the resume.
    let kinds: Vec<String> = sb
        .journal()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "RUN_START",
            "USER_MESSAGE",
            "THOUGHT",
            "ACTION_REQUEST",
            "ACTION_RESULT",
            "ACTION_REQUEST",
            "SYSTEM_MESSAGE"
        ]
    );
    let ask = &sb.events("ACTION_REQUEST")[1]["payload"];
    assert_eq!(
        ask["resolved_command"],
        "ask_human What is your favourite colour?"
    );
    assert!(!sb.ws().join("after.txt").exists());
    assert_eq!(
        sb.events("THOUGHT")[0]["payload"]["tool_calls"]
            .as_array()
            .unwrap()
            .len(),
        3,
        "the pending call is journaled"
    );

    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["status"], "WAITING_FOR_INPUT");
    assert_eq!(
        result["interaction"]["prompt"],
        "What is your favourite colour?"
    );
    assert!(out.stderr.contains("delta continue -w"), "{}", out.stderr);
    assert!(
        !out.stdout.contains("paused"),
        "the banner goes to stderr, never into --format json"
    );
}

fn run_interactive(sb: &Sandbox, server: &ScriptedServer, input: &str) -> crate::support::Output {
    let mut cmd = sb.delta(Some(server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "ask me", "-i"]);
    crate::support::output_with_stdin(cmd, input)
}

#[test]
fn interactive_mode_takes_the_answer_from_stdin_and_goes_on() {
    let mut script = ask_between_two_calls();
    script.push(Reply::text("Blue it is."));
    let server = ScriptedServer::start(script);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = run_interactive(&sb, &server, "Blue\n");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("What is your favourite colour?"),
        "{}",
        out.stderr
    );
    let results = sb.events("ACTION_RESULT");
    assert_eq!(results.len(), 3);
    assert_eq!(results[1]["payload"]["observation_content"], "Blue");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("after.txt")).unwrap(),
        "later"
    );
    // The model got the answer as the tool result of its question.
    let last = bodies(&server).pop().unwrap();
    let answer = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == "c2")
        .unwrap()
        .clone();
    assert_eq!(answer["content"], "Blue");
    assert!(!sb.run_dir().join("interaction/request.json").exists());
}

#[test]
fn interactive_confirmations_are_yes_or_no() {
    let server = ScriptedServer::start([
        Reply::tool_call(
            "q1",
            "ask_human",
            json!({"prompt": "Proceed?", "input_type": "confirmation"}),
        ),
        Reply::tool_call(
            "q2",
            "ask_human",
            json!({"prompt": "Really?", "input_type": "confirmation"}),
        ),
        Reply::text("ok"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = run_interactive(&sb, &server, "Y\nmaybe\n");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let answers: Vec<Value> = sb
        .events("ACTION_RESULT")
        .iter()
        .map(|e| e["payload"]["observation_content"].clone())
        .collect();
    assert_eq!(answers, vec![json!("yes"), json!("no")]);
    assert!(
        out.stderr
            .contains("Invalid response. Defaulting to \"no\""),
        "{}",
        out.stderr
    );
}

#[test]
fn interactive_mode_with_no_input_left_waits_for_the_answer_with_exit_101() {
    let server = ScriptedServer::start([
        Reply::tool_call(
            "q1",
            "ask_human",
            json!({"prompt": "What is your favourite colour?"}),
        ),
        Reply::text("Blue it is."),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    // `Sandbox::delta` gives the process an empty stdin: the question meets end of input at once.
    let out = sb.run(Some(&server), "ask me", &["-i"]);
    assert_eq!(out.code, 101, "{}", out.stderr);
    assert_eq!(sb.metadata()["status"], "WAITING_FOR_INPUT");
    let request = read_json(&sb.run_dir().join("interaction/request.json"));
    assert_eq!(request["prompt"], "What is your favourite colour?");
    assert_eq!(request["input_type"], "text");
    assert!(
        sb.events("ACTION_RESULT").is_empty(),
        "an answer was made up"
    );
    assert_eq!(server.request_count(), 1);
    assert!(out.stderr.contains("delta continue -w"), "{}", out.stderr);

    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws", "-m", "Blue", "--format", "raw"]);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "Blue it is.\n");
    assert_eq!(sb.metadata()["status"], "COMPLETED");
    let result = &sb.events("ACTION_RESULT")[0]["payload"];
    assert_eq!(result["action_id"], "q1");
    assert_eq!(result["observation_content"], "Blue");
    // The model got the answer as the result of its question.
    let last = bodies(&server).pop().unwrap();
    let answer = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == "q1")
        .unwrap_or_else(|| panic!("no result for q1: {last}"))
        .clone();
    assert_eq!(answer["role"], "tool");
    assert_eq!(answer["content"], "Blue");
    assert_well_formed(&server);
    assert!(!sb.run_dir().join("interaction/request.json").exists());
}
