//! Runtime speed: `cargo bench -p dygram --bench execute`.
//!
//! Steps per second through a chain of 10 000 `state` nodes (automatic transitions, no LLM), in
//! process, and the peak memory of the process (resident set high-water mark).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::Instant;

use dygram_runtime::executor::{Executor, Options};
use dygram_runtime::state::{Limits, Status};
use dygram_syntax::source::SourceFile;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn chain(n: usize) -> String {
    let mut s = String::with_capacity(n * 60);
    s.push_str("machine \"Chain\"\n");
    for i in 0..n {
        s.push_str(&format!("state s{i} \"Step {i}\";\n"));
    }
    for i in 1..n {
        s.push_str(&format!("s{} -> s{i};\n", i - 1));
    }
    s
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn main() {
    for n in [1_000usize, 10_000] {
        let compiled = dygram_core::compile(SourceFile::new("chain.dy", chain(n)));
        assert!(!compiled.has_errors());
        let json = compiled.json(Default::default());
        let mut best = f64::MAX;
        let mut steps = 0;
        for _ in 0..3 {
            let options = Options {
                limits: Limits {
                    max_steps: u64::MAX,
                    ..Limits::default()
                },
                ..Options::default()
            };
            let mut executor = Executor::start(json.clone(), None, options).unwrap();
            let start = Instant::now();
            while executor.step().unwrap() {}
            let elapsed = start.elapsed().as_secs_f64();
            assert_eq!(executor.status(), Status::Complete);
            steps = executor.state().metadata.step_count;
            assert_eq!(steps as usize, n);
            best = best.min(elapsed);
        }
        println!(
            "chain of {n:>6} states: {steps} steps in {:>8.2} ms = {:>9.0} steps/s",
            best * 1e3,
            steps as f64 / best
        );
    }
    if let Some(kib) = peak_rss_kib() {
        println!("peak memory (VmHWM): {:.1} MiB", kib as f64 / 1024.0);
    }
}
