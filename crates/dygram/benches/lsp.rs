//! Language-server latency: `cargo bench -p dygram --bench lsp`.
//!
//! A machine of 1 000 nodes (a context, groups nested two deep, tasks with prompts that use
//! templates, states, attributes, edges inside the groups and between them, a node imported from a
//! second file) is opened in the release `dygram lsp` over stdio, as an editor would, and edited one
//! character at a time: the time from writing each `didChange` to reading the `publishDiagnostics`
//! of that version, median, p95 and max. The budget is 20 ms. Then the outline of the whole machine
//! (`documentSymbol`), and, for comparison, the diagnostics computed in process
//! (`dygram::lsp::diagnostics::check`), without the protocol. The same again with 50 edges naming
//! nodes not declared (yet), as while typing: each becomes a placeholder node.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

// The allocator of the `dygram` binary, so the in-process figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Nodes in the machine.
const NODES: usize = 1_000;
/// Edits timed (after a few not timed).
const EDITS: usize = 300;
const WARM_UP: usize = 20;
/// What an edit may take.
const BUDGET: Duration = Duration::from_millis(20);

/// The machine: `(text, nodes)`, and the line and column (UTF-16) inside a prompt half-way down,
/// where the edits go. `dangling` edges inside the groups name nodes declared nowhere (as while
/// typing: each becomes a placeholder node).
fn machine(dangling: usize) -> (String, usize, (u32, u32)) {
    let mut s = String::new();
    s.push_str("import { Shared } from \"./lib.dy\";\n\n");
    s.push_str("machine \"Big\" @Version(\"1.2\") {\n    maxSteps<number>: 5000;\n}\n\n");
    s.push_str(
        "Context state \"Shared state\" @Singleton {\n    name<string>: \"Zoë\";\n    count<number>: 0;\n    tags<Array<string>>: [\"a\", \"b\"];\n}\n\n",
    );
    // The context and the imported node.
    let mut nodes = 2;
    let mut g = 0;
    let mut edit_at = (0, 0);
    let mut left_dangling = dangling;
    while nodes < NODES {
        // A group, a group inside it with states, tasks: as many as fit.
        let states = 8.min(NODES - nodes - 2);
        let tasks = 26.min(NODES - nodes - 2 - states);
        s.push_str(&format!(
            "Process group{g} \"Group {g}\" @Async {{\n    owner<string>: \"team {g}\";\n"
        ));
        s.push_str(&format!("    Process inner{g} \"Inner {g}\" {{\n"));
        nodes += 2;
        for i in 0..states {
            s.push_str(&format!(
                "        State s{g}_{i} \"Waiting {i}\" {{ timeout<number>: {}; }}\n",
                i * 10
            ));
        }
        for i in 1..states {
            s.push_str(&format!("        s{g}_{} -> s{g}_{i};\n", i - 1));
        }
        s.push_str("    }\n");
        for i in 0..tasks {
            let line = s.matches('\n').count() as u32;
            s.push_str(&format!(
                "    Task t{g}_{i} \"Step {i} of {g}\" {{ prompt: \"Handle {{{{ state.name }}}} ({{{{ state.count }}}}) — step {i}\"; retries<number>: 3; }}\n"
            ));
            if nodes + states + i >= NODES / 2 && edit_at == (0, 0) {
                edit_at = (line, 40);
            }
        }
        nodes += states + tasks;
        for i in 1..tasks {
            s.push_str(&format!("    t{g}_{} -label {i}-> t{g}_{i};\n", i - 1));
        }
        if tasks > 0 && states > 0 {
            s.push_str(&format!("    t{g}_{} -> s{g}_0;\n", tasks - 1));
        }
        for k in 0..left_dangling.min(10) {
            s.push_str(&format!("    t{g}_0 -> todo{g}_{k};\n"));
            left_dangling -= 1;
        }
        s.push_str("}\n");
        if g > 0 && tasks > 0 {
            s.push_str(&format!(
                "group{}.t{}_25 -when: 'state.count > {g}'-> group{g}.t{g}_0;\n",
                g - 1,
                g - 1
            ));
        }
        if tasks > 0 {
            s.push_str(&format!("group{g}.t{g}_0 -writes-> state;\n\n"));
        }
        g += 1;
    }
    s.push_str("start -> group0.t0_0;\ngroup0.t0_1 -> Shared;\n");
    (s, nodes, edit_at)
}

const LIB: &str = "machine \"Lib\"\nTask Shared \"Shared step\" { prompt: \"Shared\"; }\n";

/// The editor's side of the connection.
struct Editor {
    stdin: ChildStdin,
    incoming: mpsc::Receiver<Value>,
}

impl Editor {
    fn send(&mut self, message: Value) {
        let body = message.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn wait(&mut self, what: impl Fn(&Value) -> bool) -> Value {
        loop {
            let m = self.incoming.recv_timeout(Duration::from_secs(30)).unwrap();
            if what(&m) {
                return m;
            }
        }
    }
}

fn read_messages(out: impl Read + Send + 'static, tx: mpsc::Sender<Value>) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(out);
        loop {
            let mut length = 0;
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 {
                    return;
                }
                let header = header.trim();
                if header.is_empty() {
                    break;
                }
                if let Some(n) = header.strip_prefix("Content-Length: ") {
                    length = n.parse().unwrap();
                }
            }
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).unwrap();
            if tx.send(serde_json::from_slice(&body).unwrap()).is_err() {
                return;
            }
        }
    });
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Median, p95 and max of `times`, as a line.
fn summary(mut times: Vec<Duration>, what: &str) -> (String, Duration) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    let line = format!(
        "median {:6.2} ms, p95 {:6.2} ms, max {:6.2} ms ({} {what})",
        ms(at(0.5)),
        ms(at(0.95)),
        ms(at(1.0)),
        times.len()
    );
    (line, at(0.95))
}

/// Opens the machine in the server and times the edits: the p95 of edit to diagnostics.
fn scenario(name: &str, dangling: usize) -> Duration {
    let (text, nodes, (line, character)) = machine(dangling);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.dy");
    std::fs::write(&path, &text).unwrap();
    std::fs::write(dir.path().join("lib.dy"), LIB).unwrap();
    let uri = format!("file://{}", path.display());
    println!(
        "\n{name}: {nodes} nodes, {} lines, {} KiB",
        text.lines().count(),
        text.len() / 1024
    );

    let mut child = Command::new(env!("CARGO_BIN_EXE_dygram"))
        .arg("lsp")
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let (tx, incoming) = mpsc::channel();
    read_messages(child.stdout.take().unwrap(), tx);
    let mut editor = Editor {
        stdin: child.stdin.take().unwrap(),
        incoming,
    };
    editor.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"capabilities": {}, "processId": null}}));
    editor.wait(|m| m["id"] == 1);
    editor.send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));

    let opened = Instant::now();
    editor.send(
        json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": uri, "languageId": "dygram", "version": 1, "text": text}}}),
    );
    let first = editor.wait(|m| m["method"] == "textDocument/publishDiagnostics");
    let open_time = opened.elapsed();
    let found = first["params"]["diagnostics"].as_array().unwrap();
    let errors: Vec<&Value> = found.iter().filter(|d| d["severity"] == 1).collect();
    assert!(
        errors.is_empty(),
        "the machine has {} errors, the first: {}",
        errors.len(),
        errors[0]
    );
    println!(
        "  open: {} warnings (e.g. {}) after {:.2} ms",
        found.len(),
        found.first().map_or("none", |w| w["message"]
            .as_str()
            .unwrap()
            .lines()
            .next()
            .unwrap()),
        ms(open_time)
    );

    // One character typed, then deleted, in a prompt half-way down.
    let mut times = Vec::with_capacity(EDITS);
    for version in 2..(2 + WARM_UP + EDITS) as i32 {
        let (end, new) = if version % 2 == 0 {
            (character, "x")
        } else {
            (character + 1, "")
        };
        let change = json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": {"line": line, "character": character},
                                          "end": {"line": line, "character": end}},
                                "text": new}]}});
        let sent = Instant::now();
        editor.send(change);
        let published = editor.wait(|m| {
            m["method"] == "textDocument/publishDiagnostics" && m["params"]["version"] == version
        });
        if version as usize >= 2 + WARM_UP {
            times.push(sent.elapsed());
        }
        assert_eq!(
            published["params"]["diagnostics"].as_array().unwrap().len(),
            found.len()
        );
    }
    let (edits, p95) = summary(times, "edits");
    println!("  edit -> diagnostics over stdio:  {edits}");

    // The outline of the whole machine.
    let outline: Vec<Duration> = (0..EDITS / 10)
        .map(|i| {
            let id = 100 + i as i64;
            let sent = Instant::now();
            editor.send(
                json!({"jsonrpc": "2.0", "id": id, "method": "textDocument/documentSymbol",
                               "params": {"textDocument": {"uri": uri}}}),
            );
            let answer = editor.wait(|m| m["id"] == id);
            assert!(answer["result"].as_array().is_some_and(|s| s.len() > 10));
            sent.elapsed()
        })
        .collect();
    println!(
        "  documentSymbol over stdio:       {}",
        summary(outline, "requests").0
    );

    editor.send(json!({"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": null}));
    editor.wait(|m| m["id"] == 2);
    editor.send(json!({"jsonrpc": "2.0", "method": "exit", "params": null}));
    assert!(child.wait().unwrap().success());

    // The same work in process: compile (with the import) and convert the diagnostics.
    let lsp_uri: lsp_types::Uri = uri.parse().unwrap();
    let in_process: Vec<Duration> = (0..EDITS / 3)
        .map(|_| {
            let start = Instant::now();
            let checked = dygram::lsp::diagnostics::check(
                &lsp_uri,
                Some(&path),
                &text,
                &dygram_runtime::files::Disk,
            );
            assert_eq!(checked.diagnostics.len(), found.len());
            start.elapsed()
        })
        .collect();
    println!(
        "  diagnostics in process:          {}",
        summary(in_process, "runs").0
    );
    p95
}

fn main() {
    let clean = scenario("a machine of 1 000 nodes", 0);
    let typing = scenario("the same with 50 edges to nodes not declared (yet)", 50);
    for (what, p95) in [("complete", clean), ("with undeclared names", typing)] {
        println!(
            "budget {} ms at p95, {what}: {}",
            BUDGET.as_millis(),
            if p95 <= BUDGET { "met" } else { "MISSED" }
        );
    }
}
