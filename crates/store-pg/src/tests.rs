//! The store against a real PostgreSQL (a throwaway cluster, or `PG_TEST_URL`): one test starts
//! the server once and runs every case in a namespace of its own.

use std::time::Duration;

use super::*;
use store::contract::{holder, jsons};
use testkit::postgres::Postgres;

#[test]
fn the_store_keeps_runs_in_postgresql() {
    let Some(pg) = Postgres::start() else {
        return;
    };
    let store = PgStore::connect(&pg.url, "cases").unwrap();
    // A second connection applies no migration twice; the URL form reaches the same server.
    PgStore::connect(&pg.store_url(), "cases").unwrap();
    store::contract::all(&|case: &str| -> Box<dyn RunStore> {
        Box::new(store.with_namespace(case))
    });
    // Each racing writer on a connection of its own.
    store::contract::race(
        &|case: &str| -> Box<dyn RunStore> { Box::new(PgStore::connect(&pg.url, case).unwrap()) },
        6,
        15,
    );
    a_writer_whose_lease_was_taken_over_is_fenced(&store.with_namespace("fenced"));
    namespaces_and_stores_do_not_mix(&store);
    claimers_share_the_queue_without_doubles(&pg.url);
    a_claimed_run_whose_lease_ran_out_is_claimed_again(&store.with_namespace("takeover"));
    a_lease_whose_holder_process_is_gone_is_taken_at_once(&store.with_namespace("gone"));
}

fn a_lease_whose_holder_process_is_gone_is_taken_at_once(store: &PgStore) {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    child.wait().unwrap();
    let killed = LockHolder {
        pid: child.id(),
        ..holder("killed")
    };
    // Held by a process of this machine that is gone: taken at once, its holder reported stale.
    std::mem::forget(store.create("gone", &killed).unwrap());
    let taken = store.lease("gone", &holder("successor")).unwrap();
    assert_eq!(taken.epoch(), 2);
    assert_eq!(
        taken.stale().and_then(|h| h.command.as_deref()),
        Some("killed")
    );
    // A live holder keeps its lease; so does a gone one that did not say where it ran.
    std::mem::forget(store.create("alive", &holder("alive")).unwrap());
    let unscoped = LockHolder {
        process_scope: None,
        ..killed
    };
    std::mem::forget(store.create("unscoped", &unscoped).unwrap());
    for run in ["alive", "unscoped"] {
        assert!(
            matches!(
                store.lease(run, &holder("successor")),
                Err(StoreError::Busy { .. })
            ),
            "{run}"
        );
    }
}

fn claimers_share_the_queue_without_doubles(url: &str) {
    let store = PgStore::connect(url, "queue").unwrap();
    for n in 0..40 {
        let mut lease = store
            .create(&format!("r{n:02}"), &holder("submit"))
            .unwrap();
        store.set_queued(&mut lease, true).unwrap();
    }
    // One run created but never queued: no worker takes it.
    drop(store.create("idle", &holder("submit")).unwrap());
    let claimed: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|w| {
                scope.spawn(move || {
                    let store = PgStore::connect(url, "queue").unwrap();
                    let mut mine = Vec::new();
                    while let Some(mut lease) = store.claim(&holder(&format!("w{w}"))).unwrap() {
                        store.set_queued(&mut lease, false).unwrap();
                        mine.push(lease.run().to_string());
                    }
                    mine
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    let mut sorted = claimed.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 40, "every run claimed once: {claimed:?}");
    assert_eq!(claimed.len(), 40);
    let rows = store.rows().unwrap();
    assert_eq!(rows.len(), 41);
    assert!(rows.iter().all(|r| !r.queued));
}

fn a_claimed_run_whose_lease_ran_out_is_claimed_again(store: &PgStore) {
    let short = store.clone().with_lease(Duration::from_millis(300));
    let mut lease = short.create("r", &holder("submit")).unwrap();
    short.set_queued(&mut lease, true).unwrap();
    drop(lease);
    let first = short.claim(&holder("dies")).unwrap().unwrap();
    assert_eq!(first.epoch(), 2);
    // Held: nobody else gets it.
    assert!(store.claim(&holder("other")).unwrap().is_none());
    std::thread::sleep(Duration::from_millis(400));
    let second = store.claim(&holder("other")).unwrap().unwrap();
    assert_eq!(second.epoch(), 3);
    assert_eq!(
        second.stale().and_then(|h| h.command.as_deref()),
        Some("dies")
    );
    let row = store.rows().unwrap().remove(0);
    assert!(row.live && row.queued);
    assert_eq!(row.epoch, 3);
    // The first holder giving up does not free its successor's lease.
    drop(first);
    assert!(store.rows().unwrap()[0].live);
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
        short.renew(&mut first).unwrap_err(),
        short.set_queued(&mut first, true).unwrap_err(),
        short.defer(&mut first).unwrap_err(),
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
    store.renew(&mut second).unwrap();
    // A write that has nothing to change under a current lease is no refusal.
    store.defer(&mut second).unwrap();
    assert_eq!(store.queued().unwrap(), 0);
    assert_eq!(store.append(&mut second, &["3"]).unwrap(), Seq(2));
    assert_eq!(store.append(&mut second, &[]).unwrap(), Seq(2));
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
    // A run removed by the writer that took it over: the stale writer's writes find it gone.
    let mut stale = short.create("removed", &holder("paused")).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    store
        .remove(store.lease("removed", &holder("remover")).unwrap())
        .unwrap();
    for refused in [
        short.append(&mut stale, &["1"]).unwrap_err(),
        short
            .put(&mut stale, "state.json", b"{}", Flush::Durable)
            .unwrap_err(),
        short.set_queued(&mut stale, false).unwrap_err(),
    ] {
        assert!(matches!(refused, StoreError::NoRun { .. }), "{refused}");
    }
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
