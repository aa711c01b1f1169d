//! `dygram mcp` driven by the official MCP clients: the Python SDK (over stdio and streamable HTTP)
//! and the MCP Inspector's CLI, through the example machine to its end. Both come from
//! `scripts/install-mcp-servers`; without them these tests say SKIPPED.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use super::support::{Dir, bin, copy_dir, repo_root};

/// A folder holding the examples (`review.dy` and its recordings).
fn examples() -> Dir {
    let d = Dir::new();
    copy_dir(&repo_root().join("examples/dygram"), d.path());
    d
}

/// Steps an execution of `review.dy` from its recordings to its end, then shows it.
fn review_script() -> Value {
    json!([
        {"tool": "execute", "arguments": {"file": "review.dy", "playback": "recordings/review"}, "carry": {"id": "report/id"}},
        {"tool": "execute", "arguments": {"file": "review.dy"}, "until": {"path": "report/status", "in": ["complete", "failed"]}},
        {"tool": "show", "arguments": {}},
        {"tool": "validate", "arguments": {"file": "review.dy"}},
    ])
}

/// Runs the official Python client on `target` with `script` in folder `d`: what it printed.
fn python_client(python: &Path, d: &Dir, mode: &str, target: &str, script: &Value) -> Value {
    let out = Command::new(python)
        .arg(repo_root().join("tests/mcp-clients/official_client.py"))
        .args([mode, target, &script.to_string()])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What the client saw matches the command line: the execution ended, `exec show` prints the
/// same snapshot, and the same machine stepped by `execute -i` alone ends in the same context.
fn assert_matches_the_command_line(d: &Dir, seen: &Value) {
    let steps = seen["steps"].as_array().unwrap();
    let report = &steps[1]["result"]["report"];
    assert_eq!(report["status"], "complete", "{report}");
    let id = report["id"].as_str().unwrap();
    let shown = &steps[2]["result"];
    assert_eq!(
        *shown,
        d.run(&["exec", "show", id, "--format", "json"]).json()
    );
    assert_eq!(steps[3]["result"]["valid"], true);

    let alone = examples();
    let mut last = Value::Null;
    for _ in 0..20 {
        let out = alone.run(&[
            "execute",
            "-i",
            "review.dy",
            "--playback",
            "recordings/review",
            "--format",
            "json",
        ]);
        last = out.json();
        if last["status"] == "complete" {
            break;
        }
    }
    let alone_id = last["id"].as_str().unwrap().to_string();
    let alone_shown = alone
        .run(&["exec", "show", &alone_id, "--format", "json"])
        .json();
    assert_eq!(shown["context"], alone_shown["context"]);
    assert_eq!(shown["turns"], alone_shown["turns"]);
}

#[test]
fn the_python_sdk_drives_an_execution_to_its_end_over_stdio_and_http() {
    let Some(servers) = testkit::needs::mcp_servers() else {
        return;
    };
    let d = examples();
    let command = json!([bin(), "mcp"]).to_string();
    let seen = python_client(&servers.python, &d, "stdio", &command, &review_script());
    assert_eq!(
        seen["tools"],
        json!([
            "validate", "render", "execute", "answer", "status", "list", "show"
        ])
    );
    assert_matches_the_command_line(&d, &seen);

    let d = examples();
    let (mut server, url) = super::mcp::http_server(&d);
    let seen = python_client(&servers.python, &d, "http", &url, &review_script());
    server.kill().unwrap();
    server.wait().unwrap();
    assert_matches_the_command_line(&d, &seen);
}

/// One call of the Inspector's CLI on `dygram mcp` in `d`: its exit status, stdout and stderr.
fn inspector(inspector: &Path, d: &Dir, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(inspector)
        .arg("--cli")
        .arg(bin())
        .arg("mcp")
        .args(["--cwd", &d.path().display().to_string()])
        .args(args)
        .current_dir(d.path())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_inspector_lists_the_tools_without_schema_problems_and_drives_an_execution() {
    let Some(servers) = testkit::needs::mcp_servers() else {
        return;
    };
    let d = examples();
    let (ok, out, err) = inspector(
        &servers.inspector,
        &d,
        &["--method", "tools/list", "--strict", "--format", "json"],
    );
    assert!(ok, "the strict schema check failed: {err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        listed["result"]["tools"].as_array().unwrap().len(),
        7,
        "{listed}"
    );

    // One process per call: each call is a new server on the same folder, as a script's are.
    let mut arguments = json!({"file": "review.dy", "playback": "recordings/review"});
    let mut report = Value::Null;
    for _ in 0..20 {
        let (ok, out, err) = inspector(
            &servers.inspector,
            &d,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "execute",
                "--tool-args-json",
                &arguments.to_string(),
                "--format",
                "json",
                "-q",
            ],
        );
        assert!(ok, "{err}");
        let answer: Value = serde_json::from_str(&out).unwrap();
        report = answer["result"]["structuredContent"]["report"].clone();
        if report["status"] == "complete" {
            break;
        }
        arguments = json!({"file": "review.dy", "id": report["id"]});
    }
    assert_eq!(report["status"], "complete", "{report}");
    let id = report["id"].as_str().unwrap();
    let status = d
        .run(&["exec", "status", id, "--format", "json"])
        .json_line();
    assert_eq!(status["status"], "complete", "{status}");
}
