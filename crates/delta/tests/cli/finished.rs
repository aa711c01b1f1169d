//! A run whose journal ends in `RUN_END` is finished, whatever `metadata.json` says: the end is
//! journaled before the metadata is saved, so a process killed between the two leaves a finished
//! run whose metadata still says RUNNING. No command resumes it, asks the model again or journals
//! a second end; the next command that opens it repairs the metadata from the journal.

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer};

use crate::support::{ECHO_AND_WRITE, Sandbox, agent_yaml, output};

/// What a process killed after journaling the run's end, before saving the metadata, leaves.
fn forget_the_end(sb: &Sandbox, status: &str) {
    let mut meta = sb.metadata();
    meta["status"] = json!(status);
    meta.as_object_mut().unwrap().remove("end_time");
    std::fs::write(
        sb.run_dir().join("metadata.json"),
        serde_json::to_string_pretty(&meta).unwrap(),
    )
    .unwrap();
}

fn count(sb: &Sandbox, kind: &str) -> usize {
    sb.events(kind).len()
}

#[test]
fn a_run_whose_journal_ended_is_not_resumed_whatever_its_metadata_says() {
    for (stale, replies, ended) in [
        ("RUNNING", vec![Reply::text("all done")], "COMPLETED"),
        ("INTERRUPTED", vec![Reply::text("all done")], "COMPLETED"),
        ("RUNNING", vec![Reply::error(400, "bad request")], "FAILED"),
    ] {
        let server = ScriptedServer::start(replies);
        let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
        sb.run(Some(&server), "go", &[]);
        let requests = server.request_count();
        forget_the_end(&sb, stale);

        let runs = sb.list_runs("ws");
        assert_eq!(runs[0]["status"], ended, "{stale}: {runs:?}");
        assert_eq!(runs[0]["crashed"], false);

        let mut cmd = sb.delta(Some(&server));
        cmd.args(["continue", "-w", "ws"]);
        let out = output(cmd);
        assert_ne!(out.code, 0, "{stale}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!("Run is {ended}")),
            "{stale}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains("repaired from the journal"),
            "{stale}: {}",
            out.stderr
        );
        assert_eq!(
            server.request_count(),
            requests,
            "the model was asked again"
        );
        assert_eq!(count(&sb, "RUN_END"), 1);
        let meta = sb.metadata();
        assert_eq!(meta["status"], ended, "metadata.json repaired");
        assert!(meta["end_time"].is_string(), "{meta}");

        // `run -w` leaves the finished run alone and starts a new one.
        let server = ScriptedServer::start([Reply::text("second")]);
        let out = sb.run(Some(&server), "again", &[]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let runs = sb.list_runs("ws");
        assert_eq!(runs.len(), 2, "{runs:?}");
        assert_eq!(runs[1]["status"], ended);
    }
}

#[test]
fn show_gives_the_status_the_journal_ended_with() {
    let server = ScriptedServer::start([Reply::text("all done")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 0);
    forget_the_end(&sb, "RUNNING");
    let mut cmd = sb.delta(None);
    cmd.args(["show", "-w", "ws", "--format", "json"]);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let shown: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(shown["status"], "COMPLETED", "{shown}");
    assert_eq!(shown["final_answer"], "all done", "{shown}");
}

/// The number of the `fdatasync` call, among those of the thread that journaled `RUN_END`, that
/// makes the end durable: read from a traced run of the same script (tried again when a trace
/// misses the write, as a trace under heavy load may).
fn the_flush_after_the_end(strace: &std::path::Path) -> usize {
    let mut last = String::new();
    for _ in 0..3 {
        let server = ScriptedServer::start([Reply::text("all done")]);
        let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
        let mut cmd = sb.delta(Some(&server));
        cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"]);
        last = crate::support::traced_writes(&cmd, strace, &sb.path("strace.log"));
        if let Some(nth) = crate::support::flush_after_end(&last) {
            return nth;
        }
    }
    panic!("no write of RUN_END followed by an fdatasync in the trace:\n{last}");
}

#[test]
fn killed_at_the_flush_of_its_end_a_run_stays_finished() {
    let Some(strace) = testkit::needs::strace() else {
        return;
    };
    let nth = the_flush_after_the_end(&strace);
    let server = ScriptedServer::start([Reply::text("all done")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"]);
    crate::support::killed_at_fdatasync(&cmd, &strace, nth);
    // The kill came between the two writes: the journal has the end, the metadata does not.
    let kinds: Vec<Value> = sb.journal().iter().map(|e| e["type"].clone()).collect();
    assert_eq!(kinds.last().unwrap(), "RUN_END", "{kinds:?}");
    assert_eq!(sb.metadata()["status"], "RUNNING");

    assert_eq!(sb.list_runs("ws")[0]["status"], "COMPLETED");
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws"]);
    let out = output(cmd);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("Run is COMPLETED"), "{}", out.stderr);
    assert_eq!(server.request_count(), 1, "the model was asked again");
    assert_eq!(count(&sb, "THOUGHT"), 1);
    assert_eq!(count(&sb, "RUN_END"), 1);
    assert_eq!(sb.metadata()["status"], "COMPLETED");
}
