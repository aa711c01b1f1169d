//! Where a call's answers come from: the execution's source, changed by the call's flags, and
//! the clients opened for it.

use std::path::Path;

use llm::LlmClient;

use super::call::{CallError, Host, SourceFlags};
use super::{ClientConfig, ExecutionRecorder, Metadata};
use crate::queue::QueueClient;

/// Where answers come from for this call: the execution's source (`previous`), changed by the
/// flags of this call.
pub(super) fn client_config<H: Host + ?Sized>(
    flags: &SourceFlags,
    previous: Option<&ClientConfig>,
    host: &H,
) -> ClientConfig {
    let mut config = previous.cloned().unwrap_or_default();
    if flags.queue {
        config.kind = "queue".into();
        config.playback_dir = None;
        config.playback_state = None;
    }
    if let Some(dir) = &flags.playback {
        let dir = dir.display().to_string();
        // The same recordings again go on where they were; other ones start from their beginning.
        if config.kind != "playback" || config.playback_dir.as_deref() != Some(dir.as_str()) {
            config.playback_state = None;
        }
        config.kind = "playback".into();
        config.playback_dir = Some(dir);
    }
    if let Some(dir) = &flags.record {
        let dir = dir.display().to_string();
        // Another folder: the execution's recordings there start with it.
        if config.recordings_dir.as_deref() != Some(dir.as_str()) {
            config.recording = None;
        }
        config.recordings_dir = Some(dir);
    }
    if let Some(model) = &flags.model {
        config.model = Some(model.clone());
    }
    if let Some(n) = flags.max_tokens {
        config.max_tokens = Some(n);
    }
    if previous.is_none() || flags.provider.is_some() {
        config.provider = Some(flags.provider.clone().unwrap_or_else(|| "anthropic".into()));
    }
    if config.kind.is_empty()
        || (!matches!(config.kind.as_str(), "playback" | "queue") && flags.playback.is_none())
    {
        config.kind = if host.api_configured(&config) {
            "api".into()
        } else {
            "manual".into()
        };
    }
    config
}

/// The execution's mode for its answer source.
pub(super) fn mode_of(config: &ClientConfig) -> &'static str {
    match config.kind.as_str() {
        "playback" => "playback",
        _ => "interactive",
    }
}

/// The answer sources of a call.
pub(super) struct Sources {
    pub playback: Option<llm::PlaybackClient>,
    queue: Option<QueueClient>,
    api: Option<Box<dyn LlmClient>>,
}

impl Sources {
    /// Opens the source `meta` names for execution `id` (the file queue in `queue_dir`).
    pub fn open<H: Host>(
        meta: &Metadata,
        id: &str,
        host: &H,
        queue_dir: &Path,
        queue_timeout: std::time::Duration,
        redactor: &llm::Redactor,
    ) -> Result<Self, CallError<H::Error>> {
        let mut s = Sources {
            playback: None,
            queue: None,
            api: None,
        };
        match meta.client_config.kind.as_str() {
            "playback" => {
                let dir = meta.client_config.playback_dir.clone().unwrap_or_default();
                let p = host
                    .open_playback(Path::new(&dir))
                    .map_err(CallError::Host)?;
                s.playback = Some(match &meta.client_config.playback_state {
                    Some(state) => p.with_state(state.clone()),
                    None => p,
                });
            }
            "queue" => {
                s.queue = Some(
                    QueueClient::new(queue_dir, queue_timeout, id)
                        .map_err(CallError::Queue)?
                        .with_redactor(redactor.clone()),
                );
            }
            "api" => s.api = host.api_client(&meta.client_config),
            _ => {}
        }
        Ok(s)
    }

    /// The client that answers (`None`: manual answers).
    pub fn client(&self) -> Option<&dyn LlmClient> {
        if let Some(p) = &self.playback {
            return Some(p);
        }
        if let Some(q) = &self.queue {
            return Some(q);
        }
        self.api.as_deref()
    }
}

/// A recorder of the execution's answers around `inner`, when it records (`--record`).
pub(super) fn recorder<C: LlmClient, E>(
    meta: &Metadata,
    inner: C,
    redactor: &llm::Redactor,
) -> Result<Option<ExecutionRecorder<C>>, CallError<E>> {
    let rec = ExecutionRecorder::for_execution(inner, meta).map_err(CallError::Recorder)?;
    Ok(rec.map(|r| r.with_redactor(redactor.clone())))
}
