//! The streamable HTTP transport (MCP 2025-06-18): every message is POSTed to one endpoint; the answer
//! to a request is one JSON message or a server-sent-event stream that carries the server's own
//! requests and notifications before the response. After `initialize`, a GET opens the stream on
//! which the server sends what belongs to no request (`notifications/tools/list_changed`, its own
//! requests); a reader thread handles it until the server ends it (the DELETE of `close` does).
//! An answer's body, and each event of a stream, is held up to [`MAX_MESSAGE`] bytes: a longer event
//! fails the request it answers ([`McpError::TooLarge`]); on the server's own stream it is dropped.

use std::io::Read;
use std::time::Duration;

use llm::sse::SseParser;
use serde_json::Value;
use ureq::http::Response;

use crate::jsonrpc::{self, Flags};
use crate::{MAX_MESSAGE, McpError};

/// The largest JSON answer read (an event of a stream is held up to [`MAX_MESSAGE`] too).
const BODY_LIMIT: u64 = MAX_MESSAGE as u64;
/// How much of an error answer's body [`McpError::Http`] keeps.
const EXCERPT_CHARS: usize = 500;
/// How long `close` waits for the server to take its DELETE.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the answer to one of the server's requests may take to deliver.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection to an MCP endpoint.
pub(crate) struct Http {
    agent: ureq::Agent,
    url: String,
    headers: Vec<(String, String)>,
    session: Option<String>,
    protocol_version: Option<String>,
    flags: Flags,
}

impl Http {
    /// A connection to `url` that sends `headers` with every message. Proxies from the environment
    /// are honoured except for loopback endpoints.
    pub(crate) fn new(url: &str, headers: &[(String, String)], flags: Flags) -> Self {
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .user_agent(concat!("delta-mcp/", env!("CARGO_PKG_VERSION")));
        if is_loopback(url) {
            config = config.proxy(None);
        }
        Self {
            agent: config.build().new_agent(),
            url: url.to_string(),
            headers: headers.to_vec(),
            session: None,
            protocol_version: None,
            flags,
        }
    }

    /// Sends the `MCP-Protocol-Version` header from now on.
    pub(crate) fn set_protocol_version(&mut self, version: &str) {
        self.protocol_version = Some(version.to_string());
    }

    /// Sends request `id` and returns its response (the whole message), answering the server's
    /// requests and noting its notifications on the way. `initialize` takes the session id.
    pub(crate) fn request(
        &mut self,
        id: u64,
        message: &Value,
        timeout: Duration,
    ) -> Result<Value, McpError> {
        let method = message.get("method").and_then(Value::as_str).unwrap_or("");
        let mut response = self.post(message, timeout)?;
        if method == "initialize" {
            let session = response.headers().get("mcp-session-id");
            self.session = session.and_then(|v| v.to_str().ok()).map(str::to_string);
        }
        let content_type = response.headers().get("content-type");
        let content_type = content_type.and_then(|v| v.to_str().ok()).unwrap_or("");
        let answer = if content_type.starts_with("text/event-stream") {
            self.read_stream(response.into_body(), id, method, timeout)?
        } else {
            let body = response
                .body_mut()
                .with_config()
                .limit(BODY_LIMIT)
                .read_to_vec();
            let body = body.map_err(|e| failure(e, &self.url, method, timeout))?;
            self.dispatch(&String::from_utf8_lossy(&body), id)
        };
        answer.ok_or_else(|| {
            McpError::Protocol(format!(
                "{} sent no answer to {method} (request {id})",
                self.url
            ))
        })
    }

    /// Sends a notification or a response (the server answers 202 Accepted).
    pub(crate) fn send(&mut self, message: &Value, timeout: Duration) -> Result<(), McpError> {
        self.post(message, timeout).map(drop)
    }

    /// POSTs `message`; an answer other than 2xx is an [`McpError::Http`].
    fn post(&self, message: &Value, timeout: Duration) -> Result<Response<ureq::Body>, McpError> {
        post(
            &self.agent,
            &self.url,
            &self.all_headers(),
            message,
            timeout,
        )
    }

    /// The headers every message carries: the caller's, then the session's.
    fn all_headers(&self) -> Vec<(String, String)> {
        let mut headers = self.headers.clone();
        if let Some(session) = &self.session {
            headers.push(("mcp-session-id".into(), session.clone()));
        }
        if let Some(version) = &self.protocol_version {
            headers.push(("mcp-protocol-version".into(), version.clone()));
        }
        headers
    }

    /// Opens the server's own stream (a GET) and starts the thread that reads it; waits `timeout` at
    /// most for the server to accept it. A server that offers none (405) or refuses is not an error:
    /// it then sends only what answers requests.
    pub(crate) fn listen(&self, timeout: Duration) {
        let headers = self.all_headers();
        let mut request = self
            .agent
            .get(&self.url)
            .header("accept", "text/event-stream");
        for (name, value) in &headers {
            request = request.header(name, value);
        }
        let request = request
            .config()
            .timeout_recv_response(Some(timeout))
            .build();
        let Ok(response) = request.call() else { return };
        if response.status().as_u16() != 200 {
            return;
        }
        let listener = Listener {
            agent: self.agent.clone(),
            url: self.url.clone(),
            headers,
            flags: self.flags.clone(),
        };
        let body = response.into_body();
        let _ = std::thread::Builder::new()
            .name("mcp-http-listen".into())
            .spawn(move || listener.run(body));
    }

    /// Reads an event stream until the response to request `id`.
    fn read_stream(
        &self,
        body: ureq::Body,
        id: u64,
        method: &str,
        timeout: Duration,
    ) -> Result<Option<Value>, McpError> {
        let mut reader = body.into_reader();
        let mut parser = SseParser::with_limit(MAX_MESSAGE);
        let mut buffer = vec![0; 16 * 1024];
        loop {
            let read = reader
                .read(&mut buffer)
                .map_err(|e| failure(e.into(), &self.url, method, timeout))?;
            let events = if read == 0 {
                parser.finish()
            } else {
                parser.feed(&buffer[..read])
            };
            for event in events {
                if let Some(answer) = self.dispatch(&event.data, id) {
                    return Ok(Some(answer));
                }
            }
            if parser.cut() > 0 {
                // Dropping the body ends the stream: nothing more of the event is read.
                return Err(McpError::TooLarge {
                    method: method.to_string(),
                    limit: MAX_MESSAGE,
                });
            }
            if read == 0 {
                return Err(McpError::Closed {
                    reason: format!("the event stream of {method} ended before its answer"),
                });
            }
        }
    }

    /// Handles the messages in `text` and returns the response to request `id`, if it is there.
    fn dispatch(&self, text: &str, id: u64) -> Option<Value> {
        // Best effort: a server that does not get its answer times out on its side.
        let reply = |answer: &Value| drop(self.post(answer, ANSWER_TIMEOUT));
        let responses = jsonrpc::handle(text, &self.flags, reply);
        let mut ours = responses
            .into_iter()
            .filter(|(answered, _)| jsonrpc::is_answer_to(answered, id));
        ours.next().map(|(_, message)| message)
    }
}

impl Drop for Http {
    /// Ends the session: a DELETE with its id (best effort; a server may refuse it with 405).
    fn drop(&mut self) {
        if let Some(session) = &self.session {
            let request = self
                .agent
                .delete(&self.url)
                .header("mcp-session-id", session);
            let request = request.config().timeout_global(Some(CLOSE_TIMEOUT)).build();
            let _ = request.call();
        }
    }
}

/// The reader of the server's own stream.
struct Listener {
    agent: ureq::Agent,
    url: String,
    headers: Vec<(String, String)>,
    flags: Flags,
}

impl Listener {
    /// Handles the stream's messages until it ends; an event over [`MAX_MESSAGE`] is dropped.
    fn run(self, body: ureq::Body) {
        let mut reader = body.into_reader();
        let mut parser = SseParser::with_limit(MAX_MESSAGE);
        let mut buffer = vec![0; 16 * 1024];
        while let Ok(read @ 1..) = reader.read(&mut buffer) {
            for event in parser.feed(&buffer[..read]) {
                let reply = |answer: &Value| {
                    drop(post(
                        &self.agent,
                        &self.url,
                        &self.headers,
                        answer,
                        ANSWER_TIMEOUT,
                    ));
                };
                jsonrpc::handle(&event.data, &self.flags, reply);
            }
        }
    }
}

/// POSTs `message` to `url` with `headers`; an answer other than 2xx is an [`McpError::Http`].
fn post(
    agent: &ureq::Agent,
    url: &str,
    headers: &[(String, String)],
    message: &Value,
    timeout: Duration,
) -> Result<Response<ureq::Body>, McpError> {
    let mut request = agent
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let request = request.config().timeout_global(Some(timeout)).build();
    let body = serde_json::to_vec(message).map_err(|e| McpError::Protocol(e.to_string()))?;
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or("response");
    let mut response = request
        .send(&body[..])
        .map_err(|e| failure(e, url, method, timeout))?;
    let status = response.status().as_u16();
    if (200..300).contains(&status) {
        return Ok(response);
    }
    let mut excerpt = Vec::new();
    let reader = response.body_mut().as_reader();
    let _ = reader
        .take(4 * EXCERPT_CHARS as u64)
        .read_to_end(&mut excerpt);
    Err(McpError::Http {
        url: url.to_string(),
        status,
        body: String::from_utf8_lossy(&excerpt)
            .chars()
            .take(EXCERPT_CHARS)
            .collect(),
    })
}

/// The error for a failed request: [`McpError::Timeout`] when it ran out of time.
fn failure(error: ureq::Error, url: &str, method: &str, timeout: Duration) -> McpError {
    let timed_out = match &error {
        ureq::Error::Timeout(_) => true,
        ureq::Error::Io(e) => e.kind() == std::io::ErrorKind::TimedOut,
        _ => false,
    };
    if timed_out {
        return McpError::Timeout {
            method: method.to_string(),
            after: timeout,
        };
    }
    McpError::Transport {
        url: url.to_string(),
        source: Box::new(error),
    }
}

/// Whether `url` names this machine (`localhost`, 127.0.0.0/8, `::1`).
fn is_loopback(url: &str) -> bool {
    let Ok(uri) = url.parse::<ureq::http::Uri>() else {
        return false;
    };
    let host = uri.host().unwrap_or("");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
