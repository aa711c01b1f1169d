//! An MCP call against a process per call: `cargo bench -p dygram --bench mcp`.
//!
//! The example machine `examples/dygram/review.dy` is validated 300 times through one `dygram mcp`
//! on stdio (a `tools/call` of `validate` each, as an agent's client makes it), and 300 times by a
//! `dygram pv --format json` process each (as a script or an agent without MCP does), both with the
//! release binary, in a copy of the examples. Median and p95 per call, side by side in one run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CALLS: usize = 300;
const WARM_UP: usize = 10;

fn stats(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    (times[times.len() / 2], times[times.len() * 95 / 100])
}

fn over_mcp(folder: &Path) -> Vec<Duration> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dygram"))
        .arg("mcp")
        .current_dir(folder)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    let mut ask = |id: usize, method: &str, params: Value| {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(input, "{message}").unwrap();
        input.flush().unwrap();
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap()
    };
    ask(0, "initialize", json!({"protocolVersion": "2025-06-18"}));
    let call = json!({"name": "validate", "arguments": {"file": "review.dy"}});
    let mut times = Vec::new();
    for i in 0..WARM_UP + CALLS {
        let started = Instant::now();
        let answer = ask(i + 1, "tools/call", call.clone());
        let took = started.elapsed();
        assert_eq!(
            answer["result"]["structuredContent"]["valid"], true,
            "{answer}"
        );
        if i >= WARM_UP {
            times.push(took);
        }
    }
    drop(input);
    child.wait().unwrap();
    times
}

fn a_process_each(folder: &Path) -> Vec<Duration> {
    let mut times = Vec::new();
    for i in 0..WARM_UP + CALLS {
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_dygram"))
            .args(["pv", "review.dy", "--format", "json"])
            .current_dir(folder)
            .output()
            .unwrap();
        let took = started.elapsed();
        assert!(out.status.success());
        if i >= WARM_UP {
            times.push(took);
        }
    }
    times
}

fn main() {
    let folder = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/dygram");
    std::fs::copy(examples.join("review.dy"), folder.path().join("review.dy")).unwrap();
    let (mcp_median, mcp_p95) = stats(over_mcp(folder.path()));
    let (cli_median, cli_p95) = stats(a_process_each(folder.path()));
    println!("validate examples/dygram/review.dy, {CALLS} calls each:");
    println!(
        "  over one dygram mcp (stdio)         median {mcp_median:>10.2?}  p95 {mcp_p95:>10.2?}"
    );
    println!(
        "  a dygram pv --format json per call  median {cli_median:>10.2?}  p95 {cli_p95:>10.2?}"
    );
}
