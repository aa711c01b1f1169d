//! Quick fixes: a diagnostic with a suggestion (a "did you mean" name,
//! [`dygram_core::diagnostic::Suggestion`]) offers to replace what it points at; the fixes of the
//! diagnostics touching a range of the text, each once.

use std::ops::Range;

use dygram_core::diagnostic::Diagnostic;

/// A fix to offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuickFix {
    /// What the editor shows: "Change to `X`".
    pub title: String,
    /// The bytes replaced.
    pub replace: Range<usize>,
    /// The text they are replaced with.
    pub text: String,
    /// The diagnostic it fixes (its index in the list given).
    pub diagnostic: usize,
}

/// The fixes of the diagnostics of `text` whose place touches `range` (bytes; touching counts: a
/// cursor at a name's end is on it; a diagnostic of the whole file is at its start), each
/// replacement once, in the order of the diagnostics.
pub fn quick_fixes(text: &str, diagnostics: &[Diagnostic], range: Range<usize>) -> Vec<QuickFix> {
    let mut out: Vec<QuickFix> = Vec::new();
    for (n, d) in diagnostics.iter().enumerate() {
        let Some(fix) = &d.suggestion else {
            continue;
        };
        let span = d.span.unwrap_or_default();
        let (start, end) = (span.start as usize, span.end as usize);
        if end < range.start || start > range.end {
            continue;
        }
        let replace = fix.span.start as usize..fix.span.end as usize;
        if text.get(replace.clone()).is_none()
            || out
                .iter()
                .any(|f| f.replace == replace && f.text == fix.replacement)
        {
            continue;
        }
        out.push(QuickFix {
            title: title(&fix.replacement),
            replace,
            text: fix.replacement.clone(),
            diagnostic: n,
        });
    }
    out
}

/// The title of a fix that puts `replacement` in.
pub fn title(replacement: &str) -> String {
    format!("Change to `{replacement}`")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelled_name_touching_the_range_is_fixed_once() {
        let text = "machine \"M\" @StrictMode\nTask review;\nstate start;\nstart -> reviw;\n";
        let compiled = dygram_core::compile(dygram_syntax::source::SourceFile::new("m.dy", text));
        let at = text.find("reviw").unwrap();
        let fixes = quick_fixes(text, &compiled.diagnostics, at..at);
        assert!(!fixes.is_empty(), "{:?}", compiled.diagnostics);
        let fix = &fixes[0];
        assert_eq!(
            (fix.title.as_str(), fix.text.as_str()),
            ("Change to `review`", "review")
        );
        assert_eq!(&text[fix.replace.clone()], "reviw");
        // Nothing where no diagnostic is.
        assert!(quick_fixes(text, &compiled.diagnostics, 0..1).is_empty());
    }
}
