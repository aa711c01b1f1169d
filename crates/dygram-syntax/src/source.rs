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
    /// UTF-16 code units before known byte offsets (`(byte, units)`, ascending, on character
    /// boundaries): every line start and at most every [`CHECKPOINT`] bytes within a line. Empty
    /// for an ASCII text, where units are bytes. A position then counts at most a checkpoint's
    /// stretch of text, however long its line.
    checkpoints: Vec<(usize, u32)>,
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
        let checkpoints = if text.is_ascii() {
            Vec::new()
        } else {
            checkpoints(&text)
        };
        Self {
            name: name.into(),
            text,
            line_starts,
            checkpoints,
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
        let units = self.units_before(offset);
        Position {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            character: units.saturating_sub(self.units_before(start)),
            offset: units,
        }
    }

    /// UTF-16 code units before byte `offset`: from the nearest checkpoint.
    fn units_before(&self, offset: usize) -> u32 {
        if self.checkpoints.is_empty() {
            return u32::try_from(offset).unwrap_or(u32::MAX);
        }
        let i = self
            .checkpoints
            .partition_point(|&(byte, _)| byte <= offset);
        let (byte, units) = self.checkpoints[i.saturating_sub(1)];
        units.saturating_add(utf16_len(self.text.get(byte..offset).unwrap_or("")))
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

/// The longest stretch of a line counted for one position (bytes).
const CHECKPOINT: usize = 256;

/// The checkpoints of a text that is not ASCII: each line start, and within a line the first
/// character boundary at least [`CHECKPOINT`] bytes after the previous checkpoint.
fn checkpoints(text: &str) -> Vec<(usize, u32)> {
    let mut out = vec![(0, 0)];
    let (mut last, mut units) = (0usize, 0u32);
    let mut since = 0usize;
    for (i, c) in text.char_indices() {
        if since >= CHECKPOINT && i != last {
            out.push((i, units));
            last = i;
            since = 0;
        }
        units = units.saturating_add(u32::try_from(c.len_utf16()).unwrap_or(2));
        since += c.len_utf8();
        if c == '\n' {
            let next = i + 1;
            out.push((next, units));
            last = next;
            since = 0;
        }
    }
    out.dedup_by_key(|c| c.0);
    out
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
        // Long lines too, where positions count from checkpoints within the line.
        let long = format!("{}x😀\n{}é\nend", "é😀a".repeat(400), "b".repeat(1000));
        for text in ["ab\n😀c\r\nd é\n\nfin", "plain\nascii\n", "é", "", &long] {
            let f = SourceFile::new("m.dy", text);
            for (at, _) in text.char_indices().chain([(text.len(), ' ')]) {
                let counted = text[..at].chars().map(char::len_utf16).sum::<usize>();
                let p = f.position(at);
                assert_eq!(p.offset as usize, counted, "{text:?} at {at}");
                let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
                let character = text[line_start..at]
                    .chars()
                    .map(char::len_utf16)
                    .sum::<usize>();
                assert_eq!(p.character as usize, character, "{text:?} at {at}");
            }
        }
    }
}
