use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

/// Which wire protocol a request used (decided by its path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `POST …/chat/completions`.
    OpenAi,
    /// `POST …/v1/messages`.
    Anthropic,
}

/// A tool call in a scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallSpec {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments object.
    pub arguments: Value,
}

impl ToolCallSpec {
    /// A tool call.
    pub fn new(id: &str, name: &str, arguments: Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }
}

#[derive(Debug, Clone)]
enum Kind {
    Answer {
        text: String,
        tool_calls: Vec<ToolCallSpec>,
        stop_reason: Option<String>,
        usage: (u64, u64),
    },
    Error {
        status: u16,
        message: String,
    },
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
    HangUp,
}

/// One scripted response.
#[derive(Debug, Clone)]
pub struct Reply {
    kind: Kind,
    delay: Duration,
    headers: Vec<(String, String)>,
    fragment: usize,
    repeat_tool_ids: bool,
    cut_after: Option<usize>,
    trickle: Option<usize>,
    omit_finish_reason: bool,
    stall: Option<(usize, Duration)>,
}

impl Reply {
    fn new(kind: Kind) -> Self {
        Self {
            kind,
            delay: Duration::ZERO,
            headers: Vec::new(),
            fragment: 4,
            repeat_tool_ids: false,
            cut_after: None,
            trickle: None,
            omit_finish_reason: false,
            stall: None,
        }
    }

    /// A plain text answer.
    pub fn text(text: &str) -> Self {
        Self::new(Kind::Answer {
            text: text.into(),
            tool_calls: Vec::new(),
            stop_reason: None,
            usage: (10, 5),
        })
    }

    /// An answer made of tool calls.
    pub fn tool_calls(calls: impl IntoIterator<Item = ToolCallSpec>) -> Self {
        Self::new(Kind::Answer {
            text: String::new(),
            tool_calls: calls.into_iter().collect(),
            stop_reason: None,
            usage: (10, 5),
        })
    }

    /// An answer with a single tool call.
    pub fn tool_call(id: &str, name: &str, arguments: Value) -> Self {
        Self::tool_calls([ToolCallSpec::new(id, name, arguments)])
    }

    /// An HTTP error with a body in the protocol's error shape carrying `message`.
    pub fn error(status: u16, message: &str) -> Self {
        Self::new(Kind::Error {
            status,
            message: message.into(),
        })
    }

    /// Any status and body, sent verbatim.
    pub fn raw(status: u16, content_type: &str, body: &str) -> Self {
        Self::new(Kind::Raw {
            status,
            content_type: content_type.into(),
            body: body.into(),
        })
    }

    /// Reads the request, then closes the connection without answering.
    pub fn hang_up() -> Self {
        Self::new(Kind::HangUp)
    }

    /// The refusal of a request longer than the model's context, as llama.cpp's and OpenAI's
    /// servers word it (HTTP 400, code `context_length_exceeded`).
    pub fn context_length_exceeded(window: usize, asked: usize, completion: usize) -> Self {
        let message = format!(
            "This model's maximum context length is {window} tokens. However, you requested {} tokens ({asked} in the messages, {completion} in the completion). Please reduce the length of the messages or completion.",
            asked + completion
        );
        let body = json!({"error": {"message": message, "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}});
        Self::raw(400, "application/json", &body.to_string())
    }

    /// HTTP 200 with an empty body (what llama.cpp's server does for streams with `tool_choice` auto).
    pub fn empty_ok() -> Self {
        Self::raw(200, "text/event-stream", "")
    }

    /// Adds text before the tool calls of an answer.
    pub fn with_text(mut self, text: &str) -> Self {
        if let Kind::Answer { text: t, .. } = &mut self.kind {
            *t = text.into();
        }
        self
    }

    /// Overrides the stop reason (in the protocol's own vocabulary).
    pub fn stop_reason(mut self, reason: &str) -> Self {
        if let Kind::Answer { stop_reason, .. } = &mut self.kind {
            *stop_reason = Some(reason.into());
        }
        self
    }

    /// Sets the reported token usage.
    pub fn usage(mut self, input: u64, output: u64) -> Self {
        if let Kind::Answer { usage, .. } = &mut self.kind {
            *usage = (input, output);
        }
        self
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Waits this long before answering.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Streams text and tool arguments in pieces of `chars` characters (default 4).
    pub fn fragment(mut self, chars: usize) -> Self {
        self.fragment = chars.max(1);
        self
    }

    /// Repeats the tool call's id, type and name in every stream delta (llama.cpp's server does).
    pub fn repeat_tool_ids(mut self) -> Self {
        self.repeat_tool_ids = true;
        self
    }

    /// Closes a stream after `events` events, before its end marker.
    pub fn cut_stream_after(mut self, events: usize) -> Self {
        self.cut_after = Some(events);
        self
    }

    /// Ends an OpenAI stream with `[DONE]` but without any `finish_reason` (what llama-cpp-python's
    /// server does when another request interrupts a stream).
    pub fn omit_finish_reason(mut self) -> Self {
        self.omit_finish_reason = true;
        self
    }

    /// Sends the headers (and, for a stream, the first `events` events), then goes silent for `pause`
    /// before sending the rest: a stalled response, for idle timeouts.
    pub fn stall(mut self, events: usize, pause: Duration) -> Self {
        self.stall = Some((events, pause));
        self
    }

    /// Writes the body `bytes` bytes at a time, flushing in between.
    pub fn trickle(mut self, bytes: usize) -> Self {
        self.trickle = Some(bytes.max(1));
        self
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct ReceivedRequest {
    /// HTTP method.
    pub method: String,
    /// Request path.
    pub path: String,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Raw body.
    pub body: Vec<u8>,
}

impl ReceivedRequest {
    /// The body parsed as JSON (`null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// A header value by (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Answers a request from its body (a server that answers by what it is asked, not in order).
pub type Responder = Box<dyn Fn(&Value) -> Reply + Send + Sync>;

struct Shared {
    script: Mutex<VecDeque<Reply>>,
    responder: Option<Responder>,
    requests: Mutex<Vec<ReceivedRequest>>,
    counter: AtomicU64,
    stop: AtomicBool,
    /// Nanoseconds spent between a complete request and a complete answer (scripted delays excluded).
    busy_nanos: AtomicU64,
    /// Connections being handled.
    in_flight: AtomicU64,
}

/// A scripted LLM server on `127.0.0.1` (see the crate docs). Stops when dropped.
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl ScriptedServer {
    /// Starts a server that answers with `script`, in order. When the script runs out it answers
    /// HTTP 500 saying so.
    pub fn start(script: impl IntoIterator<Item = Reply>) -> Self {
        Self::serve(script.into_iter().collect(), None)
    }

    /// Starts a server that answers each request with what `responder` makes of its JSON body
    /// (for many clients at once, in any order).
    pub fn responding(responder: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> Self {
        Self::serve(VecDeque::new(), Some(Box::new(responder)))
    }

    fn serve(script: VecDeque<Reply>, responder: Option<Responder>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            script: Mutex::new(script),
            responder,
            requests: Mutex::new(Vec::new()),
            counter: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            busy_nanos: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
        });
        let accept_shared = Arc::clone(&shared);
        thread::spawn(move || {
            for stream in listener.incoming() {
                if accept_shared.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let conn_shared = Arc::clone(&accept_shared);
                conn_shared.in_flight.fetch_add(1, Ordering::SeqCst);
                thread::spawn(move || {
                    let _ = handle(stream, &conn_shared);
                    conn_shared.in_flight.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Self { addr, shared }
    }

    /// Appends a reply to the script.
    pub fn push(&self, reply: Reply) {
        self.shared.script.lock().unwrap().push_back(reply);
    }

    /// `http://127.0.0.1:PORT` (the Anthropic base URL).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1` (the OpenAI-compatible base URL).
    pub fn openai_base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<ReceivedRequest> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// How many requests arrived.
    pub fn request_count(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }

    /// Total time the server spent answering: from a complete request to a complete answer, scripted
    /// delays excluded. Benchmarks subtract it to measure the client alone.
    /// Waits (up to 5 s) for connections still being handled, so a client that has already read its
    /// answer does not race the server's bookkeeping.
    pub fn busy_time(&self) -> Duration {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while self.shared.in_flight.load(Ordering::SeqCst) > 0
            && std::time::Instant::now() < deadline
        {
            thread::sleep(Duration::from_micros(200));
        }
        Duration::from_nanos(self.shared.busy_nanos.load(Ordering::SeqCst))
    }

    /// Replies not yet used.
    pub fn remaining(&self) -> usize {
        self.shared.script.lock().unwrap().len()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn handle(stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    if method.is_empty() {
        return Ok(());
    }
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 {
            break;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((name, value)) = h.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if let Some(len) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(len, 0);
        reader.read_exact(&mut body)?;
    } else if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size_line = String::new();
            reader.read_line(&mut size_line)?;
            let size = usize::from_str_radix(size_line.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    let request = ReceivedRequest {
        method,
        path: path.clone(),
        headers,
        body,
    };
    let received = std::time::Instant::now();
    let request_json = request.json();
    let mut delay = Duration::ZERO;
    let result = respond(stream, shared, request, request_json, &path, &mut delay);
    let busy = received.elapsed().saturating_sub(delay);
    shared
        .busy_nanos
        .fetch_add(busy.as_nanos() as u64, Ordering::SeqCst);
    result
}

/// Answers one request; `delay` receives the scripted delay it slept.
fn respond(
    stream: TcpStream,
    shared: &Shared,
    request: ReceivedRequest,
    request_json: Value,
    path: &str,
    delay: &mut Duration,
) -> std::io::Result<()> {
    let mut out = stream;
    let protocol = if path.ends_with("/chat/completions") {
        Protocol::OpenAi
    } else if path.ends_with("/messages") {
        Protocol::Anthropic
    } else {
        let body =
            json!({"error": {"message": format!("no such endpoint: {path}"), "type": "not_found"}});
        return write_plain(
            &mut out,
            404,
            "application/json",
            &body.to_string(),
            &[],
            None,
        );
    };
    let reply = match &shared.responder {
        Some(responder) => Some(responder(&request_json)),
        None => shared.script.lock().unwrap().pop_front(),
    };
    shared.requests.lock().unwrap().push(request);
    let n = shared.counter.fetch_add(1, Ordering::SeqCst) + 1;
    let Some(reply) = reply else {
        let body = error_body(
            protocol,
            500,
            "scripted server: the script has no more replies",
        );
        return write_plain(&mut out, 500, "application/json", &body, &[], None);
    };
    if !reply.delay.is_zero() {
        *delay = reply.delay;
        thread::sleep(reply.delay);
    }
    let stream_requested = request_json.get("stream").and_then(Value::as_bool) == Some(true);
    let model = request_json
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("scripted")
        .to_string();
    let include_usage = request_json
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        == Some(true);
    match &reply.kind {
        Kind::HangUp => Ok(()),
        Kind::Raw {
            status,
            content_type,
            body,
        } => write_plain(
            &mut out,
            *status,
            content_type,
            body,
            &reply.headers,
            reply.trickle,
        ),
        Kind::Error { status, message } => write_plain(
            &mut out,
            *status,
            "application/json",
            &error_body(protocol, *status, message),
            &reply.headers,
            reply.trickle,
        ),
        Kind::Answer {
            text,
            tool_calls,
            stop_reason,
            usage,
        } => {
            let answer = Answer {
                n,
                model: &model,
                text,
                tool_calls,
                stop_reason: stop_reason.as_deref(),
                usage: *usage,
            };
            if stream_requested {
                let events = match protocol {
                    Protocol::OpenAi => openai_stream(&answer, &reply, include_usage),
                    Protocol::Anthropic => anthropic_stream(&answer, &reply),
                };
                write_stream(&mut out, &events, &reply)
            } else {
                let body = match protocol {
                    Protocol::OpenAi => openai_body(&answer),
                    Protocol::Anthropic => anthropic_body(&answer),
                };
                write_plain_stalling(
                    &mut out,
                    200,
                    "application/json",
                    &body.to_string(),
                    &reply.headers,
                    reply.trickle,
                    reply.stall.map(|(_, pause)| pause),
                )
            }
        }
    }
}

struct Answer<'a> {
    n: u64,
    model: &'a str,
    text: &'a str,
    tool_calls: &'a [ToolCallSpec],
    stop_reason: Option<&'a str>,
    usage: (u64, u64),
}

fn error_body(protocol: Protocol, status: u16, message: &str) -> String {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    match protocol {
        Protocol::OpenAi => {
            json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
        }
        Protocol::Anthropic => {
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
    }
    .to_string()
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn write_body(out: &mut TcpStream, bytes: &[u8], trickle: Option<usize>) -> std::io::Result<()> {
    match trickle {
        None => out.write_all(bytes)?,
        Some(n) => {
            for piece in bytes.chunks(n) {
                out.write_all(piece)?;
                out.flush()?;
                thread::sleep(Duration::from_millis(1));
            }
        }
    }
    out.flush()
}

fn write_plain(
    out: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &str,
    headers: &[(String, String)],
    trickle: Option<usize>,
) -> std::io::Result<()> {
    write_plain_stalling(out, status, content_type, body, headers, trickle, None)
}

fn write_plain_stalling(
    out: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &str,
    headers: &[(String, String)],
    trickle: Option<usize>,
    stall: Option<Duration>,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reason_phrase(status),
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    if let Some(pause) = stall {
        out.flush()?;
        thread::sleep(pause);
    }
    write_body(out, body.as_bytes(), trickle)
}

fn write_stream(out: &mut TcpStream, events: &[String], reply: &Reply) -> std::io::Result<()> {
    let mut head = String::from(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n",
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    let events = match reply.cut_after {
        Some(n) => &events[..n.min(events.len())],
        None => events,
    };
    out.flush()?;
    for (i, event) in events.iter().enumerate() {
        if let Some((after, pause)) = reply.stall
            && i == after
        {
            thread::sleep(pause);
        }
        write_body(out, event.as_bytes(), reply.trickle)?;
    }
    Ok(())
}

fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn openai_body(a: &Answer) -> Value {
    let calls: Vec<Value> = a
        .tool_calls
        .iter()
        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments.to_string()}}))
        .collect();
    let mut message = json!({
        "role": "assistant",
        "content": if a.text.is_empty() { Value::Null } else { json!(a.text) },
        "refusal": null,
    });
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    let finish = a.stop_reason.unwrap_or(if a.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    });
    json!({
        "id": format!("chatcmpl-test-{}", a.n),
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": a.model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": {"prompt_tokens": a.usage.0, "completion_tokens": a.usage.1, "total_tokens": a.usage.0 + a.usage.1},
    })
}

fn openai_stream(a: &Answer, reply: &Reply, include_usage: bool) -> Vec<String> {
    let id = format!("chatcmpl-test-{}", a.n);
    let chunk = |delta: Value, finish: Value| {
        let c = json!({"id": id, "object": "chat.completion.chunk", "created": 1_700_000_000, "model": a.model,
                       "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    let mut events = vec![": keep-alive\n\n".to_string()];
    events.push(chunk(
        json!({"role": "assistant", "content": null}),
        Value::Null,
    ));
    for piece in pieces(a.text, reply.fragment) {
        events.push(chunk(json!({"content": piece}), Value::Null));
    }
    for (i, call) in a.tool_calls.iter().enumerate() {
        let head = json!({"index": i, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}});
        events.push(chunk(json!({"tool_calls": [head]}), Value::Null));
        for piece in pieces(&call.arguments.to_string(), reply.fragment) {
            let delta = if reply.repeat_tool_ids {
                json!({"index": i, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": piece}})
            } else {
                json!({"index": i, "function": {"arguments": piece}})
            };
            events.push(chunk(json!({"tool_calls": [delta]}), Value::Null));
        }
    }
    let finish = a.stop_reason.unwrap_or(if a.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    });
    if !reply.omit_finish_reason {
        events.push(chunk(json!({}), json!(finish)));
    }
    if include_usage {
        let usage = json!({"id": id, "object": "chat.completion.chunk", "choices": [],
            "usage": {"prompt_tokens": a.usage.0, "completion_tokens": a.usage.1, "total_tokens": a.usage.0 + a.usage.1}});
        events.push(format!("data: {usage}\n\n"));
    }
    events.push("data: [DONE]\n\n".to_string());
    events
}

fn anthropic_blocks(a: &Answer) -> Vec<Value> {
    let mut blocks = Vec::new();
    if !a.text.is_empty() {
        blocks.push(json!({"type": "text", "text": a.text}));
    }
    for c in a.tool_calls {
        blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}));
    }
    blocks
}

fn anthropic_stop(a: &Answer) -> String {
    a.stop_reason
        .unwrap_or(if a.tool_calls.is_empty() {
            "end_turn"
        } else {
            "tool_use"
        })
        .to_string()
}

fn anthropic_body(a: &Answer) -> Value {
    json!({
        "id": format!("msg_test_{}", a.n),
        "type": "message",
        "role": "assistant",
        "model": a.model,
        "content": anthropic_blocks(a),
        "stop_reason": anthropic_stop(a),
        "stop_sequence": null,
        "usage": {"input_tokens": a.usage.0, "output_tokens": a.usage.1},
    })
}

fn anthropic_stream(a: &Answer, reply: &Reply) -> Vec<String> {
    let ev = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut events = vec![ev(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_test_{}", a.n), "type": "message",
               "role": "assistant", "model": a.model, "content": [], "stop_reason": null,
               "usage": {"input_tokens": a.usage.0, "output_tokens": 1}}}),
    )];
    events.push(ev("ping", json!({"type": "ping"})));
    let mut index = 0;
    if !a.text.is_empty() {
        events.push(ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        ));
        for piece in pieces(a.text, reply.fragment) {
            events.push(ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}),
            ));
        }
        events.push(ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    for c in a.tool_calls {
        events.push(ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
                   "content_block": {"type": "tool_use", "id": c.id, "name": c.name, "input": {}}}),
        ));
        for piece in pieces(&c.arguments.to_string(), reply.fragment) {
            events.push(ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                       "delta": {"type": "input_json_delta", "partial_json": piece}}),
            ));
        }
        events.push(ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    events.push(ev(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": anthropic_stop(a), "stop_sequence": null},
               "usage": {"output_tokens": a.usage.1}}),
    ));
    events.push(ev("message_stop", json!({"type": "message_stop"})));
    events
}
