//! What one keystroke costs the playground, natively: the `check` answer (compile, canonical JSON,
//! drawing, highlights) on machines of 100 and 1 000 nodes, and each part on its own.
//! `cargo bench -p dygram-wasm --bench check`. The page's own figure (the WebAssembly module in
//! Chromium) is measured by the playground test (`inPageCheckMs`).

use std::time::{Duration, Instant};

use dygram_core::json::JsonOptions;
use dygram_syntax::source::SourceFile;
use serde_json::json;

/// A machine of `n` states, each with an edge to another, as a person writes one.
fn machine(n: usize) -> String {
    let mut text = String::from("machine \"Bench\"\n");
    for i in 0..n {
        text.push_str(&format!("State s{i} \"Step {i}\";\n"));
    }
    for i in 0..n {
        text.push_str(&format!("s{i} -> s{};\n", (i * 7 + 1) % n));
    }
    text
}

/// The median of `runs` timings of `f`.
fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

fn main() {
    for n in [100, 1000] {
        let text = machine(n);
        let request = json!({"op": "check", "text": text});
        let whole = median(15, || {
            std::hint::black_box(dygram_wasm::answer::answer(&request));
        });
        let compile = median(15, || {
            std::hint::black_box(dygram_core::compile(SourceFile::new("m.dy", text.as_str())));
        });
        let compiled = dygram_core::compile(SourceFile::new("m.dy", text.as_str()));
        let json = median(15, || {
            std::hint::black_box(compiled.json(JsonOptions {
                source_ranges: true,
            }));
        });
        let machine = compiled.json(JsonOptions {
            source_ranges: true,
        });
        let layout = median(15, || {
            std::hint::black_box(dygram_core::render::layout::to_svg(&machine));
        });
        let highlight = median(15, || {
            std::hint::black_box(dygram_analysis::highlight::highlight(&text));
        });
        println!(
            "{n:>5} nodes: check {:>7.2} ms = compile {:.2} + json {:.2} + layout {:.2} + highlight {:.2} (+ the answer's JSON)",
            ms(whole),
            ms(compile),
            ms(json),
            ms(layout),
            ms(highlight)
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
