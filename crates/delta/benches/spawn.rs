//! Starting a tool: `cargo bench -p delta --bench spawn`.
//!
//! The cost of one tool start as the engine does it (its own process group, held at the gate until
//! its group is recorded in `process.json`, output captured), against a plain `std::process::Command`
//! run of the same program, in one process, alternating, so the machine's noise hits both alike. The
//! program is `true`: what is measured is the starting, not the tool. The gated start is timed again
//! in the sandbox of `workspace-write, network off` (Landlock and seccomp entered before `exec`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use delta::process::{self, Spawn, record::ChildKind, record::Recorder};

const ROUNDS: usize = 7;
const PER_ROUND: usize = 100;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let program = which_true();
    let spawn = Spawn {
        argv: vec![program.clone()],
        stdin: None,
        cwd: dir.path().to_path_buf(),
        env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
        timeout: Duration::from_secs(10),
        confine: None,
    };
    let confined = Spawn {
        confine: delta::sandbox::SandboxPolicy::recommended()
            .prepare(dir.path())
            .ok()
            .flatten()
            .map(std::sync::Arc::new),
        ..spawn.clone()
    };
    let recorder = Recorder::new(dir.path().join("process.json"));
    let interrupt = AtomicBool::new(false);
    let (mut gated, mut plain, mut sandboxed) = (Vec::new(), Vec::new(), Vec::new());
    let gated_round = |spawn: &Spawn| {
        let start = Instant::now();
        for _ in 0..PER_ROUND {
            let out = process::run_recorded(spawn, &interrupt, &mut |group| {
                recorder.record(ChildKind::Tool, "t", Some("c1"), group)
            })
            .unwrap();
            assert_eq!(out.exit_code, 0);
            recorder.clear().unwrap();
        }
        start.elapsed() / PER_ROUND as u32
    };
    for _ in 0..ROUNDS {
        gated.push(gated_round(&spawn));
        if confined.confine.is_some() {
            sandboxed.push(gated_round(&confined));
        }
        let start = Instant::now();
        for _ in 0..PER_ROUND {
            let out = Command::new(&program)
                .current_dir(dir.path())
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(out.status.success());
        }
        plain.push(start.elapsed() / PER_ROUND as u32);
    }
    let (gated, plain) = (median(gated), median(plain));
    println!(
        "tool start, recorded and gated     {:>8.3} ms (median of {ROUNDS} rounds of {PER_ROUND})",
        gated.as_secs_f64() * 1e3
    );
    println!(
        "plain Command::output              {:>8.3} ms",
        plain.as_secs_f64() * 1e3
    );
    println!(
        "cost of recording and the gate     {:>8.3} ms",
        (gated.as_secs_f64() - plain.as_secs_f64()) * 1e3
    );
    if sandboxed.is_empty() {
        println!("sandboxed start                    (this kernel cannot enforce the sandbox)");
    } else {
        let sandboxed = median(sandboxed);
        println!(
            "tool start in the sandbox          {:>8.3} ms (workspace-write, network off)",
            sandboxed.as_secs_f64() * 1e3
        );
        println!(
            "cost of the sandbox                {:>8.3} ms",
            (sandboxed.as_secs_f64() - gated.as_secs_f64()) * 1e3
        );
    }
}

fn which_true() -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .map(|d| std::path::Path::new(d).join("true"))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "true".into())
}
