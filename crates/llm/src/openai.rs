//! OpenAI-compatible Chat Completions (`POST {base}/chat/completions`).
//!
//! Written for interoperability with real servers, not only OpenAI's: explicit `null`s are accepted
//! everywhere, tool-call stream deltas that repeat the call's id and name are assembled correctly, and
//! requests use the most widely accepted shapes (string content for text, `"content": ""` on assistant
//! turns that only carry tool calls, because llama.cpp's server rejects `null`).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::LlmClient;
use crate::error::LlmError;
use crate::http::{
    Delivery, Http, HttpOptions, StreamAssembly, encode, read_body, read_stream, with_body,
};
use crate::secret::ApiKey;
use crate::sse::SseEvent;
use crate::types::{
    ChatRequest, ChatResponse, ContentBlock, Message, RawExchange, Role, StopReason, StreamEvent,
    ToolChoice, ToolDefinition, Usage, text_of,
};
use std::borrow::Cow;

/// Default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Settings of an [`OpenAiClient`].
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Base URL up to and including the version, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …`; local servers often need none.
    pub api_key: Option<ApiKey>,
    /// Transport settings.
    pub http: HttpOptions,
    /// Ask for a usage chunk at the end of streams (`stream_options.include_usage`).
    pub stream_usage: bool,
}

impl OpenAiConfig {
    /// Settings for `base_url` with defaults for everything else.
    pub fn new(base_url: impl Into<String>, api_key: Option<ApiKey>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key,
            http: HttpOptions::default(),
            stream_usage: true,
        }
    }
}

/// A client for OpenAI-compatible servers.
pub struct OpenAiClient {
    url: String,
    api_key: Option<ApiKey>,
    http: Http,
    stream_usage: bool,
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("url", &self.url)
            .field("api_key", &self.api_key)
            .finish()
    }
}

impl OpenAiClient {
    /// A client with the given settings.
    pub fn new(config: OpenAiConfig) -> Self {
        let base = config.base_url.trim_end_matches('/');
        let url = format!("{base}/chat/completions");
        Self {
            http: Http::new(config.http, &url),
            url,
            api_key: config.api_key,
            stream_usage: config.stream_usage,
        }
    }

    /// The endpoint this client posts to.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = Vec::new();
        if let Some(key) = &self.api_key {
            headers.push(("authorization", format!("Bearer {}", key.expose())));
        }
        headers
    }
}

impl OpenAiClient {
    fn complete_unredacted(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let payload = encode(&WireRequest::new(request, false, false), request)?;
        let key = self.api_key.as_ref();
        let response =
            self.http
                .post_json(&self.url, &self.headers(), &payload, key, Delivery::Whole)?;
        let bytes = read_body(response, &self.url, self.http.limits())?;
        let mut answer = parse_response(&bytes).map_err(|e| with_body(e, &bytes))?;
        answer.raw = RawExchange {
            request: Some(payload),
            response: Some(bytes.into()),
        };
        Ok(answer)
    }

    fn stream_unredacted(
        &self,
        request: &ChatRequest,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<ChatResponse, LlmError> {
        let payload = encode(&WireRequest::new(request, true, self.stream_usage), request)?;
        let key = self.api_key.as_ref();
        let response = self.http.post_json(
            &self.url,
            &self.headers(),
            &payload,
            key,
            Delivery::Streamed,
        )?;
        let mut answer = read_stream(
            response,
            &self.url,
            self.http.limits(),
            StreamAssembler::default(),
            on_event,
        )?;
        answer.raw.request = Some(payload);
        Ok(answer)
    }

    /// Scrubs the API key from anything a server said.
    fn redact(&self, err: LlmError) -> LlmError {
        match &self.api_key {
            Some(key) => err.redacted(key),
            None => err,
        }
    }
}

impl LlmClient for OpenAiClient {
    fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.complete_unredacted(request)
            .map_err(|e| self.redact(e))
    }

    fn complete_streaming(
        &self,
        request: &ChatRequest,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<ChatResponse, LlmError> {
        self.stream_unredacted(request, on_event)
            .map_err(|e| self.redact(e))
    }

    fn describe(&self) -> String {
        format!("openai-compatible {}", self.url)
    }
}

/// The request body, serialized straight from the conversation (no intermediate JSON tree: a resumed
/// run can send tens of thousands of messages).
#[derive(Debug, Serialize)]
pub struct WireRequest<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    model: &'a str,
    messages: WireMessages<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<Value>,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum WireMessageOut<'a> {
    Text {
        role: &'static str,
        content: Cow<'a, str>,
    },
    Assistant {
        role: &'static str,
        // Never null: strict servers (llama.cpp) reject it.
        content: Cow<'a, str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCallOut<'a>>,
    },
    Tool {
        role: &'static str,
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Debug, Serialize)]
struct WireCallOut<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionOut<'a>,
}

#[derive(Debug, Serialize)]
struct WireFunctionOut<'a> {
    name: &'a str,
    arguments: std::borrow::Cow<'a, str>,
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireToolFunction<'a>,
}

#[derive(Debug, Serialize)]
struct WireToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

impl<'a> WireRequest<'a> {
    /// The body for `request`.
    pub fn new(request: &'a ChatRequest, stream: bool, stream_usage: bool) -> Self {
        let has_tools = !request.tools.is_empty();
        Self {
            model: &request.model,
            messages: WireMessages(&request.messages),
            tools: request
                .tools
                .iter()
                .map(|t| WireTool {
                    kind: "function",
                    function: WireToolFunction {
                        name: &t.name,
                        description: &t.description,
                        parameters: &t.parameters,
                    },
                })
                .collect(),
            tool_choice: has_tools.then(|| match &request.tool_choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
            }),
            temperature: request.temperature,
            max_tokens: request.max_tokens,
            stream: stream.then_some(true),
            stream_options: (stream && stream_usage).then(|| json!({"include_usage": true})),
        }
    }
}

/// The JSON body for `request` as a value (for tests and for tools that show what would be sent).
pub fn request_body(request: &ChatRequest, stream: bool, stream_usage: bool) -> Value {
    serde_json::to_value(WireRequest::new(request, stream, stream_usage)).unwrap_or(Value::Null)
}

/// The conversation in the wire's shape, converted one message at a time as it is written (a resumed
/// run's conversation is tens of thousands of messages: no second copy of them is made).
#[derive(Debug)]
struct WireMessages<'a>(&'a [Message]);

impl Serialize for WireMessages<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(None)?;
        let mut wire = Vec::new();
        for message in self.0 {
            wire.clear();
            wire_message(message, &mut wire);
            for one in &wire {
                seq.serialize_element(one)?;
            }
        }
        seq.end()
    }
}

/// The wire messages of `m` (a user message with tool results gives one per result).
fn wire_message<'a>(m: &'a Message, out: &mut Vec<WireMessageOut<'a>>) {
    match m.role {
        Role::System => out.push(WireMessageOut::Text {
            role: "system",
            content: text_of(&m.content),
        }),
        Role::Assistant => out.push(WireMessageOut::Assistant {
            role: "assistant",
            content: text_of(&m.content),
            tool_calls: m
                .tool_calls()
                .map(|c| WireCallOut {
                    id: c.id,
                    kind: "function",
                    function: WireFunctionOut {
                        name: c.name,
                        arguments: arguments_string(c.arguments),
                    },
                })
                .collect(),
        }),
        Role::User | Role::Tool => {
            for block in &m.content {
                if let ContentBlock::ToolResult {
                    tool_call_id,
                    content,
                    ..
                } = block
                {
                    out.push(WireMessageOut::Tool {
                        role: "tool",
                        tool_call_id,
                        content,
                    });
                }
            }
            let has_text = m
                .content
                .iter()
                .any(|b| matches!(b, ContentBlock::Text { .. }));
            if has_text || (m.role == Role::User && m.content.is_empty()) {
                out.push(WireMessageOut::Text {
                    role: "user",
                    content: text_of(&m.content),
                });
            }
        }
    }
}

fn arguments_string(arguments: &Value) -> std::borrow::Cow<'_, str> {
    match arguments {
        // Invalid JSON the model produced earlier is sent back exactly as it was.
        Value::String(raw) => std::borrow::Cow::Borrowed(raw),
        other => std::borrow::Cow::Owned(other.to_string()),
    }
}

/// Arguments text → value: empty means `{}`, invalid JSON is kept verbatim as a string.
pub(crate) fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

/// Why a body is not a chat-completions request.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// Its shape is not a request's.
    #[error("{0}")]
    Shape(#[from] serde_json::Error),
    /// A message with a role the protocol does not have.
    #[error("unknown message role `{0}`")]
    Role(String),
}

/// Reads a chat-completions request body (for instance one a hook rewrote) back into a request.
/// Consecutive `tool` messages become one tool-results message, as the engine builds them.
pub fn parse_request(body: &Value) -> Result<ChatRequest, RequestError> {
    let wire = WireRequestIn::deserialize(body)?;
    let mut messages: Vec<Message> = Vec::with_capacity(wire.messages.len());
    for m in wire.messages {
        let text = m.content.as_ref().map(content_text).unwrap_or_default();
        match m.role.as_str() {
            "system" | "developer" => messages.push(Message::system(text)),
            "user" => messages.push(Message::user(text)),
            "assistant" => {
                let mut content = Vec::new();
                if !text.is_empty() {
                    content.push(ContentBlock::text(text));
                }
                for (i, call) in m.tool_calls.unwrap_or_default().into_iter().enumerate() {
                    let function = call.function.unwrap_or_default();
                    let arguments = match function.arguments {
                        Some(Value::String(raw)) => parse_arguments(&raw),
                        Some(Value::Null) | None => json!({}),
                        Some(other) => other,
                    };
                    content.push(ContentBlock::tool_call(
                        call.id.unwrap_or_else(|| format!("call_{i}")),
                        function.name.unwrap_or_default(),
                        arguments,
                    ));
                }
                messages.push(Message::assistant(content));
            }
            "tool" => {
                let result =
                    ContentBlock::tool_result(m.tool_call_id.unwrap_or_default(), text, false);
                match messages.last_mut() {
                    Some(last) if last.role == Role::Tool => last.content.push(result),
                    _ => messages.push(Message::tool_results(vec![result])),
                }
            }
            other => return Err(RequestError::Role(other.to_string())),
        }
    }
    let tools = wire
        .tools
        .into_iter()
        .filter_map(|t| t.function)
        .map(|f| ToolDefinition {
            name: f.name,
            description: f.description,
            parameters: f.parameters.unwrap_or_else(|| json!({"type": "object"})),
        })
        .collect();
    let tool_choice = match wire.tool_choice {
        None => ToolChoice::Auto,
        Some(Value::String(s)) => match s.as_str() {
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            _ => ToolChoice::Auto,
        },
        Some(other) => match other.pointer("/function/name").and_then(Value::as_str) {
            Some(name) => ToolChoice::Tool(name.to_string()),
            None => ToolChoice::Auto,
        },
    };
    Ok(ChatRequest {
        model: wire.model.unwrap_or_default(),
        messages,
        tools,
        tool_choice,
        temperature: wire.temperature,
        max_tokens: wire.max_tokens,
    })
}

#[derive(Deserialize)]
struct WireRequestIn {
    model: Option<String>,
    messages: Vec<WireMessageIn>,
    #[serde(default)]
    tools: Vec<WireToolIn>,
    tool_choice: Option<Value>,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
}

#[derive(Deserialize)]
struct WireMessageIn {
    role: String,
    content: Option<Value>,
    tool_calls: Option<Vec<WireToolCall>>,
    tool_call_id: Option<String>,
}

#[derive(Deserialize)]
struct WireToolIn {
    function: Option<WireToolFunctionIn>,
}

#[derive(Deserialize)]
struct WireToolFunctionIn {
    name: String,
    #[serde(default)]
    description: String,
    parameters: Option<Value>,
}

/// An answer as a chat-completions response object (what a non-streamed call would have returned):
/// for audit records of streamed answers and for hooks. `id` and `model` fill in what the answer
/// lacks; `created` is in seconds.
pub fn response_body(response: &ChatResponse, id: &str, model: &str, created: i64) -> Value {
    let mut message = serde_json::Map::new();
    message.insert("role".into(), json!("assistant"));
    let text = response.text();
    if !text.is_empty() {
        message.insert("content".into(), json!(text));
    } else {
        message.insert("content".into(), Value::Null);
    }
    let calls: Vec<Value> = response
        .tool_calls()
        .map(|c| {
            json!({
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": arguments_string(c.arguments)},
            })
        })
        .collect();
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    let finish_reason = match &response.stop_reason {
        StopReason::EndTurn | StopReason::StopSequence => "stop".to_string(),
        StopReason::ToolUse => "tool_calls".to_string(),
        StopReason::MaxTokens => "length".to_string(),
        StopReason::ContentFilter => "content_filter".to_string(),
        StopReason::Other(s) => s.clone(),
    };
    json!({
        "id": response.id.as_deref().unwrap_or(id),
        "object": "chat.completion",
        "created": created,
        "model": response.model.as_deref().unwrap_or(model),
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": response.usage.input_tokens,
            "completion_tokens": response.usage.output_tokens,
            "total_tokens": response.usage.total(),
        },
    })
}

#[derive(Deserialize, Default)]
struct WireResponse {
    id: Option<String>,
    model: Option<String>,
    choices: Option<Vec<WireChoice>>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize, Default)]
struct WireChoice {
    message: Option<WireMessage>,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireMessage {
    content: Option<Value>,
    tool_calls: Option<Vec<WireToolCall>>,
    refusal: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireToolCall {
    id: Option<String>,
    function: Option<WireFunction>,
}

#[derive(Deserialize, Default)]
struct WireFunction {
    name: Option<String>,
    arguments: Option<Value>,
}

#[derive(Deserialize, Default, Clone, Copy)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage {
            input_tokens: u.prompt_tokens.unwrap_or(0),
            output_tokens: u.completion_tokens.unwrap_or(0),
        }
    }
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn stop_reason(finish: Option<&str>, has_tool_calls: bool) -> StopReason {
    match finish.map(StopReason::parse) {
        // Some servers say "stop" even when they return tool calls; the calls are what matters.
        Some(StopReason::EndTurn) | None if has_tool_calls => StopReason::ToolUse,
        Some(reason) => reason,
        None => StopReason::EndTurn,
    }
}

/// Parses a non-streamed answer.
pub(crate) fn parse_response(bytes: &[u8]) -> Result<ChatResponse, LlmError> {
    let wire: WireResponse = serde_json::from_slice(bytes)
        .map_err(|e| LlmError::decode(format!("{e} in {}", snippet(bytes)), bytes))?;
    let choice = wire
        .choices
        .and_then(|c| c.into_iter().next())
        .ok_or_else(|| {
            LlmError::decode(
                format!("the answer has no choices: {}", snippet(bytes)),
                bytes,
            )
        })?;
    let message = choice.message.unwrap_or_default();
    let mut content = Vec::new();
    let mut text = message
        .content
        .as_ref()
        .map(content_text)
        .unwrap_or_default();
    if text.is_empty()
        && let Some(refusal) = message.refusal
    {
        text = refusal;
    }
    if !text.is_empty() {
        content.push(ContentBlock::text(text));
    }
    for (i, call) in message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let function = call.function.unwrap_or_default();
        let arguments = match function.arguments {
            Some(Value::String(raw)) => parse_arguments(&raw),
            Some(Value::Null) | None => json!({}),
            Some(other) => other,
        };
        content.push(ContentBlock::tool_call(
            call.id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| format!("call_{i}")),
            function.name.unwrap_or_default(),
            arguments,
        ));
    }
    let has_calls = content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolCall { .. }));
    Ok(ChatResponse {
        content,
        stop_reason: stop_reason(choice.finish_reason.as_deref(), has_calls),
        usage: wire.usage.map(Usage::from).unwrap_or_default(),
        model: wire.model,
        id: wire.id,
        raw: Default::default(),
    })
}

fn snippet(bytes: &[u8]) -> String {
    crate::printable::printable_bytes(bytes, 300)
}

#[derive(Deserialize)]
struct WireChunk {
    id: Option<String>,
    model: Option<String>,
    choices: Option<Vec<WireChunkChoice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct WireChunkChoice {
    delta: Option<WireDelta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireDelta {
    content: Option<Value>,
    tool_calls: Option<Vec<WireDeltaCall>>,
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct WireDeltaCall {
    index: Option<usize>,
    id: Option<String>,
    function: Option<WireDeltaFunction>,
}

#[derive(Deserialize)]
struct WireDeltaFunction {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Default)]
struct PartialCall {
    index: usize,
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Builds an answer from stream chunks.
#[derive(Default)]
struct StreamAssembler {
    text: String,
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    id: Option<String>,
    model: Option<String>,
    events: usize,
    done: bool,
}

impl StreamAssembler {
    /// Where a tool-call delta belongs. With an `index`, that index. Without one (some servers omit
    /// it): the call with the same id, a new call for a new id, else the call being streamed.
    fn slot_for(&mut self, index: Option<usize>, id: Option<&str>) -> usize {
        let existing = match (index, id) {
            (Some(index), _) => self.calls.iter().position(|c| c.index == index),
            (None, Some(id)) => self.calls.iter().position(|c| c.id.as_deref() == Some(id)),
            (None, None) => self.calls.len().checked_sub(1),
        };
        if let Some(slot) = existing {
            return slot;
        }
        let index =
            index.unwrap_or_else(|| self.calls.iter().map(|c| c.index + 1).max().unwrap_or(0));
        self.calls.push(PartialCall {
            index,
            ..PartialCall::default()
        });
        self.calls.len() - 1
    }
}

impl StreamAssembly for StreamAssembler {
    fn parse_whole(bytes: &[u8]) -> Result<ChatResponse, LlmError> {
        parse_response(bytes)
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn event(
        &mut self,
        event: &SseEvent,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<(), LlmError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        self.events += 1;
        let chunk: WireChunk = serde_json::from_str(data).map_err(|e| {
            LlmError::decode(
                format!("bad stream chunk ({e}): {}", snippet(data.as_bytes())),
                data.as_bytes(),
            )
        })?;
        if let Some(error) = chunk.error {
            let message = crate::http::error_message(&json!({ "error": error }).to_string(), 200);
            return Err(LlmError::StreamError { message });
        }
        if self.id.is_none() {
            self.id = chunk.id;
        }
        if self.model.is_none() {
            self.model = chunk.model;
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into());
        }
        for choice in chunk.choices.unwrap_or_default() {
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
            let Some(delta) = choice.delta else { continue };
            let text = delta
                .content
                .as_ref()
                .map(content_text)
                .or(delta.refusal)
                .unwrap_or_default();
            if !text.is_empty() {
                self.text.push_str(&text);
                on_event(StreamEvent::TextDelta(text));
            }
            for call in delta.tool_calls.unwrap_or_default() {
                let id = call.id.clone().filter(|id| !id.is_empty());
                let slot = self.slot_for(call.index, id.as_deref());
                let slot_index = slot;
                let partial = &mut self.calls[slot_index];
                if partial.id.is_none() {
                    partial.id = call.id.filter(|id| !id.is_empty());
                }
                let function = call.function;
                // The name is taken once: some servers repeat it in every delta.
                if partial.name.is_empty()
                    && let Some(name) = function
                        .as_ref()
                        .and_then(|f| f.name.clone())
                        .filter(|n| !n.is_empty())
                {
                    partial.name = name.clone();
                    on_event(StreamEvent::ToolCallStarted {
                        index: slot_index,
                        name,
                    });
                }
                if let Some(fragment) = function.and_then(|f| f.arguments).filter(|a| !a.is_empty())
                {
                    partial.arguments.push_str(&fragment);
                    on_event(StreamEvent::ToolCallDelta {
                        index: slot_index,
                        fragment,
                    });
                }
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<ChatResponse, LlmError> {
        if !self.done {
            let message = if self.events == 0 {
                "the server sent no events before closing the stream (llama.cpp's server does this for \
                 streaming requests with tool_choice \"auto\"; a non-streaming request works)"
                    .to_string()
            } else {
                format!("no [DONE] marker after {} events", self.events)
            };
            return Err(LlmError::IncompleteStream { message });
        }
        if self.finish_reason.is_none() {
            // Every conforming server ends the last choice with a finish_reason. A [DONE] without one
            // means generation was cut short and the answer is truncated.
            return Err(LlmError::IncompleteStream {
                message: format!(
                    "the stream ended after {} events without a finish_reason, so the answer is truncated \
                     (llama-cpp-python's server does this when another request interrupts it)",
                    self.events
                ),
            });
        }
        let mut content = Vec::new();
        if !self.text.is_empty() {
            content.push(ContentBlock::text(self.text));
        }
        let mut calls = self.calls;
        calls.sort_by_key(|c| c.index);
        let has_calls = !calls.is_empty();
        for (i, call) in calls.into_iter().enumerate() {
            content.push(ContentBlock::tool_call(
                call.id.unwrap_or_else(|| format!("call_{i}")),
                call.name,
                parse_arguments(&call.arguments),
            ));
        }
        Ok(ChatResponse {
            content,
            stop_reason: stop_reason(self.finish_reason.as_deref(), has_calls),
            usage: self.usage.unwrap_or_default(),
            model: self.model,
            id: self.id,
            raw: Default::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_body_reads_back_into_the_same_body() {
        let req = ChatRequest::new(
            "m",
            vec![
                Message::system("sys"),
                Message::user("hi"),
                Message::assistant(vec![
                    ContentBlock::text("let me look"),
                    ContentBlock::tool_call("c1", "ls", json!({"path": "."})),
                    ContentBlock::tool_call("c2", "bad", Value::String("{oops".into())),
                ]),
                Message::tool_results(vec![
                    ContentBlock::tool_result("c1", "a b", false),
                    ContentBlock::tool_result("c2", "no", false),
                ]),
                Message::user("more"),
            ],
        )
        .with_tools(vec![ToolDefinition {
            name: "ls".into(),
            description: "list".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }])
        .with_tool_choice(ToolChoice::Tool("ls".into()))
        .with_temperature(0.5)
        .with_max_tokens(7);
        let body = request_body(&req, false, false);
        let back = parse_request(&body).unwrap();
        assert_eq!(back, req);
        assert_eq!(request_body(&back, false, false), body);
        let err = parse_request(&json!({"messages": [{"role": "robot", "content": "x"}]}));
        assert_eq!(err.unwrap_err().to_string(), "unknown message role `robot`");
        assert!(parse_request(&json!({"model": "m"})).is_err());
    }

    #[test]
    fn a_response_renders_as_a_chat_completion() {
        let answer = ChatResponse {
            content: vec![ContentBlock::tool_call("c1", "ls", json!({"p": 1}))],
            stop_reason: StopReason::ToolUse,
            usage: Usage {
                input_tokens: 3,
                output_tokens: 4,
            },
            model: None,
            id: None,
            raw: RawExchange::default(),
        };
        let body = response_body(&answer, "fallback", "m", 42);
        assert_eq!(
            body,
            json!({
                "id": "fallback", "object": "chat.completion", "created": 42, "model": "m",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": null,
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{\"p\":1}"}}]
                }}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
            })
        );
        let parsed = parse_response(&serde_json::to_vec(&body).unwrap()).unwrap();
        assert_eq!(parsed.tool_calls().count(), 1);
        assert_eq!(parsed.usage.total(), 7);
    }

    #[test]
    fn request_shapes_follow_the_interoperable_subset() {
        let req = ChatRequest::new(
            "m",
            vec![
                Message::system("sys"),
                Message::user("hi"),
                Message::assistant(vec![
                    ContentBlock::tool_call("c1", "ls", json!({"path": "."})),
                    ContentBlock::tool_call("c2", "bad", Value::String("{oops".into())),
                ]),
                Message::tool_results(vec![
                    ContentBlock::tool_result("c1", "a b", false),
                    ContentBlock::tool_result("c2", "invalid arguments", true),
                ]),
            ],
        )
        .with_tools(vec![ToolDefinition {
            name: "ls".into(),
            description: "list".into(),
            parameters: json!({"type": "object"}),
        }]);
        let body = request_body(&req, false, true);
        assert_eq!(
            body,
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "sys"},
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "", "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\":\".\"}"}},
                        {"id": "c2", "type": "function", "function": {"name": "bad", "arguments": "{oops"}}
                    ]},
                    {"role": "tool", "tool_call_id": "c1", "content": "a b"},
                    {"role": "tool", "tool_call_id": "c2", "content": "invalid arguments"}
                ],
                "tools": [{"type": "function", "function": {"name": "ls", "description": "list", "parameters": {"type": "object"}}}],
                "tool_choice": "auto"
            })
        );
        assert!(body.get("temperature").is_none() && body.get("max_tokens").is_none());
        let streamed = request_body(
            &req.clone().with_temperature(0.2).with_max_tokens(9),
            true,
            true,
        );
        assert_eq!(streamed["stream"], json!(true));
        assert_eq!(streamed["stream_options"], json!({"include_usage": true}));
        assert_eq!(streamed["temperature"], json!(0.2));
        assert_eq!(streamed["max_tokens"], json!(9));
        let forced = request_body(
            &req.with_tool_choice(ToolChoice::Tool("ls".into())),
            false,
            false,
        );
        assert_eq!(
            forced["tool_choice"],
            json!({"type": "function", "function": {"name": "ls"}})
        );
    }

    #[test]
    fn parses_answers_with_explicit_nulls() {
        let body = br#"{"id":"x","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}],
            "refusal":null,"function_call":null},"logprobs":null,"finish_reason":"tool_calls"}],
            "usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}"#;
        let r = parse_response(body).unwrap();
        assert_eq!(
            r.content,
            vec![ContentBlock::tool_call("c", "f", json!({"a": 1}))]
        );
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 3,
                output_tokens: 4
            }
        );
    }

    #[test]
    fn tool_calls_win_over_a_stop_finish_reason_and_bad_arguments_are_kept() {
        let body = br#"{"choices":[{"message":{"content":"ok","tool_calls":[{"function":{"name":"f","arguments":"{nope"}}]},"finish_reason":"stop"}],"usage":null}"#;
        let r = parse_response(body).unwrap();
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(
            r.content[1],
            ContentBlock::tool_call("call_0", "f", json!("{nope"))
        );
        assert_eq!(r.usage, Usage::default());
    }

    #[test]
    fn empty_choices_and_garbage_are_decode_errors() {
        assert!(matches!(
            parse_response(br#"{"choices":[]}"#),
            Err(LlmError::Decode { .. })
        ));
        let err = parse_response(b"<html>").unwrap_err().to_string();
        assert!(err.contains("<html>"), "{err}");
    }

    fn assemble(chunks: &[&str]) -> Result<(ChatResponse, Vec<StreamEvent>), LlmError> {
        let mut a = StreamAssembler::default();
        let mut events = Vec::new();
        for c in chunks {
            a.event(
                &SseEvent {
                    event: None,
                    data: c.to_string(),
                },
                &mut |e| events.push(e),
            )?;
        }
        Ok((a.finish()?, events))
    }

    #[test]
    fn stream_with_repeated_ids_and_names_takes_the_name_once() {
        let (r, events) = assemble(&[
            r#"{"choices":[{"delta":{"role":"assistant","content":null,"tool_calls":null},"finish_reason":null}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"\"city\": "}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"\"Paris\"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":6}}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(
            r.content,
            vec![ContentBlock::tool_call(
                "call_1",
                "get_weather",
                json!({"city": "Paris"})
            )]
        );
        assert_eq!(r.usage.total(), 11);
        let started = events
            .iter()
            .filter(|e| matches!(e, StreamEvent::ToolCallStarted { .. }))
            .count();
        assert_eq!(started, 1);
    }

    #[test]
    fn calls_without_index_are_kept_apart_by_id() {
        let (r, _) = assemble(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{\"y\":2}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(
            r.content,
            vec![
                ContentBlock::tool_call("a", "f", json!({"x": 1})),
                ContentBlock::tool_call("b", "g", json!({"y": 2})),
            ]
        );
    }

    #[test]
    fn stream_without_done_is_an_error() {
        let err = assemble(&[r#"{"choices":[{"delta":{"content":"hi"}}]}"#]).unwrap_err();
        assert!(matches!(err, LlmError::IncompleteStream { .. }), "{err}");
        let err = assemble(&[]).unwrap_err();
        assert!(err.to_string().contains("no events"), "{err}");
    }

    #[test]
    fn done_without_a_finish_reason_is_a_truncated_answer() {
        let err = assemble(&[
            r#"{"choices":[{"delta":{"content":"Once upon"},"finish_reason":null}]}"#,
            "[DONE]",
        ])
        .unwrap_err();
        assert!(matches!(err, LlmError::IncompleteStream { .. }), "{err}");
        assert!(err.to_string().contains("without a finish_reason"), "{err}");
    }

    #[test]
    fn error_chunks_become_errors() {
        let err = assemble(&[r#"{"error":{"message":"boom","type":"server_error"}}"#]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the server reported an error in the stream: boom (server_error)"
        );
    }
}
