//! The README's dygram section, as a newcomer follows it: its machine (`order.dy`, written by the
//! here-document in the README) runs end to end, turn by turn, in manual mode.

use serde_json::{Value, json};

use super::support::{Dir, repo_root};

/// The `### dygram` section of the README.
pub fn dygram_section() -> String {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let start = readme
        .find("### dygram")
        .expect("README has a ### dygram section");
    let rest = &readme[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_string()
}

/// The text a `cat > NAME <<'EOF'` here-document of the section writes.
pub fn heredoc(section: &str, name: &str) -> String {
    let opener = format!("cat > {name} <<'EOF'\n");
    let start = section
        .find(&opener)
        .unwrap_or_else(|| panic!("no here-document for {name} in the README"))
        + opener.len();
    let end = section[start..].find("\nEOF\n").unwrap() + start;
    format!("{}\n", &section[start..end])
}

fn order_dy() -> String {
    heredoc(&dygram_section(), "order.dy")
}

/// Tool names of the request waiting in `pending-request.json`.
fn pending_tools(d: &Dir, id: &str) -> Vec<String> {
    d.read_json(id, "pending-request.json")["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// The example answer printed under `EXAMPLE RESPONSE:`.
fn example_answer(stdout: &str) -> Value {
    let line = stdout
        .lines()
        .skip_while(|l| !l.starts_with("EXAMPLE RESPONSE:"))
        .nth(1)
        .unwrap_or_else(|| panic!("no example answer in\n{stdout}"));
    serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("{e}: {line}"))
}

#[test]
fn readme_order_flow_reaches_shipped_turn_by_turn() {
    let d = Dir::with_file("order.dy", &order_dy());
    let call = |stdin: &str| d.run_with_stdin(&["e", "-i", "order.dy", "--id", "o"], stdin);

    let out = call("");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("start --(default)--> charge"),
        "{out:?}"
    );

    // At `charge` the model may only write the order: the transition is closed (total is 0).
    let out = call("");
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(pending_tools(&d, "o"), ["write_order"]);

    let out = call(
        r#"{"response": "Charged.", "tools": [{"name": "write_order", "input": {"data": {"total": 42}}}]}"#,
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!out.stdout.contains("(failed)"), "{out:?}");

    // The write opened the transition: the next request of the same conversation offers it.
    let out = call("");
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(
        pending_tools(&d, "o"),
        ["transition_to_shipped", "write_order"]
    );
    assert_eq!(
        example_answer(&out.stdout)["tools"][0]["name"],
        "transition_to_shipped"
    );

    let out =
        call(r#"{"tools": [{"name": "transition_to_shipped", "input": {"reason": "paid"}}]}"#);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("charge --(agent_decision)--> shipped"),
        "{out:?}"
    );
    let out = call("");
    assert_eq!(out.code, 2, "{out:?}");
    let shown = d.run(&["exec", "show", "o", "--format", "json"]).json();
    assert_eq!(shown["status"], "complete");
    assert_eq!(shown["visitedNodes"], json!(["start", "charge", "shipped"]));
    assert_eq!(shown["contextState"]["order"]["total"], 42);
}

#[test]
fn manual_mode_example_answer_fits_the_tools_schema_and_failed_tools_are_marked() {
    let d = Dir::with_file("order.dy", &order_dy());
    let call = |stdin: &str| d.run_with_stdin(&["e", "-i", "order.dy", "--id", "o"], stdin);
    assert_eq!(call("").code, 0);
    let out = call("");
    assert_eq!(out.code, 3, "{out:?}");
    // Only `write_order` is offered: the example writes the order's declared fields under `data`.
    let example = example_answer(&out.stdout);
    assert_eq!(example["tools"][0]["name"], "write_order", "{example}");
    assert!(
        example["tools"][0]["input"]["data"]["total"].is_number(),
        "{example}"
    );

    // The example, piped back as it is, is a valid answer.
    let out = call(&example.to_string());
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("Tools: write_order\n"), "{out:?}");

    // A call with the wrong input fails, and the text output says so.
    assert_eq!(call("").code, 3);
    let out = call(r#"{"tools": [{"name": "write_order", "input": {"reason": "…"}}]}"#);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("write_order (failed)"), "{out:?}");
}
