//! Servers that do not play fair (`tests/servers/unruly.py`, and an HTTP endpoint scripted here): a
//! message line or an event over the limit, a flood of pings while nothing is read. Whatever they
//! do, the client keeps at most `MAX_MESSAGE` bytes of one message and a call ends within its timeout
//! or at the interrupt.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use mcp::{Client, McpError};
use serde_json::{Map, Value, json};

use crate::support::{args, options, running, server_file, spawn};

/// One MiB.
const MIB: usize = 1024 * 1024;

/// Runs `work` on a thread of its own and waits `limit` for it: a client that hangs fails the test
/// instead of hanging it.
fn within<T: Send + 'static>(limit: Duration, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || drop(done.send(work())));
    match result.recv_timeout(limit) {
        Ok(value) => value,
        Err(RecvTimeoutError::Timeout) => panic!("the client still waits after {limit:?}"),
        Err(RecvTimeoutError::Disconnected) => panic!("the client's thread panicked"),
    }
}

/// A client of `unruly.py` in `mode`, or `None` (skipped) without python3.
fn unruly(mode: &str) -> Option<Client> {
    let python = testkit::needs::python3()?;
    let script = server_file("unruly.py");
    let child = spawn(python, &[script.to_str().unwrap(), mode]);
    Some(Client::stdio(child, options()).unwrap())
}

#[test]
fn a_line_over_the_limit_fails_the_call_is_dropped_and_the_connection_goes_on() {
    let Some(mut client) = unruly("big-line") else {
        return;
    };
    let (answer, mut client) = within(Duration::from_secs(60), move || {
        let answer = client.call_tool("big", args(json!({"mib": 100})), None);
        (answer.map(|r| r.text().len()), client)
    });
    let err = answer.unwrap_err();
    assert!(
        matches!(&err, McpError::TooLarge { method, limit } if method == "tools/call" && *limit == mcp::MAX_MESSAGE),
        "{err:?}"
    );
    let said = err.to_string();
    assert!(said.contains("over the") && said.contains("cut"), "{said}");
    // The rest of the line was read and dropped: the next answer is read whole.
    let next = client.call_tool("echo", Map::new(), None).unwrap();
    assert_eq!(next.text(), "echo");
    let small = client
        .call_tool("big", args(json!({"mib": 1})), None)
        .unwrap();
    assert_eq!(small.text().len(), MIB);
}

/// Reads one HTTP request from `stream`: its method and its body.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<(String, Vec<u8>)> {
    let mut first = String::new();
    reader.read_line(&mut first).ok()?;
    let method = first.split_whitespace().next()?.to_string();
    let mut length = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        if header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((method, body))
}

/// Answers one connection: `initialize` with JSON, notifications with 202, `tools/call` with an
/// event stream whose one event (the answer) is `mib` MiB long; the GET stream is refused.
fn answer(stream: TcpStream, mib: usize) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let Some((method, body)) = read_request(&mut reader) else {
        return Ok(());
    };
    let mut out = stream;
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let close = "Connection: close\r\n";
    if method != "POST" {
        return write!(
            out,
            "HTTP/1.1 405 Not Allowed\r\nContent-Length: 0\r\n{close}\r\n"
        );
    }
    let Some(id) = message.get("id") else {
        return write!(
            out,
            "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n{close}\r\n"
        );
    };
    if message["method"] == "initialize" {
        let result = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                            "serverInfo": {"name": "sse", "version": "1"}});
        let body = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
        return write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: s1\r\nContent-Length: {}\r\n{close}\r\n{body}",
            body.len()
        );
    }
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n{close}\r\n"
    )?;
    write!(
        out,
        r#"data: {{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":""#
    )?;
    let chunk = vec![b'x'; MIB];
    for _ in 0..mib {
        out.write_all(&chunk)?;
    }
    out.write_all(b"\"}]}}\n\n")
}

/// An endpoint on 127.0.0.1 served by [`answer`] (its thread is left to the end of the process).
fn oversized_events(mib: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || drop(answer(stream, mib)));
        }
    });
    url
}

#[test]
fn an_event_over_the_limit_fails_the_call() {
    let url = oversized_events(100);
    let answer = within(Duration::from_secs(60), move || {
        let mut client = Client::http(&url, &[], options()).unwrap();
        let answer = client.call_tool("big", Map::new(), None);
        answer.map(|r| r.text().len())
    });
    let err = answer.unwrap_err();
    assert!(
        matches!(&err, McpError::TooLarge { method, .. } if method == "tools/call"),
        "{err:?}"
    );
    assert!(err.to_string().contains("cut"), "{err}");
}

#[test]
fn a_server_flooding_pings_that_reads_nothing_cannot_hold_a_call_past_its_timeout() {
    let Some(client) = unruly("ping-flood") else {
        return;
    };
    let pid = client.pid().unwrap();
    let timeout = Duration::from_secs(1);
    let (small, big, closed_in) = within(Duration::from_secs(30), move || {
        let mut client = client;
        let mut timed = |arguments| {
            let start = Instant::now();
            let err = client
                .call_tool("echo", arguments, Some(timeout))
                .unwrap_err();
            (err, start.elapsed())
        };
        let small = timed(Map::new());
        // More than a pipe holds: writing it would block on a server that reads nothing.
        let big = timed(args(json!({"text": "x".repeat(4 * MIB)})));
        let start = Instant::now();
        client.close();
        (small, big, start.elapsed())
    });
    for (err, took) in [small, big] {
        assert!(matches!(&err, McpError::Timeout { .. }), "{err:?}");
        assert!(
            took >= timeout && took < timeout + Duration::from_secs(2),
            "{took:?}"
        );
    }
    assert!(closed_in < Duration::from_secs(3), "{closed_in:?}");
    assert!(!running(pid), "pid {pid} survived close");
}

#[test]
fn an_interrupt_stops_a_call_to_a_server_that_reads_nothing_at_once() {
    let Some(mut client) = unruly("ping-flood") else {
        return;
    };
    let flag = Arc::new(AtomicBool::new(false));
    client.cancel_when(Arc::clone(&flag));
    let (err, took) = within(Duration::from_secs(30), move || {
        // The first call starts the flood; the second cannot even be written.
        let short = Some(Duration::from_secs(1));
        let first = client.call_tool("echo", Map::new(), short).unwrap_err();
        assert!(matches!(first, McpError::Timeout { .. }), "{first:?}");
        let raiser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            flag.store(true, Ordering::SeqCst);
        });
        let start = Instant::now();
        let big = args(json!({"text": "x".repeat(4 * MIB)}));
        let err = client.call_tool("echo", big, Some(Duration::from_secs(60)));
        let took = start.elapsed();
        raiser.join().unwrap();
        drop(client);
        (err.unwrap_err(), took)
    });
    assert!(
        matches!(&err, McpError::Cancelled { method } if method == "tools/call"),
        "{err:?}"
    );
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "{took:?}"
    );
}
