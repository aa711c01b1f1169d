//! Journal throughput: `cargo bench -p store --bench journal`.
//!
//! Appends with the default durability (fsync per line) and buffered (no fsync), then reads the
//! result back. Prints one line per measurement.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use store::{Durability, Journal, journal};

fn record(i: u64) -> Value {
    json!({"seq": i, "type": "TOOL_EXECUTION", "ts": "2026-01-01T00:00:00Z",
           "payload": {"tool": "read_file", "exit_code": 0, "stdout": "x".repeat(200)}})
}

fn report(what: &str, n: u64, bytes: u64, elapsed: Duration) {
    let secs = elapsed.as_secs_f64();
    println!(
        "{what:<34} {n:>7} records  {:>9.1} µs/record  {:>9.0} records/s  {:>7.1} MB/s",
        secs * 1e6 / n as f64,
        n as f64 / secs,
        bytes as f64 / secs / 1e6
    );
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    for (label, durability, n) in [
        (
            "append, fsync per line (default)",
            Durability::Fsync,
            2_000u64,
        ),
        ("append, buffered", Durability::Buffered, 200_000u64),
    ] {
        let path = dir.path().join(format!("{n}.jsonl"));
        let mut j = Journal::open_with(&path, durability).unwrap();
        let start = Instant::now();
        for i in 0..n {
            j.append(&record(i)).unwrap();
        }
        j.sync().unwrap();
        let elapsed = start.elapsed();
        report(label, n, std::fs::metadata(&path).unwrap().len(), elapsed);

        let start = Instant::now();
        let contents = journal::read::<Value>(&path).unwrap();
        let elapsed = start.elapsed();
        assert_eq!(contents.records.len() as u64, n);
        report(
            "read back",
            n,
            std::fs::metadata(&path).unwrap().len(),
            elapsed,
        );
    }
}
