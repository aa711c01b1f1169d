//! The LLM flags of the execution commands, and the messages they lead to. Which client answers is
//! chosen by the LLM layer (`llm::connect`) through dygram's table ([`dygram_runtime::connect`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use dygram_runtime::connect as source;
use dygram_runtime::session::ClientConfig;
use llm::{Answers, ConnectError, Connection, LlmClient, PlaybackClient, Provider, SourceKind};

use super::CliError;

/// `--provider`: the providers by name, each with the variables dygram reads for it.
fn provider_parser() -> impl TypedValueParser<Value = Provider> {
    let values = Provider::ALL.into_iter().map(|p| {
        let help = match p {
            Provider::Anthropic => {
                "Anthropic Messages API (`ANTHROPIC_API_KEY`, `ANTHROPIC_MODEL_ID`, `DYGRAM_BASE_URL` or `ANTHROPIC_BASE_URL`)"
            }
            Provider::OpenAi => {
                "An OpenAI-compatible Chat Completions endpoint (`OPENAI_API_KEY`, `DYGRAM_BASE_URL` or `OPENAI_BASE_URL`, `OPENAI_MODEL_ID`)"
            }
            other => other.title(),
        };
        PossibleValue::new(p.name()).help(help)
    });
    PossibleValuesParser::new(values).try_map(|name| name.parse::<Provider>())
}

/// The LLM flags shared by the execution commands.
#[derive(Debug, Clone, clap::Args)]
pub struct LlmArgs {
    /// Model to use (wins over the machine's `modelId` and the environment).
    #[arg(short = 'm', long = "model", value_name = "MODEL")]
    pub model: Option<String>,
    /// Which API answers when no playback is given (also DYGRAM_PROVIDER).
    #[arg(
        long,
        env = "DYGRAM_PROVIDER",
        value_parser = provider_parser(),
        default_value = "anthropic"
    )]
    pub provider: Provider,
    /// Replay recorded answers (`turn-<n>.json`) from DIR instead of calling an API.
    #[arg(long, value_name = "DIR")]
    pub playback: Option<PathBuf>,
    /// Record every answer to DIR as `turn-<n>.json` (continuing the numbering already there).
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Output limit of each model answer, in tokens (lower it for models with a small context).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tokens: Option<u32>,
}

/// The model when neither `-m` nor the machine names one: the provider's environment variable,
/// else its default.
pub fn default_model(provider: Provider) -> String {
    source::default_model(provider)
}

/// Says that `dir` holds no recordings, listing the recording directories beside it.
fn no_playback_dir(dir: &Path) -> CliError {
    let err =
        CliError::new(format!("Playback directory not found: {}", dir.display())).kind("not_found");
    let siblings = llm::recording::dirs_beside(dir);
    if siblings.is_empty() {
        err.hint("no recordings directory next to it; record one first with --record DIR")
    } else {
        let list: Vec<String> = siblings
            .iter()
            .map(|p| format!("   - {}/", p.display()))
            .collect();
        err.hint(format!("Available recordings:\n{}", list.join("\n")))
    }
}

/// What a connection error means at this command line.
fn connect_error(e: ConnectError, record: Option<&Path>, playback: Option<&Path>) -> CliError {
    match (e, record, playback) {
        (ConnectError::Record(e), Some(dir), _) => {
            CliError::new(format!("cannot record into {}: {e}", dir.display()))
        }
        (ConnectError::Playback(e), _, Some(dir)) => {
            CliError::new(format!("cannot open recordings in {}: {e}", dir.display()))
        }
        (e, _, _) => {
            let err = CliError::new(e.to_string());
            match e.hint() {
                Some(hint) => err.hint(hint),
                None => err,
            }
        }
    }
}

/// Opens a playback directory, with an error that lists the recording directories beside it.
pub fn open_playback(dir: &Path) -> Result<PlaybackClient, CliError> {
    if !dir.is_dir() {
        return Err(no_playback_dir(dir));
    }
    llm::connect::open_playback(dir)
        .map_err(|e| connect_error(ConnectError::Playback(e), None, Some(dir)))
}

/// The secrets of this process: the API keys dygram's clients read (`ANTHROPIC_API_KEY`,
/// `OPENAI_API_KEY`), whichever are set. Everything that leaves the process passes through it.
pub fn redactor() -> llm::Redactor {
    source::redactor()
}

/// Whether an API client can be built for `provider` (its key, or for OpenAI its URL, is set).
pub fn api_configured(provider: Provider) -> bool {
    source::api_client(provider).is_some()
}

/// What to say when a node needs the model and no source of answers is configured.
pub fn missing_client_hint(provider: Provider) -> &'static str {
    source::missing_client_hint(provider)
}

/// The client for a one-shot execution: playback or API, wrapped in a recorder when asked.
pub fn build(
    args: &LlmArgs,
    on_retry: Option<llm::RetryHook>,
) -> Result<Option<Arc<dyn LlmClient>>, CliError> {
    let answers = match &args.playback {
        Some(dir) if !dir.is_dir() => return Err(no_playback_dir(dir)),
        Some(dir) => Answers::Playback(dir.clone()),
        None => Answers::Api,
    };
    let src = llm::Source {
        answers,
        record: args.record.clone(),
    };
    match source::connect(args.provider, &src, on_retry) {
        Ok(conn) => Ok(Some(conn.client)),
        // Machines that never need the model run without a key.
        Err(ConnectError::MissingKey { .. }) => Ok(None),
        Err(e) => Err(connect_error(
            e,
            args.record.as_deref(),
            args.playback.as_deref(),
        )),
    }
}

/// The connection of a saved execution to its remembered source (`None`: nobody inside the process
/// answers).
pub fn for_execution(
    config: &ClientConfig,
    queue_dir: &Path,
    queue_timeout: Duration,
    id: &str,
    on_retry: Option<llm::RetryHook>,
) -> Result<Option<Connection>, CliError> {
    let playback = (config.kind == SourceKind::Playback)
        .then(|| Path::new(config.playback_dir.as_deref().unwrap_or_default()));
    if let Some(dir) = playback.filter(|d| !d.is_dir()) {
        return Err(no_playback_dir(dir));
    }
    source::for_execution(config, queue_dir, queue_timeout, id, on_retry)
        .map_err(|e| connect_error(e, None, playback))
}
