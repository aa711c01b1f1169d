//! Run ids that would collide with the workspace layout (`.delta/LATEST`, `.delta/VERSION`, hidden
//! names) are refused, and a workspace already damaged that way is explained with the way out.

use testkit::{Reply, ScriptedServer};

use crate::support::{ECHO_AND_WRITE, Sandbox, agent_yaml, output};

#[test]
fn ids_that_collide_with_the_layout_are_refused_and_the_workspace_stays_usable() {
    let server = ScriptedServer::start([Reply::text("first"), Reply::text("second")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    for id in [
        "LATEST",
        "latest",
        "VERSION",
        ".tmp",
        ".hidden-run",
        "workspace.lock",
    ] {
        let out = sb.run(Some(&server), "hello", &["--run-id", id]);
        assert_eq!(out.code, 64, "--run-id {id}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!("invalid run id {id:?}")),
            "--run-id {id}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains("hint:"),
            "--run-id {id}: {}",
            out.stderr
        );
        assert!(
            !sb.ws().join(".delta").join(id).is_dir(),
            "--run-id {id} created a run folder"
        );
    }
    assert_eq!(server.request_count(), 0, "no run was started");
    // The workspace still works: a run with an ordinary id, and one with a generated id.
    let out = sb.run(Some(&server), "hello", &["--run-id", "mine"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = sb.run(Some(&server), "hello", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws", "--run-id", "LATEST", "-m", "x"]);
    let out = output(cmd);
    assert_eq!(out.code, 64, "{}", out.stderr);
    assert!(out.stderr.contains("invalid run id"), "{}", out.stderr);
}

#[test]
fn a_workspace_damaged_by_a_run_named_latest_is_explained_with_the_way_out() {
    let server = ScriptedServer::start([Reply::text("first"), Reply::text("after the repair")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "hello", &["--run-id", "old"]).code, 0);
    // What an older delta left behind after `--run-id LATEST`: a run folder where the pointer to the
    // latest run belongs.
    let delta_dir = sb.ws().join(".delta");
    std::fs::remove_file(delta_dir.join("LATEST")).unwrap();
    std::fs::rename(delta_dir.join("old"), delta_dir.join("LATEST")).unwrap();

    let expect_explained = |out: &crate::support::Output| {
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert!(
            out.stderr.contains(".delta/LATEST is a folder"),
            "{}",
            out.stderr
        );
        assert!(
            !out.stderr.contains("cannot rename into place"),
            "{}",
            out.stderr
        );
        assert!(out.stderr.contains("hint: rename it"), "{}", out.stderr);
    };
    expect_explained(&sb.run(Some(&server), "again", &[]));
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws", "-m", "more"]);
    expect_explained(&output(cmd));
    assert_eq!(
        server.request_count(),
        1,
        "nothing ran in the damaged workspace"
    );

    // The way out given by the hint works as written, and the run keeps its history.
    let out = sb.run(Some(&server), "again", &[]);
    let hint = out.stderr.split("hint: ").nth(1).unwrap().trim();
    let mv = hint
        .split("mv ")
        .nth(1)
        .unwrap()
        .split(", then")
        .next()
        .unwrap();
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("mv {mv}"))
        .status()
        .unwrap();
    assert!(status.success(), "{hint}");
    let resume = hint.split("continue it with: delta ").nth(1).unwrap();
    let words: Vec<String> = resume
        .split_whitespace()
        .map(|w| w.trim_matches('\'').to_string())
        .collect();
    let mut cmd = sb.delta(Some(&server));
    cmd.args(&words).args(["-m", "more", "--format", "raw"]);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "after the repair\n");
}
