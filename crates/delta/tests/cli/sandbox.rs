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
    assert!(out.stderr.contains("Sandbox: none"), "{}", out.stderr);
}
