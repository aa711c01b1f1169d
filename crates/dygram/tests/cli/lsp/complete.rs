//! Completion and semantic tokens, on documents with syntax errors as they are while being typed.

use serde_json::{Value, json};

use super::Client;

/// A document whose last edge has no target (a syntax error), with a template left unfinished.
const SHOP: &str = "machine \"Shop\"\nContext order { total<number>: 0; items<Array<string>>: []; }\nProcess checkout {\n  Task pay \"Pay the bill\" @Async { prompt: \"Pay {{ order. }}\"; }\n  State done;\n}\nstart -> ;\n";

/// The position just after the first `marker` in `text` (ASCII before it).
fn after(text: &str, marker: &str) -> Value {
    let end = text.find(marker).unwrap() + marker.len();
    let line = text[..end].matches('\n').count();
    let character = end - text[..end].rfind('\n').map_or(0, |i| i + 1);
    json!({"line": line, "character": character})
}

fn complete(client: &mut Client, uri: &str, position: Value) -> Vec<Value> {
    let answer = client.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": uri}, "position": position}),
    );
    answer["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .clone()
}

fn labels(items: &[Value]) -> Vec<&str> {
    items.iter().map(|i| i["label"].as_str().unwrap()).collect()
}

fn item<'a>(items: &'a [Value], label: &str) -> &'a Value {
    items
        .iter()
        .find(|i| i["label"] == label)
        .unwrap_or_else(|| panic!("{label} not offered: {:?}", labels(items)))
}

fn has_syntax_error(published: &Value) -> bool {
    published["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["code"] == "syntax" && d["severity"] == 1)
}

/// `CompletionItemKind` numbers.
const FUNCTION: u64 = 3;
const FIELD: u64 = 5;
const CLASS: u64 = 7;
const MODULE: u64 = 9;
const PROPERTY: u64 = 10;
const KEYWORD: u64 = 14;
const STRUCT: u64 = 22;

#[test]
fn completion_offers_names_annotations_fields_and_types_in_a_broken_document() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(dir.path());
    let provider = &client.capabilities["completionProvider"]["triggerCharacters"];
    for c in ["@", ".", "<", ">", "{"] {
        assert!(
            provider.as_array().unwrap().contains(&json!(c)),
            "{provider}"
        );
    }
    let uri = "untitled:shop";
    client.open(uri, SHOP);
    assert!(has_syntax_error(&client.diagnostics(uri)));

    // After `->`: the nodes, nested ones by their qualified name and by their own.
    let items = complete(&mut client, uri, after(SHOP, "start -> "));
    let names = labels(&items);
    for name in [
        "checkout",
        "checkout.pay",
        "pay",
        "checkout.done",
        "done",
        "order",
    ] {
        assert!(names.contains(&name), "{name}: {names:?}");
    }
    assert!(
        !names.contains(&"Task") && !names.contains(&"machine"),
        "{names:?}"
    );
    let pay = item(&items, "checkout.pay");
    assert_eq!(pay["kind"], FUNCTION);
    assert_eq!(pay["detail"], "Task checkout.pay — Pay the bill");
    assert_eq!(pay["textEdit"]["newText"], "checkout.pay");
    assert_eq!(pay["textEdit"]["range"]["start"], after(SHOP, "start -> "));
    assert_eq!(item(&items, "checkout")["kind"], MODULE);
    assert_eq!(item(&items, "order")["kind"], STRUCT);

    // Inside `{{ order.`: the attributes of `order`, as written.
    let items = complete(&mut client, uri, after(SHOP, "{{ order."));
    assert_eq!(labels(&items), ["total", "items"]);
    assert_eq!(item(&items, "total")["kind"], FIELD);
    assert_eq!(item(&items, "total")["detail"], "total<number>: 0");

    // At the start of a statement: node types and names, no header keyword (there is one).
    let items = complete(&mut client, uri, json!({"line": 7, "character": 0}));
    let names = labels(&items);
    for name in [
        "Task", "State", "Context", "Process", "note", "type", "checkout",
    ] {
        assert!(names.contains(&name), "{name}: {names:?}");
    }
    assert!(!names.contains(&"machine"), "{names:?}");
    assert_eq!(item(&items, "Task")["kind"], CLASS);

    // After `@`, typed as an incremental change: the annotations of a node.
    client.notify(
        "textDocument/didChange",
        json!({
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{
                "range": {"start": {"line": 7, "character": 0}, "end": {"line": 7, "character": 0}},
                "text": "State shipped @"
            }]
        }),
    );
    assert!(has_syntax_error(&client.diagnostics(uri)));
    let items = complete(&mut client, uri, json!({"line": 7, "character": 15}));
    let names = labels(&items);
    for name in ["Async", "Critical", "Abstract", "start", "meta"] {
        assert!(names.contains(&name), "{name}: {names:?}");
    }
    // Edge and header annotations belong elsewhere.
    assert!(
        !names.contains(&"auto") && !names.contains(&"StrictMode"),
        "{names:?}"
    );
    assert_eq!(item(&items, "Async")["kind"], PROPERTY);
    assert!(
        item(&items, "Async")["detail"]
            .as_str()
            .unwrap()
            .contains("task")
    );

    // After `name<`: the types.
    let typed = format!("{SHOP}Context extra {{ limit< }}\n");
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 3}, "contentChanges": [{"text": typed}]}),
    );
    assert!(has_syntax_error(&client.diagnostics(uri)));
    let items = complete(&mut client, uri, after(&typed, "limit<"));
    let names = labels(&items);
    for name in [
        "string", "number", "boolean", "Integer", "Date", "Array", "Map",
    ] {
        assert!(names.contains(&name), "{name}: {names:?}");
    }
    assert!(!names.contains(&"order"), "{names:?}");
    assert_eq!(item(&items, "number")["kind"], STRUCT);

    // In a comment: nothing.
    let commented = format!("{SHOP}// start -> \n");
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 4}, "contentChanges": [{"text": commented}]}),
    );
    client.diagnostics(uri);
    assert_eq!(
        complete(&mut client, uri, after(&commented, "// start -> ")),
        Vec::<Value>::new()
    );
    assert_eq!(client.stop(), 0);
}

#[test]
fn completion_offers_the_keywords_a_statement_may_start_with() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(dir.path());
    let uri = "untitled:keywords";
    let text = "import { Base } from \"./base.dy\";\n\nState idle;\nidle -> ;\n";
    client.open(uri, text);
    assert!(has_syntax_error(&client.diagnostics(uri)));
    // Between the imports and the nodes: another import, the header, or the first node.
    let items = complete(&mut client, uri, json!({"line": 1, "character": 0}));
    let names = labels(&items);
    for name in ["import", "machine", "Task", "State", "Context", "idle"] {
        assert!(names.contains(&name), "{name}: {names:?}");
    }
    assert_eq!(item(&items, "machine")["kind"], KEYWORD);
    assert_eq!(item(&items, "import")["kind"], KEYWORD);
    assert!(
        item(&items, "State")["detail"]
            .as_str()
            .unwrap()
            .contains("node type")
    );
    // After the nodes, neither keyword may come.
    let items = complete(&mut client, uri, json!({"line": 4, "character": 0}));
    let names = labels(&items);
    assert!(names.contains(&"Task"), "{names:?}");
    assert!(
        !names.contains(&"machine") && !names.contains(&"import"),
        "{names:?}"
    );
    assert_eq!(client.stop(), 0);
}

/// The decoded tokens of a `semanticTokens/full` answer: (line, start, length, type, modifiers).
fn decode(data: &Value, legend: &Value) -> Vec<(u64, u64, u64, String, Vec<String>)> {
    let types: Vec<&str> = legend["tokenTypes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let modifiers: Vec<&str> = legend["tokenModifiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let numbers: Vec<u64> = data
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect();
    assert_eq!(numbers.len() % 5, 0, "{data}");
    let (mut line, mut start) = (0, 0);
    numbers
        .chunks(5)
        .map(|t| {
            if t[0] > 0 {
                start = 0;
            }
            line += t[0];
            start += t[1];
            let set: Vec<String> = modifiers
                .iter()
                .enumerate()
                .filter(|(i, _)| t[4] & (1 << i) != 0)
                .map(|(_, m)| m.to_string())
                .collect();
            (line, start, t[2], types[t[3] as usize].to_string(), set)
        })
        .collect()
}

#[test]
fn semantic_tokens_classify_names_annotations_and_comments_in_utf16_columns() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(dir.path());
    let provider = client.capabilities["semanticTokensProvider"].clone();
    assert_eq!(provider["full"], true, "{provider}");
    let legend = provider["legend"].clone();
    let uri = "untitled:tokens";
    let text = "// Shop: commandes à payer\nmachine \"Shop\"\nContext order { total<number>: 0; }\nTask pay \"Payer l'été 𝄞\" @Async { prompt: \"Pay\nnow\"; }\npay -> order;\npay -> ;\n";
    client.open(uri, text);
    assert!(has_syntax_error(&client.diagnostics(uri)));
    let answer = client.request(
        "textDocument/semanticTokens/full",
        json!({"textDocument": {"uri": uri}}),
    );
    let tokens = decode(&answer["result"]["data"], &legend);
    let at = |line: u64, start: u64| {
        tokens
            .iter()
            .find(|t| t.0 == line && t.1 == start)
            .unwrap_or_else(|| panic!("no token at {line}:{start}: {tokens:?}"))
            .clone()
    };
    let declaration = vec!["declaration".to_string()];
    // The comment's line: `à` is one UTF-16 unit (two bytes).
    assert_eq!(at(0, 0), (0, 0, 26, "comment".into(), vec![]));
    assert_eq!(at(1, 0).3, "keyword");
    assert_eq!(at(2, 0).3, "type");
    assert_eq!(at(2, 8), (2, 8, 5, "class".into(), declaration.clone()));
    assert_eq!(
        at(2, 16),
        (2, 16, 5, "property".into(), declaration.clone())
    );
    assert_eq!(at(2, 22).3, "type");
    assert_eq!(at(3, 5), (3, 5, 3, "class".into(), declaration.clone()));
    // After the title (`é` one unit, `𝄞` two, 4 bytes): the annotation at column 27, not 33.
    assert_eq!(at(3, 9), (3, 9, 16, "string".into(), vec![]));
    assert_eq!(at(3, 27), (3, 27, 5, "decorator".into(), vec![]));
    assert_eq!(at(3, 35).3, "property");
    // A string over two lines is a token on each.
    assert_eq!(at(3, 43), (3, 43, 4, "string".into(), vec![]));
    assert_eq!(at(4, 0), (4, 0, 4, "string".into(), vec![]));
    // Names used by edges, the arrow; the broken last edge still has its source.
    assert_eq!(at(5, 0), (5, 0, 3, "class".into(), vec![]));
    assert_eq!(at(5, 4).3, "operator");
    assert_eq!(at(5, 7), (5, 7, 5, "class".into(), vec![]));
    assert_eq!(at(6, 0), (6, 0, 3, "class".into(), vec![]));
    // No token runs past its line.
    let lines: Vec<usize> = text.split('\n').map(|l| l.encode_utf16().count()).collect();
    for t in &tokens {
        assert!((t.1 + t.2) as usize <= lines[t.0 as usize], "{t:?}");
    }
    assert_eq!(client.stop(), 0);
}
