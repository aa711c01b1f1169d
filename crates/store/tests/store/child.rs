//! Child-process entry points. The tests re-run this test binary with `--ignored --exact child::<name>`
//! and an environment variable that tells the entry point what to do. They are `#[ignore]`d so that a
//! normal test run does not count them as tests; run directly without the variable they do nothing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use store::{Durability, Journal, LockHolder, RunLock};

/// Size of the padding of the "big" writer's records.
pub const BIG_PAD: usize = 4 << 20;

pub const ROLE_VAR: &str = "STORE_TEST_CHILD_ROLE";
pub const PATH_VAR: &str = "STORE_TEST_CHILD_PATH";

/// Starts this test binary as a child running the entry point `name` with `role` on `path`.
pub fn spawn(name: &str, role: &str, path: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &format!("child::{name}"),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE_VAR, role)
        .env(PATH_VAR, path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until `cond` holds, for at most 30 s.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn role() -> Option<(String, PathBuf)> {
    let role = std::env::var(ROLE_VAR).ok()?;
    let path = std::env::var_os(PATH_VAR)?;
    Some((role, PathBuf::from(path)))
}

/// A record whose size varies a lot, so some appends are large writes.
pub fn record(seq: u64) -> serde_json::Value {
    let pad = if seq % 7 == 3 {
        256 * 1024
    } else {
        (seq % 50) as usize
    };
    serde_json::json!({"seq": seq, "pad": "x".repeat(pad)})
}

#[test]
#[ignore = "entry point for child processes spawned by other tests"]
fn journal_writer() {
    let Some((role, path)) = role() else { return };
    let durability = if role == "big" {
        Durability::Buffered
    } else {
        Durability::Fsync
    };
    let mut journal = Journal::open_with(&path, durability).unwrap();
    match role.as_str() {
        // Append forever; the parent kills us.
        "burst" => {
            for seq in 0.. {
                journal.append(&record(seq)).unwrap();
            }
        }
        // Large records appended as fast as possible (no fsync), so a kill can land inside a write
        // and the kernel leaves part of a line behind.
        "big" => {
            let pad = "x".repeat(BIG_PAD);
            for seq in 0.. {
                journal
                    .append_raw(&format!("{{\"seq\":{seq},\"pad\":\"{pad}\"}}"))
                    .unwrap();
            }
        }
        // Ten complete records, then half a record as if the machine lost power mid-write, then wait.
        "torn" => {
            for seq in 0..10 {
                journal.append(&record(seq)).unwrap();
            }
            use std::io::Write;
            let mut raw = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            raw.write_all(br#"{"seq":10,"pad":"xx"#).unwrap();
            raw.sync_all().unwrap();
            std::fs::write(path.with_extension("ready"), "").unwrap();
            std::thread::sleep(Duration::from_secs(120));
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
#[ignore = "entry point for child processes spawned by other tests"]
fn lock_holder() {
    let Some((_, path)) = role() else { return };
    let acquired = RunLock::acquire(
        &path,
        &LockHolder::current(jiff::Timestamp::now(), Some("child")),
    )
    .unwrap();
    std::fs::write(path.with_extension("ready"), "").unwrap();
    std::thread::sleep(Duration::from_secs(120));
    drop(acquired);
}
