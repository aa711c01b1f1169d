//! Wall-clock time, pinnable for tests.

use jiff::Timestamp;

use crate::error::{StoreError, StoreResult};

/// Where "now" comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Clock {
    /// The system clock.
    #[default]
    System,
    /// Always the same instant (tests, reproducible outputs).
    Fixed(Timestamp),
}

impl Clock {
    /// The system clock, unless the environment variable `var` holds an RFC 3339 instant
    /// (`2026-01-02T03:04:05Z`), in which case time stands still at that instant.
    ///
    /// Each binary picks its own variable name (e.g. `DELTA_TEST_NOW`); an unparseable value is an error
    /// rather than silently falling back to the real clock.
    pub fn from_env(var: &str) -> StoreResult<Self> {
        match std::env::var(var) {
            Ok(value) if !value.trim().is_empty() => Self::parse_fixed(var, &value),
            _ => Ok(Self::System),
        }
    }

    fn parse_fixed(var: &str, value: &str) -> StoreResult<Self> {
        value
            .trim()
            .parse::<Timestamp>()
            .map(Self::Fixed)
            .map_err(|e| StoreError::BadEnv {
                var: var.to_string(),
                value: value.to_string(),
                reason: format!("expected an RFC 3339 instant such as 2026-01-02T03:04:05Z ({e})"),
            })
    }

    /// The current instant.
    pub fn now(&self) -> Timestamp {
        match self {
            Self::System => Timestamp::now(),
            Self::Fixed(t) => *t,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_clock_parses_rfc3339_and_rejects_garbage() {
        let c = Clock::parse_fixed("X", "2026-01-02T03:04:05Z").unwrap();
        assert_eq!(c.now().to_string(), "2026-01-02T03:04:05Z");
        let err = Clock::parse_fixed("X_NOW", "yesterday")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("X_NOW=\"yesterday\" is not valid"), "{err}");
    }

    #[test]
    fn unset_variable_means_system_clock() {
        let c = Clock::from_env("STORE_TEST_CLOCK_THAT_IS_NEVER_SET").unwrap();
        assert_eq!(c, Clock::System);
        let before = Timestamp::now();
        assert!(c.now() >= before);
    }
}
