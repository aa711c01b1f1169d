//! What configures delta never comes from what a tool can write: the workspace's `.env`, the
//! run's metadata; what is in force is said.

use super::*;

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
