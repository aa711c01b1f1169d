//! SIGINT and SIGTERM: exit 130, status INTERRUPTED, no process left behind.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use testkit::{Reply, ScriptedServer};

use crate::support::{Sandbox, agent_yaml};

fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Running (a zombie is dead: it only waits for its parent, possibly init, to collect it).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .chars()
                .next();
            state != Some('Z') && state != Some('X')
        }
        Err(_) => kill(Pid::from_raw(pid), None).is_ok(),
    }
}

#[test]
fn sigint_during_a_tool_kills_its_group_and_exits_130() {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "slow", json!({})),
        Reply::text("unused"),
    ]);
    let sb = Sandbox::new(&agent_yaml(
        "  - name: slow\n    shell: \"sleep 60 & echo $! > grandchild.pid; echo $$ > tool.pid; wait\"\n",
    ));
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    wait_for(&sb.ws().join("tool.pid"));
    wait_for(&sb.ws().join("grandchild.pid"));
    std::thread::sleep(Duration::from_millis(100));
    let grandchild: i32 = std::fs::read_to_string(sb.ws().join("grandchild.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let tool: i32 = std::fs::read_to_string(sb.ws().join("tool.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let start = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(start.elapsed() < Duration::from_secs(3));
    std::thread::sleep(Duration::from_millis(100));
    assert!(!alive(tool), "the tool survived");
    assert!(!alive(grandchild), "the tool's background child survived");

    assert_eq!(sb.metadata()["status"], "INTERRUPTED");
    let result = &sb.events("ACTION_RESULT")[0]["payload"];
    assert_eq!(result["status"], "FAILED");
    assert!(
        result["observation_content"]
            .as_str()
            .unwrap()
            .contains("INTERRUPTED"),
        "{result}"
    );
    let last = sb.journal().pop().unwrap();
    assert_eq!(
        last["payload"],
        json!({"level": "INFO", "content": "Run interrupted by user"})
    );
    assert_eq!(server.request_count(), 1);
}

#[test]
fn sigterm_while_waiting_for_the_model_exits_130_promptly() {
    let server = ScriptedServer::start([Reply::text("late").delay(Duration::from_secs(20))]);
    let sb = Sandbox::new(&agent_yaml("  - name: noop\n    exec: \"true\"\n"));
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let start = Instant::now();
    while server.request_count() == 0 {
        assert!(start.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let signalled = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert!(signalled.elapsed() < Duration::from_secs(2));
    assert_eq!(sb.metadata()["status"], "INTERRUPTED");
    assert!(String::from_utf8_lossy(&out.stderr).contains("delta continue -w"));
}
