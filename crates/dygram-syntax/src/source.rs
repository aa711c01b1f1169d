//! Source files and positions.
//!
//! Spans are byte offsets into the source text. Positions shown to people and written into outputs
//! are 0-based lines and characters, characters counted in UTF-16 code units (as editors and the
//! Language Server Protocol count them).

use std::sync::Arc;

/// A byte range `[start, end)` in a source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// The span from `start` to `end`.
    pub fn new(start: usize, end: usize) -> Self {
        Self {
            start: u32::try_from(start).unwrap_or(u32::MAX),
            end: u32::try_from(end).unwrap_or(u32::MAX),
        }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// As a `usize` range.
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// A 0-based line and character (UTF-16 code units), plus the byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Line, from 0.
    pub line: u32,
    /// Character in the line, from 0, in UTF-16 code units.
    pub character: u32,
    /// Offset from the start of the text, in UTF-16 code units.
    pub offset: u32,
}

/// A named source text with a line index.
#[derive(Debug, Clone)]
pub struct SourceFile {
    name: String,
    text: Arc<str>,
    line_starts: Vec<usize>,
    /// Where each line starts in UTF-16 code units (empty for an ASCII text, where they are the
    /// byte offsets): positions are then found without counting from the text's start.
    line_units: Vec<u32>,
}

impl SourceFile {
    /// Wraps `text`, shown as `name` in messages.
    pub fn new(name: impl Into<String>, text: impl Into<Arc<str>>) -> Self {
        let text: Arc<str> = text.into();
        let mut line_starts = vec![0];
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                line_starts.push(i + 1);
            }
        }
        let line_units = if text.is_ascii() {
            Vec::new()
        } else {
            let mut units = Vec::with_capacity(line_starts.len());
            let mut at = 0u32;
            let mut previous = 0;
            for &start in &line_starts {
                at = at.saturating_add(utf16_len(&text[previous..start]));
                units.push(at);
                previous = start;
            }
            units
        };
        Self {
            name: name.into(),
            text,
            line_starts,
            line_units,
        }
    }

    /// The name given at creation (usually the path).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The whole text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text of a span.
    pub fn slice(&self, span: Span) -> &str {
        self.text.get(span.range()).unwrap_or("")
    }

    /// 0-based line of a byte offset.
    pub fn line_of(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        }
    }

    /// The position of a byte offset.
    pub fn position(&self, offset: usize) -> Position {
        let offset = offset.min(self.text.len());
        let line = self.line_of(offset);
        let start = self.line_starts[line];
        let character = utf16_len(self.text.get(start..offset).unwrap_or(""));
        let line_offset = match self.line_units.get(line) {
            Some(units) => *units,
            None => u32::try_from(start).unwrap_or(u32::MAX),
        };
        let utf16_offset = line_offset.saturating_add(character);
        Position {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            character,
            offset: utf16_offset,
        }
    }

    /// Byte offset where a 0-based line starts (the text's length past the last line).
    pub fn line_start(&self, line: usize) -> usize {
        self.line_starts
            .get(line)
            .copied()
            .unwrap_or(self.text.len())
    }

    /// The text of a 0-based line, without its line break.
    pub fn line_text(&self, line: usize) -> &str {
        let Some(&start) = self.line_starts.get(line) else {
            return "";
        };
        let end = self
            .line_starts
            .get(line + 1)
            .copied()
            .unwrap_or(self.text.len());
        self.text
            .get(start..end)
            .unwrap_or("")
            .trim_end_matches(['\n', '\r'])
    }
}

fn utf16_len(s: &str) -> u32 {
    let n: usize = s.chars().map(char::len_utf16).sum();
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_lines_and_utf16_characters() {
        let f = SourceFile::new("m.dy", "ab\n😀c\r\nd");
        assert_eq!(f.position(0).line, 0);
        let p = f.position(7); // the c
        assert_eq!((p.line, p.character), (1, 2));
        assert_eq!(f.position(11).line, 2);
        assert_eq!(f.line_text(1), "😀c");
        assert_eq!(f.line_of(2), 0);
    }

    #[test]
    fn offsets_are_utf16_units_from_the_start_of_the_text() {
        for text in ["ab\n😀c\r\nd é\n\nfin", "plain\nascii\n", "é", ""] {
            let f = SourceFile::new("m.dy", text);
            for (at, _) in text.char_indices().chain([(text.len(), ' ')]) {
                let counted = text[..at].chars().map(char::len_utf16).sum::<usize>();
                assert_eq!(f.position(at).offset as usize, counted, "{text:?} at {at}");
            }
        }
    }
}
