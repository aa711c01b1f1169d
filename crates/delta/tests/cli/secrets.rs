//! The API key in use is never written or printed, even when the model or a tool repeats it.

use std::path::Path;

use serde_json::json;
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use crate::support::{KEY, Output, Sandbox, agent_yaml};

/// Every file under `dir` (recursively) that holds `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    let mut hits = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return hits;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            hits.extend(files_holding(&path, needle));
        } else if String::from_utf8_lossy(&std::fs::read(&path).unwrap()).contains(needle) {
            hits.push(path.display().to_string());
        }
    }
    hits
}

fn assert_clean(out: &Output, what: &str) {
    assert!(
        !out.stdout.contains(KEY),
        "{what}: the key is on stdout:\n{}",
        out.stdout
    );
    assert!(
        !out.stderr.contains(KEY),
        "{what}: the key is on stderr:\n{}",
        out.stderr
    );
}

#[test]
fn a_key_echoed_by_the_model_a_tool_or_the_user_is_redacted_everywhere() {
    // `shout` hands its value to a shell script as "$1" and prints it on stderr.
    let tools = "  - name: echo\n    exec: \"echo ${message}\"\n  - name: shout\n    shell: \"echo ${text} >&2; exit 3\"\n  - name: save\n    exec: \"tee ${path}\"\n    stdin: content\n";
    let hooks = "lifecycle_hooks:\n  pre_llm_req:\n    command: [\"true\"]\n  post_llm_resp:\n    command: [\"true\"]\n  pre_tool_exec:\n    command: [\"true\"]\n  post_tool_exec:\n    command: [\"true\"]\n  on_run_end:\n    command: [\"true\"]\n";
    let sb = Sandbox::new(&format!("{}{hooks}", agent_yaml(tools)));
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new("c1", "echo", json!({"message": format!("key={KEY}")})),
            ToolCallSpec::new("c2", "shout", json!({ "text": KEY })),
            ToolCallSpec::new(
                "c2b",
                "save",
                json!({"path": "../outside.txt", "content": KEY}),
            ),
        ])
        .with_text(&format!("Let me print {KEY} for you.")),
        Reply::tool_call(
            "c3",
            "ask_human",
            json!({"prompt": format!("Is {KEY} the right key?")}),
        ),
        Reply::text(&format!("Done. The key was {KEY}.")),
        Reply::text(KEY),
    ]);
    let rec = sb.path("rec");
    let rec_arg = rec.display().to_string();

    let first = sb.run(
        Some(&server),
        &format!("Use the key {KEY} to say hello"),
        &["-v", "--record", &rec_arg],
    );
    assert_eq!(first.code, 101, "{}", first.stderr);
    assert_clean(&first, "run (text)");
    let request = std::fs::read_to_string(sb.run_dir().join("interaction/request.json")).unwrap();
    assert!(request.contains("[REDACTED]"), "{request}");

    let mut cont = sb.delta(Some(&server));
    cont.args(["continue", "-w", "ws", "-v", "--format", "json"])
        .args(["--record", &rec_arg, "-m", &format!("yes, {KEY}")]);
    let second = crate::support::output(cont);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_clean(&second, "continue (json)");
    let result: serde_json::Value = serde_json::from_str(&second.stdout).unwrap();
    assert_eq!(result["result"], "Done. The key was [REDACTED].");

    let mut again = sb.delta(Some(&server));
    again.args(["continue", "-w", "ws", "--format", "raw", "-m", "again"]);
    let third = crate::support::output(again);
    assert_eq!(third.code, 0, "{}", third.stderr);
    assert_clean(&third, "continue (raw)");
    assert_eq!(third.stdout, "[REDACTED]\n");

    // What is executed is not changed: the tool got the real value (written outside the workspace).
    assert_eq!(
        std::fs::read_to_string(sb.path("outside.txt")).unwrap(),
        KEY
    );
    // The model saw the tools' output, without the key.
    let thought = &sb.events("THOUGHT")[0]["payload"];
    assert_eq!(thought["content"], "Let me print [REDACTED] for you.");
    let results = sb.events("ACTION_RESULT");
    assert!(
        results[0]["payload"]["observation_content"]
            .as_str()
            .unwrap()
            .contains("key=[REDACTED]"),
        "{results:?}"
    );
    assert_eq!(results[1]["payload"]["status"], "FAILED", "shout exits 3");

    let mut leaks = files_holding(&sb.ws(), KEY);
    leaks.extend(files_holding(&rec, KEY));
    assert!(leaks.is_empty(), "the key was written to {leaks:#?}");
    assert!(
        std::fs::read_dir(&rec).unwrap().count() >= 3,
        "the exchanges were recorded"
    );
}

#[test]
fn a_key_the_model_uses_as_a_call_id_a_tool_name_or_its_model_name_is_redacted_too() {
    let sb = Sandbox::new(&agent_yaml(
        "  - name: echo\n    exec: \"echo ${message}\"\n",
    ));
    let answer = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": KEY,
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [
                {"id": KEY, "type": "function",
                 "function": {"name": "echo", "arguments": "{\"message\":\"hi\"}"}},
                {"id": format!("call-{KEY}"), "type": "function",
                 "function": {"name": KEY, "arguments": "{}"}}
            ]}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    });
    let server = ScriptedServer::start([
        Reply::raw(200, "application/json", &answer.to_string()),
        Reply::text("done"),
    ]);
    let out = sb.run(Some(&server), "go", &["--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_clean(&out, "run");
    let leaks = files_holding(&sb.ws(), KEY);
    assert!(leaks.is_empty(), "the key was written to {leaks:#?}");
    let exec_dirs = crate::support::io_record_ids(&sb.run_dir().join("io/tool_executions"));
    assert!(
        exec_dirs.iter().all(|d| !d.contains(&KEY[3..])),
        "{exec_dirs:?}"
    );
}
