//! MCP on streamable HTTP (2025-06-18): one endpoint takes every message as a POST. A request is
//! answered with one JSON message, except a tool call that asked for progress from a client that
//! takes event streams: its answer is a server-sent-event stream carrying the progress
//! notifications, then the result. A notification or response is taken with 202. `initialize`
//! opens a session (the `Mcp-Session-Id` header, which later messages must carry); DELETE ends it;
//! GET is refused (this server sends nothing outside the answers to requests).
//!
//! Each request is handled on its own thread, so a cancellation POSTed while a call runs is taken.
//! Requests from a page of another site are refused (their `Origin` must be a loopback host).

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tiny_http::{Header, Method, Request, Response, Server, StatusCode};

use super::{Core, Handler, INVALID_REQUEST, Received, ServerInfo, error};

/// The largest message taken.
const BODY_LIMIT: u64 = 16 * 1024 * 1024;
/// How often the accept loop looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);
const SESSION_HEADER: &str = "Mcp-Session-Id";

/// Where and how the endpoint is served.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The endpoint's path (usually `/mcp`).
    pub path: String,
}

/// Serves `handler` at `options.path` of `listener` until `stop` is raised; calls still running
/// then are cancelled and waited for.
pub fn serve_http(
    handler: &dyn Handler,
    info: &ServerInfo,
    listener: TcpListener,
    options: &HttpOptions,
    stop: &AtomicBool,
) -> io::Result<()> {
    let server = Server::from_listener(listener, None).map_err(io::Error::other)?;
    let endpoint = Endpoint {
        core: Core::new(handler, info),
        sessions: Mutex::new(HashSet::new()),
        path: &options.path,
    };
    std::thread::scope(|scope| {
        while !stop.load(Ordering::SeqCst) {
            if let Some(request) = server.recv_timeout(POLL)? {
                let endpoint = &endpoint;
                scope.spawn(move || endpoint.take(request));
            }
        }
        endpoint.core.cancel_all("");
        Ok(())
    })
}

struct Endpoint<'h> {
    core: Core<'h>,
    sessions: Mutex<HashSet<String>>,
    path: &'h str,
}

/// An answer that is a status and maybe a JSON message.
struct Plain {
    status: u16,
    body: Option<Value>,
    session: Option<String>,
}

impl Plain {
    fn status(status: u16) -> Self {
        Self {
            status,
            body: None,
            session: None,
        }
    }

    fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            body: Some(body),
            session: None,
        }
    }
}

impl Endpoint<'_> {
    fn take(&self, mut request: Request) {
        let answer = match self.check(&request) {
            Err(refusal) => refusal,
            Ok(()) => match request.method() {
                Method::Post => match read_body(&mut request) {
                    Ok(body) => return self.post(request, &body),
                    Err(answer) => answer,
                },
                Method::Delete => self.delete(&request),
                _ => Plain::json(
                    405,
                    error(
                        Value::Null,
                        INVALID_REQUEST,
                        "POST messages to this endpoint (DELETE ends a session)",
                    ),
                ),
            },
        };
        respond(request, answer);
    }

    /// The path, the origin and the session.
    fn check(&self, request: &Request) -> Result<(), Plain> {
        let path = request.url().split('?').next().unwrap_or_default();
        if path != self.path {
            return Err(Plain::json(
                404,
                error(
                    Value::Null,
                    INVALID_REQUEST,
                    &format!("the MCP endpoint is {}", self.path),
                ),
            ));
        }
        if let Some(origin) = header(request, "Origin")
            && !is_loopback_origin(&origin)
        {
            return Err(Plain::json(
                403,
                error(
                    Value::Null,
                    INVALID_REQUEST,
                    &format!("requests from {origin} are refused"),
                ),
            ));
        }
        Ok(())
    }

    /// A message that needs a session (all but `initialize`) names one this server opened.
    fn session(&self, request: &Request) -> Result<(), Plain> {
        let Some(id) = header(request, SESSION_HEADER) else {
            return Err(Plain::json(
                400,
                error(
                    Value::Null,
                    INVALID_REQUEST,
                    "missing the Mcp-Session-Id header (initialize first)",
                ),
            ));
        };
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if sessions.contains(&id) {
            Ok(())
        } else {
            Err(Plain::json(
                404,
                error(
                    Value::Null,
                    INVALID_REQUEST,
                    "unknown session (initialize again)",
                ),
            ))
        }
    }

    fn delete(&self, request: &Request) -> Plain {
        if let Err(refusal) = self.session(request) {
            return refusal;
        }
        if let Some(id) = header(request, SESSION_HEADER) {
            self.sessions
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
            // The client is done with the session: its calls still running are cancelled.
            self.core.cancel_all(&scope(&id));
        }
        Plain::status(200)
    }

    fn post(&self, request: Request, body: &str) {
        let received = Received::parse(body);
        if let Received::Invalid(answer) = received {
            return respond(request, Plain::json(400, answer));
        }
        let initialize =
            matches!(&received, Received::Request { method, .. } if method == "initialize");
        if !initialize && let Err(refusal) = self.session(&request) {
            return respond(request, refusal);
        }
        let client = scope(&header(&request, SESSION_HEADER).unwrap_or_default());
        let (id, method, params) = match received {
            Received::Invalid(_) => return,
            Received::Other => {
                self.core.notified(&client, body);
                return respond(request, Plain::status(202));
            }
            Received::Request { id, method, params } => (id, method, params),
        };
        let streams = header(&request, "Accept").is_some_and(|a| a.contains("text/event-stream"));
        if method == "tools/call" && streams && params.pointer("/_meta/progressToken").is_some() {
            return self.stream_call(request, &client, id, &params);
        }
        if method == "tools/call" {
            self.core.register(&client, &id);
        }
        let nothing = |_: &Value| {};
        let answer = match self.core.answer(&client, id, &method, &params, &nothing) {
            Some(answer) => answer,
            None => return respond(request, Plain::status(202)),
        };
        let mut plain = Plain::json(200, answer);
        if initialize {
            let session = uuid::Uuid::new_v4().simple().to_string();
            self.sessions
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(session.clone());
            plain.session = Some(session);
        }
        respond(request, plain);
    }

    /// A tool call answered with an event stream: its progress, then its result.
    fn stream_call(&self, request: Request, client: &str, id: Value, params: &Value) {
        let cancelled = self.core.register(client, &id);
        let session = header(&request, SESSION_HEADER).unwrap_or_default();
        let mut writer = request.into_writer();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
             Transfer-Encoding: chunked\r\n{SESSION_HEADER}: {session}\r\n\r\n"
        );
        if writer
            .write_all(head.as_bytes())
            .and_then(|()| writer.flush())
            .is_err()
        {
            self.core.forget(client, &id);
            return;
        }
        let writer = Mutex::new(writer);
        let send = |message: &Value| {
            let event = format!("event: message\ndata: {message}\n\n");
            let mut w = writer.lock().unwrap_or_else(PoisonError::into_inner);
            if write!(w, "{:x}\r\n{event}\r\n", event.len())
                .and_then(|()| w.flush())
                .is_err()
            {
                // The client went away: nobody waits for this call any more.
                cancelled.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        };
        if let Some(answer) = self.core.answer(client, id, "tools/call", params, &send) {
            send(&answer);
        }
        let mut w = writer.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = w.write_all(b"0\r\n\r\n").and_then(|()| w.flush());
    }
}

/// The scope of the calls of session `id` (a cancellation reaches only its own session's calls).
fn scope(id: &str) -> String {
    format!("{id}/")
}

fn read_body(request: &mut Request) -> Result<String, Plain> {
    let mut body = String::new();
    let read = request
        .as_reader()
        .take(BODY_LIMIT + 1)
        .read_to_string(&mut body);
    match read {
        Err(e) => Err(Plain::json(
            400,
            error(
                Value::Null,
                INVALID_REQUEST,
                &format!("unreadable body: {e}"),
            ),
        )),
        Ok(n) if n as u64 > BODY_LIMIT => Err(Plain::json(
            413,
            error(Value::Null, INVALID_REQUEST, "the message is too large"),
        )),
        Ok(_) => Ok(body),
    }
}

fn header(request: &Request, name: &str) -> Option<String> {
    request
        .headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str().to_string())
}

/// Whether a page's origin is on this machine (`http://localhost:…`, `http://127.0.0.1`, `[::1]`).
fn is_loopback_origin(origin: &str) -> bool {
    let host = origin
        .split_once("://")
        .map_or(origin, |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default();
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

fn respond(request: Request, answer: Plain) {
    let mut headers = Vec::new();
    if let Some(session) = &answer.session
        && let Ok(h) = Header::from_bytes(SESSION_HEADER, session.as_bytes())
    {
        headers.push(h);
    }
    let body = answer.body.map(|b| b.to_string()).unwrap_or_default();
    if !body.is_empty()
        && let Ok(h) = Header::from_bytes("Content-Type", "application/json")
    {
        headers.push(h);
    }
    if answer.status == 405
        && let Ok(h) = Header::from_bytes("Allow", "POST, DELETE")
    {
        headers.push(h);
    }
    let length = body.len();
    let response = Response::new(
        StatusCode(answer.status),
        headers,
        io::Cursor::new(body.into_bytes()),
        Some(length),
        None,
    );
    // The client may have gone; nothing is left to tell it.
    let _ = request.respond(response);
}

#[cfg(test)]
mod tests {
    use super::is_loopback_origin;

    #[test]
    fn only_pages_of_this_machine_are_taken() {
        assert!(is_loopback_origin("http://localhost:3000"));
        assert!(is_loopback_origin("http://127.0.0.1"));
        assert!(is_loopback_origin("http://[::1]:8080/x"));
        assert!(!is_loopback_origin("https://evil.example"));
        assert!(!is_loopback_origin("http://localhost.evil.example"));
        assert!(!is_loopback_origin("null"));
    }
}
