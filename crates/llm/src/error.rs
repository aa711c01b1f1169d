use std::time::Duration;

use crate::playback::PlaybackMiss;

/// The body of a failed answer as it was received (at most 64 KiB of an error body), kept so that a
/// caller can record it; never part of the error's message. Its `Debug` shows only its length.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ResponseBody(Option<std::sync::Arc<Vec<u8>>>);

impl ResponseBody {
    /// No body.
    pub fn none() -> Self {
        Self(None)
    }

    /// These bytes.
    pub fn new(bytes: Vec<u8>) -> Self {
        Self(Some(std::sync::Arc::new(bytes)))
    }

    /// The bytes, when there was a body.
    pub fn bytes(&self) -> Option<&[u8]> {
        self.0.as_deref().map(Vec::as_slice)
    }

    fn redacted(self, key: &crate::secret::ApiKey) -> Self {
        match &self.0 {
            Some(bytes) => match crate::secret::Redactor::from(key).redact_bytes(bytes) {
                std::borrow::Cow::Owned(clean) => Self::new(clean),
                std::borrow::Cow::Borrowed(_) => self,
            },
            None => self,
        }
    }
}

impl std::fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.bytes() {
            Some(b) => write!(f, "ResponseBody({} bytes)", b.len()),
            None => f.write_str("ResponseBody(none)"),
        }
    }
}

/// Everything that can go wrong talking to a model.
///
/// Messages never contain API keys: adapters redact them from anything a server sends back.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The server refused the credentials (HTTP 401/403). Never retried.
    #[error("authentication failed (HTTP {status}): {message}")]
    Auth {
        /// HTTP status.
        status: u16,
        /// The server's message.
        message: String,
        /// The body as received.
        body: ResponseBody,
    },

    /// Too many requests (HTTP 429), still failing after the retries.
    #[error("rate limited (HTTP 429){}: {message}", retry_after_note(*.retry_after))]
    RateLimited {
        /// How long the server asked us to wait, if it said.
        retry_after: Option<Duration>,
        /// The server's message.
        message: String,
        /// The body as received.
        body: ResponseBody,
    },

    /// The server rejected the request (a 4xx other than 401/403/408/409/429). Never retried.
    #[error("request rejected (HTTP {status}): {message}")]
    BadRequest {
        /// HTTP status.
        status: u16,
        /// The server's message.
        message: String,
        /// The body as received.
        body: ResponseBody,
    },

    /// The server failed (5xx, 408 or 409), still failing after the retries.
    #[error("server error (HTTP {status}): {message}")]
    Server {
        /// HTTP status.
        status: u16,
        /// The server's message.
        message: String,
        /// The body as received.
        body: ResponseBody,
    },

    /// No complete answer within the request timeout.
    #[error("no complete response within {}", format_duration(*.after))]
    Timeout {
        /// The timeout that expired.
        after: Duration,
    },

    /// The server sent nothing for the idle timeout (while we waited for the answer to start, or in
    /// the middle of it). Not retried: the request was sent.
    #[error("the server sent nothing for {} (idle timeout)", format_duration(*.after))]
    Idle {
        /// The idle timeout.
        after: Duration,
    },

    /// The server could not be reached (connection refused, name not resolved, connect timeout).
    /// The request never left this machine, so retrying is safe.
    #[error("cannot reach {url}: {message}")]
    Transport {
        /// The URL we were calling.
        url: String,
        /// What went wrong.
        message: String,
    },

    /// The connection broke after the request was sent, before an answer arrived (reset, closed).
    /// Retried: a model call has no effect beyond its cost, so asking again can at worst pay for
    /// an answer twice, where giving up would fail the whole run.
    #[error("the connection to {url} broke before an answer arrived: {message}")]
    ConnectionLost {
        /// The URL we were calling.
        url: String,
        /// What went wrong.
        message: String,
    },

    /// The exchange failed in a way asking again would not mend: TLS, a malformed HTTP answer, a
    /// bad URL, a redirect of the request. Not retried.
    #[error("the exchange with {url} failed: {message}")]
    Protocol {
        /// The URL we were calling.
        url: String,
        /// What went wrong.
        message: String,
    },

    /// The server answered with something we cannot understand.
    #[error("undecodable response: {message}")]
    Decode {
        /// What was wrong with it.
        message: String,
        /// The body (or its first bytes) as received, when there was one.
        body: ResponseBody,
    },

    /// The server reported an error in the middle of a streamed answer (the HTTP status was 200).
    #[error("the server reported an error in the stream: {message}")]
    StreamError {
        /// The server's message.
        message: String,
    },

    /// A streamed answer stopped before its end marker.
    #[error("the response stream ended before it was complete: {message}")]
    IncompleteStream {
        /// What we saw.
        message: String,
    },

    /// Playback found no recording for a request.
    #[error(transparent)]
    PlaybackMiss(#[from] Box<PlaybackMiss>),

    /// Recordings could not be read or written.
    #[error("recordings: {0}")]
    Recording(String),

    /// The file queue could not ask or did not get an answer.
    #[error(transparent)]
    Queue(Box<crate::queue::QueueError>),
}

impl From<crate::queue::QueueError> for LlmError {
    fn from(e: crate::queue::QueueError) -> Self {
        Self::Queue(Box::new(e))
    }
}

impl LlmError {
    /// Whether another attempt could succeed: connection problems, 408, 409, 429 and 5xx.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. }
                | Self::Server { .. }
                | Self::Transport { .. }
                | Self::ConnectionLost { .. }
        )
    }

    /// The HTTP status behind this error, when there is one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Auth { status, .. }
            | Self::BadRequest { status, .. }
            | Self::Server { status, .. } => Some(*status),
            Self::RateLimited { .. } => Some(429),
            _ => None,
        }
    }

    /// The body of the failed answer as received, when there was one (HTTP errors, undecodable
    /// answers), for a record of the exchange.
    pub fn response_body(&self) -> Option<&[u8]> {
        match self {
            Self::Auth { body, .. }
            | Self::RateLimited { body, .. }
            | Self::BadRequest { body, .. }
            | Self::Server { body, .. }
            | Self::Decode { body, .. } => body.bytes(),
            _ => None,
        }
    }

    /// A short name for the kind of error (`server`, `timeout`, …), for records.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Auth { .. } => "auth",
            Self::RateLimited { .. } => "rate_limited",
            Self::BadRequest { .. } => "bad_request",
            Self::Server { .. } => "server",
            Self::Timeout { .. } => "timeout",
            Self::Idle { .. } => "idle_timeout",
            Self::Transport { .. } => "transport",
            Self::ConnectionLost { .. } => "connection_lost",
            Self::Protocol { .. } => "protocol",
            Self::Decode { .. } => "decode",
            Self::StreamError { .. } => "stream_error",
            Self::IncompleteStream { .. } => "incomplete_stream",
            Self::PlaybackMiss(_) => "playback_miss",
            Self::Recording(_) => "recording",
            Self::Queue(_) => "source",
        }
    }

    /// The same error with every occurrence of `key` in its texts replaced by `[REDACTED]`.
    pub fn redacted(self, key: &crate::secret::ApiKey) -> Self {
        let r = |s: String| key.redact(&s);
        match self {
            Self::Auth {
                status,
                message,
                body,
            } => Self::Auth {
                status,
                message: r(message),
                body: body.redacted(key),
            },
            Self::RateLimited {
                retry_after,
                message,
                body,
            } => Self::RateLimited {
                retry_after,
                message: r(message),
                body: body.redacted(key),
            },
            Self::BadRequest {
                status,
                message,
                body,
            } => Self::BadRequest {
                status,
                message: r(message),
                body: body.redacted(key),
            },
            Self::Server {
                status,
                message,
                body,
            } => Self::Server {
                status,
                message: r(message),
                body: body.redacted(key),
            },
            Self::Transport { url, message } => Self::Transport {
                url: r(url),
                message: r(message),
            },
            Self::ConnectionLost { url, message } => Self::ConnectionLost {
                url: r(url),
                message: r(message),
            },
            Self::Protocol { url, message } => Self::Protocol {
                url: r(url),
                message: r(message),
            },
            Self::Decode { message, body } => Self::Decode {
                message: r(message),
                body: body.redacted(key),
            },
            Self::StreamError { message } => Self::StreamError {
                message: r(message),
            },
            Self::IncompleteStream { message } => Self::IncompleteStream {
                message: r(message),
            },
            Self::Recording(message) => Self::Recording(r(message)),
            Self::Queue(e) => Self::Queue(e),
            other @ (Self::Timeout { .. } | Self::Idle { .. } | Self::PlaybackMiss(_)) => other,
        }
    }

    /// Builds the error for an HTTP error status.
    pub(crate) fn from_status(
        status: u16,
        message: String,
        retry_after: Option<Duration>,
        body: ResponseBody,
    ) -> Self {
        match status {
            401 | 403 => Self::Auth {
                status,
                message,
                body,
            },
            429 => Self::RateLimited {
                retry_after,
                message,
                body,
            },
            408 | 409 | 500..=599 => Self::Server {
                status,
                message,
                body,
            },
            _ => Self::BadRequest {
                status,
                message,
                body,
            },
        }
    }

    /// A `Decode` error about `body`.
    pub(crate) fn decode(message: String, body: &[u8]) -> Self {
        Self::Decode {
            message,
            body: ResponseBody::new(body.to_vec()),
        }
    }
}

fn retry_after_note(d: Option<Duration>) -> String {
    d.map(|d| format!(", retry after {}", format_duration(d)))
        .unwrap_or_default()
}

pub(crate) fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_kinds() {
        assert!(matches!(
            LlmError::from_status(401, String::new(), None, ResponseBody::none()),
            LlmError::Auth { .. }
        ));
        assert!(matches!(
            LlmError::from_status(403, String::new(), None, ResponseBody::none()),
            LlmError::Auth { .. }
        ));
        assert!(matches!(
            LlmError::from_status(429, String::new(), None, ResponseBody::none()),
            LlmError::RateLimited { .. }
        ));
        assert!(matches!(
            LlmError::from_status(408, String::new(), None, ResponseBody::none()),
            LlmError::Server { .. }
        ));
        assert!(matches!(
            LlmError::from_status(409, String::new(), None, ResponseBody::none()),
            LlmError::Server { .. }
        ));
        assert!(matches!(
            LlmError::from_status(503, String::new(), None, ResponseBody::none()),
            LlmError::Server { .. }
        ));
        assert!(matches!(
            LlmError::from_status(400, String::new(), None, ResponseBody::none()),
            LlmError::BadRequest { .. }
        ));
        assert!(matches!(
            LlmError::from_status(404, String::new(), None, ResponseBody::none()),
            LlmError::BadRequest { .. }
        ));
    }

    #[test]
    fn messages_read_well() {
        let e = LlmError::from_status(
            429,
            "slow down".into(),
            Some(Duration::from_secs(2)),
            ResponseBody::none(),
        );
        assert_eq!(
            e.to_string(),
            "rate limited (HTTP 429), retry after 2 s: slow down"
        );
        let e = LlmError::Timeout {
            after: Duration::from_millis(1500),
        };
        assert_eq!(e.to_string(), "no complete response within 1.5 s");
        assert_eq!(format_duration(Duration::from_millis(20)), "20 ms");
    }
}
