use std::sync::Arc;

use super::*;
use crate::runs::RunStore;

const LAYOUT: FileLayout = FileLayout {
    journal: "journal.jsonl",
    lock: "run.lock",
};

fn store() -> (tempfile::TempDir, FileStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("runs"), LAYOUT);
    (dir, store)
}

fn holder() -> LockHolder {
    LockHolder::current(jiff::Timestamp::UNIX_EPOCH, Some("test"))
}

fn jsons(read: &JournalRead) -> Vec<(u64, &str)> {
    read.entries
        .iter()
        .map(|e| (e.seq.0, e.json.as_str()))
        .collect()
}

#[test]
fn appends_are_numbered_from_one_and_read_back_whole_after_or_from_the_tail() {
    let (_dir, store) = store();
    let mut lease = store.create("r1", &holder()).unwrap();
    assert_eq!(lease.epoch(), 1);
    assert_eq!(store.append(&mut lease, &[r#"{"n":1}"#]).unwrap(), Seq(1));
    assert_eq!(
        store
            .append(&mut lease, &[r#"{"n":2}"#, r#"{"n":3}"#])
            .unwrap(),
        Seq(3)
    );
    let all = store.read_journal("r1", Seq(0)).unwrap();
    assert_eq!(
        jsons(&all),
        [(1, r#"{"n":1}"#), (2, r#"{"n":2}"#), (3, r#"{"n":3}"#)]
    );
    assert_eq!(all.len, 3);
    let after = store.read_journal("r1", Seq(2)).unwrap();
    assert_eq!(jsons(&after), [(3, r#"{"n":3}"#)]);
    let tail = store.read_tail("r1", 2).unwrap();
    assert_eq!(jsons(&tail), [(2, r#"{"n":2}"#), (3, r#"{"n":3}"#)]);
    assert_eq!(tail.len, 3);
    assert_eq!(store.list().unwrap(), ["r1"]);
}

#[test]
fn a_record_that_is_not_one_json_line_is_refused_and_nothing_is_written() {
    let (_dir, store) = store();
    let mut lease = store.create("r", &holder()).unwrap();
    for bad in ["{\"a\":\n1}", "not json", "{\"a\":1} trailing"] {
        let err = store.append(&mut lease, &[r#"{"ok":1}"#, bad]).unwrap_err();
        assert!(matches!(err, StoreError::BadRecord { .. }), "{bad}: {err}");
    }
    assert_eq!(store.read_journal("r", Seq(0)).unwrap().len, 0);
}

#[test]
fn one_writer_at_a_time_and_each_lease_has_a_new_epoch() {
    let (_dir, store) = store();
    let lease = store.create("r", &holder()).unwrap();
    let busy = store.lease("r", &holder()).unwrap_err();
    assert!(matches!(busy, StoreError::Busy { .. }), "{busy}");
    assert!(matches!(
        store.lease_state("r").unwrap(),
        LeaseState::Held(_)
    ));
    drop(lease);
    assert_eq!(store.lease_state("r").unwrap(), LeaseState::Free);
    let second = store.lease("r", &holder()).unwrap();
    assert_eq!(second.epoch(), 2);
    assert!(second.stale().is_none());
    drop(second);
    assert_eq!(store.lease("r", &holder()).unwrap().epoch(), 3);
    let exists = store.create("r", &holder()).unwrap_err();
    assert!(matches!(exists, StoreError::Exists { .. }), "{exists}");
    let missing = store.lease("nope", &holder()).unwrap_err();
    assert!(matches!(missing, StoreError::NoRun { .. }), "{missing}");
}

#[test]
fn a_writer_whose_lock_was_replaced_under_it_is_fenced() {
    let (_dir, store) = store();
    let mut first = store.create("r", &holder()).unwrap();
    store.append(&mut first, &["1"]).unwrap();
    // The lock file removed by hand: a second writer can take a lock on a new file.
    std::fs::remove_file(store.root().join("r/run.lock")).unwrap();
    let mut second = store.lease("r", &holder()).unwrap();
    assert_eq!(second.epoch(), 2);
    let fenced = store.append(&mut first, &["2"]).unwrap_err();
    assert!(
        matches!(
            fenced,
            StoreError::Fenced {
                held: 1,
                current: 2,
                ..
            }
        ),
        "{fenced}"
    );
    let fenced = store
        .put(&mut first, "state.json", b"{}", Flush::Lazy)
        .unwrap_err();
    assert!(matches!(fenced, StoreError::Fenced { .. }), "{fenced}");
    assert_eq!(store.append(&mut second, &["3"]).unwrap(), Seq(2));
    assert_eq!(
        jsons(&store.read_journal("r", Seq(0)).unwrap()),
        [(1, "1"), (2, "3")]
    );
}

#[test]
fn a_lease_from_another_store_or_run_is_refused() {
    let (_dir, a) = store();
    let other = tempfile::tempdir().unwrap();
    let b = FileStore::new(other.path(), LAYOUT);
    let mut lease = a.create("r", &holder()).unwrap();
    let err = b.append(&mut lease, &["1"]).unwrap_err();
    assert!(matches!(err, StoreError::ForeignLease { .. }), "{err}");
}

#[test]
fn a_torn_last_record_is_reported_by_reads_and_cut_off_by_the_next_lease() {
    let (_dir, store) = store();
    let mut lease = store.create("r", &holder()).unwrap();
    store.append(&mut lease, &["1", "2"]).unwrap();
    drop(lease);
    // A writer killed in the middle of its line.
    let path = store.root().join("r/journal.jsonl");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"half":"#);
    std::fs::write(&path, bytes).unwrap();

    let read = store.read_journal("r", Seq(0)).unwrap();
    assert_eq!(jsons(&read), [(1, "1"), (2, "2")]);
    assert_eq!(read.torn.as_ref().map(|t| t.line), Some(3));

    let mut lease = store.lease("r", &holder()).unwrap();
    assert_eq!(lease.recovered().map(|t| t.line), Some(3));
    assert_eq!(store.append(&mut lease, &["3"]).unwrap(), Seq(3));
    let read = store.read_journal("r", Seq(0)).unwrap();
    assert_eq!(jsons(&read), [(1, "1"), (2, "2"), (3, "3")]);
    assert!(read.torn.is_none());
}

#[test]
fn a_holder_that_died_is_reported_as_stale_to_the_next_lease() {
    let (_dir, store) = store();
    drop(store.create("r", &holder()).unwrap());
    // A holder that died leaves its record in the lock file (a clean release empties it).
    let died = LockHolder::current(jiff::Timestamp::UNIX_EPOCH, Some("died"));
    std::fs::write(
        store.root().join("r/run.lock"),
        serde_json::to_vec(&died).unwrap(),
    )
    .unwrap();
    assert!(matches!(
        store.lease_state("r").unwrap(),
        LeaseState::Stale(_)
    ));
    let lease = store.lease("r", &holder()).unwrap();
    assert_eq!(lease.stale(), Some(&died));
}

#[test]
fn documents_are_replaced_whole_and_listed_by_key_but_never_the_stores_own_files() {
    let (_dir, store) = store();
    let mut lease = store.create("r", &holder()).unwrap();
    store.append(&mut lease, &["1"]).unwrap();
    store
        .put(&mut lease, "metadata.json", b"{\"v\":1}", Flush::Durable)
        .unwrap();
    store
        .put(&mut lease, "metadata.json", b"{\"v\":2}", Flush::Lazy)
        .unwrap();
    store
        .put(&mut lease, "io/invocations/1.json", b"{}", Flush::Lazy)
        .unwrap();
    assert_eq!(
        store.get("r", "metadata.json").unwrap().as_deref(),
        Some(&b"{\"v\":2}"[..])
    );
    assert_eq!(store.get("r", "absent.json").unwrap(), None);
    assert_eq!(
        store.keys("r", "").unwrap(),
        ["io/invocations/1.json", "metadata.json"]
    );
    assert_eq!(store.keys("r", "io/").unwrap(), ["io/invocations/1.json"]);
    for reserved in ["journal.jsonl", "run.lock"] {
        let err = store
            .put(&mut lease, reserved, b"{}", Flush::Lazy)
            .unwrap_err();
        assert!(matches!(err, StoreError::ReservedKey { .. }), "{err}");
    }
    for outside in ["../escape.json", "/tmp/x", ".epoch", "io/../../x"] {
        let err = store
            .put(&mut lease, outside, b"{}", Flush::Lazy)
            .unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidId { .. }),
            "{outside}: {err}"
        );
        assert!(store.get("r", outside).is_err(), "{outside}");
    }
    for bad_run in ["..", "a/b", ""] {
        assert!(store.read_journal(bad_run, Seq(0)).is_err(), "{bad_run}");
        assert!(store.create(bad_run, &holder()).is_err(), "{bad_run}");
    }
}

#[test]
fn a_removed_run_is_gone_and_a_removal_cut_short_is_finished_by_the_next_listing() {
    let (_dir, store) = store();
    let mut lease = store.create("gone", &holder()).unwrap();
    store.append(&mut lease, &["1"]).unwrap();
    drop(store.create("kept", &holder()).unwrap());
    store.remove(lease).unwrap();
    assert_eq!(store.list().unwrap(), ["kept"]);
    assert!(matches!(
        store.read_journal("gone", Seq(0)).unwrap_err(),
        StoreError::NoRun { .. }
    ));
    // A removal killed after its rename.
    std::fs::create_dir_all(store.root().join(".rm-x-1/io")).unwrap();
    assert_eq!(store.list().unwrap(), ["kept"]);
    assert!(!store.root().join(".rm-x-1").exists());
}

/// Writers racing for one run (threads of one process contend for the OS lock like processes do):
/// every batch lands whole and in one piece, the sequence has no gap, and each writer's epoch is
/// new. Bounded: 8 writers, 25 batches each, randomised batch sizes.
#[test]
fn racing_writers_never_interleave_batches_or_leave_gaps() {
    let (_dir, store) = store();
    drop(store.create("r", &holder()).unwrap());
    let store = Arc::new(store);
    let writers: Vec<_> = (0..8u64)
        .map(|w| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let ids = crate::IdSource::seeded(w + 1);
                let mut epochs = Vec::new();
                let mut done = 0;
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
                while done < 25 {
                    assert!(std::time::Instant::now() < deadline, "writer {w} starved");
                    let mut lease = match store.lease("r", &holder()) {
                        Ok(lease) => lease,
                        Err(StoreError::Busy { .. }) => {
                            std::thread::yield_now();
                            continue;
                        }
                        Err(e) => panic!("{e}"),
                    };
                    epochs.push(lease.epoch());
                    let size = 1 + ids.next_u64() % 4;
                    let batch: Vec<String> = (0..size)
                        .map(|i| format!(r#"{{"w":{w},"b":{done},"i":{i},"of":{size}}}"#))
                        .collect();
                    let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
                    store.append(&mut lease, &refs).unwrap();
                    done += 1;
                }
                epochs
            })
        })
        .collect();
    let mut epochs: Vec<u64> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    epochs.sort_unstable();
    let before = epochs.len();
    epochs.dedup();
    assert_eq!(epochs.len(), before, "an epoch was granted twice");

    let read = store.read_journal("r", Seq(0)).unwrap();
    for (n, entry) in read.entries.iter().enumerate() {
        assert_eq!(entry.seq, Seq(n as u64 + 1));
    }
    let records: Vec<serde_json::Value> = read
        .entries
        .iter()
        .map(|e| serde_json::from_str(&e.json).unwrap())
        .collect();
    let mut at = 0;
    let mut batches = 0;
    while at < records.len() {
        let first = &records[at];
        let size = first["of"].as_u64().unwrap() as usize;
        for i in 0..size {
            let r = &records[at + i];
            assert_eq!(
                (r["w"].clone(), r["b"].clone()),
                (first["w"].clone(), first["b"].clone())
            );
            assert_eq!(r["i"], i as u64, "batch split at record {}", at + i + 1);
        }
        at += size;
        batches += 1;
    }
    assert_eq!(batches, 8 * 25);
}
