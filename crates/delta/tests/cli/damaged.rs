//! A run whose `metadata.json` is damaged or missing is never hidden: its journal tells what it is.
//! `list-runs` shows it (and why), `show` shows it, `continue` rebuilds the metadata and goes on.
//! `list-runs` gives a failed run's error; `continue --last` takes the recorded path exactly.

use testkit::{Reply, ScriptedServer};

use crate::support::{ECHO_AND_WRITE, Sandbox, agent_yaml, output};

#[test]
fn a_run_with_damaged_metadata_is_listed_shown_and_continued_from_its_journal() {
    let server = ScriptedServer::start([Reply::text("first answer"), Reply::text("second answer")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "the task", &[]).code, 0);
    let id = sb.metadata()["run_id"].as_str().unwrap().to_string();
    let path = sb.run_dir().join("metadata.json");
    for (damage, said) in [
        (
            Some("{\"run_id\": \"x\", \"stat"),
            "metadata.json is unreadable",
        ),
        (None, "metadata.json is missing"),
    ] {
        match damage {
            Some(text) => std::fs::write(&path, text).unwrap(),
            None => std::fs::remove_file(&path).unwrap(),
        }
        let runs = sb.list_runs("ws");
        assert_eq!(runs.len(), 1, "{runs:?}");
        let run = &runs[0];
        assert_eq!(run["run_id"], id.as_str());
        assert_eq!(run["status"], "COMPLETED");
        assert_eq!(run["task"], "the task");
        assert_eq!(run["final_answer"], "first answer");
        assert!(run["damaged"].as_str().unwrap().contains(said), "{run}");

        let mut cmd = sb.delta(None);
        cmd.args(["list-runs", "-w", "ws"]);
        let out = output(cmd);
        assert!(
            out.stdout.contains("Damaged:    metadata.json"),
            "{}",
            out.stdout
        );

        let mut cmd = sb.delta(None);
        cmd.args(["show", "-w", "ws", "--run-id", &id]);
        let out = output(cmd);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(
            out.stdout.contains("COMPLETED") && out.stdout.contains(said),
            "{}",
            out.stdout
        );
    }
    // Continuing rebuilds the metadata from the journal, says so, and goes on.
    let mut cmd = sb.delta(Some(&server));
    cmd.args([
        "continue", "-w", "ws", "--run-id", &id, "-m", "more", "--format", "raw",
    ]);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "second answer\n");
    assert!(
        out.stderr.contains("rebuilt from the journal"),
        "{}",
        out.stderr
    );
    let meta = sb.metadata();
    assert_eq!(meta["status"], "COMPLETED");
    assert_eq!(meta["task"], "the task");
    assert_eq!(meta["iterations_completed"], 2);
    assert!(sb.list_runs("ws")[0]["damaged"].is_null());
}

#[test]
fn list_runs_gives_a_failed_runs_error() {
    let server = ScriptedServer::start([Reply::error(400, "the model does not exist")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 1);
    let runs = sb.list_runs("ws");
    assert_eq!(runs[0]["status"], "FAILED");
    assert!(
        runs[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("the model does not exist")),
        "{runs:?}"
    );
    let mut cmd = sb.delta(None);
    cmd.args(["list-runs", "-w", "ws"]);
    let out = output(cmd);
    assert!(out.stdout.contains("Error:      "), "{}", out.stdout);
}

#[test]
fn continue_last_takes_the_recorded_path_exactly() {
    let server = ScriptedServer::start([
        Reply::text("in ws"),
        Reply::text("in ws-space"),
        Reply::text("continued"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "plain", &[]).code, 0);
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws ", "-m", "spaced"]);
    assert_eq!(output(cmd).code, 0);
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "--last", "-m", "again"]);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let tasks = |ws: &str| -> Vec<u64> {
        sb.list_runs(ws)
            .iter()
            .map(|r| r["iterations_completed"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(
        tasks("ws "),
        vec![2],
        "the workspace with the space was continued"
    );
    assert_eq!(tasks("ws"), vec![1], "the one without was left alone");
}
