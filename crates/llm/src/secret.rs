//! API keys that cannot leak by accident.

/// An API key. Its `Debug` output is redacted and it has no `Display`; the only way to read it is
/// [`ApiKey::expose`], which the adapters call when building request headers.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key itself, for an `Authorization` or `x-api-key` header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Replaces every occurrence of the key in `text` with `[REDACTED]`.
    pub fn redact(&self, text: &str) -> String {
        if self.0.len() < 4 {
            // Replacing one- to three-character "keys" would mangle ordinary text; such a key is a
            // placeholder, not a secret.
            return text.to_string();
        }
        text.replace(&self.0, "[REDACTED]")
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey([REDACTED])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_redaction_hide_the_key() {
        let key = ApiKey::new("sk-test-very-secret");
        assert_eq!(format!("{key:?}"), "ApiKey([REDACTED])");
        assert_eq!(
            key.redact("bad key sk-test-very-secret!"),
            "bad key [REDACTED]!"
        );
        assert_eq!(key.expose(), "sk-test-very-secret");
    }
}
