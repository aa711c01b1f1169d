//! Front-end speed: `cargo bench -p dygram --bench compile`.
//!
//! 1. Parse + validate + canonical JSON of synthetic chains of 1 000, 10 000 and 100 000 nodes
//!    (each node typed, titled, with two attributes; one edge per node), in process.
//! 2. The whole conformance corpus (`../shared/conformance/dygram/examples`) in one
//!    `dygram batch` call of the release binary (checking every file, as CI's conformance does).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// The allocator of the `dygram` binary, so the figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const REPEATS: usize = 7;

fn chain(n: usize) -> String {
    let mut s = String::with_capacity(n * 120);
    s.push_str("machine \"Chain\" @Version(\"1\")\n\n");
    for i in 0..n {
        s.push_str(&format!(
            "Task step{i} \"Step {i}\" {{\n    prompt: \"Handle item {i} of {{{{ step0.prompt }}}}\";\n    retries<number>: 3;\n}}\n"
        ));
    }
    for i in 1..n {
        s.push_str(&format!("step{} -> step{i};\n", i - 1));
    }
    s
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    for n in [1_000usize, 10_000, 100_000] {
        let text = chain(n);
        let runs: Vec<Duration> = (0..if n >= 100_000 { 3 } else { REPEATS })
            .map(|_| {
                let start = Instant::now();
                let compiled = dygram_core::compile(dygram_syntax::source::SourceFile::new(
                    "chain.dy",
                    text.as_str(),
                ));
                assert!(!compiled.has_errors());
                let json = compiled.json(Default::default());
                let out = serde_json::to_string(&json).unwrap();
                assert!(out.len() > n * 50);
                start.elapsed()
            })
            .collect();
        let t = median(runs);
        println!(
            "chain of {n:>6} nodes: parse + validate + JSON {:>9.2} ms ({:.2} µs/node, {} KiB of source)",
            t.as_secs_f64() * 1e3,
            t.as_secs_f64() * 1e6 / n as f64,
            text.len() / 1024
        );
    }
    source_ranges();
    batch_again();
    let corpus =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/dygram/examples");
    if !corpus.is_dir() {
        println!("corpus not found at {} (skipped)", corpus.display());
        return;
    }
    let pattern = format!("{}/**/*", corpus.display());
    let bin = env!("CARGO_BIN_EXE_dygram");
    let runs: Vec<Duration> = (0..REPEATS)
        .map(|_| {
            let start = Instant::now();
            let status = Command::new(bin)
                .args(["batch", &pattern, "--continue-on-error", "-q"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap();
            // Some corpus programs are invalid on purpose: exit 1 is expected.
            assert!(matches!(status.code(), Some(0 | 1)));
            start.elapsed()
        })
        .collect();
    let files = glob_count(&corpus);
    println!(
        "whole corpus ({files} files) in one `dygram batch`: {:.1} ms",
        median(runs).as_secs_f64() * 1e3
    );
}

/// A machine written on one line (nodes, then one edge through all of them), with text that is
/// not ASCII: the shape where positions used to be counted from the line's start.
fn one_line(n: usize) -> String {
    let mut s = String::from("machine \"Long line\"\n");
    for i in 0..n {
        s.push_str(&format!("Task t{i} \"Étape {i}\" {{ prompt: \"p{i}\"; }} "));
    }
    s.push('\n');
    let names: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    s.push_str(&names.join(" -> "));
    s.push_str(";\n");
    s
}

/// `generate --source-ranges` (in process: compile and JSON with `$sourceRange`) at 1 000, 2 000
/// and 4 000 nodes, with the ratio of the last two (linear: about 2).
fn source_ranges() {
    let mut times = Vec::new();
    for n in [1_000usize, 2_000, 4_000] {
        let text = one_line(n);
        let runs: Vec<Duration> = (0..REPEATS)
            .map(|_| {
                let start = Instant::now();
                let compiled = dygram_core::compile(dygram_syntax::source::SourceFile::new(
                    "line.dy",
                    text.as_str(),
                ));
                let json = compiled.json(dygram_core::json::JsonOptions {
                    source_ranges: true,
                });
                assert!(json["nodes"].as_array().is_some_and(|a| a.len() == n));
                start.elapsed()
            })
            .collect();
        let t = median(runs);
        println!(
            "source ranges, {n:>5} nodes on one line: {:>8.2} ms",
            t.as_secs_f64() * 1e3
        );
        times.push(t);
    }
    println!(
        "source ranges, 4 000 / 2 000 nodes: {:.2}x (at most 2.5 wanted)",
        times[2].as_secs_f64() / times[1].as_secs_f64()
    );
}

/// `dygram batch -d out` into an empty folder, then again over its unchanged outputs (200
/// machines, four formats each): the second costs no more than the first.
fn batch_again() {
    let dir = std::env::temp_dir().join(format!("dygram-bench-batch-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    for i in 0..200 {
        std::fs::write(src.join(format!("m{i}.dy")), chain(20 + i % 7)).unwrap();
    }
    let bin = env!("CARGO_BIN_EXE_dygram");
    let pattern = format!("{}/*.dy", src.display());
    let out = dir.join("out");
    let batch = || {
        let start = Instant::now();
        let status = Command::new(bin)
            .args(["batch", &pattern, "-f", "json,dot,mermaid,dsl", "-q", "-d"])
            .arg(&out)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        start.elapsed()
    };
    let (mut first, mut again) = (Vec::new(), Vec::new());
    for _ in 0..REPEATS {
        let _ = std::fs::remove_dir_all(&out);
        first.push(batch());
        again.push(batch());
    }
    println!(
        "batch of 200 machines into an empty folder: {:.1} ms; again over its outputs: {:.1} ms",
        median(first).as_secs_f64() * 1e3,
        median(again).as_secs_f64() * 1e3
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn glob_count(dir: &Path) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            n += glob_count(&p);
        } else if p
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| ["dy", "dygram", "mach"].contains(&e))
        {
            n += 1;
        }
    }
    n
}
