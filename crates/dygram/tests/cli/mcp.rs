//! `dygram mcp`: dygram's tools over MCP on stdio and streamable HTTP, driven by the workspace's MCP
//! client (the one delta uses for its agents' servers) against the real binary. The official
//! clients (the Python SDK, the Inspector's CLI) drive it in `mcp_clients.rs`.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::answers::ORDER;
use super::support::{Dir, bin};

pub fn client(d: &Dir) -> mcp::Client {
    client_with(d, &[])
}

/// `dygram mcp EXTRA…` in `d` (with its variables), reached by the workspace's client.
fn client_with(d: &Dir, extra: &[&str]) -> mcp::Client {
    let args: Vec<&str> = std::iter::once("mcp")
        .chain(extra.iter().copied())
        .collect();
    let child = d
        .spawn_command(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let options = mcp::Options {
        timeout: Duration::from_secs(30),
        client: mcp::ClientInfo {
            name: "test".into(),
            version: "1".into(),
        },
    };
    mcp::Client::stdio(child, options).unwrap()
}

fn args(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

#[test]
fn an_mcp_client_validates_and_renders_machines() {
    let d = Dir::with_file("order.dy", ORDER);
    let mut c = client(&d);
    let info = c.server_info();
    assert_eq!(info["serverInfo"]["name"], "dygram", "{info}");
    let tools: Vec<String> = c
        .list_tools()
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(
        tools,
        [
            "validate", "render", "execute", "answer", "status", "list", "show"
        ]
    );

    let valid = c
        .call_tool("validate", args(json!({"file": "order.dy"})), None)
        .unwrap();
    assert!(!valid.is_error, "{:?}", valid.raw);
    assert_eq!(
        valid.raw["structuredContent"]["valid"], true,
        "{:?}",
        valid.raw
    );
    // The same object as `pv --format json`.
    let pv = d.run(&["pv", "order.dy", "--format", "json"]).json();
    assert_eq!(valid.raw["structuredContent"], pv);

    let broken = c
        .call_tool(
            "validate",
            args(json!({"text": "state a;\na -> ;\n"})),
            None,
        )
        .unwrap();
    let content = &broken.raw["structuredContent"];
    assert_eq!(content["valid"], false, "{content}");
    assert_eq!(content["diagnostics"][0]["line"], 2, "{content}");

    let mermaid = c
        .call_tool(
            "render",
            args(json!({"file": "order.dy", "format": "mermaid"})),
            None,
        )
        .unwrap();
    let output = mermaid.raw["structuredContent"]["output"].as_str().unwrap();
    assert_eq!(
        output,
        d.run(&["generate", "order.dy", "-f", "mermaid"]).stdout,
        "the same text as generate"
    );

    // Mistakes are results the caller's model reads, not broken connections.
    for (tool, arguments) in [
        ("render", json!({"text": "a -> b;", "format": "gif"})),
        ("render", json!({"text": "state a;\na -> ;"})),
        ("validate", json!({})),
        ("validate", json!({"file": "missing.dy"})),
    ] {
        let failed = c.call_tool(tool, args(arguments.clone()), None).unwrap();
        assert!(failed.is_error, "{tool} {arguments}: {:?}", failed.raw);
    }
    assert!(c.call_tool("nope", Map::new(), None).is_err());
    c.close();
}

#[test]
fn an_mcp_client_steps_an_execution_that_the_command_line_then_sees() {
    let d = Dir::new();
    super::support::copy_dir(
        &super::support::repo_root().join("examples/dygram"),
        d.path(),
    );
    let mut c = client(&d);
    let first = c
        .call_tool(
            "execute",
            args(json!({"file": "review.dy", "playback": "recordings/review"})),
            None,
        )
        .unwrap();
    assert!(!first.is_error, "{:?}", first.raw);
    let report = &first.raw["structuredContent"]["report"];
    let id = report["id"].as_str().unwrap().to_string();
    let second = c
        .call_tool(
            "execute",
            args(json!({"file": "review.dy", "id": id})),
            None,
        )
        .unwrap();
    let report = second.raw["structuredContent"]["report"].clone();
    assert_eq!(report["id"], id.as_str(), "{report}");
    let status = d
        .run(&["exec", "status", &id, "--format", "json"])
        .json_line();
    assert_eq!(status["turns"], report["turns"], "{status}");
    assert_eq!(status["currentNodes"], report["currentNodes"], "{status}");
    // Outside the folder, or no file: refused as results.
    for arguments in [json!({"file": "../x.dy"}), json!({})] {
        let refused = c
            .call_tool("execute", args(arguments.clone()), None)
            .unwrap();
        assert!(refused.is_error, "{arguments}: {:?}", refused.raw);
    }
    c.close();
}

/// A call that must succeed: its structured content.
fn done(c: &mut mcp::Client, tool: &str, arguments: Value) -> Value {
    let result = c.call_tool(tool, args(arguments.clone()), None).unwrap();
    assert!(!result.is_error, "{tool} {arguments}: {:?}", result.raw);
    result.raw["structuredContent"].clone()
}

#[test]
fn an_mcp_client_answers_a_waiting_turn_and_reads_status_list_and_show_as_exec_prints_them() {
    let d = Dir::new();
    super::support::copy_dir(
        &super::support::repo_root().join("examples/dygram"),
        d.path(),
    );
    let mut c = client(&d);
    // No recordings and no key: the turn that needs a model waits for an answer.
    let mut report = done(&mut c, "execute", json!({"file": "review.dy"}))["report"].clone();
    let id = report["id"].as_str().unwrap().to_string();
    for _ in 0..3 {
        if report["status"] == "waiting" {
            break;
        }
        report = done(&mut c, "execute", json!({"file": "review.dy", "id": id}))["report"].clone();
    }
    assert_eq!(report["status"], "waiting", "{report}");
    let status = done(&mut c, "status", json!({"id": id}));
    assert_eq!(status["waitingForAnswer"], true, "{status}");
    let answered = done(
        &mut c,
        "answer",
        json!({"file": "review.dy", "id": id, "text": "Lisbon is bright. Its hills are steep. Its food is good."}),
    )["report"]
        .clone();
    assert_ne!(answered["status"], "waiting", "{answered}");
    assert_eq!(answered["turns"], 1, "{answered}");

    // The same objects as the command line's.
    let status = done(&mut c, "status", json!({}));
    assert_eq!(
        status,
        d.run(&["exec", "status", &id, "--format", "json"])
            .json_line()
    );
    let listed = done(&mut c, "list", json!({}));
    assert_eq!(
        listed["executions"],
        d.run(&["exec", "list", "--format", "json"]).json_line()
    );
    let shown = done(&mut c, "show", json!({"id": id}));
    assert_eq!(
        shown,
        d.run(&["exec", "show", &id, "--format", "json"]).json()
    );
    for (tool, arguments) in [
        ("status", json!({"id": "nope"})),
        ("show", json!({"id": "../x"})),
        ("answer", json!({"file": "review.dy"})),
        ("validate", json!({"file": "/etc/passwd"})),
    ] {
        let failed = c.call_tool(tool, args(arguments.clone()), None).unwrap();
        assert!(failed.is_error, "{tool} {arguments}: {:?}", failed.raw);
    }
    c.close();
}

#[test]
fn the_same_tools_are_served_on_streamable_http() {
    let d = Dir::with_file("order.dy", ORDER);
    let mut command = Command::new(bin());
    command
        .args(["mcp", "--http", "127.0.0.1:0"])
        .current_dir(d.path());
    let (mut server, url) = testkit::mcp_clients::http_endpoint(command);
    let options = mcp::Options {
        timeout: Duration::from_secs(30),
        client: mcp::ClientInfo {
            name: "test".into(),
            version: "1".into(),
        },
    };
    let mut c = mcp::Client::http(&url, &[], options).unwrap();
    assert_eq!(c.list_tools().unwrap().len(), 7);
    let valid = done(&mut c, "validate", json!({"file": "order.dy"}));
    assert_eq!(valid, d.run(&["pv", "order.dy", "--format", "json"]).json());
    c.close();
    server.kill().unwrap();
    server.wait().unwrap();
}

#[test]
fn with_a_store_the_tools_step_and_read_the_stores_executions() {
    let d = Dir::new();
    super::support::copy_dir(
        &super::support::repo_root().join("examples/dygram"),
        d.path(),
    );
    let shared = tempfile::tempdir().unwrap();
    let url = format!("file://{}", shared.path().display());
    let mut c = client_with(&d, &["--store", &url]);
    // In a store an execution is named by its id.
    let refused = c
        .call_tool(
            "execute",
            args(json!({"file": "review.dy", "playback": "recordings/review"})),
            None,
        )
        .unwrap();
    assert!(refused.is_error, "{:?}", refused.raw);
    let first = done(
        &mut c,
        "execute",
        json!({"file": "review.dy", "id": "shared-review", "playback": "recordings/review"}),
    );
    assert_eq!(first["report"]["id"], "shared-review", "{first}");
    let second = done(
        &mut c,
        "execute",
        json!({"file": "review.dy", "id": "shared-review"}),
    );
    assert_eq!(second["report"]["turns"], 1, "{second}");
    assert!(!d.path().join(".dygram/executions/shared-review").exists());

    let status = done(&mut c, "status", json!({"id": "shared-review"}));
    assert_eq!(
        status,
        d.run(&[
            "exec",
            "status",
            "shared-review",
            "--store",
            &url,
            "--format",
            "json"
        ])
        .json_line()
    );
    let listed = done(&mut c, "list", json!({}));
    assert_eq!(
        listed["executions"],
        d.run(&["exec", "list", "--store", &url, "--format", "json"])
            .json_line()
    );
    let shown = done(&mut c, "show", json!({"id": "shared-review"}));
    assert_eq!(
        shown,
        d.run(&[
            "exec",
            "show",
            "shared-review",
            "--store",
            &url,
            "--format",
            "json"
        ])
        .json()
    );
    let missing = c.call_tool("status", Map::new(), None).unwrap();
    assert!(missing.is_error, "{:?}", missing.raw);
    c.close();

    let bad = d.run(&["mcp", "--store", "mysql://x"]);
    assert_eq!(bad.code, 64, "{}", bad.stderr);
}

/// A machine the served folder must not give away.
const OUTSIDE: &str = "state Secret \"the password is hunter2-83a1\";\n";

#[test]
fn imports_that_leave_the_served_folder_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.dy"), OUTSIDE).unwrap();
    std::fs::write(outside.path().join("notes.txt"), "hunter2-83a1\n").unwrap();
    let d = Dir::with_file("lib/inner.dy", "state Inner \"kept\";\n");
    std::os::unix::fs::symlink(
        outside.path().join("secret.dy"),
        d.path().join("lib/link.dy"),
    )
    .unwrap();
    let name = outside.path().file_name().unwrap().to_string_lossy();
    let machine =
        |path: &str| format!("import {{ Secret }} from \"{path}\";\nstate a;\na -> Secret;\n");
    let mut c = client(&d);
    // An import inside the folder is read.
    let inner = done(
        &mut c,
        "render",
        json!({"text": "import { Inner } from \"./lib/inner.dy\";\nstate a;\na -> Inner;\n"}),
    );
    assert!(inner["output"].to_string().contains("kept"), "{inner}");
    let absolute = outside.path().join("secret.dy").display().to_string();
    for path in [
        format!("../{name}/secret.dy"),
        absolute,
        "./lib/link.dy".to_string(),
        format!("../{name}/notes"),
        format!("../{name}/notes.txt"),
    ] {
        let text = machine(&path);
        // Given as text, and as a file of the folder.
        d.write("main.dy", &text);
        for given in [json!({"text": text}), json!({"file": "main.dy"})] {
            let valid = done(&mut c, "validate", given.clone());
            let said = valid["diagnostics"].to_string();
            assert_eq!(valid["valid"], false, "{path}: {valid}");
            assert!(said.contains("outside the served folder"), "{path}: {said}");
            assert!(!said.contains("hunter2"), "{path}: {said}");
            let rendered = c.call_tool("render", args(given), None).unwrap();
            let raw = rendered.raw.to_string();
            assert!(
                rendered.is_error && !raw.contains("hunter2"),
                "{path}: {raw}"
            );
        }
        let executed = c
            .call_tool("execute", args(json!({"file": "main.dy"})), None)
            .unwrap();
        let raw = executed.raw.to_string();
        assert!(executed.is_error, "{path}: {raw}");
        assert!(
            raw.contains("outside the served folder") && !raw.contains("hunter2"),
            "{path}: {raw}"
        );
    }
    c.close();
}
