//! The test harness: agents in temp folders, the binary with a pinned clock, journal readers.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use tempfile::TempDir;
use testkit::ScriptedServer;

/// API key the tests use (checked to never reach a file).
pub const KEY: &str = "sk-delta-test-key-0123456789";
/// The pinned clock.
pub const NOW: &str = "2026-01-02T03:04:05Z";

/// A test sandbox: `agent/` (the agent folder) and `ws/` (the workspace) in one temp folder.
pub struct Sandbox {
    pub root: TempDir,
}

impl Sandbox {
    /// An agent with this agent.yaml and a one-line system prompt.
    pub fn new(agent_yaml: &str) -> Self {
        let root = tempfile::tempdir().unwrap();
        let sb = Self { root };
        sb.file("agent/agent.yaml", agent_yaml);
        sb.file("agent/system_prompt.md", "You are a test agent.");
        sb
    }

    /// Writes a file (relative to the sandbox root), creating folders.
    pub fn file(&self, rel: &str, content: &str) -> PathBuf {
        let path = self.root.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    /// Writes an executable script.
    pub fn script(&self, rel: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.file(rel, &format!("#!/bin/sh\n{body}\n"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    pub fn agent(&self) -> PathBuf {
        self.path("agent")
    }

    pub fn ws(&self) -> PathBuf {
        self.path("ws")
    }

    /// `delta` with a pinned clock and id seed, no API variables from the outside, the scripted server
    /// as endpoint (when given), and the sandbox as current folder.
    pub fn delta(&self, server: Option<&ScriptedServer>) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_delta"));
        cmd.current_dir(self.root.path());
        for (k, _) in std::env::vars() {
            if k.starts_with("DELTA_")
                || k.starts_with("OPENAI_")
                || k.starts_with("ANTHROPIC_")
                || k == "LLM_E2E_URL"
            {
                cmd.env_remove(k);
            }
        }
        cmd.env("DELTA_TEST_NOW", NOW)
            .env("DELTA_TEST_SEED", "7")
            .env("TZ", "UTC");
        cmd.env("HOME", self.root.path());
        if let Some(server) = server {
            cmd.env("DELTA_API_KEY", KEY)
                .env("DELTA_BASE_URL", server.openai_base());
        }
        cmd.stdin(Stdio::null());
        cmd
    }

    /// `delta run --agent agent -w ws -m <message> <extra…>` to completion.
    pub fn run(&self, server: Option<&ScriptedServer>, message: &str, extra: &[&str]) -> Output {
        let mut cmd = self.delta(server);
        cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", message])
            .args(extra);
        output(cmd)
    }

    /// The only run of the workspace.
    pub fn run_dir(&self) -> PathBuf {
        let id = std::fs::read_to_string(self.ws().join(".delta/LATEST")).unwrap();
        self.ws().join(".delta").join(id.trim())
    }

    /// The journal of the latest run.
    pub fn journal(&self) -> Vec<Value> {
        read_jsonl(&self.run_dir().join("journal.jsonl"))
    }

    /// The events of one type.
    pub fn events(&self, kind: &str) -> Vec<Value> {
        self.journal()
            .into_iter()
            .filter(|e| e["type"] == kind)
            .collect()
    }

    /// The metadata of the latest run.
    pub fn metadata(&self) -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(self.run_dir().join("metadata.json")).unwrap(),
        )
        .unwrap()
    }

    /// `delta list-runs -w WS --format json` (it must succeed): the runs, newest first.
    pub fn list_runs(&self, ws: &str) -> Vec<Value> {
        let mut cmd = self.delta(None);
        cmd.args(["list-runs", "-w", ws, "--format", "json"]);
        let out = output(cmd);
        assert_eq!(out.code, 0, "{}", out.stderr);
        serde_json::from_str::<Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    /// Replaces the sandbox path with `[SANDBOX]` (for snapshots).
    pub fn scrub(&self, text: &str) -> String {
        let root = self.root.path().canonicalize().unwrap();
        text.replace(&root.display().to_string(), "[SANDBOX]")
            .replace(&self.root.path().display().to_string(), "[SANDBOX]")
    }

    /// Removes the seals of the sandbox's runs (kept under `HOME`, which is the sandbox): for a test
    /// that makes a journal's state by hand.
    pub fn forget_seals(&self) {
        let _ = std::fs::remove_dir_all(self.path(".local/state/delta/seals"));
    }

    /// Every file under the sandbox, as text, must not contain `needle`.
    pub fn assert_nowhere(&self, needle: &str) {
        fn walk(dir: &Path, needle: &str) {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, needle);
                } else if let Ok(bytes) = std::fs::read(&path) {
                    assert!(
                        !String::from_utf8_lossy(&bytes).contains(needle),
                        "{needle:?} was written to {}",
                        path.display()
                    );
                }
            }
        }
        walk(self.root.path(), needle);
    }
}

/// A finished process.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` and collects its output.
pub fn output(mut cmd: Command) -> Output {
    let out = cmd.output().unwrap();
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `cmd` with `input` on its standard input and collects its output.
pub fn output_with_stdin(mut cmd: Command, input: &str) -> Output {
    use std::io::Write;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // A program that exits without reading all of it closes the pipe; that is its business.
    let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    let out = child.wait_with_output().unwrap();
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Reads a JSONL file.
pub fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Reads a JSON file.
pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Record `id` of the `io/` folder `dir`: the file `<id>.json`, else the last line with that id in
/// the folder's packs (`pack-*.jsonl`, one record per line, its `id` first), without the `id`.
pub fn io_record(dir: &Path, id: &str) -> Value {
    let file = dir.join(format!("{id}.json"));
    if file.exists() {
        return read_json(&file);
    }
    let mut packs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    packs.sort();
    let mut found = None;
    for pack in packs {
        for line in std::fs::read_to_string(&pack).unwrap().lines() {
            let Ok(mut record) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if record["id"] == id {
                record.as_object_mut().unwrap().remove("id");
                found = Some(record);
            }
        }
    }
    found.unwrap_or_else(|| panic!("no record {id} in {}", dir.display()))
}

/// The ids of the records of the `io/` folder `dir`, in files of their own or in packs.
pub fn io_record_ids(dir: &Path) -> Vec<String> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".jsonl") {
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                if let Ok(record) = serde_json::from_str::<Value>(line) {
                    ids.push(record["id"].as_str().unwrap().to_string());
                }
            }
        } else if !name.ends_with(".index") {
            ids.push(name.strip_suffix(".json").unwrap_or(&name).to_string());
        }
    }
    ids.sort();
    ids
}

/// The record of tool call `call` of a run (in `io/tool_executions/`): `exit_code`,
/// `duration_ms`, `command`, `stdout`, `stderr` (and what a kind of tool adds).
pub fn tool_record(run_dir: &Path, call: &str) -> Value {
    io_record(&run_dir.join("io/tool_executions"), call)
}

/// The record of LLM call `id` of a run (in `io/invocations/`): `metadata`, `request`,
/// `response`.
pub fn invocation(run_dir: &Path, id: &str) -> Value {
    io_record(&run_dir.join("io/invocations"), id)
}

/// The bodies of the requests the server received, as JSON.
pub fn bodies(server: &ScriptedServer) -> Vec<Value> {
    server.requests().iter().map(|r| r.json()).collect()
}

/// An agent.yaml with these tools (YAML list items, indented by two spaces).
pub fn agent_yaml(tools: &str) -> String {
    format!("name: test-agent\nllm:\n  model: test-model\ntools:\n{tools}")
}

/// The echo and write tools of the original's golden sample.
pub const ECHO_AND_WRITE: &str = "  - name: echo\n    exec: \"echo ${message}\"\n  - name: write_to_file\n    exec: \"tee ${filename}\"\n    stdin: content\n";

/// Every request the server received is one a strict OpenAI-compatible server accepts: each assistant
/// message with tool calls is followed immediately by one tool result per call, in call order.
pub fn assert_well_formed(server: &ScriptedServer) {
    for (n, body) in bodies(server).iter().enumerate() {
        let messages = body["messages"].as_array().unwrap();
        for (i, m) in messages.iter().enumerate() {
            let Some(calls) = m["tool_calls"].as_array().filter(|c| !c.is_empty()) else {
                if m["role"] == "tool" {
                    let prev_is_call_turn = messages[..i]
                        .iter()
                        .rev()
                        .find(|p| p["role"] != "tool")
                        .is_some_and(|p| p["tool_calls"].as_array().is_some_and(|c| !c.is_empty()));
                    assert!(
                        prev_is_call_turn,
                        "request {n}: a tool message without calls before it: {body}"
                    );
                }
                continue;
            };
            for (k, call) in calls.iter().enumerate() {
                let result = messages
                    .get(i + 1 + k)
                    .unwrap_or_else(|| panic!("request {n}: missing result for {call}"));
                assert_eq!(
                    result["role"],
                    "tool",
                    "request {n}, message {}: expected a tool result: {body}",
                    i + 1 + k
                );
                assert_eq!(
                    result["tool_call_id"], call["id"],
                    "request {n}: results out of order: {body}"
                );
            }
            if let Some(next) = messages.get(i + 1 + calls.len()) {
                assert_ne!(
                    next["role"], "tool",
                    "request {n}: more results than calls: {body}"
                );
            }
        }
    }
}

/// Waits until `path` exists (20 s at most).
pub fn wait_for(path: &Path) {
    let start = std::time::Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The types of the journal's events, in order.
pub fn kinds(sb: &Sandbox) -> Vec<String> {
    sb.journal()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

/// The live processes (not zombies), each with the fields of its `/proc/<pid>/stat` after the
/// command name (state first).
pub fn live_processes() -> Vec<(i32, Vec<String>)> {
    let mut live = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let fields: Vec<String> = rest.split_whitespace().map(str::to_string).collect();
        let dead = matches!(fields.first().map(String::as_str), Some("Z" | "X" | "x"));
        if !dead {
            live.push((pid, fields));
        }
    }
    live
}

/// The live processes (not zombies) whose process group is `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    live_processes()
        .into_iter()
        .filter(|(_, fields)| fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid))
        .map(|(pid, _)| pid)
        .collect()
}

/// The pid written to `path` (waits for the file and its number, 20 s at most).
pub fn pid_in(path: &Path) -> i32 {
    let start = std::time::Instant::now();
    loop {
        // The file may be seen before the shell has written the number into it.
        if let Ok(pid) = std::fs::read_to_string(path)
            .unwrap_or_default()
            .trim()
            .parse()
        {
            return pid;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "{} holds no pid",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `cmd` run by `program` with `args` before it (`strace -f … delta run …`): the same
/// environment, folder and standard input.
pub fn wrapped(cmd: &Command, program: &Path, args: &[&str]) -> Command {
    let mut outer = Command::new(program);
    outer.args(args).arg(cmd.get_program()).args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => outer.env(key, value),
            None => outer.env_remove(key),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        outer.current_dir(dir);
    }
    outer.stdin(Stdio::null());
    outer
}

/// In a trace of `write` and `fdatasync` calls with their files (`strace -f -y`, one line each:
/// `PID call(…`): the number of the `fdatasync` call, counted in the thread that wrote `RUN_END` to
/// a `journal.jsonl`, that follows that write.
pub fn flush_after_end(text: &str) -> Option<usize> {
    let lines: Vec<(&str, &str)> = text
        .lines()
        .map(|l| match l.split_once(' ') {
            Some((pid, call)) if pid.bytes().all(|b| b.is_ascii_digit()) => {
                (pid, call.trim_start())
            }
            _ => ("", l),
        })
        .collect();
    let (end, thread) = lines
        .iter()
        .enumerate()
        .find(|(_, (_, call))| {
            call.starts_with("write(")
                && call.contains("journal.jsonl>")
                && call.contains("RUN_END")
        })
        .map(|(i, (thread, _))| (i, *thread))?;
    let after = (end..lines.len())
        .find(|&i| lines[i].0 == thread && lines[i].1.starts_with("fdatasync("))?;
    Some(
        lines[..=after]
            .iter()
            .filter(|(t, call)| *t == thread && call.starts_with("fdatasync("))
            .count(),
    )
}

/// Runs `cmd` under `strace`, its `write` and `fdatasync` calls traced with their files into `log`
/// (it must succeed); the trace ([`flush_after_end`] reads it).
pub fn traced_writes(cmd: &Command, strace: &Path, log: &Path) -> String {
    let log_arg = log.display().to_string();
    let args = [
        "-f",
        "-qq",
        "-y",
        "-s",
        "4096",
        "-e",
        "trace=write,fdatasync",
        "-o",
        &log_arg,
    ];
    let out = output(wrapped(cmd, strace, &args));
    assert_eq!(out.code, 0, "{}", out.stderr);
    std::fs::read_to_string(log).unwrap()
}

/// Runs `cmd` under `strace`, killed (SIGKILL) at its thread's `fdatasync` number `nth` (as
/// [`flush_after_end`] counts them); the kill must happen.
pub fn killed_at_fdatasync(cmd: &Command, strace: &Path, nth: usize) -> Output {
    let inject = format!("inject=fdatasync:signal=KILL:when={nth}");
    let args = [
        "-f",
        "-qq",
        "-o",
        "/dev/null",
        "-e",
        "trace=fdatasync",
        "-e",
        &inject,
    ];
    let out = output(wrapped(cmd, strace, &args));
    assert_ne!(out.code, 0, "the kill did not happen: {}", out.stderr);
    out
}

/// The live processes whose command line or working folder is under `root`.
pub fn processes_under(root: &Path) -> Vec<(i32, String)> {
    let root = root.canonicalize().unwrap();
    let needle = root.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for (pid, _) in crate::support::live_processes() {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
        if cmdline.contains(&needle) || cwd.starts_with(&root) {
            found.push((pid, cmdline));
        }
    }
    found
}

/// Waits (10 s at most) until no process is left under `root`.
pub fn assert_no_process_under(root: &Path) {
    let start = std::time::Instant::now();
    loop {
        let left = processes_under(root);
        if left.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "processes left: {left:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `delta run --agent agent -w ws -m go` against `server`, in the background (its output
/// discarded), returned once `ready()` holds (30 s at most): for tests that kill or interrupt a run
/// at a chosen point.
pub fn run_in_background_until(
    sb: &Sandbox,
    server: &ScriptedServer,
    what: &str,
    ready: impl Fn() -> bool,
) -> std::process::Child {
    let mut cmd = sb.delta(Some(server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = cmd.spawn().unwrap();
    let start = std::time::Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "{what} never happened"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child
}

/// Sends SIGINT to `child` and waits for it: its exit code and how long it took to exit.
pub fn interrupt(child: &mut std::process::Child) -> (Option<i32>, std::time::Duration) {
    let sent = std::time::Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let code = child.wait().unwrap().code();
    (code, sent.elapsed())
}

/// The series of a randomised crash test: its seed (`DELTA_CRASH_SEED` replays one; otherwise from
/// the clock) and its number of trials (`DELTA_CRASH_TRIALS`, else `default`).
pub fn crash_series(default: usize) -> (u64, usize) {
    testkit::crash_series("DELTA", default)
}
