//! Retry policy: exponential backoff with jitter, honouring `Retry-After`.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// How failed requests are retried.
///
/// Retried: connection errors, HTTP 408, 409, 429 and 5xx. Never retried: other 4xx, timeouts of a
/// request that was already sent, and undecodable or cut-off answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (1 = no retries).
    pub max_attempts: u32,
    /// Wait before the first retry; doubled for each later one.
    pub base_delay: Duration,
    /// Upper bound of the computed backoff.
    pub max_delay: Duration,
    /// Upper bound of a server-requested `Retry-After` wait.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// One attempt, no retries.
    pub fn no_retries() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The wait before retry number `retry` (1 for the first retry). `jitter` in `[0, 1)` spreads the
    /// wait over `[d/2, d)` so that many clients do not retry in lockstep. A server-requested wait
    /// (`retry_after`) takes precedence, capped at [`RetryPolicy::max_retry_after`].
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>, jitter: f64) -> Duration {
        if let Some(wait) = retry_after {
            return wait.min(self.max_retry_after);
        }
        let exp = retry.saturating_sub(1).min(20);
        let full = self
            .base_delay
            .saturating_mul(1u32 << exp)
            .min(self.max_delay);
        let jitter = jitter.clamp(0.0, 1.0);
        full.mul_f64(0.5 + 0.5 * jitter)
    }
}

/// Told to the retry hook before each wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryNotice {
    /// The attempt that just failed (1-based).
    pub attempt: u32,
    /// Attempts allowed in total.
    pub max_attempts: u32,
    /// How long we wait before the next attempt.
    pub delay: Duration,
    /// Why the attempt failed.
    pub error: String,
}

/// A number in `[0, 1)` that differs from call to call (not cryptographic).
pub(crate) fn jitter() -> f64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Parses `retry-after-ms` (milliseconds) or `Retry-After` (seconds, or an HTTP date).
pub(crate) fn parse_retry_after(
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
) -> Option<Duration> {
    if let Some(ms) = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = retry_after?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    let now = jiff::Timestamp::now();
    let secs = when.as_second() - now.as_second();
    Some(Duration::from_secs(u64::try_from(secs).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_is_capped_and_jittered() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay(1, None, 0.0), Duration::from_millis(250));
        assert_eq!(p.delay(1, None, 1.0), Duration::from_millis(500));
        assert_eq!(p.delay(2, None, 1.0), Duration::from_secs(1));
        assert_eq!(p.delay(3, None, 1.0), Duration::from_secs(2));
        assert_eq!(p.delay(30, None, 1.0), Duration::from_secs(8));
        for _ in 0..100 {
            let j = jitter();
            assert!((0.0..1.0).contains(&j));
        }
    }

    #[test]
    fn retry_after_wins_but_is_capped() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3)), 0.3),
            Duration::from_secs(3)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3600)), 0.3),
            Duration::from_secs(60)
        );
    }

    #[test]
    fn parses_retry_after_forms() {
        assert_eq!(
            parse_retry_after(None, Some("2")),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            parse_retry_after(Some("1500"), Some("9")),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after(None, Some("0.5")),
            Some(Duration::from_millis(500))
        );
        assert_eq!(parse_retry_after(None, Some("soon")), None);
        assert_eq!(parse_retry_after(None, None), None);
        let past = parse_retry_after(None, Some("Wed, 21 Oct 2015 07:28:00 GMT"));
        assert_eq!(past, Some(Duration::ZERO));
    }
}
