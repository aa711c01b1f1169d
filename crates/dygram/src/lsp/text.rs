//! An open document's text and the conversions between byte offsets (the compiler's spans) and
//! LSP positions (lines and UTF-16 code units, the protocol's default).

use lsp_types::{Position, Range, TextDocumentContentChangeEvent};

/// The text of an open document.
#[derive(Debug, Clone, Default)]
pub struct Document {
    /// Its text now.
    pub text: String,
    /// The version the client gave it.
    pub version: i32,
}

impl Document {
    /// A document opened with `text`.
    pub fn new(text: String, version: i32) -> Self {
        Self { text, version }
    }

    /// Applies the client's changes in order: a change with a range replaces that range, one
    /// without replaces the whole text.
    pub fn apply(&mut self, changes: Vec<TextDocumentContentChangeEvent>, version: i32) {
        for change in changes {
            match change.range {
                Some(range) => {
                    let start = offset(&self.text, range.start);
                    let end = offset(&self.text, range.end).max(start);
                    self.text.replace_range(start..end, &change.text);
                }
                None => self.text = change.text,
            }
        }
        self.version = version;
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

/// Where each line of a text starts, for many [`position`]s without reading the text from its
/// start each time. Lines end as the protocol has it: `\n`, `\r\n` or a lone `\r`.
#[derive(Debug)]
pub struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    /// The lines of `text`.
    pub fn new(text: &'a str) -> Self {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        for (i, &b) in bytes.iter().enumerate() {
            let ends = b == b'\n' || (b == b'\r' && bytes.get(i + 1) != Some(&b'\n'));
            if ends {
                starts.push(i + 1);
            }
        }
        Self { text, starts }
    }

    /// Where line `line` ends (before its line break).
    fn line_end(&self, line: usize) -> usize {
        let start = self.starts.get(line).copied().unwrap_or(self.text.len());
        self.text[start..]
            .find(['\r', '\n'])
            .map_or(self.text.len(), |i| start + i)
    }

    /// The byte offset of `position` (as [`offset`] has it).
    pub fn offset(&self, position: Position) -> usize {
        let line = position.line as usize;
        let Some(&start) = self.starts.get(line) else {
            return self.text.len();
        };
        let end = self.line_end(line);
        let mut units = 0u32;
        for (i, c) in self.text[start..end].char_indices() {
            if units >= position.character {
                return start + i;
            }
            units += c.len_utf16() as u32;
        }
        end
    }

    /// The position of byte `at` (as [`position`] has it).
    pub fn position(&self, at: usize) -> Position {
        let mut at = at.min(self.text.len());
        while !self.text.is_char_boundary(at) {
            at -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= at).saturating_sub(1);
        let start = self.starts.get(line).copied().unwrap_or(0);
        // Inside a line break: the end of the line's text.
        let at = at.min(self.line_end(line));
        let character: usize = self.text[start..at].chars().map(char::len_utf16).sum();
        Position::new(
            u32::try_from(line).unwrap_or(u32::MAX),
            u32::try_from(character).unwrap_or(u32::MAX),
        )
    }

    /// The text whose lines these are.
    pub fn text(&self) -> &'a str {
        self.text
    }

    /// The range of bytes `start..end` (as [`range`] has it).
    pub fn range(&self, start: usize, end: usize) -> Range {
        Range::new(self.position(start), self.position(end))
    }
}

/// How many UTF-16 code units `text` takes.
pub fn utf16_len(text: &str) -> u32 {
    u32::try_from(text.chars().map(char::len_utf16).sum::<usize>()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_utf16_units_and_round_trip() {
        let text = "ab\nçé𝄞x\n";
        assert_eq!(position(text, 0), Position::new(0, 0));
        assert_eq!(position(text, 3), Position::new(1, 0));
        // ç and é are one unit each, 𝄞 two.
        let x = text.find('x').unwrap();
        assert_eq!(position(text, x), Position::new(1, 4));
        assert_eq!(offset(text, Position::new(1, 4)), x);
        assert_eq!(offset(text, Position::new(1, 99)), text.len() - 1);
        assert_eq!(offset(text, Position::new(9, 0)), text.len());
    }

    #[test]
    fn lines_end_at_lf_crlf_or_a_lone_cr() {
        let text = "a\r\nbc\rd\ne";
        assert_eq!(position(text, text.find('b').unwrap()), Position::new(1, 0));
        assert_eq!(position(text, text.find('d').unwrap()), Position::new(2, 0));
        assert_eq!(position(text, text.find('e').unwrap()), Position::new(3, 0));
        // Between `\r` and `\n`: the end of the line's text.
        assert_eq!(position(text, 2), Position::new(0, 1));
        assert_eq!(offset(text, Position::new(2, 0)), text.find('d').unwrap());
        assert_eq!(offset(text, Position::new(0, 9)), 1);
        assert_eq!(offset(text, Position::new(1, 9)), 5);
    }

    #[test]
    fn the_line_index_agrees_with_position() {
        let text = "ab\nçé𝄞x\n\nlast";
        let index = LineIndex::new(text);
        for at in 0..=text.len() + 2 {
            assert_eq!(index.position(at), position(text, at), "at {at}");
            assert_eq!(index.range(0, at), range(text, 0, at), "at {at}");
        }
        assert_eq!(utf16_len("é𝄞x"), 4);
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
