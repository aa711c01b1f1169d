//! The files of `io/invocations/<id>/`: one folder per LLM call, answered or failed.
//!
//! * `request.json`: the request body as sent (or, when its bytes were not kept, as it would be sent
//!   in the provider's wire format);
//! * `response.json`: the answer as received; for answers that did not come as one body (streams,
//!   playback) the equivalent chat-completions object. A failed call keeps the error body the server
//!   sent, as received: `response.json` when it is JSON, `response.txt` otherwise;
//! * `metadata.json`: model, client, duration, `status` (`SUCCESS` or `FAILED`), token usage and stop
//!   reason of an answer, or the `error` (`kind`, `message`, `http_status`) of a failed call.
//!
//! Every byte passes through the run's redactor.

use std::sync::Arc;
use std::time::Duration;

use llm::{ChatRequest, ChatResponse, LlmError, Redactor};
use serde_json::{Value, json};

use super::io_writer::Content;
use llm::Provider;

/// Files for one folder.
pub(super) type Files = Vec<(&'static str, Content)>;

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
    let redactor = redactor.clone();
    let bytes = Arc::clone(bytes);
    Content::Later(Box::new(move || redactor.redact_bytes(&bytes).into_owned()))
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

fn pretty(value: &Value) -> Vec<u8> {
    serde_json::to_vec_pretty(value).unwrap_or_default()
}

/// The record of an answered call. `object` is the answer as a chat-completions object, used when
/// its body was not kept.
pub(super) fn answered(
    info: CallInfo,
    request: Arc<ChatRequest>,
    response: &ChatResponse,
    object: impl FnOnce() -> Value,
    redactor: &Redactor,
) -> Files {
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
        Some(bytes) => scrubbed(redactor, bytes),
        None => {
            let mut object = object();
            redactor.redact_json(&mut object);
            pretty(&object).into()
        }
    };
    vec![
        ("request.json", request_json),
        ("response.json", response_json),
        ("metadata.json", pretty(&meta).into()),
    ]
}

/// The record of a failed call: the request, the error, and the body the server sent if any.
pub(super) fn failed(
    info: CallInfo,
    request: Arc<ChatRequest>,
    error: &LlmError,
    redactor: &Redactor,
) -> Files {
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
    let mut files = vec![(
        "request.json",
        request_file(None, request, info.provider, redactor),
    )];
    if let Some(body) = error.response_body() {
        let name = if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() {
            "response.json"
        } else {
            "response.txt"
        };
        files.push((name, redactor.redact_bytes(body).into_owned().into()));
    }
    files.push(("metadata.json", pretty(&meta).into()));
    files
}
