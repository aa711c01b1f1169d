//! The server side on streamable HTTP, in process: a handler served by `serve_http` on a loopback
//! port, reached by this crate's client and by plain HTTP requests (refusals, event streams,
//! cancellation).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mcp::server::{Call, Handler, HttpOptions, ServerInfo, ServerTool, ToolOutcome, serve_http};
use serde_json::{Map, Value, json};

use super::support::options;

/// `echo` gives its arguments back; `wait` reports progress until cancelled (at most 10 s).
struct Tools;

impl Handler for Tools {
    fn tools(&self) -> Vec<ServerTool> {
        ["echo", "wait"]
            .into_iter()
            .map(|name| ServerTool {
                name,
                description: "A test tool.",
                input_schema: json!({"type": "object"}),
            })
            .collect()
    }

    fn call(&self, name: &str, arguments: &Map<String, Value>, call: &Call) -> Option<ToolOutcome> {
        match name {
            "echo" => Some(ToolOutcome::Done(Value::Object(arguments.clone()))),
            "wait" => {
                let start = Instant::now();
                let mut n = 0.0;
                while !call.cancelled().load(Ordering::SeqCst)
                    && start.elapsed() < Duration::from_secs(10)
                {
                    n += 1.0;
                    call.progress(n, None, "waiting");
                    std::thread::sleep(Duration::from_millis(20));
                }
                Some(ToolOutcome::Done(json!({"waited": n})))
            }
            _ => None,
        }
    }
}

/// Serves [`Tools`] on a free port for the length of `test`, which gets the endpoint's URL.
fn with_server(test: impl FnOnce(&str)) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let stop = AtomicBool::new(false);
    let info = ServerInfo {
        name: "test".into(),
        version: "1".into(),
    };
    /// Stops the server however the test ends (a failed assertion included).
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    std::thread::scope(|scope| {
        let server = scope.spawn(|| {
            let options = HttpOptions {
                path: "/mcp".into(),
            };
            serve_http(&Tools, &info, listener, &options, &stop)
        });
        let stopping = Stop(&stop);
        test(&url);
        drop(stopping);
        server.join().unwrap().unwrap();
    });
}

/// One request by hand: the status, the headers and the body (read to its end).
fn raw(url: &str, method: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (address, path) = rest.split_once('/').unwrap();
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut head = format!(
        "{method} /{path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Length: {}\r\nContent-Type: application/json\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    write!(stream, "{head}\r\n{body}").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head.to_string(), body.to_string())
}

fn session_of(head: &str) -> String {
    head.lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_string())
        })
        .unwrap()
}

const INITIALIZE: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#;

#[test]
fn the_client_calls_tools_of_an_http_server() {
    with_server(|url| {
        let mut client = mcp::Client::http(url, &[], options()).unwrap();
        assert_eq!(client.server_info()["serverInfo"]["name"], "test");
        assert_eq!(client.list_tools().unwrap().len(), 2);
        let mut arguments = Map::new();
        arguments.insert("a".into(), json!(1));
        let result = client.call_tool("echo", arguments, None).unwrap();
        assert_eq!(result.raw["structuredContent"], json!({"a": 1}));
        client.close();
    });
}

#[test]
fn messages_without_a_session_from_other_sites_or_elsewhere_are_refused() {
    with_server(|url| {
        let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
        assert_eq!(raw(url, "POST", &[], ping).0, 400, "no session");
        assert_eq!(
            raw(url, "POST", &[("Mcp-Session-Id", "forged")], ping).0,
            404
        );
        let origin = [("Origin", "https://evil.example")];
        assert_eq!(raw(url, "POST", &origin, INITIALIZE).0, 403);
        assert_eq!(raw(url, "GET", &[], "").0, 405);
        assert_eq!(
            raw(&url.replace("/mcp", "/other"), "POST", &[], INITIALIZE).0,
            404
        );
        let (status, _, body) = raw(url, "POST", &[], "not json");
        assert_eq!(status, 400);
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["error"]["code"],
            -32700
        );

        let (status, head, _) = raw(
            url,
            "POST",
            &[("Origin", "http://localhost:3000")],
            INITIALIZE,
        );
        assert_eq!(status, 200);
        let session = session_of(&head);
        let with = [("Mcp-Session-Id", session.as_str())];
        let (status, _, body) = raw(url, "POST", &with, ping);
        assert_eq!(
            (
                status,
                serde_json::from_str::<Value>(&body).unwrap()["result"].clone()
            ),
            (200, json!({}))
        );
        let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(raw(url, "POST", &with, note).0, 202);
        assert_eq!(raw(url, "DELETE", &with, "").0, 200);
        assert_eq!(raw(url, "POST", &with, ping).0, 404, "the session ended");
    });
}

#[test]
fn a_call_that_asks_for_progress_streams_it_and_a_cancellation_stops_it() {
    with_server(|url| {
        let (_, head, _) = raw(url, "POST", &[], INITIALIZE);
        let session = session_of(&head);
        let rest = url.strip_prefix("http://").unwrap();
        let (address, _) = rest.split_once('/').unwrap();
        let mut stream = TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"wait","_meta":{"progressToken":"p"}}}"#;
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: {address}\r\nMcp-Session-Id: {session}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{call}",
            call.len()
        )
        .unwrap();
        let mut reader = BufReader::new(stream);
        let mut events = Vec::new();
        let started = Instant::now();
        let mut line = String::new();
        let mut cancelled = false;
        while reader.read_line(&mut line).unwrap() > 0 {
            if let Some(data) = line.trim().strip_prefix("data: ") {
                let message: Value = serde_json::from_str(data).unwrap();
                if message["method"] == "notifications/progress" && !cancelled {
                    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#;
                    assert_eq!(
                        raw(url, "POST", &[("Mcp-Session-Id", &session)], cancel).0,
                        202
                    );
                    cancelled = true;
                }
                events.push(message);
            }
            if line.trim() == "0" {
                break;
            }
            line.clear();
        }
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "the cancellation stopped the call"
        );
        assert!(events[0]["params"]["progressToken"] == "p", "{events:?}");
        assert!(
            !events.iter().any(|e| e["id"] == 7),
            "a cancelled call gets no answer: {events:?}"
        );
    });
}

#[test]
fn ending_a_session_cancels_its_calls_and_no_other_sessions() {
    with_server(|url| {
        let session = |_: ()| session_of(&raw(url, "POST", &[], INITIALIZE).1);
        let (mine, theirs) = (session(()), session(()));
        let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"wait"}}"#;
        let started = Instant::now();
        std::thread::scope(|s| {
            let waiting = s.spawn(|| raw(url, "POST", &[("Mcp-Session-Id", &mine)], call));
            // The other session's cancellation of "its" call 7 reaches nothing of mine.
            std::thread::sleep(Duration::from_millis(200));
            let cancel =
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#;
            assert_eq!(
                raw(url, "POST", &[("Mcp-Session-Id", &theirs)], cancel).0,
                202
            );
            std::thread::sleep(Duration::from_millis(300));
            assert!(!waiting.is_finished(), "another session cancelled my call");
            assert_eq!(raw(url, "DELETE", &[("Mcp-Session-Id", &mine)], "").0, 200);
            let (status, _, _) = waiting.join().unwrap();
            assert_eq!(status, 202, "a cancelled call gets no answer");
        });
        assert!(started.elapsed() < Duration::from_secs(8));
    });
}
