//! `delta mcp`: delta's runs over MCP, driven by the workspace's MCP client against the real binary
//! and by the official clients (the Python SDK, the MCP Inspector's CLI), with a scripted model.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use crate::support::{ECHO_AND_WRITE, Sandbox, agent_yaml, output};

/// The model asks a question, then answers with the colour it was told.
fn question_then_answer() -> Vec<Reply> {
    vec![
        Reply::tool_calls([
            ToolCallSpec::new("c1", "echo", json!({"message": "before"})),
            ToolCallSpec::new(
                "c2",
                "ask_human",
                json!({"prompt": "What is your favourite colour?"}),
            ),
        ]),
        Reply::text("Your favourite colour is blue."),
    ]
}

/// `delta mcp` in the sandbox, reached by the workspace's client.
fn client(sb: &Sandbox, server: &ScriptedServer) -> mcp::Client {
    client_with(sb, server, &[])
}

/// `delta mcp EXTRA…` in the sandbox, reached by the workspace's client.
fn client_with(sb: &Sandbox, server: &ScriptedServer, extra: &[&str]) -> mcp::Client {
    let mut cmd = sb.delta(Some(server));
    cmd.arg("mcp")
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let options = mcp::Options {
        timeout: Duration::from_secs(60),
        client: mcp::ClientInfo {
            name: "test".into(),
            version: "1".into(),
        },
    };
    mcp::Client::stdio(cmd.spawn().unwrap(), options).unwrap()
}

fn args(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

/// A call that must succeed: its structured content.
fn done(c: &mut mcp::Client, tool: &str, arguments: Value) -> Value {
    let result = c.call_tool(tool, args(arguments.clone()), None).unwrap();
    assert!(!result.is_error, "{tool} {arguments}: {:?}", result.raw);
    result.raw["structuredContent"].clone()
}

/// The object `delta CMD ARGS --format json` prints in the sandbox.
fn cli_json(sb: &Sandbox, command: &[&str]) -> Value {
    let mut cmd = sb.delta(None);
    cmd.args(command).args(["--format", "json"]);
    let out = output(cmd);
    serde_json::from_str(&out.stdout).unwrap()
}

#[test]
fn an_mcp_client_runs_an_agent_answers_its_question_and_reads_its_runs() {
    let server = ScriptedServer::start(question_then_answer());
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let mut c = client(&sb, &server);
    let tools: Vec<String> = c
        .list_tools()
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(tools, ["run", "continue", "list_runs", "show"]);

    let waiting = done(
        &mut c,
        "run",
        json!({"agent": "agent", "workspace": "ws", "message": "ask me"}),
    );
    assert_eq!(waiting["status"], "WAITING_FOR_INPUT", "{waiting}");
    assert_eq!(
        waiting["interaction"]["prompt"],
        "What is your favourite colour?"
    );
    let run_id = waiting["run_id"].as_str().unwrap().to_string();

    let finished = done(
        &mut c,
        "continue",
        json!({"workspace": "ws", "message": "Blue"}),
    );
    assert_eq!(finished["status"], "COMPLETED", "{finished}");
    assert_eq!(finished["result"], "Your favourite colour is blue.");
    assert_eq!(finished["run_id"], run_id.as_str());
    // The answer reached the model as the question's result.
    let last = server.requests().last().unwrap().json();
    assert!(last.to_string().contains("Blue"), "{last}");

    // The same objects as the command line's.
    let listed = done(&mut c, "list_runs", json!({"workspace": "ws"}));
    assert_eq!(listed["runs"], cli_json(&sb, &["list-runs", "-w", "ws"]));
    let shown = done(&mut c, "show", json!({"workspace": "ws"}));
    assert_eq!(shown, cli_json(&sb, &["show", "-w", "ws"]));

    // Mistakes are results the caller's model reads.
    for (tool, arguments) in [
        ("run", json!({"agent": "../agent", "message": "x"})),
        ("run", json!({"agent": "/etc", "message": "x"})),
        ("run", json!({"agent": "agent"})),
        ("run", json!({"agent": "missing", "message": "x"})),
        ("continue", json!({"workspace": "empty"})),
        ("show", json!({"workspace": "ws", "run_id": "../x"})),
        ("list_runs", json!({})),
    ] {
        let failed = c.call_tool(tool, args(arguments.clone()), None).unwrap();
        assert!(failed.is_error, "{tool} {arguments}: {:?}", failed.raw);
    }
    c.close();
}

#[test]
fn a_cancelled_call_interrupts_its_run_and_continue_resumes_it() {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "slow", json!({})),
        Reply::text("done after all"),
    ]);
    let sb = Sandbox::new(&agent_yaml("  - name: slow\n    exec: \"sleep 30\"\n"));
    let mut c = client(&sb, &server);
    let started = Instant::now();
    let cancelled = c.call_tool(
        "run",
        args(json!({"agent": "agent", "workspace": "ws", "message": "be slow"})),
        Some(Duration::from_secs(2)),
    );
    assert!(
        matches!(cancelled, Err(mcp::McpError::Timeout { .. })),
        "{cancelled:?}"
    );
    // The run stops at the cancellation (its tool killed), journaled as interrupted.
    let deadline = Instant::now() + Duration::from_secs(15);
    while sb.metadata()["status"] != "INTERRUPTED" {
        assert!(Instant::now() < deadline, "{}", sb.metadata());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(started.elapsed() < Duration::from_secs(20));
    let left: Vec<_> = crate::support::processes_under(sb.root.path())
        .into_iter()
        .filter(|(_, command)| !command.contains("delta mcp"))
        .collect();
    assert!(left.is_empty(), "the tool was left running: {left:?}");

    // The next call resumes it: the interrupted tool runs again, the model answers.
    std::fs::write(
        sb.agent().join("agent.yaml"),
        agent_yaml("  - name: slow\n    exec: \"echo quick\"\n"),
    )
    .unwrap();
    // The cancelled call lets go of the run's locks once it has journaled the interruption: until
    // then a continue is answered busy, as the command line's is.
    let deadline = Instant::now() + Duration::from_secs(10);
    let resumed = loop {
        let result = c
            .call_tool("continue", args(json!({"workspace": "ws"})), None)
            .unwrap();
        if !result.is_error {
            break result.raw["structuredContent"].clone();
        }
        let text = result.text();
        assert!(text.contains("currently executing"), "{text}");
        assert!(
            Instant::now() < deadline,
            "the cancelled run kept its locks: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(resumed["status"], "COMPLETED", "{resumed}");
    assert_eq!(resumed["result"], "done after all");
    c.close();
}

/// `delta mcp` (and `extra`) in the sandbox, its model the scripted server.
fn server_command(sb: &Sandbox, server: &ScriptedServer, extra: &[&str]) -> Command {
    let mut cmd = sb.delta(Some(server));
    cmd.arg("mcp").args(extra);
    cmd
}

#[test]
fn the_python_sdk_runs_an_agent_through_its_question_with_progress() {
    let Some(servers) = testkit::needs::mcp_servers() else {
        return;
    };
    let server = ScriptedServer::start(question_then_answer());
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let script = json!([
        {"tool": "run", "arguments": {"agent": "agent", "workspace": "ws", "message": "ask me"}, "progress": true},
        {"tool": "continue", "arguments": {"workspace": "ws", "message": "Blue"}, "progress": true},
        {"tool": "show", "arguments": {"workspace": "ws"}},
    ]);
    let seen = servers
        .python_stdio(&server_command(&sb, &server, &[]), &script)
        .json();
    assert_eq!(
        seen["tools"],
        json!(["run", "continue", "list_runs", "show"])
    );
    assert_question_answered(&sb, &seen);

    // The same over streamable HTTP (progress arrives as an event stream).
    let server = ScriptedServer::start(question_then_answer());
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let (mut endpoint, url) = testkit::mcp_clients::http_endpoint(server_command(
        &sb,
        &server,
        &["--http", "127.0.0.1:0"],
    ));
    let seen = servers.python_http(&url, &script).json();
    endpoint.kill().unwrap();
    endpoint.wait().unwrap();
    assert_question_answered(&sb, &seen);
}

/// The script's run asked its question (reported as progress), and the answer completed it.
fn assert_question_answered(sb: &Sandbox, seen: &Value) {
    let steps = seen["steps"].as_array().unwrap();
    let waiting = &steps[0]["result"];
    assert_eq!(waiting["status"], "WAITING_FOR_INPUT", "{waiting}");
    assert_eq!(
        waiting["interaction"]["prompt"],
        "What is your favourite colour?"
    );
    let messages: Vec<&str> = steps[0]["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["message"].as_str().unwrap())
        .collect();
    assert!(messages.contains(&"calling echo"), "{messages:?}");
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("waiting for an answer")),
        "{messages:?}"
    );
    assert_eq!(steps[1]["result"]["status"], "COMPLETED", "{}", steps[1]);
    assert_eq!(steps[2]["result"], cli_json(sb, &["show", "-w", "ws"]));
}

#[test]
fn the_inspector_checks_the_tool_schemas_and_drives_a_run_through_its_question() {
    let Some(servers) = testkit::needs::mcp_servers() else {
        return;
    };
    let server = ScriptedServer::start(question_then_answer());
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let command = server_command(&sb, &server, &[]);
    let listed = servers
        .inspect(
            &command,
            &["--method", "tools/list", "--strict", "--format", "json"],
        )
        .json();
    assert_eq!(
        listed["result"]["tools"].as_array().unwrap().len(),
        4,
        "{listed}"
    );
    let call = |tool: &str, arguments: Value| servers.inspect_call(&command, tool, &arguments);
    let waiting = call(
        "run",
        json!({"agent": "agent", "workspace": "ws", "message": "ask me"}),
    );
    assert_eq!(waiting["status"], "WAITING_FOR_INPUT", "{waiting}");
    let finished = call("continue", json!({"workspace": "ws", "message": "Blue"}));
    assert_eq!(finished["status"], "COMPLETED", "{finished}");
    assert_eq!(finished["result"], "Your favourite colour is blue.");
}

#[test]
fn with_a_store_run_queues_workers_run_and_continue_answers_here() {
    let server = ScriptedServer::start(question_then_answer());
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let url = format!("file://{}", sb.path("store").display());
    std::fs::create_dir_all(sb.path("store")).unwrap();
    let mut c = client_with(&sb, &server, &["--store", &url]);
    // The tools say what they take in a store: runs are named by run_id.
    let show = c
        .list_tools()
        .unwrap()
        .into_iter()
        .find(|t| t.name == "show")
        .unwrap();
    assert_eq!(show.input_schema["required"], json!(["run_id"]));
    let queued = done(
        &mut c,
        "run",
        json!({"agent": "agent", "message": "ask me"}),
    );
    assert_eq!(queued["status"], "QUEUED", "{queued}");
    let run_id = queued["run_id"].as_str().unwrap().to_string();

    // A worker of the store runs it until it asks.
    let mut worker = sb.delta(Some(&server));
    worker.args(["worker", "--store", &url, "--exit-when-done"]);
    let out = output(worker);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let listed = done(&mut c, "list_runs", json!({}));
    assert_eq!(listed["runs"][0]["run_id"], run_id.as_str(), "{listed}");
    assert_eq!(listed["runs"][0]["status"], "WAITING_FOR_INPUT", "{listed}");

    // The answer is given here; the run completes in a working copy and the store keeps it.
    let finished = done(
        &mut c,
        "continue",
        json!({"run_id": run_id, "message": "Blue"}),
    );
    assert_eq!(finished["status"], "COMPLETED", "{finished}");
    let shown = done(&mut c, "show", json!({"run_id": run_id}));
    assert_eq!(shown["status"], "COMPLETED", "{shown}");
    // The same transcript as show --store (each read from its own scratch copy: records aside).
    let without_records = |mut v: Value| {
        for entry in v["entries"].as_array_mut().unwrap() {
            entry.as_object_mut().unwrap().remove("record");
        }
        v
    };
    assert_eq!(
        without_records(shown),
        without_records(cli_json(
            &sb,
            &["show", "--store", &url, "--run-id", &run_id]
        ))
    );
    for (tool, arguments) in [("show", json!({})), ("continue", json!({}))] {
        let failed = c.call_tool(tool, args(arguments.clone()), None).unwrap();
        assert!(failed.is_error, "{tool}: {:?}", failed.raw);
    }
    c.close();
}
