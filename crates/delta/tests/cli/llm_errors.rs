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
