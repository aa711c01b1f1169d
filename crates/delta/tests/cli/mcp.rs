//! MCP servers as tools: the reference server (`@modelcontextprotocol/server-everything`, stdio) and
//! a server written with the official Python SDK (stdio and streamable HTTP), installed by
//! `scripts/install-mcp-servers`; the model played by a scripted server.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer};

use crate::support::{
    Output, Sandbox, assert_no_process_under, interrupt, output, processes_under,
    run_in_background_until,
};

/// The Python SDK test server of the `mcp` crate.
fn py_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcp/tests/servers/py_server.py")
}

/// agent.yaml with these `mcp_servers:` entries (YAML list items, indented by two spaces) and a
/// shell tool `wait` that marks the workspace and sleeps.
fn agent_with(servers: &str) -> String {
    format!(
        "name: mcp-agent\nllm:\n  model: test-model\ntools:\n  - name: wait\n    shell: \"touch waiting; sleep 30\"\nmcp_servers:\n{servers}"
    )
}

fn python_stdio(python: &Path, extra: &str) -> String {
    format!(
        "  - name: py\n    command: {}\n    args: [\"{}\", \"stdio\"]\n{extra}",
        python.display(),
        py_server().display()
    )
}

fn results(sb: &Sandbox) -> Vec<Value> {
    sb.events("ACTION_RESULT")
        .iter()
        .map(|e| e["payload"].clone())
        .collect()
}

/// The Python server over streamable HTTP on a free port, killed when dropped.
struct HttpServer(Child, u16);

impl HttpServer {
    fn start(python: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(python)
            .arg(py_server())
            .args(["http", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the HTTP server never listened"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self(child, port)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_agent_calls_the_reference_server_over_stdio_and_a_python_server_over_http() {
    let Some(servers) = testkit::needs::mcp_servers() else {
        return;
    };
    let http = HttpServer::start(&servers.python);
    let yaml = agent_with(&format!(
        "  - name: everything\n    command: node\n    args: [\"{}\", \"stdio\"]\n  - name: web\n    url: http://127.0.0.1:{}/mcp\n    headers: {{X-Test: plain}}\n",
        servers.everything.display(),
        http.1
    ));
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "everything__echo", json!({"message": "hello mcp"})),
        Reply::tool_call("c2", "web__add", json!({"a": 2, "b": 40})),
        Reply::tool_call("c3", "everything__get-tiny-image", json!({})),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(&yaml);
    let out = sb.run(Some(&server), "use the servers", &[]);
    assert_eq!(out.code, 0, "{out:?}");

    let requests = server.requests();
    let tools = requests[0].json()["tools"].as_array().unwrap().clone();
    let echo = tools
        .iter()
        .find(|t| t["function"]["name"] == "everything__echo")
        .expect("the model is offered everything__echo");
    assert_eq!(
        echo["function"]["description"],
        "Echoes back the input string"
    );
    assert_eq!(
        echo["function"]["parameters"]["properties"]["message"]["type"],
        "string"
    );
    let add = tools
        .iter()
        .find(|t| t["function"]["name"] == "web__add")
        .unwrap();
    assert_eq!(add["function"]["parameters"]["required"], json!(["a", "b"]));

    // Each result reaches the next request.
    let last_tool_message = |n: usize| {
        let messages = requests[n].json()["messages"].as_array().unwrap().clone();
        messages.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(last_tool_message(1), "Echo: hello mcp");
    assert_eq!(last_tool_message(2), "42");
    assert!(
        last_tool_message(3).contains("[image: image/png"),
        "{}",
        last_tool_message(3)
    );

    let request = &sb.events("ACTION_REQUEST")[0]["payload"];
    assert_eq!(
        request["resolved_command"],
        r#"everything__echo {"message":"hello mcp"}"#
    );
    let result = &results(&sb)[0];
    assert_eq!(result["status"], "SUCCESS");
    let record =
        crate::support::tool_record(&sb.run_dir(), result["execution_ref"].as_str().unwrap());
    let raw = &record["result"];
    assert_eq!(raw["content"][0]["text"], "Echo: hello mcp");
    assert_eq!(
        record["request"]["arguments"]["message"], "hello mcp",
        "{record}"
    );
    assert!(
        !sb.run_dir().join("mcp_servers.json").exists(),
        "stopped servers leave no record"
    );
    assert_no_process_under(&sb.ws());
}

#[test]
fn a_crashing_server_is_a_tool_error_and_is_started_again_for_the_next_call() {
    let Some(servers) = testkit::needs::mcp_servers() else {
        return;
    };
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "py__fail", json!({})),
        Reply::tool_call("c2", "py__crash", json!({})),
        Reply::tool_call("c3", "py__add", json!({"a": 1, "b": 1})),
        Reply::tool_call("c4", "py__grow", json!({})),
        Reply::tool_call("c5", "py__late", json!({})),
        Reply::text("survived"),
    ]);
    let sb = Sandbox::new(&agent_with(&python_stdio(&servers.python, "")));
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let seen = results(&sb);
    assert_eq!(
        seen[0]["status"], "FAILED",
        "isError is a failure the model sees"
    );
    assert!(
        seen[0]["observation_content"]
            .as_str()
            .unwrap()
            .contains("this tool always fails")
    );
    assert_eq!(seen[1]["status"], "ERROR");
    let crash = seen[1]["observation_content"].as_str().unwrap();
    assert!(
        crash.contains("closed") && crash.contains("started again"),
        "{crash}"
    );
    assert_eq!(
        seen[2]["observation_content"], "2",
        "the server was started again"
    );
    // tools/list_changed: the tool added at runtime is offered and called.
    let offered: Vec<String> = server.requests()[4].json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(offered.contains(&"py__late".to_string()), "{offered:?}");
    assert_eq!(seen[4]["observation_content"], "late");
    assert_no_process_under(&sb.ws());
}

#[test]
fn a_sigkilled_run_is_continued_with_its_servers_started_again_and_none_left() {
    let Some(servers) = testkit::needs::mcp_servers() else {
        return;
    };
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "py__add", json!({"a": 20, "b": 1})),
        Reply::tool_call("c2", "wait", json!({})),
    ]);
    let sb = Sandbox::new(&agent_with(&python_stdio(&servers.python, "")));
    let marker = sb.ws().join("waiting");
    let mut child = run_in_background_until(&sb, &server, "the wait", || marker.exists());
    assert!(
        sb.run_dir().join("mcp_servers.json").is_file(),
        "the running server is recorded"
    );
    child.kill().unwrap();
    child.wait().unwrap();

    server.push(Reply::tool_call("c3", "py__add", json!({"a": 40, "b": 2})));
    server.push(Reply::text("recovered"));
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws"]);
    let out: Output = output(cmd);
    assert_eq!(out.code, 0, "{out:?}");
    let seen = results(&sb);
    assert_eq!(seen[0]["observation_content"], "21");
    assert_eq!(
        seen.last().unwrap()["observation_content"],
        "42",
        "{seen:?}"
    );
    assert_no_process_under(&sb.ws());
    assert!(processes_under(&sb.root.path().join("agent")).is_empty());
}

#[test]
fn a_key_in_a_servers_env_never_reaches_the_run_folder() {
    let Some(servers) = testkit::needs::mcp_servers() else {
        return;
    };
    let secret = "mcp-secret-value-6c1e93";
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "py__getenv", json!({"name": "SECRET_TOKEN"})),
        Reply::text("done"),
    ]);
    let yaml = agent_with(&python_stdio(
        &servers.python,
        "    env: {SECRET_TOKEN: \"${MY_MCP_TOKEN}\"}\n",
    ));
    let sb = Sandbox::new(&yaml);
    let mut cmd = sb.delta(Some(&server));
    cmd.args([
        "run", "--agent", "agent", "-w", "ws", "-m", "go", "--format", "json",
    ])
    .env("MY_MCP_TOKEN", secret);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(results(&sb)[0]["observation_content"], "[REDACTED]");
    let log = std::fs::read_to_string(sb.run_dir().join("io/mcp/py.stderr.log")).unwrap();
    assert!(log.contains("getenv SECRET_TOKEN=[REDACTED]"), "{log}");
    sb.assert_nowhere(secret);
    assert!(!out.stdout.contains(secret) && !out.stderr.contains(secret));

    // Unset, the variable is named and the run fails before anything is asked.
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"]);
    let out = output(cmd);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains("env.SECRET_TOKEN uses ${MY_MCP_TOKEN}, which is not set"),
        "{}",
        out.stderr
    );
}

/// `delta tools -a agent --format json`: the names it lists, and its output.
fn offered(sb: &Sandbox) -> (Vec<String>, Output) {
    let mut cmd = sb.delta(None);
    cmd.args(["tools", "-a", "agent", "--format", "json"]);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{out:?}");
    let tools: Value = serde_json::from_str(&out.stdout).unwrap();
    let names = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    (names, out)
}

#[test]
fn delta_tools_lists_what_the_model_sees_mcp_tools_included() {
    let Some(servers) = testkit::needs::mcp_servers() else {
        return;
    };
    let sb = Sandbox::new(&agent_with(&python_stdio(&servers.python, "")));
    let (names, _) = offered(&sb);
    assert_eq!(names.first().map(String::as_str), Some("wait"));
    assert!(
        names.iter().any(|n| n == "py__add") && names.iter().any(|n| n == "py__getenv"),
        "{names:?}"
    );
    assert_eq!(names.last().map(String::as_str), Some("ask_human"));
    let mut cmd = sb.delta(None);
    cmd.args(["tools", "-a", "agent"]);
    let text = output(cmd);
    assert!(
        text.stdout
            .contains("py__add(a, b)\n    Adds two integers."),
        "{}",
        text.stdout
    );
    assert!(processes_under(sb.root.path()).is_empty());
}

#[test]
fn an_interrupt_cancels_an_mcp_call_in_progress() {
    let Some(python) = testkit::needs::python3() else {
        return;
    };
    let scripted = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcp/tests/servers/scripted.py");
    let yaml = agent_with(&format!(
        "  - name: slow\n    command: {}\n    args: [\"{}\"]\n    timeout_seconds: 120\n",
        python.display(),
        scripted.display()
    ));
    let server = ScriptedServer::start([Reply::tool_call("c1", "slow__hang", json!({}))]);
    let sb = Sandbox::new(&yaml);
    let requested = || {
        let latest = std::fs::read_to_string(sb.ws().join(".delta/LATEST")).unwrap_or_default();
        let journal = sb
            .ws()
            .join(".delta")
            .join(latest.trim())
            .join("journal.jsonl");
        std::fs::read_to_string(journal).is_ok_and(|j| j.contains("ACTION_REQUEST"))
    };
    let mut child = run_in_background_until(&sb, &server, "the call", requested);
    std::thread::sleep(Duration::from_millis(200));
    let (code, took) = interrupt(&mut child);
    assert_eq!(code, Some(130));
    assert!(took < Duration::from_secs(5), "{took:?}");
    let result = &results(&sb)[0];
    assert!(
        result["observation_content"]
            .as_str()
            .unwrap()
            .contains("cancelled"),
        "{result}"
    );
    assert_no_process_under(&sb.ws());
}

/// A stdio MCP server (Python's standard library) whose tools are named on its command line; each
/// answers with its own name.
const NAMED_TOOLS_SERVER: &str = r#"
import json, sys
names = sys.argv[1:]
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "t", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in names]}
    else:
        r = {"content": [{"type": "text", "text": m["params"]["name"]}]}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"#;

#[test]
fn tools_a_model_would_refuse_or_that_repeat_a_name_are_left_out_and_said() {
    let Some(python) = testkit::needs::python3() else {
        return;
    };
    let sb = Sandbox::new("name: a\ntools: []\n");
    let script = sb.file("server.py", NAMED_TOOLS_SERVER);
    let server = |name: &str, tools: &str| {
        format!(
            "  - name: {name}\n    command: {}\n    args: [\"{}\", {tools}]\n",
            python.display(),
            script.display()
        )
    };
    let yaml = format!(
        "name: a\nllm:\n  model: m\ntools: []\nmcp_servers:\n{}{}",
        server("a", "\"_x\", \"ok\", \"ok\", \"bad.name\""),
        server("a_", "\"x\"")
    );
    sb.file("agent/agent.yaml", &yaml);
    let (names, out) = offered(&sb);
    assert_eq!(names, ["a___x", "a__ok", "ask_human"]);
    assert!(
        out.stderr.contains("not ones a model accepts") && out.stderr.contains("a/bad.name"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("another tool has the same name: a__ok, a___x"),
        "{}",
        out.stderr
    );

    // A run says so too, on stderr.
    let model = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&model), "go", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("another tool has the same name"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_servers_secret_is_scrubbed_from_recordings_too() {
    let Some(python) = testkit::needs::python3() else {
        return;
    };
    let secret = "rec-secret-value-42a7f0";
    let sb = Sandbox::new("name: a\ntools: []\n");
    let script = sb.file("server.py", NAMED_TOOLS_SERVER);
    sb.file(
        "agent/agent.yaml",
        &format!(
            "name: a\nllm:\n  model: m\ntools: []\nmcp_servers:\n  - name: s\n    command: {}\n    args: [\"{}\", \"echo\"]\n    env: {{TOKEN: \"${{MCP_TOKEN}}\"}}\n",
            python.display(),
            script.display()
        ),
    );
    let model = ScriptedServer::start([
        Reply::tool_call("c1", "s__echo", json!({"value": secret})),
        Reply::text(&format!("the token is {secret}")),
    ]);
    let mut cmd = sb.delta(Some(&model));
    cmd.args([
        "run", "--agent", "agent", "-w", "ws", "-m", "go", "--record", "rec",
    ])
    .env("MCP_TOKEN", secret);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{out:?}");
    sb.assert_nowhere(secret);
    assert!(!out.stdout.contains(secret) && !out.stderr.contains(secret));
}

/// A stdio MCP server (Python's standard library) whose tool `peek` writes the value of its `TOKEN`
/// variable and its first argument into its description, title and schema, and whose other tool is
/// named after that value.
const LEAKING_SERVER: &str = r#"
import json, os, sys
leak = os.environ["TOKEN"] + " " + sys.argv[1]
tool = {"name": "peek", "title": "Peek " + leak, "description": "Knows " + leak,
        "inputSchema": {"type": "object", "properties": {leak: {"type": "string", "description": leak}}}}
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "t", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [tool, {"name": os.environ["TOKEN"], "inputSchema": {"type": "object"}}]}
    else:
        r = {"content": [{"type": "text", "text": "ok"}]}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"#;

#[test]
fn secrets_in_a_servers_tool_descriptions_never_reach_the_model() {
    let Some(python) = testkit::needs::python3() else {
        return;
    };
    let secret = "desc-secret-value-93be1d";
    let sb = Sandbox::new("name: a\ntools: []\n");
    let script = sb.file("server.py", LEAKING_SERVER);
    sb.file(
        "agent/agent.yaml",
        &format!(
            "name: a\nllm:\n  model: m\ntools: []\nmcp_servers:\n  - name: s\n    command: {}\n    args: [\"{}\", \"{}\"]\n    env: {{TOKEN: \"${{MCP_TOKEN}}\"}}\n",
            python.display(),
            script.display(),
            crate::support::KEY,
        ),
    );
    let model = ScriptedServer::start([Reply::text("done")]);
    let mut cmd = sb.delta(Some(&model));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"])
        .env("MCP_TOKEN", secret);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{out:?}");
    let request = model.requests()[0].json();
    let peek = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "s__peek")
        .expect("the model is offered s__peek")
        .clone();
    assert_eq!(
        peek["function"]["description"], "Knows [REDACTED] [REDACTED]",
        "{peek}"
    );
    let text = request.to_string();
    assert!(
        !text.contains(secret) && !text.contains(crate::support::KEY),
        "{text}"
    );
    assert!(
        out.stderr.contains("or hold a secret: s/[REDACTED]"),
        "{}",
        out.stderr
    );
    sb.assert_nowhere(secret);
    assert!(!out.stdout.contains(secret) && !out.stderr.contains(secret));

    // `delta tools` shows what the model sees.
    let mut cmd = sb.delta(None);
    cmd.args(["tools", "-a", "agent", "--format", "json"])
        .env("MCP_TOKEN", secret);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("Knows [REDACTED]") && !out.stdout.contains(secret),
        "{}",
        out.stdout
    );
}

/// A stdio MCP server (Python's standard library) with one tool that does not end when its
/// standard input closes: it stays until it is stopped.
const LINGERING_SERVER: &str = r#"
import json, sys, time
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "t", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "noop", "inputSchema": {"type": "object"}}]}
    else:
        r = {"content": [{"type": "text", "text": "ok"}]}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
time.sleep(300)
"#;

#[test]
fn removing_a_run_left_waiting_stops_its_mcp_servers_and_sessions() {
    let Some(python) = testkit::needs::python3() else {
        return;
    };
    let sb = Sandbox::new("name: a\ntools: []\n");
    let script = sb.file("server.py", LINGERING_SERVER);
    sb.file(
        "agent/agent.yaml",
        &format!(
            "name: a\nllm:\n  model: m\nsessions: true\ntools: []\nlifecycle_hooks:\n  on_run_end:\n    command: [\"sh\", \"-c\", \"touch paused; sleep 30\"]\nmcp_servers:\n  - name: s\n    command: {}\n    args: [\"{}\"]\n",
            python.display(),
            script.display()
        ),
    );
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "session_start", json!({"id": "w"})),
        Reply::tool_call("c2", "ask_human", json!({"prompt": "Go on?"})),
    ]);
    // Killed while it pauses for the answer: what it started outlives it.
    let marker = sb.ws().join("paused");
    let mut child = run_in_background_until(&sb, &server, "the pause", || marker.exists());
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(sb.metadata()["status"], "WAITING_FOR_INPUT");
    assert!(sb.run_dir().join("mcp_servers.json").is_file());
    let running = |needle: &std::path::Path| {
        processes_under(sb.root.path())
            .iter()
            .any(|(_, line)| line.contains(&*needle.to_string_lossy()))
    };
    assert!(running(&script), "{:?}", processes_under(sb.root.path()));
    assert!(running(&sb.ws().join(".sessions/w")));

    let run_id = sb.metadata()["run_id"].as_str().unwrap().to_string();
    let mut cmd = sb.delta(None);
    cmd.args(["rm", "-w", "ws", "--run-id", &run_id]);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{out:?}");
    assert_no_process_under(sb.root.path());
}

/// The misbehaving stdio server of the `mcp` crate's tests, as an `mcp_servers:` entry named
/// `name` in `mode` (`unruly.py` says which there are), with these `timeout_seconds`.
fn unruly(python: &Path, name: &str, mode: &str, timeout: u32) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcp/tests/servers/unruly.py");
    format!(
        "  - name: {name}\n    command: {}\n    args: [\"{}\", {mode}]\n    timeout_seconds: {timeout}\n",
        python.display(),
        script.display()
    )
}

/// The line delta writes once where it stops copying a server's standard error.
const STDERR_CUT: &str =
    "[delta: the server's standard error was cut here; the rest was read and dropped]\n";

#[test]
fn a_servers_standard_error_is_logged_up_to_64_mib_and_the_rest_read_and_dropped() {
    let Some(python) = testkit::needs::python3() else {
        return;
    };
    // "first line", 60 MiB of 1 KiB lines, a line of 10 MiB that does not fit, one more line: all
    // before the server answers initialize, so that it blocks unless every byte is read.
    let noisy = unruly(&python, "noisy", "\"stderr-flood\", \"60\"", 60);
    let sb = Sandbox::new(&agent_with(&noisy));
    let model = ScriptedServer::start([
        Reply::tool_call("c1", "noisy__echo", json!({})),
        Reply::text("done"),
    ]);
    let out = sb.run(Some(&model), "go", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(results(&sb)[0]["observation_content"], "ok");
    let log = std::fs::read(sb.run_dir().join("io/mcp/noisy.stderr.log")).unwrap();
    let kept = "first line\n".len() + 60 * 1024 * 1024;
    assert_eq!(
        log.len(),
        kept + STDERR_CUT.len(),
        "whole lines up to the cap, then the notice"
    );
    assert!(log.starts_with(b"first line\nlll"));
    assert!(log.ends_with(STDERR_CUT.as_bytes()));
    let tail = String::from_utf8_lossy(&log[log.len() - 4096..]);
    assert_eq!(tail.matches("[delta:").count(), 1, "{tail}");
    assert!(!tail.contains("www") && !tail.contains("after the flood"));
}

/// `delta run` against `model` in the background, returned once the model's call is in the journal.
fn run_until_the_call(sb: &Sandbox, model: &ScriptedServer) -> Child {
    let requested = || {
        let latest = std::fs::read_to_string(sb.ws().join(".delta/LATEST")).unwrap_or_default();
        let journal = sb
            .ws()
            .join(".delta")
            .join(latest.trim())
            .join("journal.jsonl");
        std::fs::read_to_string(journal).is_ok_and(|j| j.contains("ACTION_REQUEST"))
    };
    run_in_background_until(sb, model, "the call", requested)
}

/// Waits up to `limit` for `child` to exit (killing it and failing the test past that): its exit
/// code and how long it took.
fn exit_within(child: &mut Child, limit: Duration) -> (Option<i32>, Duration) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status.code(), start.elapsed());
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("delta still ran after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_server_that_floods_pings_and_reads_nothing_fails_the_call_at_its_timeout() {
    let Some(python) = testkit::needs::python3() else {
        return;
    };
    let sb = Sandbox::new(&agent_with(&unruly(&python, "flood", "\"ping-flood\"", 2)));
    let model = ScriptedServer::start([
        Reply::tool_call("c1", "flood__echo", json!({"text": "x".repeat(1 << 20)})),
        Reply::text("done"),
    ]);
    let mut child = run_until_the_call(&sb, &model);
    let (code, took) = exit_within(&mut child, Duration::from_secs(30));
    assert_eq!(code, Some(0));
    // Two seconds of timeout, one of grace for the server to exit, the rest of the run.
    assert!(took < Duration::from_secs(8), "{took:?}");
    let result = &results(&sb)[0];
    let said = result["observation_content"].as_str().unwrap();
    assert!(said.contains("no answer within 2s"), "{result}");
    assert_no_process_under(&sb.ws());
}

#[test]
fn an_interrupt_stops_a_call_to_a_server_that_floods_pings_and_reads_nothing() {
    let Some(python) = testkit::needs::python3() else {
        return;
    };
    let sb = Sandbox::new(&agent_with(&unruly(
        &python,
        "flood",
        "\"ping-flood\"",
        120,
    )));
    let model = ScriptedServer::start([Reply::tool_call(
        "c1",
        "flood__echo",
        json!({"text": "x".repeat(1 << 20)}),
    )]);
    let mut child = run_until_the_call(&sb, &model);
    std::thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let (code, _) = exit_within(&mut child, Duration::from_secs(30));
    assert_eq!(code, Some(130));
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "{:?}",
        sent.elapsed()
    );
    let result = &results(&sb)[0];
    assert!(
        result["observation_content"]
            .as_str()
            .unwrap()
            .contains("cancelled"),
        "{result}"
    );
    assert_no_process_under(&sb.ws());
}
