//! The server side of MCP, for a program that offers tools ([`Handler`]): on stdio
//! ([`serve`], newline-delimited JSON-RPC) and on streamable HTTP ([`serve_http`], one endpoint
//! taking POSTed messages). Both answer `initialize`, `ping`, `tools/list` and `tools/call`; any
//! other request is answered "method not found", and a message that is no JSON "parse error".
//!
//! Tool calls run on threads of their own, so a long call does not hold the others up: while one
//! runs, the client may ping, list, call again, or cancel it (`notifications/cancelled` raises the
//! call's [`Call::cancelled`] flag; a cancelled call's answer is not sent). A call whose request
//! carries `_meta.progressToken` may report progress ([`Call::progress`]).

mod http;
mod stdio;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value, json};

pub use http::{HttpOptions, serve_http};
pub use stdio::serve;

/// Where a server listens.
#[derive(Debug, Clone, Copy)]
pub enum Listen<'a> {
    /// The process's stdin and stdout (the client started it).
    Stdio,
    /// Streamable HTTP on this `host:port`, at the path `/mcp`.
    Http(&'a str),
}

/// Why a server stopped on an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be listened on.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The connection failed.
    #[error("the MCP connection failed: {0}")]
    Connection(std::io::Error),
}

impl ServeError {
    /// What to do about it.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            Self::Listen { .. } => {
                Some("give a free host:port (port 0 picks one; the endpoint is printed on stderr)")
            }
            Self::Connection(_) => None,
        }
    }
}

/// Serves `handler` where `listen` says until the input ends (stdio) or `stop` is raised (HTTP);
/// `listening` is told the endpoint's URL once HTTP listens.
pub fn run(
    handler: &dyn Handler,
    info: &ServerInfo,
    listen: Listen<'_>,
    stop: &std::sync::atomic::AtomicBool,
    listening: impl FnOnce(&str),
) -> Result<(), ServeError> {
    let addr = match listen {
        Listen::Stdio => {
            return serve(handler, info, std::io::stdin().lock(), std::io::stdout())
                .map_err(ServeError::Connection);
        }
        Listen::Http(addr) => addr,
    };
    let listener = std::net::TcpListener::bind(addr).map_err(|source| ServeError::Listen {
        addr: addr.to_string(),
        source,
    })?;
    let options = HttpOptions {
        path: "/mcp".into(),
    };
    if let Ok(local) = listener.local_addr() {
        listening(&format!("http://{local}{}", options.path));
    }
    serve_http(handler, info, listener, &options, stop).map_err(ServeError::Connection)
}

use crate::client::PROTOCOL_VERSION;
use crate::jsonrpc::METHOD_NOT_FOUND;

/// JSON-RPC: the message is not JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the message is no request.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: the parameters are not what the method takes.
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: the server failed (a tool that panicked).
const INTERNAL_ERROR: i64 = -32603;
/// Tool calls running at once, at most; more are refused with an error until some end.
const MAX_CALLS: usize = 64;

/// The protocol versions this server speaks; a client asking for another is offered the newest.
const VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

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

/// The tools of a server. Calls may run at the same time, each on its own thread.
pub trait Handler: Sync {
    /// The tools offered.
    fn tools(&self) -> Vec<ServerTool>;
    /// Calls tool `name` with `arguments`; `None` for a tool it does not have.
    fn call(&self, name: &str, arguments: &Map<String, Value>, call: &Call) -> Option<ToolOutcome>;
}

/// Who the server says it is.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
}

/// Sends a message to the client (a notification that belongs to a call).
pub(crate) type Notify<'a> = &'a (dyn Fn(&Value) + Sync);

/// One tool call as it runs: whether the client cancelled it, and its progress reports.
pub struct Call<'a> {
    cancelled: Arc<AtomicBool>,
    progress_token: Option<Value>,
    notify: Notify<'a>,
}

impl Call<'_> {
    /// The flag the client's cancellation raises (also raised when the client goes away).
    pub fn cancelled(&self) -> &Arc<AtomicBool> {
        &self.cancelled
    }

    /// Whether the client asked for progress reports.
    pub fn wants_progress(&self) -> bool {
        self.progress_token.is_some()
    }

    /// Reports progress (`progress` grows from one report to the next; `total` where known), if the
    /// client asked for it.
    pub fn progress(&self, progress: f64, total: Option<f64>, message: &str) {
        let Some(token) = &self.progress_token else {
            return;
        };
        if self.cancelled.load(Ordering::SeqCst) {
            return;
        }
        let mut params = json!({"progressToken": token, "progress": progress, "message": message});
        if let (Some(total), Value::Object(p)) = (total, &mut params) {
            p.insert("total".into(), json!(total));
        }
        (self.notify)(
            &json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}),
        );
    }
}

/// A message the server received.
pub(crate) enum Received {
    /// A request: answered.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A notification or a response to nothing we asked: taken without an answer.
    Other,
    /// Not a JSON-RPC message: the error to answer.
    Invalid(Value),
}

impl Received {
    pub(crate) fn parse(text: &str) -> Self {
        match serde_json::from_str::<Value>(text.trim()) {
            Ok(message) => Self::classify(message),
            Err(e) => Self::Invalid(error(Value::Null, PARSE_ERROR, &format!("not JSON: {e}"))),
        }
    }

    fn classify(message: Value) -> Self {
        if !message.is_object() {
            return Self::Invalid(error(
                Value::Null,
                INVALID_REQUEST,
                "a message is one JSON-RPC object (batches are not taken)",
            ));
        }
        let id = message.get("id").filter(|id| !id.is_null()).cloned();
        match (id, message.get("method").and_then(Value::as_str)) {
            (Some(id), Some(method)) => Self::Request {
                id,
                method: method.to_string(),
                params: message.get("params").cloned().unwrap_or(Value::Null),
            },
            _ => Self::Other,
        }
    }
}

/// What both transports share: the handler, and the calls in flight (for cancellation).
pub(crate) struct Core<'h> {
    handler: &'h dyn Handler,
    info: &'h ServerInfo,
    in_flight: Mutex<HashMap<String, Arc<AtomicBool>>>,
}

impl<'h> Core<'h> {
    pub(crate) fn new(handler: &'h dyn Handler, info: &'h ServerInfo) -> Self {
        Self {
            handler,
            info,
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// Takes a notification of the client `scope` names (the empty scope on stdio, a session on
    /// HTTP): `notifications/cancelled` raises the named call's flag.
    pub(crate) fn notified(&self, scope: &str, text: &str) {
        let Ok(message) = serde_json::from_str::<Value>(text.trim()) else {
            return;
        };
        if message.get("method").and_then(Value::as_str) != Some("notifications/cancelled") {
            return;
        }
        if let Some(id) = message.pointer("/params/requestId") {
            let calls = self
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(flag) = calls.get(&key(scope, id)) {
                flag.store(true, Ordering::SeqCst);
            }
        }
    }

    /// The cancellation flag of call `id` (made at the first ask): a transport registers a call
    /// before handing it to a thread, so that a cancellation read right after it finds it.
    pub(crate) fn register(&self, scope: &str, id: &Value) -> Arc<AtomicBool> {
        let mut calls = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Arc::clone(calls.entry(key(scope, id)).or_default())
    }

    /// Forgets call `id` of `scope` (answered, or never to be).
    pub(crate) fn forget(&self, scope: &str, id: &Value) {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key(scope, id));
    }

    /// Raises the flag of every call in flight of `scope` (its client went away); the empty scope
    /// is every call.
    pub(crate) fn cancel_all(&self, scope: &str) {
        let calls = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (_, flag) in calls.iter().filter(|(k, _)| k.starts_with(scope)) {
            flag.store(true, Ordering::SeqCst);
        }
    }

    /// The answer to a request (`None`: a call the client cancelled, which gets none).
    pub(crate) fn answer(
        &self,
        scope: &str,
        id: Value,
        method: &str,
        params: &Value,
        notify: Notify<'_>,
    ) -> Option<Value> {
        Some(match method {
            "initialize" => {
                let asked = params.get("protocolVersion").and_then(Value::as_str);
                let version = asked
                    .filter(|v| VERSIONS.contains(v))
                    .unwrap_or(PROTOCOL_VERSION);
                result(
                    id,
                    json!({
                        "protocolVersion": version,
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": self.info.name, "version": self.info.version},
                    }),
                )
            }
            "ping" => result(id, json!({})),
            "tools/list" => {
                let tools: Vec<Value> = self
                    .handler
                    .tools()
                    .into_iter()
                    .map(|t| json!({"name": t.name, "description": t.description, "inputSchema": t.input_schema}))
                    .collect();
                result(id, json!({"tools": tools}))
            }
            "tools/call" => return self.call(scope, id, params, notify),
            other => error(id, METHOD_NOT_FOUND, &format!("method not found: {other}")),
        })
    }

    fn call(&self, scope: &str, id: Value, params: &Value, notify: Notify<'_>) -> Option<Value> {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            self.forget(scope, &id);
            return Some(error(
                id,
                INVALID_PARAMS,
                "tools/call needs the tool's name",
            ));
        };
        let empty = Map::new();
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(arguments)) => arguments,
            Some(_) => {
                self.forget(scope, &id);
                return Some(error(
                    id,
                    INVALID_PARAMS,
                    "a tool's arguments are an object",
                ));
            }
        };
        let running = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        if running > MAX_CALLS {
            self.forget(scope, &id);
            return Some(error(
                id,
                INTERNAL_ERROR,
                &format!("{MAX_CALLS} tool calls are running already: try again once some end"),
            ));
        }
        let call = Call {
            cancelled: self.register(scope, &id),
            progress_token: params.pointer("/_meta/progressToken").cloned(),
            notify,
        };
        // A tool that panics is a bug of the server's: the client gets an error, not silence.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.handler.call(name, arguments, &call)
        }));
        self.forget(scope, &id);
        let Ok(outcome) = outcome else {
            return Some(error(
                id,
                INTERNAL_ERROR,
                &format!("the tool {name} failed unexpectedly (a bug of the server)"),
            ));
        };
        if call.cancelled.load(Ordering::SeqCst) {
            return None;
        }
        Some(match outcome {
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
        })
    }
}

/// The key of call `id` of the client `scope` names.
fn key(scope: &str, id: &Value) -> String {
    format!("{scope}{id}")
}

pub(crate) fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}
