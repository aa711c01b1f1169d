//! Answers given from outside the process: a person (dygram's manual mode, on stdin) or a
//! responder through the file queue ([`crate::queue`]). Three forms are read: the reference's `{"type": "llm_response" |
//! "llm_invocation_response", "response": {"content": […]}}`, the design's `{"response": "…",
//! "tools": [{"name", "input" | "params"}]}`, and plain text (the model's text answer).

use serde_json::{Value, json};

use crate::LlmClient;
use crate::error::LlmError;
use crate::types::{ChatRequest, ChatResponse, ContentBlock};

/// Why an answer cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnswerError {
    /// Nothing but whitespace.
    #[error("the answer is empty")]
    Empty,
    /// It starts like JSON but does not parse (it may still be being written).
    #[error("the answer starts with '{{' but is not valid JSON: {0}")]
    NotJson(String),
    /// Valid JSON of the wrong shape.
    #[error("{0}")]
    Shape(String),
}

fn shape(message: impl Into<String>) -> AnswerError {
    AnswerError::Shape(message.into())
}

/// A client that gives one prepared answer (manual answers go through the recorder this way).
pub struct Given(pub ChatResponse);

impl LlmClient for Given {
    fn complete(&self, _: &ChatRequest) -> Result<ChatResponse, LlmError> {
        Ok(self.0.clone())
    }
    fn describe(&self) -> String {
        "manual answer".into()
    }
}

/// Reads an answer in one of the three forms (see the module documentation).
pub fn parse_answer(text: &str) -> Result<ChatResponse, AnswerError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(AnswerError::Empty);
    }
    let value: Value = match serde_json::from_str(trimmed) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) | Err(_) if !trimmed.starts_with('{') => {
            return Ok(ChatResponse::given(vec![ContentBlock::text(trimmed)]));
        }
        Ok(_) => return Err(shape("a JSON answer must be an object")),
        Err(e) => return Err(AnswerError::NotJson(e.to_string())),
    };
    let mut content = Vec::new();
    let mut n = 0;
    let mut call = |name: &str, input: Value, id: Option<&str>| {
        n += 1;
        ContentBlock::tool_call(
            id.map_or_else(|| format!("manual-{n}"), str::to_string),
            name,
            input,
        )
    };
    if let Some(kind) = value.get("type").and_then(Value::as_str) {
        if kind != "llm_response" && kind != "llm_invocation_response" {
            return Err(shape(format!(
                "Expected type 'llm_response' or 'llm_invocation_response', got '{kind}'"
            )));
        }
        let blocks = value
            .get("response")
            .and_then(|r| r.get("content"))
            .ok_or_else(|| shape("Response must include response.content array"))?
            .as_array()
            .ok_or_else(|| shape("response.content must be an array"))?;
        for b in blocks {
            match b.get("type").and_then(Value::as_str) {
                Some("text") => content.push(ContentBlock::text(
                    b.get("text")
                        .and_then(Value::as_str)
                        .ok_or_else(|| shape("Text blocks must have a text field"))?,
                )),
                Some("tool_use") => {
                    let name = b.get("name").and_then(Value::as_str);
                    let input = b.get("input");
                    let (Some(name), Some(input)) = (name, input) else {
                        return Err(shape("Tool use blocks must have name and input"));
                    };
                    content.push(call(
                        name,
                        input.clone(),
                        b.get("id").and_then(Value::as_str),
                    ));
                }
                _ => {
                    return Err(shape(
                        "Each content block must have a type (text or tool_use)",
                    ));
                }
            }
        }
    } else if value.get("response").is_some() || value.get("tools").is_some() {
        if let Some(text) = value.get("response") {
            let text = text
                .as_str()
                .ok_or_else(|| shape("`response` must be a string"))?;
            if !text.is_empty() {
                content.push(ContentBlock::text(text));
            }
        }
        if let Some(tools) = value.get("tools") {
            for t in tools
                .as_array()
                .ok_or_else(|| shape("`tools` must be an array"))?
            {
                let name = t
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| shape("each tool needs a `name`"))?;
                let input = t
                    .get("input")
                    .or_else(|| t.get("params"))
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                if !input.is_object() {
                    return Err(shape(format!("the input of tool {name} must be an object")));
                }
                content.push(call(name, input, None));
            }
        }
    } else {
        return Err(shape(
            "a JSON answer needs `response`/`tools`, or `type: \"llm_response\"` (or \"llm_invocation_response\") with `response.content`",
        ));
    }
    Ok(ChatResponse::given(content))
}

/// The pending request as shown to a person or written to the queue (`timestamp`: RFC 3339).
pub fn request_json(request: &ChatRequest, id: &str, node: &str, timestamp: &str) -> Value {
    let body = crate::anthropic::request_body(request, false);
    json!({
        "type": "llm_request",
        "requestId": id,
        "timestamp": timestamp,
        "node": node,
        "model": request.model,
        "messages": body.get("messages"),
        "tools": body.get("tools").cloned().unwrap_or_else(|| json!([])),
    })
}
