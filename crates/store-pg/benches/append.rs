//! Append latency of the storage seam, file store against a local PostgreSQL:
//! `cargo bench -p store-pg --bench append`.
//!
//! One record per append, each durable when the call returns (the file store: one write and one
//! fsync; PostgreSQL: one transaction that locks the run's row, checks the lease's epoch and
//! inserts, committed with the server flushing to disk). Prints p50, p99 and the maximum. The
//! PostgreSQL server is a throwaway cluster (or `PG_TEST_URL`); without one that part says
//! SKIPPED.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use store::{FileLayout, FileStore, LockHolder, RunStore};
use store_pg::PgStore;
use testkit::postgres::Postgres;

const APPENDS: usize = 2_000;

fn record(i: usize) -> String {
    format!(
        r#"{{"seq":{i},"type":"TOOL_EXECUTION","payload":{{"tool":"read_file","exit_code":0,"stdout":"{}"}}}}"#,
        "x".repeat(200)
    )
}

fn measure(label: &str, store: &dyn RunStore) {
    let holder = LockHolder::current(jiff::Timestamp::now(), Some("bench"));
    let mut lease = store.create("bench", &holder).unwrap();
    let mut took: Vec<Duration> = (0..APPENDS)
        .map(|i| {
            let line = record(i);
            let start = Instant::now();
            store.append(&mut lease, &[&line]).unwrap();
            start.elapsed()
        })
        .collect();
    took.sort();
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
    println!(
        "{label:<28} {APPENDS} appends  p50 {:>7.3} ms  p99 {:>7.3} ms  max {:>7.3} ms",
        at(0.50).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        took[took.len() - 1].as_secs_f64() * 1e3
    );
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let files = FileStore::new(
        dir.path(),
        FileLayout {
            journal: "journal.jsonl",
            lock: "run.lock",
        },
    );
    measure("file store (fsync)", &files);
    if let Some(pg) = Postgres::start_durable() {
        let store = PgStore::connect(&pg.url, "bench").unwrap();
        measure("PostgreSQL (Unix socket)", &store);
    }
}
