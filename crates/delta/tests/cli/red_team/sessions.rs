//! Sessions: their host, its sandbox and what it loads are the run's, never the session folder's;
//! a host outside the sandbox answers no sandboxed program.

use super::*;

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
