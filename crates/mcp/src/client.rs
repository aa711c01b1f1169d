//! The client: the MCP lifecycle (initialize, tools/list, tools/call, cancellation) over either
//! transport.

use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::http::Http;
use crate::jsonrpc::{self, Flags};
use crate::stdio::Stdio;
use crate::tools::{self, CallResult, ToolInfo};
use crate::{McpError, Options};

/// The protocol version this client asks for; whatever the server answers is accepted.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// The most `tools/list` pages followed (a server that keeps sending cursors is broken).
const MAX_PAGES: usize = 1000;

/// A transport.
enum Transport {
    Stdio(Stdio),
    Http(Http),
}

/// A connection to one MCP server, initialized and ready for `tools/list` and `tools/call`.
pub struct Client {
    transport: Transport,
    server_info: Value,
    next_id: u64,
    options: Options,
    flags: Flags,
    /// Raised by the caller to give up on the request in progress (stdio).
    cancel: Option<Arc<AtomicBool>>,
}

impl Client {
    /// Speaks MCP over a spawned child's stdin and stdout (newline-delimited JSON-RPC). The caller
    /// spawns the child with piped stdin and stdout (stderr is the caller's business), so that it
    /// can put it in a process group and record it. Runs `initialize` and
    /// `notifications/initialized`. The child is killed if this fails.
    pub fn stdio(child: Child, options: Options) -> Result<Client, McpError> {
        let flags = Flags::default();
        let transport = Transport::Stdio(Stdio::new(child, flags.clone())?);
        Self::initialize(transport, options, flags)
    }

    /// Speaks MCP's streamable HTTP transport with the endpoint `url`, sending `headers` (e.g.
    /// `Authorization`) with every message. Runs `initialize` and `notifications/initialized`.
    pub fn http(
        url: &str,
        headers: &[(String, String)],
        options: Options,
    ) -> Result<Client, McpError> {
        let flags = Flags::default();
        let transport = Transport::Http(Http::new(url, headers, flags.clone()));
        Self::initialize(transport, options, flags)
    }

    fn initialize(
        transport: Transport,
        options: Options,
        flags: Flags,
    ) -> Result<Client, McpError> {
        let mut client = Client {
            transport,
            server_info: Value::Null,
            next_id: 1,
            cancel: None,
            options,
            flags,
        };
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": client.options.client.name, "version": client.options.client.version},
        });
        let info = client.request("initialize", Some(params), None)?;
        if !info.is_object() {
            return Err(McpError::Protocol(format!(
                "initialize answered with {info}"
            )));
        }
        if let (Transport::Http(http), Some(version)) = (
            &mut client.transport,
            info.get("protocolVersion").and_then(Value::as_str),
        ) {
            http.set_protocol_version(version);
        }
        client.server_info = info;
        let wait = client.options.timeout;
        client.notify("notifications/initialized", None, wait)?;
        if let Transport::Http(http) = &client.transport {
            http.listen(client.options.timeout);
        }
        Ok(client)
    }

    /// The `initialize` result: `serverInfo`, `capabilities`, `protocolVersion`, `instructions`.
    pub fn server_info(&self) -> &Value {
        &self.server_info
    }

    /// The server's tools (`tools/list`, following `nextCursor` through every page). Clears
    /// [`Client::tools_changed`].
    pub fn list_tools(&mut self) -> Result<Vec<ToolInfo>, McpError> {
        self.flags.clear_tools_changed();
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = cursor.as_ref().map(|c| json!({"cursor": c}));
            let page = self.request("tools/list", params, None)?;
            let listed = page.get("tools").and_then(Value::as_array).ok_or_else(|| {
                McpError::Protocol(format!("tools/list answered without a tools array: {page}"))
            })?;
            for tool in listed {
                tools.push(ToolInfo::from_json(tool)?);
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
                _ => return Ok(tools),
            }
        }
        Err(McpError::Protocol(format!(
            "tools/list sent more than {MAX_PAGES} pages"
        )))
    }

    /// Calls tool `name` (`tools/call`). `timeout` overrides [`Options::timeout`]; when it passes,
    /// the request is cancelled (`notifications/cancelled`) and the call fails with
    /// [`McpError::Timeout`]. A message from the server longer than [`crate::MAX_MESSAGE`] fails it
    /// with [`McpError::TooLarge`]. A failure the tool reports itself is a result with `is_error`.
    pub fn call_tool(
        &mut self,
        name: &str,
        arguments: Map<String, Value>,
        timeout: Option<Duration>,
    ) -> Result<CallResult, McpError> {
        let params = tools::call_params(name, arguments);
        let result = self.request("tools/call", Some(params), timeout)?;
        if !result.is_object() {
            return Err(McpError::Protocol(format!(
                "tools/call {name} answered with {result}"
            )));
        }
        Ok(CallResult::from_json(result))
    }

    /// Gives up on a request in progress once `flag` is raised (a Ctrl-C, say): the request is
    /// cancelled (`notifications/cancelled`) and fails with [`McpError::Cancelled`]. Over stdio the
    /// flag is looked at every few milliseconds; an HTTP request runs to its answer or timeout.
    pub fn cancel_when(&mut self, flag: Arc<AtomicBool>) {
        self.cancel = Some(flag);
    }

    /// Whether the server said its tools changed (`notifications/tools/list_changed`) since the last
    /// [`Client::list_tools`]. Check it before each call or model turn.
    pub fn tools_changed(&self) -> bool {
        self.flags.tools_changed()
    }

    /// The server's process id (stdio), or `None` (HTTP).
    pub fn pid(&self) -> Option<u32> {
        match &self.transport {
            Transport::Stdio(stdio) => Some(stdio.pid()),
            Transport::Http(_) => None,
        }
    }

    /// Ends the connection: stdio closes the child's stdin, waits briefly, then kills it; HTTP sends
    /// a DELETE with the session id (best effort).
    pub fn close(self) {
        match self.transport {
            Transport::Stdio(stdio) => stdio.close(),
            Transport::Http(http) => drop(http),
        }
    }

    /// Sends request `method` and waits for its result; a timeout cancels it.
    fn request(
        &mut self,
        method: &str,
        params: Option<Value>,
        timeout: Option<Duration>,
    ) -> Result<Value, McpError> {
        let id = self.next_id;
        self.next_id += 1;
        let timeout = timeout.unwrap_or(self.options.timeout);
        let message = jsonrpc::request(id, method, params);
        let answer = match &mut self.transport {
            Transport::Stdio(stdio) => stdio.request(id, &message, timeout, self.cancel.as_deref()),
            Transport::Http(http) => http.request(id, &message, timeout),
        };
        match answer {
            Ok(message) => jsonrpc::result_of(method, message),
            Err(McpError::Timeout { method, after }) => {
                let reason = format!("no answer within {after:?}");
                let params = json!({"requestId": id, "reason": reason});
                // Best effort: the timeout is what the caller needs to hear about.
                let _ = self.notify("notifications/cancelled", Some(params), Duration::ZERO);
                Err(McpError::Timeout { method, after })
            }
            Err(McpError::Cancelled { method }) => {
                let params = json!({"requestId": id, "reason": "the client was interrupted"});
                let _ = self.notify("notifications/cancelled", Some(params), Duration::ZERO);
                Err(McpError::Cancelled { method })
            }
            Err(other) => Err(other),
        }
    }

    /// Sends notification `method`; over stdio, waits up to `wait` for room in a full queue (a
    /// server that reads nothing), HTTP takes up to [`Options::timeout`].
    fn notify(
        &mut self,
        method: &str,
        params: Option<Value>,
        wait: Duration,
    ) -> Result<(), McpError> {
        let message = jsonrpc::notification(method, params);
        match &mut self.transport {
            Transport::Stdio(stdio) => stdio.send(&message, wait),
            Transport::Http(http) => http.send(&message, self.options.timeout),
        }
    }
}
