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

#[test]
fn a_confined_tool_cannot_open_the_terminal_or_type_into_it() {
    if testkit::needs::landlock().is_none() || !python() {
        return;
    }
    let sb = hostile_agent("sandbox: {filesystem: workspace-write, network: false}");
    let scripts = [
        "exec 3<>/dev/tty && echo TTY-OPENED || echo TTY-REFUSED",
        // TIOCSTI on any descriptor: refused by the filter (EACCES) before the kernel looks.
        "python3 -c 'import fcntl, termios\ntry:\n    fcntl.ioctl(1, termios.TIOCSTI, b\"x\")\nexcept OSError as e:\n    print(\"STI\", e.errno)'",
        "ps -o sid= -p $$ | tr -d ' '; echo PID $$",
        // The user's terminals are not in its /dev/pts (where namespaces can be made).
        "ls /dev/pts | grep -vc ptmx; true",
    ];
    let server = scripted(&scripts);
    // delta under a terminal of its own (`script`), as a person runs it.
    let base = sb.delta(Some(&server));
    let line = format!(
        "{} run --agent agent -w ws -m go",
        env!("CARGO_BIN_EXE_delta")
    );
    let mut script_cmd = std::process::Command::new("script");
    script_cmd
        .args(["-qec", &line, "/dev/null"])
        .current_dir(sb.root.path())
        .stdin(std::process::Stdio::null());
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => script_cmd.env(k, v),
            None => script_cmd.env_remove(k),
        };
    }
    let out = output(script_cmd);
    assert_eq!(out.code, 0, "{out:?}");
    let seen = observations(&sb);
    assert!(seen[0].contains("TTY-REFUSED"), "{}", seen[0]);
    assert!(seen[1].contains("STI 13"), "{}", seen[1]);
    // A session of its own: its session id is its own pid.
    let numbers: Vec<&str> = seen[2]
        .lines()
        .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .collect();
    assert!(
        seen[2].contains(&format!("PID {}", numbers.first().unwrap_or(&"?"))),
        "the tool is not a session leader: {}",
        seen[2]
    );
    if testkit::needs::private_mounts().is_some() {
        assert!(seen[3].starts_with("=== STDOUT ===\n0\n"), "{}", seen[3]);
    }
    model_was_told(&server, 1, "STI 13");
}

#[test]
fn network_off_reaches_no_unix_socket_outside_the_run() {
    if testkit::needs::landlock().is_none() || !python() {
        return;
    }
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    let sb = hostile_agent("sandbox: {filesystem: workspace-write, network: false}");
    // A server outside the run, on a pathname socket (a session host, a database) and an abstract
    // one.
    let path = sb.path("outside.sock");
    let by_path = UnixListener::bind(&path).unwrap();
    by_path.set_nonblocking(true).unwrap();
    let name = format!("delta-red-team-{}", std::process::id());
    let abstract_addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let by_name = UnixListener::bind_addr(&abstract_addr).unwrap();
    by_name.set_nonblocking(true).unwrap();
    let connect = |target: &str| {
        format!(
            "python3 -c 'import socket\ntry:\n    s = socket.socket(socket.AF_UNIX)\n    s.connect({target})\n    print(\"CONNECTED\")\nexcept OSError as e:\n    print(\"REFUSED\", e.errno)'"
        )
    };
    let scripts = [
        connect(&format!("\"{}\"", path.display())),
        connect(&format!("\"\\0{name}\"")),
        "python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"x\"); print(\"PAIR\", b.recv(1))'"
            .to_string(),
    ];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let (server, _, seen) = attack(&sb, &scripts);
    assert!(seen[0].contains("REFUSED 13"), "{}", seen[0]);
    assert!(seen[1].contains("REFUSED 13"), "{}", seen[1]);
    assert!(seen[2].contains("PAIR b'x'"), "{}", seen[2]);
    assert!(
        by_path.accept().is_err(),
        "a tool reached the pathname socket"
    );
    assert!(
        by_name.accept().is_err(),
        "a tool reached the abstract socket"
    );
    model_was_told(&server, 0, "REFUSED 13");
}

#[test]
fn a_tool_cannot_trace_delta_or_read_its_key() {
    if !python() {
        return;
    }
    // No filesystem sandbox at all: the filter and delta's own protection still hold.
    let sb = hostile_agent("sandbox: {filesystem: off, network: false}");
    let ready = sb.path("ws/delta.pid");
    let go = sb.path("go");
    let scripts = [
        format!(
            "echo $PPID > delta.pid; while [ ! -e {} ]; do sleep 0.05; done; echo waited",
            go.display()
        ),
        // Root can read another process's environment (delta's key is no longer in it); nobody
        // confined can read its memory.
        "cat /proc/$PPID/environ > stolen.txt 2>&1; \
         head -c 16 /proc/$PPID/mem > /dev/null && echo MEM-READ || echo MEM-REFUSED"
            .to_string(),
        "python3 -c 'import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nr = libc.ptrace(16, os.getppid(), 0, 0)\nprint(\"PTRACE\", r, ctypes.get_errno())\nfd = libc.syscall(434, os.getppid(), 0)\nprint(\"GETFD\", libc.syscall(438, fd, 3, 0), ctypes.get_errno())'"
            .to_string(),
    ];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let server = scripted(&scripts);
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while !ready.exists() || std::fs::read_to_string(&ready).unwrap().trim().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the tool never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid: u32 = std::fs::read_to_string(&ready)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(pid, child.id(), "the tool's parent is delta");
    // Whoever can read delta's environment (root can; a user cannot, delta being non-dumpable)
    // does not find the key there.
    let mut environ = Vec::new();
    if let Ok(mut file) = std::fs::File::open(format!("/proc/{pid}/environ")) {
        let _ = file.read_to_end(&mut environ);
    }
    assert!(
        !String::from_utf8_lossy(&environ).contains(KEY),
        "the key is in /proc/{pid}/environ"
    );
    std::fs::write(&go, "").unwrap();
    let status = child.wait().unwrap();
    assert!(status.success());
    let seen = observations(&sb);
    assert!(seen[1].contains("MEM-REFUSED"), "{}", seen[1]);
    assert!(seen[2].contains("PTRACE -1 13"), "{}", seen[2]);
    assert!(seen[2].contains("GETFD -1 13"), "{}", seen[2]);
    let stolen = std::fs::read_to_string(sb.ws().join("stolen.txt")).unwrap_or_default();
    assert!(!stolen.contains(KEY));
    model_was_told(&server, 2, "PTRACE -1 13");
}

#[test]
fn a_workspace_env_written_by_a_tool_does_not_configure_delta() {
    let good = ScriptedServer::start([
        Reply::tool_call(
            "c0",
            "sh",
            json!({"script": "printf 'DELTA_BASE_URL=%s\\nDELTA_API_KEY=sk-planted-9999\\nLD_PRELOAD=/nonexistent/evil.so\\nPLAIN=kept\\n' \"$EVIL\" > .env"}),
        ),
        Reply::text("first done"),
        Reply::tool_call(
            "c1",
            "sh",
            json!({"script": "echo PRELOAD=${LD_PRELOAD:-none} PLAIN=$PLAIN; cat .env"}),
        ),
        Reply::text("second done"),
    ]);
    let evil = ScriptedServer::start([Reply::text("stolen")]);
    let sb = hostile_agent("sandbox: {filesystem: workspace-write, network: false}");
    // The user's endpoint and key in the agent's .env, as a person sets them up.
    sb.file(
        "agent/.env",
        &format!(
            "DELTA_BASE_URL={}\nDELTA_API_KEY={KEY}\nEVIL={}\n",
            good.openai_base(),
            evil.openai_base()
        ),
    );
    let mut cmd = sb.delta(None);
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"]);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(sb.ws().join(".env").exists());
    let mut cmd = sb.delta(None);
    cmd.args(["continue", "-w", "ws", "-m", "more"]);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        evil.request_count(),
        0,
        "a request went to the tool's server"
    );
    assert_eq!(good.request_count(), 4);
    for request in good.requests() {
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
    }
    assert!(
        sb.scrub(&out.stderr).contains(
            "warning: ignored DELTA_BASE_URL, DELTA_API_KEY, LD_PRELOAD from [SANDBOX]/ws/.env"
        ),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("cannot be preloaded"),
        "{}",
        out.stderr
    );
    let seen = observations(&sb);
    assert!(seen[1].contains("PRELOAD=none PLAIN=kept"), "{}", seen[1]);
    // The planted key is scrubbed like a key where a tool prints it.
    assert!(seen[1].contains("DELTA_API_KEY=[REDACTED]"), "{}", seen[1]);
    assert!(!seen[1].contains("sk-planted-9999"), "{}", seen[1]);
}

/// An agent with the built-in session tools and this `sandbox:` line.
fn session_agent(sandbox: &str) -> Sandbox {
    Sandbox::new(&format!(
        "name: hostile\nllm:\n  model: m\n{sandbox}\nsessions: true\ntools: []\n"
    ))
}

/// `session_exec` of `command` in session `s`, as call `id`.
fn in_session(id: &str, command: &str) -> Reply {
    Reply::tool_call(id, "session_exec", json!({"id": "s", "command": command}))
}

#[test]
fn a_session_keeps_its_runs_sandbox_whatever_its_folder_says() {
    if testkit::needs::landlock().is_none() || !python() {
        return;
    }
    let sb = session_agent("sandbox: {filesystem: workspace-write, network: false}");
    let outside = sb.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    // The shell claims no sandbox and another workspace in the session's metadata, then names a
    // dead host in host.json, so that the next command starts a new host.
    let claim = format!(
        r#"python3 -c 'import json
p = ".sessions/s/metadata.json"; m = json.load(open(p))
m["sandbox"] = {{"filesystem": "off", "network": True, "writable": [], "readable": []}}
m["work_dir"] = "{}"
json.dump(m, open(p, "w"))
h = ".sessions/s/host.json"; r = json.load(open(h))
r["host"]["pgid"] = 999999; r["host"]["start_ticks"] = 1
json.dump(r, open(h, "w"))
print("CLAIMED")'"#,
        outside.display()
    );
    let server = ScriptedServer::start([
        Reply::tool_call("c0", "session_start", json!({"id": "s"})),
        in_session("c1", &claim),
        in_session(
            "c2",
            &format!(
                "touch {}/escaped.txt && echo ESCAPED || echo REFUSED",
                outside.display()
            ),
        ),
        Reply::text("done"),
    ]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let seen = observations(&sb);
    assert!(seen[1].contains("CLAIMED"), "{}", seen[1]);
    assert!(seen[2].contains("REFUSED"), "{}", seen[2]);
    assert!(!outside.join("escaped.txt").exists());
    model_was_told(&server, 2, "REFUSED");
}

#[test]
fn a_session_is_never_driven_through_a_host_a_tool_pointed_it_to() {
    if testkit::needs::landlock().is_none() {
        return;
    }
    let sb = session_agent("sandbox: {filesystem: workspace-write, network: false}");
    // A person's own session, started by hand outside any sandbox.
    std::fs::create_dir_all(sb.path("mine")).unwrap();
    let mut start = std::process::Command::new(env!("CARGO_BIN_EXE_delta"));
    start
        .args(["sessions", "start", "--id", "mine"])
        .current_dir(sb.path("mine"));
    let started = output(start);
    assert_eq!(started.code, 0, "{started:?}");
    let theirs = sb.path("mine/.sessions/mine/host.json");
    let pwned = sb.path("mine/pwned.txt");
    let server = ScriptedServer::start([
        Reply::tool_call("c0", "session_start", json!({"id": "s"})),
        // The session's shell points its host record at the person's host.
        in_session(
            "c1",
            &format!(
                "cp {} .sessions/s/host.json && echo POINTED",
                theirs.display()
            ),
        ),
        in_session(
            "c2",
            &format!("touch {} && echo RAN || echo REFUSED", pwned.display()),
        ),
        Reply::text("done"),
    ]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let seen = observations(&sb);
    assert!(seen[1].contains("POINTED"), "{}", seen[1]);
    assert!(seen[2].contains("REFUSED"), "{}", seen[2]);
    assert!(
        !pwned.exists(),
        "the command ran in the person's unconfined session"
    );
    let mut end = std::process::Command::new(env!("CARGO_BIN_EXE_delta"));
    end.args(["sessions", "end", "mine"])
        .current_dir(sb.path("mine"));
    let _ = output(end);
}

#[test]
fn a_loader_variable_saved_by_a_session_never_loads_into_delta() {
    if testkit::needs::landlock().is_none() {
        return;
    }
    let sb = session_agent("sandbox: {filesystem: workspace-write, network: false}");
    // A library that leaves a file outside the workspace when it is loaded: only an unconfined
    // process can.
    let outside = sb.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let source = sb.file(
        "evil.c",
        &format!(
            "#include <stdio.h>\n#include <unistd.h>\n__attribute__((constructor)) static void run(void) {{\n  char path[512];\n  snprintf(path, sizeof path, \"{}/loaded-%d\", (int)getpid());\n  FILE *f = fopen(path, \"w\");\n  if (f) fclose(f);\n}}\n",
            outside.display()
        ),
    );
    let library = sb.ws().join("evil.so");
    std::fs::create_dir_all(sb.ws()).unwrap();
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .unwrap();
    assert!(built.success());
    let server = ScriptedServer::start([
        Reply::tool_call("c0", "session_start", json!({"id": "s"})),
        in_session(
            "c1",
            &format!("export LD_PRELOAD={}; echo exported", library.display()),
        ),
        in_session("c2", "kill -9 $$"),
        in_session("c3", "echo PRELOAD=$LD_PRELOAD"),
        Reply::text("done"),
    ]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let seen = observations(&sb);
    // The rebuilt shell has its variable back (it is confined: its loader may use it) ...
    assert!(
        seen[3].contains(&format!("PRELOAD={}", library.display())),
        "{}",
        seen[3]
    );
    // ... and nothing unconfined ever loaded the library.
    let loaded: Vec<_> = std::fs::read_dir(&outside).unwrap().flatten().collect();
    assert!(loaded.is_empty(), "loaded unconfined: {loaded:?}");
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

#[test]
fn an_approval_is_for_one_call_never_for_another_whose_id_it_starts_with_or_shares() {
    for ids in [["B of z", "B"], ["c1", "c1"]] {
        let server = ScriptedServer::start([
            Reply::tool_calls([write_call(ids[0], "a.txt"), write_call(ids[1], "b.txt")]),
            Reply::text("done"),
        ]);
        let sb = Sandbox::new(APPROVING);
        assert_eq!(sb.run(Some(&server), "go", &[]).code, 101);
        let out = continue_with(&sb, &server, &["-m", "yes"]);
        assert_eq!(
            out.code, 101,
            "{ids:?}: the second call is asked about: {out:?}"
        );
        assert!(sb.ws().join("a.txt").is_file(), "{ids:?}");
        assert!(!sb.ws().join("b.txt").exists(), "{ids:?}: ran unasked");
        let request = crate::support::read_json(&sb.run_dir().join("interaction/request.json"));
        assert!(
            request["prompt"].as_str().unwrap().contains("touch b.txt"),
            "{request}"
        );
    }
}

#[test]
fn always_and_approve_all_never_lift_a_deny() {
    let server = ScriptedServer::start([
        Reply::tool_calls([write_call("c1", "a.txt")]),
        Reply::tool_calls([write_call("c2", "secret.txt")]),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(APPROVING);
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 101);
    let out = continue_with(&sb, &server, &["-m", "always"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(sb.ws().join("a.txt").is_file());
    assert!(
        !sb.ws().join("secret.txt").exists(),
        "always lifted the deny"
    );

    let server = ScriptedServer::start([
        Reply::tool_calls([write_call("c1", "a.txt"), write_call("c2", "secret.txt")]),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(APPROVING);
    let out = sb.run(Some(&server), "go", &["--approve", "all"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(sb.ws().join("a.txt").is_file());
    assert!(
        !sb.ws().join("secret.txt").exists(),
        "--approve all lifted the deny"
    );
    let decisions: Vec<String> = sb
        .events("SYSTEM_MESSAGE")
        .iter()
        .filter_map(|e| e["payload"]["content"].as_str().map(str::to_string))
        .filter(|c| c.starts_with("Approval: "))
        .collect();
    assert!(
        decisions[0].starts_with("Approval: call c1 of write approved by --approve all"),
        "{decisions:?}"
    );
    assert!(
        decisions[1].starts_with("Approval: write denied by rule 1"),
        "{decisions:?}"
    );
}

#[test]
fn only_a_person_answers_an_approval() {
    // A response a program of the run left on disk is no answer.
    let server = ScriptedServer::start([
        Reply::tool_calls([write_call("c1", "a.txt")]),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(APPROVING);
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 101);
    std::fs::write(sb.run_dir().join("interaction/response.txt"), "yes").unwrap();
    let out = continue_with(&sb, &server, &[]);
    assert_eq!(out.code, 101, "{out:?}");
    assert!(!sb.ws().join("a.txt").exists(), "a file approved the call");

    // A question rewritten after it was asked: the person's yes answers what they were shown,
    // which is not this call.
    let request_path = sb.run_dir().join("interaction/request.json");
    let mut request = crate::support::read_json(&request_path);
    request["prompt"] = json!(
        "Allow write to run? touch harmless.txt (answer yes, no, or always for the rest of the run)"
    );
    std::fs::write(&request_path, request.to_string()).unwrap();
    let out = continue_with(&sb, &server, &["-m", "yes"]);
    assert_eq!(out.code, 101, "{out:?}");
    assert!(
        !sb.ws().join("a.txt").exists(),
        "a rewritten question was approved"
    );
    let warned = sb.events("SYSTEM_MESSAGE").iter().any(|e| {
        e["payload"]["content"]
            .as_str()
            .is_some_and(|c| c.contains("the question on file is not the one this call raises"))
    });
    assert!(warned);
    // Asked again, truly: now the yes holds.
    let out = continue_with(&sb, &server, &["-m", "yes"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(sb.ws().join("a.txt").is_file());
}

#[test]
fn what_a_person_decided_is_kept_where_the_runs_tools_cannot_write() {
    // "always" written into metadata.json by a program of the run is nobody's approval: the
    // person's "no" stands.
    let server = ScriptedServer::start([
        Reply::tool_calls([write_call("c1", "a.txt")]),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(APPROVING);
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 101);
    let path = sb.run_dir().join("metadata.json");
    let mut metadata = crate::support::read_json(&path);
    metadata["approved_always"] = json!(["write"]);
    std::fs::write(&path, metadata.to_string()).unwrap();
    let out = continue_with(&sb, &server, &["-m", "no"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        !sb.ws().join("a.txt").exists(),
        "the person's no was overruled"
    );
    // The seal lies outside the workspace.
    let seals = sb.path(".local/state/delta/seals");
    assert_eq!(std::fs::read_dir(&seals).unwrap().count(), 1);
}

#[test]
fn a_journal_rewritten_between_question_and_answer_is_refused() {
    let server = ScriptedServer::start([
        Reply::tool_calls([write_call("c1", "a.txt")]),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(APPROVING);
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 101);
    // The call asked about becomes another, in the journal and in the question alike.
    for file in ["journal.jsonl", "interaction/request.json"] {
        let path = sb.run_dir().join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("a.txt", "b.txt")).unwrap();
    }
    let out = continue_with(&sb, &server, &["-m", "yes"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("changed since delta last wrote it"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("hint:"), "{}", out.stderr);
    assert!(!sb.ws().join("a.txt").exists() && !sb.ws().join("b.txt").exists());
}

#[test]
fn a_sub_agent_is_held_to_its_parents_rules_and_sandbox() {
    if testkit::needs::landlock().is_none() {
        return;
    }
    // The parent denies `rm` and may write only its workspace; its child asks for no sandbox at
    // all and for a writable folder outside.
    let sb = Sandbox::new(
        "name: parent\nllm:\n  model: m\nsandbox: {filesystem: workspace-write, network: false}\npermissions:\n  default: allow\n  rules:\n    - {tool: \"*\", command: \"rm *\", action: deny}\ntools:\n  - name: helper\n    description: Ask the helper.\n    agent: ./helper\n",
    );
    let outside = sb.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    sb.file(
        "agent/helper/agent.yaml",
        &format!(
            "name: helper\nllm:\n  model: m\nsandbox: {{filesystem: off, network: true, writable: [{}]}}\ntools:\n  - name: sh\n    exec: \"bash -c ${{script}}\"\n",
            outside.display()
        ),
    );
    sb.file("agent/helper/system_prompt.md", "You help.");
    std::fs::write(outside.join("keep.txt"), "keep").unwrap();
    let server = ScriptedServer::start([
        Reply::tool_call("p1", "helper", json!({"task": "clean up"})),
        Reply::tool_call(
            "h1",
            "sh",
            json!({"script": format!("touch {}/escaped.txt && echo WROTE || echo REFUSED", outside.display())}),
        ),
        Reply::tool_call(
            "h2",
            "sh",
            json!({"script": format!("rm {}/keep.txt", outside.display())}),
        ),
        Reply::text("helper done"),
        Reply::text("parent done"),
    ]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        !outside.join("escaped.txt").exists(),
        "the child wrote outside its parent's sandbox"
    );
    assert!(
        outside.join("keep.txt").exists(),
        "the parent's deny did not hold for its child"
    );
    let child_journal = std::fs::read_dir(sb.run_dir().join("agents"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = walk_text(&child_journal.join(".delta"));
    assert!(text.contains("REFUSED"), "{text}");
    assert!(text.contains("the agent's permissions deny it"), "{text}");
}

/// Every journal's text under `dir`.
fn walk_text(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            text += &walk_text(&path);
        } else if path.file_name().is_some_and(|n| n == "journal.jsonl") {
            text += &std::fs::read_to_string(&path).unwrap();
        }
    }
    text
}

#[test]
fn metadata_outside_the_writable_paths_cannot_change() {
    if testkit::needs::landlock().is_none() || testkit::needs::private_mounts().is_none() {
        return;
    }
    let sb = hostile_agent("sandbox: {filesystem: workspace-write, network: false}");
    let outside = sb.file("outside.txt", "mine");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = std::fs::metadata(&outside).unwrap();
    let target = outside.display();
    let scripts = [
        format!("chmod 777 {target} && echo CHANGED || echo REFUSED"),
        format!("touch -m -d 2001-01-01 {target} && echo CHANGED || echo REFUSED"),
        format!("chown $(id -u):$(id -g) {target} && echo CHANGED || echo REFUSED"),
        format!(
            "python3 -c 'import os\ntry:\n    os.setxattr(\"{target}\", \"user.x\", b\"1\")\n    print(\"CHANGED\")\nexcept OSError as e:\n    print(\"REFUSED\", e.errno)'"
        ),
        // Inside the workspace all of it still works.
        "touch run.sh && chmod +x run.sh && touch -m -d 2001-01-01 run.sh && echo INSIDE-OK"
            .to_string(),
    ];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let (server, _, seen) = attack(&sb, &scripts);
    for (script, seen) in scripts.iter().zip(&seen).take(4) {
        assert!(
            seen.contains("REFUSED") && !seen.contains("CHANGED"),
            "{script}: {seen}"
        );
    }
    assert!(seen[4].contains("INSIDE-OK"), "{}", seen[4]);
    let after = std::fs::metadata(&outside).unwrap();
    assert_eq!(after.permissions().mode() & 0o777, 0o600);
    assert_eq!(
        after.modified().unwrap(),
        before.modified().unwrap(),
        "the file's time changed"
    );
    model_was_told(&server, 0, "REFUSED");
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

#[test]
fn a_confined_tool_has_no_capabilities_even_as_root() {
    if !python() {
        return;
    }
    let sb = hostile_agent("sandbox: {filesystem: off, network: false}");
    let scripts = [
        // A device node for the first disk, opened raw.
        "mknod disk b 8 0 && echo MADE || echo REFUSED",
        // Physical memory.
        "head -c 1 /proc/kcore > /dev/null && echo READ || echo REFUSED",
        "grep ^CapEff /proc/self/status",
        // A datagram socket pair can send to any named socket: refused with the network off.
        "python3 -c 'import socket\ntry:\n    socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n    print(\"MADE\")\nexcept OSError as e:\n    print(\"REFUSED\", e.errno)'",
    ];
    let (_, _, seen) = attack(&sb, &scripts);
    assert!(seen[0].contains("REFUSED"), "{}", seen[0]);
    assert!(!sb.ws().join("disk").exists());
    assert!(seen[1].contains("REFUSED"), "{}", seen[1]);
    assert!(seen[2].contains("CapEff:\t0000000000000000"), "{}", seen[2]);
    assert!(seen[3].contains("REFUSED 13"), "{}", seen[3]);
}

#[test]
fn a_run_a_tool_made_or_pointed_to_another_agent_is_refused() {
    // A tool points the run's metadata at an agent of its own (no sandbox, no permissions).
    let server = ScriptedServer::start([
        Reply::tool_calls([write_call("c1", "a.txt")]),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(APPROVING);
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 101);
    sb.file(
        "ws/evil/agent.yaml",
        "name: evil\nllm:\n  model: m\ntools:\n  - name: write\n    exec: \"touch ${file}\"\n",
    );
    sb.file("ws/evil/system_prompt.md", "Anything goes.");
    let path = sb.run_dir().join("metadata.json");
    let mut metadata = crate::support::read_json(&path);
    metadata["agent_ref"] = json!(sb.ws().join("evil").display().to_string());
    std::fs::write(&path, metadata.to_string()).unwrap();
    let out = continue_with(&sb, &server, &["-m", "no"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("now names"), "{}", out.stderr);
    assert!(!sb.ws().join("a.txt").exists());

    // A whole run a tool made, named as the latest: no seal vouches for it.
    let sb = Sandbox::new(APPROVING);
    let server = ScriptedServer::start([Reply::text("first")]);
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 0);
    let real = sb.run_dir();
    let fake = sb.ws().join(".delta/20990101_000000_forged");
    let copy = std::process::Command::new("cp")
        .arg("-r")
        .arg(&real)
        .arg(&fake)
        .status()
        .unwrap();
    assert!(copy.success());
    std::fs::write(sb.ws().join(".delta/LATEST"), "20990101_000000_forged").unwrap();
    let out = continue_with(&sb, &server, &["-m", "more"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("has no seal"), "{}", out.stderr);
    assert!(out.stderr.contains("--adopt"), "{}", out.stderr);
}

#[test]
fn a_confined_tool_cannot_drive_a_session_a_person_started() {
    if testkit::needs::landlock().is_none() || !python() {
        return;
    }
    // With the network on, a tool can make Unix sockets: the person's own session host, started by
    // hand outside any sandbox, must still refuse it.
    let sb = hostile_agent("sandbox: {filesystem: workspace-write, network: true}");
    std::fs::create_dir_all(sb.path("mine")).unwrap();
    let mut start = std::process::Command::new(env!("CARGO_BIN_EXE_delta"));
    start
        .args(["sessions", "start", "--id", "mine"])
        .current_dir(sb.path("mine"));
    assert_eq!(output(start).code, 0);
    let pwned = sb.path("mine/pwned.txt");
    // Straight to the host's socket, as the protocol says (the session's folder is not the tool's
    // to lock).
    let socket = sb.path("mine/.sessions/mine/host.sock");
    let script = format!(
        "python3 -c 'import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect(\"{}\")\ntry:\n    s.sendall(b\"{{\\\"op\\\": \\\"exec\\\", \\\"command\\\": \\\"touch {}\\\", \\\"timeout_ms\\\": 5000}}\\n\")\nexcept OSError:\n    pass\nprint(s.recv(4096).decode())'",
        socket.display(),
        pwned.display()
    );
    let (server, _, seen) = attack(&sb, &[script.as_str()]);
    assert!(seen[0].contains("refused"), "{}", seen[0]);
    assert!(
        !pwned.exists(),
        "the person's unconfined session ran the tool's command"
    );
    model_was_told(&server, 0, "refused");
    // The person still drives it.
    let mut exec = std::process::Command::new(env!("CARGO_BIN_EXE_delta"));
    exec.args(["sessions", "exec", "mine"])
        .current_dir(sb.path("mine"));
    let out = crate::support::output_with_stdin(exec, "echo still-mine");
    assert!(out.stdout.contains("still-mine"), "{out:?}");
    let mut end = std::process::Command::new(env!("CARGO_BIN_EXE_delta"));
    end.args(["sessions", "end", "mine"])
        .current_dir(sb.path("mine"));
    let _ = output(end);
}

#[test]
fn a_rule_path_in_the_workspace_never_follows_a_link_out_of_it() {
    if testkit::needs::landlock().is_none() {
        return;
    }
    // An earlier run's tool made `data` a link to a folder outside; this agent reads `data` only.
    let sb = hostile_agent("sandbox: {filesystem: read-only, network: false, readable: [data]}");
    let secret = sb.file("secret/key.txt", "the secret");
    std::fs::create_dir_all(sb.ws()).unwrap();
    std::os::unix::fs::symlink(secret.parent().unwrap(), sb.ws().join("data")).unwrap();
    let server = scripted(&["cat data/key.txt"]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 1, "{out:?}");
    let failed = sb.events("RUN_FAILED");
    let text = format!("{out:?} {failed:?}");
    assert!(text.contains("leads out of the workspace"), "{text}");
    assert!(sb.events("ACTION_RESULT").is_empty(), "a tool ran");
}

#[test]
fn a_deny_rule_holds_however_the_model_spells_the_command() {
    // The docs' example: a general shell tool, and a rule against pushing.
    let sb = Sandbox::new(
        "name: pushy\nllm:\n  model: m\npermissions:\n  default: allow\n  rules:\n    - {tool: \"run\", command: \"git push*\", action: deny}\n    - {tool: \"save\", args: {path: \"/etc/*\"}, action: deny}\ntools:\n  - name: run\n    exec: \"bash -c ${script}\"\n  - name: save\n    stdin: content\n    exec: \"tee ${path}\"\n",
    );
    let server = ScriptedServer::start([
        Reply::tool_call("c0", "run", json!({"script": "git push origin main"})),
        Reply::tool_call("c1", "run", json!({"script": "git   push\torigin"})),
        Reply::tool_call("c2", "save", json!({"path": "/etc/evil", "content": "x"})),
        Reply::tool_call("c3", "run", json!({"script": "echo harmless"})),
        Reply::text("done"),
    ]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let seen = observations(&sb);
    for (i, text) in seen.iter().take(3).enumerate() {
        assert!(
            text.contains("the agent's permissions deny it"),
            "call {i}: {text}"
        );
    }
    assert!(seen[3].contains("harmless"), "{}", seen[3]);
    assert!(!Path::new("/etc/evil").exists());
    model_was_told(&server, 0, "the agent's permissions deny it");
}

#[test]
fn the_policy_in_force_is_journaled_and_streamed() {
    let sb = hostile_agent("sandbox: {filesystem: workspace-write, network: false}");
    let server = scripted(&["true"]);
    // The flag loosens the filesystem for this call: the journal says what applied.
    let out = sb.run(
        Some(&server),
        "go",
        &["--sandbox", "off", "--format", "stream-json"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let policy: Vec<String> = sb
        .events("SYSTEM_MESSAGE")
        .iter()
        .filter_map(|e| e["payload"]["content"].as_str().map(str::to_string))
        .filter(|c| c.starts_with("Policy in force: "))
        .collect();
    assert_eq!(
        policy,
        ["Policy in force: sandbox off, network off; no permissions (every call runs)"]
    );
    let started: Value = serde_json::from_str(out.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(started["policy"]["sandbox"]["filesystem"], "off");
    assert_eq!(started["policy"]["sandbox"]["network"], false);
}
