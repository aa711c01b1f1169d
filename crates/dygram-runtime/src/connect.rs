//! dygram's side of connecting to a model: the environment variables it reads for each provider
//! (`ANTHROPIC_*`, `OPENAI_*`), the model it picks when nothing names one, and the source a saved
//! execution remembers. The LLM layer (`llm::connect`) builds the client.
//!
//! dygram reads the process environment only (no `.env` files); a variable set to blanks counts as
//! unset. `DYGRAM_BASE_URL` names the endpoint whatever the provider (before its own variable), and
//! `DYGRAM_PROVIDER` the provider (`--provider`). A missing key is not an error here: machines
//! that never need the model run without one, and the node that does need it reports
//! [`missing_client_hint`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use llm::connect::{Environment, Keyless, Options, ProviderVars, QueueOptions};
use llm::{Answers, ConnectError, Connection, LlmClient, Provider, SourceKind};

use crate::playback::NodePlayback;
use crate::session::ClientConfig;

/// Model used with Anthropic when nothing names one.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-3-5-haiku-20241022";
/// Model used with an OpenAI-compatible endpoint when nothing names one.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4o-mini";

/// The variables whose values never leave the process.
pub const SECRET_VARS: [&str; 2] = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"];

/// What to say when a node needs the model and no source of answers is configured.
pub fn missing_client_hint(provider: Provider) -> &'static str {
    match provider {
        Provider::Anthropic => {
            "set ANTHROPIC_API_KEY, use --provider openai with OPENAI_API_KEY/OPENAI_BASE_URL, or replay answers with --playback DIR"
        }
        Provider::OpenAi => {
            "set OPENAI_API_KEY (and OPENAI_BASE_URL for other servers), or replay answers with --playback DIR"
        }
        _ => "set the provider's API key, or replay answers with --playback DIR",
    }
}

/// The endpoint dygram reads before the provider's own variable (`OPENAI_BASE_URL`, …): one name
/// whatever the provider, as `DYGRAM_PROVIDER` names the provider.
pub const BASE_URL_VAR: &str = "DYGRAM_BASE_URL";

/// Where dygram looks for each provider's key, endpoint and model.
pub fn vars(provider: Provider) -> ProviderVars {
    let vars = provider_vars(provider);
    ProviderVars {
        base_url: std::iter::once(BASE_URL_VAR)
            .chain(vars.base_url.iter().copied())
            .collect(),
        ..vars
    }
}

/// [`vars`] before dygram's own endpoint variable.
fn provider_vars(provider: Provider) -> ProviderVars {
    let hint = missing_client_hint(provider).into();
    match provider {
        Provider::Anthropic => ProviderVars {
            default_model: Some(DEFAULT_ANTHROPIC_MODEL),
            missing_key_hint: hint,
            ..ProviderVars::standard(provider)
        },
        // A local server needs no key, but then its URL must be given.
        Provider::OpenAi => ProviderVars {
            model: vec!["OPENAI_MODEL_ID", "OPENAI_MODEL"],
            default_model: Some(DEFAULT_OPENAI_MODEL),
            keyless: Keyless::GivenUrl,
            missing_key_hint: hint,
            ..ProviderVars::standard(provider)
        },
        other => ProviderVars {
            missing_key_hint: hint,
            ..ProviderVars::standard(other)
        },
    }
}

fn lookup(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn with_environment<T>(f: impl FnOnce(&Environment<'_>) -> T) -> T {
    f(&Environment::new(&lookup, &SECRET_VARS))
}

/// The secrets of this process: the API keys dygram's clients read, whichever are set. Everything
/// that leaves the process passes through it.
pub fn redactor() -> llm::Redactor {
    with_environment(|env| env.redactor())
}

/// The model when neither `-m` nor the machine names one: the provider's environment variable,
/// else its default.
pub fn default_model(provider: Provider) -> String {
    with_environment(|env| vars(provider).model(env)).unwrap_or_default()
}

/// The client `source` asks for; `on_retry` hears of each retry of a request to an API. Replayed
/// answers are served by node ([`crate::playback::NodePlayback`]).
pub fn connect(
    provider: Provider,
    source: &llm::Source,
    on_retry: Option<llm::RetryHook>,
) -> Result<Connection, ConnectError> {
    let mut options = Options::default();
    options.http.on_retry = on_retry;
    let mut conn =
        with_environment(|env| llm::connect(provider, &vars(provider), env, source, options))?;
    if let (Some(playback), Answers::Playback(dir)) = (&conn.playback, &source.answers) {
        let by_node = NodePlayback::new(Arc::clone(&conn.client), Arc::clone(playback), dir)
            .map_err(ConnectError::Playback)?;
        conn.client = Arc::new(by_node);
    }
    Ok(conn)
}

/// An API client when its key (for OpenAI: its key or URL) is set; `None` otherwise.
pub fn api_client(provider: Provider) -> Option<Arc<dyn LlmClient>> {
    connect(provider, &llm::Source::api(), None)
        .ok()
        .map(|c| c.client)
}

/// The connection of a saved execution (`id`) to its remembered source, the file queue being in
/// `queue_dir`; `None` in manual mode, or for the API without a key. Replayed recordings go on
/// from the state the execution saved. Recording is the execution's own
/// (`session::ExecutionRecorder`), so the source records nothing. `on_retry` hears of each retry
/// of a request to an API.
pub fn for_execution(
    config: &ClientConfig,
    queue_dir: &Path,
    queue_timeout: Duration,
    id: &str,
    on_retry: Option<llm::RetryHook>,
) -> Result<Option<Connection>, ConnectError> {
    let answers = match config.kind {
        SourceKind::Api => Answers::Api,
        SourceKind::Playback => {
            Answers::Playback(config.playback_dir.clone().unwrap_or_default().into())
        }
        SourceKind::Queue => Answers::Queue(QueueOptions {
            dir: queue_dir.to_path_buf(),
            timeout: queue_timeout,
            prefix: id.to_string(),
            label: crate::prompt::node_of,
        }),
        SourceKind::Manual => return Ok(None),
    };
    let source = llm::Source {
        answers,
        record: None,
    };
    let conn = match connect(config.provider(), &source, on_retry) {
        Ok(conn) => conn,
        // No key: the node that needs the model says so.
        Err(ConnectError::MissingKey { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    if let (Some(playback), Some(state)) = (&conn.playback, &config.playback_state) {
        playback.set_state(state.clone());
    }
    Ok(Some(conn))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn each_provider_reads_its_own_variables() {
        let anthropic = vars(Provider::Anthropic);
        assert_eq!(anthropic.key, ["ANTHROPIC_API_KEY"]);
        assert_eq!(anthropic.keyless, Keyless::Never);
        let openai = vars(Provider::OpenAi);
        assert_eq!(openai.base_url, ["DYGRAM_BASE_URL", "OPENAI_BASE_URL"]);
        assert_eq!(
            anthropic.base_url,
            ["DYGRAM_BASE_URL", "ANTHROPIC_BASE_URL"]
        );
        assert_eq!(openai.model, ["OPENAI_MODEL_ID", "OPENAI_MODEL"]);
        assert_eq!(openai.keyless, Keyless::GivenUrl);
    }
}
