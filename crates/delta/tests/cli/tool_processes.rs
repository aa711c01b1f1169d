//! Tool processes never outlive their run: a tool's process group is recorded in the run folder before
//! its program starts, the next process to take the run over stops a group that still runs before it
//! settles the call (and says so in the call's result), and delta exits only once its tool's group is
//! gone.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer};

use crate::support::{
    Output, Sandbox, agent_yaml, assert_well_formed, group_members, output, pid_in, read_json,
    wait_for,
};

fn spawn_run(sb: &Sandbox, server: &ScriptedServer) -> Child {
    let mut cmd = sb.delta(Some(server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().unwrap()
}

fn sigkill(child: Child) {
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    child.wait_with_output().unwrap();
}

fn continue_(sb: &Sandbox, server: &ScriptedServer) -> Output {
    let mut cmd = sb.delta(Some(server));
    cmd.args(["continue", "-w", "ws", "--format", "raw"]);
    output(cmd)
}

fn result_of(sb: &Sandbox, id: &str) -> Value {
    let results: Vec<Value> = sb
        .events("ACTION_RESULT")
        .into_iter()
        .filter(|e| e["payload"]["action_id"] == id)
        .collect();
    assert_eq!(results.len(), 1, "one result for {id}: {results:?}");
    results[0]["payload"].clone()
}

/// Stops whatever of `pgid` is left, however the test ends.
struct GroupGuard(i32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(Pid::from_raw(self.0), Signal::SIGKILL);
    }
}

#[test]
fn a_tool_still_running_after_delta_was_killed_is_stopped_before_its_call_is_settled() {
    let server = ScriptedServer::start([Reply::tool_call("c1", "slow", json!({}))]);
    let sb = Sandbox::new(&agent_yaml(
        "  - name: slow\n    shell: \"echo $$ > tool.pid; sleep 30 & wait; touch finished\"\n",
    ));
    let child = spawn_run(&sb, &server);
    let tool = pid_in(&sb.ws().join("tool.pid"));
    let _guard = GroupGuard(tool);
    // Recorded before its program started.
    let record = read_json(&sb.run_dir().join("process.json"));
    assert_eq!(record["kind"], "tool");
    assert_eq!(record["action_id"], "c1");
    assert_eq!(record["pgid"], tool);
    sigkill(child);
    assert!(
        !group_members(tool).is_empty(),
        "the tool outlives a SIGKILLed delta"
    );

    let server2 = ScriptedServer::start([Reply::text("recovered")]);
    let out = continue_(&sb, &server2);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "recovered\n");
    assert_eq!(
        group_members(tool),
        Vec::<i32>::new(),
        "continue stopped the tool's group"
    );
    assert!(!sb.ws().join("finished").exists());
    let result = result_of(&sb, "c1");
    assert_eq!(result["status"], "FAILED");
    let text = result["observation_content"].as_str().unwrap();
    assert!(text.contains("INTERRUPTED"), "{text}");
    assert!(
        text.contains(&format!(
            "was still running; its process group {tool} has been stopped"
        )),
        "{text}"
    );
    assert!(text.contains("may or may not have taken effect"), "{text}");
    assert!(!sb.run_dir().join("process.json").exists());
    assert_well_formed(&server2);
}

#[test]
fn a_tool_that_ended_after_delta_was_killed_is_reported_as_no_longer_running() {
    let server = ScriptedServer::start([Reply::tool_call("c1", "quick", json!({}))]);
    let sb = Sandbox::new(&agent_yaml(
        "  - name: quick\n    shell: \"echo $$ > tool.pid; sleep 0.5\"\n",
    ));
    let child = spawn_run(&sb, &server);
    let tool = pid_in(&sb.ws().join("tool.pid"));
    let _guard = GroupGuard(tool);
    sigkill(child);
    let start = Instant::now();
    while !group_members(tool).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(20));
    }
    let server2 = ScriptedServer::start([Reply::text("recovered")]);
    let out = continue_(&sb, &server2);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result = result_of(&sb, "c1");
    assert_eq!(result["status"], "FAILED");
    let text = result["observation_content"].as_str().unwrap();
    assert!(text.contains("was no longer running"), "{text}");
    assert!(text.contains("may or may not have taken effect"), "{text}");
}

#[test]
fn a_hook_left_running_by_a_killed_delta_is_stopped_and_the_tool_is_known_not_to_have_run() {
    let sb = Sandbox::new(
        "name: test-agent\nllm:\n  model: test-model\ntools:\n  - name: touch_it\n    exec: \"touch ${name}\"\nlifecycle_hooks:\n  pre_tool_exec:\n    command: [\"${AGENT_HOME}/hooks/wait.sh\"]\n",
    );
    sb.script("agent/hooks/wait.sh", "echo $$ > hook.pid\nsleep 30");
    let server = ScriptedServer::start([Reply::tool_call(
        "c1",
        "touch_it",
        json!({"name": "created.txt"}),
    )]);
    let child = spawn_run(&sb, &server);
    let hook = pid_in(&sb.ws().join("hook.pid"));
    let _guard = GroupGuard(hook);
    sigkill(child);
    assert!(!group_members(hook).is_empty());

    let server2 = ScriptedServer::start([Reply::text("recovered")]);
    let out = continue_(&sb, &server2);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        group_members(hook),
        Vec::<i32>::new(),
        "the hook was stopped"
    );
    let notes: Vec<String> = sb
        .events("SYSTEM_MESSAGE")
        .iter()
        .map(|e| e["payload"]["content"].as_str().unwrap().to_string())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("pre_tool_exec hook") && n.contains("was still running")),
        "{notes:?}"
    );
    assert!(!sb.ws().join("created.txt").exists(), "the tool never ran");
    let result = result_of(&sb, "c1");
    assert_eq!(result["status"], "ERROR");
    let text = result["observation_content"].as_str().unwrap();
    assert!(text.contains("did not run"), "{text}");
}

#[test]
fn after_sigint_delta_exits_only_once_the_tools_group_is_gone() {
    let server = ScriptedServer::start([Reply::tool_call("c1", "stubborn", json!({}))]);
    // A background child that ignores SIGTERM and SIGINT, and outlives the shell by a little.
    let sb = Sandbox::new(&agent_yaml(
        "  - name: stubborn\n    shell: \"echo $$ > tool.pid; (trap '' TERM INT; sleep 30) & wait\"\n",
    ));
    let child = spawn_run(&sb, &server);
    let tool = pid_in(&sb.ws().join("tool.pid"));
    let _guard = GroupGuard(tool);
    std::thread::sleep(Duration::from_millis(100));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    // No waiting here: the group must already be gone when delta has exited.
    assert_eq!(group_members(tool), Vec::<i32>::new());
    assert!(!sb.run_dir().join("process.json").exists());
    wait_for(&sb.run_dir().join("journal.jsonl"));
}

#[test]
fn after_a_restart_a_call_without_a_record_is_not_claimed_to_have_not_run() {
    let sb = Sandbox::new(
        "name: test-agent\nllm:\n  model: test-model\ntools:\n  - name: touch_it\n    exec: \"touch ${name}\"\nlifecycle_hooks:\n  pre_tool_exec:\n    command: [\"${AGENT_HOME}/hooks/wait.sh\"]\n",
    );
    sb.script("agent/hooks/wait.sh", "echo $$ > hook.pid\nsleep 30");
    let server = ScriptedServer::start([Reply::tool_call(
        "c1",
        "touch_it",
        json!({"name": "created.txt"}),
    )]);
    let child = spawn_run(&sb, &server);
    let hook = pid_in(&sb.ws().join("hook.pid"));
    let _guard = GroupGuard(hook);
    sigkill(child);
    // As if the machine had restarted since: records written without a flush may be lost.
    let metadata = sb.run_dir().join("metadata.json");
    let mut meta = read_json(&metadata);
    assert!(meta["boot_id"].is_string(), "{meta}");
    meta["boot_id"] = json!("an-earlier-boot");
    std::fs::write(&metadata, serde_json::to_string_pretty(&meta).unwrap()).unwrap();
    // The hook's record was lost with the restart; the hook itself is the test's to stop.
    std::fs::remove_file(sb.run_dir().join("process.json")).unwrap();

    let server2 = ScriptedServer::start([Reply::text("recovered")]);
    let out = continue_(&sb, &server2);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result = result_of(&sb, "c1");
    assert_eq!(result["status"], "FAILED");
    let text = result["observation_content"].as_str().unwrap();
    assert!(text.contains("may or may not have taken effect"), "{text}");
    assert!(!text.contains("did not run"), "{text}");
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    assert_eq!(
        read_json(&metadata)["boot_id"],
        boot.trim(),
        "the metadata names this boot again"
    );
}

#[test]
fn an_unreadable_process_record_does_not_block_the_recovery() {
    let server = ScriptedServer::start([Reply::tool_call("c1", "slow", json!({}))]);
    let sb = Sandbox::new(&agent_yaml(
        "  - name: slow\n    shell: \"echo $$ > tool.pid; sleep 30\"\n",
    ));
    let child = spawn_run(&sb, &server);
    let tool = pid_in(&sb.ws().join("tool.pid"));
    sigkill(child);
    drop(GroupGuard(tool));
    // What a power loss can leave of a record written in place but not flushed: a part of it
    // (an empty file is no record: the state between two tools).
    std::fs::write(sb.run_dir().join("process.json"), "{\"kind\":\"tool\",\"na").unwrap();

    let server2 = ScriptedServer::start([Reply::text("recovered")]);
    let out = continue_(&sb, &server2);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        sb.events("SYSTEM_MESSAGE")
            .iter()
            .any(|e| e["payload"]["content"]
                .as_str()
                .unwrap()
                .starts_with("Ignored an unreadable process record")),
        "{:?}",
        sb.events("SYSTEM_MESSAGE")
    );
    let text = result_of(&sb, "c1")["observation_content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.contains("may or may not have taken effect"), "{text}");
    assert!(!sb.run_dir().join("process.json").exists());
}

#[test]
fn a_new_run_or_a_fork_never_overlaps_the_tool_a_crashed_run_left_running() {
    for how in ["new run", "fork"] {
        let server = ScriptedServer::start([Reply::tool_call("c1", "slow", json!({}))]);
        let sb = Sandbox::new(&agent_yaml(
            "  - name: slow\n    shell: \"echo $$ > tool.pid; sleep 30 & wait; touch finished\"\n",
        ));
        let child = spawn_run(&sb, &server);
        let tool = pid_in(&sb.ws().join("tool.pid"));
        let _guard = GroupGuard(tool);
        let crashed = sb.metadata()["run_id"].as_str().unwrap().to_string();
        sigkill(child);
        assert!(!group_members(tool).is_empty());

        // Another run works in the workspace: the crashed run's tool goes first.
        let server2 = ScriptedServer::start([Reply::text("other work")]);
        let mut cmd = sb.delta(Some(&server2));
        match how {
            "new run" => cmd.args([
                "run", "--agent", "agent", "-w", "ws", "--run-id", "second", "-m", "again",
            ]),
            _ => cmd.args([
                "continue",
                "-w",
                "ws",
                "--from-iteration",
                "0",
                "-m",
                "fork it",
            ]),
        };
        let out = output(cmd);
        assert_eq!(out.code, 0, "{how}: {}", out.stderr);
        assert_eq!(
            group_members(tool),
            Vec::<i32>::new(),
            "{how}: the crashed run's tool was stopped before other work began"
        );

        // The crashed run's own resume still says the tool was running and has been stopped.
        let server3 = ScriptedServer::start([Reply::text("recovered")]);
        let mut cmd = sb.delta(Some(&server3));
        cmd.args([
            "continue", "-w", "ws", "--run-id", &crashed, "--format", "raw",
        ]);
        let out = output(cmd);
        assert_eq!(out.code, 0, "{how}: {}", out.stderr);
        std::fs::write(sb.ws().join(".delta/LATEST"), &crashed).unwrap();
        let text = result_of(&sb, "c1")["observation_content"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            text.contains(&format!(
                "was still running; its process group {tool} has been stopped"
            )),
            "{how}: {text}"
        );
        assert!(!sb.ws().join("finished").exists());
    }
}

#[test]
fn a_fork_of_a_call_cut_short_never_claims_it_did_not_run() {
    // The tool's call is requested, then delta is killed while a pre_tool_exec hook runs: whether the
    // tool started is not known from the fork's own (empty) process records.
    let sb = Sandbox::new(
        "name: test-agent\nllm:\n  model: test-model\ntools:\n  - name: touch_it\n    exec: \"touch ${name}\"\nlifecycle_hooks:\n  pre_tool_exec:\n    command: [\"${AGENT_HOME}/hooks/wait.sh\"]\n",
    );
    sb.script("agent/hooks/wait.sh", "echo $$ > hook.pid\nsleep 30");
    let server = ScriptedServer::start([Reply::tool_call(
        "c1",
        "touch_it",
        json!({"name": "created.txt"}),
    )]);
    let child = spawn_run(&sb, &server);
    let hook = pid_in(&sb.ws().join("hook.pid"));
    let _guard = GroupGuard(hook);
    sigkill(child);

    let server2 = ScriptedServer::start([Reply::text("forked")]);
    let mut cmd = sb.delta(Some(&server2));
    cmd.args([
        "continue",
        "-w",
        "ws",
        "--from-iteration",
        "1",
        "-m",
        "again",
    ])
    .args(["--format", "raw"]);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "forked\n");
    let text = result_of(&sb, "c1")["observation_content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.contains("may or may not have taken effect"), "{text}");
    assert!(!text.contains("did not run"), "{text}");
}
