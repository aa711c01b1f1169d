//! Putting each comment of the document back into the printed text: where (next to the same
//! statement, at its indentation) and with which empty lines around it.

use super::Lost;
use super::layout::{Anchor, Key, Layout};
use dygram_core::Compiled;
use dygram_syntax::lexer::TokenKind;

/// An insertion into the printed text: where, in which order (the comment's), what.
pub(super) type Insert = (usize, usize, String);

/// The document and the printed text while the comments are put back.
pub(super) struct Keeping<'a> {
    original: &'a Compiled,
    /// The document's text.
    text: &'a str,
    /// The printed text.
    out_text: &'a str,
    from: Layout<'a>,
    to: Layout<'a>,
    /// The document's comments, in order.
    comments: Vec<(usize, usize)>,
}

/// Whether an empty line goes before a comment put on its own line.
struct Spacing {
    /// The document has one before it (after the token or comment before it).
    blank_before: bool,
    /// It follows a comment kept at the same place.
    grouped: bool,
}

impl Spacing {
    /// What goes before a comment put on its own line at `line` of `out_text`: an empty line
    /// stays between two comments kept at one place, or before the first of them unless the
    /// printed text has one there already (or opens a block there, or starts there).
    fn lead(&self, out_text: &str, line: usize) -> &'static str {
        let before = out_text[..line].trim_end_matches([' ', '\t']);
        let opens_or_empty = line == 0
            || before.ends_with("\n\n")
            || before.trim_end().ends_with('{')
            || before.trim().is_empty();
        if self.blank_before && (self.grouped || !opens_or_empty) {
            "\n"
        } else {
            ""
        }
    }
}

impl<'a> Keeping<'a> {
    /// The comments of `original` to put back into `printed`.
    pub(super) fn new(original: &'a Compiled, printed: &'a Compiled) -> Self {
        let text = original.file.text();
        Keeping {
            original,
            text,
            out_text: printed.file.text(),
            from: Layout::of(original),
            to: Layout::of(printed),
            comments: super::find(text),
        }
    }

    /// The insertions putting every comment back, or the first comment that cannot be.
    pub(super) fn inserts(&self) -> Result<Vec<Insert>, Lost> {
        let mut inserts = Vec::new();
        let mut previous_anchor: Option<Anchor> = None;
        for (order, &(start, end)) in self.comments.iter().enumerate() {
            let anchor = self
                .from
                .anchor(start, end)
                .ok_or_else(|| self.lost(start))?;
            let spacing = self.spacing(order, previous_anchor.as_ref() == Some(&anchor));
            previous_anchor = Some(anchor.clone());
            let (at, insert) = self.insert(order, anchor, &spacing)?;
            inserts.push((at, order, insert));
        }
        Ok(inserts)
    }

    /// The comment starting at byte `start` of the document, as lost.
    fn lost(&self, start: usize) -> Lost {
        Lost {
            line: self.original.file.line_of(start) + 1,
        }
    }

    /// The empty line before the comment `order` (on its own line); `same_anchor`: the comment
    /// before it is kept at the same place.
    fn spacing(&self, order: usize, same_anchor: bool) -> Spacing {
        let start = self.comments[order].0;
        let token_before = self
            .from
            .tokens
            .iter()
            .filter(|t| t.kind != TokenKind::Eof)
            .rfind(|t| t.span.end as usize <= start)
            .map_or(0, |t| t.span.end as usize);
        let comment_before = order
            .checked_sub(1)
            .map(|i| self.comments[i].1)
            .filter(|e| *e >= token_before);
        let blank_before = self.text[comment_before.unwrap_or(token_before)..start]
            .matches('\n')
            .count()
            > 1;
        Spacing {
            blank_before,
            grouped: comment_before.is_some() && same_anchor,
        }
    }

    /// Where the comment `order` goes into the printed text, and what is inserted there.
    fn insert(
        &self,
        order: usize,
        anchor: Anchor,
        spacing: &Spacing,
    ) -> Result<(usize, String), Lost> {
        let (start, end) = self.comments[order];
        let comment = &self.text[start..end];
        match anchor {
            Anchor::Top => Ok(self.top(comment, end)),
            Anchor::Bottom => Ok(self.bottom(comment, start)),
            Anchor::Before(key) => self.before(&key, order, spacing),
            Anchor::After(key) => {
                let p = self.to.place(&key).ok_or_else(|| self.lost(start))?;
                self.at_line_end(p.end, comment, start, |rest| matches!(rest, "" | ";"))
            }
            Anchor::BlockStart(key) => {
                let open = self.to.place(&key).and_then(|p| p.open);
                let open = open.ok_or_else(|| self.lost(start))?;
                self.at_line_end(open, comment, start, str::is_empty)
            }
            Anchor::BlockEnd(key) => {
                let close = self.to.place(&key).and_then(|p| p.close);
                let close = close.ok_or_else(|| self.lost(start))?;
                let (line, indent) = self.indent_at(close, start)?;
                let lead = spacing.lead(self.out_text, line);
                Ok((line, format!("{lead}{indent}    {comment}\n")))
            }
        }
    }

    /// At the start, the comment ending at `end`; an empty line after it stays (before what
    /// follows: another comment or the machine).
    fn top(&self, comment: &str, end: usize) -> (usize, String) {
        let rest = &self.text[end..];
        let gap = &rest[..rest.len() - rest.trim_start().len()];
        let blank = if gap.matches('\n').count() > 1 {
            "\n"
        } else {
            ""
        };
        (0, format!("{comment}\n{blank}"))
    }

    /// At the end, the comment starting at `start`; an empty line before it stays (after what
    /// precedes: the machine or a comment).
    fn bottom(&self, comment: &str, start: usize) -> (usize, String) {
        let before = &self.text[..start];
        let gap = &before[before.trim_end().len()..];
        let mut insert = String::new();
        if !self.out_text.is_empty() && !self.out_text.ends_with('\n') {
            insert.push('\n');
        }
        if gap.matches('\n').count() > 1 {
            insert.push('\n');
        }
        insert.push_str(comment);
        insert.push('\n');
        (self.out_text.len(), insert)
    }

    /// On its own line before the statement `key`, the comment `order`; and an empty line between
    /// the last of the comments there and the statement, when the document has one.
    fn before(&self, key: &Key, order: usize, spacing: &Spacing) -> Result<(usize, String), Lost> {
        let (start, end) = self.comments[order];
        let p = self.to.place(key).ok_or_else(|| self.lost(start))?;
        let (line, indent) = self.indent_at(p.start, start)?;
        let token_after = self
            .from
            .tokens
            .iter()
            .find(|t| t.span.start as usize >= end)
            .map_or(self.text.len(), |t| t.span.start as usize);
        let last = self
            .comments
            .get(order + 1)
            .is_none_or(|c| c.0 > token_after);
        let after = if last && self.text[end..token_after].matches('\n').count() > 1 {
            "\n"
        } else {
            ""
        };
        let comment = &self.text[start..end];
        let lead = spacing.lead(self.out_text, line);
        Ok((line, format!("{lead}{indent}{comment}\n{after}")))
    }

    /// At the end of the printed line holding byte `at`, the comment starting at `start`, when
    /// what follows `at` on that line (trimmed) is `fits`.
    fn at_line_end(
        &self,
        at: usize,
        comment: &str,
        start: usize,
        fits: impl Fn(&str) -> bool,
    ) -> Result<(usize, String), Lost> {
        let eol = line_end(self.out_text, at);
        if !fits(self.out_text[at..eol].trim()) {
            return Err(self.lost(start));
        }
        Ok((eol, format!(" {comment}")))
    }

    /// The start of the printed line holding byte `at` and its indentation, when only blanks
    /// precede `at` on it; otherwise the comment starting at `start` is lost.
    fn indent_at(&self, at: usize, start: usize) -> Result<(usize, &'a str), Lost> {
        let line = line_start(self.out_text, at);
        let indent = &self.out_text[line..at];
        if !indent.trim().is_empty() {
            return Err(self.lost(start));
        }
        Ok((line, indent))
    }
}

/// The start of the line holding byte `at`.
fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

/// The end of the line holding byte `at` (at its line break).
fn line_end(text: &str, at: usize) -> usize {
    text[at..].find(['\n', '\r']).map_or(text.len(), |i| at + i)
}
