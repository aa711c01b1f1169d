//! The model as the attacker: a scripted model asks for whatever commands it likes, through a tool
//! that runs any script (`sh`), and tries to leave its sandbox, reach delta or configure it. Each
//! attack must be refused, the refusal must reach the journal and the model, and nothing outside
//! the workspace may change. One test per row of docs/security.md.

use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer};

use crate::support::{KEY, Output, Sandbox, bodies, output};

mod approvals;
mod configuration;
mod confinement;
mod sessions;

/// An agent whose one tool, `sh`, runs its `script` argument in bash, with this `sandbox:` line.
fn hostile_agent(sandbox: &str) -> Sandbox {
    Sandbox::new(&format!(
        "name: hostile\nllm:\n  model: m\n{sandbox}\ntools:\n  - name: sh\n    exec: \"bash -c ${{script}}\"\n"
    ))
}

/// The model's answers: one `sh` call per script, in order, then "done".
fn scripted(scripts: &[&str]) -> ScriptedServer {
    let mut replies: Vec<Reply> = scripts
        .iter()
        .enumerate()
        .map(|(i, s)| Reply::tool_call(&format!("c{i}"), "sh", json!({"script": s})))
        .collect();
    replies.push(Reply::text("done"));
    ScriptedServer::start(replies)
}

/// What each call printed (stdout and stderr, as the model saw it), from the journal.
fn observations(sb: &Sandbox) -> Vec<String> {
    sb.events("ACTION_RESULT")
        .iter()
        .map(|e| {
            e["payload"]["observation_content"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

/// Asserts that the model was told `needle` in the request after call `n` (the refusal reached it).
fn model_was_told(server: &ScriptedServer, n: usize, needle: &str) {
    let body = &bodies(server)[n + 1];
    let tool_message = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap_or(Value::Null);
    assert!(
        tool_message["content"]
            .as_str()
            .unwrap_or("")
            .contains(needle),
        "the model was not told {needle:?}: {tool_message}"
    );
}

/// Runs the hostile agent's scripts to the end.
fn attack(sb: &Sandbox, scripts: &[&str]) -> (ScriptedServer, Output, Vec<String>) {
    let server = scripted(scripts);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let seen = observations(sb);
    assert_eq!(seen.len(), scripts.len(), "{seen:?}");
    (server, out, seen)
}

/// Python, which the attacks use for the system calls a shell cannot make.
fn python() -> bool {
    testkit::needs::python3().is_some()
}

/// An agent whose `write` tool needs a person's approval and whose `run` tool runs anything.
const APPROVING: &str = "name: approving\nllm:\n  model: m\ntools:\n  - name: write\n    exec: \"touch ${file}\"\npermissions:\n  default: allow\n  rules:\n    - {tool: \"write\", command: \"*secret*\", action: deny}\n    - {tool: \"write\", action: ask}\n";

fn write_call(id: &str, file: &str) -> testkit::ToolCallSpec {
    testkit::ToolCallSpec::new(id, "write", json!({"file": file}))
}

/// `delta continue -w ws` with `args`.
fn continue_with(sb: &Sandbox, server: &ScriptedServer, args: &[&str]) -> Output {
    let mut cmd = sb.delta(Some(server));
    cmd.args(["continue", "-w", "ws"]).args(args);
    output(cmd)
}

/// The environment variable that marks the suite run again as another user.
const INNER: &str = "DELTA_RED_TEAM_AS_NOBODY";

#[test]
fn every_attack_fails_for_an_unprivileged_user_too() {
    if std::env::var_os(INNER).is_some() {
        return;
    }
    if !nix::unistd::geteuid().is_root() {
        // This user is unprivileged already: the other tests are that run.
        println!(
            "SKIPPED red_team::every_attack_fails_for_an_unprivileged_user_too: needs root (it runs the suite again as nobody)"
        );
        return;
    }
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "--",
        ])
        .arg(std::env::current_exe().unwrap())
        .args(["red_team::", "--test-threads", "2"])
        .env(INNER, "1")
        .env("HOME", "/tmp")
        .env("TMPDIR", "/tmp")
        .current_dir("/tmp")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "as nobody:\n{text}");
    let passed: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("test result: ok. "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    // Every test of this file but this one ran, and none said it lacked something.
    assert!(passed >= 14, "as nobody:\n{text}");
    assert!(!text.contains("SKIPPED"), "as nobody:\n{text}");
}
