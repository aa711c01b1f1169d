//! Helpers shared by the test modules.

use std::time::Duration;

use llm::anthropic::{AnthropicClient, AnthropicConfig};
use llm::openai::{OpenAiClient, OpenAiConfig};
use llm::{ApiKey, HttpOptions, LlmClient, RetryPolicy};
use testkit::{Protocol, ScriptedServer};

pub const KEY: &str = "sk-test-0123456789abcdef-secret";

/// Retries that do not slow the suite down.
pub fn fast_http() -> HttpOptions {
    HttpOptions {
        timeout: Duration::from_secs(20),
        idle_timeout: Duration::from_secs(20),
        connect_timeout: Duration::from_secs(5),
        retry: RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(40),
            max_retry_after: Duration::from_secs(5),
        },
        on_retry: None,
    }
}

/// [`fast_http`] with an idle limit: no byte for `idle` ends the request.
pub fn idle_http(idle: Duration) -> HttpOptions {
    HttpOptions {
        idle_timeout: idle,
        ..fast_http()
    }
}

/// A client of the given protocol pointed at `server`.
pub fn client(
    server: &ScriptedServer,
    protocol: Protocol,
    http: HttpOptions,
) -> Box<dyn LlmClient> {
    match protocol {
        Protocol::OpenAi => {
            let mut config = OpenAiConfig::new(server.openai_base(), Some(ApiKey::new(KEY)));
            config.http = http;
            Box::new(OpenAiClient::new(config))
        }
        Protocol::Anthropic => {
            let mut config = AnthropicConfig::new(server.url(), ApiKey::new(KEY));
            config.http = http;
            Box::new(AnthropicClient::new(config))
        }
    }
}
