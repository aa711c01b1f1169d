//! `dygram lsp`: the language server driven over stdio with real JSON-RPC framing
//! (`Content-Length` headers), as an editor drives it. [`Client`] is the editor's side; each file
//! below tests one group of features.

mod basics;
mod complete;
mod format;
mod framing;
mod fuzz;
mod navigate;
mod neovim;
mod sync;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::bin;

/// `text` with the LSP text edits `edits` applied (ranges of `text`, in UTF-16 positions, none
/// overlapping), as an editor applies them.
pub fn apply_edits(text: &str, edits: &[Value]) -> String {
    let offset = |position: &Value| {
        let line = position["line"].as_u64().unwrap() as usize;
        let character = position["character"].as_u64().unwrap() as usize;
        let start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
        let rest = &text[start.min(text.len())..];
        let mut units = 0;
        for (i, c) in rest.char_indices() {
            if units >= character || c == '\n' {
                return start + i;
            }
            units += c.len_utf16();
        }
        text.len()
    };
    let mut ranges: Vec<(usize, usize, &str)> = edits
        .iter()
        .map(|e| {
            (
                offset(&e["range"]["start"]),
                offset(&e["range"]["end"]),
                e["newText"].as_str().unwrap(),
            )
        })
        .collect();
    ranges.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut out = text.to_string();
    for (start, end, new) in ranges {
        out.replace_range(start..end, new);
    }
    out
}

/// How long the server may take to answer anything.
pub const ANSWER: Duration = Duration::from_secs(20);

/// An editor's side of the connection.
pub struct Client {
    /// What the server said it can do (`initialize`'s answer).
    pub capabilities: Value,
    child: Child,
    pub stdin: ChildStdin,
    pub incoming: mpsc::Receiver<Value>,
    next_id: i64,
    /// What the server wrote to its standard error (a panic's message goes there).
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
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
    pub fn start(dir: &std::path::Path) -> Self {
        let mut child = Command::new(bin())
            .arg("lsp")
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, incoming) = mpsc::channel();
        read_messages(child.stdout.take().unwrap(), tx);
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut err = child.stderr.take().unwrap();
        let into = Arc::clone(&stderr);
        let stderr_reader = std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = err.read(&mut chunk) {
                into.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        let stdin = child.stdin.take().unwrap();
        let mut client = Self {
            capabilities: Value::Null,
            child,
            stdin,
            incoming,
            next_id: 1,
            stderr,
            stderr_reader: Some(stderr_reader),
        };
        let init = client.request("initialize", json!({"capabilities": {}, "processId": null}));
        assert_eq!(
            init["result"]["capabilities"]["textDocumentSync"]["change"], 2,
            "incremental sync: {init}"
        );
        client.capabilities = init["result"]["capabilities"].clone();
        client.notify("initialized", json!({}));
        client
    }

    /// What the server has written to its standard error so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Whether the server's process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes `bytes` to the server's standard input as they are (framing included).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Waits (at most [`ANSWER`]) for the server to end by itself, its standard input closed
    /// first when `close_input`: its exit code (`None`: ended by a signal) and standard error.
    pub fn ended(mut self, close_input: bool) -> (Option<i32>, String) {
        let stdin = self.stdin;
        if close_input {
            drop(stdin);
        }
        let deadline = std::time::Instant::now() + ANSWER;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                if let Some(reader) = self.stderr_reader.take() {
                    reader.join().unwrap();
                }
                let stderr = String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned();
                return (status.code(), stderr);
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the server did not end by itself");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn send(&mut self, message: Value) {
        let body = message.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.stdin.flush().unwrap();
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and waits for its response (notifications on the way are dropped).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.request_noting(method, params).0
    }

    /// Sends a request and waits for its response; with it, the notifications that came before.
    pub fn request_noting(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut notes = Vec::new();
        loop {
            let message = self.incoming.recv_timeout(ANSWER).expect("no response");
            if message["id"] == id {
                return (message, notes);
            }
            if message.get("id").is_none() {
                notes.push(message);
            }
        }
    }

    /// Waits for the next diagnostics published for `uri`.
    pub fn diagnostics(&mut self, uri: &str) -> Value {
        loop {
            let message = self.incoming.recv_timeout(ANSWER).expect("no diagnostics");
            if message["method"] == "textDocument/publishDiagnostics"
                && message["params"]["uri"] == uri
            {
                return message["params"].clone();
            }
        }
    }

    pub fn open(&mut self, uri: &str, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "dygram", "version": 1, "text": text}}),
        );
    }

    /// Replaces the whole text of `uri` (a change without a range).
    pub fn replace(&mut self, uri: &str, version: i32, text: &str) {
        self.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}),
        );
    }

    /// `shutdown`, then `exit`: the server's exit code.
    pub fn stop(self) -> i32 {
        self.finish().0
    }

    /// `shutdown`, then `exit`: the server's exit code and all it wrote to its standard error.
    pub fn finish(mut self) -> (i32, String) {
        let answer = self.request("shutdown", Value::Null);
        assert_eq!(answer["result"], Value::Null, "{answer}");
        self.notify("exit", Value::Null);
        let (code, stderr) = self.ended(true);
        (code.unwrap_or(-1), stderr)
    }
}
