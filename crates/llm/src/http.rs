//! The HTTP transport shared by the adapters: timeouts, retries and error mapping.

use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::error::{LlmError, ResponseBody};
use crate::printable::{printable, printable_bytes};
use crate::retry::{RetryNotice, RetryPolicy, jitter, parse_retry_after};
use crate::secret::ApiKey;
use crate::sse::{SseEvent, SseParser};
use crate::types::{ChatResponse, ContentBlock, StreamEvent};

/// Called before each retry wait, e.g. to tell the user what is going on.
pub type RetryHook = Arc<dyn Fn(&RetryNotice) + Send + Sync>;

/// Transport settings.
#[derive(Clone)]
pub struct HttpOptions {
    /// Limit for one whole request, answer included (default 10 minutes).
    pub timeout: Duration,
    /// Limit for a silence: no byte from the server for this long ends the request with
    /// [`LlmError::Idle`] (default 2 minutes). It covers the wait for the first byte too, so for a
    /// non-streamed request it also bounds how long the server may think before it answers.
    pub idle_timeout: Duration,
    /// Limit for establishing the connection (default 10 s).
    pub connect_timeout: Duration,
    /// Retry policy.
    pub retry: RetryPolicy,
    /// Told about each retry.
    pub on_retry: Option<RetryHook>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(600),
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            on_retry: None,
        }
    }
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpOptions")
            .field("timeout", &self.timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("retry", &self.retry)
            .field("on_retry", &self.on_retry.as_ref().map(|_| "<hook>"))
            .finish()
    }
}

/// Default [`HttpOptions::idle_timeout`].
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// How much of a server's text an error message shows.
const SHOWN_CHARS: usize = 500;

/// The time limits of one request, for mapping the errors of reading an answer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The whole request.
    pub(crate) total: Duration,
    /// A silence.
    pub(crate) idle: Duration,
}

/// Largest error body we read.
const MAX_ERROR_BODY: u64 = 64 * 1024;
/// Largest non-streamed answer we accept.
const MAX_RESPONSE_BODY: u64 = 64 * 1024 * 1024;

/// The body of a successful answer and its content type.
pub(crate) struct HttpBody {
    pub(crate) body: ureq::Body,
    pub(crate) content_type: Option<String>,
}

impl HttpBody {
    /// Whether the server answered with a plain JSON document (some servers ignore `stream: true`).
    pub(crate) fn is_json(&self) -> bool {
        self.content_type
            .as_deref()
            .is_some_and(|t| t.starts_with("application/json"))
    }
}

pub(crate) struct Http {
    agent: ureq::Agent,
    options: HttpOptions,
}

impl Http {
    /// A transport for requests to `url`. Proxies from the environment (`HTTPS_PROXY`, `NO_PROXY`, …)
    /// are honoured, except for loopback addresses, which are always reached directly.
    pub(crate) fn new(options: HttpOptions, url: &str) -> Self {
        let mut builder = ureq::Agent::config_builder();
        if is_loopback(url) {
            builder = builder.proxy(None);
        }
        // No connection reuse: calls are seconds apart, and a fresh connection per request means a
        // broken connection after sending unambiguously reached the server (see `ConnectionLost`).
        let agent = builder
            .max_idle_connections(0)
            .max_idle_connections_per_host(0)
            .http_status_as_error(false)
            .timeout_global(Some(options.timeout))
            .timeout_per_read(Some(options.idle_timeout))
            .timeout_connect(Some(options.connect_timeout))
            .user_agent(concat!("delta-dygram-llm/", env!("CARGO_PKG_VERSION")))
            .build();
        let agent = ureq::Agent::with_parts(
            agent,
            ureq::unversioned::transport::DefaultConnector::default(),
            LiteralFirst::default(),
        );
        Self { agent, options }
    }

    pub(crate) fn limits(&self) -> Limits {
        Limits {
            total: self.options.timeout,
            idle: self.options.idle_timeout,
        }
    }

    /// POSTs the JSON `payload` to `url` and returns the body of a 2xx answer, retrying as the
    /// policy says. Everything the server says in errors passes through `key`'s redaction.
    ///
    /// The idle limit (no byte for [`HttpOptions::idle_timeout`]) applies from the start to a
    /// [`Delivery::Streamed`] answer, which a server begins at once. A [`Delivery::Whole`] answer
    /// comes only once the model has finished, however long it thinks, so there the limit starts with
    /// the server's answer: its body must not stall; the wait before it is bounded by the overall
    /// timeout.
    pub(crate) fn post_json(
        &self,
        url: &str,
        headers: &[(&str, String)],
        payload: &[u8],
        key: Option<&ApiKey>,
        delivery: Delivery,
    ) -> Result<HttpBody, LlmError> {
        let policy = &self.options.retry;
        let max = policy.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            let (err, retry_after) = match self.send_once(url, headers, payload, key, delivery) {
                Ok(body) => return Ok(body),
                Err(failure) => failure,
            };
            if !err.is_retryable() || attempt >= max {
                return Err(err);
            }
            let delay = policy.delay(attempt, retry_after, jitter());
            if let Some(hook) = &self.options.on_retry {
                hook(&RetryNotice {
                    attempt,
                    max_attempts: max,
                    delay,
                    error: err.to_string(),
                });
            }
            std::thread::sleep(delay);
            attempt += 1;
        }
    }

    fn send_once(
        &self,
        url: &str,
        headers: &[(&str, String)],
        payload: &[u8],
        key: Option<&ApiKey>,
        delivery: Delivery,
    ) -> Result<HttpBody, (LlmError, Option<Duration>)> {
        let mut request = self
            .agent
            .post(url)
            .header("content-type", "application/json");
        if delivery == Delivery::Whole {
            request = request
                .config()
                .timeout_per_read(None)
                .timeout_recv_body(Some(self.options.idle_timeout))
                .build();
        }
        for (name, value) in headers {
            request = request.header(*name, value.as_str());
        }
        let response = request
            .send(payload)
            .map_err(|e| (transport_error(e, url, self.limits()), None))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            let content_type = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .map(|v| v.to_ascii_lowercase());
            return Ok(HttpBody {
                body: response.into_body(),
                content_type,
            });
        }
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let retry_after = parse_retry_after(
            header("retry-after-ms").as_deref(),
            header("retry-after").as_deref(),
        );
        // Bytes, not a string: a body that is not UTF-8 is still shown (and kept) as it came.
        let mut bytes = Vec::new();
        let _ = response
            .into_body()
            .into_with_config()
            .limit(MAX_ERROR_BODY)
            .reader()
            .read_to_end(&mut bytes);
        let mut message = error_message(&String::from_utf8_lossy(&bytes), status);
        if let Some(key) = key {
            message = key.redact(&message);
        }
        let body = if bytes.is_empty() {
            ResponseBody::none()
        } else {
            ResponseBody::new(bytes)
        };
        let err = LlmError::from_status(status, message, retry_after, body);
        Err((
            match key {
                Some(key) => err.redacted(key),
                None => err,
            },
            retry_after,
        ))
    }
}

/// How an answer arrives, which decides when the idle limit applies (see [`Http::post_json`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// One body, sent once the answer is complete.
    Whole,
    /// Server-sent events, as the answer is produced.
    Streamed,
}

/// Encodes a request body once, so the exact bytes sent can also be kept for the record. The buffer
/// is sized from `request` up front: conversations of a long run are megabytes.
pub(crate) fn encode(
    body: &impl serde::Serialize,
    request: &crate::ChatRequest,
) -> Result<std::sync::Arc<Vec<u8>>, LlmError> {
    let mut buffer = Vec::with_capacity(request.approximate_size());
    serde_json::to_writer(&mut buffer, body).map_err(|e| LlmError::Decode {
        message: format!("cannot encode the request: {e}"),
        body: ResponseBody::none(),
    })?;
    Ok(std::sync::Arc::new(buffer))
}

/// Reads a whole (non-streamed) answer body.
pub(crate) fn read_body(body: HttpBody, url: &str, limits: Limits) -> Result<Vec<u8>, LlmError> {
    let mut bytes = Vec::new();
    body.body
        .into_with_config()
        .limit(MAX_RESPONSE_BODY)
        .reader()
        .read_to_end(&mut bytes)
        .map_err(|e| body_read_error(e, url, limits))?;
    Ok(bytes)
}

/// Turns server-sent events into one answer (one implementation per protocol).
pub(crate) trait StreamAssembly {
    /// Parses an answer the server sent as a plain JSON document instead of a stream.
    fn parse_whole(bytes: &[u8]) -> Result<ChatResponse, LlmError>;
    /// Takes the next event, reporting progress through `on_event`.
    fn event(
        &mut self,
        event: &SseEvent,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<(), LlmError>;
    /// Whether the protocol's end marker has arrived.
    fn is_done(&self) -> bool;
    /// The whole answer, or an error if the stream was not complete.
    fn finish(self) -> Result<ChatResponse, LlmError>;
}

/// Reads an event stream into `assembly` until its end marker or the end of the body.
pub(crate) fn read_stream<A: StreamAssembly>(
    body: HttpBody,
    url: &str,
    limits: Limits,
    mut assembly: A,
    on_event: &mut dyn FnMut(StreamEvent),
) -> Result<ChatResponse, LlmError> {
    if body.is_json() {
        // The server ignored `stream: true`; take the whole answer and report it as one batch.
        let bytes = read_body(body, url, limits)?;
        let response = A::parse_whole(&bytes).map_err(|e| with_body(e, &bytes))?;
        report_whole(&response, on_event);
        return Ok(response);
    }
    let content_type = body.content_type.clone();
    let mut reader = body.body.into_reader();
    let mut parser = SseParser::new();
    let mut buf = [0u8; 8192];
    // The first bytes, to show what arrived when it was not an event stream.
    let mut head: Vec<u8> = Vec::new();
    let mut events = 0usize;
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| body_read_error(e, url, limits))?;
        if n == 0 {
            break;
        }
        if head.len() < HEAD_BYTES {
            head.extend_from_slice(&buf[..n.min(HEAD_BYTES - head.len())]);
        }
        for event in parser.feed(&buf[..n]) {
            events += 1;
            assembly.event(&event, on_event)?;
            if assembly.is_done() {
                return assembly.finish();
            }
        }
    }
    for event in parser.finish() {
        events += 1;
        assembly.event(&event, on_event)?;
    }
    if events == 0 && !head.is_empty() {
        return Err(LlmError::decode(
            format!(
                "a streaming request was answered with something that is not an event stream \
                 (content type {}): {}",
                printable(content_type.as_deref().unwrap_or("none"), 100),
                printable_bytes(head.trim_ascii(), 200)
            ),
            &head,
        ));
    }
    assembly.finish()
}

/// How much of a body that is not an event stream is kept (and its first 200 characters shown).
const HEAD_BYTES: usize = 4096;

/// Attaches the answer's body to a `Decode` error about it.
pub(crate) fn with_body(err: LlmError, bytes: &[u8]) -> LlmError {
    match err {
        LlmError::Decode { message, .. } => LlmError::decode(message, bytes),
        other => other,
    }
}

/// Reports a whole answer to a streaming caller as one batch of events.
pub(crate) fn report_whole(response: &ChatResponse, on_event: &mut dyn FnMut(StreamEvent)) {
    let mut call_index = 0;
    for block in &response.content {
        match block {
            ContentBlock::Text { text } if !text.is_empty() => {
                on_event(StreamEvent::TextDelta(text.clone()))
            }
            ContentBlock::ToolCall {
                name, arguments, ..
            } => {
                on_event(StreamEvent::ToolCallStarted {
                    index: call_index,
                    name: name.clone(),
                });
                on_event(StreamEvent::ToolCallDelta {
                    index: call_index,
                    fragment: arguments.to_string(),
                });
                call_index += 1;
            }
            _ => {}
        }
    }
}

/// Whether `url` points at this machine (`localhost`, `127.0.0.0/8`, `[::1]`).
fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host.split(':').next().unwrap_or("")
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Maps a ureq failure to our error type: failures to connect are `Transport`, a connection that
/// broke after the request may have been sent is `ConnectionLost` (both retried); TLS, protocol and
/// URL problems are `Protocol` (not retried).
pub(crate) fn transport_error(err: ureq::Error, url: &str, limits: Limits) -> LlmError {
    use std::io::ErrorKind as K;
    use ureq::Timeout as T;
    let unreachable = |message: String| LlmError::Transport {
        url: url.to_string(),
        message,
    };
    match err {
        ureq::Error::Timeout(T::Connect | T::Resolve) => unreachable("connection timed out".into()),
        ureq::Error::Timeout(T::PerRead | T::RecvBody) => LlmError::Idle { after: limits.idle },
        ureq::Error::Timeout(_) => LlmError::Timeout {
            after: limits.total,
        },
        ureq::Error::HostNotFound => unreachable("host not found".into()),
        ureq::Error::ConnectionFailed => unreachable("connection failed".into()),
        ureq::Error::Io(e) => match e.kind() {
            K::TimedOut => LlmError::Timeout {
                after: limits.total,
            },
            K::ConnectionRefused
            | K::NotConnected
            | K::AddrNotAvailable
            | K::NetworkUnreachable
            | K::HostUnreachable
            | K::NetworkDown => unreachable(e.to_string()),
            _ => LlmError::ConnectionLost {
                url: url.to_string(),
                message: e.to_string(),
            },
        },
        // TLS, protocol and URL problems: retrying would not help.
        other => LlmError::Protocol {
            url: url.to_string(),
            message: printable(&other.to_string(), SHOWN_CHARS),
        },
    }
}

/// Maps an error while reading an answer's body.
pub(crate) fn body_read_error(err: std::io::Error, url: &str, limits: Limits) -> LlmError {
    match transport_error(ureq::Error::from(err), url, limits) {
        LlmError::Transport { message, .. }
        | LlmError::ConnectionLost { message, .. }
        | LlmError::Protocol { message, .. } => LlmError::IncompleteStream {
            message: format!("the connection broke while the answer was arriving: {message}"),
        },
        other => other,
    }
}

/// Pulls a readable message out of an error body (OpenAI, Anthropic and common server shapes).
pub(crate) fn error_message(body: &str, status: u16) -> String {
    let trimmed = body.trim();
    if trimmed.is_empty() {
        return format!("HTTP {status} with an empty body");
    }
    if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
        let error = v.get("error").unwrap_or(&v);
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .or_else(|| error.as_str())
            .or_else(|| v.get("detail").and_then(Value::as_str))
            .or_else(|| v.get("message").and_then(Value::as_str));
        let kind = error
            .get("code")
            .and_then(Value::as_str)
            .or_else(|| error.get("type").and_then(Value::as_str));
        let show = |t: &str| printable(t, SHOWN_CHARS);
        match (message, kind) {
            (Some(m), Some(k)) => return format!("{} ({})", show(m), printable(k, 100)),
            (Some(m), None) => return show(m),
            (None, Some(k)) => return printable(k, 100),
            (None, None) => {}
        }
    }
    printable(trimmed, SHOWN_CHARS)
}

/// Resolves a host written as an IP address (`127.0.0.1`, `[::1]`) at once, and any other name
/// with ureq's resolver. With a time limit set, that resolver looks a name up on a thread of its
/// own, one per connection; a local server's address needs no lookup, nor the thread.
#[derive(Debug, Default)]
struct LiteralFirst(ureq::unversioned::resolver::DefaultResolver);

impl ureq::unversioned::resolver::Resolver for LiteralFirst {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        let literal = uri.host().and_then(|host| {
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .ok()
        });
        let port = uri.port_u16().or(match uri.scheme_str() {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        });
        match (literal, port) {
            (Some(ip), Some(port)) => {
                let mut addrs = self.empty();
                addrs.push(std::net::SocketAddr::new(ip, port));
                Ok(addrs)
            }
            _ => self.0.resolve(uri, config, timeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_written_as_an_ip_is_resolved_without_a_lookup() {
        use ureq::unversioned::resolver::Resolver;
        let resolver = LiteralFirst::default();
        let config = ureq::config::Config::default();
        for (url, want) in [
            ("http://127.0.0.1:8080/v1", "127.0.0.1:8080"),
            ("http://[::1]:9/x", "[::1]:9"),
            ("https://10.0.0.2/v1", "10.0.0.2:443"),
            ("http://localhost:7/v1", "127.0.0.1:7"),
        ] {
            let uri: ureq::http::Uri = url.parse().unwrap();
            let found = resolver
                .resolve(
                    &uri,
                    &config,
                    ureq::unversioned::transport::NextTimeout::default(),
                )
                .unwrap();
            let found: Vec<String> = found.iter().map(ToString::to_string).collect();
            assert!(found.contains(&want.to_string()), "{url}: {found:?}");
        }
    }

    #[test]
    fn loopback_urls_are_recognised() {
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://localhost/v1",
            "http://[::1]:99/x",
            "http://127.1.2.3",
        ] {
            assert!(is_loopback(url), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "http://10.0.0.1:80",
            "http://localhost.example.com",
        ] {
            assert!(!is_loopback(url), "{url}");
        }
    }

    #[test]
    fn error_messages_from_common_shapes() {
        assert_eq!(
            error_message(
                r#"{"error":{"message":"bad model","type":"invalid_request_error"}}"#,
                400
            ),
            "bad model (invalid_request_error)"
        );
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                529
            ),
            "Overloaded (overloaded_error)"
        );
        assert_eq!(
            error_message(
                r#"{"error":{"message":"","type":"internal_server_error","code":null}}"#,
                500
            ),
            "internal_server_error"
        );
        assert_eq!(error_message(r#"{"detail":"Not Found"}"#, 404), "Not Found");
        assert_eq!(error_message(r#"{"error":"plain"}"#, 400), "plain");
        assert_eq!(error_message("", 502), "HTTP 502 with an empty body");
        assert_eq!(
            error_message("<html>gateway</html>", 502),
            "<html>gateway</html>"
        );
        assert!(error_message(&"é".repeat(600), 500).ends_with("… (1200 bytes in all)"));
    }
}
