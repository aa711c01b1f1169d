//! One way to reach a model, for every tool: [`connect`] turns a provider, the tool's table of
//! environment variables ([`ProviderVars`]) and an answer [`Source`] into a ready client.
//!
//! What differs between the tools is data, not code: which variables they read (delta prefers
//! `DELTA_API_KEY` and falls back to `OPENAI_API_KEY` with a notice; dygram reads the provider's own
//! variables), which model they pick when none is named, when a server may be used without a key,
//! what to say when the key is missing, and which variables hold secrets. Each tool states that in
//! its own table and calls the same function.
//!
//! Tool-owned details stay with the tool around the returned [`Connection`]: delta binds the
//! playback client to a run's `playback.json`, dygram restores an execution's playback state.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use store::{Clock, IdSource};

use crate::LlmClient;
use crate::error::LlmError;
use crate::http::HttpOptions;
use crate::playback::{PlaybackClient, PlaybackMode};
use crate::provider::Provider;
use crate::queue::{QueueClient, QueueError};
use crate::recorder::Recorder;
use crate::secret::{ApiKey, Redactor};
use crate::types::ChatRequest;

/// When a server may be used without an API key (only for providers where
/// [`Provider::keyless_possible`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keyless {
    /// Never: a missing key is [`ConnectError::MissingKey`].
    Never,
    /// When the base URL is a loopback address (a local server), with a notice.
    Loopback,
    /// When a base URL is given at all (whoever sets one knows the server).
    GivenUrl,
}

/// How one tool reads one provider's settings from its environment.
///
/// In each list the first variable set wins; a variable after the first is used with a notice that
/// names the first (`using OPENAI_API_KEY (consider renaming it to DELTA_API_KEY)`), except in
/// [`model`](ProviderVars::model), which is quiet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderVars {
    /// Variables holding the API key.
    pub key: Vec<&'static str>,
    /// Variables holding the base URL (the provider's public endpoint when none is set).
    pub base_url: Vec<&'static str>,
    /// Variables naming the model.
    pub model: Vec<&'static str>,
    /// The model when no variable names one (`None`: the server's default).
    pub default_model: Option<&'static str>,
    /// When no key is needed.
    pub keyless: Keyless,
    /// Where the key is looked for, for the missing-key message (`in the environment`).
    pub key_place: &'static str,
    /// What to do about a missing key.
    pub missing_key_hint: Cow<'static, str>,
}

impl ProviderVars {
    /// The provider's own variables ([`Provider::key_var`] and its siblings), its public endpoint,
    /// no default model, a key always needed: what a tool uses for a provider it has nothing
    /// particular to say about.
    pub fn standard(provider: Provider) -> Self {
        Self {
            key: vec![provider.key_var()],
            base_url: vec![provider.base_url_var()],
            model: vec![provider.model_var()],
            default_model: None,
            keyless: Keyless::Never,
            key_place: "in the environment",
            missing_key_hint: Cow::Owned(format!(
                "set {}; or replay recorded answers with --playback DIR",
                provider.key_var()
            )),
        }
    }

    /// The model the environment names, else the default.
    pub fn model(&self, env: &Environment<'_>) -> Option<String> {
        self.model
            .iter()
            .find_map(|var| env.get(var))
            .or_else(|| self.default_model.map(str::to_string))
    }
}

/// The variables a tool sees (its own lookup: the process environment, `.env` files…) and which of
/// them hold secrets.
pub struct Environment<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    secrets: &'a [&'a str],
}

impl<'a> Environment<'a> {
    /// Variables read through `lookup` (which decides what counts as unset), `secrets` naming the
    /// ones whose values never leave the process.
    pub fn new(lookup: &'a dyn Fn(&str) -> Option<String>, secrets: &'a [&'a str]) -> Self {
        Self { lookup, secrets }
    }

    /// A variable's value.
    pub fn get(&self, var: &str) -> Option<String> {
        (self.lookup)(var)
    }

    /// A redactor for the value of every secret variable that is set.
    pub fn redactor(&self) -> Redactor {
        Redactor::new(self.secrets.iter().filter_map(|var| self.get(var)))
    }

    /// The first of `vars` that is set, with a notice when it is not the first.
    fn first(&self, vars: &[&'static str], notices: &mut Vec<String>) -> Option<String> {
        let (i, value) = vars
            .iter()
            .enumerate()
            .find_map(|(i, var)| Some((i, self.get(var)?)))?;
        if i > 0 {
            notices.push(format!(
                "using {} (consider renaming it to {})",
                vars[i], vars[0]
            ));
        }
        Some(value)
    }
}

/// The file queue: requests are written into `dir`, a responder outside the process answers.
#[derive(Debug, Clone)]
pub struct QueueOptions {
    /// The queue folder.
    pub dir: PathBuf,
    /// How long one request may wait for its answer.
    pub timeout: Duration,
    /// Prefix of request ids.
    pub prefix: String,
    /// Names what a request is for, in the request file (`node`).
    pub label: fn(&ChatRequest) -> String,
}

/// Where the answers come from.
#[derive(Debug, Clone)]
pub enum Answers {
    /// The provider's API.
    Api,
    /// Recordings in this folder; no key and no network.
    Playback(PathBuf),
    /// A responder through files.
    Queue(QueueOptions),
}

/// Where answers come from, and whether they are recorded.
#[derive(Debug, Clone)]
pub struct Source {
    /// Who answers.
    pub answers: Answers,
    /// Keep every exchange in this folder as `turn-<n>.json`.
    pub record: Option<PathBuf>,
}

impl Source {
    /// The provider's API, unrecorded.
    pub fn api() -> Self {
        Self {
            answers: Answers::Api,
            record: None,
        }
    }
}

/// The kind of a source, as saved state names it; `manual` is the source with no client (a person
/// answers each request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// The provider's API.
    Api,
    /// A person, one answer per call.
    #[default]
    Manual,
    /// Recordings.
    Playback,
    /// The file queue.
    Queue,
}

impl SourceKind {
    /// Its name in saved state.
    pub fn name(self) -> &'static str {
        match self {
            Self::Api => "api",
            Self::Manual => "manual",
            Self::Playback => "playback",
            Self::Queue => "queue",
        }
    }

    /// The kind called `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Api, Self::Manual, Self::Playback, Self::Queue]
            .into_iter()
            .find(|k| k.name() == name)
    }
}

/// What [`connect`] needs besides the source.
#[derive(Default)]
pub struct Options {
    /// Timeouts and the retry hook of API clients.
    pub http: HttpOptions,
    /// Timestamps of recordings.
    pub clock: Clock,
    /// Request ids of recordings.
    pub ids: Option<IdSource>,
}

/// A ready client.
pub struct Connection {
    /// The client.
    pub client: Arc<dyn LlmClient>,
    /// Things to tell the user (fallback variables, keyless local server).
    pub notices: Vec<String>,
    /// Scrubs every secret variable that is set, and the key this connection uses, from anything
    /// written or printed.
    pub redactor: Redactor,
    /// The endpoint, for display.
    pub endpoint: String,
    /// The playback client, when answers are replayed (its state is the caller's to keep).
    pub playback: Option<Arc<PlaybackClient>>,
}

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// No API key.
    #[error("API key not found: set {var} ({place})")]
    MissingKey {
        /// The variable to set.
        var: &'static str,
        /// Where it is looked for.
        place: &'static str,
        /// Alternatives.
        hint: String,
    },
    /// The recordings cannot be replayed.
    #[error("{0}")]
    Playback(LlmError),
    /// The recordings folder cannot be used.
    #[error("{0}")]
    Record(LlmError),
    /// The queue folder cannot be used.
    #[error("{0}")]
    Queue(Box<QueueError>),
    /// The saved playback state cannot be read.
    #[error("cannot read the playback state: {0}")]
    PlaybackState(store::StoreError),
    /// A setting from the environment is not valid.
    #[error("{var}={value:?} is not valid: {expected}")]
    BadSetting {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it should be.
        expected: &'static str,
        /// What to do about it.
        hint: String,
    },
}

impl ConnectError {
    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::MissingKey { hint, .. } | Self::BadSetting { hint, .. } => Some(hint.clone()),
            _ => None,
        }
    }
}

/// Opens recordings the way both tools replay them: matched by signature, else the next unused one
/// in file order, and never a recording made for tools the request does not offer.
pub fn open_playback(dir: impl Into<PathBuf>) -> Result<PlaybackClient, LlmError> {
    Ok(PlaybackClient::open(dir, PlaybackMode::Hybrid)?.require_offered_tools())
}

/// Whether `url` names a loopback host.
pub fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', ':']).next().unwrap_or("");
    host == "localhost" || host.starts_with("127.") || rest.starts_with("[::1]")
}

/// The API client for `provider` as `vars` read it from `env`, and the key it uses.
fn api(
    provider: Provider,
    vars: &ProviderVars,
    env: &Environment<'_>,
    http: HttpOptions,
    notices: &mut Vec<String>,
) -> Result<(Box<dyn LlmClient>, Option<String>), ConnectError> {
    let key = env.first(&vars.key, notices);
    let given_base = env.first(&vars.base_url, notices);
    let keyless = provider.keyless_possible() && key.is_none();
    let base = given_base
        .clone()
        .unwrap_or_else(|| provider.default_base_url().to_string());
    let missing = || ConnectError::MissingKey {
        var: vars.key.first().copied().unwrap_or(provider.key_var()),
        place: vars.key_place,
        hint: vars.missing_key_hint.to_string(),
    };
    if keyless {
        match vars.keyless {
            Keyless::Loopback if is_loopback(&base) => notices.push(format!(
                "no API key set; talking to the local server at {base} without one"
            )),
            Keyless::GivenUrl if given_base.is_some() => {}
            _ => return Err(missing()),
        }
    }
    let client = provider
        .client(base, key.clone().map(ApiKey::new), http)
        .ok_or_else(missing)?;
    Ok((client, key))
}

/// Builds the client `source` asks for: the provider's API (read through `vars` from `env`),
/// playback or the file queue, recorded when asked.
pub fn connect(
    provider: Provider,
    vars: &ProviderVars,
    env: &Environment<'_>,
    source: &Source,
    options: Options,
) -> Result<Connection, ConnectError> {
    let mut redactor = env.redactor();
    let mut notices = Vec::new();
    let mut playback = None;
    let client: Arc<dyn LlmClient> = match &source.answers {
        Answers::Api => {
            let (client, key) = api(provider, vars, env, options.http, &mut notices)?;
            if let Some(key) = key {
                redactor.add(key);
            }
            Arc::from(client)
        }
        Answers::Playback(dir) => {
            let client = Arc::new(open_playback(dir.clone()).map_err(ConnectError::Playback)?);
            playback = Some(Arc::clone(&client));
            client
        }
        Answers::Queue(queue) => Arc::new(
            QueueClient::new(&queue.dir, queue.timeout, &queue.prefix)
                .map_err(|e| ConnectError::Queue(Box::new(e)))?
                .with_label(queue.label)
                .with_redactor(redactor.clone()),
        ),
    };
    let client: Arc<dyn LlmClient> = match &source.record {
        Some(dir) => {
            let mut recorder = Recorder::new(client, dir)
                .map_err(ConnectError::Record)?
                .with_clock(options.clock)
                .with_redactor(redactor.clone());
            if let Some(ids) = options.ids {
                recorder = recorder.with_ids(ids);
            }
            Arc::new(recorder)
        }
        None => client,
    };
    Ok(Connection {
        endpoint: client.describe(),
        client,
        notices,
        redactor,
        playback,
    })
}
