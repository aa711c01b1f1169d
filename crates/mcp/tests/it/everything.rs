//! The reference server `@modelcontextprotocol/server-everything` (npm), over stdio.

use std::time::Duration;

use mcp::{Client, McpError, model_tool_name};
use serde_json::{Map, json};

use crate::support::{args, options, spawn};

/// A client of the reference server, or `None` (skipped) when it is not installed.
fn everything() -> Option<Client> {
    let servers = testkit::needs::mcp_servers()?;
    let child = spawn("node", &[servers.everything.as_os_str(), "stdio".as_ref()]);
    Some(Client::stdio(child, options()).unwrap())
}

#[test]
fn everything_echoes_and_adds() {
    let Some(mut client) = everything() else {
        return;
    };
    assert_eq!(client.server_info()["protocolVersion"], "2025-06-18");
    let tools = client.list_tools().unwrap();
    for tool in &tools {
        assert!(
            model_tool_name("everything", &tool.name).is_some(),
            "{}",
            tool.name
        );
        assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
    }
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        names.contains(&"echo") && names.contains(&"get-sum"),
        "{names:?}"
    );

    let echo = client
        .call_tool("echo", args(json!({"message": "hi there"})), None)
        .unwrap();
    assert!(!echo.is_error);
    assert_eq!(echo.text(), "Echo: hi there");
    let sum = client
        .call_tool("get-sum", args(json!({"a": 2, "b": 3})), None)
        .unwrap();
    assert!(sum.text().contains('5'), "{}", sum.text());
    client.close();
}

#[test]
fn everything_image_is_a_note() {
    let Some(mut client) = everything() else {
        return;
    };
    let image = client
        .call_tool("get-tiny-image", Map::new(), None)
        .unwrap();
    let text = image.text();
    assert!(text.contains("[image: image/png, "), "{text}");
    assert!(text.contains(" bytes, not shown]"), "{text}");
    assert!(text.len() < 1000, "base64 leaked into the text: {text}");
}

#[test]
fn everything_long_operation_times_out_and_the_connection_goes_on() {
    let Some(mut client) = everything() else {
        return;
    };
    let long = args(json!({"duration": 5, "steps": 5}));
    let err = client.call_tool(
        "trigger-long-running-operation",
        long,
        Some(Duration::from_millis(500)),
    );
    assert!(matches!(err, Err(McpError::Timeout { .. })), "{err:?}");
    let echo = client
        .call_tool("echo", args(json!({"message": "after"})), None)
        .unwrap();
    assert_eq!(echo.text(), "Echo: after");
}
