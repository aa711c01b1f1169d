//! Go to definition, find references and rename, in one file and across imports.

use serde_json::{Value, json};

use super::Client;

/// A position request's parameters.
fn at(uri: &str, line: u32, character: u32) -> Value {
    json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}})
}

fn file_uri(path: &std::path::Path) -> String {
    format!("file://{}", path.display())
}

/// `(line, character)` of a range's start.
fn start(range: &Value) -> (u64, u64) {
    (
        range["start"]["line"].as_u64().unwrap(),
        range["start"]["character"].as_u64().unwrap(),
    )
}

const SHOP: &str = "machine \"Shop\"\n\
Context order { total<number>: 0; }\n\
Process checkout {\n\
  Task pay { prompt: \"Pay {{ order.total }}\"; }\n\
}\n\
start -> checkout.pay;\n\
pay -when: \"order.total > 10\"-> review;\n\
Task review { after: pay; }\n";

#[test]
fn definition_follows_edges_templates_conditions_and_values_to_the_declaration() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(dir.path());
    let uri = "untitled:shop";
    client.open(uri, SHOP);
    client.diagnostics(uri);
    let mut definition = |line, character| {
        let answer = client.request("textDocument/definition", at(uri, line, character));
        let result = answer["result"].clone();
        assert_eq!(result["uri"], uri, "{answer}");
        start(&result["range"])
    };
    // `checkout.pay` in an edge: each part goes to its own node.
    assert_eq!(definition(5, 10), (2, 8));
    assert_eq!(definition(5, 19), (3, 5));
    // The template `{{ order.total }}`: the context, then its field.
    assert_eq!(definition(3, 29), (1, 8));
    assert_eq!(definition(3, 35), (1, 16));
    // A condition names the field without braces.
    assert_eq!(definition(6, 18), (1, 16));
    // An attribute's value naming a node.
    assert_eq!(definition(7, 22), (3, 5));
    // Not on a name: nothing.
    let nothing = client.request("textDocument/definition", at(uri, 0, 1));
    assert_eq!(nothing["result"], Value::Null, "{nothing}");
    assert_eq!(client.stop(), 0);
}

#[test]
fn references_list_every_use_with_or_without_the_declaration() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(dir.path());
    let uri = "untitled:shop";
    client.open(uri, SHOP);
    client.diagnostics(uri);
    let mut references = |line, character, declaration: bool| {
        let mut params = at(uri, line, character);
        params["context"] = json!({"includeDeclaration": declaration});
        let answer = client.request("textDocument/references", params);
        let mut found: Vec<(u64, u64)> = answer["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"))
            .iter()
            .map(|l| start(&l["range"]))
            .collect();
        found.sort();
        found
    };
    // `pay`: declared on line 4 (a `\` continuation drops the indentation), used qualified, as
    // an edge source and as a value.
    assert_eq!(references(3, 8, true), [(3, 5), (5, 18), (6, 0), (7, 21)]);
    assert_eq!(references(5, 19, false), [(5, 18), (6, 0), (7, 21)]);
    // The field `total`: its declaration, the template and the condition.
    assert_eq!(references(1, 17, true), [(1, 16), (3, 33), (6, 18)]);
    assert_eq!(client.stop(), 0);
}

#[test]
fn rename_edits_the_file_and_the_files_that_import_it() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib.dy");
    let main = dir.path().join("main.dy");
    let aliased = dir.path().join("aliased.dy");
    let lib_text = "Process flows {\n  Task review { score<number>: 1; }\n  review -> done;\n}\n";
    std::fs::write(&lib, lib_text).unwrap();
    // Open in the editor: uses the imported name.
    let main_text = "import { flows.review } from \"./lib\"\nstart -> review;\nreview -when: \"review.score > 0\"-> finish;\n";
    std::fs::write(&main, main_text).unwrap();
    // Only on disk: an alias keeps its own name.
    std::fs::write(
        &aliased,
        "import { flows.review as check } from \"./lib.dy\"\nstart -> check;\n",
    )
    .unwrap();
    let mut client = Client::start(dir.path());
    let (lib_uri, main_uri, aliased_uri) = (file_uri(&lib), file_uri(&main), file_uri(&aliased));
    client.open(&lib_uri, lib_text);
    client.diagnostics(&lib_uri);
    client.open(&main_uri, main_text);
    client.diagnostics(&main_uri);
    // The import's path goes to the file; an imported name to its declaration there.
    let path = client.request("textDocument/definition", at(&main_uri, 0, 33));
    assert_eq!(path["result"]["uri"], lib_uri.as_str(), "{path}");
    let used = client.request("textDocument/definition", at(&main_uri, 1, 11));
    assert_eq!(used["result"]["uri"], lib_uri.as_str(), "{used}");
    assert_eq!(start(&used["result"]["range"]), (1, 7));
    // Prepare: the name under the cursor.
    let prepared = client.request("textDocument/prepareRename", at(&main_uri, 1, 11));
    assert_eq!(start(&prepared["result"]), (1, 9), "{prepared}");
    // Renaming from a use in the importer renames at home and in every importer.
    let mut params = at(&main_uri, 1, 11);
    params["newName"] = json!("audit");
    let answer = client.request("textDocument/rename", params);
    let changes = &answer["result"]["changes"];
    let edited = |uri: &str, original: &str| -> String {
        let mut edits: Vec<(usize, usize, String)> = changes[uri]
            .as_array()
            .unwrap_or_else(|| panic!("no edits for {uri}: {answer}"))
            .iter()
            .map(|e| {
                let offset = |p: &Value| {
                    let line = p["line"].as_u64().unwrap() as usize;
                    let character = p["character"].as_u64().unwrap() as usize;
                    original
                        .split_inclusive('\n')
                        .take(line)
                        .map(str::len)
                        .sum::<usize>()
                        + character
                };
                (
                    offset(&e["range"]["start"]),
                    offset(&e["range"]["end"]),
                    e["newText"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        edits.sort();
        let mut text = original.to_string();
        for (s, e, new) in edits.into_iter().rev() {
            text.replace_range(s..e, &new);
        }
        text
    };
    assert_eq!(
        edited(&lib_uri, lib_text),
        "Process flows {\n  Task audit { score<number>: 1; }\n  audit -> done;\n}\n"
    );
    assert_eq!(
        edited(&main_uri, main_text),
        "import { flows.audit } from \"./lib\"\nstart -> audit;\naudit -when: \"audit.score > 0\"-> finish;\n"
    );
    let aliased_text = std::fs::read_to_string(&aliased).unwrap();
    assert_eq!(
        edited(&aliased_uri, &aliased_text),
        "import { flows.audit as check } from \"./lib.dy\"\nstart -> check;\n"
    );
    // An attribute renamed in its file reaches the importer's condition.
    let mut params = at(&lib_uri, 1, 17);
    params["newName"] = json!("points");
    let answer = client.request("textDocument/rename", params);
    let main_edits = answer["result"]["changes"][main_uri.as_str()]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(main_edits, 1, "{answer}");
    // A new name that is not a name is refused with a reason; the server goes on.
    let mut params = at(&lib_uri, 1, 8);
    params["newName"] = json!("two words");
    let refused = client.request("textDocument/rename", params);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a valid name")
    );
    assert_eq!(client.stop(), 0);
}

#[test]
fn a_block_still_being_typed_keeps_its_names() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(dir.path());
    let uri = "untitled:typing";
    // The block of `checkout` is not closed yet.
    let text = "Process checkout {\n  Task pay;\n  start -> pay";
    client.open(uri, text);
    client.diagnostics(uri);
    let answer = client.request("textDocument/definition", at(uri, 2, 12));
    assert_eq!(start(&answer["result"]["range"]), (1, 7), "{answer}");
    let hover = client.request("textDocument/hover", at(uri, 2, 12));
    let shown = hover["result"]["contents"]["value"]
        .as_str()
        .unwrap_or_default();
    assert!(shown.starts_with("**Task** `checkout.pay`"), "{hover}");
    assert_eq!(client.stop(), 0);
}
