//! Persistent shell sessions: `delta sessions` / `delta-sessions` with the original's outputs, state
//! that persists across calls and processes, a program on a pseudo-terminal, the built-in session
//! tools of an agent with `sessions: true`, and no session process left after a run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer};

use crate::support::{
    Output, Sandbox, assert_no_process_under, interrupt, output, output_with_stdin,
    processes_under, run_in_background_until,
};

/// `delta sessions ARGS` (or, with `compat`, `delta-sessions ARGS` through a link) in `dir`.
fn sessions(dir: &Path, compat: bool, args: &[&str]) -> Command {
    let program = if compat {
        let link = dir.join("bin/delta-sessions");
        if !link.exists() {
            std::fs::create_dir_all(link.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_delta"), &link).unwrap();
        }
        link
    } else {
        PathBuf::from(env!("CARGO_BIN_EXE_delta"))
    };
    let mut cmd = Command::new(program);
    if !compat {
        cmd.arg("sessions");
    }
    cmd.args(args).current_dir(dir).env_remove("DELTA_RUN_ID");
    cmd
}

fn json_of(out: &Output) -> Value {
    assert_eq!(out.code, 0, "{out:?}");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

fn exec(dir: &Path, compat: bool, id: &str, command: &str) -> Output {
    output_with_stdin(sessions(dir, compat, &["exec", id]), command)
}

/// A shell that ends is started again for the next command, many times over: what each shell
/// saved through its control pipe reaches the host. A reader left from an earlier shell used to
/// take part of the next shell's message: its saved state was lost, and when the part taken was
/// the end marker, the call waited for ever. Bounded: a call that hangs fails the test.
#[test]
fn a_session_started_again_many_times_keeps_what_each_shell_saved() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let started = json_of(&output(sessions(&dir, false, &["start"])));
    let id = started["session_id"].as_str().unwrap().to_string();
    let (done, finished) = std::sync::mpsc::channel();
    let worker = {
        let (dir, id) = (dir.clone(), id.clone());
        std::thread::spawn(move || {
            for i in 0..25 {
                // Each shell is a new one (the last command ended the one before): what it sees
                // of `N` is what the shell before it saved, through its control pipe.
                let out = exec(&dir, false, &id, &format!("echo \"was $N\"; export N={i}"));
                let was = if i == 0 {
                    String::new()
                } else {
                    (i - 1).to_string()
                };
                assert_eq!(
                    (out.code, out.stdout.clone()),
                    (0, format!("was {was}\n")),
                    "command {i}: {out:?}"
                );
                let out = exec(&dir, false, &id, "exit 0");
                assert_eq!(out.code, 0, "{out:?}");
            }
            let _ = done.send(());
        })
    };
    let answered = finished.recv_timeout(Duration::from_secs(120));
    if answered.is_err() {
        let _ = output(sessions(&dir, false, &["end", &id]));
        panic!("a command of a session started again got no answer within 120 s");
    }
    worker.join().unwrap();
    let ended = json_of(&output(sessions(&dir, false, &["end", &id])));
    assert_eq!(ended["status"], "terminated");
}

#[test]
fn cd_and_export_persist_across_exec_and_processes_with_the_original_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir(dir.join("sub")).unwrap();
    for compat in [false, true] {
        let started = json_of(&output(sessions(dir, compat, &["start"])));
        let keys: Vec<&str> = started
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["session_id", "command", "work_dir", "status"]);
        let id = started["session_id"].as_str().unwrap().to_string();
        assert!(id.starts_with("sess_") && id.len() == 13, "{id}");
        assert_eq!(started["command"], "bash");
        assert_eq!(started["status"], "active");
        assert_eq!(
            started["work_dir"],
            dir.canonicalize().unwrap().to_str().unwrap()
        );

        let out = exec(
            dir,
            compat,
            &id,
            "cd sub && export GREETING=hi\necho out; echo err >&2",
        );
        assert_eq!(
            (out.code, out.stdout.as_str(), out.stderr.as_str()),
            (0, "out\n", "err\n")
        );
        let out = exec(
            dir,
            compat,
            &id,
            "basename \"$(pwd)\"; echo \"$GREETING\"; exit 3",
        );
        assert_eq!((out.code, out.stdout.as_str()), (3, "sub\nhi\n"), "{out:?}");
        // `exit` ended the shell: the next command gets one rebuilt from the saved state, and is told.
        let out = exec(dir, compat, &id, "basename \"$(pwd)\"; echo \"$GREETING\"");
        assert_eq!((out.code, out.stdout.as_str()), (0, "sub\nhi\n"), "{out:?}");
        assert!(out.stderr.contains("started again"), "{}", out.stderr);

        let out = exec(dir, compat, &id, "  \n");
        assert_eq!(out.code, 1);
        assert_eq!(
            out.stderr.trim(),
            "Error: No command provided (stdin is empty)"
        );

        let list = json_of(&output(sessions(dir, compat, &["list"])));
        let entry = list
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["session_id"] == id.as_str())
            .unwrap();
        assert_eq!(entry["execution_count"], 3);
        assert_eq!(entry["status"], "active");
        assert!(entry["created_at"].is_string() && entry["last_executed_at"].is_string());

        let ended = json_of(&output(sessions(dir, compat, &["end", &id])));
        assert_eq!(ended, json!({"status": "terminated", "session_id": id}));
        let out = exec(dir, compat, &id, "true");
        assert_eq!(out.code, 1);
        assert_eq!(
            out.stderr.trim(),
            format!("Error: Session {id} is terminated")
        );
        let cleaned = json_of(&output(sessions(dir, compat, &["cleanup"])));
        assert_eq!(cleaned, json!({"cleaned": [id]}));
    }
    let out = exec(dir, true, "sess_00000000", "true");
    assert_eq!(out.code, 1);
    assert_eq!(out.stderr.trim(), "Error: Session sess_00000000 not found");
    let out = output(sessions(dir, true, &["frobnicate"]));
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.starts_with("Unknown command: frobnicate"),
        "{}",
        out.stderr
    );
    let out = output(sessions(dir, false, &["start", "--id", "../escape"]));
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("invalid session id"), "{}", out.stderr);
    assert_no_process_under(dir);
}

#[test]
fn a_chosen_id_a_custom_folder_and_a_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let args = [
        "--sessions-dir",
        "elsewhere",
        "start",
        "--id",
        "build",
        "sh",
    ];
    let started = json_of(&output(sessions(dir, false, &args)));
    assert_eq!(started["session_id"], "build");
    assert_eq!(started["command"], "sh");
    assert!(dir.join("elsewhere/build/metadata.json").is_file());
    let again = output(sessions(dir, false, &args));
    assert_eq!(again.code, 1);
    assert_eq!(again.stderr.trim(), "Error: Session build already exists");

    let mut slow = sessions(
        dir,
        false,
        &["--sessions-dir", "elsewhere", "exec", "build"],
    );
    slow.args(["--timeout", "0.5"]);
    let started_at = Instant::now();
    let out = output_with_stdin(slow, "export KEPT=1; sleep 30");
    assert_eq!(out.code, 124, "{out:?}");
    assert!(started_at.elapsed() < Duration::from_secs(10));
    let out = output_with_stdin(
        sessions(
            dir,
            false,
            &["--sessions-dir", "elsewhere", "exec", "build"],
        ),
        "echo \"[$KEPT]\"",
    );
    assert_eq!(
        out.stdout, "[]\n",
        "the timed-out command's export was not saved"
    );
    output(sessions(
        dir,
        false,
        &["--sessions-dir", "elsewhere", "end", "build"],
    ));
    assert_no_process_under(dir);
}

#[test]
fn a_python_repl_on_a_pty_keeps_a_variable_between_calls() {
    if testkit::needs::python3().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let started = json_of(&output(sessions(
        dir,
        false,
        &["start", "--pty", "--id", "py", "python3", "-q"],
    )));
    assert_eq!(started["command"], "python3 -q");
    let out = exec(dir, false, "py", "x = 41");
    assert_eq!(out.code, 0, "{out:?}");
    let out = exec(dir, false, "py", "print(x + 1)");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("42\n"), "{:?}", out.stdout);
    let out = exec(dir, false, "py", "import sys; sys.exit(4)");
    assert_eq!(
        out.code, 4,
        "the program's own code once it has ended: {out:?}"
    );
    let out = exec(dir, false, "py", "print(x)");
    assert!(out.stderr.contains("started again"), "{out:?}");
    assert!(out.stdout.contains("NameError"), "{out:?}");
    output(sessions(dir, false, &["end", "py"]));
    assert_no_process_under(dir);
}

#[test]
fn a_session_whose_host_was_killed_is_rebuilt_from_its_saved_state() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir(dir.join("deep")).unwrap();
    let started = json_of(&output(sessions(dir, false, &["start", "--id", "s"])));
    assert_eq!(started["status"], "active");
    exec(dir, false, "s", "cd deep; export COLOUR=teal; unset HOME");
    let host: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(".sessions/s/host.json")).unwrap())
            .unwrap();
    for group in [&host["host"]["pgid"], &host["process"]["pgid"]] {
        let pgid = group.as_i64().unwrap() as i32;
        nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        // Killed, not yet gone: the host is asked only once it has died.
        let start = Instant::now();
        while !crate::support::group_members(pgid).is_empty() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "group {pgid} lives on"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let out = exec(
        dir,
        false,
        "s",
        "basename \"$PWD\"; echo \"$COLOUR [${HOME:-unset}]\"",
    );
    assert_eq!(out.stdout, "deep\nteal [unset]\n", "{out:?}");
    assert!(out.stderr.contains("started again"), "{}", out.stderr);
    let state = std::fs::read_to_string(dir.join(".sessions/s/state.json")).unwrap();
    assert!(
        !state.contains("PATH"),
        "only what the commands changed is saved: {state}"
    );
    output(sessions(dir, false, &["end", "s"]));
    assert_no_process_under(dir);
}

const SESSIONS_AGENT: &str =
    "name: session-agent\nllm:\n  model: test-model\nsessions: true\ntools: []\n";

fn call(id: &str, name: &str, args: Value) -> Reply {
    Reply::tool_call(id, name, args)
}

fn results(sb: &Sandbox) -> Vec<String> {
    sb.events("ACTION_RESULT")
        .iter()
        .map(|e| {
            e["payload"]["observation_content"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn continue_(sb: &Sandbox, server: &ScriptedServer, args: &[&str]) -> Output {
    let mut cmd = sb.delta(Some(server));
    cmd.args(["continue", "-w", "ws"]).args(args);
    output(cmd)
}

#[test]
fn an_agent_uses_a_session_over_three_calls_and_again_after_continue() {
    let server = ScriptedServer::start([
        call("c1", "session_start", json!({"id": "work"})),
        call(
            "c2",
            "session_exec",
            json!({"id": "work", "command": "mkdir -p sub && cd sub && export X=1"}),
        ),
        call(
            "c3",
            "session_exec",
            json!({"id": "work", "command": "basename \"$PWD\"; echo \"X=$X\""}),
        ),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(SESSIONS_AGENT);
    let out = sb.run(Some(&server), "use a session", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let tools: Vec<String> = server.requests()[0].json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        tools,
        ["session_start", "session_exec", "session_end", "ask_human"]
    );
    let seen = results(&sb);
    assert!(seen[0].contains("\"session_id\":\"work\""), "{seen:?}");
    assert!(seen[2].contains("sub\nX=1"), "{seen:?}");
    let request = &sb.events("ACTION_REQUEST")[2]["payload"];
    assert_eq!(
        request["resolved_command"],
        "session_exec work: basename \"$PWD\"; echo \"X=$X\""
    );
    let exec_ref = sb.events("ACTION_RESULT")[2]["payload"]["execution_ref"]
        .as_str()
        .unwrap()
        .to_string();
    let record = crate::support::tool_record(&sb.run_dir(), &exec_ref);
    assert!(record["stdout"].as_str().unwrap().contains("X=1"));
    // The run ended: its session's process is gone, its state kept.
    assert_no_process_under(&sb.ws());

    server.push(call(
        "c4",
        "session_exec",
        json!({"id": "work", "command": "basename \"$PWD\"; echo \"X=$X\""}),
    ));
    server.push(Reply::text("done again"));
    let out = continue_(&sb, &server, &["-m", "once more"]);
    assert_eq!(out.code, 0, "{out:?}");
    let seen = results(&sb);
    assert!(seen[3].contains("sub\nX=1"), "{seen:?}");
    assert!(
        seen[3].contains("started again"),
        "the rebuild is said: {seen:?}"
    );
    assert_no_process_under(&sb.ws());
}

#[test]
fn a_failed_run_and_a_sigkilled_one_leave_no_session_process() {
    // Fails: the model's server refuses after the session started.
    let server = ScriptedServer::start([
        call("c1", "session_start", json!({"id": "a"})),
        call(
            "c2",
            "session_exec",
            json!({"id": "a", "command": "sleep 300 & echo started"}),
        ),
        Reply::error(400, "bad request"),
    ]);
    let sb = Sandbox::new(SESSIONS_AGENT);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_no_process_under(&sb.ws());

    // Killed outright while a command runs in the session: the next call ends what was left.
    let server = ScriptedServer::start([
        call("c1", "session_start", json!({"id": "b"})),
        call(
            "c2",
            "session_exec",
            json!({"id": "b", "command": "touch started; sleep 300"}),
        ),
    ]);
    let sb = Sandbox::new(SESSIONS_AGENT);
    let marker = sb.ws().join("started");
    let mut child =
        run_in_background_until(&sb, &server, "the session's command", || marker.exists());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !processes_under(&sb.ws()).is_empty(),
        "the session outlives a SIGKILL of delta"
    );
    server.push(Reply::text("recovered"));
    let out = continue_(&sb, &server, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let seen = results(&sb);
    assert!(
        seen[1].contains("INTERRUPTED") && seen[1].contains("may or may not"),
        "{seen:?}"
    );
    assert_no_process_under(&sb.ws());
}

#[test]
fn a_session_survives_a_wait_for_an_answer() {
    if testkit::needs::python3().is_none() {
        return;
    }
    let server = ScriptedServer::start([
        call(
            "c1",
            "session_start",
            json!({"id": "py", "command": "python3 -q"}),
        ),
        call(
            "c2",
            "session_exec",
            json!({"id": "py", "command": "total = 40"}),
        ),
        call("c3", "ask_human", json!({"prompt": "How much more?"})),
    ]);
    let sb = Sandbox::new(SESSIONS_AGENT);
    let out = sb.run(Some(&server), "count", &[]);
    assert_eq!(out.code, 101, "{out:?}");
    assert!(
        !processes_under(&sb.ws()).is_empty(),
        "kept alive while the run waits"
    );
    server.push(call(
        "c4",
        "session_exec",
        json!({"id": "py", "command": "print(total + 2)"}),
    ));
    server.push(Reply::text("42"));
    let out = continue_(&sb, &server, &["-m", "2"]);
    assert_eq!(out.code, 0, "{out:?}");
    let seen = results(&sb);
    assert!(
        seen.last().unwrap().contains("42"),
        "the REPL kept its variable: {seen:?}"
    );
    assert!(!seen.last().unwrap().contains("started again"), "{seen:?}");
    assert_no_process_under(&sb.ws());
}

#[test]
fn what_a_command_does_to_its_shell_does_not_break_the_session() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    json_of(&output(sessions(dir, false, &["start", "--id", "s"])));
    // Only the user may enter the session's folder (its socket runs commands as them).
    use std::os::unix::fs::PermissionsExt;
    for folder in [".sessions", ".sessions/s"] {
        let mode = std::fs::metadata(dir.join(folder))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{folder}: {mode:o}");
    }
    // Redirecting the shell's own output does not hide the end of a command.
    let out = exec(dir, false, "s", "exec 2>&1; echo one; echo two >&2");
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "one\ntwo\n"),
        "{out:?}"
    );
    let out = exec(dir, false, "s", "exec >/dev/null; echo gone");
    assert_eq!((out.code, out.stdout.as_str()), (0, ""), "{out:?}");
    // A command that breaks PATH keeps what was saved, and says nothing of delta's own steps.
    let out = exec(
        dir,
        false,
        "s",
        "exec >&8 2>&9; export KEEP=1; PATH=/nonexistent",
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    let state = std::fs::read_to_string(dir.join(".sessions/s/state.json")).unwrap();
    assert!(
        state.contains("\"KEEP\": \"1\"") && !state.contains("\"HOME\""),
        "{state}"
    );
    // Big output is collected in time that grows with its size, not its square.
    let started = Instant::now();
    let out = exec(
        dir,
        false,
        "s",
        "export PATH=/usr/bin:/bin; head -c 8000000 /dev/zero | tr '\\0' x",
    );
    assert_eq!(out.stdout.len(), 8_000_000, "{}", out.stderr);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    output(sessions(dir, false, &["end", "s"]));
    assert_no_process_under(dir);
}

#[test]
fn a_caller_that_leaves_does_not_block_the_session_and_a_removed_folder_ends_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    json_of(&output(sessions(dir, false, &["start", "--id", "s"])));
    let mut caller = sessions(dir, false, &["exec", "s"]);
    caller.stdin(std::process::Stdio::piped());
    let mut child = caller.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"sleep 300").unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    let started = Instant::now();
    let out = output_with_stdin(
        sessions(dir, false, &["exec", "s", "--timeout", "20"]),
        "echo free",
    );
    assert_eq!(out.stdout, "free\n", "{out:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    exec(dir, false, "s", "sleep 600 &");
    std::fs::remove_dir_all(dir.join(".sessions/s")).unwrap();
    assert_no_process_under(dir);
}

#[test]
fn a_pty_program_runs_blocks_and_a_silent_one_is_stopped_at_its_timeout() {
    if testkit::needs::python3().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    json_of(&output(sessions(
        dir,
        false,
        &["start", "--pty", "--id", "py", "python3", "-q"],
    )));
    let out = exec(dir, false, "py", "def f(a):\n    return a * 2\n");
    assert_eq!(out.code, 0, "{out:?}");
    let out = exec(dir, false, "py", "print(f(21))");
    assert!(out.stdout.contains("42"), "{out:?}");
    let out = output_with_stdin(
        sessions(dir, false, &["exec", "py", "--timeout", "1"]),
        "import time; time.sleep(30)",
    );
    assert_eq!(out.code, 124, "{out:?}");
    let out = exec(dir, false, "py", "print(1 + 1)");
    assert!(
        out.stdout.contains('2') && out.stderr.contains("started again"),
        "{out:?}"
    );
    output(sessions(dir, false, &["end", "py"]));
    assert_no_process_under(dir);
}

#[test]
fn a_pty_command_still_talking_at_its_timeout_is_stopped_and_leaves_nothing_behind() {
    if testkit::needs::python3().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    json_of(&output(sessions(
        dir,
        false,
        &["start", "--pty", "--id", "py", "python3", "-q"],
    )));
    let started = std::time::Instant::now();
    let out = output_with_stdin(
        sessions(dir, false, &["exec", "py", "--timeout", "1"]),
        "import time\nwhile True:\n    print('tick', flush=True); time.sleep(0.05)\n",
    );
    assert_eq!(out.code, 124, "{out:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(out.stdout.contains("tick"), "{out:?}");
    // The next command's output is its own: no tick of the stopped loop.
    let out = exec(dir, false, "py", "print(6 * 7)");
    assert!(out.stdout.contains("42"), "{out:?}");
    assert!(!out.stdout.contains("tick"), "{out:?}");
    output(sessions(dir, false, &["end", "py"]));
    assert_no_process_under(dir);
}

#[test]
fn a_session_commands_output_is_bounded_and_says_where_it_was_cut() {
    let server = ScriptedServer::start([
        call("c1", "session_start", json!({"id": "s"})),
        call(
            "c2",
            "session_exec",
            json!({"id": "s", "command": "head -c 70000000 /dev/zero | tr '\\0' a; echo tail-end"}),
        ),
        call(
            "c3",
            "session_exec",
            json!({"id": "s", "command": "echo next"}),
        ),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(SESSIONS_AGENT);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let results = sb.events("ACTION_RESULT");
    let seen = results[1]["payload"]["observation_content"]
        .as_str()
        .unwrap();
    assert!(
        seen.contains("bytes past the 64 MiB a stream keeps were dropped"),
        "{}",
        &seen[seen.len().saturating_sub(400)..]
    );
    let record = crate::support::tool_record(&sb.run_dir(), "c2");
    let stdout = record["stdout"].as_str().unwrap();
    assert!(stdout.len() <= 64 * 1024 * 1024 + 1024, "{}", stdout.len());
    let next = results[2]["payload"]["observation_content"]
        .as_str()
        .unwrap();
    assert!(next.contains("next") && !next.contains("aaaa"), "{next}");
}

#[test]
fn an_interrupt_stops_a_session_command_at_once() {
    let server = ScriptedServer::start([
        call("c1", "session_start", json!({"id": "s"})),
        call(
            "c2",
            "session_exec",
            json!({"id": "s", "command": "touch started; sleep 300", "timeout_seconds": 200}),
        ),
    ]);
    let sb = Sandbox::new(SESSIONS_AGENT);
    let marker = sb.ws().join("started");
    let mut child =
        run_in_background_until(&sb, &server, "the session's command", || marker.exists());
    let (code, took) = interrupt(&mut child);
    assert_eq!(code, Some(130));
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_no_process_under(&sb.ws());
}

/// `delta rm -w ws --run-id ID` (it must succeed).
fn remove(sb: &Sandbox, run_id: &str) {
    let mut cmd = sb.delta(None);
    cmd.args(["rm", "-w", "ws", "--run-id", run_id]);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{out:?}");
}

/// Run `id` of `sb`, which starts session `id` with a command left running in it, then waits for
/// an answer.
fn waiting_with_session(sb: &Sandbox, id: &str) {
    let server = ScriptedServer::start([
        call("c1", "session_start", json!({"id": id})),
        call(
            "c2",
            "session_exec",
            json!({"id": id, "command": "sleep 300 & echo started"}),
        ),
        call("c3", "ask_human", json!({"prompt": "Go on?"})),
    ]);
    let out = sb.run(Some(&server), "go", &["--run-id", id]);
    assert_eq!(out.code, 101, "{out:?}");
    assert_eq!(sb.metadata()["status"], "WAITING_FOR_INPUT");
}

#[test]
fn removing_a_waiting_run_stops_the_sessions_it_owns() {
    let sb = Sandbox::new(SESSIONS_AGENT);
    waiting_with_session(&sb, "first");
    waiting_with_session(&sb, "second");
    let sessions = |sb: &Sandbox| -> Vec<String> {
        let mut named: Vec<String> = ["first", "second"]
            .into_iter()
            .filter(|id| {
                let dir = sb.ws().join(".sessions").join(id);
                processes_under(&sb.ws())
                    .iter()
                    .any(|(_, line)| line.contains(&*dir.to_string_lossy()))
            })
            .map(str::to_string)
            .collect();
        named.sort();
        named
    };
    assert_eq!(
        sessions(&sb),
        ["first", "second"],
        "{:?}",
        processes_under(&sb.ws())
    );
    remove(&sb, "first");
    // The other run's session goes on.
    assert_eq!(sessions(&sb), ["second"], "{:?}", processes_under(&sb.ws()));
    remove(&sb, "second");
    assert_no_process_under(&sb.ws());
}
