//! Diagnostics, the outline, hover and the server's robustness.

use serde_json::{Value, json};

use super::Client;

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
    // On the edge that names it (qualified): the same node, the range of the part under the
    // cursor; the first part is the parent.
    let used = hover(&mut client, 4, 19);
    assert_eq!(
        used["result"]["contents"]["value"],
        declared["result"]["contents"]["value"]
    );
    assert_eq!(
        used["result"]["range"]["start"],
        json!({"line": 4, "character": 18})
    );
    let parent = hover(&mut client, 4, 12);
    assert_eq!(
        parent["result"]["contents"]["value"],
        "**Process** `checkout`\n"
    );
    // Nowhere in particular: nothing.
    assert_eq!(hover(&mut client, 0, 0)["result"], Value::Null);
    assert_eq!(client.stop(), 0);
}

#[test]
fn hovering_a_context_field_or_an_edge_shows_its_type_or_label() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(dir.path());
    let uri = "untitled:hover-more";
    let text = "machine \"Shop\"\nContext order { total<number>: 12; }\nTask pay { prompt: \"Pay {{ order.total }}\"; }\npay -when: \"order.total > 10\"-> review;\n";
    client.open(uri, text);
    client.diagnostics(uri);
    let mut hover = |line: u32, character: u32| {
        let answer = client.request(
            "textDocument/hover",
            json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}),
        );
        answer["result"]["contents"]["value"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .to_string()
    };
    // The field inside a template: its owner and declared type, and the declaration as written.
    let field = hover(2, 35);
    assert!(
        field.starts_with("**attribute** `total` of `order` — `number`"),
        "{field}"
    );
    assert!(field.contains("total<number>: 12"), "{field}");
    // The same field in a condition.
    assert_eq!(hover(3, 19), field);
    // The edge's arrow or label: the kind, its ends and the label as written.
    let edge = hover(3, 5);
    assert_eq!(
        edge,
        "**transition** `pay` → `review`\n\nlabel: `when: \"order.total > 10\"`"
    );
    assert_eq!(client.stop(), 0);
}

#[test]
fn input_that_is_not_the_protocol_or_an_exit_before_shutdown_is_an_error_with_a_hint() {
    let project = crate::support::Dir::new();
    let out = project.run_with_stdin(&["lsp"], "hello\n");
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains("the language server could not read the editor's messages"),
        "{out:?}"
    );
    assert!(out.stderr.contains("malformed header"), "{out:?}");
    assert!(out.stderr.contains("docs/dygram/editors.md"), "{out:?}");
    let frame = |message: Value| {
        let body = message.to_string();
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    };
    let session = [
        frame(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})),
        frame(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}})),
        frame(json!({"jsonrpc": "2.0", "method": "exit"})),
    ]
    .concat();
    let out = project.run_with_stdin(&["lsp"], &session);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("without shutting it down first"),
        "{out:?}"
    );
}
