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
//! resume reads the journal's end only. Peak memory is the largest resident set of the `delta`
//! processes of each series.
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

fn run_once(events: usize, root: &Path, budget: bool) -> (Duration, Duration) {
    let sandbox = tempfile::tempdir_in(root).unwrap();
    let agent = sandbox.path().join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.yaml"),
        format!(
            "name: bench\nllm:\n  model: m\n{}tools:\n  - name: noop\n    exec: \"true\"\n",
            if budget {
                "  context_window: 8192\n"
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
    let status = Command::new(env!("CARGO_BIN_EXE_delta"))
        .args(["continue", "-w"])
        .arg(&ws)
        .args(["-m", "One more thing.", "--format", "raw"])
        .env("DELTA_API_KEY", "bench-key")
        .env("DELTA_BASE_URL", server.openai_base())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let took = start.elapsed();
    assert!(status.success());
    let lines = std::fs::read_to_string(ws.join(".delta/bench-run/journal.jsonl"))
        .unwrap()
        .lines()
        .count();
    assert!(lines + 3 >= events, "{lines} lines for {events} events");
    let busy = server.busy_time();
    std::mem::forget(sandbox); // deleting while measuring slows later runs (see the engine benchmark)
    (took, busy)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The largest resident set of the children waited for so far, in MB.
fn peak_mb() -> f64 {
    let usage =
        nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).unwrap();
    usage.max_rss() as f64 / 1024.0
}

fn series(root: &Path, budget: bool) {
    let label = if budget { "budget" } else { "whole " };
    let mut first = None;
    for events in [1_000usize, 10_000, 100_000] {
        let runs: Vec<(Duration, Duration)> = (0..REPEATS)
            .map(|_| run_once(events, root, budget))
            .collect();
        let total = median(runs.iter().map(|r| r.0).collect());
        let server = median(runs.iter().map(|r| r.1).collect());
        let client = median(runs.iter().map(|r| r.0.saturating_sub(r.1)).collect());
        let base = *first.get_or_insert(client);
        println!(
            "{label} continue on {events:>6} events   {:>8.1} ms   (scripted server {:>6.1} ms; delta {:>7.1} ms, {:.2}× the 1 000-event run)",
            total.as_secs_f64() * 1e3,
            server.as_secs_f64() * 1e3,
            client.as_secs_f64() * 1e3,
            client.as_secs_f64() / base.as_secs_f64()
        );
    }
    println!(
        "{label} peak memory (max RSS of the series so far) {:>6.1} MB",
        peak_mb()
    );
}

fn main() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // The budgeted series first: the peak memory reported is then its own.
    series(root.path(), true);
    series(root.path(), false);
}
