//! Located diagnostics for files users edit (agent.yaml, context.yaml, hooks.yaml, imported modules).

use std::fmt;
use std::path::{Path, PathBuf};

/// A problem in a file, with where it is and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file.
    pub file: PathBuf,
    /// 1-based line and column, when known.
    pub location: Option<(usize, usize)>,
    /// The field path (`tools[2].exec`), when known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
    /// The source line with a caret under the column.
    pub snippet: Option<String>,
    /// What to do about it.
    pub hint: Option<String>,
}

impl Diagnostic {
    /// A diagnostic about `file` as a whole.
    pub fn new(file: &Path, message: impl Into<String>) -> Self {
        Self {
            file: file.to_path_buf(),
            location: None,
            field: None,
            message: message.into(),
            snippet: None,
            hint: None,
        }
    }

    /// Points at `line`:`column` (1-based) of `source`, adding a snippet.
    pub fn at(mut self, source: &str, line: usize, column: usize) -> Self {
        if line > 0 {
            self.location = Some((line, column.max(1)));
            self.snippet = snippet(source, line, column.max(1));
        }
        self
    }

    /// Names the field.
    pub fn field(mut self, field: impl Into<String>) -> Self {
        let field = field.into();
        if !field.is_empty() {
            self.field = Some(field);
        }
        self
    }

    /// Adds a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, column)) = self.location {
            write!(f, ":{line}:{column}")?;
        }
        write!(f, ": ")?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        write!(f, "{}", self.message)?;
        if let Some(snippet) = &self.snippet {
            write!(f, "\n{snippet}")?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostic {}

/// Renders the line `line` of `source` with a caret under `column` (both 1-based).
pub fn snippet(source: &str, line: usize, column: usize) -> Option<String> {
    let text = source.lines().nth(line.checked_sub(1)?)?;
    let gutter = line.to_string().len();
    let pad = " ".repeat(gutter);
    let caret_pad: String = text
        .chars()
        .take(column.saturating_sub(1))
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    Some(format!("{pad} |\n{line} | {text}\n{pad} | {caret_pad}^"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_location_field_snippet_and_hint() {
        let d = Diagnostic::new(Path::new("agent.yaml"), "invalid floating point")
            .at("name: a\nllm:\n  temperature: hot\n", 3, 16)
            .field("llm.temperature")
            .hint("use a number between 0 and 2");
        assert_eq!(
            d.to_string(),
            "agent.yaml:3:16: llm.temperature: invalid floating point\n  |\n3 |   temperature: hot\n  |                ^\n  hint: use a number between 0 and 2"
        );
    }

    #[test]
    fn without_location_it_is_one_line() {
        let d = Diagnostic::new(Path::new("x.yaml"), "empty");
        assert_eq!(d.to_string(), "x.yaml: empty");
    }
}
