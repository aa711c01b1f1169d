//! `dygram debug FILE`: the syntax tree as JSON, as the parser read it; with `-t` where each part
//! of it was written, with `-s` the source text, with `-d DIR` into `DIR/<name>-raw.json`.

use serde_json::Value;

use super::answers::ORDER;
use super::support::Dir;

/// Every object of `tree` that has a `$type`, depth first.
fn typed(tree: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    let mut stack = vec![tree];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(o) => {
                if o.contains_key("$type") {
                    out.push(v);
                }
                stack.extend(o.values());
            }
            Value::Array(a) => stack.extend(a),
            _ => {}
        }
    }
    out
}

#[test]
fn the_syntax_tree_is_printed_as_json() {
    let d = Dir::with_file("order.dy", ORDER);
    let out = d.run(&["debug", "order.dy"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stderr, "", "{out:?}");
    let tree = out.json();
    assert_eq!(tree["$type"], "Program", "{tree}");
    assert_eq!(tree["header"]["title"], "Order flow", "{tree}");
    let nodes: Vec<&str> = typed(&tree)
        .into_iter()
        .filter(|v| v["$type"] == "Node")
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    for name in ["order", "charge", "shipped"] {
        assert!(nodes.contains(&name), "{nodes:?}");
    }
    // The chain, as written: its second segment carries the condition.
    let chain = typed(&tree)
        .into_iter()
        .find(|v| v["$type"] == "Edge" && v["sources"] == serde_json::json!(["start"]))
        .unwrap();
    let second = &chain["segments"][1];
    assert_eq!(second["targets"], serde_json::json!(["shipped"]), "{chain}");
    let pair = &second["labels"][0][0];
    assert_eq!(pair["$type"], "LabelPair", "{chain}");
    assert_eq!(pair["name"], "when", "{chain}");
    assert_eq!(pair["value"]["value"], "order.total > 0", "{chain}");
    // Nothing of -t or -s unless asked.
    assert!(!out.stdout.contains("$textRegion"), "{out:?}");
    assert!(!out.stdout.contains("$sourceText"), "{out:?}");

    // The alias.
    assert_eq!(d.run(&["d", "order.dy"]).json(), tree);
}

#[test]
fn text_regions_and_the_source_text_are_added_when_asked() {
    let source = "machine \"Tour\"\n// café\nTask visit \"Visit Évora\" { prompt: \"Go\"; }\nstart -> visit;\n";
    let d = Dir::with_file("tour.dy", source);
    let out = d.run(&["debug", "tour.dy", "-t", "-s"]);
    assert_eq!(out.code, 0, "{out:?}");
    let tree = out.json();
    assert_eq!(tree["$sourceText"], source);
    let utf16: Vec<u16> = source.encode_utf16().collect();
    let all = typed(&tree);
    assert!(all.len() > 5, "{tree}");
    for part in &all {
        let region = &part["$textRegion"];
        let (offset, end) = (
            region["offset"].as_u64().unwrap() as usize,
            region["end"].as_u64().unwrap() as usize,
        );
        assert_eq!(region["length"].as_u64().unwrap() as usize, end - offset);
        assert!(offset <= end && end <= utf16.len(), "{part}");
        let start_line = region["range"]["start"]["line"].as_u64().unwrap() as usize;
        let before = String::from_utf16(&utf16[..offset]).unwrap();
        assert_eq!(before.matches('\n').count(), start_line, "{part}");
    }
    // The node's region is its declaration, in UTF-16 units after the non-ASCII comment.
    let visit = all
        .iter()
        .find(|v| v["$type"] == "Node" && v["name"] == "visit")
        .unwrap();
    let region = &visit["$textRegion"];
    let (offset, end) = (
        region["offset"].as_u64().unwrap() as usize,
        region["end"].as_u64().unwrap() as usize,
    );
    let text = String::from_utf16(&utf16[offset..end]).unwrap();
    assert!(text.starts_with("Task visit \"Visit Évora\""), "{text}");
    assert_eq!(region["range"]["start"]["line"], 2);
    assert_eq!(region["range"]["start"]["character"], 0);
}

#[test]
fn a_destination_folder_gets_the_tree_as_name_raw_json() {
    let d = Dir::with_file("order.dy", ORDER);
    let out = d.run(&["debug", "order.dy", "-d", "out"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout.trim(), "out/order-raw.json", "{out:?}");
    let written = std::fs::read_to_string(d.path().join("out/order-raw.json")).unwrap();
    let printed = d.run(&["debug", "order.dy"]).json();
    assert_eq!(serde_json::from_str::<Value>(&written).unwrap(), printed);
}

#[test]
fn a_machine_with_errors_prints_them_and_no_tree() {
    let d = Dir::with_file("broken.dy", "Task a {\n  prompt: ;\n}\n");
    let out = d.run(&["debug", "broken.dy"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.stdout, "", "{out:?}");
    assert!(out.stderr.contains("broken.dy:2:"), "{out:?}");
    let help = d.run(&["debug", "--help"]);
    assert!(help.stdout.contains("--text-regions"), "{help:?}");
    assert!(help.stdout.contains("--source-text"), "{help:?}");
}

/// The whole tree of a small machine, with its text regions, as the command prints it.
#[test]
fn a_small_machine_s_tree() {
    let d = Dir::with_file(
        "small.dy",
        "machine \"M\"\nTask a @Critical { n<number>: 1; }\na -when: 'a.n > 0'; @auto-> b;\n",
    );
    let out = d.run(&["debug", "small.dy", "--text-regions"]);
    assert_eq!(out.code, 0, "{out:?}");
    insta::assert_snapshot!(out.stdout);
}
