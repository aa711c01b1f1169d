//! delta's side of connecting to the model: its environment variables, its `--record` /
//! `--playback` modes and the run binding of playback. The LLM layer (`llm::connect`) builds the
//! client.
//!
//! OpenAI-compatible (default): `DELTA_API_KEY` and `DELTA_BASE_URL`, falling back to
//! `OPENAI_API_KEY` / `OPENAI_BASE_URL` (or `OPENAI_API_URL`) with a notice. A local server on a
//! loopback address needs no key. Anthropic (`llm.provider: anthropic`): `ANTHROPIC_API_KEY` and
//! optionally `ANTHROPIC_BASE_URL`. With `--playback` no key and no network are needed.
//!
//! `DELTA_LLM_IDLE_TIMEOUT` (seconds) overrides the agent's `llm.idle_timeout_seconds`: how long the
//! server may send nothing before a request fails.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use llm::ConnectError;
use llm::connect::{Environment, Keyless, Options, ProviderVars};
use llm::{Answers, HttpOptions, LlmClient, Provider, Redactor, RetryHook, Source};
use store::{Clock, IdSource};

use crate::agent::LlmSettings;
use crate::env::Env;
use crate::playback::RunPlayback;
use crate::workspace::RunDir;

/// Where answers come from (`--record DIR`, `--playback DIR`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LlmMode {
    /// The configured endpoint.
    Live,
    /// The configured endpoint, keeping every exchange in this folder.
    Record(PathBuf),
    /// Recorded answers from this folder; no network.
    Playback(PathBuf),
}

impl LlmMode {
    /// The source the LLM layer builds for this mode.
    fn source(&self) -> Source {
        match self {
            Self::Live => Source::api(),
            Self::Record(dir) => Source {
                answers: Answers::Api,
                record: Some(dir.clone()),
            },
            Self::Playback(dir) => Source {
                answers: Answers::Playback(dir.clone()),
                record: None,
            },
        }
    }
}

/// A ready client.
pub struct Connection {
    /// The client.
    pub client: Arc<dyn LlmClient>,
    /// Things to tell the user (fallback variables, keyless local server).
    pub notices: Vec<String>,
    /// Scrubs the API keys (every key variable set, from the environment or `.env` files, and the key
    /// this connection uses) from anything written or printed.
    pub redactor: Redactor,
    /// The endpoint, for display.
    pub endpoint: String,
    /// The playback client, with `--playback` (bound to the run with [`Connection::bind_run`]).
    pub playback: Option<Arc<RunPlayback>>,
}

impl Connection {
    /// Ties the connection to the run it serves: with `--playback`, the run's record of the
    /// recordings it used is loaded and kept up to date.
    pub fn bind_run(&self, run: &RunDir) -> Result<(), ConnectError> {
        match &self.playback {
            Some(p) => p.bind(run).map_err(ConnectError::PlaybackState),
            None => Ok(()),
        }
    }
}

/// Variable overriding the agent's `llm.idle_timeout_seconds`.
pub const IDLE_TIMEOUT_VAR: &str = "DELTA_LLM_IDLE_TIMEOUT";

/// The idle timeout to use: `DELTA_LLM_IDLE_TIMEOUT` (seconds), else the agent's, else the LLM
/// layer's default.
fn idle_timeout(settings: &LlmSettings, env: &Env) -> Result<Duration, ConnectError> {
    match env.get(IDLE_TIMEOUT_VAR) {
        Some(text) => text
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(crate::agent::seconds)
            .ok_or_else(|| ConnectError::BadSetting {
                var: IDLE_TIMEOUT_VAR,
                value: text.to_string(),
                expected: crate::agent::SECONDS_EXPECTED,
                hint: format!(
                    "set {IDLE_TIMEOUT_VAR} to a number of seconds (such as 300), or unset it"
                ),
            }),
        None => Ok(settings.idle_timeout.unwrap_or(llm::DEFAULT_IDLE_TIMEOUT)),
    }
}

/// Where delta looks for each provider's key and endpoint. delta names no model of its own: without
/// `llm.model` the server's default answers.
pub fn vars(provider: Provider) -> ProviderVars {
    const PLACE: &str = "in the environment or a .env file";
    match provider {
        Provider::OpenAi => ProviderVars {
            key: vec!["DELTA_API_KEY", "OPENAI_API_KEY"],
            base_url: vec!["DELTA_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_URL"],
            model: Vec::new(),
            default_model: None,
            keyless: Keyless::Loopback,
            key_place: PLACE,
            missing_key_hint:
                "export DELTA_API_KEY=... (any OpenAI-compatible key); set DELTA_BASE_URL for \
                               another endpoint; or replay recorded answers with --playback DIR"
                    .into(),
        },
        Provider::Anthropic => ProviderVars {
            model: Vec::new(),
            key_place: PLACE,
            missing_key_hint:
                "export ANTHROPIC_API_KEY=...; or replay recorded answers with --playback DIR"
                    .into(),
            ..ProviderVars::standard(provider)
        },
        other => ProviderVars {
            model: Vec::new(),
            key_place: PLACE,
            ..ProviderVars::standard(other)
        },
    }
}

/// Builds the client for `settings` from `env`.
pub fn connect(
    settings: &LlmSettings,
    env: &Env,
    mode: &LlmMode,
    on_retry: Option<RetryHook>,
    clock: Clock,
    ids: IdSource,
) -> Result<Connection, ConnectError> {
    let lookup = |var: &str| env.get(var).map(str::to_string);
    let secrets = env.secret_names();
    let environment = Environment::new(&lookup, &secrets);
    let http = match mode {
        // Replayed answers need no server: the idle timeout is not even read.
        LlmMode::Playback(_) => HttpOptions::default(),
        _ => HttpOptions {
            on_retry,
            idle_timeout: idle_timeout(settings, env)?,
            ..HttpOptions::default()
        },
    };
    let options = Options {
        http,
        clock,
        ids: Some(ids),
    };
    let provider = settings.provider;
    let conn = llm::connect(
        provider,
        &vars(provider),
        &environment,
        &mode.source(),
        options,
    )?;
    let playback = conn.playback.map(|p| Arc::new(RunPlayback::new(p)));
    let client = match &playback {
        Some(p) => Arc::clone(p) as Arc<dyn LlmClient>,
        None => conn.client,
    };
    let mut redactor = conn.redactor;
    for planted in env.ignored_secrets() {
        redactor.add(planted);
    }
    Ok(Connection {
        client,
        notices: conn.notices,
        redactor,
        endpoint: conn.endpoint,
        playback,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use llm::Provider;

    fn settings(provider: Provider) -> LlmSettings {
        LlmSettings {
            provider,
            model: None,
            temperature: None,
            max_tokens: None,
            context_window: None,
            idle_timeout: None,
        }
    }

    fn env(pairs: &[(&str, &str)]) -> Env {
        Env::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    fn go(s: &LlmSettings, e: &Env) -> Result<Connection, ConnectError> {
        connect(
            s,
            e,
            &LlmMode::Live,
            None,
            Clock::System,
            IdSource::random(),
        )
    }

    #[test]
    fn key_lookup_and_fallbacks() {
        let err = go(&settings(Provider::OpenAi), &env(&[])).err().unwrap();
        assert!(err.to_string().contains("DELTA_API_KEY"));
        let c = go(
            &settings(Provider::OpenAi),
            &env(&[("OPENAI_API_KEY", "sk-x-123")]),
        )
        .unwrap();
        assert!(c.notices[0].contains("OPENAI_API_KEY"));
        assert!(c.redactor.leaks("sk-x-123"));
        let c = go(
            &settings(Provider::OpenAi),
            &env(&[("DELTA_BASE_URL", "http://127.0.0.1:9/v1")]),
        )
        .unwrap();
        assert!(c.notices[0].contains("without one"), "{:?}", c.notices);
        assert!(c.endpoint.contains("127.0.0.1:9"));
        assert!(
            go(
                &settings(Provider::Anthropic),
                &env(&[("DELTA_API_KEY", "k")])
            )
            .is_err()
        );
        let c = go(
            &settings(Provider::Anthropic),
            &env(&[("ANTHROPIC_API_KEY", "ak-1234")]),
        )
        .unwrap();
        assert!(c.endpoint.starts_with("anthropic"));
    }

    #[test]
    fn every_key_variable_set_is_redacted() {
        let e = env(&[
            ("DELTA_API_KEY", "sk-delta-1"),
            ("ANTHROPIC_API_KEY", "sk-ant-2"),
            ("OPENAI_API_KEY", "sk-openai-3"),
            ("OTHER", "not-a-key"),
        ]);
        let c = go(&settings(Provider::OpenAi), &e).unwrap();
        for key in ["sk-delta-1", "sk-ant-2", "sk-openai-3"] {
            assert!(c.redactor.leaks(key), "{key}");
        }
        assert!(!c.redactor.leaks("not-a-key"));
    }

    #[test]
    fn playback_needs_no_key_but_an_existing_folder() {
        let dir = tempfile::tempdir().unwrap();
        let c = connect(
            &settings(Provider::OpenAi),
            &env(&[]),
            &LlmMode::Playback(dir.path().to_path_buf()),
            None,
            Clock::System,
            IdSource::random(),
        )
        .unwrap();
        assert!(c.endpoint.starts_with("playback"));
        let err = connect(
            &settings(Provider::OpenAi),
            &env(&[]),
            &LlmMode::Playback(dir.path().join("nope")),
            None,
            Clock::System,
            IdSource::random(),
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("recordings directory not found"));
    }
}
