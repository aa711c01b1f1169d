//! The README's delta quick start, run as written: its commands are read from README.md itself (so
//! the test and the README cannot drift apart) and run one by one by `sh`, with `delta` on `PATH`
//! and the model played by a scripted server (`DELTA_BASE_URL`, as the README suggests for any
//! OpenAI-compatible server). The server's script makes each command meet the situation its comment
//! names: an interrupted run, a question, a completed run, a failed one.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use crate::support::read_json;

/// The commands of the README's `### delta` section, in order: every line of its `bash` blocks
/// without comments and blank lines.
fn quick_start_commands() -> Vec<String> {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let text = std::fs::read_to_string(&readme).unwrap();
    let section = text
        .split("\n### delta\n")
        .nth(1)
        .expect("README has a '### delta' section")
        .split("\n### ")
        .next()
        .unwrap();
    let mut commands = Vec::new();
    let mut in_bash = false;
    for line in section.lines() {
        match line.trim() {
            "```bash" => in_bash = true,
            "```" => in_bash = false,
            code if in_bash => {
                let code = code.split(" #").next().unwrap().trim();
                if !code.is_empty() && !code.starts_with('#') {
                    commands.push(code.to_string());
                }
            }
            _ => {}
        }
    }
    commands
}

/// A shell session: commands run by `sh -c` in a folder, with an environment, `cd` and `export`
/// carried over from one command to the next as in an interactive shell.
struct Session {
    home: tempfile::TempDir,
    cwd: PathBuf,
    env: Vec<(String, String)>,
}

impl Session {
    fn new(server: &ScriptedServer) -> Self {
        let home = tempfile::tempdir().unwrap();
        let bin = Path::new(env!("CARGO_BIN_EXE_delta")).parent().unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
        let cwd = home.path().canonicalize().unwrap();
        Self {
            env: vec![
                ("HOME".into(), cwd.display().to_string()),
                ("PATH".into(), path),
                ("DELTA_BASE_URL".into(), server.openai_base()),
                ("TZ".into(), "UTC".into()),
            ],
            cwd,
            home,
        }
    }

    fn command(&self, line: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(line).current_dir(&self.cwd).env_clear();
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Runs `line`; `cd` and `export` change the session instead.
    fn run(&mut self, line: &str) -> (i32, String, String) {
        if let Some(dir) = line.strip_prefix("cd ") {
            self.cwd = self.cwd.join(dir.trim());
            assert!(self.cwd.is_dir(), "{line}: no such folder");
            return (0, String::new(), String::new());
        }
        if let Some(assignment) = line.strip_prefix("export ") {
            let (k, v) = assignment.split_once('=').unwrap();
            self.env.push((k.to_string(), v.to_string()));
            return (0, String::new(), String::new());
        }
        let out = self.command(line).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs `line` and interrupts it (SIGINT, as Ctrl-C would) once the server has `requests`
    /// requests, that is while it waits for the model.
    fn run_interrupted(&self, line: &str, server: &ScriptedServer, requests: usize) -> i32 {
        let mut child = self
            .command(line)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while server.request_count() < requests {
            assert!(start.elapsed() < Duration::from_secs(30), "no request came");
            std::thread::sleep(Duration::from_millis(10));
        }
        // Ctrl-C reaches the program in the foreground: delta, not the `sh` running it.
        let children = format!("/proc/{0}/task/{0}/children", child.id());
        let delta: i32 = std::fs::read_to_string(children)
            .unwrap()
            .split_whitespace()
            .next()
            .and_then(|pid| pid.parse().ok())
            .unwrap_or(child.id() as i32);
        kill(Pid::from_raw(delta), Signal::SIGINT).unwrap();
        let status = child.wait().unwrap();
        status.code().unwrap_or(-1)
    }

    fn workspace(&self) -> PathBuf {
        self.home.path().join("my-agent/workspaces/W001")
    }

    /// The metadata of the run `LATEST` names.
    fn latest(&self) -> Value {
        let ws = self.workspace();
        let id = std::fs::read_to_string(ws.join(".delta/LATEST")).unwrap();
        read_json(&ws.join(".delta").join(id.trim()).join("metadata.json"))
    }
}

#[test]
fn the_delta_quick_start_runs_as_written() {
    // The quick start's agent comes from `delta init`, sandboxed: it needs the kernel's Landlock.
    if testkit::needs::landlock().is_none() {
        return;
    }
    let commands = quick_start_commands();
    // The situations below are scripted for these commands; a README change must change both.
    assert_eq!(
        commands,
        [
            "delta init my-agent -t hello-world",
            "cd my-agent",
            "export DELTA_API_KEY=sk-...",
            "delta run -m \"Create notes.txt with three ideas for a weekend trip\" -y",
            "delta continue -w workspaces/W001",
            "delta continue -w workspaces/W001 -m \"Use Lisbon\"",
            "delta continue -w workspaces/W001 -m \"Now add a packing list\"",
            "delta continue -w workspaces/W001 -m \"Try again\"",
            "delta continue --last -m \"One more thing\"",
            "delta continue -w workspaces/W001 --from-iteration 2 -m \"Do it differently\"",
            "delta list-runs -w workspaces/W001 --format json",
            "delta show -w workspaces/W001",
        ]
    );
    let notes = "1. Hike\n2. Museum\n3. Market\n";
    let server = ScriptedServer::start([
        // `delta run`: interrupted while the model thinks.
        Reply::text("too late").delay(Duration::from_secs(20)),
        // `continue` resumes: the model writes the notes, then asks which city.
        Reply::tool_calls([ToolCallSpec::new(
            "c1",
            "create_file",
            json!({"filename": "notes.txt", "content": notes}),
        )]),
        Reply::tool_call("c2", "ask_human", json!({"prompt": "Which city?"})),
        // The answer: the run completes.
        Reply::text("Notes for Lisbon are in notes.txt."),
        // Extending it fails (a request the server refuses, not retried).
        Reply::error(400, "model overloaded"),
        // The retry, the next message and the fork complete.
        Reply::text("Packing list added."),
        Reply::text("Done."),
        Reply::text("A different plan."),
    ]);
    let mut session = Session::new(&server);
    let expect = |session: &mut Session, i: usize, code: i32, status: &str| {
        let (got, stdout, stderr) = session.run(&commands[i]);
        assert_eq!(
            got, code,
            "{}\n--- stdout\n{stdout}--- stderr\n{stderr}",
            commands[i]
        );
        if !status.is_empty() {
            assert_eq!(session.latest()["status"], status, "{}", commands[i]);
        }
        stdout
    };
    expect(&mut session, 0, 0, "");
    assert!(session.home.path().join("my-agent/agent.yaml").is_file());
    expect(&mut session, 1, 0, "");
    expect(&mut session, 2, 0, "");
    assert_eq!(session.run_interrupted(&commands[3], &server, 1), 130);
    assert_eq!(session.latest()["status"], "INTERRUPTED");
    expect(&mut session, 4, 101, "WAITING_FOR_INPUT");
    assert_eq!(
        std::fs::read_to_string(session.workspace().join("notes.txt")).unwrap(),
        notes
    );
    expect(&mut session, 5, 0, "COMPLETED");
    expect(&mut session, 6, 1, "FAILED");
    expect(&mut session, 7, 0, "COMPLETED");
    expect(&mut session, 8, 0, "COMPLETED");
    expect(&mut session, 9, 0, "COMPLETED");
    let forked = session.latest();
    assert_eq!(forked["forked_from"]["iteration"], 2, "{forked}");
    let listing = expect(&mut session, 10, 0, "");
    let runs: Value = serde_json::from_str(&listing).unwrap();
    assert_eq!(runs.as_array().map(Vec::len), Some(2), "{listing}");
    let transcript = expect(&mut session, 11, 0, "");
    assert!(transcript.contains("A different plan."), "{transcript}");
    // The question got the answer given with -m, as the result of its own call.
    let bodies: Vec<Value> = server.requests().iter().map(|r| r.json()).collect();
    let answered =
        bodies[3]["messages"].as_array().unwrap().iter().any(|m| {
            m["role"] == "tool" && m["tool_call_id"] == "c2" && m["content"] == "Use Lisbon"
        });
    assert!(answered, "{}", bodies[3]);
}

/// The README's fleet example (`## Running on many machines`), run as written by `sh` from a copy
/// of the example agent, against a throwaway PostgreSQL server (its URL put in the block's
/// `export DELTA_STORE=` line, the one thing the README asks the reader to choose).
#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn the_readme_fleet_example_runs_as_written() {
    let Some(pg) = testkit::postgres::Postgres::start() else {
        return;
    };
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let section = readme
        .split("\n## Running on many machines\n")
        .nth(1)
        .expect("README has a fleet section");
    let block = section
        .split("```bash\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("the fleet section has a bash block");
    let script: String = block
        .lines()
        .map(|line| match line.strip_prefix("export DELTA_STORE=") {
            Some(_) => format!("export DELTA_STORE={}", pg.store_url()),
            None => line.to_string(),
        })
        .map(|line| format!("{line}\n"))
        .collect();
    assert!(script.contains("delta worker"), "{script}");
    let dir = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello-world");
    std::fs::create_dir(dir.path().join("examples")).unwrap();
    let copy = Command::new("cp")
        .arg("-r")
        .arg(&examples)
        .arg(dir.path().join("examples/hello-world"))
        .status()
        .unwrap();
    assert!(copy.success());
    let bin = Path::new(env!("CARGO_BIN_EXE_delta")).parent().unwrap();
    let out = Command::new("sh")
        .args(["-e", "-x", "-c", &script])
        .current_dir(dir.path())
        .env_clear()
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env("HOME", dir.path())
        .env("TZ", "UTC")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "--- stdout\n{stdout}--- stderr\n{stderr}"
    );
    assert!(stdout.contains("\"status\":\"COMPLETED\""), "{stdout}");
    assert!(stdout.contains("RUN_END"), "the export: {stdout}");
    let made: Vec<PathBuf> = std::fs::read_dir(dir.path().join("delta-runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(made.len(), 1, "{made:?}");
    assert!(
        made[0].join("hello.txt").is_file(),
        "the tool ran in the worker's copy"
    );
}
