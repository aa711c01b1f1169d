//! A run whose journal is missing or empty cannot be picked up again: it is refused with the journal's
//! path, never rebuilt from its metadata (which would run its tools again and drop the message).

use serde_json::json;
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use crate::support::{ECHO_AND_WRITE, Output, Sandbox, agent_yaml, output};

fn continue_(sb: &Sandbox, server: &ScriptedServer, args: &[&str]) -> Output {
    let mut cmd = sb.delta(Some(server));
    cmd.args(["continue", "-w", "ws"]).args(args);
    output(cmd)
}

fn assert_refused(out: &Output, journal: &std::path::Path) {
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains(&journal.display().to_string()),
        "the journal is named: {}",
        out.stderr
    );
    assert!(out.stderr.contains("hint: "), "{}", out.stderr);
    assert!(out.stderr.contains("--run-id"), "{}", out.stderr);
}

#[test]
fn a_deleted_journal_is_an_error_naming_it() {
    let server = ScriptedServer::start([
        Reply::tool_call(
            "w1",
            "write_to_file",
            json!({"filename": "side.txt", "content": "once\n"}),
        ),
        Reply::text("written"),
        // What a silent re-run would get.
        Reply::tool_call(
            "w2",
            "write_to_file",
            json!({"filename": "side.txt", "content": "twice\n"}),
        ),
        Reply::text("unused"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "write it", &[]).code, 0);
    let journal = sb.run_dir().join("journal.jsonl");
    let metadata_before = std::fs::read(sb.run_dir().join("metadata.json")).unwrap();
    std::fs::remove_file(&journal).unwrap();

    let out = continue_(&sb, &server, &["-m", "and more"]);
    assert_refused(&out, &journal);
    assert!(out.stderr.contains("missing"), "{}", out.stderr);
    assert_eq!(server.request_count(), 2, "nothing was asked again");
    assert!(!journal.exists(), "the journal was not recreated");
    assert_eq!(
        std::fs::read(sb.run_dir().join("metadata.json")).unwrap(),
        metadata_before
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("side.txt")).unwrap(),
        "once\n"
    );
}

#[test]
fn an_emptied_journal_is_refused_by_continue_and_by_run_w() {
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new(
                "w1",
                "write_to_file",
                json!({"filename": "side.txt", "content": "once\n"}),
            ),
            ToolCallSpec::new("q1", "ask_human", json!({"prompt": "Go on?"})),
        ]),
        // What a silent re-run would get.
        Reply::tool_call(
            "w2",
            "write_to_file",
            json!({"filename": "side.txt", "content": "twice\n"}),
        ),
        Reply::text("unused"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "write it", &[]).code, 101);
    let journal = sb.run_dir().join("journal.jsonl");
    std::fs::write(&journal, "").unwrap();

    let out = continue_(&sb, &server, &["-m", "yes"]);
    assert_refused(&out, &journal);
    assert!(out.stderr.contains("empty"), "{}", out.stderr);
    let out = sb.run(Some(&server), "yes", &[]);
    assert_refused(&out, &journal);
    assert_eq!(server.request_count(), 1, "nothing was asked again");
    assert_eq!(std::fs::read(&journal).unwrap(), b"", "nothing appended");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("side.txt")).unwrap(),
        "once\n"
    );
    assert_eq!(sb.metadata()["status"], "WAITING_FOR_INPUT");
}
