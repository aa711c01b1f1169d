//! The scripted stdio server: paging, errors, the server's own requests, notifications, crashes,
//! hangs and noise.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcp::{Client, McpError};
use serde_json::{Map, json};

use crate::support::{args, options, running, scripted, server_file, tool_names};

#[test]
fn tools_list_follows_every_page() {
    let Some(mut client) = scripted() else { return };
    assert_eq!(client.server_info()["serverInfo"]["name"], "scripted");
    let names = tool_names(&mut client);
    assert_eq!(
        names,
        [
            "echo",
            "fails",
            "ping_me",
            "change",
            "crash",
            "hang",
            "sleep",
            "cancelled",
            "media",
            "structured"
        ]
    );
    let tool = &client.list_tools().unwrap()[0];
    assert_eq!(tool.description.as_deref(), Some("the echo tool"));
    assert_eq!(tool.input_schema, json!({"type": "object"}));
}

#[test]
fn noise_on_stdout_is_skipped() {
    // The server prints a line that is not JSON before every answer.
    let Some(mut client) = scripted() else { return };
    for i in 0..20 {
        let text = format!("hello {i}");
        let result = client
            .call_tool("echo", args(json!({"text": text})), None)
            .unwrap();
        assert!(!result.is_error);
        assert_eq!(result.text(), text);
    }
}

#[test]
fn is_error_results_reach_the_caller() {
    let Some(mut client) = scripted() else { return };
    let result = client.call_tool("fails", Map::new(), None).unwrap();
    assert!(result.is_error);
    assert_eq!(result.text(), "it failed");
    match client.call_tool("no-such-tool", Map::new(), None) {
        Err(McpError::Rpc {
            code: -32602,
            method,
            ..
        }) => assert_eq!(method, "tools/call"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_servers_ping_is_answered_and_its_other_requests_refused() {
    let Some(mut client) = scripted() else { return };
    let result = client.call_tool("ping_me", Map::new(), None).unwrap();
    assert_eq!(result.text(), "ping: {}; roots: -32601");
}

#[test]
fn list_changed_is_remembered_until_the_next_list() {
    let Some(mut client) = scripted() else { return };
    assert!(!client.tools_changed());
    client.call_tool("change", Map::new(), None).unwrap();
    // The notification precedes the answer on the same pipe, so it has been read by now.
    assert!(client.tools_changed());
    client.list_tools().unwrap();
    assert!(!client.tools_changed());
}

#[test]
fn a_crash_mid_call_is_closed_with_the_exit_status() {
    let Some(mut client) = scripted() else { return };
    let err = client.call_tool("crash", Map::new(), None).unwrap_err();
    match &err {
        McpError::Closed { reason } => assert!(reason.contains("exit status: 3"), "{reason}"),
        other => panic!("{other:?}"),
    }
    let again = client.call_tool("echo", Map::new(), None).unwrap_err();
    assert!(matches!(again, McpError::Closed { .. }), "{again:?}");
}

#[test]
fn a_hang_times_out_and_the_request_is_cancelled() {
    let Some(mut client) = scripted() else { return };
    let start = Instant::now();
    let err = client
        .call_tool("hang", Map::new(), Some(Duration::from_millis(300)))
        .unwrap_err();
    match err {
        McpError::Timeout { method, after } => {
            assert_eq!(
                (method.as_str(), after),
                ("tools/call", Duration::from_millis(300))
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(start.elapsed() < Duration::from_secs(5));
    // Request 1 was initialize, request 2 the hanging call.
    let cancelled = client.call_tool("cancelled", Map::new(), None).unwrap();
    assert_eq!(cancelled.text(), "[2]");
}

#[test]
fn a_raised_cancel_flag_gives_up_at_once_and_cancels_the_request() {
    let Some(mut client) = scripted() else { return };
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    client.cancel_when(std::sync::Arc::clone(&flag));
    let raiser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
        flag
    });
    let start = Instant::now();
    let err = client
        .call_tool("hang", Map::new(), Some(Duration::from_secs(60)))
        .unwrap_err();
    assert!(
        matches!(&err, McpError::Cancelled { method } if method == "tools/call"),
        "{err:?}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    let flag = raiser.join().unwrap();
    flag.store(false, std::sync::atomic::Ordering::SeqCst);
    let cancelled = client.call_tool("cancelled", Map::new(), None).unwrap();
    assert_eq!(cancelled.text(), "[2]");
}

#[test]
fn a_late_answer_is_not_taken_for_the_next_one() {
    let Some(mut client) = scripted() else { return };
    let slow = args(json!({"seconds": 0.5}));
    let err = client.call_tool("sleep", slow, Some(Duration::from_millis(100)));
    assert!(matches!(err, Err(McpError::Timeout { .. })), "{err:?}");
    let result = client
        .call_tool("echo", args(json!({"text": "fresh"})), None)
        .unwrap();
    assert_eq!(result.text(), "fresh");
}

#[test]
fn media_and_structured_content_render_as_text() {
    let Some(mut client) = scripted() else { return };
    let media = client.call_tool("media", Map::new(), None).unwrap();
    assert_eq!(
        media.text(),
        "[image: image/png, 16 bytes, not shown]\n\
         [resource link: notes file:///notes.txt (text/plain)]\n\
         inline text\n\
         [resource: mem://b, application/zip, 4 bytes, not shown]"
    );
    let structured = client.call_tool("structured", Map::new(), None).unwrap();
    assert_eq!(structured.text(), r#"{"sum":3,"items":["a","b"]}"#);
}

#[test]
fn drop_and_close_end_the_child() {
    let Some(client) = scripted() else { return };
    let pid = client.pid().unwrap();
    assert!(running(pid));
    drop(client);
    assert!(!running(pid), "pid {pid} survived the drop");

    let client = scripted().unwrap();
    let pid = client.pid().unwrap();
    client.close();
    assert!(!running(pid), "pid {pid} survived close");
}

#[test]
fn a_child_without_pipes_is_refused_and_killed() {
    let Some(python) = testkit::needs::python3() else {
        return;
    };
    let child = Command::new(python)
        .arg(server_file("scripted.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let err = Client::stdio(child, options()).err().unwrap();
    assert!(matches!(&err, McpError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("must be piped"), "{err}");
    assert!(!running(pid));
}

#[test]
fn a_server_that_exits_at_once_is_closed() {
    let Some(python) = testkit::needs::python3() else {
        return;
    };
    let child = crate::support::spawn(python, &["-c", "import sys; sys.exit(7)"]);
    let err = Client::stdio(child, options()).err().unwrap();
    match err {
        McpError::Closed { reason } => assert!(reason.contains("exit status: 7"), "{reason}"),
        other => panic!("{other:?}"),
    }
}
