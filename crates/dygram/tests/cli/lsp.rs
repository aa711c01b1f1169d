//! `dygram lsp`: the language server driven over stdio with real JSON-RPC framing
//! (`Content-Length` headers), as an editor drives it.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::bin;

/// How long the server may take to answer anything.
const ANSWER: Duration = Duration::from_secs(20);

/// An editor's side of the connection.
struct Client {
    child: Child,
    stdin: ChildStdin,
    incoming: mpsc::Receiver<Value>,
    next_id: i64,
}

/// Reads framed messages from `out` into `tx` until the stream ends.
fn read_messages(out: impl Read + Send + 'static, tx: mpsc::Sender<Value>) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(out);
        loop {
            let mut length = None;
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
                    length = n.parse::<usize>().ok();
                }
            }
            let mut body = vec![0u8; length.expect("a message without Content-Length")];
            reader.read_exact(&mut body).unwrap();
            if tx.send(serde_json::from_slice(&body).unwrap()).is_err() {
                return;
            }
        }
    });
}

impl Client {
    /// Starts `dygram lsp` in `dir` and initializes it.
    fn start(dir: &std::path::Path) -> Self {
        let mut child = Command::new(bin())
            .arg("lsp")
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (tx, incoming) = mpsc::channel();
        read_messages(child.stdout.take().unwrap(), tx);
        let stdin = child.stdin.take().unwrap();
        let mut client = Self {
            child,
            stdin,
            incoming,
            next_id: 1,
        };
        let init = client.request("initialize", json!({"capabilities": {}, "processId": null}));
        assert_eq!(
            init["result"]["capabilities"]["textDocumentSync"], 2,
            "incremental sync: {init}"
        );
        client.notify("initialized", json!({}));
        client
    }

    fn send(&mut self, message: Value) {
        let body = message.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and waits for its response (notifications on the way are dropped).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self.incoming.recv_timeout(ANSWER).expect("no response");
            if message["id"] == id {
                return message;
            }
        }
    }

    /// Waits for the next diagnostics published for `uri`.
    fn diagnostics(&mut self, uri: &str) -> Value {
        loop {
            let message = self.incoming.recv_timeout(ANSWER).expect("no diagnostics");
            if message["method"] == "textDocument/publishDiagnostics"
                && message["params"]["uri"] == uri
            {
                return message["params"].clone();
            }
        }
    }

    fn open(&mut self, uri: &str, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "dygram", "version": 1, "text": text}}),
        );
    }

    /// `shutdown`, then `exit`: the server's exit code.
    fn stop(mut self) -> i32 {
        let answer = self.request("shutdown", Value::Null);
        assert_eq!(answer["result"], Value::Null, "{answer}");
        self.notify("exit", Value::Null);
        drop(self.stdin);
        let deadline = std::time::Instant::now() + ANSWER;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server did not exit"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

const BROKEN: &str = "machine \"Demo\"\nstate start;\nstart -> ;\n";

#[test]
fn diagnostics_follow_the_document_as_it_is_opened_and_edited() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.dy");
    std::fs::write(&path, BROKEN).unwrap();
    let uri = format!("file://{}", path.display());
    let mut client = Client::start(dir.path());
    client.open(&uri, BROKEN);
    let published = client.diagnostics(&uri);
    let first = &published["diagnostics"][0];
    assert_eq!(first["severity"], 1, "{published}");
    assert_eq!(first["code"], "syntax");
    assert_eq!(first["source"], "dygram");
    assert!(
        first["message"].as_str().unwrap().contains("target node"),
        "{first}"
    );
    // The same place `dygram pv` names: line 3, column 10 (0-based here).
    assert_eq!(first["range"]["start"], json!({"line": 2, "character": 9}));
    assert_eq!(published["version"], 1);
    // An incremental change that names the target fixes it.
    client.notify(
        "textDocument/didChange",
        json!({
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{
                "range": {"start": {"line": 2, "character": 9}, "end": {"line": 2, "character": 9}},
                "text": "end"
            }]
        }),
    );
    let published = client.diagnostics(&uri);
    assert_eq!(published["version"], 2);
    let errors: Vec<&Value> = published["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["severity"] == 1)
        .collect();
    assert!(errors.is_empty(), "{published}");
    // Closing the document clears its diagnostics.
    client.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": uri}}),
    );
    assert_eq!(client.diagnostics(&uri)["diagnostics"], json!([]));
    assert_eq!(client.stop(), 0);
}

#[test]
fn a_type_error_and_an_unknown_request_leave_the_server_answering() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(dir.path());
    let answer = client.request("textDocument/unknownThing", json!({}));
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    let uri = "untitled:Untitled-1";
    client.open(
        uri,
        "machine \"Demo\"\nContext c { n<number>: \"x\"; }\nstate start;\n",
    );
    let published = client.diagnostics(uri);
    let mismatch = published["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "validation")
        .unwrap_or_else(|| panic!("{published}"));
    assert!(
        mismatch["message"]
            .as_str()
            .unwrap()
            .contains("Type mismatch")
    );
    assert_eq!(mismatch["range"]["start"]["line"], 1);
    // Garbage as a change (a range past the end, text with a NUL) does not stop it.
    client.notify(
        "textDocument/didChange",
        json!({
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{
                "range": {"start": {"line": 99, "character": 5}, "end": {"line": 0, "character": 0}},
                "text": "\u{0}}}}{{{"
            }]
        }),
    );
    assert_eq!(client.diagnostics(uri)["version"], 2);
    assert_eq!(client.stop(), 0);
}

#[test]
fn the_outline_nests_nodes_and_their_attributes_even_with_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(dir.path());
    let uri = "untitled:outline";
    let text = "machine \"Shop\"\nmaxSteps: 10;\nContext order { total<number>: 0; }\nProcess checkout {\n  Task pay \"Pay\" { prompt: \"Pay\"; }\n  State done;\n}\ncheckout -> ;\n";
    client.open(uri, text);
    client.diagnostics(uri);
    let answer = client.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": uri}}),
    );
    let symbols = answer["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"));
    let names: Vec<&str> = symbols
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Shop", "order", "checkout"], "{answer}");
    assert_eq!(symbols[0]["children"][0]["name"], "maxSteps");
    assert_eq!(symbols[1]["children"][0]["name"], "total");
    let inner: Vec<&str> = symbols[2]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(inner, ["pay", "done"]);
    assert_eq!(symbols[2]["children"][0]["children"][0]["name"], "prompt");
    assert_eq!(symbols[2]["children"][0]["detail"], "Task \"Pay\"");
    // The node's name is where the editor puts the cursor: line 4, after `Process `.
    assert_eq!(
        symbols[2]["selectionRange"]["start"],
        json!({"line": 3, "character": 8})
    );
    // Parameters that are not a document's are refused, and the server goes on.
    let bad = client.request("textDocument/documentSymbol", json!({"nope": 1}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert_eq!(client.stop(), 0);
}

#[test]
fn hovering_a_node_where_it_is_declared_or_used_shows_its_type_title_and_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(dir.path());
    let uri = "untitled:hover";
    let text = "machine \"Shop\"\nProcess checkout {\n  Task pay \"Pay the bill\" @Async { prompt: \"Pay\"; retries<number>: 2; }\n}\nstart -> checkout.pay;\n";
    client.open(uri, text);
    client.diagnostics(uri);
    let hover = |client: &mut Client, line: u32, character: u32| {
        client.request(
            "textDocument/hover",
            json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}),
        )
    };
    // On the declaration's name.
    let declared = hover(&mut client, 2, 8);
    let shown = declared["result"]["contents"]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("{declared}"));
    assert!(
        shown.starts_with("**Task** `checkout.pay` — Pay the bill"),
        "{shown}"
    );
    assert!(shown.contains("- `@Async`"), "{shown}");
    assert!(shown.contains("- `prompt: \"Pay\"`"), "{shown}");
    assert!(shown.contains("- `retries<number>: 2`"), "{shown}");
    // On the edge that names it (qualified): the same node, the range of the name used.
    let used = hover(&mut client, 4, 15);
    assert_eq!(
        used["result"]["contents"]["value"],
        declared["result"]["contents"]["value"]
    );
    assert_eq!(
        used["result"]["range"]["start"],
        json!({"line": 4, "character": 9})
    );
    // Nowhere in particular: nothing.
    assert_eq!(hover(&mut client, 0, 0)["result"], Value::Null);
    assert_eq!(client.stop(), 0);
}
