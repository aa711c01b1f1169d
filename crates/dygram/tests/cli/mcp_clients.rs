//! `dygram mcp` driven by the official MCP clients: the Python SDK (over stdio and streamable HTTP)
//! and the MCP Inspector's CLI, through the example machine to its end. Both come from
//! `scripts/install-mcp-servers`; without them these tests say SKIPPED.

use std::process::Command;

use serde_json::{Value, json};

use testkit::mcp_clients::http_endpoint;

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

/// `dygram mcp` (and `extra`) in folder `d`.
fn server(d: &Dir, extra: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.arg("mcp").args(extra).current_dir(d.path());
    cmd
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
    let seen = servers
        .python_stdio(&server(&d, &[]), &review_script())
        .json();
    assert_eq!(
        seen["tools"],
        json!([
            "validate", "render", "execute", "answer", "status", "list", "show"
        ])
    );
    assert_matches_the_command_line(&d, &seen);

    let d = examples();
    let (mut endpoint, url) = http_endpoint(server(&d, &["--http", "127.0.0.1:0"]));
    let seen = servers.python_http(&url, &review_script()).json();
    endpoint.kill().unwrap();
    endpoint.wait().unwrap();
    assert_matches_the_command_line(&d, &seen);
}

#[test]
fn the_inspector_lists_the_tools_without_schema_problems_and_drives_an_execution() {
    let Some(servers) = testkit::needs::mcp_servers() else {
        return;
    };
    let d = examples();
    let listed = servers
        .inspect(
            &server(&d, &[]),
            &["--method", "tools/list", "--strict", "--format", "json"],
        )
        .json();
    assert_eq!(
        listed["result"]["tools"].as_array().unwrap().len(),
        7,
        "{listed}"
    );

    // One process per call: each call is a new server on the same folder, as a script's are.
    let mut arguments = json!({"file": "review.dy", "playback": "recordings/review"});
    let mut report = Value::Null;
    for _ in 0..20 {
        let content = servers.inspect_call(&server(&d, &[]), "execute", &arguments);
        report = content["report"].clone();
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
