//! SIGKILL in the middle of journal appends.

use serde_json::Value;
use store::{Journal, TornReason, journal};

use crate::child::{BIG_PAD, record, spawn, wait_for};

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

/// Kills a writer of 4 MiB lines until two kills have landed inside a write and checks what the
/// reader makes of each journal left behind. The kill is sent once the fourth line is a quarter
/// written: the file grows page by page during a write, so the writer is then inside one (a kill
/// once three lines were there came mostly between two writes: one in 60 landed inside under CI's
/// load). Bounded: at most 100 kills.
#[test]
fn sigkill_inside_a_large_write_leaves_a_torn_line_that_is_reported() {
    const KILLS: usize = 100;
    let dir = tempfile::tempdir().unwrap();
    let mut torn_seen = 0;
    for attempt in 0..KILLS {
        let path = dir.path().join(format!("big-{attempt}.jsonl"));
        let mut child = spawn("journal_writer", "big", &path);
        wait_for("three large lines and a quarter", || {
            std::fs::metadata(&path).is_ok_and(|m| m.len() > (3 * BIG_PAD + BIG_PAD / 4) as u64)
        });
        child.kill().unwrap();
        child.wait().unwrap();

        let contents = journal::read::<Value>(&path).unwrap();
        assert!(contents.records.len() >= 3);
        for (i, rec) in contents.records.iter().enumerate() {
            assert_eq!(rec["seq"], i as u64);
            assert_eq!(rec["pad"].as_str().unwrap().len(), BIG_PAD);
        }
        let len = std::fs::metadata(&path).unwrap().len();
        match contents.torn_tail {
            None => assert_eq!(contents.complete_len, len),
            Some(torn) => {
                torn_seen += 1;
                assert_eq!(torn.offset, contents.complete_len);
                assert_eq!(torn.offset + torn.len, len);
                assert_eq!(torn.line, contents.records.len() + 1);
                assert_eq!(torn.reason, TornReason::MissingNewline);
                assert!(
                    torn.preview
                        .starts_with(&format!("{{\"seq\":{}", contents.records.len()))
                );
                journal::recover::<Value>(&path).unwrap();
                assert_eq!(
                    std::fs::metadata(&path).unwrap().len(),
                    contents.complete_len
                );
            }
        }
        std::fs::remove_file(&path).unwrap();
        if torn_seen >= 2 {
            return;
        }
    }
    panic!("{KILLS} kills during large writes left fewer than two torn lines ({torn_seen} seen)");
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
