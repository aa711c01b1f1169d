//! The contract every [`RunStore`] keeps, as checks an implementation's tests run (feature
//! `contract`): numbering, records refused whole, one writer at a time with growing epochs,
//! documents, removal, and writers racing for one run. What only one implementation can provoke
//! (a lock file replaced, a lease that ran out, a torn line) stays in that implementation's tests.
//!
//! Each check takes `store_for`, which gives an empty store for a case name (a folder of its own, a
//! namespace of its own), and panics, as a test does, when the store breaks the contract.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use crate::error::StoreError;
use crate::lock::{LockHolder, LockState};
use crate::runs::{Flush, JournalRead, RunStore, Seq};

/// Gives an empty store for a case.
pub type StoreFor<'a> = &'a (dyn Fn(&str) -> Box<dyn RunStore> + Sync);

/// A lease holder named `name` (its command), for tests.
pub fn holder(name: &str) -> LockHolder {
    LockHolder::current(jiff::Timestamp::UNIX_EPOCH, Some(name))
}

/// The records of a read with their positions, for comparing in tests.
pub fn jsons(read: &JournalRead) -> Vec<(u64, &str)> {
    read.entries
        .iter()
        .map(|e| (e.seq.0, e.json.as_str()))
        .collect()
}

/// Every check of the contract but the race.
pub fn all(store_for: StoreFor<'_>) {
    numbering(&*store_for("numbering"));
    one_writer(&*store_for("one-writer"));
    documents(&*store_for("documents"));
    queue(&*store_for("queueing"));
    whole(&*store_for("created-whole"));
}

/// The queue: runs are claimed oldest first, never by two claimers at once, a deferred run goes
/// to the back, a run taken out is not claimed, and a held run is skipped until its holder lets
/// go; the rows say what is queued and held.
pub fn queue(store: &dyn RunStore) {
    assert_eq!(store.queued().unwrap(), 0);
    assert!(store.claim(&holder("w")).unwrap().is_none());
    for run in ["q1", "q2", "q3"] {
        let mut lease = store.create(run, &holder("submit")).unwrap();
        store.set_queued(&mut lease, true).unwrap();
        // Queueing twice keeps the run's place.
        store.set_queued(&mut lease, true).unwrap();
        store.renew(&mut lease).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(store.queued().unwrap(), 3);
    let mut first = store.claim(&holder("w1")).unwrap().expect("a queued run");
    assert_eq!(first.run(), "q1");
    // Held: the next claimer gets the next run.
    let second = store.claim(&holder("w2")).unwrap().expect("a queued run");
    assert_eq!(second.run(), "q2");
    let rows = store.rows().unwrap();
    let row = |run: &str| rows.iter().find(|r| r.run == run).unwrap().clone();
    assert!(row("q1").live && row("q1").queued, "{rows:?}");
    assert!(!row("q3").live && row("q3").queued, "{rows:?}");
    assert!(row("q1").epoch >= 2, "{rows:?}");
    // Done with q1: out of the queue.
    store.set_queued(&mut first, false).unwrap();
    drop(first);
    // q2 cannot go on yet: to the back, behind q3.
    let mut second = second;
    store.defer(&mut second).unwrap();
    drop(second);
    let next = store.claim(&holder("w3")).unwrap().expect("a queued run");
    assert_eq!(next.run(), "q3");
    let after = store.claim(&holder("w4")).unwrap().expect("a queued run");
    assert_eq!(after.run(), "q2");
    assert!(store.claim(&holder("w5")).unwrap().is_none(), "all held");
    assert_eq!(store.queued().unwrap(), 2);
    assert!(
        !store
            .rows()
            .unwrap()
            .iter()
            .find(|r| r.run == "q1")
            .unwrap()
            .queued
    );
}

/// A run created whole has its journal and documents from the start, and cannot be created
/// twice.
pub fn whole(store: &dyn RunStore) {
    let records = [r#"{"n":1}"#, r#"{"n":2}"#];
    let documents: [(&str, &[u8]); 2] = [("meta.json", b"{}"), ("io/a/1.json", b"[1]")];
    let lease = store
        .create_whole("w", &holder("import"), &records, &documents)
        .unwrap();
    assert_eq!(lease.run(), "w");
    drop(lease);
    assert_eq!(
        jsons(&store.read_journal("w", Seq(0)).unwrap()),
        [(1, records[0]), (2, records[1])]
    );
    assert_eq!(
        store.get("w", "io/a/1.json").unwrap().as_deref(),
        Some(&b"[1]"[..])
    );
    assert_eq!(store.keys("w", "").unwrap(), ["io/a/1.json", "meta.json"]);
    assert!(matches!(
        store.create_whole("w", &holder("import"), &records, &[]),
        Err(StoreError::Exists { .. })
    ));
    assert!(
        store
            .create_whole("bad", &holder("import"), &["not json"], &[])
            .is_err()
    );
    assert!(!store.list().unwrap().contains(&"bad".to_string()));
}

/// Appends are numbered from 1, a batch at a time, read back whole, after a position or from the
/// tail; a batch with a bad record is refused whole.
pub fn numbering(store: &dyn RunStore) {
    let mut lease = store.create("r1", &holder("a")).unwrap();
    assert_eq!(lease.epoch(), 1);
    assert_eq!(store.append(&mut lease, &[r#"{"n":1}"#]).unwrap(), Seq(1));
    assert_eq!(store.append(&mut lease, &["2", "3"]).unwrap(), Seq(3));
    let all = store.read_journal("r1", Seq(0)).unwrap();
    assert_eq!(jsons(&all), [(1, r#"{"n":1}"#), (2, "2"), (3, "3")]);
    assert_eq!(all.len, 3);
    assert_eq!(
        jsons(&store.read_journal("r1", Seq(2)).unwrap()),
        [(3, "3")]
    );
    let tail = store.read_tail("r1", 2).unwrap();
    assert_eq!(jsons(&tail), [(2, "2"), (3, "3")]);
    assert_eq!(tail.len, 3);
    for bad in ["{\"a\":\n1}", "not json", "{\"a\":1} trailing"] {
        let err = store.append(&mut lease, &["4", bad]).unwrap_err();
        assert!(matches!(err, StoreError::BadRecord { .. }), "{bad}: {err}");
    }
    assert_eq!(store.read_journal("r1", Seq(0)).unwrap().len, 3);
    assert_eq!(store.list().unwrap(), ["r1"]);
    let missing = store.read_journal("missing", Seq(0)).unwrap_err();
    assert!(matches!(missing, StoreError::NoRun { .. }), "{missing}");
    for bad_run in ["..", "a/b", ""] {
        assert!(store.read_journal(bad_run, Seq(0)).is_err(), "{bad_run}");
        assert!(store.create(bad_run, &holder("a")).is_err(), "{bad_run}");
    }
}

/// One writer at a time: a second lease is refused while the first is held, each lease gets the
/// next epoch, a run cannot be created twice.
pub fn one_writer(store: &dyn RunStore) {
    let lease = store.create("r", &holder("first")).unwrap();
    let busy = store.lease("r", &holder("second")).unwrap_err();
    assert!(
        matches!(&busy, StoreError::Busy { holder: Some(h), .. } if h.command.as_deref() == Some("first")),
        "{busy}"
    );
    assert!(matches!(
        store.lease_state("r").unwrap(),
        LockState::Held(_)
    ));
    drop(lease);
    assert_eq!(store.lease_state("r").unwrap(), LockState::Free);
    let second = store.lease("r", &holder("second")).unwrap();
    assert_eq!(second.epoch(), 2);
    assert!(second.stale().is_none());
    drop(second);
    assert_eq!(store.lease("r", &holder("third")).unwrap().epoch(), 3);
    let exists = store.create("r", &holder("x")).unwrap_err();
    assert!(matches!(exists, StoreError::Exists { .. }), "{exists}");
    let missing = store.lease("nope", &holder("x")).unwrap_err();
    assert!(matches!(missing, StoreError::NoRun { .. }), "{missing}");
}

/// Documents are replaced whole and listed by key; keys stay inside the run; a removed run is
/// gone with everything in it.
pub fn documents(store: &dyn RunStore) {
    let mut lease = store.create("gone", &holder("a")).unwrap();
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
        store.get("gone", "metadata.json").unwrap().as_deref(),
        Some(&b"{\"v\":2}"[..])
    );
    assert_eq!(store.get("gone", "absent.json").unwrap(), None);
    assert_eq!(
        store.keys("gone", "").unwrap(),
        ["io/invocations/1.json", "metadata.json"]
    );
    assert_eq!(
        store.keys("gone", "io/").unwrap(),
        ["io/invocations/1.json"]
    );
    for outside in ["../escape.json", "/tmp/x", ".hidden", "io/../../x", ""] {
        let err = store
            .put(&mut lease, outside, b"{}", Flush::Lazy)
            .unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidId { .. }),
            "{outside}: {err}"
        );
        assert!(store.get("gone", outside).is_err(), "{outside}");
    }
    drop(store.create("kept", &holder("a")).unwrap());
    store.remove(lease).unwrap();
    assert_eq!(store.list().unwrap(), ["kept"]);
    let gone = store.read_journal("gone", Seq(0)).unwrap_err();
    assert!(matches!(gone, StoreError::NoRun { .. }), "{gone}");
}

/// `writers` writers, each with a store of its own from `store_for("race")` (a connection, an
/// open file), race for one run, `batches` randomised batches each: every batch lands whole and
/// in one piece, the sequence has no gap, and no epoch is granted twice. Bounded at 60 s.
pub fn race(store_for: StoreFor<'_>, writers: u64, batches: u64) {
    drop(store_for("race").create("r", &holder("setup")).unwrap());
    let epochs: Vec<u64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|w| scope.spawn(move || write_batches(&*store_for("race"), w, batches)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut sorted = epochs.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), epochs.len(), "an epoch was granted twice");
    let read = store_for("race").read_journal("r", Seq(0)).unwrap();
    let records: Vec<serde_json::Value> = read
        .entries
        .iter()
        .enumerate()
        .map(|(n, e)| {
            assert_eq!(e.seq, Seq(n as u64 + 1));
            serde_json::from_str(&e.json).unwrap()
        })
        .collect();
    let (mut at, mut seen) = (0, 0);
    while at < records.len() {
        let size = records[at]["of"].as_u64().unwrap() as usize;
        for i in 0..size {
            let r = &records[at + i];
            assert_eq!((&r["w"], &r["b"]), (&records[at]["w"], &records[at]["b"]));
            assert_eq!(r["i"], i as u64, "batch split at record {}", at + i + 1);
        }
        at += size;
        seen += 1;
    }
    assert_eq!(seen, writers * batches);
}

/// One racing writer: takes the lease whenever it is free and appends a batch of 1–4 records.
fn write_batches(store: &dyn RunStore, w: u64, batches: u64) -> Vec<u64> {
    let ids = crate::IdSource::seeded(w + 1);
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut done, mut epochs) = (0, Vec::new());
    while done < batches {
        assert!(Instant::now() < deadline, "writer {w} starved");
        let mut lease = match store.lease("r", &holder("race")) {
            Ok(lease) => lease,
            Err(StoreError::Busy { .. }) => {
                std::thread::sleep(Duration::from_millis(1));
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
}
