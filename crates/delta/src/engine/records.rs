//! The records of `io/`: of an LLM call, answered or failed (in `io/invocations/`), one JSON
//! object, and how they are read back ([`IoRecords`]).
//!
//! * `metadata`: model, client, duration, `status` (`SUCCESS` or `FAILED`), token usage and stop
//!   reason of an answer, or the `error` (`kind`, `message`, `http_status`) of a failed call;
//! * `request`: the request body as sent (or, when its bytes were not kept, as it would be sent in
//!   the provider's wire format);
//! * `response`: the answer as received; for answers that did not come as one body (streams,
//!   playback) the equivalent chat-completions object. A failed call keeps the error body the
//!   server sent, as received: JSON as it is, anything else as a string (none: no `response`).
//!
//! A record's head (here the metadata) is its first line (`{"metadata":{…},`), which a pack's
//! index keeps too, so that a reader that wants it alone (`delta show`) does not read the request.
//! The request's bytes are put in as they were sent, without being parsed again. A record goes in
//! a pack (see the `io_packs` module) unless it is too large for one: then it is a file of its own,
//! `<id>.json`. Runs made before the packs have a file per call, and runs made before that a
//! folder per call (`request.json`, `response.json` or `.txt`, `metadata.json`); [`IoRecords`]
//! reads all three.
//!
//! Every byte passes through the run's redactor.

use std::sync::Arc;
use std::time::Duration;

use llm::{ChatRequest, ChatResponse, LlmError, Redactor};

use crate::io_packs::Packs;
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
            Content::Later(
                0,
                Box::new(move || {
                    redactor
                        .redact_bytes(&wire_request(provider, &request))
                        .into_owned()
                }),
            )
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
    // Not through a link or a pipe a tool put in the run folder; a head is one line of a record.
    let file = crate::io_packs::plain_file(path)?;
    std::io::BufReader::new(std::io::Read::take(file, crate::io_packs::PACK_MAX))
        .read_line(&mut first)
        .ok()?;
    crate::io_packs::head_of(&first)
}

/// Bytes received, as a JSON value of the record: as they are when they are JSON, else as a string
/// (checked on the writer thread).
fn as_json(content: Content) -> Content {
    Content::Later(
        0,
        Box::new(move || {
            let mut bytes = Vec::new();
            let _ = content.write_to(&mut bytes);
            // Checked for UTF-8 too: a JSON reader skips over the strings it ignores.
            if std::str::from_utf8(&bytes).is_ok()
                && serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_ok()
            {
                bytes
            } else {
                compact(&Value::String(String::from_utf8_lossy(&bytes).into_owned()))
            }
        }),
    )
}

fn compact(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
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

/// The records of a folder of `io/` (`io/invocations/` or `io/tool_executions/`), read: each in a
/// pack, or a file of its own `<id>.json`, or (runs made before either) a folder `<id>/`. The
/// packs' indexes are read once, on the first lookup.
pub(crate) struct IoRecords {
    dir: std::path::PathBuf,
    packs: std::sync::OnceLock<Packs>,
}

/// Whether `id` can name an `io/` record: a plain name, never a path.
pub fn is_record_id(id: &str) -> bool {
    !id.is_empty() && !id.contains(['/', '\\', '\0']) && !id.starts_with('.')
}

/// Where a record is, for a reader.
pub(crate) enum Found<'a> {
    /// In a pack.
    Packed(&'a crate::io_packs::Packed),
    /// A file of its own, `<id>.json` (its head on its first line).
    File(std::path::PathBuf),
    /// The folder of a run made before the one-file records.
    Folder(std::path::PathBuf),
}

impl IoRecords {
    /// The records of `dir`.
    pub(crate) fn new(dir: std::path::PathBuf) -> Self {
        Self {
            dir,
            packs: std::sync::OnceLock::new(),
        }
    }

    /// The folder's packed records.
    fn packs(&self) -> &Packs {
        self.packs.get_or_init(|| Packs::load(&self.dir))
    }

    /// The ids of the folder's records, in packs, files of their own or (runs made before) folders.
    pub(crate) fn ids(&self) -> std::collections::BTreeSet<String> {
        let names = std::fs::read_dir(&self.dir).into_iter().flatten().flatten();
        names
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| !crate::io_packs::is_pack_file(name))
            .map(|name| match name.strip_suffix(".json") {
                Some(stem) => stem.to_string(),
                None => name,
            })
            .chain(self.packs().iter().map(|(id, _)| id.to_string()))
            .collect()
    }

    /// Record `id`: in a pack, else a file of its own, else the folder of a run made before (an id
    /// is in one place: names in use are not chosen again). `None` for an id that is not a plain
    /// name ([`is_record_id`]).
    pub(crate) fn find(&self, id: &str) -> Option<Found<'_>> {
        if !is_record_id(id) {
            return None;
        }
        if let Some(packed) = self.packs().get(id) {
            return Some(Found::Packed(packed));
        }
        let file = self.dir.join(format!("{id}.json"));
        if file.exists() {
            return Some(Found::File(file));
        }
        let folder = self.dir.join(id);
        folder.is_dir().then_some(Found::Folder(folder))
    }
}

impl Found<'_> {
    /// The file or folder holding the record.
    pub(crate) fn path(&self) -> std::path::PathBuf {
        match self {
            Self::Packed(packed) => packed.pack.clone(),
            Self::File(path) | Self::Folder(path) => path.clone(),
        }
    }

    /// Its head (see [`object_parts`]); `None` for a folder.
    fn head(&self) -> Option<Value> {
        match self {
            Self::Packed(packed) => Some(packed.head.clone()),
            Self::File(path) => read_head(path),
            Self::Folder(_) => None,
        }
    }

    /// The metadata of an LLM call's record (of `io/invocations/`).
    pub(crate) fn metadata(&self) -> Option<Value> {
        match self {
            Self::Folder(folder) => store::atomic::read_json(&folder.join("metadata.json")).ok(),
            _ => self.head()?.get_mut("metadata").map(Value::take),
        }
    }

    /// A tool call's exit code and duration in milliseconds (of `io/tool_executions/`), where
    /// known.
    pub(crate) fn tool(&self) -> (Option<i32>, Option<u64>) {
        if let Self::Folder(folder) = self {
            let read = |name: &str| {
                std::fs::read_to_string(folder.join(name))
                    .ok()
                    .map(|t| t.trim().to_string())
            };
            let exit_code = read("exit_code.txt").and_then(|c| c.parse().ok());
            return (
                exit_code,
                read("duration_ms.txt").and_then(|d| d.parse().ok()),
            );
        }
        let head = self.head().unwrap_or(Value::Null);
        let exit_code = head["exit_code"]
            .as_i64()
            .and_then(|c| i32::try_from(c).ok());
        (exit_code, head["duration_ms"].as_u64())
    }

    /// The record as kept, one JSON object: a pack's line (its `id` first), a file of its own, or
    /// the files of a folder gathered (`command`, `stdout`, `stderr`, `exit_code`, `duration_ms`;
    /// `metadata`, `request`, `response`).
    pub(crate) fn read(&self) -> Result<Value, store::StoreError> {
        let bytes = match self {
            Self::Folder(folder) => return Ok(gather_folder(folder)),
            Self::Packed(packed) => packed.read(),
            Self::File(path) => crate::io_packs::plain_file(path)
                .ok_or_else(|| std::io::Error::other("not a record of delta's"))
                .and_then(|mut file| {
                    let mut bytes = Vec::new();
                    std::io::Read::read_to_end(&mut file, &mut bytes).map(|_| bytes)
                }),
        };
        let path = self.path();
        let bytes = bytes.map_err(|e| store::StoreError::io("read", &path, e))?;
        serde_json::from_slice(&bytes).map_err(|source| store::StoreError::Parse { path, source })
    }
}

/// The record of a folder of a run made before the one-file records, as one object: each file's
/// content under its name's stem, JSON where it is JSON, else text.
fn gather_folder(folder: &std::path::Path) -> Value {
    let mut object = serde_json::Map::new();
    let mut names: Vec<std::path::PathBuf> = std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    names.sort();
    for path in names {
        let (Some(stem), Ok(text)) = (path.file_stem(), std::fs::read_to_string(&path)) else {
            continue;
        };
        let json = path.extension().is_some_and(|x| x == "json");
        let value = match stem.to_str() {
            Some("exit_code" | "duration_ms") => serde_json::from_str(text.trim()).ok(),
            _ if json => serde_json::from_str(&text).ok(),
            _ => None,
        };
        object.insert(
            stem.to_string_lossy().into_owned(),
            value.unwrap_or(Value::String(text)),
        );
    }
    Value::Object(object)
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
    fn a_body_is_kept_as_json_only_when_it_is_json_in_utf8() {
        let kept = |bytes: &[u8]| written(vec![as_json(bytes.to_vec().into())]);
        assert_eq!(kept(b"{\"a\": 1}"), b"{\"a\": 1}");
        assert_eq!(kept(b"oops"), b"\"oops\"");
        // A JSON string with a byte that is not UTF-8 becomes a string of its own, readable.
        let text = kept(b"\"\xff\"");
        assert!(serde_json::from_slice::<Value>(&text).unwrap().is_string());
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
