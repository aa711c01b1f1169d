//! The providers: which wire protocol a model speaks, with everything that is the provider's own
//! (its name in configuration files, its usual environment variables, its public endpoint, the
//! client that speaks it). What a tool makes of these (which variables it reads first, which model
//! it picks when none is named) is the tool's, in a [`ProviderVars`](crate::connect::ProviderVars).
//!
//! Adding a provider: a variant here and its arms in this file, its adapter module, and the module
//! line in `lib.rs`. The tools take the standard variables for a provider they do not name.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::anthropic::{AnthropicClient, AnthropicConfig};
use crate::http::HttpOptions;
use crate::openai::{OpenAiClient, OpenAiConfig};
use crate::secret::ApiKey;
use crate::types::ChatRequest;
use crate::{LlmClient, anthropic, openai};

/// Which wire protocol a model speaks. Its serialized form is its [`name`](Provider::name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Provider {
    /// Anthropic Messages.
    #[serde(rename = "anthropic")]
    Anthropic,
    /// OpenAI-compatible Chat Completions (any server that speaks it: OpenAI, llama.cpp, vLLM…).
    #[serde(rename = "openai")]
    OpenAi,
}

/// A provider name that is not one of [`Provider::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown provider {0:?}")]
pub struct UnknownProvider(pub String);

impl Provider {
    /// Every provider, in the order tools list them.
    pub const ALL: [Provider; 2] = [Provider::Anthropic, Provider::OpenAi];

    /// The name in configuration files, flags and saved state (`anthropic`, `openai`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::OpenAi => "openai",
        }
    }

    /// A one-line description, for help texts that have nothing more particular to say.
    pub fn title(self) -> &'static str {
        match self {
            Self::Anthropic => "Anthropic Messages API",
            Self::OpenAi => "An OpenAI-compatible Chat Completions endpoint",
        }
    }

    /// The variable that conventionally holds the provider's API key.
    pub fn key_var(self) -> &'static str {
        match self {
            Self::Anthropic => "ANTHROPIC_API_KEY",
            Self::OpenAi => "OPENAI_API_KEY",
        }
    }

    /// The variable that conventionally holds the provider's base URL.
    pub fn base_url_var(self) -> &'static str {
        match self {
            Self::Anthropic => "ANTHROPIC_BASE_URL",
            Self::OpenAi => "OPENAI_BASE_URL",
        }
    }

    /// The variable that conventionally names the model.
    pub fn model_var(self) -> &'static str {
        match self {
            Self::Anthropic => "ANTHROPIC_MODEL_ID",
            Self::OpenAi => "OPENAI_MODEL_ID",
        }
    }

    /// The public endpoint, when no base URL is given.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::Anthropic => anthropic::DEFAULT_BASE_URL,
            Self::OpenAi => openai::DEFAULT_BASE_URL,
        }
    }

    /// Whether a server of this protocol may be used without a key (local OpenAI-compatible servers
    /// need none; Anthropic always does).
    pub fn keyless_possible(self) -> bool {
        match self {
            Self::Anthropic => false,
            Self::OpenAi => true,
        }
    }

    /// The client for `base_url`; `None` when the protocol needs a key and `key` is `None`.
    pub fn client(
        self,
        base_url: String,
        key: Option<ApiKey>,
        http: HttpOptions,
    ) -> Option<Box<dyn LlmClient>> {
        Some(match self {
            Self::Anthropic => {
                let mut config = AnthropicConfig::new(base_url, key?);
                config.http = http;
                Box::new(AnthropicClient::new(config))
            }
            Self::OpenAi => {
                let mut config = OpenAiConfig::new(base_url, key);
                config.http = http;
                Box::new(OpenAiClient::new(config))
            }
        })
    }

    /// `request` as this provider's client would send it, unstreamed (for records of requests
    /// whose bytes were not kept).
    pub fn wire_request(self, request: &ChatRequest) -> Result<Vec<u8>, serde_json::Error> {
        match self {
            Self::Anthropic => serde_json::to_vec(&anthropic::WireRequest::new(request, false)),
            Self::OpenAi => serde_json::to_vec(&openai::WireRequest::new(request, false, false)),
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Provider {
    type Err = UnknownProvider;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownProvider(s.to_string()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_text_and_json() {
        for p in Provider::ALL {
            assert_eq!(p.name().parse::<Provider>().unwrap(), p);
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{}\"", p.name()));
            assert_eq!(serde_json::from_str::<Provider>(&json).unwrap(), p);
        }
        assert_eq!(
            "gemini".parse::<Provider>().unwrap_err().to_string(),
            "unknown provider \"gemini\""
        );
    }

    #[test]
    fn a_key_is_needed_only_where_the_protocol_needs_one() {
        for p in Provider::ALL {
            let client = p.client("http://127.0.0.1:9".into(), None, HttpOptions::default());
            assert_eq!(client.is_some(), p.keyless_possible(), "{p}");
        }
    }
}
