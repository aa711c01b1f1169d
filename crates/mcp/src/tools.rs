//! Tools as the server describes them, and the results of calling them.

use serde_json::{Map, Value, json};

use crate::McpError;

/// One tool from `tools/list`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    /// The tool's name on its server (see [`model_tool_name`] for the name a model sees).
    pub name: String,
    /// What the tool does, for the model.
    pub description: Option<String>,
    /// The JSON Schema of the arguments (an object schema; `{"type":"object"}` when the server gave
    /// none).
    pub input_schema: Value,
    /// A human-readable title, if the server gave one.
    pub title: Option<String>,
}

impl ToolInfo {
    /// A tool from one element of a `tools/list` result's `tools`.
    pub(crate) fn from_json(tool: &Value) -> Result<Self, McpError> {
        let text = |key: &str| tool.get(key).and_then(Value::as_str).map(str::to_string);
        let name = text("name").ok_or_else(|| {
            McpError::Protocol(format!("a tool in tools/list has no name: {tool}"))
        })?;
        let input_schema = match tool.get("inputSchema") {
            Some(schema @ Value::Object(_)) => schema.clone(),
            _ => json!({"type": "object"}),
        };
        Ok(Self {
            name,
            description: text("description"),
            input_schema,
            title: text("title"),
        })
    }
}

/// The name a model sees for `tool` of `server`: `<server>__<tool>`, or `None` when that is not a
/// name model APIs accept (`^[a-zA-Z0-9_-]{1,64}$`).
pub fn model_tool_name(server: &str, tool: &str) -> Option<String> {
    let name = format!("{server}__{tool}");
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    (name.len() <= 64 && name.chars().all(allowed)).then_some(name)
}

/// The result of `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    /// Whether the tool reported a failure (`isError`), which the model should see.
    pub is_error: bool,
    /// The whole result object (`content`, `structuredContent`, `_meta`, ...).
    pub raw: Value,
}

impl CallResult {
    /// A result from a `tools/call` result object.
    pub(crate) fn from_json(raw: Value) -> Self {
        let is_error = raw.get("isError").and_then(Value::as_bool).unwrap_or(false);
        Self { is_error, raw }
    }

    /// The result as text for the model: text blocks verbatim (joined by newlines);
    /// `structuredContent` as JSON when no text block is present; a resource link as
    /// `[resource link: <name> <uri> (<mimeType>)]`; an embedded resource as its text, or a note
    /// for a blob; images and audio as a note such as `[image: image/png, 68 bytes, not shown]`
    /// (never their base64 bytes).
    pub fn text(&self) -> String {
        let blocks = self.raw.get("content").and_then(Value::as_array);
        let blocks = blocks.map(Vec::as_slice).unwrap_or_default();
        let mut parts: Vec<String> = Vec::new();
        let has_text = blocks.iter().any(|b| kind(b) == "text");
        if !has_text && let Some(structured) = self.raw.get("structuredContent") {
            parts.push(structured.to_string());
        }
        parts.extend(blocks.iter().map(render_block));
        parts.join("\n")
    }
}

/// A content block's `type`.
fn kind(block: &Value) -> &str {
    block.get("type").and_then(Value::as_str).unwrap_or("")
}

/// One content block as text.
fn render_block(block: &Value) -> String {
    let field = |object: &Value, key: &str| -> String {
        object
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    match kind(block) {
        "text" => field(block, "text"),
        kind @ ("image" | "audio") => {
            let bytes = decoded_len(&field(block, "data"));
            format!(
                "[{kind}: {}, {bytes} bytes, not shown]",
                field(block, "mimeType")
            )
        }
        "resource_link" => {
            let mime = block.get("mimeType").and_then(Value::as_str);
            let mime = mime.map(|m| format!(" ({m})")).unwrap_or_default();
            format!(
                "[resource link: {} {}{mime}]",
                field(block, "name"),
                field(block, "uri")
            )
        }
        "resource" => render_resource(block.get("resource").unwrap_or(&Value::Null)),
        other => format!("[{other} content, not shown]"),
    }
}

/// An embedded resource: its text, or a note for binary contents.
fn render_resource(resource: &Value) -> String {
    if let Some(text) = resource.get("text").and_then(Value::as_str) {
        return text.to_string();
    }
    let blob = resource.get("blob").and_then(Value::as_str).unwrap_or("");
    let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
    let mime = resource.get("mimeType").and_then(Value::as_str);
    let mime = mime.unwrap_or("application/octet-stream");
    format!(
        "[resource: {uri}, {mime}, {} bytes, not shown]",
        decoded_len(blob)
    )
}

/// The number of bytes base64 `data` decodes to.
fn decoded_len(data: &str) -> usize {
    let data = data.trim_end();
    let padding = data.bytes().rev().take_while(|&b| b == b'=').count();
    (data.len() * 3 / 4).saturating_sub(padding)
}

/// The arguments of a call as the JSON object MCP expects.
pub(crate) fn call_params(name: &str, arguments: Map<String, Value>) -> Value {
    json!({"name": name, "arguments": arguments})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(raw: Value) -> String {
        CallResult::from_json(raw).text()
    }

    #[test]
    fn text_blocks_are_joined_and_binary_blocks_become_notes() {
        let raw = json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource_link", "name": "r", "uri": "file:///r.txt", "mimeType": "text/plain"},
            {"type": "resource", "resource": {"uri": "mem://a", "text": "embedded"}},
            {"type": "resource", "resource": {"uri": "mem://b", "blob": "AAECAw==", "mimeType": "x/y"}},
        ], "structuredContent": {"ignored": true}});
        assert_eq!(
            text_of(raw),
            "one\n[image: image/png, 8 bytes, not shown]\n[audio: audio/wav, 3 bytes, not shown]\n\
             [resource link: r file:///r.txt (text/plain)]\nembedded\n[resource: mem://b, x/y, 4 bytes, not shown]"
        );
    }

    #[test]
    fn structured_content_stands_in_for_missing_text() {
        let result = CallResult::from_json(
            json!({"content": [], "structuredContent": {"a": 1}, "isError": true}),
        );
        assert!(result.is_error);
        assert_eq!(result.text(), r#"{"a":1}"#);
    }

    #[test]
    fn model_tool_names_are_checked() {
        assert_eq!(
            model_tool_name("fs", "read-file").as_deref(),
            Some("fs__read-file")
        );
        assert_eq!(model_tool_name("fs", "read.file"), None);
        assert_eq!(model_tool_name("fs", ""), Some("fs__".to_string()));
        assert_eq!(model_tool_name("s", &"x".repeat(62)), None);
        assert!(model_tool_name("s", &"x".repeat(61)).is_some());
    }
}
