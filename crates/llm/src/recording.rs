//! The recording file format (DyGram's `turn-<n>.json`) and its conversions.
//!
//! ```json
//! { "request":  { "type": "llm_invocation_request", "requestId": "req-…", "timestamp": "…", "context": {},
//!                 "messages": [ …Anthropic-shaped… ], "tools": [ {"name", "description", "input_schema"} ],
//!                 "systemPrompt": "…" },
//!   "response": { "type": "llm_invocation_response", "requestId": "…", "timestamp": "…", "reasoning": "",
//!                 "response": { "content": [ text / tool_use blocks ], "stop_reason": "…" } },
//!   "recordedAt": "…",
//!   "signature": { "toolNames": [sorted], "messageCount": n, "contextKeys": [] } }
//! ```
//!
//! Recordings are provider-neutral: whatever adapter produced an exchange, the request is stored in the
//! Anthropic message shape and the response as content blocks, so a run recorded against an
//! OpenAI-compatible server plays back for the same request shape. We also store the model and the
//! sampling options (`model`, `toolChoice`, `temperature`, `maxTokens`) and the response's `usage`,
//! `model` and `id`; readers of the original format ignore these fields, and files without them load.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::anthropic::{blocks_from_anthropic, to_anthropic_messages};
use crate::error::LlmError;
use crate::types::{ChatRequest, ChatResponse, ContentBlock, StopReason, ToolChoice, Usage};

/// One recorded exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recording {
    /// What was asked.
    pub request: RecordedRequest,
    /// What came back.
    pub response: RecordedResponse,
    /// When it was recorded.
    #[serde(rename = "recordedAt", default)]
    pub recorded_at: String,
    /// What playback matches on; computed from the request when absent (older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
}

/// The request half.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedRequest {
    /// Always `llm_invocation_request`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// Request id.
    #[serde(default)]
    pub request_id: String,
    /// When the request was made.
    #[serde(default)]
    pub timestamp: String,
    /// Free-form context (`{}` in everything we write).
    #[serde(default)]
    pub context: Value,
    /// The conversation, Anthropic-shaped, without the system prompt.
    #[serde(default)]
    pub messages: Vec<Value>,
    /// Tools offered: `{name, description, input_schema}`.
    #[serde(default)]
    pub tools: Vec<Value>,
    /// The system prompt, or when there is none, the first message's text (the original's convention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Model asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Tool choice, when not `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Temperature, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Output limit, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

/// The response half.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedResponse {
    /// Always `llm_invocation_response`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The request id this answers.
    #[serde(default)]
    pub request_id: String,
    /// When the answer arrived.
    #[serde(default)]
    pub timestamp: String,
    /// Unused; kept for compatibility.
    #[serde(default)]
    pub reasoning: String,
    /// The answer.
    pub response: RecordedAnswer,
}

/// The answer itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedAnswer {
    /// Anthropic-shaped content blocks (`text`, `tool_use`).
    pub content: Vec<Value>,
    /// Stop reason in Anthropic's vocabulary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Token usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Model that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Provider's answer id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// What playback matches requests on. Prompt text never takes part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Signature {
    /// Names of the tools offered, sorted.
    pub tool_names: Vec<String>,
    /// Number of messages in the Anthropic shape (system prompt excluded, tool results in user turns).
    pub message_count: usize,
    /// Sorted context keys (always empty in what we write).
    #[serde(default)]
    pub context_keys: Vec<String>,
}

impl Signature {
    /// The signature of a request.
    pub fn of(request: &ChatRequest) -> Self {
        let mut tool_names: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
        tool_names.sort();
        let (_, turns) = crate::anthropic::turns(&request.messages);
        Self {
            tool_names,
            message_count: turns.len(),
            context_keys: Vec::new(),
        }
    }

    /// Same tools, same message count, and same context keys when either side has any.
    pub fn matches(&self, other: &Signature) -> bool {
        self.tool_names == other.tool_names
            && self.message_count == other.message_count
            && ((self.context_keys.is_empty() && other.context_keys.is_empty())
                || self.context_keys == other.context_keys)
    }
}

impl std::fmt::Display for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = if self.message_count == 1 { "" } else { "s" };
        write!(
            f,
            "tools [{}], {} message{plural}",
            self.tool_names.join(", "),
            self.message_count
        )?;
        if !self.context_keys.is_empty() {
            write!(f, ", context keys [{}]", self.context_keys.join(", "))?;
        }
        Ok(())
    }
}

impl Recording {
    /// Builds the recording of one exchange.
    pub fn new(
        request: &ChatRequest,
        response: &ChatResponse,
        request_id: &str,
        requested_at: &str,
        answered_at: &str,
    ) -> Self {
        let (system, messages) = to_anthropic_messages(&request.messages);
        let system_prompt = system.or_else(|| request.messages.first().map(|m| m.text()));
        let tools = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        let content = response
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(json!({"type": "text", "text": text})),
                ContentBlock::ToolCall {
                    id,
                    name,
                    arguments,
                } => Some(json!({"type": "tool_use", "id": id, "name": name, "input": arguments})),
                ContentBlock::ToolResult { .. } => None,
            })
            .collect();
        Self {
            request: RecordedRequest {
                kind: "llm_invocation_request".into(),
                request_id: request_id.into(),
                timestamp: requested_at.into(),
                context: json!({}),
                messages,
                tools,
                system_prompt,
                model: Some(request.model.clone()),
                tool_choice: (request.tool_choice != ToolChoice::Auto)
                    .then(|| request.tool_choice.clone()),
                temperature: request.temperature,
                max_tokens: request.max_tokens,
            },
            response: RecordedResponse {
                kind: "llm_invocation_response".into(),
                request_id: request_id.into(),
                timestamp: answered_at.into(),
                reasoning: String::new(),
                response: RecordedAnswer {
                    content,
                    stop_reason: Some(response.stop_reason.as_str().to_string()),
                    usage: Some(response.usage),
                    model: response.model.clone(),
                    id: response.id.clone(),
                },
            },
            recorded_at: answered_at.into(),
            signature: Some(Signature::of(request)),
        }
    }

    /// The signature, computed from the request when the file has none.
    pub fn signature(&self) -> Signature {
        self.signature.clone().unwrap_or_else(|| {
            let mut tool_names: Vec<String> = self
                .request
                .tools
                .iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
                .collect();
            tool_names.sort();
            Signature {
                tool_names,
                message_count: self.request.messages.len(),
                context_keys: self
                    .request
                    .context
                    .as_object()
                    .map(|o| {
                        let mut keys: Vec<String> = o.keys().cloned().collect();
                        keys.sort();
                        keys
                    })
                    .unwrap_or_default(),
            }
        })
    }

    /// The recorded answer as a [`ChatResponse`].
    pub fn chat_response(&self) -> ChatResponse {
        let answer = &self.response.response;
        let content = blocks_from_anthropic(&answer.content);
        let has_calls = content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolCall { .. }));
        let stop_reason = match &answer.stop_reason {
            Some(r) => StopReason::parse(r),
            None if has_calls => StopReason::ToolUse,
            None => StopReason::EndTurn,
        };
        ChatResponse {
            content,
            stop_reason,
            usage: answer.usage.unwrap_or_default(),
            model: answer.model.clone(),
            id: answer.id.clone(),
            raw: Default::default(),
        }
    }

    /// Reads a recording file.
    pub fn load(path: &Path) -> Result<Self, LlmError> {
        let bytes = std::fs::read(path)
            .map_err(|e| LlmError::Recording(format!("cannot read {}: {e}", path.display())))?;
        serde_json::from_slice(&bytes)
            .map_err(|e| LlmError::Recording(format!("{} is not a recording: {e}", path.display())))
    }
}

/// Compares file names so that embedded numbers sort numerically (`turn-9` before `turn-10`).
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
                let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
                let (na, nb) = (&a[..da], &b[..db]);
                let strip = |n: &[u8]| {
                    let zeros = n.iter().take_while(|&&c| c == b'0').count();
                    n[zeros..].to_vec()
                };
                let (sa, sb) = (strip(na), strip(nb));
                let ord = sa
                    .len()
                    .cmp(&sb.len())
                    .then_with(|| sa.cmp(&sb))
                    .then_with(|| da.cmp(&db));
                if ord != Ordering::Equal {
                    return ord;
                }
                a = &a[da..];
                b = &b[db..];
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                a = &a[1..];
                b = &b[1..];
            }
        }
    }
}

/// The `*.json` files of a recordings directory, in natural order.
pub fn recording_files(dir: &Path) -> Result<Vec<PathBuf>, LlmError> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        LlmError::Recording(format!(
            "cannot read the recordings directory {}: {e}",
            dir.display()
        ))
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort_by(|a, b| natural_cmp(&file_name(a), &file_name(b)));
    Ok(files)
}

/// Folders next to `dir` (in its parent) that hold recordings (`turn-*.json` files), sorted: what to
/// offer when `dir` is not one.
pub fn dirs_beside(dir: &Path) -> Vec<PathBuf> {
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return Vec::new();
    };
    let holds_turns = |folder: &Path| {
        std::fs::read_dir(folder).is_ok_and(|mut files| {
            files.any(|f| {
                f.ok().is_some_and(|f| {
                    let name = f.file_name().to_string_lossy().into_owned();
                    name.starts_with("turn-") && name.ends_with(".json")
                })
            })
        })
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir() && holds_turns(p))
        .collect();
    out.sort();
    out
}

pub(crate) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Message, ToolDefinition};

    #[test]
    fn natural_order_puts_ten_after_nine() {
        let mut names = vec![
            "turn-10.json",
            "turn-2.json",
            "turn-1.json",
            "turn-9.json",
            "a.json",
            "turn-02.json",
        ];
        names.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            names,
            vec![
                "a.json",
                "turn-1.json",
                "turn-2.json",
                "turn-02.json",
                "turn-9.json",
                "turn-10.json"
            ]
        );
    }

    #[test]
    fn signature_counts_messages_in_the_anthropic_shape() {
        let req = ChatRequest::new(
            "m",
            vec![
                Message::system("s"),
                Message::user("u"),
                Message::assistant(vec![ContentBlock::tool_call("1", "b_tool", json!({}))]),
                Message::tool_results(vec![ContentBlock::tool_result("1", "ok", false)]),
            ],
        )
        .with_tools(vec![
            ToolDefinition {
                name: "b_tool".into(),
                description: String::new(),
                parameters: json!({}),
            },
            ToolDefinition {
                name: "a_tool".into(),
                description: String::new(),
                parameters: json!({}),
            },
        ]);
        let sig = Signature::of(&req);
        assert_eq!(sig.tool_names, vec!["a_tool", "b_tool"]);
        assert_eq!(sig.message_count, 3);
        assert_eq!(sig.to_string(), "tools [a_tool, b_tool], 3 messages");
    }

    #[test]
    fn context_keys_only_matter_when_present() {
        let a = Signature {
            tool_names: vec!["t".into()],
            message_count: 1,
            context_keys: vec![],
        };
        let mut b = a.clone();
        assert!(a.matches(&b));
        b.context_keys = vec!["k".into()];
        assert!(!a.matches(&b));
        let mut c = a.clone();
        c.message_count = 2;
        assert!(!a.matches(&c));
    }
}
