//! Ids: generated ones (time-ordered, optionally deterministic) and validation of ids users give us.

use std::sync::Mutex;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use uuid::Uuid;

use crate::error::{StoreError, StoreResult};

/// Longest id we accept from a user.
pub const MAX_ID_LEN: usize = 128;

/// Checks that a user-given id is safe to use as a single path component.
///
/// Allowed: ASCII letters, digits, `-`, `_` and `.`; at most [`MAX_ID_LEN`] characters; not empty,
/// not `.`, and without `..` anywhere. That rules out path separators, parent references, hidden
/// surprises such as NUL bytes, and names that differ only by Unicode normalisation.
pub fn validate_id(id: &str) -> StoreResult<&str> {
    let reason = if id.is_empty() {
        Some("it is empty")
    } else if id.len() > MAX_ID_LEN {
        Some("it is longer than 128 characters")
    } else if id.contains('/') || id.contains('\\') {
        Some("it contains a path separator")
    } else if id == "." || id.contains("..") {
        Some("it refers to a parent or current directory")
    } else if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        Some("only letters, digits, '-', '_' and '.' are allowed")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(StoreError::InvalidId {
            id: id.to_string(),
            reason,
        }),
        None => Ok(id),
    }
}

/// `prefix-YYYYMMDD-HHMMSS` in UTC, e.g. `exec-20251201-143022`.
pub fn timestamp_id(prefix: &str, now: Timestamp) -> String {
    let stamp = now.to_zoned(TimeZone::UTC).strftime("%Y%m%d-%H%M%S");
    format!("{prefix}-{stamp}")
}

/// A source of random bits for ids: the operating system's, or a seeded generator for tests.
#[derive(Debug)]
pub struct IdSource {
    seeded: Option<Mutex<u64>>,
}

impl Default for IdSource {
    fn default() -> Self {
        Self::random()
    }
}

impl IdSource {
    /// Operating-system randomness.
    pub fn random() -> Self {
        Self { seeded: None }
    }

    /// A deterministic sequence: the same seed gives the same ids.
    pub fn seeded(seed: u64) -> Self {
        Self {
            seeded: Some(Mutex::new(seed)),
        }
    }

    /// Random, unless the environment variable `var` holds an unsigned integer seed.
    pub fn from_env(var: &str) -> StoreResult<Self> {
        match std::env::var(var) {
            Ok(value) if !value.trim().is_empty() => value
                .trim()
                .parse::<u64>()
                .map(Self::seeded)
                .map_err(|e| StoreError::BadEnv {
                    var: var.to_string(),
                    value,
                    reason: format!("expected an unsigned integer seed ({e})"),
                }),
            _ => Ok(Self::random()),
        }
    }

    /// 64 random bits.
    pub fn next_u64(&self) -> u64 {
        match &self.seeded {
            None => {
                let bytes = Uuid::new_v4().into_bytes();
                let mut word = [0u8; 8];
                word.copy_from_slice(&bytes[..8]);
                u64::from_le_bytes(word)
            }
            Some(state) => {
                // splitmix64: tiny, well distributed, and plenty for ids.
                let mut guard = match state.lock() {
                    Ok(g) => g,
                    Err(poisoned) => poisoned.into_inner(),
                };
                *guard = guard.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = *guard;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^ (z >> 31)
            }
        }
    }

    /// A time-ordered UUID (version 7) for the instant `now`.
    pub fn uuid_v7(&self, now: Timestamp) -> Uuid {
        let mut random = [0u8; 10];
        random[..8].copy_from_slice(&self.next_u64().to_le_bytes());
        random[8..].copy_from_slice(&self.next_u64().to_le_bytes()[..2]);
        let millis = u64::try_from(now.as_millisecond()).unwrap_or(0);
        uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid()
    }

    /// `len` lowercase hexadecimal characters (at most 16).
    pub fn hex(&self, len: usize) -> String {
        let full = format!("{:016x}", self.next_u64());
        full[..len.min(16)].to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_ids() {
        for id in ["exec-20251201-143022", "run_1", "a.b", "W001", "x"] {
            assert_eq!(validate_id(id).unwrap(), id);
        }
    }

    #[test]
    fn rejects_unsafe_ids_with_a_reason() {
        let cases = [
            ("", "empty"),
            ("a/b", "path separator"),
            ("..", "parent"),
            ("a..b", "parent"),
            (".", "parent"),
            ("a\\b", "path separator"),
            ("a b", "only letters"),
            ("é", "only letters"),
            ("a\0b", "only letters"),
        ];
        for (id, why) in cases {
            let err = validate_id(id).unwrap_err().to_string();
            assert!(err.contains(why), "{id:?}: {err}");
        }
        assert!(validate_id(&"a".repeat(129)).is_err());
        assert!(validate_id(&"a".repeat(128)).is_ok());
    }

    #[test]
    fn timestamp_ids_use_utc() {
        let t: Timestamp = "2025-12-01T14:30:22Z".parse().unwrap();
        assert_eq!(timestamp_id("exec", t), "exec-20251201-143022");
    }

    #[test]
    fn seeded_sources_repeat_and_random_ones_do_not() {
        let t: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let a = IdSource::seeded(7);
        let b = IdSource::seeded(7);
        let ids_a: Vec<_> = (0..3).map(|_| a.uuid_v7(t)).collect();
        let ids_b: Vec<_> = (0..3).map(|_| b.uuid_v7(t)).collect();
        assert_eq!(ids_a, ids_b);
        assert_ne!(ids_a[0], ids_a[1]);
        assert_eq!(ids_a[0].get_version_num(), 7);
        let r = IdSource::random();
        assert_ne!(r.uuid_v7(t), r.uuid_v7(t));
        assert_eq!(a.hex(6).len(), 6);
    }

    #[test]
    fn uuid_v7_sorts_by_time() {
        let s = IdSource::random();
        let early = s.uuid_v7("2026-01-01T00:00:00Z".parse().unwrap());
        let late = s.uuid_v7("2026-01-01T00:00:01Z".parse().unwrap());
        assert!(early.to_string() < late.to_string());
    }
}
