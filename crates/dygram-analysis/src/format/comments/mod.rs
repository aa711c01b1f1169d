//! Keeping a document's comments through formatting. The printer writes the machine, not the
//! text, so each comment is tied to what it sits next to in the document and put back next to the
//! same thing in the printed text:
//!
//! * on a line of its own, before a statement (a node, an attribute, an edge statement, the
//!   `machine` header): on its own line before that statement, at its indentation;
//! * at the end of a statement's line: at the end of that statement's line;
//! * after the `{` opening a block, on the same line: after the `{`;
//! * on a line of its own before the `}` closing a block: before the `}`, inside the block;
//! * before everything or after everything: at the start or at the end.
//!
//! What a statement of the document is in the printed text comes from the canonical JSON, which
//! the two texts share (formatting is refused otherwise): a node or an edge record with its
//! `$sourceRange` in both, a node's record found by the node's span in one text and its span in the
//! other at the same place of the JSON; an attribute by its node and its name; an edge statement by
//! its first record, so that a statement the printer merges into another one keeps its comment only
//! when it comes first. A comment anywhere else (inside a statement) or next to a statement the
//! printer writes otherwise is not kept, and formatting is refused ([`Lost`]).
//!
//! [`find`] finds the comments; `layout` tells the statements of each text and where a comment goes;
//! `insert` puts each comment back into the printed text.

mod insert;
mod layout;

use dygram_core::Compiled;
use dygram_syntax::lexer;
use insert::{Insert, Keeping};

/// A comment that could not be kept: its line (from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost {
    /// The line of the document the comment is on (from 1).
    pub line: usize,
}

/// The spans (bytes) of the comments of `text`, in order, as the lexer skips them.
pub fn find(text: &str) -> Vec<(usize, usize)> {
    let (_, _, comments) = lexer::lex_with_comments(text);
    comments
        .into_iter()
        .map(|s| (s.start as usize, s.end as usize))
        .collect()
}

/// `printed` (the formatted text of `original`, which compiles to the same JSON) with the comments
/// of `original` put back, or the first comment that cannot be.
pub fn keep(original: &Compiled, printed: &Compiled) -> Result<String, Lost> {
    let inserts = Keeping::new(original, printed).inserts()?;
    Ok(splice(
        printed.file.text(),
        inserts,
        original.file.text().len() / 4,
    ))
}

/// `text` with `inserts` put in, by place then order; `extra`: about how much they add.
fn splice(text: &str, mut inserts: Vec<Insert>, extra: usize) -> String {
    inserts.sort_by_key(|(at, order, _)| (*at, *order));
    let mut out = String::with_capacity(text.len() + extra);
    let mut done = 0;
    for (at, _, insert) in inserts {
        out.push_str(&text[done..at]);
        out.push_str(&insert);
        done = at;
    }
    out.push_str(&text[done..]);
    out
}
