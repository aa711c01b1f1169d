//! Where a call's answers come from: the execution's source, changed by the call's flags, and
//! the clients opened for it.

use std::path::Path;

use llm::{LlmClient, SourceKind};

use super::call::{CallError, Host, SourceFlags};
use super::{ClientConfig, ExecutionRecorder, Metadata};

/// Where answers come from for this call: the execution's source (`previous`), changed by the
/// flags of this call.
pub(super) fn client_config<H: Host + ?Sized>(
    flags: &SourceFlags,
    previous: Option<&ClientConfig>,
    host: &H,
) -> ClientConfig {
    let mut config = previous.cloned().unwrap_or_default();
    if flags.queue {
        config.kind = SourceKind::Queue;
        config.playback_dir = None;
        config.playback_state = None;
    }
    if let Some(dir) = &flags.playback {
        let dir = dir.display().to_string();
        // The same recordings again go on where they were; other ones start from their beginning.
        if config.kind != SourceKind::Playback
            || config.playback_dir.as_deref() != Some(dir.as_str())
        {
            config.playback_state = None;
        }
        config.kind = SourceKind::Playback;
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
        config.provider = Some(flags.provider.unwrap_or(llm::Provider::Anthropic));
    }
    if !matches!(config.kind, SourceKind::Playback | SourceKind::Queue) && flags.playback.is_none()
    {
        config.kind = if host.api_configured(&config) {
            SourceKind::Api
        } else {
            SourceKind::Manual
        };
    }
    config
}

/// The execution's mode for its answer source.
pub(super) fn mode_of(config: &ClientConfig) -> &'static str {
    match config.kind {
        SourceKind::Playback => "playback",
        _ => "interactive",
    }
}

/// The answer source of a call, connected.
pub(super) struct Sources {
    connection: Option<llm::Connection>,
}

impl Sources {
    /// Connects to the source `meta` names for execution `id` (the file queue in `queue_dir`).
    pub fn open<H: Host>(
        meta: &Metadata,
        id: &str,
        host: &H,
        queue_dir: &Path,
        queue_timeout: std::time::Duration,
    ) -> Result<Self, CallError<H::Error>> {
        let connection = host
            .connect(&meta.client_config, (queue_dir, queue_timeout), id)
            .map_err(CallError::Host)?;
        Ok(Self { connection })
    }

    /// The client that answers (`None`: manual answers).
    pub fn client(&self) -> Option<&dyn LlmClient> {
        self.connection.as_ref().map(|c| c.client.as_ref())
    }

    /// The recordings replayed, if any (their state is the execution's to keep).
    pub fn playback(&self) -> Option<&llm::PlaybackClient> {
        self.connection.as_ref()?.playback.as_deref()
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
