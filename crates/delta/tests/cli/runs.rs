//! Whole runs: the golden journal, result formats, files on disk, iteration limit, recording.

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use crate::support::{ECHO_AND_WRITE, KEY, Sandbox, agent_yaml, bodies};

fn golden_script() -> Vec<Reply> {
    vec![
        Reply::tool_calls([
            ToolCallSpec::new("call_1", "echo", json!({"message": "hi there"})),
            ToolCallSpec::new(
                "call_2",
                "write_to_file",
                json!({"filename": "out.txt", "content": "hello file"}),
            ),
        ])
        .usage(100, 20),
        Reply::text("All done.").usage(150, 5),
    ]
}

#[test]
fn golden_journal_of_a_two_iteration_run() {
    let server = ScriptedServer::start(golden_script());
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = sb.run(Some(&server), "Say hi", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("out.txt")).unwrap(),
        "hello file"
    );
    let journal: Vec<String> = sb
        .journal()
        .iter()
        .map(|e| sb.scrub(&e.to_string()))
        .collect();
    insta::assert_snapshot!(journal.join("\n"));
    let meta = sb.metadata();
    assert_eq!(meta["status"], "COMPLETED");
    assert_eq!(meta["iterations_completed"], 2);
    assert_eq!(
        meta["usage"],
        json!({"input_tokens": 250, "output_tokens": 25, "total_tokens": 275, "llm_calls": 2})
    );
    assert!(meta["pid"].as_u64().is_some());
    assert_eq!(meta["task"], "Say hi");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join(".delta/VERSION")).unwrap(),
        "1.2\n"
    );
    sb.assert_nowhere(KEY);
}

#[test]
fn the_second_request_replays_the_conversation_in_order() {
    let server = ScriptedServer::start(golden_script());
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "Say hi", &[]).code, 0);
    let second = &bodies(&server)[1];
    let roles: Vec<&str> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, vec!["system", "user", "assistant", "tool", "tool"]);
    let assistant = &second["messages"][2];
    assert_eq!(assistant["content"], "", "never null, never \"null\"");
    assert_eq!(
        assistant["tool_calls"][1]["function"]["name"],
        "write_to_file"
    );
    assert_eq!(second["messages"][3]["tool_call_id"], "call_1");
    assert_eq!(
        second["messages"][3]["content"],
        "=== STDOUT ===\nhi there\n\n=== EXIT CODE: 0 ==="
    );
    assert_eq!(
        second["messages"][4]["content"],
        "=== STDOUT ===\nhello file\n=== EXIT CODE: 0 ==="
    );
    assert_eq!(
        second["messages"][0]["content"],
        "# Context Block: system_prompt\n\nYou are a test agent."
    );
    // What the model is told about the tools.
    let tools = second["tools"].as_array().unwrap();
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["echo", "write_to_file", "ask_human"]);
    assert_eq!(
        tools[0]["function"]["description"],
        "Executes: echo ${message}"
    );
    assert_eq!(second["model"], "test-model");
    assert!(second.get("temperature").is_none() && second.get("max_tokens").is_none());
}

#[test]
fn tool_and_parameter_descriptions_reach_the_model() {
    let server = ScriptedServer::start([Reply::text("ok")]);
    let sb = Sandbox::new(&agent_yaml(
        "  - name: ls\n    description: List a folder.\n    exec: \"ls ${dir}\"\n    parameters:\n      - name: dir\n        description: The folder to list.\n",
    ));
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 0);
    let tool = &bodies(&server)[0]["tools"][0]["function"];
    assert_eq!(tool["description"], "List a folder.");
    assert_eq!(
        tool["parameters"],
        json!({"type": "object", "properties": {"dir": {"type": "string", "description": "The folder to list."}}, "required": ["dir"]})
    );
}

#[test]
fn sampling_settings_come_from_agent_yaml() {
    let server = ScriptedServer::start([Reply::text("ok")]);
    let sb = Sandbox::new(
        "name: a\nllm:\n  model: m1\n  temperature: 0.2\n  max_tokens: 99\ntools: []\n",
    );
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 0);
    let body = &bodies(&server)[0];
    assert_eq!(
        (
            body["model"].clone(),
            body["temperature"].clone(),
            body["max_tokens"].clone()
        ),
        (json!("m1"), json!(0.2), json!(99))
    );
}

#[test]
fn io_records_hold_the_real_response_and_usage() {
    let server = ScriptedServer::start(golden_script());
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "Say hi", &[]).code, 0);
    let sent = bodies(&server);
    for (i, thought) in sb.events("THOUGHT").iter().enumerate() {
        let record = crate::support::invocation(
            &sb.run_dir(),
            thought["payload"]["llm_invocation_ref"].as_str().unwrap(),
        );
        // Exactly what went over the wire, and exactly what came back.
        assert_eq!(record["request"], sent[i]);
        let meta = &record["metadata"];
        assert!(
            meta["token_usage"]["prompt"].as_u64().unwrap() > 0,
            "{meta}"
        );
        let response = &record["response"];
        assert_eq!(response["object"], "chat.completion", "{response}");
        assert!(
            response["id"]
                .as_str()
                .unwrap()
                .starts_with("chatcmpl-test-"),
            "{response}"
        );
    }
    for result in sb.events("ACTION_RESULT") {
        let record = crate::support::tool_record(
            &sb.run_dir(),
            result["payload"]["execution_ref"].as_str().unwrap(),
        );
        for field in ["command", "stdout", "stderr", "duration_ms"] {
            assert!(record.get(field).is_some(), "{field}: {record}");
        }
        assert_eq!(record["exit_code"], 0, "{record}");
    }
    assert!(
        std::fs::read_to_string(sb.run_dir().join("engine.log"))
            .unwrap()
            .contains("Engine completed successfully")
    );
}

fn scrub_result(sb: &Sandbox, stdout: &str) -> Value {
    let mut v: Value = serde_json::from_str(stdout).unwrap();
    v["metrics"]["duration_ms"] = json!("[duration]");
    serde_json::from_str(&sb.scrub(&v.to_string())).unwrap()
}

#[test]
fn json_format_prints_one_run_result() {
    let server = ScriptedServer::start(golden_script());
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = sb.run(Some(&server), "Say hi", &["--format", "json"]);
    assert_eq!(out.code, 0);
    assert_eq!(
        out.stdout.lines().count(),
        1,
        "one JSON object, nothing else on stdout"
    );
    insta::assert_json_snapshot!(scrub_result(&sb, &out.stdout));
}

#[test]
fn raw_format_prints_only_the_answer_and_text_a_summary() {
    let server = ScriptedServer::start([Reply::text("The answer is 42.")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = sb.run(Some(&server), "q", &["--format", "raw"]);
    assert_eq!(out.stdout, "The answer is 42.\n");
    let server = ScriptedServer::start([Reply::text("The answer is 42.")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = sb.run(Some(&server), "q", &[]);
    let text = out.stdout.replace(
        &sb.metadata()["run_id"].as_str().unwrap().to_string(),
        "[RUN]",
    );
    let text: String = text
        .lines()
        .map(|l| {
            if l.contains("Duration") {
                "  • Duration: [d]"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!(text);
}

#[test]
fn the_iteration_limit_completes_with_a_warning() {
    let server = ScriptedServer::start(
        (0..3).map(|i| Reply::tool_call(&format!("c{i}"), "echo", json!({"message": "again"}))),
    );
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = sb.run(
        Some(&server),
        "loop",
        &["--max-iterations", "2", "--format", "raw"],
    );
    assert_eq!(out.code, 0);
    assert_eq!(out.stdout, "", "no final answer: raw prints nothing");
    assert!(
        out.stderr.contains("Maximum iterations (2) reached"),
        "{}",
        out.stderr
    );
    let warn = sb.events("SYSTEM_MESSAGE");
    assert_eq!(
        warn.last().unwrap()["payload"],
        json!({"level": "WARN", "content": "Maximum iterations (2) reached"})
    );
    assert_eq!(sb.metadata()["iterations_completed"], 2);
    assert_eq!(server.request_count(), 2);
}

#[test]
fn unknown_tools_and_bad_arguments_are_results_the_model_sees() {
    let bad_args = r#"{"choices":[{"message":{"content":null,"tool_calls":[{"id":"c2","type":"function","function":{"name":"echo","arguments":"{\"message\": oops"}}]},"finish_reason":"tool_calls"}]}"#;
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "no_such_tool", json!({})),
        Reply::raw(200, "application/json", bad_args),
        Reply::tool_call("c3", "echo", json!({})),
        Reply::text("gave up"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = sb.run(Some(&server), "try", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let results: Vec<Value> = sb
        .events("ACTION_RESULT")
        .into_iter()
        .map(|e| e["payload"].clone())
        .collect();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["status"], "ERROR");
    assert_eq!(
        results[0]["observation_content"],
        "Error: Tool not found: no_such_tool. Available tools: echo, write_to_file, ask_human"
    );
    assert_eq!(results[1]["status"], "ERROR");
    assert!(
        results[1]["observation_content"]
            .as_str()
            .unwrap()
            .contains("not valid JSON"),
        "{}",
        results[1]
    );
    assert_eq!(
        results[2]["observation_content"],
        "Error: echo: missing argument(s): message"
    );
    assert!(out.stderr.contains("Tool not found: no_such_tool"));
    // The model saw them as tool results.
    let last = bodies(&server).pop().unwrap();
    let tool_messages = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .count();
    assert_eq!(tool_messages, 3);
}

#[test]
fn y_creates_numbered_workspaces_and_remembers_the_last() {
    let server = ScriptedServer::start([Reply::text("one"), Reply::text("two")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    for _ in 0..2 {
        let mut cmd = sb.delta(Some(&server));
        cmd.args(["run", "--agent", "agent", "-m", "x", "-y"]);
        assert_eq!(crate::support::output(cmd).code, 0);
    }
    let root = sb.agent().join("workspaces");
    assert!(root.join("W001/.delta/LATEST").is_file());
    assert!(root.join("W002/.delta/LATEST").is_file());
    assert_eq!(
        std::fs::read_to_string(root.join("LAST_USED")).unwrap(),
        "W002"
    );
}

#[test]
fn a_recorded_run_replays_offline_to_the_same_journal() {
    let server = ScriptedServer::start(golden_script());
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = sb.run(Some(&server), "Say hi", &["--record", "rec"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let recorded = sb.journal();
    assert!(sb.path("rec/turn-1.json").is_file() && sb.path("rec/turn-2.json").is_file());
    sb.assert_nowhere(KEY);

    std::fs::remove_dir_all(sb.ws()).unwrap();
    let out = sb.run(None, "Say hi", &["--playback", "rec"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        sb.journal(),
        recorded,
        "same clock and seed: the replay is identical"
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("out.txt")).unwrap(),
        "hello file"
    );
}

#[test]
fn playback_that_runs_out_fails_with_a_clear_message() {
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    std::fs::create_dir_all(sb.path("empty")).unwrap();
    let out = sb.run(None, "hi", &["--playback", "empty"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("no recording matches this request"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("requested: tools [ask_human, echo, write_to_file], 1 message"),
        "{}",
        out.stderr
    );
    assert_eq!(sb.metadata()["status"], "FAILED");
}
