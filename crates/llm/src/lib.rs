//! One provider-neutral way to talk to language models, shared by `delta` and `dygram`.
//!
//! * [`types`]: conversations (messages of text, tool calls and tool results), tool definitions,
//!   requests, responses, token usage.
//! * Adapters: [`openai::OpenAiClient`] (OpenAI-compatible Chat Completions, streaming included) and
//!   [`anthropic::AnthropicClient`] (Anthropic Messages), both behind the [`LlmClient`] trait, with
//!   retries ([`RetryPolicy`]) and timeouts ([`HttpOptions`]).
//! * [`Recorder`] and [`PlaybackClient`]: record exchanges to `turn-<n>.json` files and serve them back
//!   without a network, in DyGram's recording format.
//! * [`queue`] and [`answer`]: answers given from outside the process, through files or by a person.
//! * [`Provider`] and [`connect()`]: the one way both tools reach a model, from an answer [`Source`]
//!   and a tool's table of environment variables ([`connect::ProviderVars`]).
//!
//! The crate never prints. API keys live in [`ApiKey`], whose `Debug` is redacted, and are scrubbed
//! from every error message a server sends back.
#![warn(clippy::print_stdout, clippy::print_stderr)]

pub mod answer;
pub mod anthropic;
pub mod connect;
mod error;
mod http;
pub mod openai;
mod playback;
mod printable;
mod provider;
pub mod queue;
mod recorder;
pub mod recording;
mod retry;
mod secret;
pub mod sse;
pub mod types;
pub mod window;

pub use connect::{Answers, ConnectError, Connection, Source, SourceKind, connect};
pub use error::{LlmError, ResponseBody};
pub use http::{DEFAULT_IDLE_TIMEOUT, HttpOptions, RetryHook};
pub use playback::{PlaybackClient, PlaybackMiss, PlaybackMode, PlaybackState};
pub use printable::{printable, printable_bytes, terminal_safe};
pub use provider::{Provider, UnknownProvider};
pub use recorder::{Recorder, next_turn_number};
pub use recording::{Recording, Signature};
pub use retry::{RetryNotice, RetryPolicy};
pub use secret::{ApiKey, Redactor};
pub use types::{
    ChatRequest, ChatResponse, ContentBlock, Message, RawExchange, Role, StopReason, StreamEvent,
    ToolCallRef, ToolChoice, ToolDefinition, Usage,
};

/// Something that answers chat requests: a provider adapter, a recorder around one, or playback.
pub trait LlmClient: Send + Sync {
    /// Sends `request` and waits for the whole answer.
    fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;

    /// Sends `request` and reports the answer as it is produced, then returns it whole.
    ///
    /// Clients that cannot stream answer in one piece and report it as a single batch of events.
    fn complete_streaming(
        &self,
        request: &ChatRequest,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<ChatResponse, LlmError> {
        let response = self.complete(request)?;
        let mut call_index = 0;
        for block in &response.content {
            match block {
                ContentBlock::Text { text } if !text.is_empty() => {
                    on_event(StreamEvent::TextDelta(text.clone()))
                }
                ContentBlock::ToolCall {
                    name, arguments, ..
                } => {
                    on_event(StreamEvent::ToolCallStarted {
                        index: call_index,
                        name: name.clone(),
                    });
                    on_event(StreamEvent::ToolCallDelta {
                        index: call_index,
                        fragment: arguments.to_string(),
                    });
                    call_index += 1;
                }
                _ => {}
            }
        }
        Ok(response)
    }

    /// A short description for logs (`openai-compatible http://…/chat/completions`); never secrets.
    fn describe(&self) -> String;
}

/// A borrowed client answers like the client: code that takes `impl LlmClient` accepts `&client`
/// and `&dyn LlmClient`. (Owned clients are shared as `Arc<dyn LlmClient>`, which calls through
/// `Deref` and needs no impl of its own.)
impl<T: LlmClient + ?Sized> LlmClient for &T {
    fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        (**self).complete(request)
    }
    fn complete_streaming(
        &self,
        request: &ChatRequest,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<ChatResponse, LlmError> {
        (**self).complete_streaming(request, on_event)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
}
