//! Byte offsets (the compiler's spans) and line/column positions whose columns count UTF-16 code
//! units (what the language server protocol and JavaScript strings count), through one index of
//! where each line starts. Lines end at `\n`, `\r\n` or a lone `\r`.

/// A position: a line and a column in UTF-16 code units, both from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct LineCol {
    /// The line.
    pub line: u32,
    /// The column, in UTF-16 code units.
    pub character: u32,
}

impl LineCol {
    /// Line `line`, column `character`.
    pub fn new(line: u32, character: u32) -> Self {
        Self { line, character }
    }
}

/// Where each line of a text starts. It holds no text: each question is asked with the text it
/// was made from (an open document keeps its index beside its text and remakes it on a change).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    /// The lines of `text`.
    pub fn new(text: &str) -> Self {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        for (i, &b) in bytes.iter().enumerate() {
            let ends = b == b'\n' || (b == b'\r' && bytes.get(i + 1) != Some(&b'\n'));
            if ends {
                starts.push(i + 1);
            }
        }
        Self { starts }
    }

    /// Where line `line` of `text` ends (before its line break).
    fn line_end(&self, text: &str, line: usize) -> usize {
        let start = self.starts.get(line).copied().unwrap_or(text.len());
        let start = start.min(text.len());
        text[start..]
            .find(['\r', '\n'])
            .map_or(text.len(), |i| start + i)
    }

    /// The byte offset of `at` in `text`: a column past a line's end is its end, a line past the
    /// text's end the text's end.
    pub fn offset(&self, text: &str, at: LineCol) -> usize {
        let line = at.line as usize;
        let Some(&start) = self.starts.get(line) else {
            return text.len();
        };
        let end = self.line_end(text, line);
        let mut units = 0u32;
        for (i, c) in text[start.min(end)..end].char_indices() {
            if units >= at.character {
                return start + i;
            }
            units += c.len_utf16() as u32;
        }
        end
    }

    /// The position of byte `at` in `text` (clamped to the text, moved back to a character
    /// boundary; inside a line break, the end of the line's text).
    pub fn line_col(&self, text: &str, at: usize) -> LineCol {
        let mut at = at.min(text.len());
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= at).saturating_sub(1);
        let start = self.starts.get(line).copied().unwrap_or(0).min(at);
        let at = at.min(self.line_end(text, line)).max(start);
        let character: usize = text[start..at].chars().map(char::len_utf16).sum();
        LineCol::new(
            u32::try_from(line).unwrap_or(u32::MAX),
            u32::try_from(character).unwrap_or(u32::MAX),
        )
    }
}

/// How many UTF-16 code units `text` takes.
pub fn utf16_len(text: &str) -> u32 {
    u32::try_from(text.chars().map(char::len_utf16).sum::<usize>()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str, offset: usize) -> LineCol {
        LineIndex::new(text).line_col(text, offset)
    }

    fn offset(text: &str, line: u32, character: u32) -> usize {
        LineIndex::new(text).offset(text, LineCol::new(line, character))
    }

    #[test]
    fn positions_count_utf16_units_and_round_trip() {
        let text = "ab\nçé𝄞x\n";
        assert_eq!(at(text, 0), LineCol::new(0, 0));
        assert_eq!(at(text, 3), LineCol::new(1, 0));
        // ç and é are one unit each, 𝄞 two.
        let x = text.find('x').unwrap_or_default();
        assert_eq!(at(text, x), LineCol::new(1, 4));
        assert_eq!(offset(text, 1, 4), x);
        assert_eq!(offset(text, 1, 99), text.len() - 1);
        assert_eq!(offset(text, 9, 0), text.len());
        assert_eq!(utf16_len("é𝄞x"), 4);
    }

    #[test]
    fn lines_end_at_lf_crlf_or_a_lone_cr() {
        let text = "a\r\nbc\rd\ne";
        let find = |c: char| text.find(c).unwrap_or_default();
        assert_eq!(at(text, find('b')), LineCol::new(1, 0));
        assert_eq!(at(text, find('d')), LineCol::new(2, 0));
        assert_eq!(at(text, find('e')), LineCol::new(3, 0));
        // Between `\r` and `\n`: the end of the line's text.
        assert_eq!(at(text, 2), LineCol::new(0, 1));
        assert_eq!(offset(text, 2, 0), find('d'));
        assert_eq!(offset(text, 0, 9), 1);
        assert_eq!(offset(text, 1, 9), 5);
        // Past the end, and inside a character.
        assert_eq!(at(text, 99), LineCol::new(3, 1));
        assert_eq!(at("é", 1), LineCol::new(0, 0));
    }
}
