//! `delta show` (alias `log`): a run's transcript as text, JSON and an HTML page in a real browser.

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use crate::support::{Sandbox, agent_yaml, output};

const TOOLS: &str = "  - name: echo\n    exec: \"echo ${message}\"\n  - name: fail\n    exec: \"sh -c 'echo broken >&2; exit 3'\"\n";

/// A run that calls a tool that works and one that fails, then asks a question (and waits).
fn waiting_run() -> (Sandbox, ScriptedServer) {
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new("c1", "echo", json!({"message": "hello <b>world</b>"})),
            ToolCallSpec::new("c2", "fail", json!({})),
        ])
        .with_text("Let me look.")
        .usage(120, 30),
        Reply::tool_call("c3", "ask_human", json!({"prompt": "Which colour?"})).usage(200, 12),
    ]);
    let sb = Sandbox::new(&agent_yaml(TOOLS));
    let out = sb.run(Some(&server), "Paint the fence", &[]);
    assert_eq!(out.code, 101, "{}", out.stderr);
    (sb, server)
}

fn show(sb: &Sandbox, args: &[&str]) -> String {
    let mut cmd = sb.delta(None);
    cmd.args(["show", "-w", "ws"]).args(args);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout
}

/// `text` with every duration (`12 ms`) replaced by `[N] ms`: they differ from run to run.
fn without_durations(text: &str) -> String {
    let mut out = String::new();
    let mut digits = String::new();
    for (i, c) in text.char_indices() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        if !digits.is_empty() {
            let unit = text[i..].starts_with(" ms");
            out.push_str(if unit { "[N]" } else { &digits });
            digits.clear();
        }
        out.push(c);
    }
    out + &digits
}

#[test]
fn a_waiting_run_shows_its_calls_their_outcomes_and_the_question() {
    let (sb, _server) = waiting_run();
    let text = without_durations(&sb.scrub(&show(&sb, &[])));
    insta::assert_snapshot!(text);
    // `log` is the same command.
    let mut cmd = sb.delta(None);
    cmd.args(["log", "-w", "ws"]);
    assert_eq!(without_durations(&sb.scrub(&output(cmd).stdout)), text);
}

/// [`waiting_run`], answered: the run completes.
fn completed_run() -> Sandbox {
    let (sb, server) = waiting_run();
    server.push(Reply::text("Blue it is.").usage(250, 5));
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws", "-m", "blue"]);
    assert_eq!(output(cmd).code, 0);
    sb
}

#[test]
fn the_json_transcript_has_every_call_with_its_exit_code_and_the_totals() {
    let sb = completed_run();
    let t: Value = serde_json::from_str(&show(&sb, &["--format", "json"])).unwrap();
    assert_eq!(t["status"], "COMPLETED");
    assert_eq!(t["final_answer"], "Blue it is.");
    assert_eq!(t["pending_question"], Value::Null);
    assert_eq!(t["usage"]["input_tokens"], 570);
    assert_eq!(t["usage"]["llm_calls"], 3);
    let tools: Vec<&Value> = t["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "tool")
        .collect();
    let summary: Vec<(String, Value, Value)> = tools
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["status"].clone(),
                t["exit_code"].clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("echo".to_string(), json!("SUCCESS"), json!(0)),
            ("fail".to_string(), json!("FAILED"), json!(3)),
            ("ask_human".to_string(), json!("SUCCESS"), json!(0)),
        ]
    );
    assert!(tools[1]["output"].as_str().unwrap().contains("broken"));
    let record = tools[0]["record"].as_str().unwrap();
    assert!(
        record.contains("io/tool_executions/pack-") && record.ends_with(".jsonl"),
        "{record}"
    );
    // The pack holds many records: this one's id says which.
    assert_eq!(tools[0]["record_id"], "c1");
    // The answer is the question's result.
    assert!(
        tools[2]["output"].as_str().unwrap().contains("blue"),
        "{:#}",
        tools[2]
    );
}

#[test]
fn a_failed_request_is_in_the_transcript_with_the_servers_message() {
    let server = ScriptedServer::start([Reply::error(400, "the model is unwell")]);
    let sb = Sandbox::new(&agent_yaml(TOOLS));
    let out = sb.run(Some(&server), "Try", &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let t: Value = serde_json::from_str(&show(&sb, &["--format", "json"])).unwrap();
    assert_eq!(t["status"], "FAILED");
    let failed = |t: &Value| -> Vec<Value> {
        t["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "failed_request")
            .map(|e| e["http_status"].clone())
            .collect()
    };
    assert_eq!(failed(&t), [json!(400)], "{t:#}");
    let failed_entry = t["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "failed_request")
        .unwrap();
    assert!(
        failed_entry["message"]
            .as_str()
            .unwrap()
            .contains("the model is unwell")
    );
    let text = show(&sb, &[]);
    assert!(text.contains("model request failed"), "{text}");
    assert!(text.contains(": FAILED"), "{text}");
    // The same run with its records as runs made before the packs kept them.
    for layout in [Earlier::Files, Earlier::Folders] {
        to_older_layout(&sb.run_dir(), layout);
        let before: Value = serde_json::from_str(&show(&sb, &["--format", "json"])).unwrap();
        assert_eq!(failed(&before), [json!(400)], "{before:#}");
    }
}

#[test]
fn unknown_runs_and_workspaces_are_errors_with_a_hint() {
    let sb = Sandbox::new(&agent_yaml(TOOLS));
    let mut cmd = sb.delta(None);
    cmd.args(["show", "-w", "ws"]);
    let out = output(cmd);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("No .delta directory"), "{}", out.stderr);
    let (sb, _server) = waiting_run();
    let mut cmd = sb.delta(None);
    cmd.args(["show", "-w", "ws", "--run-id", "20990101_000000_abcdef"]);
    let out = output(cmd);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("delta list-runs"), "{}", out.stderr);
    let mut cmd = sb.delta(None);
    cmd.args(["show", "-w", "ws", "--run-id", "../escape"]);
    assert_eq!(output(cmd).code, 64);
}

#[test]
fn the_html_page_holds_the_tools_outputs_and_status_and_asks_the_network_for_nothing() {
    let (sb, _server) = waiting_run();
    let page = sb.path("run.html");
    std::fs::write(&page, show(&sb, &["--format", "html"])).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("<b>world</b>"),
        "model and tool text is escaped"
    );
    let Some(browser) = testkit::browser::browser() else {
        return;
    };
    let loaded = browser.load(&page);
    assert_eq!(loaded.requests, Vec::<String>::new());
    for needle in [
        "Tool echo",
        "Tool fail",
        "Tool ask_human",
        "hello &lt;b&gt;world&lt;/b&gt;",
        "broken",
        "exit 3",
        "WAITING_FOR_INPUT",
        "Which colour?",
        "Let me look.",
    ] {
        assert!(
            loaded.dom.contains(needle),
            "{needle} is not in the page:\n{}",
            loaded.dom
        );
    }
    if let Some(dir) = testkit::browser::artifacts_dir() {
        browser.screenshot(&page, &dir.join("delta-show.png"), 1000, 1400);
    }
}

/// How runs made before the packs kept their `io/` records.
#[derive(Clone, Copy)]
enum Earlier {
    /// A file per call, `<id>.json`.
    Files,
    /// A folder per call: `request.json`, `response.json` or `.txt`, `metadata.json`;
    /// `command.txt`, `stdout.log`, `stderr.log`, `exit_code.txt`, `duration_ms.txt`.
    Folders,
}

/// The `io/` records of the `io/` folder `dir`, by id, read and removed (packs and files alike).
fn take_records(dir: &std::path::Path) -> Vec<(String, Value)> {
    let ids = crate::support::io_record_ids(dir);
    let records = ids
        .into_iter()
        .map(|id| {
            let record = crate::support::io_record(dir, &id);
            (id, record)
        })
        .collect();
    for entry in std::fs::read_dir(dir).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    records
}

/// A run's `io/` records rewritten the way runs made before the packs wrote them.
fn to_older_layout(run: &std::path::Path, layout: Earlier) {
    let invocations = run.join("io/invocations");
    for (id, record) in take_records(&invocations) {
        if let Earlier::Files = layout {
            std::fs::write(invocations.join(format!("{id}.json")), record.to_string()).unwrap();
            continue;
        }
        let dir = invocations.join(&id);
        std::fs::create_dir_all(&dir).unwrap();
        for (key, file) in [("metadata", "metadata.json"), ("request", "request.json")] {
            std::fs::write(dir.join(file), record[key].to_string()).unwrap();
        }
        match &record["response"] {
            Value::Null => {}
            Value::String(text) => std::fs::write(dir.join("response.txt"), text).unwrap(),
            other => std::fs::write(dir.join("response.json"), other.to_string()).unwrap(),
        }
    }
    let tools = run.join("io/tool_executions");
    for (id, record) in take_records(&tools) {
        if let Earlier::Files = layout {
            // The head on the first line, as that layout wrote it.
            let mut head = serde_json::Map::new();
            let mut rest = serde_json::Map::new();
            for (key, value) in record.as_object().unwrap() {
                let into = match key.as_str() {
                    "exit_code" | "duration_ms" | "command" => &mut head,
                    _ => &mut rest,
                };
                into.insert(key.clone(), value.clone());
            }
            let head = Value::Object(head).to_string();
            let rest = Value::Object(rest).to_string();
            let text = format!("{},\n{}", head.strip_suffix('}').unwrap(), &rest[1..]);
            std::fs::write(tools.join(format!("{id}.json")), text).unwrap();
            continue;
        }
        let dir = tools.join(&id);
        std::fs::create_dir_all(&dir).unwrap();
        let text = |key: &str| match &record[key] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        for (key, file) in [
            ("command", "command.txt"),
            ("stdout", "stdout.log"),
            ("stderr", "stderr.log"),
            ("exit_code", "exit_code.txt"),
            ("duration_ms", "duration_ms.txt"),
        ] {
            std::fs::write(dir.join(file), text(key)).unwrap();
        }
    }
}

#[test]
fn runs_made_before_the_packs_show_the_same() {
    let sb = completed_run();
    let now: Value = serde_json::from_str(&show(&sb, &["--format", "json"])).unwrap();
    let calls = |t: &Value| -> Vec<(Value, Value, Value)> {
        t["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "tool" || e["kind"] == "model")
            .map(|e| {
                (
                    e["exit_code"].clone(),
                    e["duration_ms"].clone(),
                    e["output"].clone(),
                )
            })
            .collect()
    };
    // The model's calls carry their duration from the records' metadata, in every layout.
    assert!(calls(&now).iter().any(|(_, ms, _)| ms.is_u64()), "{now:#}");
    let records = |t: &Value| -> Vec<String> {
        t["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["record"].as_str().map(str::to_string))
            .collect()
    };
    assert!(!records(&now).is_empty());
    assert!(
        records(&now).iter().all(|r| r.ends_with(".jsonl")),
        "{now:#}"
    );
    for (layout, suffix) in [(Earlier::Files, Some(".json")), (Earlier::Folders, None)] {
        to_older_layout(&sb.run_dir(), layout);
        let before: Value = serde_json::from_str(&show(&sb, &["--format", "json"])).unwrap();
        assert_eq!(calls(&before), calls(&now));
        assert_eq!(before["usage"], now["usage"]);
        assert_eq!(records(&now).len(), records(&before).len());
        for record in records(&before) {
            let path = std::path::Path::new(&record);
            match suffix {
                Some(suffix) => assert!(record.ends_with(suffix), "{before:#}"),
                None => assert!(path.is_dir(), "{before:#}"),
            }
        }
    }
}

#[test]
fn one_record_is_printed_whole_whichever_way_the_run_keeps_it() {
    let sb = completed_run();
    let record = |sb: &Sandbox, id: &str| -> Value {
        serde_json::from_str(&show(sb, &["--record", id])).unwrap()
    };
    let c1 = record(&sb, "c1");
    assert_eq!(c1["id"], "c1");
    assert_eq!(c1["exit_code"], 0);
    assert_eq!(c1["stdout"], "hello <b>world</b>\n");
    let c2 = record(&sb, "c2");
    assert_eq!(
        (c2["exit_code"].clone(), c2["stderr"].clone()),
        (json!(3), json!("broken\n"))
    );
    // A model call's, by the id its THOUGHT names.
    let thought = &sb.events("THOUGHT")[0]["payload"];
    let invocation = thought["llm_invocation_ref"].as_str().unwrap();
    let call = record(&sb, invocation);
    assert_eq!(call["metadata"]["status"], "SUCCESS");
    assert_eq!(
        call["request"]["messages"][1]["content"], "Paint the fence",
        "{call:#}"
    );
    for layout in [Earlier::Files, Earlier::Folders] {
        to_older_layout(&sb.run_dir(), layout);
        let before = record(&sb, "c1");
        assert_eq!(before["stdout"], c1["stdout"]);
        assert_eq!(before["exit_code"], 0);
        assert_eq!(record(&sb, invocation)["metadata"], call["metadata"]);
    }
    // Not a record, and not a name: errors that say so, nothing printed.
    for (id, code, says) in [
        ("c9", 1, "no record c9"),
        ("../journal", 64, "not a record id"),
    ] {
        let mut cmd = sb.delta(None);
        cmd.args(["show", "-w", "ws", "--record", id]);
        let out = output(cmd);
        assert_eq!(out.code, code, "{}", out.stderr);
        assert!(out.stderr.contains(says), "{}", out.stderr);
        assert_eq!(out.stdout, "");
    }
}

/// `delta show -w ws --record ID`: its exit code and output.
fn show_record(sb: &Sandbox, id: &str) -> crate::support::Output {
    let mut cmd = sb.delta(None);
    cmd.args(["show", "-w", "ws", "--record", id]);
    output(cmd)
}

/// The index of the pack of `dir` (a folder of `io/`) with the entries of `a` and `b` pointing at
/// each other's lines, as an index left by another pack of the same name would.
fn swap_in_index(dir: &std::path::Path, a: &str, b: &str) {
    let index = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "index"))
        .unwrap();
    let mut lines: Vec<Value> = crate::support::read_jsonl(&index);
    let at = |lines: &[Value], id: &str| lines.iter().position(|l| l["id"] == id).unwrap();
    let (i, j) = (at(&lines, a), at(&lines, b));
    for key in ["at", "len"] {
        let held = lines[i][key].clone();
        lines[i][key] = lines[j][key].clone();
        lines[j][key] = held;
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&index, text).unwrap();
}

#[test]
fn a_record_is_found_by_its_exact_id_only() {
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new("c10", "echo", json!({"message": "ten"})),
            ToolCallSpec::new("c1", "echo", json!({"message": "one"})),
        ]),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(&agent_yaml(TOOLS));
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 0);
    let stdout_of = |id: &str| -> Value {
        let out = show_record(&sb, id);
        assert_eq!(out.code, 0, "{id}: {}", out.stderr);
        serde_json::from_str::<Value>(&out.stdout).unwrap()["stdout"].clone()
    };
    let missing = |id: &str| {
        let out = show_record(&sb, id);
        assert_eq!(out.code, 1, "{id}: {}", out.stdout);
        assert!(
            out.stderr.contains(&format!("no record {id}")),
            "{}",
            out.stderr
        );
        assert_eq!(out.stdout, "");
    };
    assert_eq!(stdout_of("c1"), "one\n");
    assert_eq!(stdout_of("c10"), "ten\n");
    for id in ["c", "C1", "c1 ", "c10.json"] {
        missing(id);
    }
    // An index whose entry names another record's line: that record is not shown as this one.
    let tools = sb.run_dir().join("io/tool_executions");
    swap_in_index(&tools, "c1", "c10");
    for id in ["c1", "c10"] {
        let out = show_record(&sb, id);
        assert_ne!(out.code, 0, "{id}: {}", out.stdout);
        assert_eq!(out.stdout, "");
        assert!(
            out.stderr.contains(&format!("record {id} at byte"))
                && out.stderr.contains("another record's line"),
            "{}",
            out.stderr
        );
    }
    swap_in_index(&tools, "c1", "c10");
    // A file per call: the same.
    to_older_layout(&sb.run_dir(), Earlier::Files);
    assert_eq!(stdout_of("c1"), "one\n");
    assert_eq!(stdout_of("c10"), "ten\n");
    for id in ["c", "c1.json", "c10.json"] {
        missing(id);
    }
}
