//! The store against a real PostgreSQL (a throwaway cluster, or `PG_TEST_URL`): one test starts
//! the server once and runs every case in a namespace of its own.

use std::time::{Duration, Instant};

use super::*;
use testkit::postgres::Postgres;

fn holder(name: &str) -> LockHolder {
    LockHolder::current(jiff::Timestamp::UNIX_EPOCH, Some(name))
}

fn jsons(read: &JournalRead) -> Vec<(u64, &str)> {
    read.entries
        .iter()
        .map(|e| (e.seq.0, e.json.as_str()))
        .collect()
}

#[test]
fn the_store_keeps_runs_in_postgresql() {
    let Some(pg) = Postgres::start() else {
        return;
    };
    let store = PgStore::connect(&pg.url, "cases").unwrap();
    // A second connection applies no migration twice.
    PgStore::connect(&pg.url, "cases").unwrap();
    appends_are_numbered_and_read_back(&store.with_namespace("numbered"));
    one_writer_at_a_time(&store.with_namespace("one-writer"));
    a_writer_whose_lease_was_taken_over_is_fenced(&store.with_namespace("fenced"));
    documents_and_removal(&store.with_namespace("documents"));
    namespaces_and_stores_do_not_mix(&store);
    racing_writers_on_separate_connections(&pg.url);
}

fn appends_are_numbered_and_read_back(store: &PgStore) {
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
    let bad = store.append(&mut lease, &["1", "{not json"]).unwrap_err();
    assert!(matches!(bad, StoreError::BadRecord { .. }), "{bad}");
    assert_eq!(store.read_journal("r1", Seq(0)).unwrap().len, 3);
    assert_eq!(store.list().unwrap(), ["r1"]);
    assert!(matches!(
        store.read_journal("missing", Seq(0)).unwrap_err(),
        StoreError::NoRun { .. }
    ));
}

fn one_writer_at_a_time(store: &PgStore) {
    let lease = store.create("r", &holder("first")).unwrap();
    let busy = store.lease("r", &holder("second")).unwrap_err();
    assert!(
        matches!(&busy, StoreError::Busy { holder: Some(h), .. } if h.command.as_deref() == Some("first")),
        "{busy}"
    );
    assert!(matches!(
        store.lease_state("r").unwrap(),
        LeaseState::Held(_)
    ));
    drop(lease);
    assert_eq!(store.lease_state("r").unwrap(), LeaseState::Free);
    let second = store.lease("r", &holder("second")).unwrap();
    assert_eq!(second.epoch(), 2);
    assert!(second.stale().is_none());
    assert!(matches!(
        store.create("r", &holder("x")).unwrap_err(),
        StoreError::Exists { .. }
    ));
    assert!(matches!(
        store.lease("nope", &holder("x")).unwrap_err(),
        StoreError::NoRun { .. }
    ));
}

fn a_writer_whose_lease_was_taken_over_is_fenced(store: &PgStore) {
    let short = store.clone().with_lease(Duration::from_millis(300));
    let mut first = short.create("r", &holder("paused")).unwrap();
    short.append(&mut first, &["1"]).unwrap();
    // The first writer stops renewing (a paused or cut-off process): its lease runs out.
    std::thread::sleep(Duration::from_millis(400));
    assert!(matches!(
        short.lease_state("r").unwrap(),
        LeaseState::Stale(_)
    ));
    let mut second = store.lease("r", &holder("successor")).unwrap();
    assert_eq!(second.epoch(), 2);
    assert_eq!(
        second.stale().and_then(|h| h.command.as_deref()),
        Some("paused")
    );
    for refused in [
        short.append(&mut first, &["2"]).unwrap_err(),
        short
            .put(&mut first, "state.json", b"{}", Flush::Durable)
            .unwrap_err(),
        short.renew(&first).unwrap_err(),
    ] {
        assert!(
            matches!(
                refused,
                StoreError::Fenced {
                    held: 1,
                    current: 2,
                    ..
                }
            ),
            "{refused}"
        );
    }
    store.renew(&second).unwrap();
    assert_eq!(store.append(&mut second, &["3"]).unwrap(), Seq(2));
    // The stale writer giving its lease up does not free its successor's.
    drop(first);
    assert!(matches!(
        store.lease_state("r").unwrap(),
        LeaseState::Held(_)
    ));
    assert_eq!(
        jsons(&store.read_journal("r", Seq(0)).unwrap()),
        [(1, "1"), (2, "3")]
    );
}

fn documents_and_removal(store: &PgStore) {
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
    assert_eq!(store.get("gone", "absent").unwrap(), None);
    assert_eq!(
        store.keys("gone", "").unwrap(),
        ["io/invocations/1.json", "metadata.json"]
    );
    assert_eq!(
        store.keys("gone", "io/").unwrap(),
        ["io/invocations/1.json"]
    );
    for outside in ["../x", "/etc/passwd", ".hidden"] {
        assert!(
            store.put(&mut lease, outside, b"{}", Flush::Lazy).is_err(),
            "{outside}"
        );
    }
    drop(store.create("kept", &holder("a")).unwrap());
    store.remove(lease).unwrap();
    assert_eq!(store.list().unwrap(), ["kept"]);
    assert_eq!(store.get("gone", "metadata.json").unwrap(), None);
    assert!(matches!(
        store.read_journal("gone", Seq(0)).unwrap_err(),
        StoreError::NoRun { .. }
    ));
}

fn namespaces_and_stores_do_not_mix(store: &PgStore) {
    let a = store.with_namespace("ns-a");
    let b = store.with_namespace("ns-b");
    let mut lease = a.create("same", &holder("a")).unwrap();
    drop(b.create("same", &holder("b")).unwrap());
    let err = b.append(&mut lease, &["1"]).unwrap_err();
    assert!(matches!(err, StoreError::ForeignLease { .. }), "{err}");
    a.append(&mut lease, &["1"]).unwrap();
    assert_eq!(b.read_journal("same", Seq(0)).unwrap().len, 0);
}

/// Writers on connections of their own race for one run: batches land whole and in order, the
/// sequence has no gap, and no epoch is granted twice. Bounded: 6 writers, 15 batches each.
fn racing_writers_on_separate_connections(url: &str) {
    let setup = PgStore::connect(url, "race").unwrap();
    drop(setup.create("r", &holder("setup")).unwrap());
    let writers: Vec<_> = (0..6u64)
        .map(|w| {
            let url = url.to_string();
            std::thread::spawn(move || {
                let store = PgStore::connect(&url, "race").unwrap();
                let ids = store::IdSource::seeded(w + 1);
                let deadline = Instant::now() + Duration::from_secs(60);
                let (mut done, mut epochs) = (0, Vec::new());
                while done < 15 {
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
            })
        })
        .collect();
    let mut epochs: Vec<u64> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    epochs.sort_unstable();
    let granted = epochs.len();
    epochs.dedup();
    assert_eq!(epochs.len(), granted, "an epoch was granted twice");
    let read = setup.read_journal("r", Seq(0)).unwrap();
    let records: Vec<serde_json::Value> = read
        .entries
        .iter()
        .enumerate()
        .map(|(n, e)| {
            assert_eq!(e.seq, Seq(n as u64 + 1));
            serde_json::from_str(&e.json).unwrap()
        })
        .collect();
    let (mut at, mut batches) = (0, 0);
    while at < records.len() {
        let size = records[at]["of"].as_u64().unwrap() as usize;
        for i in 0..size {
            assert_eq!(records[at + i]["w"], records[at]["w"]);
            assert_eq!(
                records[at + i]["i"],
                i as u64,
                "batch split at {}",
                at + i + 1
            );
        }
        at += size;
        batches += 1;
    }
    assert_eq!(batches, 6 * 15);
}
