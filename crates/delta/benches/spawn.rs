//! Starting a tool: `cargo bench -p delta --bench spawn`.
//!
//! The cost of one tool start as the engine does it (its own process group, recorded in
//! `process.json` before its program runs, output captured), wall and CPU time, against a plain `std::process::Command`
//! run of the same program, in one process, alternating, so the machine's noise hits both alike. The
//! program is `true`: what is measured is the starting, not the tool. The recorded start is timed again
//! in the sandbox of `workspace-write, network off` (the read-only mounts' namespaces joined, Landlock
//! and seccomp entered before `exec`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use delta::process::{self, Spawn, record::ChildKind, record::Recorder};

const ROUNDS: usize = 7;
const PER_ROUND: usize = 100;

/// CPU time of this process and its ended children so far.
fn cpu() -> Duration {
    use nix::sys::resource::UsageWho;
    testkit::cpu_used(UsageWho::RUSAGE_SELF) + testkit::cpu_used(UsageWho::RUSAGE_CHILDREN)
}

/// Wall and CPU time per start of `PER_ROUND` runs of `one`.
fn round(mut one: impl FnMut()) -> (Duration, Duration) {
    let (start, cpu_before) = (Instant::now(), cpu());
    for _ in 0..PER_ROUND {
        one();
    }
    let n = PER_ROUND as u32;
    (start.elapsed() / n, cpu().saturating_sub(cpu_before) / n)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    // `DELTA_BENCH_DIR` names the folder when the built benchmark runs on another machine.
    let base = std::env::var_os("DELTA_BENCH_DIR").map_or_else(
        || env!("CARGO_TARGET_TMPDIR").into(),
        std::path::PathBuf::from,
    );
    let dir = tempfile::tempdir_in(base).unwrap();
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
            .prepare_with(
                dir.path(),
                std::path::Path::new(env!("CARGO_BIN_EXE_delta")),
            )
            .ok()
            .flatten()
            .map(std::sync::Arc::new),
        ..spawn.clone()
    };
    let mounts = match confined
        .confine
        .as_deref()
        .and_then(|c| c.metadata_unprotected())
    {
        None => "with its read-only mounts".to_string(),
        Some(why) => format!("without read-only mounts: {why}"),
    };
    let recorder = Recorder::new(dir.path().join("process.json"));
    let interrupt = AtomicBool::new(false);
    let (mut gated, mut plain, mut sandboxed) = (Vec::new(), Vec::new(), Vec::new());
    let gated_round = |spawn: &Spawn| {
        round(|| {
            let recording = process::Recording {
                recorder: &recorder,
                kind: ChildKind::Tool,
                name: "t",
                action_id: Some("c1"),
            };
            let out = process::run_recorded(spawn, &interrupt, recording).unwrap();
            assert_eq!(out.exit_code, 0);
            recorder.clear().unwrap();
        })
    };
    for _ in 0..ROUNDS {
        gated.push(gated_round(&spawn));
        if confined.confine.is_some() {
            sandboxed.push(gated_round(&confined));
        }
        plain.push(round(|| {
            let out = Command::new(&program)
                .current_dir(dir.path())
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(out.status.success());
        }));
    }
    let medians = |v: &[(Duration, Duration)]| {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        (
            ms(median(v.iter().map(|r| r.0).collect())),
            ms(median(v.iter().map(|r| r.1).collect())),
        )
    };
    let (gated, plain) = (medians(&gated), medians(&plain));
    println!(
        "tool start, recorded                {:>6.3} ms wall, {:>6.3} ms CPU (median of {ROUNDS} rounds of {PER_ROUND})",
        gated.0, gated.1
    );
    println!(
        "plain Command::output               {:>6.3} ms wall, {:>6.3} ms CPU",
        plain.0, plain.1
    );
    println!(
        "cost of the record and the group    {:>6.3} ms wall, {:>6.3} ms CPU",
        gated.0 - plain.0,
        gated.1 - plain.1
    );
    if sandboxed.is_empty() {
        println!("sandboxed start                     (this kernel cannot enforce the sandbox)");
    } else {
        let sandboxed = medians(&sandboxed);
        println!(
            "tool start in the sandbox           {:>6.3} ms wall, {:>6.3} ms CPU (workspace-write, network off, {mounts})",
            sandboxed.0, sandboxed.1
        );
        println!(
            "cost of the sandbox                 {:>6.3} ms wall, {:>6.3} ms CPU",
            sandboxed.0 - gated.0,
            sandboxed.1 - gated.1
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
