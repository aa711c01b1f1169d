//! The JSON format: the canonical machine JSON ([`crate::json`]) as text, and read back from a
//! `.json` input, which the other outputs can then be made from.

use serde_json::Value as Json;

use dygram_syntax::parser::MAX_NESTING;

/// Why a `.json` input is not a machine.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The text is not JSON.
    #[error("not valid JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    /// The JSON has no `nodes` array.
    #[error("not a machine (no \"nodes\" array)")]
    NotMachine,
    /// The nodes nest deeper than a program may.
    #[error("nodes nested {depth} levels deep; at most {MAX_NESTING} levels are accepted")]
    TooDeep {
        /// How deeply they nest.
        depth: usize,
    },
}

/// The machine, pretty-printed with a final line break.
pub fn to_text(machine: &Json) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string_pretty(machine)?;
    text.push('\n');
    Ok(text)
}

/// A machine from canonical JSON text: it must have a `nodes` array, nested (through `parent`) no
/// deeper than [`MAX_NESTING`] levels, as a program could be.
pub fn read(text: &str) -> Result<Json, ReadError> {
    let value: Json = serde_json::from_str(text)?;
    if !value.get("nodes").is_some_and(Json::is_array) {
        return Err(ReadError::NotMachine);
    }
    let depth = super::dsl::nesting_depth(&value);
    if depth > MAX_NESTING {
        return Err(ReadError::TooDeep { depth });
    }
    Ok(value)
}
