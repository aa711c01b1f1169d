//! Stateful execution speed: `cargo bench -p dygram --bench stateful`.
//!
//! Wall time of one `dygram execute -i` call (release binary, a new process each time) on a
//! machine of 1 000 nodes, after 10, 100 and 500 earlier calls (a history of that many lines and
//! transitions): each call loads the saved execution, runs one step, saves, and exits.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn chain(n: usize) -> String {
    let mut s = String::with_capacity(n * 80);
    s.push_str("machine \"Long flow\"\n");
    for i in 0..n {
        s.push_str(&format!(
            "state s{i} \"Step {i}\" {{ note: \"step {i} of the flow\"; }}\n"
        ));
    }
    for i in 1..n {
        s.push_str(&format!("s{} -> s{i};\n", i - 1));
    }
    s
}

fn call(bin: &str, dir: &Path) -> (Duration, i32) {
    let start = Instant::now();
    let status = Command::new(bin)
        .args(["execute", "-i", "flow.dy", "-q"])
        .current_dir(dir)
        .env_remove("ANTHROPIC_API_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    (start.elapsed(), status.code().unwrap_or(-1))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let bin = env!("CARGO_BIN_EXE_dygram");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("flow.dy"), chain(1_000)).unwrap();
    let mut done = 0;
    for checkpoint in [10usize, 100, 500] {
        while done < checkpoint {
            let (_, code) = call(bin, dir.path());
            assert_eq!(code, 0, "call {done} failed");
            done += 1;
        }
        let times: Vec<Duration> = (0..9)
            .map(|_| {
                let (t, code) = call(bin, dir.path());
                assert_eq!(code, 0);
                done += 1;
                t
            })
            .collect();
        println!(
            "execute -i on 1 000 nodes after {checkpoint:>3} calls: {:>6.2} ms per call (median of 9)",
            median(times).as_secs_f64() * 1e3
        );
    }
}
