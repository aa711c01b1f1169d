//! Anthropic Messages (`POST {base}/v1/messages`).
//!
//! The message shape defined here (system prompt apart, tool results as `tool_result` blocks inside
//! user turns, consecutive turns of one role merged) is also the shape recordings use.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::LlmClient;
use crate::error::LlmError;
use crate::http::{
    Delivery, Http, HttpOptions, StreamAssembly, encode, error_message, read_body, read_stream,
    with_body,
};
use crate::openai::parse_arguments;
use crate::secret::ApiKey;
use crate::sse::SseEvent;
use crate::types::{
    ChatRequest, ChatResponse, ContentBlock, Message, RawExchange, Role, StopReason, StreamEvent,
    ToolChoice, Usage,
};

/// Default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The API version we speak.
pub const API_VERSION: &str = "2023-06-01";
/// Output limit sent when the request sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Settings of an [`AnthropicClient`].
#[derive(Debug, Clone)]
pub struct AnthropicConfig {
    /// Base URL without the `/v1` path, e.g. `https://api.anthropic.com`.
    pub base_url: String,
    /// Sent as `x-api-key`.
    pub api_key: ApiKey,
    /// Transport settings.
    pub http: HttpOptions,
}

impl AnthropicConfig {
    /// Settings for `base_url` with defaults for everything else.
    pub fn new(base_url: impl Into<String>, api_key: ApiKey) -> Self {
        Self {
            base_url: base_url.into(),
            api_key,
            http: HttpOptions::default(),
        }
    }
}

/// A client for the Anthropic Messages API.
pub struct AnthropicClient {
    url: String,
    api_key: ApiKey,
    http: Http,
}

impl std::fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicClient")
            .field("url", &self.url)
            .field("api_key", &self.api_key)
            .finish()
    }
}

impl AnthropicClient {
    /// A client with the given settings.
    pub fn new(config: AnthropicConfig) -> Self {
        let base = config.base_url.trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base);
        let url = format!("{base}/v1/messages");
        Self {
            http: Http::new(config.http, &url),
            url,
            api_key: config.api_key,
        }
    }

    /// The endpoint this client posts to.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        vec![
            ("x-api-key", self.api_key.expose().to_string()),
            ("anthropic-version", API_VERSION.to_string()),
        ]
    }
}

impl AnthropicClient {
    fn complete_unredacted(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let payload = encode(&WireRequest::new(request, false), request)?;
        let key = Some(&self.api_key);
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
        let payload = encode(&WireRequest::new(request, true), request)?;
        let key = Some(&self.api_key);
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
}

impl LlmClient for AnthropicClient {
    fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.complete_unredacted(request)
            .map_err(|e| e.redacted(&self.api_key))
    }

    fn complete_streaming(
        &self,
        request: &ChatRequest,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<ChatResponse, LlmError> {
        self.stream_unredacted(request, on_event)
            .map_err(|e| e.redacted(&self.api_key))
    }

    fn describe(&self) -> String {
        format!("anthropic {}", self.url)
    }
}

/// The request body, serialized straight from the conversation: its texts are borrowed, not copied
/// into a JSON tree (a resumed run can send tens of thousands of messages).
#[derive(Debug, Serialize)]
pub struct WireRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

/// One turn of Anthropic's conversation.
#[derive(Debug, Serialize)]
pub(crate) struct Turn<'a> {
    role: &'static str,
    content: TurnContent<'a>,
}

/// A user turn that is a single text is sent as a string.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum TurnContent<'a> {
    Text(&'a str),
    Blocks(Vec<Block<'a>>),
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "is_false")]
        is_error: bool,
    },
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a Value,
    },
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl<'a> WireRequest<'a> {
    /// The body for `request`.
    pub fn new(request: &'a ChatRequest, stream: bool) -> Self {
        let (system, messages) = turns(&request.messages);
        let has_tools = !request.tools.is_empty();
        Self {
            model: &request.model,
            max_tokens: request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            system,
            messages,
            tools: request
                .tools
                .iter()
                .map(|t| WireTool {
                    name: &t.name,
                    description: &t.description,
                    input_schema: &t.parameters,
                })
                .collect(),
            tool_choice: has_tools.then(|| match &request.tool_choice {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Required => json!({"type": "any"}),
                ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
            }),
            temperature: request.temperature,
            stream: stream.then_some(true),
        }
    }
}

/// The JSON body for `request` as a value (for tests and for tools that show what would be sent).
/// Turning it into a value cannot fail: its maps have string keys.
pub fn request_body(request: &ChatRequest, stream: bool) -> Value {
    serde_json::to_value(WireRequest::new(request, stream)).unwrap_or(Value::Null)
}

/// Converts neutral messages to Anthropic's shape: leading system messages become the system prompt
/// (joined by blank lines); later ones become user text; tool results are `tool_result` blocks in a
/// user turn; consecutive turns of one role are merged; a user turn that is a single text is a string.
pub fn to_anthropic_messages(messages: &[Message]) -> (Option<String>, Vec<Value>) {
    let (system, turns) = turns(messages);
    // Cannot fail: the turns' maps have string keys.
    let turns = turns
        .iter()
        .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
        .collect();
    (system, turns)
}

/// [`to_anthropic_messages`] with the texts borrowed.
pub(crate) fn turns(messages: &[Message]) -> (Option<String>, Vec<Turn<'_>>) {
    let mut system_parts = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Block<'_>>)> = Vec::new();
    let mut leading = true;
    for m in messages {
        if m.role == Role::System && leading {
            system_parts.push(m.text());
            continue;
        }
        leading = false;
        let role = if m.role == Role::Assistant {
            "assistant"
        } else {
            "user"
        };
        // Tool results first: Anthropic wants them at the start of the user turn.
        let results = m.content.iter().filter_map(|b| match b {
            ContentBlock::ToolResult {
                tool_call_id,
                content,
                is_error,
            } => Some(Block::ToolResult {
                tool_use_id: tool_call_id,
                content,
                is_error: *is_error,
            }),
            _ => None,
        });
        let others = m.content.iter().filter_map(|b| match b {
            // Anthropic rejects empty text blocks.
            ContentBlock::Text { text } if text.is_empty() => None,
            ContentBlock::Text { text } => Some(Block::Text { text }),
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => Some(Block::ToolUse {
                id,
                name,
                input: arguments,
            }),
            ContentBlock::ToolResult { .. } => None,
        });
        match turns.last_mut() {
            Some((last_role, blocks)) if *last_role == role => {
                blocks.extend(results.chain(others));
            }
            _ => turns.push((role, results.chain(others).collect())),
        }
    }
    let turns = turns
        .into_iter()
        .map(|(role, blocks)| {
            let content = match blocks.as_slice() {
                [Block::Text { text }] if role == "user" => TurnContent::Text(text),
                _ => TurnContent::Blocks(blocks),
            };
            Turn { role, content }
        })
        .collect();
    let system = (!system_parts.is_empty()).then(|| system_parts.join("\n\n"));
    (system, turns)
}

/// Reads Anthropic content blocks (`text`, `tool_use`; empty texts and other kinds are skipped) into
/// neutral ones.
pub(crate) fn blocks_from_anthropic(blocks: &[Value]) -> Vec<ContentBlock> {
    blocks
        .iter()
        .filter_map(|b| match b.get("type").and_then(Value::as_str) {
            Some("text") => b
                .get("text")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(ContentBlock::text),
            Some("tool_use") => Some(ContentBlock::tool_call(
                b.get("id").and_then(Value::as_str).unwrap_or(""),
                b.get("name").and_then(Value::as_str).unwrap_or(""),
                b.get("input").cloned().unwrap_or_else(|| json!({})),
            )),
            _ => None,
        })
        .collect()
}

#[derive(Deserialize)]
struct WireResponse {
    id: Option<String>,
    model: Option<String>,
    content: Option<Vec<Value>>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize, Default, Clone, Copy)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

fn parse_response(bytes: &[u8]) -> Result<ChatResponse, LlmError> {
    let wire: WireResponse = serde_json::from_slice(bytes).map_err(|e| {
        LlmError::decode(
            format!("{e} in {}", crate::printable::printable_bytes(bytes, 300)),
            bytes,
        )
    })?;
    let content = blocks_from_anthropic(&wire.content.unwrap_or_default());
    let has_calls = content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolCall { .. }));
    let stop_reason = match wire.stop_reason {
        Some(r) => StopReason::parse(&r),
        None if has_calls => StopReason::ToolUse,
        None => StopReason::EndTurn,
    };
    let usage = wire.usage.unwrap_or_default();
    Ok(ChatResponse {
        content,
        stop_reason,
        usage: Usage {
            input_tokens: usage.input_tokens.unwrap_or(0),
            output_tokens: usage.output_tokens.unwrap_or(0),
        },
        model: wire.model,
        id: wire.id,
        raw: RawExchange::default(),
    })
}

enum PartialBlock {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        initial: Value,
        json: String,
    },
    Skipped,
}

#[derive(Default)]
struct StreamAssembler {
    blocks: Vec<(usize, PartialBlock)>,
    id: Option<String>,
    model: Option<String>,
    stop_reason: Option<String>,
    usage: Usage,
    events: usize,
    done: bool,
}

impl StreamAssembler {
    /// `message_start`: the message's id, model and first token counts.
    fn start_message(&mut self, message: &Value) {
        self.id = message
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_string);
        self.model = message
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string);
        self.usage.input_tokens = message["usage"]["input_tokens"].as_u64().unwrap_or(0);
        self.usage.output_tokens = message["usage"]["output_tokens"].as_u64().unwrap_or(0);
    }

    /// `content_block_start`: a text or tool-use block begins at `index`.
    fn start_block(&mut self, index: usize, block: &Value, on_event: &mut dyn FnMut(StreamEvent)) {
        let text_of = |key: &str| {
            block
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let partial = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = text_of("text");
                if !text.is_empty() {
                    on_event(StreamEvent::TextDelta(text.clone()));
                }
                PartialBlock::Text(text)
            }
            Some("tool_use") => {
                let name = text_of("name");
                on_event(StreamEvent::ToolCallStarted {
                    index: self.tool_position(),
                    name: name.clone(),
                });
                PartialBlock::ToolUse {
                    id: text_of("id"),
                    name,
                    initial: block.get("input").cloned().unwrap_or_else(|| json!({})),
                    json: String::new(),
                }
            }
            _ => PartialBlock::Skipped,
        };
        self.blocks.push((index, partial));
    }

    /// `content_block_delta`: more text, or more of a tool call's JSON, for the block at `index`.
    fn block_delta(&mut self, index: usize, delta: &Value, on_event: &mut dyn FnMut(StreamEvent)) {
        let position = self.tool_position_of(index);
        let Some((_, block)) = self.blocks.iter_mut().rev().find(|(i, _)| *i == index) else {
            return;
        };
        let piece = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or("");
        match (block, delta.get("type").and_then(Value::as_str)) {
            (PartialBlock::Text(text), Some("text_delta")) => {
                let piece = piece("text");
                text.push_str(piece);
                if !piece.is_empty() {
                    on_event(StreamEvent::TextDelta(piece.to_string()));
                }
            }
            (PartialBlock::ToolUse { json, .. }, Some("input_json_delta")) => {
                let piece = piece("partial_json");
                json.push_str(piece);
                if !piece.is_empty() {
                    on_event(StreamEvent::ToolCallDelta {
                        index: position,
                        fragment: piece.to_string(),
                    });
                }
            }
            _ => {}
        }
    }

    fn tool_position(&self) -> usize {
        self.blocks
            .iter()
            .filter(|(_, b)| matches!(b, PartialBlock::ToolUse { .. }))
            .count()
    }

    fn tool_position_of(&self, index: usize) -> usize {
        self.blocks
            .iter()
            .filter(|(_, b)| matches!(b, PartialBlock::ToolUse { .. }))
            .position(|(i, _)| *i == index)
            .unwrap_or(0)
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
        let data: Value = serde_json::from_str(&event.data).map_err(|e| {
            LlmError::decode(
                format!(
                    "bad stream event ({e}): {}",
                    crate::printable::printable(&event.data, 300)
                ),
                event.data.as_bytes(),
            )
        })?;
        self.events += 1;
        let kind = event
            .event
            .clone()
            .or_else(|| data.get("type").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_default();
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
        match kind.as_str() {
            "message_start" => self.start_message(&data["message"]),
            "content_block_start" => self.start_block(index, &data["content_block"], on_event),
            "content_block_delta" => self.block_delta(index, &data["delta"], on_event),
            "message_delta" => {
                if let Some(reason) = data["delta"].get("stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(out) = data["usage"].get("output_tokens").and_then(Value::as_u64) {
                    self.usage.output_tokens = out;
                }
                if let Some(input) = data["usage"].get("input_tokens").and_then(Value::as_u64) {
                    self.usage.input_tokens = input;
                }
            }
            "message_stop" => self.done = true,
            "error" => {
                return Err(LlmError::StreamError {
                    message: error_message(&event.data, 200),
                });
            }
            _ => {} // ping, content_block_stop, and whatever comes next
        }
        Ok(())
    }

    fn finish(self) -> Result<ChatResponse, LlmError> {
        if !self.done {
            return Err(LlmError::IncompleteStream {
                message: if self.events == 0 {
                    "the server sent no events before closing the stream".to_string()
                } else {
                    format!("no message_stop event after {} events", self.events)
                },
            });
        }
        let mut blocks = self.blocks;
        blocks.sort_by_key(|(i, _)| *i);
        let content: Vec<ContentBlock> = blocks
            .into_iter()
            .filter_map(|(_, b)| match b {
                PartialBlock::Text(text) if text.is_empty() => None,
                PartialBlock::Text(text) => Some(ContentBlock::text(text)),
                PartialBlock::ToolUse {
                    id,
                    name,
                    initial,
                    json,
                } => {
                    let arguments = if json.trim().is_empty() {
                        initial
                    } else {
                        parse_arguments(&json)
                    };
                    Some(ContentBlock::tool_call(id, name, arguments))
                }
                PartialBlock::Skipped => None,
            })
            .collect();
        let has_calls = content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolCall { .. }));
        let stop_reason = match self.stop_reason {
            Some(r) => StopReason::parse(&r),
            None if has_calls => StopReason::ToolUse,
            None => StopReason::EndTurn,
        };
        Ok(ChatResponse {
            content,
            stop_reason,
            usage: self.usage,
            model: self.model,
            id: self.id,
            raw: Default::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ToolDefinition;

    #[test]
    fn system_goes_top_level_and_tool_results_into_user_turns() {
        let req = ChatRequest::new(
            "claude",
            vec![
                Message::system("be brief"),
                Message::user("hi"),
                Message::assistant(vec![
                    ContentBlock::text("checking"),
                    ContentBlock::tool_call("t1", "ls", json!({})),
                ]),
                Message::tool_results(vec![ContentBlock::tool_result("t1", "boom", true)]),
                Message::user("and now?"),
            ],
        )
        .with_tools(vec![ToolDefinition {
            name: "ls".into(),
            description: "list".into(),
            parameters: json!({"type": "object"}),
        }])
        .with_tool_choice(ToolChoice::Required);
        let body = request_body(&req, false);
        assert_eq!(
            body,
            json!({
                "model": "claude",
                "max_tokens": 4096,
                "system": "be brief",
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "checking"},
                        {"type": "tool_use", "id": "t1", "name": "ls", "input": {}}
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": true},
                        {"type": "text", "text": "and now?"}
                    ]}
                ],
                "tools": [{"name": "ls", "description": "list", "input_schema": {"type": "object"}}],
                "tool_choice": {"type": "any"}
            })
        );
    }

    #[test]
    fn parses_answers() {
        let r = parse_response(
            br#"{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[
                {"type":"thinking","thinking":"hmm"},{"type":"text","text":"hi"},
                {"type":"tool_use","id":"tu","name":"f","input":{"a":1}}],
                "stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":2}}"#,
        )
        .unwrap();
        assert_eq!(
            r.content,
            vec![
                ContentBlock::text("hi"),
                ContentBlock::tool_call("tu", "f", json!({"a": 1}))
            ]
        );
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(r.usage.total(), 12);
    }

    fn feed(events: &[(&str, &str)]) -> Result<ChatResponse, LlmError> {
        let mut a = StreamAssembler::default();
        for (name, data) in events {
            a.event(
                &SseEvent {
                    event: Some(name.to_string()),
                    data: data.to_string(),
                },
                &mut |_| {},
            )?;
        }
        a.finish()
    }

    #[test]
    fn assembles_streams() {
        let r = feed(&[
            ("message_start", r#"{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":7,"output_tokens":1}}}"#),
            ("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#),
            ("ping", r#"{"type":"ping"}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}"#),
            ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
            ("content_block_start", r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":":2}"}}"#),
            ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ])
        .unwrap();
        assert_eq!(
            r.content,
            vec![
                ContentBlock::text("Hello"),
                ContentBlock::tool_call("t", "f", json!({"a": 2}))
            ]
        );
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 7,
                output_tokens: 9
            }
        );
        assert_eq!(r.stop_reason, StopReason::ToolUse);
    }

    #[test]
    fn stream_errors() {
        let err = feed(&[(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the server reported an error in the stream: Overloaded (overloaded_error)"
        );
        let err = feed(&[("message_start", r#"{"message":{}}"#)]).unwrap_err();
        assert!(matches!(err, LlmError::IncompleteStream { .. }));
    }
}
