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

    /// Replaces every occurrence of the key in `text` with `[REDACTED]` (as [`Redactor`] does).
    pub fn redact(&self, text: &str) -> String {
        Redactor::from(self).redact(text).into_owned()
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey([REDACTED])")
    }
}

/// The secret values a process knows (the API keys in use), and the one way to scrub them from text
/// before it leaves the process: journals, records, recordings, state files, stdout.
///
/// Values shorter than [`Redactor::MIN_LEN`] are ignored: replacing one- to three-character "keys" would
/// mangle ordinary text, and such a value is a placeholder, not a secret.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// Shortest value treated as a secret.
    pub const MIN_LEN: usize = 4;
    /// What a secret is replaced with.
    pub const MASK: &'static str = "[REDACTED]";

    /// A redactor for `secrets` (duplicates and too-short values are dropped; longer values are
    /// replaced first, so a key that contains another is hidden whole).
    pub fn new<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .map(Into::into)
            .filter(|s| s.len() >= Self::MIN_LEN)
            .flat_map(|s| {
                // A key with a quote or a backslash is written differently inside JSON text, and
                // differently again inside JSON text held in a JSON string: hide those forms too.
                let once = json_escaped(&s);
                let twice = json_escaped(&once);
                [s, once, twice]
            })
            .collect();
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Self { secrets }
    }

    /// Adds one more secret.
    pub fn add(&mut self, secret: impl Into<String>) {
        let mut all = std::mem::take(&mut self.secrets);
        all.push(secret.into());
        *self = Self::new(all);
    }

    /// Whether there is nothing to hide.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Whether `text` holds a secret.
    pub fn leaks(&self, text: &str) -> bool {
        self.secrets.iter().any(|s| text.contains(s.as_str()))
    }

    /// `text` with every secret replaced by [`Redactor::MASK`] (borrowed when there was none).
    pub fn redact<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        if !self.leaks(text) {
            return std::borrow::Cow::Borrowed(text);
        }
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), Self::MASK);
            }
        }
        std::borrow::Cow::Owned(out)
    }

    /// Redacts every string (and object key) inside `value`, in place. Working on the value rather
    /// than on its serialized text also catches secrets that JSON escaping would disguise.
    pub fn redact_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(s) => {
                if let std::borrow::Cow::Owned(clean) = self.redact(s) {
                    *s = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            Value::Object(map) => {
                if map.keys().any(|k| self.leaks(k)) {
                    let old = std::mem::take(map);
                    for (k, mut v) in old {
                        self.redact_json(&mut v);
                        map.insert(self.redact(&k).into_owned(), v);
                    }
                } else {
                    map.values_mut().for_each(|v| self.redact_json(v));
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// `bytes` with every secret replaced, byte for byte: text that is not UTF-8 keeps its other bytes.
    pub fn redact_bytes<'a>(&self, bytes: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
        if !self
            .secrets
            .iter()
            .any(|s| find(bytes, s.as_bytes()).is_some())
        {
            return std::borrow::Cow::Borrowed(bytes);
        }
        let mut out = bytes.to_vec();
        for s in &self.secrets {
            let needle = s.as_bytes();
            let mut clean = Vec::with_capacity(out.len());
            let mut rest = out.as_slice();
            while let Some(at) = find(rest, needle) {
                clean.extend_from_slice(&rest[..at]);
                clean.extend_from_slice(Self::MASK.as_bytes());
                rest = &rest[at + needle.len()..];
            }
            clean.extend_from_slice(rest);
            out = clean;
        }
        std::borrow::Cow::Owned(out)
    }
}

/// `text` as it stands between the quotes of a JSON string.
fn json_escaped(text: &str) -> String {
    let quoted = serde_json::Value::String(text.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secret(s))", self.secrets.len())
    }
}

impl From<&ApiKey> for Redactor {
    fn from(key: &ApiKey) -> Self {
        Self::new([key.expose()])
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

    #[test]
    fn the_redactor_hides_every_secret_in_text_json_and_bytes() {
        let r = Redactor::new(["sk-abc", "sk-abc-longer", "ab", "sk-abc"]);
        assert_eq!(format!("{r:?}"), "Redactor(2 secret(s))");
        let odd = Redactor::new([r#"sk-a"b\c"#]);
        let nested =
            serde_json::json!({"content": serde_json::json!({"k": r#"sk-a"b\c"#}).to_string()});
        assert!(!nested.to_string().contains(r#"sk-a"b\c"#));
        assert_eq!(
            odd.redact(&nested.to_string())
                .matches("[REDACTED]")
                .count(),
            1
        );
        let mut value = nested.clone();
        odd.redact_json(&mut value);
        assert!(!odd.leaks(&value.to_string()), "{value}");
        assert_eq!(
            r.redact("x sk-abc-longer y sk-abc"),
            "x [REDACTED] y [REDACTED]"
        );
        assert!(matches!(
            r.redact("nothing ab"),
            std::borrow::Cow::Borrowed(_)
        ));
        let mut v = serde_json::json!({"a": ["k=sk-abc", 1], "sk-abc": {"b": "sk-abc-longer"}});
        r.redact_json(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"a": ["k=[REDACTED]", 1], "[REDACTED]": {"b": "[REDACTED]"}})
        );
        assert_eq!(&*r.redact_bytes(b"sk-abc\xff"), b"[REDACTED]\xff");
        assert!(Redactor::default().is_empty());
        let mut more = Redactor::from(&ApiKey::new("sk-one"));
        more.add("sk-two");
        assert!(more.leaks("sk-two") && more.leaks("sk-one"));
    }
}
