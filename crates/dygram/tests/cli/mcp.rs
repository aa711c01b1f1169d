//! `dygram mcp`: dygram's tools over MCP on stdio, driven by the workspace's MCP client (the one
//! delta uses for its agents' servers) against the real binary.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::answers::ORDER;
use super::support::{Dir, bin};

fn client(d: &Dir) -> mcp::Client {
    let child = Command::new(bin())
        .arg("mcp")
        .current_dir(d.path())
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
    assert_eq!(tools, ["validate", "render", "execute"]);

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
