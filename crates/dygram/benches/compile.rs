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
