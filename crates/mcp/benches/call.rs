//! What the MCP client costs: `cargo bench -p mcp --bench call`.
//!
//! 1. One `call_tool` round trip over stdio against a trivial server: this benchmark's own binary
//!    started with `--serve`, a Rust loop that answers each request at once, so the figure is the
//!    client's and the pipes' overhead (minimum and median over 2000 calls).
//! 2. Starting, initializing and listing the tools of the real servers (`scripts/install-mcp-servers`):
//!    the reference server on node, and the Python SDK server (`tests/servers/py_server.py`) over
//!    stdio and streamable HTTP. Skipped, with a line saying so, when they are not installed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::{BufRead, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp::{Client, ClientInfo, Options};
use serde_json::{Map, Value, json};

const CALLS: usize = 2000;
const STARTS: usize = 5;

fn main() {
    if std::env::args().any(|a| a == "--serve") {
        serve();
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let mut client = Client::stdio(piped(Command::new(exe).arg("--serve")), options()).unwrap();
    let arguments = Map::from_iter([("text".to_string(), json!("ping"))]);
    let mut times = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let start = Instant::now();
        let result = client.call_tool("echo", arguments.clone(), None).unwrap();
        times.push(start.elapsed());
        assert_eq!(result.text(), "ping");
    }
    client.close();
    report(
        &format!("call_tool round trip, trivial stdio server ({CALLS} calls)"),
        times,
    );
    real_servers();
}

/// Times starting, initializing and listing the installed real servers.
fn real_servers() {
    let Some(servers) = testkit::needs::mcp_servers() else {
        return;
    };
    let py_server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/py_server.py");
    let starts = |label: &str, command: &dyn Fn() -> Command| {
        let times = (0..STARTS)
            .map(|_| {
                let start = Instant::now();
                let mut client = Client::stdio(piped(&mut command()), options()).unwrap();
                assert!(!client.list_tools().unwrap().is_empty());
                let took = start.elapsed();
                client.close();
                took
            })
            .collect();
        report(
            &format!("start+initialize+list, {label} ({STARTS} starts)"),
            times,
        );
    };
    starts("server-everything (node, stdio)", &|| {
        let mut command = Command::new("node");
        command.arg(&servers.everything).arg("stdio");
        command
    });
    starts("Python SDK server (stdio)", &|| {
        let mut command = Command::new(&servers.python);
        command.arg(&py_server).arg("stdio");
        command
    });
    let times = (0..STARTS)
        .map(|_| {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let start = Instant::now();
            let mut command = Command::new(&servers.python);
            command.arg(&py_server).args(["http", &port.to_string()]);
            let mut server = command
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                std::thread::sleep(Duration::from_millis(5));
            }
            let url = format!("http://127.0.0.1:{port}/mcp");
            let mut client = Client::http(&url, &[], options()).unwrap();
            assert!(!client.list_tools().unwrap().is_empty());
            let took = start.elapsed();
            client.close();
            let _ = server.kill();
            let _ = server.wait();
            took
        })
        .collect();
    report(
        &format!("start+initialize+list, Python SDK server (streamable HTTP, {STARTS} starts)"),
        times,
    );
}

fn options() -> Options {
    Options {
        timeout: Duration::from_secs(60),
        client: ClientInfo {
            name: "mcp-bench".into(),
            version: "0".into(),
        },
    }
}

/// Spawns `command` with piped stdin and stdout and discarded stderr.
fn piped(command: &mut Command) -> Child {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Prints the minimum and median of `times`.
fn report(label: &str, mut times: Vec<Duration>) {
    times.sort();
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    let (min, median) = (times[0], times[times.len() / 2]);
    if median < Duration::from_millis(10) {
        println!(
            "{label:<75} min {:>8.1} µs  median {:>8.1} µs",
            micros(min),
            micros(median)
        );
    } else {
        println!(
            "{label:<75} min {:>8.1} ms  median {:>8.1} ms",
            micros(min) / 1e3,
            micros(median) / 1e3
        );
    }
}

/// The trivial server: answers initialize, tools/list and tools/call (echoing `text`) at once.
fn serve() {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in std::io::stdin().lock().lines() {
        let message: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let Some(id) = message.get("id") else {
            continue;
        };
        let result = match message["method"].as_str() {
            Some("initialize") => {
                json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "bench", "version": "0"}})
            }
            Some("tools/list") => {
                json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]})
            }
            _ => {
                json!({"content": [{"type": "text", "text": message["params"]["arguments"]["text"]}]})
            }
        };
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
        writeln!(out, "{answer}").unwrap();
        out.flush().unwrap();
    }
}
