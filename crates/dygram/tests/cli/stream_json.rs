//! `dygram execute --format stream-json`: every line of a run with tool calls (one failing) and a
//! model server that fails is checked against the schema of docs/dygram/stream-json.md, and the
//! last line carries the result object `--format json` prints.

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use super::answers::ORDER;
use super::support::{Dir, Out, repo_root};

/// What a field holds.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Str,
    Num,
    Bool,
    Strs,
    Obj,
    Any,
}

/// The fields each type of line has besides `type` and `time` (docs/dygram/stream-json.md).
fn schema(kind: &str) -> Option<&'static [(&'static str, Kind)]> {
    use Kind::*;
    Some(match kind {
        "run_started" => &[("machine", Str)],
        "transition" => &[
            ("path", Str),
            ("from", Str),
            ("to", Str),
            ("transition", Str),
        ],
        "model_request" => &[
            ("path", Str),
            ("node", Str),
            ("model", Str),
            ("tools", Strs),
            ("messages", Num),
        ],
        "model_text" => &[("path", Str), ("text", Str)],
        "tool_started" => &[("path", Str), ("id", Str), ("name", Str), ("input", Any)],
        "tool_finished" => &[
            ("path", Str),
            ("id", Str),
            ("name", Str),
            ("input", Any),
            ("isError", Bool),
            ("result", Str),
        ],
        "spawned" => &[("path", Str), ("node", Str), ("parent", Str)],
        "completed" => &[("path", Str), ("node", Str)],
        "failed" => &[("path", Str), ("node", Str), ("error", Str)],
        "waiting" => &[("path", Str), ("node", Str), ("reason", Str)],
        "compaction" => &[
            ("path", Str),
            ("node", Str),
            ("strategy", Str),
            ("answers", Num),
            ("window", Num),
            ("tokensBefore", Num),
            ("tokensAfter", Num),
        ],
        "run_finished" => &[("exitCode", Num), ("result", Obj)],
        _ => return None,
    })
}

fn holds(kind: Kind, v: &Value) -> bool {
    match kind {
        Kind::Str => v.is_string(),
        Kind::Num => v.is_number(),
        Kind::Bool => v.is_boolean(),
        Kind::Strs => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
        Kind::Obj => v.is_object(),
        Kind::Any => !v.is_null(),
    }
}

/// Every line of stdout, each checked against the schema; stdout holds nothing else.
fn lines(out: &Out) -> Vec<Value> {
    assert!(out.stdout.ends_with('\n'), "{out:?}");
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for line in &lines {
        let kind = line["type"]
            .as_str()
            .unwrap_or_else(|| panic!("no type: {line}"));
        let fields = schema(kind).unwrap_or_else(|| panic!("a type the schema lacks: {line}"));
        let time = line["time"]
            .as_str()
            .unwrap_or_else(|| panic!("no time: {line}"));
        assert!(time.parse::<jiff::Timestamp>().is_ok(), "{line}");
        for (name, kind) in fields {
            assert!(holds(*kind, &line[name]), "{name} is not {kind:?}: {line}");
        }
        let known = fields.len() + 2;
        assert_eq!(
            line.as_object().unwrap().len(),
            known,
            "unlisted fields: {line}"
        );
    }
    // A run that could not start has its last line only.
    if lines.len() > 1 {
        assert_eq!(lines[0]["type"], "run_started", "{out:?}");
    }
    assert_eq!(lines.last().unwrap()["type"], "run_finished", "{out:?}");
    assert_eq!(
        lines.iter().filter(|l| l["type"] == "run_finished").count(),
        1
    );
    lines
}

fn types(lines: &[Value]) -> Vec<&str> {
    lines.iter().map(|l| l["type"].as_str().unwrap()).collect()
}

#[test]
fn every_line_of_a_run_with_tool_calls_and_a_failure_follows_the_schema() {
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new("c1", "launch_rockets", json!({"count": 3})),
            ToolCallSpec::new("c2", "write_order", json!({"data": {"total": 42}})),
        ])
        .with_text("Charging."),
        Reply::error(400, "no such model"),
    ]);
    let mut d = Dir::with_file("order.dy", ORDER);
    d.env("OPENAI_BASE_URL", &server.openai_base());
    let out = d.run(&[
        "e",
        "order.dy",
        "--provider",
        "openai",
        "--format",
        "stream-json",
    ]);
    assert_eq!(out.code, 1, "{out:?}");
    let lines = lines(&out);
    assert_eq!(
        types(&lines),
        [
            "run_started",
            "transition",
            "model_request",
            "model_text",
            "tool_started",
            "tool_finished",
            "tool_started",
            "tool_finished",
            "model_request",
            "failed",
            "run_finished"
        ],
        "{out:?}"
    );
    assert_eq!(lines[0]["machine"], "order.dy");
    assert_eq!(lines[3]["text"], "Charging.");
    assert_eq!(lines[5]["name"], "launch_rockets");
    assert_eq!(
        (&lines[4]["id"], &lines[5]["id"]),
        (&json!("c1"), &json!("c1"))
    );
    assert_eq!(lines[5]["isError"], true);
    assert_eq!(lines[7]["isError"], false);
    assert!(
        lines[9]["error"]
            .as_str()
            .unwrap()
            .contains("no such model")
    );
    let finished = &lines[10];
    assert_eq!(finished["exitCode"], 1);
    // The result object is the one --format json prints and the result file holds.
    let file = std::fs::read_to_string(d.path().join("generated/order-result.json")).unwrap();
    let file: Value = serde_json::from_str(&file).unwrap();
    assert_eq!(finished["result"], file);
    assert_eq!(file["status"], "error");
}

#[test]
fn a_compaction_is_a_line_of_its_own() {
    use super::context_window::{Counts, machine, model};
    let server = ScriptedServer::responding(model(std::sync::Arc::new(Counts::default())));
    let mut d = Dir::with_file("m.dy", &machine("", ""));
    d.env("OPENAI_BASE_URL", &server.openai_base());
    let run = ["e", "m.dy", "--provider", "openai", "--max-tokens", "256"];
    let out = d.run(&[&run[..], &["--format", "stream-json"]].concat());
    assert_eq!(out.code, 0, "{out:?}");
    let lines = lines(&out);
    let compacted: Vec<&Value> = lines.iter().filter(|l| l["type"] == "compaction").collect();
    assert!(!compacted.is_empty(), "{out:?}");
    assert_eq!(compacted[0]["node"], "work");
    assert_eq!(lines.last().unwrap()["result"]["status"], "complete");
}

#[test]
fn a_stream_that_cannot_start_still_ends_with_its_result_line() {
    let d = Dir::with_file("bad.dy", "machine \"x\"\nstart -> ;\n");
    for (args, kind, code) in [
        (&["e", "missing.dy"][..], "unreadable_input", 1),
        (&["e", "bad.dy"], "invalid_machine", 1),
        (&["e", "-i", "bad.dy"], "usage", 64),
    ] {
        let out = d.run(&[args, &["--format", "stream-json"]].concat());
        assert_eq!(out.code, code, "{out:?}");
        let lines = lines(&out);
        assert_eq!(types(&lines), ["run_finished"], "{out:?}");
        assert_eq!(lines[0]["exitCode"], code);
        assert_eq!(lines[0]["result"]["isError"], true);
        assert_eq!(lines[0]["result"]["kind"], kind, "{out:?}");
    }
}

#[test]
fn the_documented_table_names_exactly_the_types_the_schema_checks() {
    let doc = std::fs::read_to_string(repo_root().join("docs/dygram/stream-json.md")).unwrap();
    let documented: Vec<&str> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    assert!(documented.len() >= 12, "{documented:?}");
    for kind in &documented {
        assert!(
            schema(kind).is_some(),
            "{kind} is documented but not checked"
        );
    }
    for kind in ["run_started", "tool_started", "compaction", "run_finished"] {
        assert!(documented.contains(&kind), "{kind} is not documented");
    }
}
