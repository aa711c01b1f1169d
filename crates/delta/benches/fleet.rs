//! The fleet on a real PostgreSQL: `cargo bench -p delta --bench fleet`.
//!
//! **Runs per second** with 1, 2 and 4 `delta worker` processes (one slot each), or the counts
//! given as arguments (`cargo bench -p delta --bench fleet -- 1 8 32 64`, for a machine with more
//! cores): 20 runs per worker (at least 120) are submitted, then the workers are started with
//! `--exit-when-done` and timed until the last one exits. Each run is two model answers from the
//! scripted server on 127.0.0.1 (instant: a call to the agent's one tool, `true`, then a final
//! answer), so the figure is delta's and the store's own cost per run. The same number of workers
//! started on an empty queue is timed too: their start and stop, which a short batch pays in full,
//! and the rate without it. Beside each rate, the CPU each run cost (the whole machine's, from
//! `/proc/stat`, split into the workers', the scripted server's and the rest, PostgreSQL's) and the
//! rate at which that would fill every core: where the rate stops growing with workers, compare
//! it with that ceiling. And the store's transactions per run (PostgreSQL's `xact_commit`).
//!
//! **Append latency** of a journaled event as the engine appends it (`events::RunJournal`): to the
//! working copy only (the file store: write + fsync), and with the store as upstream (the line in
//! PostgreSQL first, in a transaction that checks the lease, then the file).
//!
//! With `DELTA_BENCH_BASELINE=/path/to/an/older/delta`, that binary's workers are timed too, each
//! worker count's rounds alternating between the two builds: the before/after of a change in one
//! run (the appends are this build's only).
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

/// CPU time used so far: by the whole machine (every process, from `/proc/stat`; `None` where it
/// cannot be read), by this process's ended children (the workers) and by this process (the
/// scripted server's threads).
#[derive(Clone, Copy)]
struct Cpu {
    machine: Option<Duration>,
    children: Duration,
    this: Duration,
}

impl Cpu {
    fn now() -> Self {
        use nix::sys::resource::UsageWho;
        // The first line of /proc/stat: user nice system idle iowait irq softirq steal, in ticks
        // of 1/100 s (USER_CLK_HZ on Linux).
        let machine = std::fs::read_to_string("/proc/stat").ok().and_then(|stat| {
            let ticks: Vec<u64> = stat
                .lines()
                .next()?
                .split_whitespace()
                .skip(1)
                .filter_map(|t| t.parse().ok())
                .collect();
            let busy =
                ticks.first()? + ticks.get(1)? + ticks.get(2)? + ticks.get(5)? + ticks.get(6)?;
            Some(Duration::from_millis(busy * 10))
        });
        Cpu {
            machine,
            children: testkit::cpu_used(UsageWho::RUSAGE_CHILDREN),
            this: testkit::cpu_used(UsageWho::RUSAGE_SELF),
        }
    }

    /// CPU per run between `self` (before) and `after`: the machine's, the workers', this process's.
    fn per_run(&self, after: &Cpu, runs: usize) -> (Option<Duration>, Duration, Duration) {
        let runs = runs.max(1) as u32;
        (
            after
                .machine
                .zip(self.machine)
                .map(|(a, b)| a.saturating_sub(b) / runs),
            after.children.saturating_sub(self.children) / runs,
            after.this.saturating_sub(self.this) / runs,
        )
    }
}

/// Submits `runs` runs, then times `workers` workers working them all; also returns the CPU used
/// while they did, and the store's transactions per run.
fn time_workers(
    delta: &std::path::Path,
    url: &str,
    workers: usize,
    runs: usize,
    round: usize,
    dir: &std::path::Path,
) -> (Duration, Cpu, Cpu, f64) {
    let server = ScriptedServer::responding(model);
    let agent = agent(dir);
    let store = fleet::open(url).unwrap();
    for n in 0..runs {
        let submission = Submission {
            agent: agent.clone(),
            task: "go".into(),
            workspace: None,
            max_iterations: None,
            model: None,
            submitted: String::new(),
        };
        let id = format!("b{round}-{n:05}");
        fleet::submit(
            &*store,
            &submission,
            Some(&id),
            Clock::System,
            &IdSource::seeded(1),
        )
        .unwrap();
    }
    let mut db = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let commits_before = commits(&mut db);
    let cpu_before = Cpu::now();
    let start = Instant::now();
    let mut children: Vec<_> = (0..workers)
        .map(|w| {
            Command::new(delta)
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
    let cpu_after = Cpu::now();
    let transactions = commits(&mut db).saturating_sub(commits_before);
    let done = fleet::admin::list(&*store)
        .unwrap()
        .iter()
        .filter(|r| r.run_id.starts_with(&format!("b{round}-")) && r.status == "COMPLETED")
        .count();
    assert_eq!(done, runs, "every run completed");
    (
        took,
        cpu_before,
        cpu_after,
        transactions as f64 / runs.max(1) as f64,
    )
}

/// Transactions committed in the store's database so far (PostgreSQL's own count; it is updated
/// when a backend reports, so read it after the workers have ended).
fn commits(db: &mut postgres::Client) -> i64 {
    db.query_one(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
        &[],
    )
    .unwrap()
    .get(0)
}

/// The worker counts given as arguments (numbers; cargo's own flags are left out), else 1, 2, 4.
fn worker_counts() -> Vec<usize> {
    let given: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .filter(|n| *n > 0)
        .collect();
    if given.is_empty() {
        vec![1, 2, 4]
    } else {
        given
    }
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

    let mut binaries = vec![(
        "this build",
        std::path::PathBuf::from(env!("CARGO_BIN_EXE_delta")),
    )];
    if let Some(old) = std::env::var_os("DELTA_BENCH_BASELINE") {
        binaries.push(("baseline", old.into()));
    }
    let mut base = vec![None; binaries.len()];
    let mut round = 0;
    for workers in worker_counts() {
        for ((name, delta), base) in binaries.iter().zip(base.iter_mut()) {
            if binaries.len() > 1 {
                println!("{name} ({})", delta.display());
            }
            round += 1;
            time_round(delta, &url, workers, round, dir.path(), base);
        }
    }
}

/// Times `workers` workers of `delta` on a queue of runs and on an empty one, and prints the
/// rate, against `base` (one worker's rate, set by the first round), and the CPU per run.
fn time_round(
    delta: &std::path::Path,
    url: &str,
    workers: usize,
    round: usize,
    dir: &std::path::Path,
    base: &mut Option<f64>,
) {
    let runs = RUNS.max(20 * workers);
    let (took, before, after, transactions) =
        time_workers(delta, url, workers, runs, 2 * round, dir);
    let (idle, ..) = time_workers(delta, url, workers, 0, 2 * round + 1, dir);
    let rate = runs as f64 / took.as_secs_f64();
    let steady = runs as f64 / took.saturating_sub(idle).as_secs_f64().max(1e-9);
    let base = *base.get_or_insert(rate / workers as f64);
    println!(
        "{workers:>3} worker(s), {runs:>5} runs: {rate:>7.1} runs/s ({:.2}× one worker); start and stop on an empty queue {:>7.1} ms; without them {steady:>7.1} runs/s",
        rate / base,
        ms(idle)
    );
    let (machine, workers_cpu, server_cpu) = before.per_run(&after, runs);
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    match machine {
        Some(machine) => println!(
            "    CPU per run {:>6.1} ms: workers {:>5.1}, scripted server {:>4.1}, the rest (PostgreSQL) {:>5.1}; {cores} cores can do at most {:.0} runs/s; {transactions:.1} store transactions per run",
            ms(machine),
            ms(workers_cpu),
            ms(server_cpu),
            ms(machine.saturating_sub(workers_cpu + server_cpu)),
            cores as f64 / machine.as_secs_f64().max(1e-9)
        ),
        None => println!(
            "    CPU per run: workers {:>5.1} ms, scripted server {:>4.1} ms (/proc/stat not readable: the rest not counted); {transactions:.1} store transactions per run",
            ms(workers_cpu),
            ms(server_cpu)
        ),
    }
}
