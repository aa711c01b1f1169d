//! The server side of MCP over stdio: newline-delimited JSON-RPC read from one stream and answered
//! on another, for a program that offers tools ([`Handler`]). It answers `initialize`, `ping`,
//! `tools/list` and `tools/call`; notifications are taken without an answer; any other request is
//! answered "method not found", and a line that is no JSON "parse error".

use std::io::{self, BufRead, Write};

use serde_json::{Map, Value, json};

use crate::client::PROTOCOL_VERSION;
use crate::jsonrpc::METHOD_NOT_FOUND;

/// JSON-RPC: the line is not JSON.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the parameters are not what the method takes.
const INVALID_PARAMS: i64 = -32602;
/// The longest line read (a larger message is answered with an error and skipped).
const LINE_LIMIT: usize = 16 * 1024 * 1024;

/// A tool a server offers.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerTool {
    /// Its name.
    pub name: &'static str,
    /// What it does, for the model or the person choosing.
    pub description: &'static str,
    /// The JSON Schema of its arguments.
    pub input_schema: Value,
}

/// What a tool call gave.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// A result: an object, sent as structured content and as its JSON text.
    Done(Value),
    /// The call failed: the reason, sent as a result with `isError` (the caller's model reads it).
    Failed(String),
}

/// The tools of a server.
pub trait Handler {
    /// The tools offered.
    fn tools(&self) -> Vec<ServerTool>;
    /// Calls tool `name` with `arguments`; `None` for a tool it does not have.
    fn call(&mut self, name: &str, arguments: &Map<String, Value>) -> Option<ToolOutcome>;
}

/// Who the server says it is.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
}

/// Serves `handler` on `input` and `output` until `input` ends.
pub fn serve(
    handler: &mut dyn Handler,
    info: &ServerInfo,
    mut input: impl BufRead,
    mut output: impl Write,
) -> io::Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        let read =
            io::Read::take(&mut input, LINE_LIMIT as u64 + 1).read_until(b'\n', &mut line)?;
        if read == 0 {
            return Ok(());
        }
        if line.len() > LINE_LIMIT && line.last() != Some(&b'\n') {
            // Skip the rest of an oversized line.
            let mut rest = Vec::new();
            input.read_until(b'\n', &mut rest)?;
            reply(
                &mut output,
                &error(Value::Null, PARSE_ERROR, "the message is too large"),
            )?;
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        if text.trim().is_empty() {
            continue;
        }
        let answer = match serde_json::from_str::<Value>(text.trim()) {
            Ok(message) => answer(handler, info, &message),
            Err(e) => Some(error(Value::Null, PARSE_ERROR, &format!("not JSON: {e}"))),
        };
        if let Some(answer) = answer {
            reply(&mut output, &answer)?;
        }
    }
}

fn reply(output: &mut impl Write, message: &Value) -> io::Result<()> {
    writeln!(output, "{message}")?;
    output.flush()
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The answer to one message (`None` for a notification or a response).
fn answer(handler: &mut dyn Handler, info: &ServerInfo, message: &Value) -> Option<Value> {
    let id = message.get("id").filter(|id| !id.is_null()).cloned()?;
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        // A response to a request of ours: this server makes none.
        return None;
    };
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    Some(match method {
        "initialize" => {
            let asked = params.get("protocolVersion").and_then(Value::as_str);
            result(
                id,
                json!({
                    "protocolVersion": asked.unwrap_or(PROTOCOL_VERSION),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": info.name, "version": info.version},
                }),
            )
        }
        "ping" => result(id, json!({})),
        "tools/list" => {
            let tools: Vec<Value> = handler
                .tools()
                .into_iter()
                .map(|t| {
                    json!({"name": t.name, "description": t.description, "inputSchema": t.input_schema})
                })
                .collect();
            result(id, json!({"tools": tools}))
        }
        "tools/call" => {
            let Some(name) = params.get("name").and_then(Value::as_str) else {
                return Some(error(
                    id,
                    INVALID_PARAMS,
                    "tools/call needs the tool's name",
                ));
            };
            let empty = Map::new();
            let arguments = params
                .get("arguments")
                .and_then(Value::as_object)
                .unwrap_or(&empty);
            match handler.call(name, arguments) {
                Some(ToolOutcome::Done(value)) => result(
                    id,
                    json!({
                        "content": [{"type": "text", "text": value.to_string()}],
                        "structuredContent": value,
                        "isError": false,
                    }),
                ),
                Some(ToolOutcome::Failed(why)) => result(
                    id,
                    json!({"content": [{"type": "text", "text": why}], "isError": true}),
                ),
                None => error(id, INVALID_PARAMS, &format!("no tool named {name:?}")),
            }
        }
        other => error(id, METHOD_NOT_FOUND, &format!("method not found: {other}")),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
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

        fn call(&mut self, name: &str, arguments: &Map<String, Value>) -> Option<ToolOutcome> {
            match (name, arguments.get("fail")) {
                ("echo", Some(_)) => Some(ToolOutcome::Failed("asked to fail".into())),
                ("echo", None) => Some(ToolOutcome::Done(Value::Object(arguments.clone()))),
                _ => None,
            }
        }
    }

    fn session(lines: &[&str]) -> Vec<Value> {
        let input = lines.join("\n") + "\n";
        let mut out = Vec::new();
        let info = ServerInfo {
            name: "test".into(),
            version: "1".into(),
        };
        serve(&mut Echo, &info, input.as_bytes(), &mut out).unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn requests_are_answered_notifications_are_not_and_garbage_is_an_error() {
        let answers = session(&[
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"fail":true}}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope"}}"#,
            r#"{"jsonrpc":"2.0","id":6,"method":"resources/list"}"#,
            "not json",
            r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#,
        ]);
        assert_eq!(answers.len(), 8, "{answers:?}");
        assert_eq!(answers[0]["result"]["protocolVersion"], "2025-03-26");
        assert_eq!(answers[1]["result"]["tools"][0]["name"], "echo");
        assert_eq!(answers[2]["result"]["structuredContent"], json!({"a": 1}));
        assert_eq!(answers[3]["result"]["isError"], true);
        assert_eq!(answers[4]["error"]["code"], INVALID_PARAMS);
        assert_eq!(answers[5]["error"]["code"], METHOD_NOT_FOUND);
        assert_eq!(answers[6]["error"]["code"], PARSE_ERROR);
        assert_eq!(answers[7]["result"], json!({}));
    }
}
