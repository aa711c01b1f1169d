//! MCP servers in a run: `cargo bench -p delta --bench mcp`.
//!
//! Runs the real `delta` binary against the scripted LLM server on 127.0.0.1 (instant answers):
//!
//! - **Start**: a run that answers at once, with no MCP server and with two stdio servers (the
//!   example's `notes_server.py` twice; and, where `scripts/install-mcp-servers` has installed them,
//!   the reference `server-everything` with the Python SDK's server). The difference is what starting
//!   the servers (spawn, `initialize`, `tools/list`) adds to a run.
//! - **One call**: runs of 50 iterations each calling `notes__list_notes`, against runs of 50 calling
//!   a shell tool (`true`); and, inside the MCP runs, the time from a call's `ACTION_REQUEST` to its
//!   `ACTION_RESULT` in the journal: the engine's whole handling of the call (hooks, the request, the
//!   server's answer, the record), of which the notes server's own work (read a small JSON file,
//!   answer) is part.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer};

const REPEATS: usize = 5;
const CALLS: usize = 50;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn notes_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/mcp-notes/notes_server.py")
}

/// An agent folder with these `mcp_servers:` lines and a shell tool `noop`.
fn agent(root: &Path, servers: &str) -> PathBuf {
    let dir = root.join("agent");
    std::fs::create_dir_all(&dir).unwrap();
    let mcp = if servers.is_empty() {
        String::new()
    } else {
        format!("mcp_servers:\n{servers}")
    };
    std::fs::write(
        dir.join("agent.yaml"),
        format!("name: bench\nllm:\n  model: m\ntools:\n  - name: noop\n    exec: \"true\"\n{mcp}"),
    )
    .unwrap();
    std::fs::write(dir.join("system_prompt.md"), "Benchmark agent.").unwrap();
    dir
}

/// One run of `calls` calls of `tool`: its wall time and its journal.
fn run(servers: &str, tool: &str, calls: usize) -> (f64, Vec<Value>) {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let agent = agent(root.path(), servers);
    let mut script: Vec<Reply> = (0..calls)
        .map(|i| Reply::tool_call(&format!("c{i}"), tool, json!({})))
        .collect();
    script.push(Reply::text("done"));
    let server = ScriptedServer::start(script);
    let ws = root.path().join("ws");
    let start = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_delta"))
        .args(["run", "--agent"])
        .arg(&agent)
        .arg("-w")
        .arg(&ws)
        .args(["-m", "go", "--max-iterations", &(calls + 1).to_string()])
        .args(["--format", "raw"])
        .env("DELTA_API_KEY", "k")
        .env("DELTA_BASE_URL", server.openai_base())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let took = start.elapsed().as_secs_f64() - server.busy_time().as_secs_f64();
    assert!(status.success());
    let id = std::fs::read_to_string(ws.join(".delta/LATEST")).unwrap();
    let journal = std::fs::read_to_string(ws.join(".delta").join(id.trim()).join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (took, journal)
}

/// Request-to-result times of the journal's calls, in seconds.
fn call_times(journal: &[Value]) -> Vec<f64> {
    let at = |e: &Value| {
        e["timestamp"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .unwrap()
    };
    let mut times = Vec::new();
    let mut requested = None;
    for event in journal {
        match event["type"].as_str() {
            Some("ACTION_REQUEST") => requested = Some(at(event)),
            Some("ACTION_RESULT") => {
                if let Some(r) = requested.take() {
                    times.push(at(event).duration_since(r).as_secs_f64());
                }
            }
            _ => {}
        }
    }
    times
}

fn ms(seconds: f64) -> String {
    format!("{:8.2} ms", seconds * 1000.0)
}

/// The Python interpreter itself (`sys.executable`): `python3` on PATH may be a shim that costs a
/// shell or two per start, which is not delta's cost.
fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn main() {
    let notes = format!(
        "  - name: notes\n    command: {}\n    args: [\"{}\"]\n",
        python(),
        notes_server().display()
    );
    let two_notes = format!("{notes}{}", notes.replace("name: notes", "name: notes2"));
    let none: Vec<f64> = (0..REPEATS).map(|_| run("", "noop", 0).0).collect();
    let two: Vec<f64> = (0..REPEATS).map(|_| run(&two_notes, "noop", 0).0).collect();
    println!(
        "run answered at once, no MCP server          {}",
        ms(median(none.clone()))
    );
    println!(
        "  with two stdio servers (notes_server.py x2)  {}  (+{} to start them)",
        ms(median(two.clone())),
        ms(median(two) - median(none.clone()))
    );
    if let Some(real) = real_servers() {
        let with: Vec<f64> = (0..REPEATS).map(|_| run(&real, "noop", 0).0).collect();
        println!(
            "  with server-everything + Python SDK server   {}  (+{} to start them)",
            ms(median(with.clone())),
            ms(median(with) - median(none))
        );
    }
    let mut shell = Vec::new();
    let mut mcp = Vec::new();
    let mut inside = Vec::new();
    for _ in 0..REPEATS {
        shell.push(run(&notes, "noop", CALLS).0 - run(&notes, "noop", 0).0);
        let (with_calls, journal) = run(&notes, "notes__list_notes", CALLS);
        mcp.push(with_calls - run(&notes, "noop", 0).0);
        inside.extend(call_times(&journal));
    }
    let per = |v: Vec<f64>| median(v) / CALLS as f64;
    println!(
        "per iteration, a shell tool (true)           {}",
        ms(per(shell))
    );
    println!(
        "per iteration, an MCP call (list_notes)      {}",
        ms(per(mcp))
    );
    // Journal timestamps are in milliseconds: the mean of many calls is the figure to read.
    println!(
        "an MCP call, ACTION_REQUEST to ACTION_RESULT  {}  (mean of {}; the server's own work included)",
        ms(mean(&inside)),
        inside.len()
    );
}

/// The `mcp_servers:` lines of the reference server and the Python SDK server, where installed.
fn real_servers() -> Option<String> {
    let dir = std::env::var_os("MCP_SERVERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp-servers"));
    let everything = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let python = dir.join("venv/bin/python");
    let py_server = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcp/tests/servers/py_server.py");
    (everything.is_file() && python.is_file()).then(|| {
        format!(
            "  - name: everything\n    command: node\n    args: [\"{}\", \"stdio\"]\n  - name: py\n    command: {}\n    args: [\"{}\", \"stdio\"]\n",
            everything.display(),
            python.display(),
            py_server.display()
        )
    })
}
