//! What can go wrong talking to an MCP server.

use std::time::Duration;

use serde_json::Value;

/// An MCP client failure. Every variant names what it concerns (the server, the method, the URL).
#[derive(thiserror::Error, Debug)]
pub enum McpError {
    /// Reading, writing or starting something failed; `what` says what.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, e.g. "writing to the MCP server's stdin (pid 42)".
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The server went away: its stdout ended (stdio) or it stopped answering the session.
    #[error("the MCP server closed the connection: {reason}")]
    Closed {
        /// What is known: the child's exit status when it has exited, or why the connection ended.
        reason: String,
    },
    /// No answer within the time allowed; a `notifications/cancelled` was sent for the request.
    #[error("MCP request {method} got no answer within {after:?}")]
    Timeout {
        /// The request's method, e.g. `tools/call`.
        method: String,
        /// The time allowed.
        after: Duration,
    },
    /// The caller gave up on the request (see `Client::cancel_when`); a `notifications/cancelled` was
    /// sent for it.
    #[error("MCP request {method} was cancelled: the client was interrupted")]
    Cancelled {
        /// The request's method.
        method: String,
    },
    /// The server sent a message longer than [`crate::MAX_MESSAGE`] (a stdio line, an event of an
    /// HTTP event stream) while request `method` waited: it was read to its end and dropped, and the
    /// request fails.
    #[error(
        "the MCP server sent a message over the {limit}-byte limit while {method} waited for its answer; the message was cut (read and dropped)"
    )]
    TooLarge {
        /// The method of the request that waited.
        method: String,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The server answered with a JSON-RPC error.
    #[error("MCP server answered {method} with error {code}: {message}")]
    Rpc {
        /// The request's method.
        method: String,
        /// The JSON-RPC error code (e.g. -32601: method not found, -32602: invalid params).
        code: i64,
        /// The error's message.
        message: String,
        /// The error's `data`, if any.
        data: Option<Box<Value>>,
    },
    /// The server said something that is not valid MCP (bad JSON, a reply of the wrong shape).
    #[error("MCP protocol error: {0}")]
    Protocol(String),
    /// The HTTP endpoint answered with an error status.
    #[error("MCP endpoint {url} answered HTTP {status}: {body}")]
    Http {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the answer's body.
        body: String,
    },
    /// The HTTP request could not be made or its answer not read (connection refused, TLS, ...).
    #[error("MCP request to {url} failed: {source}")]
    Transport {
        /// The endpoint.
        url: String,
        /// The underlying error.
        #[source]
        source: Box<ureq::Error>,
    },
}

impl McpError {
    /// An [`McpError::Io`] for `what`.
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }
}
