//! A server written with the official Python SDK (`tests/servers/py_server.py`, FastMCP), over stdio
//! and streamable HTTP.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcp::{Client, McpError};
use serde_json::{Map, json};

use crate::support::{
    Server, args, free_port, options, server_file, spawn, tool_names, wait_for_port,
};

/// The checks both transports pass.
fn exercise(client: &mut Client) {
    assert_eq!(client.server_info()["serverInfo"]["name"], "py-test-server");
    let tools = client.list_tools().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "add",
            "fail",
            "crash",
            "structured",
            "roundtrip",
            "getenv",
            "grow"
        ]
    );
    assert_eq!(tools[0].description.as_deref(), Some("Adds two integers."));
    assert_eq!(tools[0].input_schema["required"], json!(["a", "b"]));

    let sum = client
        .call_tool("add", args(json!({"a": 2, "b": 40})), None)
        .unwrap();
    assert!(!sum.is_error);
    assert_eq!(sum.text(), "42");
    assert_eq!(sum.raw["structuredContent"], json!({"result": 42}));

    let failed = client.call_tool("fail", Map::new(), None).unwrap();
    assert!(failed.is_error);
    assert!(
        failed.text().contains("this tool always fails"),
        "{}",
        failed.text()
    );

    let structured = client.call_tool("structured", Map::new(), None).unwrap();
    assert_eq!(
        structured.raw["structuredContent"],
        json!({"city": "Paris", "temperature": 21})
    );
    assert!(structured.text().contains("Paris"), "{}", structured.text());

    let roundtrip = client.call_tool("roundtrip", Map::new(), None).unwrap();
    assert_eq!(roundtrip.text(), "ping ok; roots: error -32601");

    assert!(!client.tools_changed());
    assert_eq!(
        client.call_tool("grow", Map::new(), None).unwrap().text(),
        "grown"
    );
    // Over HTTP the notification comes on the other stream, in its own time.
    let start = Instant::now();
    while !client.tools_changed() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no tools/list_changed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let names = tool_names(client);
    assert!(names.contains(&"late".to_string()), "{names:?}");
    assert!(!client.tools_changed());
}

#[test]
fn python_sdk_over_stdio() {
    let Some(servers) = testkit::needs::mcp_servers() else {
        return;
    };
    let child = spawn(
        &servers.python,
        &[server_file("py_server.py").as_os_str(), "stdio".as_ref()],
    );
    let mut client = Client::stdio(child, options()).unwrap();
    exercise(&mut client);
    match client.call_tool("crash", Map::new(), None) {
        Err(McpError::Closed { reason }) => assert!(reason.contains("exit status: 3"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

/// The Python server on streamable HTTP at a free port; its URL.
fn http_server() -> Option<(Server, String)> {
    let servers = testkit::needs::mcp_servers()?;
    let port = free_port();
    let child = Command::new(&servers.python)
        .arg(server_file("py_server.py"))
        .args(["http", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server(child);
    wait_for_port(port, Duration::from_secs(30));
    Some((server, format!("http://127.0.0.1:{port}/mcp")))
}

#[test]
fn python_sdk_over_streamable_http() {
    let Some((_server, url)) = http_server() else {
        return;
    };
    let mut client = Client::http(&url, &[], options()).unwrap();
    assert_eq!(client.pid(), None);
    exercise(&mut client);
    client.close();
}

#[test]
fn python_sdk_http_errors_and_timeouts() {
    let Some((_server, url)) = http_server() else {
        return;
    };
    let wrong = url.replace("/mcp", "/nothing-here");
    match Client::http(&wrong, &[], options()) {
        Err(McpError::Http {
            status: 404, url, ..
        }) => assert_eq!(url, wrong),
        other => panic!("{:?}", other.err()),
    }
    let headers = [("Authorization".to_string(), "Bearer test".to_string())];
    let mut client = Client::http(&url, &headers, options()).unwrap();
    let slow = client.call_tool("roundtrip", Map::new(), Some(Duration::from_millis(1)));
    assert!(matches!(slow, Err(McpError::Timeout { .. })), "{slow:?}");
    let sum = client
        .call_tool("add", args(json!({"a": 1, "b": 1})), None)
        .unwrap();
    assert_eq!(sum.text(), "2");
}
