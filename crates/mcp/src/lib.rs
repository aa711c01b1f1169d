//! A synchronous client for the Model Context Protocol (MCP): the tools of a server, over stdio (a
//! child process) or streamable HTTP; and the server side over stdio and streamable HTTP
//! ([`server`]), for a program that offers tools (`dygram mcp`, `delta mcp`).
//!
//! ```no_run
//! # use std::process::{Command, Stdio};
//! # use std::time::Duration;
//! let child = Command::new("my-mcp-server")
//!     .stdin(Stdio::piped())
//!     .stdout(Stdio::piped())
//!     .spawn()
//!     .unwrap();
//! let options = mcp::Options {
//!     timeout: Duration::from_secs(30),
//!     client: mcp::ClientInfo { name: "delta".into(), version: "0.1.0".into() },
//! };
//! let mut client = mcp::Client::stdio(child, options).unwrap();
//! for tool in client.list_tools().unwrap() {
//!     println!("{:?}", mcp::model_tool_name("files", &tool.name));
//! }
//! let result = client.call_tool("read", serde_json::Map::new(), None).unwrap();
//! println!("{}", result.text());
//! client.close();
//! ```
//!
//! Synchronous on purpose: the engine has one HTTP stack (`ureq`) and no async runtime in its run
//! path, and it needs four things of MCP (initialize, list, call, cancel), so the official `rmcp`
//! SDK (built on tokio) would cost more than it gives. The server's own requests are answered
//! (`ping` with an empty result, anything else with "method not found"), and
//! `notifications/tools/list_changed` is remembered for [`Client::tools_changed`].
//!
//! Tests run scripted servers and real ones (`scripts/install-mcp-servers` installs the reference
//! server `@modelcontextprotocol/server-everything` and the Python SDK). The overhead of a call is
//! measured by `cargo bench -p mcp --bench call`.

mod client;
mod error;
mod http;
mod jsonrpc;
pub mod server;
mod stdio;
mod tools;

use std::time::Duration;

/// The most bytes of one message from a server the client holds: a stdio line or an event of an
/// HTTP event stream (and an HTTP answer's body). A longer one is read to its end and dropped, and
/// the request waiting fails with [`McpError::TooLarge`]. The same bound as a tool's output in
/// delta (`delta::process::MAX_CAPTURE`, 64 MiB), which delta checks at compile time.
pub const MAX_MESSAGE: usize = 64 * 1024 * 1024;

pub use client::{Client, PROTOCOL_VERSION};
pub use error::McpError;
pub use tools::{CallResult, ToolInfo, model_tool_name};

/// Who the client says it is in `initialize`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    /// The client's name, e.g. `delta`.
    pub name: String,
    /// The client's version.
    pub version: String,
}

/// How a [`Client`] behaves.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long one request may take (a call may give its own).
    pub timeout: Duration,
    /// Who the client says it is.
    pub client: ClientInfo,
}
