//! The record of an LLM call, answered or failed: `io/invocations/<id>.json`, one JSON object.
//!
//! * `metadata`: model, client, duration, `status` (`SUCCESS` or `FAILED`), token usage and stop
//!   reason of an answer, or the `error` (`kind`, `message`, `http_status`) of a failed call;
//! * `request`: the request body as sent (or, when its bytes were not kept, as it would be sent in
//!   the provider's wire format);
//! * `response`: the answer as received; for answers that did not come as one body (streams,
//!   playback) the equivalent chat-completions object. A failed call keeps the error body the
//!   server sent, as received: JSON as it is, anything else as a string (none: no `response`).
//!
//! The metadata is the file's first line (`{"metadata":{…},`), so that a reader that wants it
//! alone (`delta show`) reads one line, however large the request. The request's bytes are put
//! in as they were sent, without being parsed again. Runs made before this layout have a folder
//! per call (`request.json`, `response.json` or `.txt`, `metadata.json`); [`metadata`] reads both.
//!
//! Every byte passes through the run's redactor.

use std::sync::Arc;
use std::time::Duration;

use llm::{ChatRequest, ChatResponse, LlmError, Redactor};
use serde_json::{Value, json};

use super::io_writer::Content;
use llm::Provider;

use super::io_writer::Parts;

/// What every record says about the call besides its outcome.
pub(super) struct CallInfo {
    /// The configured model (the answer's own model name wins when it has one).
    pub(super) model: Option<String>,
    /// The client's description.
    pub(super) client: String,
    /// How long the call took.
    pub(super) took: Duration,
    /// The wire format of requests.
    pub(super) provider: Provider,
}

/// A request body in `provider`'s wire format (for records of requests whose bytes were not kept).
fn wire_request(provider: Provider, request: &ChatRequest) -> Vec<u8> {
    provider.wire_request(request).unwrap_or_default()
}

/// Bytes as received, for a record: shared as they are, or scrubbed on the writer thread when there
/// are secrets to hide (a model may echo the key).
fn scrubbed(redactor: &Redactor, bytes: &Arc<Vec<u8>>) -> Content {
    if redactor.is_empty() {
        return Content::Shared(Arc::clone(bytes));
    }
    Content::Scrubbed(redactor.clone(), Arc::clone(bytes))
}

/// `request.json`: the bytes sent, or the request serialized on the writer thread (it can be large).
fn request_file(
    sent: Option<&Arc<Vec<u8>>>,
    request: Arc<ChatRequest>,
    provider: Provider,
    redactor: &Redactor,
) -> Content {
    match sent {
        Some(bytes) => scrubbed(redactor, bytes),
        None => {
            let redactor = redactor.clone();
            Content::Later(Box::new(move || {
                redactor
                    .redact_bytes(&wire_request(provider, &request))
                    .into_owned()
            }))
        }
    }
}

/// The record of an answered call. `object` is the answer as a chat-completions object, used when
/// its body was not kept.
pub(super) fn answered(
    info: CallInfo,
    request: Arc<ChatRequest>,
    response: &ChatResponse,
    object: impl FnOnce() -> Value,
    redactor: &Redactor,
) -> Parts {
    let mut meta = json!({
        "model_id": response.model.clone().or(info.model),
        "client": info.client,
        "duration_ms": info.took.as_millis() as u64,
        "token_usage": {
            "prompt": response.usage.input_tokens,
            "completion": response.usage.output_tokens,
            "total": response.usage.total(),
        },
        "stop_reason": response.stop_reason.as_str(),
        "status": "SUCCESS",
    });
    // The model names itself in its answer: scrubbed like the rest of it.
    redactor.redact_json(&mut meta);
    let request_json = request_file(
        response.raw.request.as_ref(),
        request,
        info.provider,
        redactor,
    );
    let response_json = match &response.raw.response {
        Some(bytes) => as_json(scrubbed(redactor, bytes)),
        None => {
            let mut object = object();
            redactor.redact_json(&mut object);
            compact(&object).into()
        }
    };
    record(&meta, request_json, Some(response_json))
}

/// The record's parts: the metadata on the first line, then the request and the response.
fn record(meta: &Value, request: Content, response: Option<Content>) -> Parts {
    let mut fields = vec![("request", request)];
    fields.extend(response.map(|r| ("response", r)));
    object_parts(&json!({ "metadata": meta }), fields)
}

/// A record of `io/` as one JSON object: the fields of `head` (an object) on its first line, so
/// that a reader who wants only them reads one line ([`read_head`]), then `fields` one per line,
/// each value's bytes already JSON.
pub(super) fn object_parts(head: &Value, fields: Vec<(&str, Content)>) -> Parts {
    let head = compact(head);
    let open = head.strip_suffix(b"}").unwrap_or(b"{");
    let mut parts = vec![Content::Now(open.to_vec())];
    let mut separator = if open.len() > 1 { ",\n" } else { "\n" };
    for (key, value) in fields {
        parts.push(format!("{separator}{}:", Value::from(key)).as_str().into());
        parts.push(value);
        separator = ",\n";
    }
    parts.push("}\n".into());
    parts
}

/// The fields on the first line of the record at `path` (see [`object_parts`]); `None` when it
/// cannot be read or is not such a record.
fn read_head(path: &std::path::Path) -> Option<Value> {
    use std::io::BufRead;
    let mut first = String::new();
    std::io::BufReader::new(std::fs::File::open(path).ok()?)
        .read_line(&mut first)
        .ok()?;
    let line = first.trim_end();
    let head = match line.strip_suffix(',') {
        Some(open) => serde_json::from_str(&format!("{open}}}")),
        None => serde_json::from_str(line),
    };
    head.ok().filter(Value::is_object)
}

/// Bytes received, as a JSON value of the record: as they are when they are JSON, else as a string
/// (checked on the writer thread).
fn as_json(content: Content) -> Content {
    Content::Later(Box::new(move || {
        let mut bytes = Vec::new();
        let _ = content.write_to(&mut bytes);
        if serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_ok() {
            bytes
        } else {
            compact(&Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        }
    }))
}

fn compact(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// The metadata of call `id`'s record under `dir` (`io/invocations/`): the first line of
/// `<id>.json`, or `<id>/metadata.json` in a run made before.
pub(crate) fn metadata(dir: &std::path::Path, id: &str) -> Option<Value> {
    let file = dir.join(format!("{id}.json"));
    if !file.exists() {
        return store::atomic::read_json(&dir.join(id).join("metadata.json")).ok();
    }
    read_head(&file)?.get_mut("metadata").map(Value::take)
}

/// The record of a failed call: the request, the error, and the body the server sent if any.
pub(super) fn failed(
    info: CallInfo,
    request: Arc<ChatRequest>,
    error: &LlmError,
    redactor: &Redactor,
) -> Parts {
    let mut meta = json!({
        "model_id": info.model,
        "client": info.client,
        "duration_ms": info.took.as_millis() as u64,
        "status": "FAILED",
        "error": {
            "kind": error.kind(),
            "message": redactor.redact(&error.to_string()),
        },
    });
    if let Some(status) = error.status() {
        meta["error"]["http_status"] = json!(status);
    }
    redactor.redact_json(&mut meta);
    let body = error
        .response_body()
        .map(|body| as_json(redactor.redact_bytes(body).into_owned().into()));
    record(
        &meta,
        request_file(None, request, info.provider, redactor),
        body,
    )
}

/// The record of tool call `reference` under `dir` (`io/tool_executions/`): its path, and its
/// exit code and duration in milliseconds where known. `<ref>.json` (whose first line holds them),
/// or the folder `<ref>/` of a run made before (`exit_code.txt`, `duration_ms.txt`).
pub(crate) fn tool_record(
    dir: &std::path::Path,
    reference: &str,
) -> Option<(std::path::PathBuf, Option<i32>, Option<u64>)> {
    let file = dir.join(format!("{reference}.json"));
    if file.exists() {
        let head = read_head(&file).unwrap_or(Value::Null);
        let exit_code = head["exit_code"]
            .as_i64()
            .and_then(|c| i32::try_from(c).ok());
        return Some((file, exit_code, head["duration_ms"].as_u64()));
    }
    let folder = dir.join(reference);
    if !folder.is_dir() {
        return None;
    }
    let read = |name: &str| {
        std::fs::read_to_string(folder.join(name))
            .ok()
            .map(|t| t.trim().to_string())
    };
    let exit_code = read("exit_code.txt").and_then(|c| c.parse().ok());
    let duration = read("duration_ms.txt").and_then(|d| d.parse().ok());
    Some((folder, exit_code, duration))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(parts: Parts) -> Vec<u8> {
        let mut bytes = Vec::new();
        for part in parts {
            part.write_to(&mut bytes).unwrap();
        }
        bytes
    }

    #[test]
    fn a_record_is_one_object_whose_head_is_its_first_line() {
        let dir = tempfile::tempdir().unwrap();
        let head = json!({"exit_code": 0, "command": "echo '}' {\n}"});
        let fields = vec![
            ("stdout", Content::from("\"a\\nb\"")),
            ("request", Content::from("{\"x\":[1]}")),
        ];
        let bytes = written(object_parts(&head, fields));
        let whole: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            whole,
            json!({"exit_code": 0, "command": "echo '}' {\n}", "stdout": "a\nb", "request": {"x": [1]}})
        );
        let path = dir.path().join("r.json");
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read_head(&path), Some(head));
        // No head fields, and no fields after the head: still one object, read back.
        let bytes = written(object_parts(&json!({}), vec![("a", Content::from("1"))]));
        assert_eq!(
            serde_json::from_slice::<Value>(&bytes).unwrap(),
            json!({"a": 1})
        );
        let bytes = written(object_parts(&json!({"k": true}), Vec::new()));
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read_head(&path), Some(json!({"k": true})));
    }
}
