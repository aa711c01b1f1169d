//! Formatting (`textDocument/formatting`) and the quick fixes of "did you mean" suggestions
//! (`textDocument/codeAction`).

use std::process::Command;

use serde_json::{Value, json};

use super::{Client, apply_edits};
use crate::support::bin;

const MESSY: &str = "machine   \"Shop\"\nState start;   Task  pay \"Pay the bill\" {prompt: 'Pay';retries<number>:2;}\nState done;\nstart->pay; pay -> done;\n";

fn format_request(client: &mut Client, uri: &str) -> (Value, Vec<Value>) {
    client.request_noting(
        "textDocument/formatting",
        json!({"textDocument": {"uri": uri}, "options": {"tabSize": 4, "insertSpaces": true}}),
    )
}

/// The canonical JSON of `text`.
fn machine(text: &str) -> Value {
    dygram_core::compile(dygram_syntax::source::SourceFile::new("m.dy", text))
        .json(Default::default())
}

/// The `window/showMessage` (or `window/logMessage`) texts among `notes`.
fn messages<'a>(notes: &'a [Value], method: &str) -> Vec<&'a str> {
    notes
        .iter()
        .filter(|n| n["method"] == method)
        .map(|n| n["params"]["message"].as_str().unwrap())
        .collect()
}

#[test]
fn a_messy_document_becomes_the_printers_text_and_the_same_machine() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shop.dy");
    std::fs::write(&path, MESSY).unwrap();
    let printed = Command::new(bin())
        .args(["generate", "-f", "dsl"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(printed.status.success());
    let printed = String::from_utf8(printed.stdout).unwrap();
    let uri = format!("file://{}", path.display());
    let mut client = Client::start(dir.path());
    assert_eq!(client.capabilities["documentFormattingProvider"], true);
    client.open(&uri, MESSY);
    client.diagnostics(&uri);
    let (answer, notes) = format_request(&mut client, &uri);
    let edits = answer["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(edits.len(), 1, "{answer}");
    let formatted = apply_edits(MESSY, edits);
    assert_eq!(formatted, printed);
    assert!(formatted.contains("task pay \"Pay the bill\" {\n    prompt: \"Pay\";\n"));
    assert_eq!(machine(&formatted), machine(MESSY));
    assert!(
        messages(&notes, "window/showMessage").is_empty(),
        "{notes:?}"
    );
    // The editor applies it; formatting again changes nothing.
    client.replace(&uri, 2, &formatted);
    client.diagnostics(&uri);
    let (again, _) = format_request(&mut client, &uri);
    assert_eq!(again["result"], json!([]), "{again}");
    // Two spaces a level when the editor says so.
    let (two, _) = client.request_noting(
        "textDocument/formatting",
        json!({"textDocument": {"uri": uri}, "options": {"tabSize": 2, "insertSpaces": true}}),
    );
    let indented = apply_edits(&formatted, two["result"].as_array().unwrap());
    assert!(indented.contains("{\n  prompt: \"Pay\";\n"), "{indented}");
    assert_eq!(machine(&indented), machine(MESSY));
    assert_eq!(client.stop(), 0);
}

#[test]
fn comments_stay_next_to_what_they_describe() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(dir.path());
    let uri = "untitled:commented";
    let text = "// Shop.\nmachine \"Shop\"\n// Entry.\nState start;\nTask pay { prompt: \"Pay\"; // short\n}\nstart -> pay;\n";
    client.open(uri, text);
    client.diagnostics(uri);
    let (answer, _) = format_request(&mut client, uri);
    let formatted = apply_edits(text, answer["result"].as_array().unwrap());
    assert_eq!(
        formatted,
        "// Shop.\nmachine \"Shop\";\n\n// Entry.\nstate start;\n\ntask pay {\n    prompt: \"Pay\"; // short\n}\n\nstart -> pay;\n"
    );
    assert_eq!(machine(&formatted), machine(text));
    assert_eq!(client.stop(), 0);
}

#[test]
fn documents_formatting_would_change_are_left_as_they_are_and_the_user_told_why() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(dir.path());
    let refused = |client: &mut Client, uri: &str, text: &str| {
        client.open(uri, text);
        client.diagnostics(uri);
        let (answer, notes) = format_request(client, uri);
        assert_eq!(answer["result"], Value::Null, "{answer}");
        assert!(answer.get("error").is_none(), "{answer}");
        let shown = messages(&notes, "window/showMessage");
        assert_eq!(shown.len(), 1, "{notes:?}");
        assert_eq!(notes[0]["params"]["type"], 2, "a warning: {notes:?}");
        shown[0].to_string()
    };
    let syntax = refused(&mut client, "untitled:syntax", "state a;\na -> ;\n");
    assert!(syntax.contains("syntax errors"), "{syntax}");
    // Asked again (format on save): in the log, not shown again.
    let (answer, notes) = format_request(&mut client, "untitled:syntax");
    assert_eq!(answer["result"], Value::Null);
    assert!(
        messages(&notes, "window/showMessage").is_empty(),
        "{notes:?}"
    );
    assert_eq!(messages(&notes, "window/logMessage"), [syntax.as_str()]);
    // The printer writes the machine's JSON, which keeps no single annotation value.
    let lossy = refused(
        &mut client,
        "untitled:lossy",
        "machine \"M\" @Version(\"2\")\nstate a;\n",
    );
    assert!(lossy.contains("would not say the same"), "{lossy}");
    // A comment in the middle of a statement has no place in the formatted text.
    let comment = refused(
        &mut client,
        "untitled:comment",
        "state a;\nstate b;\na -> /* later */ b;\n",
    );
    assert!(comment.contains("comment on line 3"), "{comment}");
    // Imports would be copied in.
    std::fs::write(dir.path().join("lib.dy"), "state shared;\n").unwrap();
    let imports = refused(
        &mut client,
        &format!("file://{}", dir.path().join("main.dy").display()),
        "import { shared } from \"./lib.dy\"\nshared -> b;\n",
    );
    assert!(imports.contains("imports"), "{imports}");
    assert_eq!(client.stop(), 0);
}

/// The quick fixes the server offers for `diagnostic` (sent back as the editor received it).
fn fixes(client: &mut Client, uri: &str, diagnostic: &Value) -> Vec<Value> {
    let answer = client.request(
        "textDocument/codeAction",
        json!({
            "textDocument": {"uri": uri},
            "range": diagnostic["range"],
            "context": {"diagnostics": [diagnostic]}
        }),
    );
    answer["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .clone()
}

#[test]
fn a_misspelled_edge_target_in_strict_mode_is_fixed_by_its_quick_fix() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(dir.path());
    assert_eq!(
        client.capabilities["codeActionProvider"]["codeActionKinds"],
        json!(["quickfix"])
    );
    let uri = "untitled:strict";
    let text = "machine \"Review\" @StrictMode\nstate start;\nTask review \"Review it\";\nstate done;\nstart -> reveiw -> done;\n";
    client.open(uri, text);
    let published = client.diagnostics(uri);
    let typo = published["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| {
            d["message"]
                .as_str()
                .unwrap()
                .starts_with("Reference to undefined state: reveiw")
        })
        .unwrap_or_else(|| panic!("{published}"))
        .clone();
    assert!(
        typo["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `review`?"),
        "{typo}"
    );
    assert_eq!(
        typo["data"]["suggestion"]["replacement"], "review",
        "{typo}"
    );
    let offered = fixes(&mut client, uri, &typo);
    assert_eq!(offered.len(), 1, "{offered:?}");
    let fix = &offered[0];
    assert_eq!(fix["title"], "Change to `review`");
    assert_eq!(fix["kind"], "quickfix");
    assert_eq!(fix["isPreferred"], true);
    assert_eq!(fix["diagnostics"], json!([typo]));
    let edits = fix["edit"]["changes"][uri].as_array().unwrap();
    assert_eq!(
        edits,
        &[json!({
            "range": {"start": {"line": 4, "character": 9}, "end": {"line": 4, "character": 15}},
            "newText": "review"
        })]
    );
    // An editor that does not send `data` back gets the same fix.
    let mut bare = typo.clone();
    bare.as_object_mut().unwrap().remove("data");
    let again = fixes(&mut client, uri, &bare);
    assert_eq!(again[0]["edit"], fix["edit"], "{again:?}");
    // Applied, the error is gone.
    let fixed = apply_edits(text, edits);
    assert_eq!(
        fixed,
        "machine \"Review\" @StrictMode\nstate start;\nTask review \"Review it\";\nstate done;\nstart -> review -> done;\n"
    );
    client.replace(uri, 2, &fixed);
    let published = client.diagnostics(uri);
    assert_eq!(published["version"], 2);
    let errors: Vec<&Value> = published["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["severity"] == 1)
        .collect();
    assert!(errors.is_empty(), "{published}");
    // The fix of the old text is not offered for the new one.
    assert!(fixes(&mut client, uri, &typo).is_empty());
    assert_eq!(client.stop(), 0);
}

#[test]
fn a_name_nothing_is_close_to_gets_no_quick_fix() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(dir.path());
    let uri = "untitled:far";
    client.open(
        uri,
        "machine \"M\" @StrictMode\nstate start;\nstart -> payment;\n",
    );
    let published = client.diagnostics(uri);
    let error = &published["diagnostics"][0];
    assert_eq!(error["severity"], 1, "{published}");
    assert!(error.get("data").is_none_or(Value::is_null), "{error}");
    assert!(
        !error["message"].as_str().unwrap().contains("did you mean"),
        "{error}"
    );
    assert!(fixes(&mut client, uri, error).is_empty());
    assert_eq!(client.stop(), 0);
}
