//! Resume cost: `cargo bench -p delta --bench resume`.
//!
//! Builds completed runs whose journals hold 1 000, 10 000 and 100 000 events (tool-using iterations
//! with realistic payloads), then times `delta continue -w WS -m …` against the scripted server on
//! 127.0.0.1, which answers at once; the time the server spends reading the (large) request and
//! answering is measured and subtracted. Without a context budget the whole journal is read, the
//! conversation rebuilt and sent as the request: that is what a resume does.
//!
//! **With a context budget** (`llm.context_window` set), the journals are those of runs that
//! compacted as they went (a `COMPACTION` every 30 iterations, keeping the 3 most recent): a
//! resume reads the journal's end only. Peak memory is the `delta` process's own high-water mark
//! (read from `/proc` while it runs), the median over the runs of each size.
//!
//! With `DELTA_BENCH_BASELINE=/path/to/an/older/delta`, each series is run with that binary too, in
//! the same run, the two binaries taking turns run by run.
//!
//! The whole-journal series runs once per provider: the OpenAI-compatible request and Anthropic's
//! are built differently from the same conversation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use testkit::{Reply, ScriptedServer};

const REPEATS: usize = 9;

/// A journal line of the compaction a budgeted run would have journaled after `answers` answers
/// (keeping the last 3), given the seq of each answer's line.
fn compaction(answers: &[u64]) -> serde_json::Value {
    let replace = answers.len() - 3;
    json!({"strategy": "summarize", "iterations": replace, "from_seq": answers[0], "to_seq": answers[replace] - 1,
        "summary": "Looked at the files so far; each holds a small main function.", "tokens_before": 9000,
        "tokens_after": 3000, "window": 8192})
}

fn write_run(ws: &Path, events: usize, budget: bool) {
    let run = ws.join(".delta/bench-run");
    std::fs::create_dir_all(run.join("io/invocations")).unwrap();
    std::fs::create_dir_all(run.join("io/tool_executions")).unwrap();
    std::fs::create_dir_all(run.join("io/hooks")).unwrap();
    std::fs::write(ws.join(".delta/VERSION"), "1.2\n").unwrap();
    std::fs::write(ws.join(".delta/LATEST"), "bench-run").unwrap();
    let agent = ws.parent().unwrap().join("agent");
    let mut journal =
        std::io::BufWriter::new(std::fs::File::create(run.join("journal.jsonl")).unwrap());
    let mut seq = 0u64;
    let mut line = |kind: &str, payload: serde_json::Value| {
        seq += 1;
        let e = json!({"seq": seq, "timestamp": "2026-01-01T00:00:00.000Z", "type": kind, "payload": payload});
        writeln!(journal, "{e}").unwrap();
        seq
    };
    line(
        "RUN_START",
        json!({"run_id": "bench-run", "task": "benchmark", "agent_ref": agent.display().to_string()}),
    );
    line(
        "USER_MESSAGE",
        json!({"content": "List the files, then summarise them one by one."}),
    );
    let iterations = events.saturating_sub(4) / 3;
    let mut answers = Vec::new();
    for i in 0..iterations {
        if budget && i > 0 && i % 30 == 0 {
            line("COMPACTION", compaction(&answers));
        }
        let id = format!("call_{i}");
        let at = line(
            "THOUGHT",
            json!({"content": format!("Step {i}: looking at the next file."), "llm_invocation_ref": format!("inv-{i}"),
            "tool_calls": [{"id": id, "type": "function", "function": {"name": "noop", "arguments": "{\"path\":\"src/file.rs\"}"}}]}),
        );
        answers.push(at);
        line(
            "ACTION_REQUEST",
            json!({"action_id": id, "tool_name": "noop", "tool_args": {"path": "src/file.rs"}, "resolved_command": "true"}),
        );
        line(
            "ACTION_RESULT",
            json!({"action_id": id, "status": "SUCCESS",
            "observation_content": format!("=== STDOUT ===\n{}\n=== EXIT CODE: 0 ===", "fn main() { println!(\"hello\"); }\n".repeat(4)),
            "execution_ref": id}),
        );
    }
    line(
        "THOUGHT",
        json!({"content": "All files summarised.", "llm_invocation_ref": "inv-last"}),
    );
    line("RUN_END", json!({"status": "COMPLETED"}));
    // A real run's journal was flushed by the process that wrote it: do the same, so that the timed
    // `continue` does not pay for flushing the benchmark's own writes.
    journal.into_inner().unwrap().sync_all().unwrap();
    let meta = json!({"run_id": "bench-run", "start_time": "2026-01-01T00:00:00.000Z", "agent_ref": agent.display().to_string(),
        "task": "benchmark", "status": "COMPLETED", "iterations_completed": iterations, "pid": 1, "hostname": "bench",
        "start_time_unix": 0, "process_name": "delta", "end_time": "2026-01-01T00:00:01.000Z"});
    std::fs::write(
        run.join("metadata.json"),
        serde_json::to_string_pretty(&meta).unwrap(),
    )
    .unwrap();
}

/// What a series measures.
#[derive(Clone, Copy, PartialEq)]
enum Series {
    /// A run that compacted as it went, with a context window: the journal's end is read.
    Budget,
    /// The whole journal, sent to an OpenAI-compatible server.
    Whole,
    /// The whole journal, sent to an Anthropic server.
    WholeAnthropic,
}

impl Series {
    const ALL: [Series; 3] = [Series::Budget, Series::Whole, Series::WholeAnthropic];

    fn name(self) -> &'static str {
        match self {
            Series::Budget => "budget",
            Series::Whole => "whole",
            Series::WholeAnthropic => "whole-anthropic",
        }
    }
}

fn run_once(bin: &Path, events: usize, root: &Path, series: Series) -> Timed {
    let budget = series == Series::Budget;
    let anthropic = series == Series::WholeAnthropic;
    let sandbox = tempfile::tempdir_in(root).unwrap();
    let agent = sandbox.path().join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.yaml"),
        format!(
            "name: bench\nllm:\n  model: m\n{}{}tools:\n  - name: noop\n    exec: \"true\"\n",
            if budget {
                "  context_window: 8192\n"
            } else {
                ""
            },
            if anthropic {
                "  provider: anthropic\n"
            } else {
                ""
            }
        ),
    )
    .unwrap();
    std::fs::write(agent.join("system_prompt.md"), "Benchmark agent.").unwrap();
    let ws = sandbox.path().join("ws");
    write_run(&ws, events, budget);
    let server = ScriptedServer::start([Reply::text("done again")]);
    let start = Instant::now();
    let mut child = Command::new(bin)
        .args(["continue", "-w"])
        .arg(&ws)
        .args(["-m", "One more thing.", "--format", "raw"])
        .env("DELTA_API_KEY", "bench-key")
        .env("ANTHROPIC_API_KEY", "bench-key")
        .env(
            if anthropic {
                "ANTHROPIC_BASE_URL"
            } else {
                "DELTA_BASE_URL"
            },
            if anthropic {
                server.url()
            } else {
                server.openai_base()
            },
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (status, peak) = testkit::wait_watching_peak(&mut child);
    let took = start.elapsed();
    assert!(status.success());
    let lines = std::fs::read_to_string(ws.join(".delta/bench-run/journal.jsonl"))
        .unwrap()
        .lines()
        .count();
    assert!(lines + 3 >= events, "{lines} lines for {events} events");
    let busy = server.busy_time();
    std::mem::forget(sandbox); // deleting while measuring slows later runs (see the engine benchmark)
    Timed { took, busy, peak }
}

/// One `continue`: its wall time, the scripted server's share of it, and its peak resident set.
struct Timed {
    took: Duration,
    busy: Duration,
    /// In kB, where `/proc` tells.
    peak: Option<u64>,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Each size of `series`, run `REPEATS` times by every binary in turn (so that both see the same
/// machine), then one line per binary and size.
fn run_series(bins: &[(std::path::PathBuf, &str)], root: &Path, series: Series) {
    let mut first = vec![None; bins.len()];
    for events in [1_000usize, 10_000, 100_000] {
        let mut runs: Vec<Vec<Timed>> = bins.iter().map(|_| Vec::new()).collect();
        for _ in 0..REPEATS {
            for ((bin, _), runs) in bins.iter().zip(runs.iter_mut()) {
                runs.push(run_once(bin, events, root, series));
            }
        }
        for (((_, suffix), runs), first) in bins.iter().zip(&runs).zip(first.iter_mut()) {
            let label = format!("{}{suffix}", series.name());
            let total = median(runs.iter().map(|r| r.took).collect());
            let server = median(runs.iter().map(|r| r.busy).collect());
            let client = median(runs.iter().map(|r| r.took.saturating_sub(r.busy)).collect());
            let mut peaks: Vec<u64> = runs.iter().filter_map(|r| r.peak).collect();
            peaks.sort_unstable();
            let peak = peaks.get(peaks.len() / 2);
            let base = *first.get_or_insert(client);
            println!(
                "{label:<26} continue on {events:>6} events   {:>8.1} ms   (scripted server {:>6.1} ms; delta {:>7.1} ms, {:.2}× the 1 000-event run)   peak {:>6} MB",
                total.as_secs_f64() * 1e3,
                server.as_secs_f64() * 1e3,
                client.as_secs_f64() * 1e3,
                client.as_secs_f64() / base.as_secs_f64(),
                peak.map_or("n/a".to_string(), |kb| format!(
                    "{:.1}",
                    *kb as f64 / 1024.0
                ))
            );
        }
    }
}

fn main() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut bins = vec![(std::path::PathBuf::from(env!("CARGO_BIN_EXE_delta")), "")];
    if let Some(baseline) = std::env::var_os("DELTA_BENCH_BASELINE") {
        bins.push((baseline.into(), " (baseline)"));
    }
    for series in Series::ALL {
        run_series(&bins, root.path(), series);
    }
}
