//! JSON-RPC 2.0 messages as MCP uses them, shared by both transports: what a received message is, and
//! the answers the client gives to the server's own requests.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use crate::McpError;

/// The JSON-RPC code for "method not found".
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;

/// A message received from the server.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// The answer to one of our requests (the whole message: `id` and `result` or `error`).
    Response { id: Value, message: Value },
    /// A request from the server, which must be answered.
    Request { id: Value, method: String },
    /// A notification from the server.
    Notification { method: String },
}

impl Incoming {
    /// What `message` is, or `None` for something that is no JSON-RPC message at all.
    pub(crate) fn classify(message: Value) -> Option<Self> {
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let id = message.get("id").filter(|id| !id.is_null()).cloned();
        match (method, id) {
            (Some(method), Some(id)) => Some(Self::Request { id, method }),
            (Some(method), None) => Some(Self::Notification { method }),
            (None, Some(id))
                if message.get("result").is_some() || message.get("error").is_some() =>
            {
                Some(Self::Response { id, message })
            }
            _ => None,
        }
    }

    /// The messages in one line or event: one message, or each element of a batch.
    pub(crate) fn parse_all(text: &str) -> Vec<Self> {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(batch)) => batch.into_iter().filter_map(Self::classify).collect(),
            Ok(message) => Self::classify(message).into_iter().collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// The flags the server's notifications set, shared between a transport's reader and the client.
#[derive(Debug, Default, Clone)]
pub(crate) struct Flags {
    tools_changed: Arc<AtomicBool>,
}

impl Flags {
    /// Notes a notification from the server; the ones that change nothing are ignored.
    pub(crate) fn note(&self, method: &str) {
        if method == "notifications/tools/list_changed" {
            self.tools_changed.store(true, Ordering::SeqCst);
        }
    }

    /// Whether the tool list changed since [`Flags::clear_tools_changed`].
    pub(crate) fn tools_changed(&self) -> bool {
        self.tools_changed.load(Ordering::SeqCst)
    }

    /// Forgets earlier tool-list changes (a fresh list is being fetched).
    pub(crate) fn clear_tools_changed(&self) {
        self.tools_changed.store(false, Ordering::SeqCst);
    }
}

/// The client's answer to a request from the server: `ping` gets an empty result; everything else
/// (sampling, roots, elicitation, ...) is a capability this client does not offer.
pub(crate) fn answer(id: &Value, method: &str) -> Value {
    if method == "ping" {
        json!({"jsonrpc": "2.0", "id": id, "result": {}})
    } else {
        json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": METHOD_NOT_FOUND,
                "message": format!("method not supported by this client: {method}"),
            },
        })
    }
}

/// Handles what the server says in `text` (a line or an event): answers its requests through
/// `reply`, notes its notifications in `flags`, and returns the responses to ours, as `(id, message)`.
pub(crate) fn handle(
    text: &str,
    flags: &Flags,
    mut reply: impl FnMut(&Value),
) -> Vec<(Value, Value)> {
    let mut responses = Vec::new();
    for incoming in Incoming::parse_all(text) {
        match incoming {
            Incoming::Response { id, message } => responses.push((id, message)),
            Incoming::Request { id, method } => reply(&answer(&id, &method)),
            Incoming::Notification { method } => flags.note(&method),
        }
    }
    responses
}

/// A request message.
pub(crate) fn request(id: u64, method: &str, params: Option<Value>) -> Value {
    let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if let Some(params) = params {
        message["params"] = params;
    }
    message
}

/// A notification message.
pub(crate) fn notification(method: &str, params: Option<Value>) -> Value {
    let mut message = json!({"jsonrpc": "2.0", "method": method});
    if let Some(params) = params {
        message["params"] = params;
    }
    message
}

/// Whether a response's `id` is our request `id` (numbers compare by value; a server that echoes the
/// id as a string is accepted too).
pub(crate) fn is_answer_to(response_id: &Value, id: u64) -> bool {
    match response_id {
        Value::Number(n) => n.as_u64() == Some(id),
        Value::String(s) => s.parse::<u64>().ok() == Some(id),
        _ => false,
    }
}

/// The `result` of a response, or its `error` as [`McpError::Rpc`].
pub(crate) fn result_of(method: &str, mut message: Value) -> Result<Value, McpError> {
    if let Some(error) = message.get("error").filter(|e| !e.is_null()) {
        return Err(McpError::Rpc {
            method: method.to_string(),
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)")
                .to_string(),
            data: error.get("data").cloned().map(Box::new),
        });
    }
    match message.get_mut("result") {
        Some(result) => Ok(result.take()),
        None => Err(McpError::Protocol(format!(
            "the answer to {method} has neither result nor error: {message}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_requests_notifications_and_responses() {
        let all = Incoming::parse_all(
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/message"},
                {"jsonrpc":"2.0","id":7,"result":{}},{"jsonrpc":"2.0","id":8}]"#,
        );
        assert!(matches!(&all[0], Incoming::Request { method, .. } if method == "ping"));
        assert!(matches!(&all[1], Incoming::Notification { .. }));
        assert!(matches!(&all[2], Incoming::Response { id, .. } if is_answer_to(id, 7)));
        assert_eq!(all.len(), 3);
        assert!(Incoming::parse_all("Server started on stdio").is_empty());
    }

    #[test]
    fn errors_become_rpc_errors() {
        let message = json!({"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}});
        match result_of("tools/call", message) {
            Err(McpError::Rpc { code, message, .. }) => {
                assert_eq!((code, message.as_str()), (-32602, "bad"))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pings_are_answered_and_other_requests_refused() {
        assert_eq!(answer(&json!(3), "ping")["result"], json!({}));
        assert_eq!(
            answer(&json!("a"), "roots/list")["error"]["code"],
            json!(METHOD_NOT_FOUND)
        );
    }
}
