//! Choosing where LLM answers come from: playback, an API (Anthropic or OpenAI-compatible), and
//! recording around either.

use std::path::{Path, PathBuf};

use llm::anthropic::{AnthropicClient, AnthropicConfig};
use llm::openai::{OpenAiClient, OpenAiConfig};
use llm::{ApiKey, LlmClient, PlaybackClient, PlaybackMode, Recorder};

use super::CliError;

/// Model used with Anthropic when nothing names one.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-3-5-haiku-20241022";
/// Model used with an OpenAI-compatible endpoint when nothing names one.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4o-mini";

/// Which API to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Provider {
    /// Anthropic Messages API (`ANTHROPIC_API_KEY`, `ANTHROPIC_MODEL_ID`, `ANTHROPIC_BASE_URL`).
    Anthropic,
    /// An OpenAI-compatible Chat Completions endpoint (`OPENAI_API_KEY`, `OPENAI_BASE_URL`,
    /// `OPENAI_MODEL_ID`).
    Openai,
}

/// The LLM flags shared by the execution commands.
#[derive(Debug, Clone, clap::Args)]
pub struct LlmArgs {
    /// Model to use (wins over the machine's `modelId` and the environment).
    #[arg(short = 'm', long = "model", value_name = "MODEL")]
    pub model: Option<String>,
    /// Which API answers when no playback is given.
    #[arg(long, value_enum, default_value = "anthropic")]
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

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The model when neither `-m` nor the machine names one: the provider's environment variable,
/// else its default.
pub fn default_model(provider: Provider) -> String {
    match provider {
        Provider::Anthropic => {
            env("ANTHROPIC_MODEL_ID").unwrap_or_else(|| DEFAULT_ANTHROPIC_MODEL.to_string())
        }
        Provider::Openai => env("OPENAI_MODEL_ID")
            .or_else(|| env("OPENAI_MODEL"))
            .unwrap_or_else(|| DEFAULT_OPENAI_MODEL.to_string()),
    }
}

/// Opens a playback directory, with an error that lists the recording directories beside it.
pub fn open_playback(dir: &Path) -> Result<PlaybackClient, CliError> {
    if !dir.is_dir() {
        let err = CliError::new(format!("Playback directory not found: {}", dir.display()));
        let siblings = recording_dirs_beside(dir);
        return Err(if siblings.is_empty() {
            err.hint("no recordings directory next to it; record one first with --record DIR")
        } else {
            let list: Vec<String> = siblings
                .iter()
                .map(|p| format!("   - {}/", p.display()))
                .collect();
            err.hint(format!("Available recordings:\n{}", list.join("\n")))
        });
    }
    // A recording made for other tools is an error, never an answer replayed at the wrong node.
    PlaybackClient::open(dir, PlaybackMode::Hybrid)
        .map(PlaybackClient::require_offered_tools)
        .map_err(|e| CliError::new(format!("cannot open recordings in {}: {e}", dir.display())))
}

/// Directories next to `dir` (in its parent) that hold `turn-*.json` files.
pub fn recording_dirs_beside(dir: &Path) -> Vec<PathBuf> {
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .filter(|p| {
            std::fs::read_dir(p).is_ok_and(|mut files| {
                files.any(|f| {
                    f.ok().is_some_and(|f| {
                        let name = f.file_name().to_string_lossy().into_owned();
                        name.starts_with("turn-") && name.ends_with(".json")
                    })
                })
            })
        })
        .collect();
    out.sort();
    out
}

/// The secrets of this process: the API keys dygram's clients read (`ANTHROPIC_API_KEY`,
/// `OPENAI_API_KEY`), whichever are set. Everything that leaves the process passes through it.
pub fn redactor() -> llm::Redactor {
    llm::Redactor::new(
        ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]
            .into_iter()
            .filter_map(env),
    )
}

/// Whether an API client can be built for `provider` (its key, or for OpenAI its URL, is set).
pub fn api_configured(provider: Provider) -> bool {
    match provider {
        Provider::Anthropic => env("ANTHROPIC_API_KEY").is_some(),
        Provider::Openai => env("OPENAI_API_KEY").is_some() || env("OPENAI_BASE_URL").is_some(),
    }
}

/// An API client when its key is set (`None` otherwise: machines that never need the model run
/// without one).
pub fn api_client(provider: Provider) -> Option<Box<dyn LlmClient>> {
    match provider {
        Provider::Anthropic => {
            let key = env("ANTHROPIC_API_KEY")?;
            let base =
                env("ANTHROPIC_BASE_URL").unwrap_or_else(|| "https://api.anthropic.com".into());
            Some(Box::new(AnthropicClient::new(AnthropicConfig::new(
                base,
                ApiKey::new(key),
            ))))
        }
        Provider::Openai => {
            let base = env("OPENAI_BASE_URL");
            let key = env("OPENAI_API_KEY").map(ApiKey::new);
            // A local server needs no key, but then its URL must be given.
            if key.is_none() && base.is_none() {
                return None;
            }
            let base = base.unwrap_or_else(|| llm::openai::DEFAULT_BASE_URL.to_string());
            Some(Box::new(OpenAiClient::new(OpenAiConfig::new(base, key))))
        }
    }
}

/// What to say when a node needs the model and no source of answers is configured.
pub fn missing_client_hint(provider: Provider) -> &'static str {
    match provider {
        Provider::Anthropic => {
            "set ANTHROPIC_API_KEY, use --provider openai with OPENAI_API_KEY/OPENAI_BASE_URL, or replay answers with --playback DIR"
        }
        Provider::Openai => {
            "set OPENAI_API_KEY (and OPENAI_BASE_URL for other servers), or replay answers with --playback DIR"
        }
    }
}

/// The client for a one-shot execution: playback or API, wrapped in a recorder when asked.
pub fn build(args: &LlmArgs) -> Result<Option<Box<dyn LlmClient>>, CliError> {
    let inner: Option<Box<dyn LlmClient>> = match &args.playback {
        Some(dir) => Some(Box::new(open_playback(dir)?)),
        None => api_client(args.provider),
    };
    match (&args.record, inner) {
        (Some(dir), Some(inner)) => {
            let recorder = Recorder::new(inner, dir)
                .map_err(|e| CliError::new(format!("cannot record into {}: {e}", dir.display())))?
                .with_redactor(redactor());
            Ok(Some(Box::new(recorder)))
        }
        (_, inner) => Ok(inner),
    }
}
