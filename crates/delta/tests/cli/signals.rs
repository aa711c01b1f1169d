//! SIGINT and SIGTERM: exit 130, status INTERRUPTED, no process left behind.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use crate::support::{Output, Sandbox, agent_yaml, assert_well_formed, bodies, output};

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

/// `delta run --agent agent -w ws -m go`, running in the background with its output captured.
fn spawn_run(sb: &Sandbox, server: &ScriptedServer) -> Child {
    let mut cmd = sb.delta(Some(server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().unwrap()
}

fn sigint(child: &Child) {
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
}

fn finish(child: Child) -> Output {
    let out = child.wait_with_output().unwrap();
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The pid written to `path` (waits for the file to appear).
fn pid_in(path: &Path) -> i32 {
    wait_for(path);
    let start = Instant::now();
    loop {
        // The file may be seen before the shell has written the number into it.
        if let Ok(pid) = std::fs::read_to_string(path).unwrap().trim().parse() {
            return pid;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{} holds no pid",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (10 s at most) until `pid` is dead.
fn wait_dead(pid: i32, what: &str) {
    let start = Instant::now();
    while alive(pid) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{what} (pid {pid}) is still running"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// SIGKILLs a process the test made a tool start outside delta's reach, however the test ends.
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.0), Signal::SIGKILL);
    }
}

fn continue_(sb: &Sandbox, server: &ScriptedServer, args: &[&str]) -> Output {
    let mut cmd = sb.delta(Some(server));
    cmd.args(["continue", "-w", "ws"]).args(args);
    output(cmd)
}

/// The `action_id`s of the journal's events of one type, in order.
fn action_ids(sb: &Sandbox, kind: &str) -> Vec<String> {
    sb.events(kind)
        .iter()
        .map(|e| e["payload"]["action_id"].as_str().unwrap().to_string())
        .collect()
}

const SLOW_AND_TOUCH: &str = "  - name: slow\n    shell: \"echo $$ > tool.pid; sleep 30\"\n  - name: touch_it\n    exec: \"touch ${name}\"\n";

#[test]
fn sigint_during_the_first_of_two_calls_leaves_the_second_unstarted_for_continue() {
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new("c1", "slow", json!({})),
            ToolCallSpec::new("c2", "touch_it", json!({"name": "second.txt"})),
        ]),
        Reply::text("unused"),
    ]);
    let sb = Sandbox::new(&agent_yaml(SLOW_AND_TOUCH));
    let child = spawn_run(&sb, &server);
    let tool = pid_in(&sb.ws().join("tool.pid"));
    sigint(&child);
    let out = finish(child);
    assert_eq!(out.code, 130, "{}", out.stderr);
    wait_dead(tool, "the interrupted tool");
    assert_eq!(sb.metadata()["status"], "INTERRUPTED");
    // The running call got its result; the second one was never started.
    assert_eq!(action_ids(&sb, "ACTION_REQUEST"), ["c1"]);
    assert_eq!(action_ids(&sb, "ACTION_RESULT"), ["c1"]);
    let first = &sb.events("ACTION_RESULT")[0]["payload"];
    assert_eq!(first["status"], "FAILED");
    assert!(
        first["observation_content"]
            .as_str()
            .unwrap()
            .contains("INTERRUPTED"),
        "{first}"
    );
    assert!(!sb.ws().join("second.txt").exists(), "the second call ran");
    assert_eq!(server.request_count(), 1);
    std::fs::remove_file(sb.ws().join("tool.pid")).unwrap();

    // `continue` without a message runs the call that never started, and only that one.
    let server2 = ScriptedServer::start([Reply::text("all done")]);
    let out = continue_(&sb, &server2, &["--format", "raw"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "all done\n");
    assert!(
        sb.ws().join("second.txt").exists(),
        "the second call never ran"
    );
    assert!(
        !sb.ws().join("tool.pid").exists(),
        "the interrupted call ran again"
    );
    assert_eq!(action_ids(&sb, "ACTION_REQUEST"), ["c1", "c2"]);
    assert_eq!(action_ids(&sb, "ACTION_RESULT"), ["c1", "c2"]);
    assert_eq!(
        sb.events("ACTION_RESULT")[1]["payload"]["status"],
        "SUCCESS"
    );
    assert_eq!(sb.metadata()["status"], "COMPLETED");
    assert_eq!(server2.request_count(), 1);
    assert_well_formed(&server2);
    let body = &bodies(&server2)[0];
    let messages = body["messages"].as_array().unwrap();
    let turn = messages
        .iter()
        .position(|m| m["tool_calls"].as_array().is_some_and(|c| c.len() == 2))
        .unwrap_or_else(|| panic!("no assistant turn with both calls: {body}"));
    let results: Vec<&Value> = messages[turn + 1..turn + 3]
        .iter()
        .map(|m| &m["tool_call_id"])
        .collect();
    assert_eq!(results, [&json!("c1"), &json!("c2")], "{body}");
}

#[test]
fn sigint_during_a_pre_tool_exec_hook_kills_the_hook_and_never_starts_the_tool() {
    let sb = Sandbox::new(
        "name: test-agent\nllm:\n  model: test-model\ntools:\n  - name: touch_it\n    exec: \"touch ${name}\"\nlifecycle_hooks:\n  pre_tool_exec:\n    command: [\"${AGENT_HOME}/hooks/wait.sh\"]\n",
    );
    sb.script(
        "agent/hooks/wait.sh",
        "echo $$ > hook.pid\ntouch hook-started\nsleep 30",
    );
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "touch_it", json!({"name": "created.txt"})),
        Reply::text("unused"),
    ]);
    let child = spawn_run(&sb, &server);
    wait_for(&sb.ws().join("hook-started"));
    let hook = pid_in(&sb.ws().join("hook.pid"));
    sigint(&child);
    let signalled = Instant::now();
    let out = finish(child);
    assert_eq!(out.code, 130, "{}", out.stderr);
    assert!(
        signalled.elapsed() < Duration::from_secs(10),
        "the hook was waited for: {:?}",
        signalled.elapsed()
    );
    wait_dead(hook, "the pre_tool_exec hook");
    assert!(!sb.ws().join("created.txt").exists(), "the tool ran");
    assert_eq!(sb.metadata()["status"], "INTERRUPTED");
    let results = sb.events("ACTION_RESULT");
    assert_eq!(results.len(), 1, "{results:?}");
    let result = &results[0]["payload"];
    assert_eq!(result["action_id"], "c1");
    assert_eq!(result["status"], "ERROR");
    assert!(
        result["observation_content"]
            .as_str()
            .unwrap()
            .contains("interrupted before this tool started"),
        "{result}"
    );
    let recorded = crate::support::io_record_ids(&sb.run_dir().join("io/tool_executions"));
    assert!(
        recorded.is_empty(),
        "an execution was recorded for a tool that never ran: {recorded:?}"
    );
    assert_eq!(server.request_count(), 1);
}

#[test]
fn a_second_sigint_stops_at_once_leaving_no_process_and_continue_recovers_the_run() {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "slow", json!({})),
        Reply::text("unused"),
    ]);
    // `holder` runs in its own session, outside the tool's group, and keeps the tool's output pipes
    // open: after the first SIGINT has killed the tool's group, delta waits a while for them to close,
    // and the second SIGINT comes during that wait.
    let sb = Sandbox::new(&agent_yaml(
        "  - name: slow\n    shell: \"setsid sh -c 'echo $$ > holder.pid; exec sleep 20' & sleep 60 & echo $! > grandchild.pid; echo $$ > tool.pid; wait\"\n",
    ));
    let child = spawn_run(&sb, &server);
    let holder = KillOnDrop(pid_in(&sb.ws().join("holder.pid")));
    let grandchild = pid_in(&sb.ws().join("grandchild.pid"));
    let tool = pid_in(&sb.ws().join("tool.pid"));
    sigint(&child);
    // The tool's group dies once delta has seen the first signal; then comes the second.
    wait_dead(tool, "the tool after the first SIGINT");
    sigint(&child);
    let out = finish(child);
    assert_eq!(out.code, 130, "{}", out.stderr);
    assert!(
        out.stderr.contains("`delta continue` will recover the run"),
        "{}",
        out.stderr
    );
    // delta exits only once the tool's group is gone.
    assert!(!alive(tool), "the tool outlived delta");
    assert!(
        !alive(grandchild),
        "the tool's background child outlived delta"
    );
    drop(holder);
    // Stopped at once: nothing was recorded after the call started.
    assert_eq!(sb.metadata()["status"], "RUNNING");
    assert!(sb.events("ACTION_RESULT").is_empty());

    let server2 = ScriptedServer::start([Reply::text("recovered fine")]);
    let out = continue_(&sb, &server2, &["--format", "raw"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("Recovered a crashed run"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout, "recovered fine\n");
    assert_eq!(sb.metadata()["status"], "COMPLETED");
    let result = &sb.events("ACTION_RESULT")[0]["payload"];
    assert_eq!(result["action_id"], "c1");
    assert_eq!(result["status"], "FAILED");
    assert_well_formed(&server2);
}

/// Every file under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
        }
    }
    out.sort();
    out
}

#[test]
fn a_signal_while_delta_prepares_a_run_leaves_a_consistent_workspace() {
    // Signals at random moments of the first 40 ms, when delta loads the agent, creates the
    // workspace and the run: it either never started a run, or the run is there, listed, resumable;
    // and the next call always finds a workspace it can work in, without leftovers.
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    eprintln!("early signals: seed {seed}");
    let mut state = seed | 1;
    for trial in 0..20 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let delay = Duration::from_micros(state % 40_000);
        let signal = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGKILL][(state % 3) as usize];
        let server = ScriptedServer::start([Reply::text("done"), Reply::text("done")]);
        let sb = Sandbox::new(&agent_yaml(crate::support::ECHO_AND_WRITE));
        let child = spawn_run(&sb, &server);
        std::thread::sleep(delay);
        let _ = kill(Pid::from_raw(child.id() as i32), signal);
        let out = finish(child);
        let context = format!("trial {trial} ({signal:?} after {delay:?}, seed {seed})");
        let files = tree(&sb.ws());
        // A SIGKILL cannot be caught: what it leaves is cleaned up by the next call (below).
        let caught = signal != Signal::SIGKILL;
        assert!(
            !caught || files.iter().all(|f| !f.ends_with(".tmp")),
            "{context}: temporary files left: {files:?}"
        );
        for run in files
            .iter()
            .filter(|f| caught && f.ends_with("/journal.jsonl"))
        {
            let dir = run.trim_end_matches("/journal.jsonl");
            assert!(
                files.contains(&format!("{dir}/metadata.json")),
                "{context}: a run without metadata: {files:?}\n{}",
                out.stderr
            );
        }
        // Whatever happened, the next call finds a workspace it can work in.
        let next = sb.run(Some(&server), "again", &[]);
        assert!(
            next.code == 0,
            "{context}: the next run failed:\n{}\n(first call: exit {})",
            next.stderr,
            out.code
        );
        let files = tree(&sb.ws());
        assert!(
            files.iter().all(|f| !f.ends_with(".tmp")),
            "{context}: temporary files left after the next call: {files:?}"
        );
    }
}
