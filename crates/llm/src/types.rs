//! The provider-neutral model of a conversation.
//!
//! Adapters translate these types to and from the wire formats; engines only ever see these.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who a message is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The user (or the engine speaking for the user).
    User,
    /// The model.
    Assistant,
    /// Results of tool calls the model asked for.
    Tool,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// The model asks for a tool to be run.
    ToolCall {
        /// Id chosen by the provider; the result must carry it back.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments. Normally a JSON object; when the model produced something that is not valid JSON,
        /// the raw text is kept as a JSON string so nothing is lost and the engine can report it.
        arguments: Value,
    },
    /// The result of a tool call.
    ToolResult {
        /// The id of the call this answers.
        tool_call_id: String,
        /// What the tool produced (or the error text).
        content: String,
        /// Whether the tool failed.
        #[serde(default)]
        is_error: bool,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// A tool call block.
    pub fn tool_call(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self::ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }

    /// A tool result block.
    pub fn tool_result(
        tool_call_id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Self::ToolResult {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
            is_error,
        }
    }
}

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who it is from.
    pub role: Role,
    /// What it says. When read from JSON, a plain string is accepted as a single text block.
    #[serde(deserialize_with = "content_blocks")]
    pub content: Vec<ContentBlock>,
}

fn content_blocks<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<ContentBlock>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Content {
        Text(String),
        Blocks(Vec<ContentBlock>),
    }
    Ok(match Content::deserialize(d)? {
        Content::Text(text) => vec![ContentBlock::text(text)],
        Content::Blocks(blocks) => blocks,
    })
}

impl Message {
    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self {
            role: Role::System,
            content: vec![ContentBlock::text(text)],
        }
    }

    /// A user message with plain text.
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![ContentBlock::text(text)],
        }
    }

    /// An assistant message made of `content` (text and tool calls).
    pub fn assistant(content: Vec<ContentBlock>) -> Self {
        Self {
            role: Role::Assistant,
            content,
        }
    }

    /// A message carrying tool results (each block should be a [`ContentBlock::ToolResult`]).
    pub fn tool_results(results: Vec<ContentBlock>) -> Self {
        Self {
            role: Role::Tool,
            content: results,
        }
    }

    /// All text blocks joined with newlines.
    pub fn text(&self) -> String {
        join_text(&self.content)
    }

    /// The tool calls of this message, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = ToolCallRef<'_>> {
        tool_calls(&self.content)
    }
}

/// A borrowed view of a tool call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToolCallRef<'a> {
    /// The call id.
    pub id: &'a str,
    /// The tool name.
    pub name: &'a str,
    /// The arguments.
    pub arguments: &'a Value,
}

/// Like [`join_text`], borrowing when there is at most one text block (the usual case).
pub(crate) fn text_of(blocks: &[ContentBlock]) -> std::borrow::Cow<'_, str> {
    let mut texts = blocks.iter().filter_map(|b| match b {
        ContentBlock::Text { text } => Some(text.as_str()),
        _ => None,
    });
    match (texts.next(), texts.next()) {
        (None, _) => std::borrow::Cow::Borrowed(""),
        (Some(only), None) => std::borrow::Cow::Borrowed(only),
        _ => std::borrow::Cow::Owned(join_text(blocks)),
    }
}

pub(crate) fn join_text(blocks: &[ContentBlock]) -> String {
    let texts: Vec<&str> = blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    texts.join("\n")
}

fn tool_calls(blocks: &[ContentBlock]) -> impl Iterator<Item = ToolCallRef<'_>> {
    blocks.iter().filter_map(|b| match b {
        ContentBlock::ToolCall {
            id,
            name,
            arguments,
        } => Some(ToolCallRef {
            id,
            name,
            arguments,
        }),
        _ => None,
    })
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Name the model uses to call it.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// How the model may use the tools.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides (the default).
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// Exactly this tool.
    Tool(String),
}

/// One request to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Model name as the provider knows it.
    pub model: String,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Tools on offer (may be empty).
    #[serde(default)]
    pub tools: Vec<ToolDefinition>,
    /// How tools may be used; ignored when there are no tools.
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// Sampling temperature; omitted from the wire request when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Output token limit; omitted from the wire request when unset (Anthropic requires one, so its
    /// adapter fills in a default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

impl ChatRequest {
    /// A little more than the size of this request as JSON, in bytes (to size buffers).
    pub fn approximate_size(&self) -> usize {
        let blocks: usize = self
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .map(|b| match b {
                ContentBlock::Text { text } => text.len(),
                ContentBlock::ToolCall {
                    id,
                    name,
                    arguments,
                } => {
                    id.len()
                        + name.len()
                        + match arguments {
                            Value::String(s) => s.len(),
                            _ => 64,
                        }
                }
                ContentBlock::ToolResult {
                    tool_call_id,
                    content,
                    ..
                } => tool_call_id.len() + content.len(),
            } + 96)
            .sum();
        let tools: usize = self
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + 512)
            .sum();
        // Escapes (newlines, quotes) make JSON text a little longer than the text itself.
        (blocks + tools) / 8 * 9 + 1024
    }

    /// A request for `model` with `messages` and no tools.
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            model: model.into(),
            messages,
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            temperature: None,
            max_tokens: None,
        }
    }

    /// Adds tools.
    pub fn with_tools(mut self, tools: Vec<ToolDefinition>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the tool choice.
    pub fn with_tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = choice;
        self
    }

    /// Sets the temperature.
    pub fn with_temperature(mut self, temperature: f64) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Sets the output token limit.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// It finished its answer.
    EndTurn,
    /// It wants tool results.
    ToolUse,
    /// It hit the output token limit.
    MaxTokens,
    /// It produced a stop sequence.
    StopSequence,
    /// The provider filtered the output.
    ContentFilter,
    /// Anything else, verbatim.
    Other(String),
}

impl StopReason {
    /// The canonical name (Anthropic's vocabulary, which recordings use).
    pub fn as_str(&self) -> &str {
        match self {
            Self::EndTurn => "end_turn",
            Self::ToolUse => "tool_use",
            Self::MaxTokens => "max_tokens",
            Self::StopSequence => "stop_sequence",
            Self::ContentFilter => "content_filter",
            Self::Other(s) => s,
        }
    }

    /// Parses either provider's vocabulary (`end_turn`/`stop`, `tool_use`/`tool_calls`,
    /// `max_tokens`/`length`, …).
    pub fn parse(s: &str) -> Self {
        match s {
            "end_turn" | "stop" => Self::EndTurn,
            "tool_use" | "tool_calls" | "function_call" => Self::ToolUse,
            "max_tokens" | "length" => Self::MaxTokens,
            "stop_sequence" => Self::StopSequence,
            "content_filter" => Self::ContentFilter,
            other => Self::Other(other.to_string()),
        }
    }
}

impl Serialize for StopReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(Self::parse(&s))
    }
}

/// Token counts reported by the provider (zero when it reported none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

impl Usage {
    /// Input plus output.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// Adds another usage to this one.
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// The bytes of one HTTP exchange, as sent and as received (for audit records).
#[derive(Debug, Clone, Default)]
pub struct RawExchange {
    /// The request body exactly as sent.
    pub request: Option<std::sync::Arc<Vec<u8>>>,
    /// The response body exactly as received (non-streamed answers).
    pub response: Option<std::sync::Arc<Vec<u8>>>,
}

/// A model's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChatResponse {
    /// Text and tool calls, in the order the model produced them.
    pub content: Vec<ContentBlock>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Token usage.
    #[serde(default)]
    pub usage: Usage,
    /// The model that answered, when the provider says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The provider's id for this answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The HTTP exchange behind the answer, when it came over HTTP (not part of equality).
    #[serde(skip)]
    pub raw: RawExchange,
}

impl PartialEq for ChatResponse {
    fn eq(&self, other: &Self) -> bool {
        self.content == other.content
            && self.stop_reason == other.stop_reason
            && self.usage == other.usage
            && self.model == other.model
            && self.id == other.id
    }
}

impl ChatResponse {
    /// An answer made of `content` that did not come from a server (given by a person, read from a
    /// file): it stops for tool use when it calls a tool, else it ends the turn; no usage, model or id.
    pub fn given(content: Vec<ContentBlock>) -> Self {
        let calls = content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolCall { .. }));
        Self {
            content,
            stop_reason: if calls {
                StopReason::ToolUse
            } else {
                StopReason::EndTurn
            },
            usage: Usage::default(),
            model: None,
            id: None,
            raw: RawExchange::default(),
        }
    }

    /// All text joined with newlines.
    pub fn text(&self) -> String {
        join_text(&self.content)
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = ToolCallRef<'_>> {
        tool_calls(&self.content)
    }

    /// This answer as an assistant message for the next request.
    pub fn to_message(&self) -> Message {
        Message::assistant(self.content.clone())
    }
}

/// Incremental output of a streaming request, delivered while the answer is being produced.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// More text.
    TextDelta(String),
    /// A tool call has started.
    ToolCallStarted {
        /// Position of the call in the answer.
        index: usize,
        /// Tool name.
        name: String,
    },
    /// More argument text for a tool call.
    ToolCallDelta {
        /// Position of the call in the answer.
        index: usize,
        /// The fragment.
        fragment: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stop_reasons_map_both_vocabularies() {
        assert_eq!(StopReason::parse("stop"), StopReason::EndTurn);
        assert_eq!(StopReason::parse("tool_calls"), StopReason::ToolUse);
        assert_eq!(StopReason::parse("length"), StopReason::MaxTokens);
        assert_eq!(
            StopReason::parse("refusal"),
            StopReason::Other("refusal".into())
        );
        for r in [
            "end_turn",
            "tool_use",
            "max_tokens",
            "stop_sequence",
            "content_filter",
            "weird",
        ] {
            assert_eq!(StopReason::parse(r).as_str(), r);
        }
    }

    #[test]
    fn message_content_may_be_a_plain_string() {
        let m: Message = serde_json::from_value(json!({"role": "user", "content": "hi"})).unwrap();
        assert_eq!(m, Message::user("hi"));
        let m: Message = serde_json::from_value(
            json!({"role": "assistant", "content": [{"type": "text", "text": "a"}]}),
        )
        .unwrap();
        assert_eq!(m.text(), "a");
    }

    #[test]
    fn requests_omit_unset_sampling_options() {
        let r = ChatRequest::new("m", vec![Message::user("hi")]);
        let v = serde_json::to_value(&r).unwrap();
        assert!(
            v.get("temperature").is_none() && v.get("max_tokens").is_none(),
            "{v}"
        );
        let back: ChatRequest = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn helpers_extract_text_and_tool_calls() {
        let resp = ChatResponse {
            content: vec![
                ContentBlock::text("a"),
                ContentBlock::tool_call("c1", "t", json!({"x": 1})),
                ContentBlock::text("b"),
            ],
            stop_reason: StopReason::ToolUse,
            usage: Usage::default(),
            model: None,
            id: None,
            raw: RawExchange::default(),
        };
        assert_eq!(resp.text(), "a\nb");
        let calls: Vec<_> = resp.tool_calls().collect();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "t");
        assert_eq!(resp.to_message().role, Role::Assistant);
    }
}
