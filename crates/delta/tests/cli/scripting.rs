//! What scripts rely on: `--model` / `DELTA_MODEL`, `-m -` (the message from standard input).

use std::io::Write;
use std::process::Stdio;

use testkit::{Reply, ScriptedServer};

use crate::support::{ECHO_AND_WRITE, Sandbox, agent_yaml, bodies, output};

/// Runs `cmd` with `input` on its standard input.
fn with_stdin(mut cmd: std::process::Command, input: &str) -> crate::support::Output {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    crate::support::Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn models(server: &ScriptedServer) -> Vec<String> {
    bodies(server)
        .iter()
        .map(|b| b["model"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_model_flag_and_variable_replace_the_agents_model_for_run_and_continue() {
    let server = ScriptedServer::start([
        Reply::text("one"),
        Reply::text("two"),
        Reply::text("three"),
        Reply::text("four"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(
        sb.run(Some(&server), "a", &["--model", "flag-model"]).code,
        0
    );
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws2", "-m", "b"])
        .env("DELTA_MODEL", "env-model");
    assert_eq!(output(cmd).code, 0);
    // The flag wins over the variable.
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws2", "-m", "c", "--model", "flag-again"])
        .env("DELTA_MODEL", "env-model");
    assert_eq!(output(cmd).code, 0);
    // Without either, a continued run asks the agent's model again.
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws2", "-m", "d"]);
    assert_eq!(output(cmd).code, 0);
    assert_eq!(
        models(&server),
        ["flag-model", "env-model", "flag-again", "test-model"]
    );
}

#[test]
fn a_dash_message_is_read_from_standard_input() {
    let server = ScriptedServer::start([Reply::text("ok"), Reply::text("again")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "-"]);
    let task = "Summarise this:\nline one\nline \"two\"\n";
    let out = with_stdin(cmd, task);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(sb.metadata()["task"], task.trim_end_matches('\n'));
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws", "-m", "-"]);
    assert_eq!(with_stdin(cmd, "and more\n").code, 0);
    let users: Vec<String> = sb
        .events("USER_MESSAGE")
        .iter()
        .map(|e| e["payload"]["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(users, [task.trim_end_matches('\n'), "and more"]);
    // An empty standard input is no task.
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws3", "-m", "-"]);
    let out = with_stdin(cmd, "");
    assert_eq!(out.code, 2, "{}", out.stderr);
}

#[test]
fn format_json_prints_a_result_object_also_when_the_run_cannot_start() {
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    // No API key.
    let out = sb.run(None, "hello", &["--format", "json"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["is_error"], true);
    assert_eq!(result["error"]["type"], "SetupError");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("API key")
    );
    assert_eq!(result["exit_code"], 1);
    assert!(
        out.stderr.contains("API key"),
        "the message stays on stderr"
    );
    // An empty message is a usage error.
    let out = sb.run(None, " ", &["--format", "json"]);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        (out.code, &result["error"]["type"]),
        (2, &serde_json::json!("UsageError"))
    );
    assert_eq!(result["exit_code"], 2);
    // continue without a workspace to continue.
    let mut cmd = sb.delta(None);
    cmd.args(["continue", "-w", "nowhere", "--format", "json"]);
    let out = output(cmd);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["is_error"], true, "{}", out.stderr);
    assert_eq!(result["exit_code"], out.code);
    // A run that starts says whether it failed.
    let server = ScriptedServer::start([Reply::text("fine")]);
    let out = sb.run(Some(&server), "hello", &["--format", "json"]);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        (result["status"].as_str(), &result["is_error"]),
        (Some("COMPLETED"), &serde_json::json!(false))
    );
}
