//! The sandbox of the agent's tools and hooks: Landlock for the filesystem, seccomp for the network,
//! applied by the kernel to real tool processes.

use serde_json::json;
use testkit::{Reply, ScriptedServer};

use crate::support::{Output, Sandbox};

/// An agent with a tool `sh` that runs its `script` argument in bash, and this `sandbox:` line.
fn agent(sandbox: &str) -> String {
    format!(
        "name: confined\nllm:\n  model: m\n{sandbox}\ntools:\n  - name: sh\n    exec: \"bash -c ${{script}}\"\n"
    )
}

/// Runs the agent with one `sh` call per script, in order; `extra` are more `delta run` flags.
fn run_scripts(sb: &Sandbox, scripts: &[&str], extra: &[&str]) -> (Output, Vec<serde_json::Value>) {
    let mut replies: Vec<Reply> = scripts
        .iter()
        .enumerate()
        .map(|(i, s)| Reply::tool_call(&format!("c{i}"), "sh", json!({"script": s})))
        .collect();
    replies.push(Reply::text("done"));
    let server = ScriptedServer::start(replies);
    let out = sb.run(Some(&server), "go", extra);
    let results = sb
        .events("ACTION_RESULT")
        .iter()
        .map(|e| e["payload"].clone())
        .collect();
    (out, results)
}

#[test]
fn workspace_write_keeps_every_write_in_the_workspace() {
    if testkit::needs::landlock().is_none() {
        return;
    }
    let sb = Sandbox::new(&agent("sandbox: {filesystem: workspace-write}"));
    std::fs::create_dir_all(sb.path("target")).unwrap();
    let outside = sb.path("outside.txt");
    let target = sb.path("target");
    let escapes = [
        // Plainly outside, by a relative and by an absolute path (as an argument would give it).
        "touch ../outside.txt".to_string(),
        format!("touch {}", outside.display()),
        // Through a symlink made inside the workspace.
        format!(
            "ln -s {} link && touch link/through-link.txt",
            target.display()
        ),
        // Through /proc/self/root.
        format!("touch /proc/self/root{}/by-proc.txt", target.display()),
        // From a child of a child.
        "sh -c 'sh -c \"touch ../by-child.txt\"'".to_string(),
        // From a new user and mount namespace.
        "unshare -Urm sh -c 'touch ../by-unshare.txt'".to_string(),
    ];
    let mut scripts: Vec<&str> = escapes.iter().map(String::as_str).collect();
    scripts.push("touch inside.txt && echo written");
    let (out, results) = run_scripts(&sb, &scripts, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(results.len(), scripts.len());
    for (script, result) in escapes.iter().zip(&results) {
        assert_eq!(result["status"], "FAILED", "{script}: {result}");
    }
    assert!(!outside.exists());
    assert_eq!(
        std::fs::read_dir(&target).unwrap().count(),
        0,
        "nothing was written through the escapes"
    );
    for name in ["by-child.txt", "by-unshare.txt"] {
        assert!(!sb.path(name).exists(), "{name}");
    }
    let refused = results[0]["observation_content"].as_str().unwrap();
    assert!(
        refused.contains("=== SANDBOX: the tool runs in a sandbox (workspace-write, network off), which refuses writing outside the workspace"),
        "{refused}"
    );
    assert_eq!(results.last().unwrap()["status"], "SUCCESS", "{results:?}");
    assert!(sb.ws().join("inside.txt").is_file());
}

#[test]
fn read_only_cannot_write_the_workspace_and_the_flag_overrides_the_agent() {
    if testkit::needs::landlock().is_none() {
        return;
    }
    let sb = Sandbox::new(&agent("sandbox: {filesystem: workspace-write}"));
    let (out, results) = run_scripts(
        &sb,
        &[
            "touch inside.txt",
            "cat /etc/hostname > /dev/null && echo read",
        ],
        &["--sandbox", "read-only"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(results[0]["status"], "FAILED");
    assert!(!sb.ws().join("inside.txt").exists());
    assert_eq!(
        results[1]["status"], "SUCCESS",
        "reading is allowed: {}",
        results[1]
    );
}

#[test]
fn network_off_refuses_a_connection_that_network_on_makes() {
    if testkit::needs::landlock().is_none() {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            drop(stream);
        }
    });
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let sb = Sandbox::new(&agent(
        "sandbox: {filesystem: workspace-write, network: false}",
    ));
    let (out, results) = run_scripts(&sb, &[&connect], &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(results[0]["status"], "FAILED", "{}", results[0]);

    let sb = Sandbox::new(&agent(
        "sandbox: {filesystem: workspace-write, network: false}",
    ));
    let (out, results) = run_scripts(&sb, &[&connect], &["--network", "on"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(results[0]["status"], "SUCCESS", "{}", results[0]);
    assert!(
        results[0]["observation_content"]
            .as_str()
            .unwrap()
            .contains("connected")
    );
}

#[test]
fn a_hook_runs_in_the_same_sandbox() {
    if testkit::needs::landlock().is_none() {
        return;
    }
    let yaml = format!(
        "{}lifecycle_hooks:\n  pre_tool_exec:\n    command: [\"sh\", \"-c\", \"touch ../by-hook.txt; touch by-hook.txt\"]\n",
        agent("sandbox: {filesystem: workspace-write}")
    );
    let sb = Sandbox::new(&yaml);
    let (out, _) = run_scripts(&sb, &["true"], &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(sb.ws().join("by-hook.txt").is_file(), "the hook ran");
    assert!(
        !sb.path("by-hook.txt").exists(),
        "but could not write outside the workspace"
    );
}

#[test]
fn an_agent_without_a_sandbox_runs_as_before_and_says_so_with_v() {
    let sb = Sandbox::new(&agent(""));
    let (out, results) = run_scripts(&sb, &["touch ../outside.txt"], &["-v"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(results[0]["status"], "SUCCESS");
    assert!(sb.path("outside.txt").exists());
    assert!(
        out.stderr.contains("  Sandbox:        none"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("  Permissions:    no permissions (every call runs)"),
        "{}",
        out.stderr
    );
}

#[test]
fn session_commands_and_stdio_mcp_servers_run_in_the_agents_sandbox() {
    let Some(python) = testkit::needs::python3() else {
        return;
    };
    if testkit::needs::landlock().is_none() {
        return;
    }
    let notes = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/mcp-notes/notes_server.py");
    let server = |name: &str, file: &str| {
        format!(
            "  - name: {name}\n    command: {}\n    args: [\"{}\"]\n    env: {{NOTES_FILE: \"{file}\"}}\n",
            python.display(),
            notes.display()
        )
    };
    let yaml = format!(
        "name: confined\nllm:\n  model: m\nsandbox: {{filesystem: workspace-write}}\nsessions: true\ntools: []\nmcp_servers:\n{}{}",
        server("inside", "notes.json"),
        server("outside", "../notes.json")
    );
    let sb = Sandbox::new(&yaml);
    let replies = vec![
        Reply::tool_call("c1", "session_start", json!({"id": "s"})),
        Reply::tool_call(
            "c2",
            "session_exec",
            json!({"id": "s", "command": "touch ../by-session.txt"}),
        ),
        Reply::tool_call(
            "c3",
            "session_exec",
            json!({"id": "s", "command": "touch by-session.txt && echo ok"}),
        ),
        Reply::tool_call(
            "c4",
            "outside__add_note",
            json!({"title": "t", "text": "x"}),
        ),
        Reply::tool_call("c5", "inside__add_note", json!({"title": "t", "text": "x"})),
        Reply::text("done"),
    ];
    let model = ScriptedServer::start(replies);
    let out = sb.run(Some(&model), "go", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let results: Vec<serde_json::Value> = sb
        .events("ACTION_RESULT")
        .iter()
        .map(|e| e["payload"].clone())
        .collect();
    assert_eq!(results[1]["status"], "FAILED", "{}", results[1]);
    assert!(!sb.path("by-session.txt").exists());
    assert_eq!(results[2]["status"], "SUCCESS", "{}", results[2]);
    assert!(sb.ws().join("by-session.txt").is_file());
    assert_ne!(results[3]["status"], "SUCCESS", "{}", results[3]);
    assert!(
        !sb.path("notes.json").exists(),
        "the server could not write outside"
    );
    assert_eq!(results[4]["status"], "SUCCESS", "{}", results[4]);
    assert!(sb.ws().join("notes.json").is_file());
}

#[test]
fn a_kernel_without_landlock_refuses_the_mode_instead_of_running_unconfined() {
    let Some(strace) = testkit::needs::strace() else {
        return;
    };
    let sb = Sandbox::new(&agent("sandbox: {filesystem: workspace-write}"));
    let server = ScriptedServer::start([Reply::tool_call(
        "c1",
        "sh",
        json!({"script": "touch ../x"}),
    )]);
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"]);
    // The kernel is made to answer that it has no Landlock.
    let args = [
        "-f",
        "-o",
        "/dev/null",
        "-e",
        "trace=landlock_create_ruleset",
        "-e",
        "inject=landlock_create_ruleset:error=ENOSYS",
    ];
    let out = crate::support::output(crate::support::wrapped(&cmd, &strace, &args));
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains(
            "the sandbox mode workspace-write cannot be enforced here: this kernel has no Landlock"
        ),
        "{}",
        out.stderr
    );
    assert!(!sb.path("x").exists());
    assert!(server.requests().is_empty(), "the model was never asked");
}
