//! SIGKILL in the middle of journal appends.

use serde_json::Value;
use store::{Journal, TornReason, journal};

use crate::child::{record, spawn, wait_for};

#[test]
fn sigkill_during_a_burst_loses_no_complete_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let mut child = spawn("journal_writer", "burst", &path);
    wait_for("200 appended lines", || {
        std::fs::read(&path).is_ok_and(|b| b.iter().filter(|&&c| c == b'\n').count() >= 200)
    });
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();

    let contents = journal::read::<Value>(&path).unwrap();
    let n = contents.records.len();
    assert!(n >= 200, "only {n} records survived");
    for (i, rec) in contents.records.iter().enumerate() {
        assert_eq!(rec, &record(i as u64), "record {i} differs");
    }
    // Whatever follows the last complete line (possibly nothing) is reported, never returned.
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(
        contents.complete_len as usize + contents.torn_tail.as_ref().map_or(0, |t| t.len as usize),
        bytes.len()
    );

    // Recovery leaves a journal that accepts appends and reads back cleanly.
    journal::recover::<Value>(&path).unwrap();
    let mut j = Journal::open(&path).unwrap();
    j.append(&record(n as u64)).unwrap();
    let after = journal::read::<Value>(&path).unwrap();
    assert_eq!(after.records.len(), n + 1);
    assert!(after.torn_tail.is_none());
}

#[test]
fn sigkill_after_a_torn_write_reports_the_torn_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let mut child = spawn("journal_writer", "torn", &path);
    wait_for("the child to write its torn line", || {
        path.with_extension("ready").exists()
    });
    child.kill().unwrap();
    child.wait().unwrap();

    let contents = journal::read::<Value>(&path).unwrap();
    assert_eq!(contents.records.len(), 10);
    let torn = contents.torn_tail.expect("the torn line is reported");
    assert_eq!(torn.line, 11);
    assert_eq!(torn.reason, TornReason::MissingNewline);
    assert!(torn.preview.starts_with(r#"{"seq":10"#), "{}", torn.preview);

    let err = Journal::open(&path).unwrap_err();
    assert!(
        err.to_string()
            .contains("recover the journal before appending"),
        "{err}"
    );
    let removed = journal::recover::<Value>(&path).unwrap().unwrap();
    assert_eq!(removed, torn);
    assert_eq!(journal::read::<Value>(&path).unwrap().records.len(), 10);
}
