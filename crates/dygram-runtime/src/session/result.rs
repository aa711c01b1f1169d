//! The result of an execution: the result object, its file, and a run to the end in one call
//! (`dygram execute` without `-i`).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::executor::{ExecutionEvent, Executor, RuntimeError};
use crate::state::ExecutionState;

/// Why the result file cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum ResultError {
    /// The result cannot be encoded.
    #[error("cannot write the result: {0}")]
    Encode(serde_json::Error),
    /// Its folder cannot be created.
    #[error("cannot create {}: {source}", .path.display())]
    Folder {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: Box<store::StoreError>,
    },
    /// The file cannot be written.
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Box<store::StoreError>,
    },
}

/// The result object: the reference's shape plus status, context state and paths.
pub fn result_json(state: &ExecutionState) -> Value {
    let main = state.main_path();
    json!({
        "currentNode": main.map(|p| p.current_node.clone()),
        "visitedNodes": state.visited_nodes(),
        "attributes": {},
        "history": main.map(|p| p.history.clone()).unwrap_or_default(),
        "errorCount": state.metadata.error_count,
        "status": state.status().as_str(),
        "contextState": state.context_state,
        "paths": state.paths,
    })
}

/// A result file written.
#[derive(Debug)]
pub struct Written {
    /// `<dir>/<stem>-result.json`.
    pub file: PathBuf,
    /// Its text (pretty JSON, secrets scrubbed).
    pub text: String,
    /// The object itself (secrets scrubbed).
    pub value: Value,
}

/// Writes `<dir>/<stem>-result.json` (durably, atomically) with the secrets of `redactor`
/// scrubbed; `error` (a run that stopped outside the machine) is added to the object.
pub fn write_result(
    dir: &Path,
    stem: &str,
    state: &ExecutionState,
    error: Option<&RuntimeError>,
    redactor: &llm::Redactor,
) -> Result<Written, ResultError> {
    let file = dir.join(format!("{stem}-result.json"));
    let mut result = result_json(state);
    if let Some(e) = error {
        result["error"] = json!(e.to_string());
    }
    redactor.redact_json(&mut result);
    let mut text = serde_json::to_string_pretty(&result).map_err(ResultError::Encode)?;
    text.push('\n');
    store::atomic::create_dir_all_durable(dir).map_err(|source| ResultError::Folder {
        path: dir.to_path_buf(),
        source: Box::new(source),
    })?;
    store::atomic::write_atomic(&file, text.as_bytes()).map_err(|source| ResultError::Write {
        path: file.clone(),
        source: Box::new(source),
    })?;
    Ok(Written {
        file,
        text,
        value: result,
    })
}

/// Runs an execution to its end, giving each event to `on_event` as it happens. When the run
/// stops on an error outside the machine (the model could not be asked), the path that needed it
/// fails, so every report says the same, and the error is returned.
pub fn run_to_end(
    executor: &mut Executor<'_>,
    mut on_event: impl FnMut(ExecutionEvent),
) -> Option<RuntimeError> {
    let mut failure = None;
    // Every path ends (limits fail paths), so this loop ends; the bound is a second guard.
    for _ in 0..1_000_000 {
        let result = executor.step();
        executor.take_events().into_iter().for_each(&mut on_event);
        match result {
            Ok(true) => continue,
            Ok(false) => break,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if let Some(e) = &failure {
        executor.abort(e);
        executor.take_events().into_iter().for_each(&mut on_event);
    }
    failure
}

/// The first line of `--format stream-json`: the run of `machine` (its name) started.
pub fn stream_started(machine: &str) -> Value {
    json!({"type": "run_started", "machine": machine})
}

/// The last line of `--format stream-json`: how the run ended (`exit_code`, the process's) and its
/// result object, the one `--format json` prints (the error object when the run could not start).
pub fn stream_finished(exit_code: u8, result: Value) -> Value {
    json!({"type": "run_finished", "exitCode": exit_code, "result": result})
}

/// A line of `--format stream-json`: the object with the time it was written (`time`, RFC 3339),
/// on one line.
pub fn stream_line(mut line: Value) -> String {
    if let Some(object) = line.as_object_mut() {
        object.insert("time".into(), json!(jiff::Timestamp::now().to_string()));
    }
    format!("{line}\n")
}
