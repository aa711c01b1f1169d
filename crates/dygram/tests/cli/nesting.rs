//! Deeply nested machines: every command refuses nesting past the documented limit with a
//! diagnostic at the file, line and column where it starts, instead of overflowing its stack, and
//! `batch --continue-on-error` goes on with the other files.

use super::support::Dir;

/// `n` blocks nested in one another: `n0 {` / `n1 {` / … / `}` …
fn blocks(n: usize) -> String {
    let mut s = String::from("machine \"deep\"\n");
    for i in 0..n {
        s.push_str(&format!("n{i} {{\n"));
    }
    for _ in 0..n {
        s.push_str("}\n");
    }
    s
}

/// A list value nested `n` deep.
fn lists(n: usize) -> String {
    format!(
        "machine \"deep\"\nstart {{ x: {}1{}; }}\n",
        "[".repeat(n),
        "]".repeat(n)
    )
}

/// An object value nested `n` deep.
fn objects(n: usize) -> String {
    format!(
        "machine \"deep\"\nstart {{ x: {}1{}; }}\n",
        "{ a: ".repeat(n),
        "; }".repeat(n)
    )
}

/// A type nested `n` deep.
fn types(n: usize) -> String {
    format!(
        "machine \"deep\"\nstart {{ x<{}string{}?>; }}\n",
        "Array<".repeat(n),
        ">".repeat(n)
    )
}

const GOOD: &str = "machine \"fine\"\nstart -> done;\nstate done;\n";

/// The call ended normally (no signal) with exit 1 and a nesting diagnostic at `file:line:col`.
fn assert_refused(out: &super::support::Out, file: &str, line_col: &str) {
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("nested more than 64 levels deep"),
        "{out:?}"
    );
    assert!(
        out.stderr.contains(&format!("{file}:{line_col}")),
        "{out:?}"
    );
}

#[test]
fn ten_thousand_and_a_hundred_thousand_nested_blocks_are_refused_with_a_diagnostic() {
    for n in [10_000, 100_000] {
        let d = Dir::with_file("deep.dy", &blocks(n));
        // The 65th block opens on line 66 (after the header), at `n64 {`: column 5.
        assert_refused(&d.run(&["pv", "deep.dy"]), "deep.dy", "66:5");
        assert_refused(&d.run(&["generate", "deep.dy"]), "deep.dy", "66:5");
        assert_refused(
            &d.run(&["g", "deep.dy", "-f", "json,dot,mermaid,dsl", "-d", "out"]),
            "deep.dy",
            "66:5",
        );
        assert_refused(&d.run(&["execute", "deep.dy"]), "deep.dy", "66:5");
    }
}

#[test]
fn deeply_nested_values_and_types_are_refused_with_a_diagnostic() {
    for n in [10_000, 100_000] {
        for (text, column) in [
            // Inside the block of `start`, the 64th list, object or type argument is the 65th level.
            (lists(n), "2:75"),
            (objects(n), "2:327"),
            (types(n), "2:394"),
        ] {
            let d = Dir::with_file("deep.dy", &text);
            let out = d.run(&["pv", "deep.dy"]);
            assert_eq!(out.code, 1, "{out:?}");
            assert!(
                out.stderr.contains("nested more than 64 levels deep"),
                "{out:?}"
            );
            assert!(out.stderr.contains(&format!("deep.dy:{column}")), "{out:?}");
            assert_eq!(d.run(&["generate", "deep.dy"]).code, 1);
        }
    }
}

#[test]
fn nesting_up_to_the_limit_works_everywhere() {
    let d = Dir::with_file("deep.dy", &blocks(64));
    let out = d.run(&["pv", "deep.dy"]);
    assert_eq!(out.code, 0, "{out:?}");
    let out = d.run(&["g", "deep.dy", "-f", "json,dot,mermaid,dsl", "-d", "out"]);
    assert_eq!(out.code, 0, "{out:?}");
    // The DSL written back reads again, as deep as it was.
    let out = d.run(&["pv", "out/deep.dy"]);
    assert_eq!(out.code, 0, "{out:?}");
    d.write("m/deep.dy", &blocks(64));
    // Inside `start { … }`: 63 more levels.
    d.write("m/lists.dy", &lists(63));
    d.write("m/objects.dy", &objects(63));
    d.write("m/types.dy", &types(63));
    let out = d.run(&["batch", "m/*.dy", "-d", "bout", "--json"]);
    let report = out.json();
    assert_eq!(report["failed"], 0, "{out:?}");
    assert_eq!(report["processed"], 4, "{out:?}");
}

#[test]
fn batch_reports_a_too_deep_file_and_continue_on_error_processes_the_others() {
    for n in [10_000, 100_000] {
        let d = Dir::new();
        d.write("m/a-good.dy", GOOD);
        d.write("m/b-deep.dy", &blocks(n));
        d.write("m/c-lists.dy", &lists(n));
        d.write("m/d-good.dy", GOOD);

        let out = d.run(&["batch", "m/*.dy", "-d", "out"]);
        assert_eq!(out.code, 1, "{out:?}");
        assert!(out.stderr.contains("m/b-deep.dy:66:5"), "{out:?}");

        let out = d.run(&[
            "batch",
            "m/*.dy",
            "-d",
            "out2",
            "--continue-on-error",
            "--json",
        ]);
        assert_eq!(out.code, 1, "{out:?}");
        let report = out.json();
        assert_eq!(report["processed"], 4, "{out:?}");
        assert_eq!(report["failed"], 2, "{out:?}");
        let ok: Vec<bool> = report["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["ok"].as_bool().unwrap())
            .collect();
        assert_eq!(ok, [true, false, false, true], "{out:?}");
        assert!(d.path().join("out2/a-good.json").is_file());
        assert!(d.path().join("out2/d-good.json").is_file());
    }
}

/// Canonical JSON whose nodes form one chain `n` deep through their `parent` fields.
fn chain_json(n: usize) -> String {
    let nodes: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            let mut node = serde_json::json!({"name": format!("n{i}"), "attributes": []});
            if i > 0 {
                node["parent"] = serde_json::json!(format!("n{}", i - 1));
            }
            node
        })
        .collect();
    serde_json::json!({"title": "deep", "attributes": [], "annotations": [], "nodes": nodes, "edges": []})
        .to_string()
}

#[test]
fn canonical_json_nested_too_deep_is_refused_before_any_output() {
    for n in [10_000, 100_000] {
        let d = Dir::with_file("deep.json", &chain_json(n));
        for args in [
            &["g", "deep.json", "-f", "dsl"][..],
            &["g", "deep.json", "-f", "json,dot,mermaid,dsl", "-d", "out"],
            &["execute", "deep.json"],
        ] {
            let out = d.run(args);
            assert_eq!(out.code, 1, "{args:?}: {out:?}");
            assert!(
                out.stderr
                    .contains(&format!("nodes nested {n} levels deep")),
                "{args:?}: {out:?}"
            );
        }
    }
    // Within the limit the JSON turns back into `.dy` that reads again.
    let d = Dir::with_file("ok.json", &chain_json(64));
    let out = d.run(&["g", "ok.json", "-f", "dsl", "-d", "out"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(d.run(&["pv", "out/ok.dy"]).code, 0);
}
