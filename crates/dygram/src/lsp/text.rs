//! An open document's text, its line index, and the conversions between byte offsets (the
//! compiler's and the analysis' spans) and LSP positions (lines and UTF-16 code units, the
//! protocol's default). Each open document keeps one index ([`dygram_analysis::lines`]), remade
//! when it changes; requests convert through it.

use std::borrow::Cow;

use dygram_analysis::lines::{self, LineCol};
use dygram_syntax::source::Span;
use lsp_types::{Position, Range, TextDocumentContentChangeEvent};

/// The text of an open document.
#[derive(Debug, Clone, Default)]
pub struct Document {
    /// Its text now.
    pub text: String,
    /// The version the client gave it.
    pub version: i32,
    /// Where its lines start.
    lines: lines::LineIndex,
}

impl Document {
    /// A document opened with `text`.
    pub fn new(text: String, version: i32) -> Self {
        let lines = lines::LineIndex::new(&text);
        Self {
            text,
            version,
            lines,
        }
    }

    /// Applies the client's changes in order: a change with a range replaces that range, one
    /// without replaces the whole text.
    pub fn apply(&mut self, changes: Vec<TextDocumentContentChangeEvent>, version: i32) {
        for change in changes {
            match change.range {
                Some(range) => {
                    let start = self.lines().offset(range.start);
                    let end = self.lines().offset(range.end).max(start);
                    self.text.replace_range(start..end, &change.text);
                }
                None => self.text = change.text,
            }
            self.lines = lines::LineIndex::new(&self.text);
        }
        self.version = version;
    }

    /// Its text with its index, for conversions.
    pub fn lines(&self) -> LineIndex<'_> {
        LineIndex {
            text: &self.text,
            index: Cow::Borrowed(&self.lines),
        }
    }
}

/// The byte offset of `position` in `text`; a position past a line's end is its end, past the
/// text's end the text's end.
pub fn offset(text: &str, position: Position) -> usize {
    LineIndex::new(text).offset(position)
}

/// The position of byte `at` in `text` (clamped to the text, moved back to a character boundary).
pub fn position(text: &str, at: usize) -> Position {
    LineIndex::new(text).position(at)
}

/// The range of bytes `start..end` in `text`.
pub fn range(text: &str, start: usize, end: usize) -> Range {
    Range::new(position(text, start), position(text, end))
}

/// A text and its line index: a document's own, or one made for a text read from disk.
#[derive(Debug)]
pub struct LineIndex<'a> {
    text: &'a str,
    index: Cow<'a, lines::LineIndex>,
}

impl<'a> LineIndex<'a> {
    /// The lines of `text`.
    pub fn new(text: &'a str) -> Self {
        Self {
            text,
            index: Cow::Owned(lines::LineIndex::new(text)),
        }
    }

    /// The byte offset of `position` (as [`offset`] has it).
    pub fn offset(&self, position: Position) -> usize {
        self.index
            .offset(self.text, LineCol::new(position.line, position.character))
    }

    /// The position of byte `at` (as [`position`] has it).
    pub fn position(&self, at: usize) -> Position {
        let at = self.index.line_col(self.text, at);
        Position::new(at.line, at.character)
    }

    /// The text whose lines these are.
    pub fn text(&self) -> &'a str {
        self.text
    }

    /// The range of bytes `start..end` (as [`range`] has it).
    pub fn range(&self, start: usize, end: usize) -> Range {
        Range::new(self.position(start), self.position(end))
    }

    /// The range of `span`.
    pub fn span(&self, span: Span) -> Range {
        self.range(span.start as usize, span.end as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_the_analysis_line_columns() {
        let text = "ab\nçé𝄞x\r\nlast";
        let x = text.find('x').unwrap();
        assert_eq!(position(text, x), Position::new(1, 4));
        assert_eq!(offset(text, Position::new(1, 4)), x);
        assert_eq!(offset(text, Position::new(9, 0)), text.len());
    }

    #[test]
    fn the_line_index_agrees_with_position() {
        let text = "ab\nçé𝄞x\n\nlast";
        let index = LineIndex::new(text);
        for at in 0..=text.len() + 2 {
            assert_eq!(index.position(at), position(text, at), "at {at}");
            assert_eq!(index.range(0, at), range(text, 0, at), "at {at}");
        }
    }

    #[test]
    fn changes_apply_in_order_with_and_without_ranges() {
        let mut doc = Document::new("machine \"A\"\nstate s;\n".into(), 1);
        doc.apply(
            vec![TextDocumentContentChangeEvent {
                range: Some(Range::new(Position::new(1, 6), Position::new(1, 7))),
                range_length: None,
                text: "start".into(),
            }],
            2,
        );
        assert_eq!(doc.text, "machine \"A\"\nstate start;\n");
        // The document's index follows its text.
        assert_eq!(doc.lines().position(doc.text.len()), Position::new(2, 0));
        doc.apply(
            vec![TextDocumentContentChangeEvent {
                range: None,
                range_length: None,
                text: "x".into(),
            }],
            3,
        );
        assert_eq!((doc.text.as_str(), doc.version), ("x", 3));
    }
}
