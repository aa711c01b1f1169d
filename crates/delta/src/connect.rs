//! Choosing and configuring the model client for a run.
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

use llm::anthropic::{AnthropicClient, AnthropicConfig};
use llm::openai::{OpenAiClient, OpenAiConfig};
use llm::{ApiKey, HttpOptions, LlmClient, Recorder, Redactor, RetryHook};
use store::{Clock, IdSource};

use crate::agent::{LlmSettings, Provider};
use crate::env::{Env, SECRET_VARS};
use crate::playback::RunPlayback;
use crate::workspace::RunDir;

/// Where answers come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LlmMode {
    /// The configured endpoint.
    Live,
    /// The configured endpoint, keeping every exchange in this folder.
    Record(PathBuf),
    /// Recorded answers from this folder; no network.
    Playback(PathBuf),
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
            Some(p) => p.bind(run).map_err(|e| {
                ConnectError::Recordings(format!("cannot read the playback state: {e}"))
            }),
            None => Ok(()),
        }
    }
}

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// No API key.
    #[error("API key not found: set {var} (in the environment or a .env file)")]
    MissingKey {
        /// The variable to set.
        var: &'static str,
        /// Alternatives.
        hint: String,
    },
    /// Recordings could not be used.
    #[error("{0}")]
    Recordings(String),
    /// A setting from the environment is not valid.
    #[error("{var}={value:?} is not valid: {expected}")]
    BadSetting {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
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
            }),
        None => Ok(settings.idle_timeout.unwrap_or(llm::DEFAULT_IDLE_TIMEOUT)),
    }
}

impl ConnectError {
    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::MissingKey { hint, .. } => Some(hint.clone()),
            Self::Recordings(_) => None,
            Self::BadSetting { var, .. } => Some(format!(
                "set {var} to a number of seconds (such as 300), or unset it"
            )),
        }
    }
}

fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', ':']).next().unwrap_or("");
    host == "localhost" || host.starts_with("127.") || rest.starts_with("[::1]")
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
    let mut redactor = key_redactor(env);
    if let LlmMode::Playback(dir) = mode {
        let playback =
            Arc::new(RunPlayback::open(dir).map_err(|e| ConnectError::Recordings(e.to_string()))?);
        let endpoint = playback.describe();
        return Ok(Connection {
            client: Arc::clone(&playback) as Arc<dyn LlmClient>,
            notices: Vec::new(),
            redactor,
            endpoint,
            playback: Some(playback),
        });
    }
    let http = HttpOptions {
        on_retry,
        idle_timeout: idle_timeout(settings, env)?,
        ..HttpOptions::default()
    };
    let mut notices = Vec::new();
    let (client, secret): (Box<dyn LlmClient>, Option<String>) = match settings.provider {
        Provider::OpenAi => {
            let key = match (env.get("DELTA_API_KEY"), env.get("OPENAI_API_KEY")) {
                (Some(k), _) => Some(k.to_string()),
                (None, Some(k)) => {
                    notices.push(
                        "using OPENAI_API_KEY (consider renaming it to DELTA_API_KEY)".into(),
                    );
                    Some(k.to_string())
                }
                (None, None) => None,
            };
            let base = match (
                env.get("DELTA_BASE_URL"),
                env.get("OPENAI_BASE_URL"),
                env.get("OPENAI_API_URL"),
            ) {
                (Some(u), _, _) => u.to_string(),
                (None, Some(u), _) => {
                    notices.push(
                        "using OPENAI_BASE_URL (consider renaming it to DELTA_BASE_URL)".into(),
                    );
                    u.to_string()
                }
                (None, None, Some(u)) => {
                    notices.push(
                        "using OPENAI_API_URL (consider renaming it to DELTA_BASE_URL)".into(),
                    );
                    u.to_string()
                }
                (None, None, None) => llm::openai::DEFAULT_BASE_URL.to_string(),
            };
            if key.is_none() {
                if is_loopback(&base) {
                    notices.push(format!(
                        "no API key set; talking to the local server at {base} without one"
                    ));
                } else {
                    return Err(ConnectError::MissingKey {
                        var: "DELTA_API_KEY",
                        hint: "export DELTA_API_KEY=... (any OpenAI-compatible key); set DELTA_BASE_URL for \
                               another endpoint; or replay recorded answers with --playback DIR"
                            .into(),
                    });
                }
            }
            let mut config = OpenAiConfig::new(base, key.clone().map(ApiKey::new));
            config.http = http;
            (Box::new(OpenAiClient::new(config)), key)
        }
        Provider::Anthropic => {
            let Some(key) = env.get("ANTHROPIC_API_KEY").map(str::to_string) else {
                return Err(ConnectError::MissingKey {
                    var: "ANTHROPIC_API_KEY",
                    hint: "export ANTHROPIC_API_KEY=...; or replay recorded answers with --playback DIR".into(),
                });
            };
            let base = env
                .get("ANTHROPIC_BASE_URL")
                .unwrap_or(llm::anthropic::DEFAULT_BASE_URL)
                .to_string();
            let mut config = AnthropicConfig::new(base, ApiKey::new(key.clone()));
            config.http = http;
            (Box::new(AnthropicClient::new(config)), Some(key))
        }
    };
    if let Some(key) = secret {
        redactor.add(key);
    }
    let (client, endpoint): (Arc<dyn LlmClient>, String) = match mode {
        LlmMode::Record(dir) => {
            let recorder = Recorder::new(client, dir)
                .map_err(|e| ConnectError::Recordings(e.to_string()))?
                .with_clock(clock)
                .with_ids(ids)
                .with_redactor(redactor.clone());
            let endpoint = recorder.describe();
            (Arc::new(recorder), endpoint)
        }
        _ => {
            let endpoint = client.describe();
            (Arc::from(client), endpoint)
        }
    };
    Ok(Connection {
        client,
        notices,
        redactor,
        endpoint,
        playback: None,
    })
}

/// A redactor for the values of every API-key variable set in `env`.
pub fn key_redactor(env: &Env) -> Redactor {
    Redactor::new(SECRET_VARS.iter().filter_map(|var| env.get(var)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(provider: Provider) -> LlmSettings {
        LlmSettings {
            provider,
            model: None,
            temperature: None,
            max_tokens: None,
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
