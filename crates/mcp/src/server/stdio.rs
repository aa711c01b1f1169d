//! MCP on stdio: newline-delimited JSON-RPC read from one stream and answered on another. Tool
//! calls run on threads of their own; the reader goes on taking messages meanwhile (a cancellation
//! among them). When the input ends, the calls still running are waited for and answered (a client
//! may close its side once it has sent everything); once the output cannot be written, every call
//! still running is cancelled.

use std::io::{self, BufRead, Write};
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

use super::{Core, Handler, PARSE_ERROR, Received, ServerInfo, error};
use crate::stdio::skip_line;

/// The longest line read (a larger message is answered with an error and skipped).
const LINE_LIMIT: usize = 16 * 1024 * 1024;

/// Serves `handler` on `input` and `output` until `input` ends.
pub fn serve(
    handler: &dyn Handler,
    info: &ServerInfo,
    mut input: impl BufRead,
    output: impl Write + Send,
) -> io::Result<()> {
    let core = Core::new(handler, info);
    let output = Mutex::new(output);
    let send = |message: &Value| {
        let mut out = output.lock().unwrap_or_else(PoisonError::into_inner);
        if writeln!(out, "{message}")
            .and_then(|()| out.flush())
            .is_err()
        {
            // Nobody reads the answers any more.
            core.cancel_all("");
        }
    };
    std::thread::scope(|scope| {
        read_messages(
            &mut input,
            |text| match Received::parse(text) {
                Received::Request { id, method, params } if method == "tools/call" => {
                    core.register("", &id);
                    let (core, send) = (&core, &send);
                    scope.spawn(move || {
                        if let Some(answer) = core.answer("", id, &method, &params, send) {
                            send(&answer);
                        }
                    });
                }
                Received::Request { id, method, params } => {
                    if let Some(answer) = core.answer("", id, &method, &params, &send) {
                        send(&answer);
                    }
                }
                Received::Other => core.notified("", text),
                Received::Invalid(answer) => send(&answer),
            },
            &send,
        )
    })
}

/// Reads lines until the input ends, handing each non-empty one to `take`.
fn read_messages(
    input: &mut impl BufRead,
    mut take: impl FnMut(&str),
    send: &(dyn Fn(&Value) + Sync),
) -> io::Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        let read =
            io::Read::take(&mut *input, LINE_LIMIT as u64 + 1).read_until(b'\n', &mut line)?;
        if read == 0 {
            return Ok(());
        }
        if line.len() > LINE_LIMIT && line.last() != Some(&b'\n') {
            skip_line(input)?;
            send(&error(Value::Null, PARSE_ERROR, "the message is too large"));
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        if !text.trim().is_empty() {
            take(&text);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};

    use serde_json::{Map, json};

    use super::super::{Call, ServerTool, ToolOutcome};
    use super::*;

    struct Echo;

    impl Handler for Echo {
        fn tools(&self) -> Vec<ServerTool> {
            vec![ServerTool {
                name: "echo",
                description: "Gives its arguments back.",
                input_schema: json!({"type": "object"}),
            }]
        }

        fn call(
            &self,
            name: &str,
            arguments: &Map<String, Value>,
            call: &Call,
        ) -> Option<ToolOutcome> {
            match (name, arguments.get("fail")) {
                ("wait", _) => {
                    // Reports progress until cancelled (at most 10 s).
                    let start = Instant::now();
                    let mut n = 0.0;
                    while !call.cancelled().load(Ordering::SeqCst)
                        && start.elapsed() < Duration::from_secs(10)
                    {
                        n += 1.0;
                        call.progress(n, None, "waiting");
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Some(ToolOutcome::Done(
                        json!({"cancelled": call.cancelled().load(Ordering::SeqCst)}),
                    ))
                }
                ("echo", Some(_)) => Some(ToolOutcome::Failed("asked to fail".into())),
                ("echo", None) => Some(ToolOutcome::Done(Value::Object(arguments.clone()))),
                #[allow(clippy::panic)]
                ("panic", _) => panic!("a bug"),
                _ => None,
            }
        }
    }

    fn session(input: impl BufRead) -> Vec<Value> {
        let out = Mutex::new(Vec::new());
        let info = ServerInfo {
            name: "test".into(),
            version: "1".into(),
        };
        serve(&Echo, &info, input, Writer(&out)).unwrap();
        let text = String::from_utf8(out.into_inner().unwrap()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    struct Writer<'a>(&'a Mutex<Vec<u8>>);

    impl Write for Writer<'_> {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().write(buf)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn by_id(answers: &[Value], id: i64) -> &Value {
        answers.iter().find(|a| a["id"] == id).unwrap()
    }

    #[test]
    fn requests_are_answered_notifications_are_not_and_garbage_is_an_error() {
        let lines = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"fail":true}}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope"}}"#,
            r#"{"jsonrpc":"2.0","id":6,"method":"resources/list"}"#,
            "not json",
            r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#,
            r#"[{"jsonrpc":"2.0","id":8,"method":"ping"}]"#,
            r#"{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}"#,
            r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"panic"}}"#,
            r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","arguments":[1]}}"#,
        ];
        let input = lines.join("\n") + "\n";
        let answers = session(input.as_bytes());
        assert_eq!(answers.len(), 12, "{answers:?}");
        assert_eq!(
            by_id(&answers, 10)["error"]["code"],
            -32603,
            "a panic is an error"
        );
        assert_eq!(
            by_id(&answers, 11)["error"]["code"],
            super::super::INVALID_PARAMS
        );
        assert_eq!(
            by_id(&answers, 1)["result"]["protocolVersion"],
            "2025-03-26"
        );
        assert_eq!(by_id(&answers, 2)["result"]["tools"][0]["name"], "echo");
        assert_eq!(
            by_id(&answers, 3)["result"]["structuredContent"],
            json!({"a": 1})
        );
        assert_eq!(by_id(&answers, 4)["result"]["isError"], true);
        assert_eq!(
            by_id(&answers, 5)["error"]["code"],
            super::super::INVALID_PARAMS
        );
        assert_eq!(
            by_id(&answers, 6)["error"]["code"],
            crate::jsonrpc::METHOD_NOT_FOUND
        );
        assert_eq!(by_id(&answers, 7)["result"], json!({}));
        assert_eq!(
            by_id(&answers, 9)["result"]["protocolVersion"],
            crate::PROTOCOL_VERSION
        );
        let nulls: Vec<i64> = answers
            .iter()
            .filter(|a| a["id"].is_null())
            .map(|a| a["error"]["code"].as_i64().unwrap())
            .collect();
        assert_eq!(nulls, [PARSE_ERROR, super::super::INVALID_REQUEST]);
    }

    /// Gives its lines one by one, the last only once progress has been written.
    struct Slow {
        lines: Vec<String>,
        out: &'static Mutex<Vec<u8>>,
        buf: Vec<u8>,
    }

    impl io::Read for Slow {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.fill_buf()?.len().min(buf.len());
            buf[..n].copy_from_slice(&self.buf[..n]);
            self.consume(n);
            Ok(n)
        }
    }

    impl BufRead for Slow {
        fn fill_buf(&mut self) -> io::Result<&[u8]> {
            if self.buf.is_empty() && !self.lines.is_empty() {
                if self.lines.len() == 1 {
                    let start = Instant::now();
                    while !String::from_utf8_lossy(&self.out.lock().unwrap()).contains("progress")
                        && start.elapsed() < Duration::from_secs(5)
                    {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
                self.buf = self.lines.remove(0).into_bytes();
            }
            Ok(&self.buf)
        }
        fn consume(&mut self, n: usize) {
            self.buf.drain(..n);
        }
    }

    #[test]
    fn a_long_call_reports_progress_and_a_cancelled_one_gets_no_answer() {
        static OUT: Mutex<Vec<u8>> = Mutex::new(Vec::new());
        let input = Slow {
            lines: vec![
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait","_meta":{"progressToken":"t"}}}"#.to_string() + "\n",
                r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#.to_string() + "\n",
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#.to_string() + "\n",
            ],
            out: &OUT,
            buf: Vec::new(),
        };
        let info = ServerInfo {
            name: "test".into(),
            version: "1".into(),
        };
        let started = Instant::now();
        serve(&Echo, &info, input, Writer(&OUT)).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the cancellation stopped the call"
        );
        let text = String::from_utf8(OUT.lock().unwrap().clone()).unwrap();
        let messages: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(
            messages
                .iter()
                .any(|m| m["id"] == 2 && m["result"] == json!({}))
        );
        assert!(
            !messages.iter().any(|m| m["id"] == 1),
            "a cancelled call is not answered"
        );
        let progress: Vec<&Value> = messages
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert!(!progress.is_empty());
        assert_eq!(progress[0]["params"]["progressToken"], "t");
    }
}
