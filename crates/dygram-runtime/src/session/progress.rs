//! How far an execution is, where the total is known: an execution whose answers are replayed
//! has as many turns as its recordings give (the turns so far and the recordings not served yet).
//! Other executions, and those that have ended, have no known total.

use serde::Serialize;
use serde_json::{Value, json};

use super::{Executions, Metadata, SetAside, Summary};

/// Turns so far, of a known total.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// LLM round trips so far.
    pub turns: u64,
    /// The turns the execution will have taken when its recordings are used up.
    pub total: u64,
}

impl Executions {
    /// The progress of the execution `meta` describes, when its total is known (see the module
    /// documentation); its recordings folder is read.
    pub fn progress(&self, meta: &Metadata) -> Option<Progress> {
        let config = &meta.client_config;
        if meta.status.is_finished() || config.kind != llm::SourceKind::Playback {
            return None;
        }
        let dir = self.base().join(config.playback_dir.as_deref()?);
        let files = llm::recording::recording_files(&dir).ok()?;
        let served = config
            .playback_state
            .as_ref()
            .map_or(&[][..], |s| s.used.as_slice());
        let left = files
            .iter()
            .filter_map(|f| f.file_name()?.to_str())
            .filter(|name| !served.iter().any(|s| s == name))
            .count() as u64;
        Some(Progress {
            turns: meta.turn_count,
            total: meta.turn_count + left,
        })
    }
}

/// Where an execution stands: the object `dygram exec status --format json` prints, and `exec
/// list` one of per execution. `progress` where the total is known ([`Executions::progress`]).
pub fn status_json(
    id: &str,
    m: &Metadata,
    nodes: &[String],
    set_aside: Option<SetAside>,
    progress: Option<Progress>,
) -> Value {
    json!({
        "setAside": set_aside,
        "id": id,
        "machine": m.machine_file.clone().unwrap_or_else(|| "(stdin)".into()),
        "status": m.status,
        "currentNodes": nodes,
        "turns": m.turn_count,
        "steps": m.step_count,
        "startedAt": m.started_at,
        "lastExecutedAt": m.last_executed_at,
        "mode": m.mode,
        "client": m.client_config,
        "waitingForAnswer": m.pending_request.is_some(),
        "progress": progress,
    })
}

/// [`status_json`] of one listed execution (`status` null where its metadata is unreadable).
pub fn summary_json(s: &Summary, progress: Option<Progress>) -> Value {
    match &s.metadata {
        Some(m) => status_json(&s.id, m, &s.current_nodes, s.set_aside, progress),
        None => json!({"id": s.id, "setAside": s.set_aside, "status": null}),
    }
}

impl Executions {
    /// [`status_json`] of execution `id` (read from its files).
    pub fn status_json(&self, id: &str) -> Result<Value, super::SessionError> {
        let m = self.metadata(id)?;
        let nodes = self.current_nodes(id);
        let progress = self.progress(&m);
        let mut status = status_json(id, &m, &nodes, None, progress);
        status["agents"] = Value::Array(self.agents(id));
        Ok(status)
    }
}
