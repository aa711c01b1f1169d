//! The model's server failing: what the user sees and what the journal keeps.

use testkit::{Reply, ScriptedServer};

use crate::support::{KEY, Sandbox, agent_yaml};

#[test]
fn a_4xx_fails_the_run_at_once_with_the_server_message() {
    let server = ScriptedServer::start([
        Reply::error(400, "model 'nope' does not exist"),
        Reply::text("unused"),
    ]);
    let sb = Sandbox::new(&agent_yaml("  - name: noop\n    exec: \"true\"\n"));
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 1);
    assert_eq!(server.request_count(), 1, "4xx is not retried");
    assert!(
        out.stderr.contains("model 'nope' does not exist"),
        "{}",
        out.stderr
    );
    let kinds: Vec<String> = sb
        .journal()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        ["RUN_START", "USER_MESSAGE", "SYSTEM_MESSAGE", "RUN_END"]
    );
    let fatal = &sb.events("SYSTEM_MESSAGE")[0]["payload"];
    assert_eq!(fatal["level"], "ERROR");
    assert!(
        fatal["content"]
            .as_str()
            .unwrap()
            .starts_with("Fatal error: LLM request failed: request rejected (HTTP 400)")
    );
    assert_eq!(sb.events("RUN_END")[0]["payload"]["status"], "FAILED");
    assert_eq!(sb.metadata()["status"], "FAILED");
}

#[test]
fn a_5xx_is_retried_then_fails() {
    let server = ScriptedServer::start([
        Reply::error(500, "upstream exploded"),
        Reply::error(503, "still down"),
        Reply::error(502, "gave up"),
        Reply::text("unused"),
    ]);
    let sb = Sandbox::new(&agent_yaml("  - name: noop\n    exec: \"true\"\n"));
    let out = sb.run(Some(&server), "go", &["--format", "json"]);
    assert_eq!(out.code, 1);
    assert_eq!(server.request_count(), 3);
    assert_eq!(
        out.stderr.matches("retrying in").count(),
        2,
        "{}",
        out.stderr
    );
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["status"], "FAILED");
    assert_eq!(result["error"]["type"], "ExecutionError");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("gave up")
    );
}

#[test]
fn a_5xx_then_success_recovers() {
    let server = ScriptedServer::start([Reply::error(503, "blip"), Reply::text("fine")]);
    let sb = Sandbox::new(&agent_yaml("  - name: noop\n    exec: \"true\"\n"));
    let out = sb.run(Some(&server), "go", &["--format", "raw"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "fine\n");
}

#[test]
fn a_connection_broken_before_the_answer_is_asked_again() {
    // The server reads the request and closes the connection (as an overloaded one does); the
    // model call has no effect beyond its cost, so the run asks again instead of failing.
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "noop", serde_json::json!({})),
        Reply::hang_up(),
        Reply::text("fine"),
    ]);
    let sb = Sandbox::new(&agent_yaml("  - name: noop\n    exec: \"true\"\n"));
    let out = sb.run(Some(&server), "go", &["--format", "raw"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "fine\n");
    assert_eq!(server.request_count(), 3);
    assert!(
        out.stderr.contains("broke before an answer arrived") && out.stderr.contains("retrying in"),
        "{}",
        out.stderr
    );
    assert_eq!(
        sb.events("THOUGHT").len(),
        2,
        "one answer per model call that answered"
    );
}

#[test]
fn an_echoed_key_never_reaches_a_file_or_the_terminal() {
    let server = ScriptedServer::start([Reply::error(
        401,
        &format!("Incorrect API key provided: {KEY}"),
    )]);
    let sb = Sandbox::new(&agent_yaml("  - name: noop\n    exec: \"true\"\n"));
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 1);
    assert!(!out.stderr.contains(KEY) && !out.stdout.contains(KEY));
    assert!(
        out.stderr.contains("authentication failed (HTTP 401)"),
        "{}",
        out.stderr
    );
    sb.assert_nowhere(KEY);
}

/// The ids of the records of `io/invocations/` of the latest run.
fn invocations(sb: &Sandbox) -> Vec<String> {
    crate::support::io_record_ids(&sb.run_dir().join("io/invocations"))
}

/// Record `id` of `io/invocations/` of the latest run.
fn invocation(sb: &Sandbox, id: &str) -> serde_json::Value {
    crate::support::invocation(&sb.run_dir(), id)
}

#[test]
fn a_failed_request_is_kept_under_io_invocations_with_its_error() {
    let body = "upstream exploded \u{1b}[31mred\u{7}";
    let server = ScriptedServer::start([
        Reply::raw(500, "text/plain", body),
        Reply::raw(500, "text/plain", body),
        Reply::raw(500, "text/plain", body),
    ]);
    let sb = Sandbox::new(&agent_yaml("  - name: noop\n    exec: \"true\"\n"));
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        !out.stderr.contains('\u{1b}') && !out.stderr.contains('\u{7}'),
        "raw control characters reached the terminal: {:?}",
        out.stderr
    );
    assert!(
        out.stderr.contains("upstream exploded \\x1b[31mred\\x07"),
        "{}",
        out.stderr
    );
    let ids = invocations(&sb);
    assert_eq!(ids.len(), 1, "{ids:?}");
    let record = invocation(&sb, &ids[0]);
    let meta = &record["metadata"];
    assert_eq!(meta["status"], "FAILED");
    assert_eq!(meta["error"]["kind"], "server");
    assert_eq!(meta["error"]["http_status"], 500);
    assert!(
        meta["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("server error (HTTP 500): upstream exploded"),
        "{meta}"
    );
    let request = &record["request"];
    assert_eq!(request["messages"][1]["content"], "go", "{request}");
    // A body that is no JSON is kept as text.
    assert_eq!(record["response"], body);
    // The journal points at the record.
    let fatal = &sb.events("SYSTEM_MESSAGE")[0]["payload"]["content"];
    let fatal = fatal.as_str().unwrap();
    assert!(
        fatal.contains("io/invocations/") && fatal.contains(&format!("record {}", ids[0])),
        "{fatal}"
    );
}

#[test]
fn a_json_error_body_is_kept_as_response_json() {
    let server = ScriptedServer::start([Reply::error(400, "model 'nope' does not exist")]);
    let sb = Sandbox::new(&agent_yaml("  - name: noop\n    exec: \"true\"\n"));
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 1);
    let record = invocation(&sb, &invocations(&sb)[0]);
    let body = &record["response"];
    assert_eq!(body["error"]["message"], "model 'nope' does not exist");
    assert_eq!(record["metadata"]["error"]["kind"], "bad_request");
}

#[test]
fn a_server_that_stalls_fails_the_run_after_the_idle_timeout() {
    // From the environment, and from agent.yaml. The answer starts (headers), then nothing comes.
    for (env, yaml) in [
        (Some("0.3"), String::new()),
        (None, "  idle_timeout_seconds: 0.3\n".to_string()),
    ] {
        let server =
            ScriptedServer::start(
                [Reply::text("late").stall(0, std::time::Duration::from_secs(6))],
            );
        let agent = agent_yaml("  - name: noop\n    exec: \"true\"\n").replace(
            "  model: test-model\n",
            &format!("  model: test-model\n{yaml}"),
        );
        let sb = Sandbox::new(&agent);
        let mut cmd = sb.delta(Some(&server));
        if let Some(v) = env {
            cmd.env("DELTA_LLM_IDLE_TIMEOUT", v);
        }
        cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"]);
        let start = std::time::Instant::now();
        let out = crate::support::output(cmd);
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert!(
            start.elapsed() < std::time::Duration::from_secs(4),
            "waited {:?}",
            start.elapsed()
        );
        assert!(
            out.stderr
                .contains("the server sent nothing for 300 ms (idle timeout)"),
            "{}",
            out.stderr
        );
        assert_eq!(server.request_count(), 1, "not retried");
    }
}

#[test]
fn a_model_that_thinks_longer_than_the_idle_limit_is_waited_for() {
    // A whole (non-streamed) answer comes only once the model has finished.
    let server = ScriptedServer::start([
        Reply::text("worth the wait").delay(std::time::Duration::from_millis(900))
    ]);
    let sb = Sandbox::new(&agent_yaml("  - name: noop\n    exec: \"true\"\n"));
    let mut cmd = sb.delta(Some(&server));
    cmd.env("DELTA_LLM_IDLE_TIMEOUT", "0.3").args([
        "run", "--agent", "agent", "-w", "ws", "-m", "go", "--format", "raw",
    ]);
    let out = crate::support::output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "worth the wait\n");
}

#[test]
fn a_bad_idle_timeout_is_refused() {
    let sb = Sandbox::new(&agent_yaml("  - name: noop\n    exec: \"true\"\n"));
    let server = ScriptedServer::start([Reply::text("unused")]);
    let mut cmd = sb.delta(Some(&server));
    cmd.env("DELTA_LLM_IDLE_TIMEOUT", "soon")
        .args(["run", "--agent", "agent", "-w", "ws", "-m", "go"]);
    let out = crate::support::output(cmd);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("DELTA_LLM_IDLE_TIMEOUT"),
        "{}",
        out.stderr
    );
    assert_eq!(server.request_count(), 0);
}
