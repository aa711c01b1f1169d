//! The fleet on a real PostgreSQL: `cargo bench -p delta --bench fleet`.
//!
//! **Runs per second** with 1, 2 and 4 `delta worker` processes (one slot each): 120 runs are
//! submitted, then the workers are started with `--exit-when-done` and timed until the last one
//! exits. Each run is two model answers from the scripted server on 127.0.0.1 (instant: a call to
//! the agent's one tool, `true`, then a final answer), so the figure is delta's and the store's
//! own cost per run.
//!
//! **Append latency** of a journaled event as the engine appends it (`events::RunJournal`): to the
//! working copy only (the file store: write + fsync), and with the store as upstream (the line in
//! PostgreSQL first, in a transaction that checks the lease, then the file).
//!
//! PostgreSQL is a throwaway cluster flushing to disk, reached over TCP on 127.0.0.1 (or
//! `PG_TEST_URL`); without one the benchmark says SKIPPED.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use delta::events::{Event, RunJournal, Upstream};
use delta::fleet::upstream::StoreUpstream;
use delta::fleet::{self, Submission};
use serde_json::{Value, json};
use store::{Clock, IdSource, LockHolder};
use testkit::postgres::Postgres;
use testkit::{Reply, ScriptedServer};

const RUNS: usize = 120;
const APPENDS: usize = 1_000;

/// The instant model: the tool first, then the answer.
fn model(body: &Value) -> Reply {
    let last_is_result = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["role"] == "tool");
    if last_is_result {
        Reply::text("done")
    } else {
        Reply::tool_call("c1", "noop", json!({}))
    }
}

fn agent(dir: &std::path::Path) -> std::path::PathBuf {
    let agent = dir.join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.yaml"),
        "name: bench\nllm:\n  model: m\ntools:\n  - name: noop\n    exec: \"true\"\n",
    )
    .unwrap();
    std::fs::write(agent.join("system_prompt.md"), "Benchmark agent.").unwrap();
    agent
}

/// Submits `RUNS` runs, then times `workers` workers working them all.
fn runs_per_second(url: &str, workers: usize, round: usize, dir: &std::path::Path) -> f64 {
    let server = ScriptedServer::responding(model);
    let agent = agent(dir);
    let store = fleet::open(url).unwrap();
    for n in 0..RUNS {
        let submission = Submission {
            agent: agent.clone(),
            task: "go".into(),
            workspace: None,
            max_iterations: None,
            model: None,
            submitted: String::new(),
        };
        let id = format!("b{round}-{n:03}");
        fleet::submit(
            &*store,
            &submission,
            Some(&id),
            Clock::System,
            &IdSource::seeded(1),
        )
        .unwrap();
    }
    let start = Instant::now();
    let mut children: Vec<_> = (0..workers)
        .map(|w| {
            Command::new(env!("CARGO_BIN_EXE_delta"))
                .args(["worker", "--exit-when-done", "--poll-ms", "20", "--dir"])
                .arg(dir.join(format!("copies-{w}")))
                .env("DELTA_STORE", url)
                .env("DELTA_API_KEY", "bench-key")
                .env("DELTA_BASE_URL", server.openai_base())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in &mut children {
        assert!(child.wait().unwrap().success());
    }
    let took = start.elapsed();
    let done = fleet::admin::list(&*store)
        .unwrap()
        .iter()
        .filter(|r| r.run_id.starts_with(&format!("b{round}-")) && r.status == "COMPLETED")
        .count();
    assert_eq!(done, RUNS, "every run completed");
    RUNS as f64 / took.as_secs_f64()
}

/// p50 and p99 of appending one event through `journal`.
fn append_latency(journal: &mut RunJournal) -> (Duration, Duration) {
    let mut took: Vec<Duration> = (0..APPENDS)
        .map(|i| {
            let event = Event::UserMessage {
                content: format!("message {i} {}", "x".repeat(200)),
            };
            let start = Instant::now();
            journal.append(&event).unwrap();
            start.elapsed()
        })
        .collect();
    took.sort();
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
    (at(0.50), at(0.99))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let Some(pg) = Postgres::start_durable() else {
        return;
    };
    let url = pg.loopback_url();
    // In the build folder (a real disk, like a workspace), not necessarily /tmp.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();

    let file = dir.path().join("file.jsonl");
    let mut plain = RunJournal::open(&file, Clock::System).unwrap().journal;
    let (p50, p99) = append_latency(&mut plain);
    println!(
        "append, working copy only (file, fsync)      p50 {:>6.3} ms  p99 {:>6.3} ms",
        ms(p50),
        ms(p99)
    );
    let store = fleet::open(&url).unwrap();
    let holder = LockHolder::current(jiff::Timestamp::now(), Some("bench"));
    let lease = store.create("append-bench", &holder).unwrap();
    let upstream: Arc<dyn Upstream> = StoreUpstream::new(store.clone(), lease);
    let mirrored = dir.path().join("mirrored.jsonl");
    let mut journal = RunJournal::open(&mirrored, Clock::System)
        .unwrap()
        .journal
        .with_upstream(Some(upstream));
    let (p50, p99) = append_latency(&mut journal);
    println!(
        "append, PostgreSQL first (loopback), then file p50 {:>6.3} ms  p99 {:>6.3} ms",
        ms(p50),
        ms(p99)
    );

    let mut base = 0.0;
    for (round, workers) in [1usize, 2, 4].into_iter().enumerate() {
        let rate = runs_per_second(&url, workers, round, dir.path());
        if workers == 1 {
            base = rate;
        }
        println!(
            "{workers} worker(s): {RUNS} runs                     {rate:>7.1} runs/s  ({:.2}× one worker)",
            rate / base
        );
    }
}
