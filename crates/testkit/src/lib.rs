//! Test support shared by every crate's integration tests (dev-only).
//!
//! [`ScriptedServer`] is a real HTTP server on `127.0.0.1` that speaks the OpenAI-compatible Chat
//! Completions protocol (`…/chat/completions`) and Anthropic Messages (`…/v1/messages`), streaming
//! included. A test scripts its answers in advance ([`Reply`]: text, tool calls, HTTP errors, delays,
//! cut streams, server quirks), points the code under test at [`ScriptedServer::url`], and afterwards
//! inspects every request body the server received.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

pub mod browser;
pub mod mcp_clients;
pub mod needs;
pub mod postgres;
mod server;

pub use server::{Protocol, ReceivedRequest, Reply, ScriptedServer, ToolCallSpec};

/// The seed and the number of trials of a randomised fault test: `<PREFIX>_CRASH_SEED` and
/// `<PREFIX>_CRASH_TRIALS` from the environment (to replay a series, or run more), else a fresh
/// seed (odd) and `default` trials.
pub fn crash_series(prefix: &str, default: usize) -> (u64, usize) {
    let var = |name: &str| std::env::var(format!("{prefix}_CRASH_{name}")).ok();
    let seed = var("SEED").and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1
    });
    let trials = var("TRIALS")
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    (seed, trials)
}

/// Fails if a `.rs` file in an integration-test folder is not declared as a module in its `main.rs`,
/// so no test file is silently left out of the test binary.
pub fn assert_no_forgotten_test_files(test_dir: &std::path::Path) {
    let main = std::fs::read_to_string(test_dir.join("main.rs")).unwrap();
    for entry in std::fs::read_dir(test_dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(stem) = name.strip_suffix(".rs")
            && stem != "main"
        {
            assert!(
                main.contains(&format!("mod {stem};")),
                "{}/{name} is not declared in main.rs",
                test_dir.display()
            );
        }
    }
}

/// Waits for `child`, reading its high-water resident set (`VmHWM`, in kB) from `/proc` every 2 ms;
/// `None` where `/proc` cannot tell. This is the child's own peak: `getrusage` of the children
/// would also count the memory of the process that started it (a child started by `vfork` carries
/// its parent's high-water mark), and a benchmark's scripted server holds every request it parsed.
/// Sampled: growth in the last 2 ms before the child exits is not seen (a peak while it waits for
/// a server, as a resume's is, always is).
pub fn wait_watching_peak(
    child: &mut std::process::Child,
) -> (std::process::ExitStatus, Option<u64>) {
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = None;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status, peak);
        }
        let hwm = std::fs::read_to_string(&status_file).ok().and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        });
        peak = peak.max(hwm);
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// CPU time (user and system) used so far by `who`: this process, or its children that have ended.
pub fn cpu_used(who: nix::sys::resource::UsageWho) -> std::time::Duration {
    let usage = nix::sys::resource::getrusage(who).unwrap();
    let time = |t: nix::sys::time::TimeVal| {
        std::time::Duration::new(t.tv_sec() as u64, t.tv_usec() as u32 * 1000)
    };
    time(usage.user_time()) + time(usage.system_time())
}
