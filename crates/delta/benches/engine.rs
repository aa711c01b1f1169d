//! Engine overhead: `cargo bench -p delta --bench engine`.
//!
//! Runs the real `delta` binary against the scripted LLM server on 127.0.0.1 (instant answers) with an
//! agent whose only tool is `true`, for runs of 0, 10 and 50 tool iterations, timed from outside as a
//! user would: wall time, and CPU time of `delta` and its tools (the server runs in this process).
//! The cost of one tool iteration is the slope between 0 and 50. Beside it, the floor: one process
//! spawn (`true`) and two durable appends (a journal line and `fdatasync`, twice); and the slope of
//! a plain loop of the same steps written in this file (a request over a fresh connection, an append,
//! `true` with its output read, an append), the least an engine of this shape pays on this machine,
//! which tells a slow machine from a slow engine. The time the
//! scripted server spends producing its answers is shown apart. Peak memory is that of one more
//! 50-iteration run of each binary, watched from `/proc` (`VmHWM`), untimed.
//!
//! With `DELTA_BENCH_BASELINE=/path/to/an/older/delta`, that binary is measured too, its runs
//! alternating with this build's, so that both see the same machine: the before/after comparison of
//! a change, in one run.
//!
//! To run the built benchmark on another machine (more cores, a quieter one), copy it with the
//! binaries and name them: `DELTA_BENCH_DELTA` is the build measured (this build's `delta` by
//! default), `DELTA_BENCH_DIR` the folder the runs work in (the build's temporary folder by
//! default).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::resource::UsageWho;
use serde_json::json;
use testkit::{Reply, ScriptedServer};

const REPEATS: usize = 7;

/// The `delta` measured: `DELTA_BENCH_DELTA`, else this build's.
fn this_build() -> std::path::PathBuf {
    std::env::var_os("DELTA_BENCH_DELTA")
        .map_or_else(|| env!("CARGO_BIN_EXE_delta").into(), Into::into)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// One run's figures: wall time, the part of it the server spent answering, and the CPU time of
/// `delta` and its tools.
#[derive(Clone, Copy)]
struct Run {
    wall: Duration,
    server: Duration,
    cpu: Duration,
}

/// CPU time (user and system) of this process's children that have ended.
fn children_cpu() -> Duration {
    testkit::cpu_used(UsageWho::RUSAGE_CHILDREN)
}

/// One run of `iterations` tool iterations. The run's folder is kept in `keep` until the
/// benchmark ends: deleting files while measuring (with online discard, as on many virtual disks)
/// slows the next runs' fsyncs and blurs the figures.
fn run_once(
    delta: &std::path::Path,
    iterations: usize,
    durable_dir: &std::path::Path,
    keep: &mut Vec<tempfile::TempDir>,
) -> Run {
    let server = scripted(iterations);
    let (sandbox, agent) = bench_agent(durable_dir);
    let cpu_before = children_cpu();
    let start = Instant::now();
    let mut delta = Command::new(delta);
    let status = run_args(&mut delta, &agent, &sandbox, iterations, &server)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let wall = start.elapsed();
    let cpu = children_cpu().saturating_sub(cpu_before);
    assert!(status.success());
    assert_eq!(server.remaining(), 0);
    keep.push(sandbox);
    Run {
        wall,
        server: server.busy_time(),
        cpu,
    }
}

/// Two durable appends of a journal-sized line (write, then `fdatasync`), the floor of an
/// iteration's journaling: the median of many, in `dir`.
fn durable_appends(dir: &std::path::Path) -> Duration {
    use std::io::Write;
    let path = dir.join(format!("floor-{}.jsonl", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap();
    let line = format!("{}\n", "x".repeat(300));
    let times: Vec<Duration> = (0..200)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..2 {
                file.write_all(line.as_bytes()).unwrap();
                file.sync_data().unwrap();
            }
            start.elapsed()
        })
        .collect();
    let _ = std::fs::remove_file(&path);
    median(times)
}

/// A server that asks for the tool `iterations` times, then answers.
fn scripted(iterations: usize) -> ScriptedServer {
    let mut script: Vec<Reply> = (0..iterations)
        .map(|i| Reply::tool_call(&format!("c{i}"), "noop", json!({})))
        .collect();
    script.push(Reply::text("done"));
    ScriptedServer::start(script)
}

/// `delta run` of `agent` in the sandbox's `ws`, for `iterations` tool calls, against `server`.
fn run_args<'c>(
    cmd: &'c mut Command,
    agent: &std::path::Path,
    sandbox: &tempfile::TempDir,
    iterations: usize,
    server: &ScriptedServer,
) -> &'c mut Command {
    cmd.args(["run", "--agent"])
        .arg(agent)
        .arg("-w")
        .arg(sandbox.path().join("ws"))
        .args([
            "-m",
            "go",
            "--max-iterations",
            &(iterations + 1).to_string(),
        ])
        .args(["--format", "raw"])
        .env("DELTA_API_KEY", "bench-key")
        .env("DELTA_BASE_URL", server.openai_base())
}

/// A sandbox in `dir` with an agent whose only tool is `true`.
fn bench_agent(dir: &std::path::Path) -> (tempfile::TempDir, std::path::PathBuf) {
    let sandbox = tempfile::tempdir_in(dir).unwrap();
    let agent = sandbox.path().join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.yaml"),
        "name: bench\nllm:\n  model: m\ntools:\n  - name: noop\n    exec: \"true\"\n",
    )
    .unwrap();
    std::fs::write(agent.join("system_prompt.md"), "Benchmark agent.").unwrap();
    (sandbox, agent)
}

/// fsync and fdatasync calls of a run of `iterations` iterations, counted by strace (`None` without
/// strace).
fn syncs(iterations: usize, dir: &std::path::Path) -> Option<usize> {
    let server = scripted(iterations);
    let (sandbox, agent) = bench_agent(dir);
    // An existing workspace, as most runs have.
    std::fs::create_dir_all(sandbox.path().join("ws/.delta")).unwrap();
    std::fs::write(sandbox.path().join("ws/.delta/VERSION"), "1.2\n").unwrap();
    let trace = sandbox.path().join("trace");
    let mut strace = Command::new("strace");
    strace
        .args(["-f", "-c", "-e", "trace=fsync,fdatasync", "-o"])
        .arg(&trace)
        .arg(this_build());
    let status = run_args(&mut strace, &agent, &sandbox, iterations, &server)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    if !status.success() {
        return None;
    }
    let report = std::fs::read_to_string(&trace).ok()?;
    Some(
        report
            .lines()
            .filter(|l| l.ends_with("fsync") || l.ends_with("fdatasync"))
            .filter_map(|l| l.split_whitespace().nth(3)?.parse::<usize>().ok())
            .sum(),
    )
}

/// A loop of the engine's shape written as plainly as it can be, in this process: per iteration a
/// model request over a fresh connection (the conversation growing as delta's does, the answer read
/// whole and parsed), a durable append, `true` run with its output read, a durable append. What it
/// costs is the least any engine of this shape pays here: delta's slope is judged against it.
fn reference_loop(
    iterations: usize,
    dir: &std::path::Path,
    keep: &mut Vec<tempfile::TempDir>,
) -> Run {
    use std::io::{Read, Write};
    let server = scripted(iterations);
    let addr = server.url().trim_start_matches("http://").to_string();
    let folder = tempfile::tempdir_in(dir).unwrap();
    let path = folder.path().join("journal.jsonl");
    keep.push(folder);
    let mut journal = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap();
    let mut append = |value: &serde_json::Value| {
        journal.write_all(format!("{value}\n").as_bytes()).unwrap();
        journal.sync_data().unwrap();
    };
    let thread_cpu = || testkit::cpu_used(UsageWho::RUSAGE_THREAD);
    let (cpu_before, children_before) = (thread_cpu(), children_cpu());
    let start = Instant::now();
    let mut messages = vec![
        json!({"role": "system", "content": "Benchmark agent."}),
        json!({"role": "user", "content": "go"}),
    ];
    loop {
        let body = json!({"model": "m", "messages": messages}).to_string();
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        stream.set_nodelay(true).unwrap();
        write!(
            stream,
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).unwrap();
        let at = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let answer: serde_json::Value = serde_json::from_slice(&answer[at..]).unwrap();
        let message = answer["choices"][0]["message"].clone();
        append(&json!({"type": "THOUGHT", "message": message}));
        let Some(call) = message["tool_calls"][0]["id"].as_str().map(str::to_string) else {
            break;
        };
        let out = Command::new("true").stdin(Stdio::null()).output().unwrap();
        append(&json!({"type": "ACTION_RESULT", "id": call, "code": out.status.code()}));
        messages.push(message);
        messages.push(json!({"role": "tool", "tool_call_id": call, "content": "ok"}));
    }
    let wall = start.elapsed();
    let cpu = (thread_cpu() + children_cpu()).saturating_sub(cpu_before + children_before);
    assert_eq!(server.remaining(), 0);
    Run {
        wall,
        server: server.busy_time(),
        cpu,
    }
}

fn spawn_true(n: usize) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        Command::new("true").status().unwrap();
    }
    start.elapsed()
}

/// Medians of one binary's runs, per run length.
type Figures = Vec<Run>;

const LENGTHS: [usize; 3] = [0, 10, 50];

/// Medians of runs.
fn medians(runs: &[Run]) -> Run {
    Run {
        wall: median(runs.iter().map(|r| r.wall).collect()),
        server: median(runs.iter().map(|r| r.server).collect()),
        cpu: median(runs.iter().map(|r| r.cpu).collect()),
    }
}

/// Runs every binary `REPEATS` times per run length, alternating between them, and the plain loop
/// ([`reference_loop`]) in the same rounds, so that all see the same machine. The binaries' figures,
/// then the plain loop's.
fn measure(binaries: &[std::path::PathBuf], dir: &std::path::Path) -> (Vec<Figures>, Figures) {
    let mut keep = Vec::new();
    let mut figures = vec![Vec::new(); binaries.len()];
    let mut reference = Vec::new();
    for n in LENGTHS {
        let mut runs = vec![Vec::new(); binaries.len()];
        let mut plain = Vec::new();
        for _ in 0..REPEATS {
            for (bin, runs) in binaries.iter().zip(runs.iter_mut()) {
                runs.push(run_once(bin, n, dir, &mut keep));
            }
            plain.push(reference_loop(n, dir, &mut keep));
        }
        for (runs, figures) in runs.iter().zip(figures.iter_mut()) {
            figures.push(medians(runs));
        }
        reference.push(medians(&plain));
    }
    (figures, reference)
}

/// Per tool iteration: the slope of `pick` between the shortest and the longest runs, in seconds.
fn slope(results: &Figures, pick: fn(&Run) -> Duration) -> f64 {
    let last = LENGTHS.len() - 1;
    pick(&results[last])
        .saturating_sub(pick(&results[0]))
        .as_secs_f64()
        / LENGTHS[last] as f64
}

/// What is measured beside every binary: the floor (a spawn, two appends) and the plain loop.
struct Beside {
    spawn: f64,
    appends: f64,
    reference: Figures,
}

fn report(label: &str, results: &Figures, beside: &Beside) {
    println!("{label}");
    for (n, r) in LENGTHS.iter().zip(results) {
        println!(
            "run of {n:>2} tool iterations       {:>8.2} ms wall, {:>7.2} ms CPU (median of {REPEATS}; scripted server {:.2} ms)",
            r.wall.as_secs_f64() * 1e3,
            r.cpu.as_secs_f64() * 1e3,
            r.server.as_secs_f64() * 1e3
        );
    }
    println!(
        "per tool iteration (slope 0→{}):  {:>8.3} ms wall, {:.3} ms CPU (wanted: ≤ 2.0 wall, ≤ 1.5 CPU)",
        LENGTHS[LENGTHS.len() - 1],
        slope(results, |r| r.wall) * 1e3,
        slope(results, |r| r.cpu) * 1e3
    );
    println!(
        "  of which the scripted server    {:>8.3} ms",
        slope(results, |r| r.server) * 1e3
    );
    println!(
        "  the floor: a spawn + 2 appends  {:>8.3} ms ({:.3} ms spawning `true`, {:.3} ms for two durable appends)",
        (beside.spawn + beside.appends) * 1e3,
        beside.spawn * 1e3,
        beside.appends * 1e3
    );
    let plain = (
        slope(&beside.reference, |r| r.wall),
        slope(&beside.reference, |r| r.cpu),
    );
    println!(
        "  a plain loop of the same steps  {:>8.3} ms wall, {:.3} ms CPU (request, append, spawn, append: the least it costs here)",
        plain.0 * 1e3,
        plain.1 * 1e3
    );
    println!(
        "  delta beyond the plain loop     {:>8.3} ms wall, {:.3} ms CPU",
        (slope(results, |r| r.wall) - plain.0) * 1e3,
        (slope(results, |r| r.cpu) - plain.1) * 1e3
    );
    println!(
        "startup (run without tool calls)  {:>8.2} ms",
        results[0].wall.as_secs_f64() * 1e3
    );
}

fn main() {
    // Benchmark in the build folder (a real disk, like a workspace), not necessarily /tmp.
    let dir = std::env::var_os("DELTA_BENCH_DIR").map_or_else(
        || env!("CARGO_TARGET_TMPDIR").into(),
        std::path::PathBuf::from,
    );
    let mut binaries = vec![this_build()];
    let baseline = std::env::var_os("DELTA_BENCH_BASELINE").map(std::path::PathBuf::from);
    binaries.extend(baseline.clone());
    let (figures, reference) = measure(&binaries, &dir);
    let beside = Beside {
        spawn: median((0..REPEATS).map(|_| spawn_true(50)).collect()).as_secs_f64() / 50.0,
        appends: durable_appends(&dir).as_secs_f64(),
        reference,
    };
    report("this build", &figures[0], &beside);
    if let Some(baseline) = &baseline {
        report(
            &format!("baseline {}", baseline.display()),
            &figures[1],
            &beside,
        );
    }
    match (syncs(0, &dir), syncs(10, &dir)) {
        (Some(empty), Some(ten)) => {
            println!("fsync + fdatasync, run without tool calls {empty:>8}");
            println!(
                "fsync + fdatasync per iteration     {:>8.1} (slope 0→10 tool iterations)",
                (ten as f64 - empty as f64) / 10.0
            );
        }
        _ => println!("fsync + fdatasync                  (strace not available: not counted)"),
    }
    let mut keep = Vec::new();
    for bin in &binaries {
        let longest = LENGTHS[LENGTHS.len() - 1];
        let peak = peak_kb(bin, longest, &dir, &mut keep)
            .map_or("n/a".to_string(), |kb| format!("{:.1}", kb as f64 / 1024.0));
        println!(
            "peak memory, run of {longest} iterations   {peak:>8} MB  ({})",
            bin.display()
        );
    }
}

/// The peak resident set of `delta` in one run of `iterations` tool iterations (a run of its own:
/// watching it costs the timed runs their precision).
fn peak_kb(
    delta: &std::path::Path,
    iterations: usize,
    durable_dir: &std::path::Path,
    keep: &mut Vec<tempfile::TempDir>,
) -> Option<u64> {
    let server = scripted(iterations);
    let (sandbox, agent) = bench_agent(durable_dir);
    let mut delta = Command::new(delta);
    let mut child = run_args(&mut delta, &agent, &sandbox, iterations, &server)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (status, peak) = testkit::wait_watching_peak(&mut child);
    assert!(status.success());
    keep.push(sandbox);
    peak
}
