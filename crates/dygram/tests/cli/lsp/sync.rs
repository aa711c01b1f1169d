//! Keeping up with the editor: importers re-checked when an imported document changes, and
//! requests cancelled or superseded before the server reached them.

use std::io::Write;

use serde_json::{Value, json};

use super::{ANSWER, Client};

fn file_uri(path: &std::path::Path) -> String {
    format!("file://{}", path.display())
}

fn change(uri: &str, version: i32, text: &str) -> Value {
    json!({
        "textDocument": {"uri": uri, "version": version},
        "contentChanges": [{"text": text}]
    })
}

fn errors(published: &Value) -> Vec<String> {
    published["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["severity"] == 1)
        .map(|d| d["message"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn an_importer_is_checked_again_when_the_imported_document_changes_unsaved() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib.dy");
    let main = dir.path().join("main.dy");
    let lib_text = "Process flows { Task review; }\n";
    let main_text = "import { flows.review } from \"./lib\"\nstart -> review;\n";
    std::fs::write(&lib, lib_text).unwrap();
    std::fs::write(&main, main_text).unwrap();
    let (lib_uri, main_uri) = (file_uri(&lib), file_uri(&main));
    let mut client = Client::start(dir.path());
    client.open(&main_uri, main_text);
    assert_eq!(errors(&client.diagnostics(&main_uri)), Vec::<String>::new());
    client.open(&lib_uri, lib_text);
    client.diagnostics(&lib_uri);
    // Opening the imported document checks its importer again (the same text: no error).
    assert_eq!(errors(&client.diagnostics(&main_uri)), Vec::<String>::new());
    // The imported document loses the node, in the editor only: the importer says so.
    client.notify(
        "textDocument/didChange",
        change(&lib_uri, 2, "Process flows { Task audit; }\n"),
    );
    let again = client.diagnostics(&main_uri);
    assert_eq!(
        errors(&again),
        ["Module \"./lib\" has no node named \"flows.review\""],
        "{again}"
    );
    // Closing it unsaved: the importer reads the disk again, where the node still is.
    client.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": lib_uri}}),
    );
    assert_eq!(errors(&client.diagnostics(&main_uri)), Vec::<String>::new());
    // Saved on disk by another program, announced as a watched-file change: checked again.
    std::fs::write(&lib, "Process flows { }\n").unwrap();
    client.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [{"uri": lib_uri, "type": 2}]}),
    );
    assert_eq!(errors(&client.diagnostics(&main_uri)).len(), 1);
    assert_eq!(client.stop(), 0);
}

#[test]
fn requests_cancelled_or_overtaken_by_a_change_are_not_answered_with_stale_results() {
    let dir = tempfile::tempdir().unwrap();
    // Many machine files under the workspace: finding references reads them all, which keeps the
    // server busy while the next messages arrive and wait together.
    for i in 0..1_500 {
        let text = format!("Task t{i} {{ n: {i}; }}\nt{i} -> done;\n");
        std::fs::write(dir.path().join(format!("m{i}.dy")), text).unwrap();
    }
    let home = dir.path().join("home.dy");
    let text = "Task pay;\nstart -> pay;\n";
    std::fs::write(&home, text).unwrap();
    let uri = file_uri(&home);
    let mut client = Client::start(dir.path());
    client.open(&uri, text);
    client.diagnostics(&uri);
    let position = |line: u32, character: u32| json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}});
    let mut references = position(0, 6);
    references["context"] = json!({"includeDeclaration": true});
    let frame = |message: Value| {
        let body = message.to_string();
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    };
    let batch = [
        frame(json!({"jsonrpc": "2.0", "id": 100, "method": "textDocument/references", "params": references})),
        frame(json!({"jsonrpc": "2.0", "id": 101, "method": "textDocument/hover", "params": position(0, 6)})),
        frame(json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 101}})),
        frame(json!({"jsonrpc": "2.0", "id": 102, "method": "textDocument/hover", "params": position(0, 6)})),
        frame(json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": change(&uri, 2, "Task paid;\nstart -> paid;\n")})),
        frame(json!({"jsonrpc": "2.0", "id": 103, "method": "textDocument/hover", "params": position(0, 6)})),
    ]
    .concat();
    client.stdin.write_all(batch.as_bytes()).unwrap();
    client.stdin.flush().unwrap();
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 4 {
        let message = client.incoming.recv_timeout(ANSWER).expect("no answer");
        if let Some(id) = message["id"].as_i64() {
            answers.insert(id, message);
        }
    }
    // The slow request is answered, unless the change was already waiting when it was reached.
    let first = &answers[&100];
    assert!(
        first["result"].as_array().map(Vec::len) == Some(2) || first["error"]["code"] == -32801,
        "{first}"
    );
    assert_eq!(answers[&101]["error"]["code"], -32800, "{}", answers[&101]);
    assert_eq!(answers[&102]["error"]["code"], -32801, "{}", answers[&102]);
    let fresh = answers[&103]["result"]["contents"]["value"]
        .as_str()
        .unwrap_or_default();
    assert!(fresh.contains("`paid`"), "{}", answers[&103]);
    assert_eq!(client.stop(), 0);
}
