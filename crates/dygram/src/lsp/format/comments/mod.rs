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

use std::collections::HashMap;

use serde_json::Value as Json;

use crate::Compiled;
use crate::json::JsonOptions;
use crate::source::{SourceFile, Span};
use crate::syntax::ast::{self, Item};
use crate::syntax::lexer::{self, Token, TokenKind};

/// A comment that could not be kept: its line (from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost {
    /// The line of the document the comment is on (from 1).
    pub line: usize,
}

/// The spans (bytes) of the comments of `text`, in order: what lies between its tokens other than
/// white space.
pub fn find(text: &str) -> Vec<(usize, usize)> {
    let (tokens, _) = lexer::lex(text);
    let mut out = Vec::new();
    let mut at = 0;
    for token in &tokens {
        let start = (token.span.start as usize).clamp(at, text.len());
        in_gap(text, at, start, &mut out);
        at = at.max(token.span.end as usize).min(text.len());
    }
    in_gap(text, at, text.len(), &mut out);
    out
}

/// The comments in `text[from..to]`, a stretch with no token.
fn in_gap(text: &str, from: usize, to: usize, out: &mut Vec<(usize, usize)>) {
    let bytes = text.as_bytes();
    let mut i = from;
    while i < to {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let end = if text[i..to].starts_with("/*") {
            text[i + 2..to].find("*/").map_or(to, |e| i + 2 + e + 2)
        } else {
            // `//` to the line's end (or whatever else is there, to the line's end).
            text[i..to].find(['\n', '\r']).map_or(to, |e| i + e)
        };
        out.push((i, end));
        i = end;
    }
}

/// What a comment is kept next to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    /// The `machine` header.
    Header,
    /// A node, by the JSON path of its record (`/nodes/3`).
    Node(String),
    /// An attribute: the JSON path of its node's record (none: the machine's) and its name.
    Attribute(Option<String>, String),
    /// An edge statement, by the JSON path of its first record (`/edges/2`).
    Edge(String),
}

/// Where a comment goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Anchor {
    Top,
    Bottom,
    Before(Key),
    After(Key),
    BlockStart(Key),
    BlockEnd(Key),
}

/// A statement of a text: what it is (when it can be told) and where (bytes).
#[derive(Debug, Clone)]
struct Place {
    key: Option<Key>,
    start: usize,
    end: usize,
    /// Just after its block's `{`, when it has a block.
    open: Option<usize>,
    /// At its block's `}`, when it has a block.
    close: Option<usize>,
}

/// `(start line, start character, end line, end character)`: how the JSON's `$sourceRange` and a
/// span are compared.
type Lines = (u64, u64, u64, u64);

fn lines(file: &SourceFile, span: Span) -> Lines {
    let (a, b) = (
        file.position(span.start as usize),
        file.position(span.end as usize),
    );
    (
        u64::from(a.line),
        u64::from(a.character),
        u64::from(b.line),
        u64::from(b.character),
    )
}

/// Every `$sourceRange` of `json` with the path of its object, in order.
fn ranges(json: &Json, path: &str, out: &mut Vec<(String, Lines)>) {
    match json {
        Json::Object(map) => {
            if let Some(r) = map.get("$sourceRange") {
                let n = |a: &str, b: &str| r[a][b].as_u64();
                if let (Some(a), Some(b), Some(c), Some(d)) = (
                    n("start", "line"),
                    n("start", "character"),
                    n("end", "line"),
                    n("end", "character"),
                ) {
                    out.push((path.to_string(), (a, b, c, d)));
                }
            }
            for (key, value) in map {
                if key != "$sourceRange" {
                    ranges(value, &format!("{path}/{key}"), out);
                }
            }
        }
        Json::Array(items) => {
            for (i, value) in items.iter().enumerate() {
                ranges(value, &format!("{path}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// The statements of a compiled text, each with what it is.
struct Layout<'a> {
    compiled: &'a Compiled,
    tokens: Vec<Token>,
    /// JSON paths by source range, in the JSON's order.
    paths: HashMap<Lines, Vec<String>>,
    places: Vec<Place>,
}

impl<'a> Layout<'a> {
    fn of(compiled: &'a Compiled) -> Self {
        let json = compiled.json(JsonOptions {
            source_ranges: true,
        });
        let mut found = Vec::new();
        ranges(&json, "", &mut found);
        let mut paths: HashMap<Lines, Vec<String>> = HashMap::new();
        for (path, at) in found {
            paths.entry(at).or_default().push(path);
        }
        let (tokens, _) = lexer::lex(compiled.file.text());
        let mut layout = Self {
            compiled,
            tokens,
            paths,
            places: Vec::new(),
        };
        let program = &compiled.program;
        if let Some(header) = &program.header {
            let after = header
                .annotations
                .iter()
                .map(|a| a.span.end)
                .fold(header.title.span.end, u32::max);
            let (open, close) = layout.block(after, header.span);
            layout.places.push(Place {
                key: Some(Key::Header),
                start: header.span.start as usize,
                end: header.span.end as usize,
                open,
                close,
            });
            for a in &header.attributes {
                layout.attribute(None, a);
            }
        }
        layout.items(&program.items, None, true);
        layout
    }

    /// The first JSON path at the range of `span` under `prefix`.
    fn path(&self, span: Span, prefix: &str) -> Option<String> {
        let at = lines(&self.compiled.file, span);
        self.paths
            .get(&at)?
            .iter()
            .find(|p| p.starts_with(prefix))
            .cloned()
    }

    /// The `{` and `}` of a block starting after byte `after` within `span`: just after the `{`,
    /// and at the `}`.
    fn block(&self, after: u32, span: Span) -> (Option<usize>, Option<usize>) {
        let inside = |t: &&Token| t.span.start >= after && t.span.end <= span.end;
        let Some(open) = self
            .tokens
            .iter()
            .filter(inside)
            .find(|t| t.kind == TokenKind::LBrace)
        else {
            return (None, None);
        };
        let close = self
            .tokens
            .iter()
            .filter(inside)
            .rfind(|t| t.kind == TokenKind::RBrace && t.span.start >= open.span.end);
        (
            Some(open.span.end as usize),
            close.map(|t| t.span.start as usize),
        )
    }

    fn attribute(&mut self, owner: Option<&Option<String>>, a: &ast::Attribute) {
        // `owner`: `None` for the machine's; `Some(None)` for a node that cannot be told.
        let key = match owner {
            None => Some(Key::Attribute(None, a.name.text.clone())),
            Some(Some(node)) => Some(Key::Attribute(Some(node.clone()), a.name.text.clone())),
            Some(None) => None,
        };
        self.places.push(Place {
            key,
            start: a.span.start as usize,
            end: a.span.end as usize,
            open: None,
            close: None,
        });
    }

    fn items(&mut self, items: &[Item], owner: Option<&Option<String>>, top: bool) {
        for item in items {
            match item {
                Item::Node(n) => {
                    let path = self.path(n.span, "/nodes/");
                    let after = n
                        .annotations
                        .iter()
                        .map(|a| a.span.end)
                        .chain(n.title.as_ref().map(|t| t.span.end))
                        .fold(n.name.span.end, u32::max);
                    let (open, close) = if n.has_block {
                        self.block(after, n.span)
                    } else {
                        (None, None)
                    };
                    self.places.push(Place {
                        key: path.clone().map(Key::Node),
                        start: n.span.start as usize,
                        end: n.span.end as usize,
                        open,
                        close,
                    });
                    self.items(&n.items, Some(&path), false);
                }
                Item::Attribute(a) => self.attribute(if top { None } else { owner }, a),
                Item::Edge(e) => {
                    let key = e
                        .segments
                        .first()
                        .and_then(|s| self.path(s.span, "/edges/"))
                        .map(Key::Edge);
                    self.places.push(Place {
                        key,
                        start: e.span.start as usize,
                        end: e.span.end as usize,
                        open: None,
                        close: None,
                    });
                }
            }
        }
    }

    /// Where the comment at `start..end` of the document goes, if it can be told.
    fn anchor(&self, start: usize, end: usize) -> Option<Anchor> {
        let text = self.compiled.file.text();
        let real = |t: &&Token| t.kind != TokenKind::Eof;
        let previous = self
            .tokens
            .iter()
            .filter(real)
            .rfind(|t| t.span.end as usize <= start);
        let next = self
            .tokens
            .iter()
            .filter(real)
            .find(|t| t.span.start as usize >= end);
        let Some(previous) = previous else {
            return Some(Anchor::Top);
        };
        let same_line = !text[previous.span.end as usize..start].contains(['\n', '\r']);
        if same_line {
            let ends = |at: usize| self.places.iter().find(|p| p.end == at);
            let mut place = ends(previous.span.end as usize);
            if place.is_none() && previous.kind == TokenKind::Semi {
                // `…; // comment` where the statement ends before its `;`.
                let before = self
                    .tokens
                    .iter()
                    .rfind(|t| t.span.end <= previous.span.start);
                place = before.and_then(|t| ends(t.span.end as usize));
            }
            if let Some(p) = place {
                return p.key.clone().map(Anchor::After);
            }
            let opened = self
                .places
                .iter()
                .find(|p| p.open == Some(previous.span.end as usize));
            return opened.and_then(|p| p.key.clone().map(Anchor::BlockStart));
        }
        let Some(next) = next else {
            return Some(Anchor::Bottom);
        };
        let at = next.span.start as usize;
        if let Some(p) = self.places.iter().find(|p| p.start == at) {
            return p.key.clone().map(Anchor::Before);
        }
        let closed = self.places.iter().find(|p| p.close == Some(at));
        closed.and_then(|p| p.key.clone().map(Anchor::BlockEnd))
    }

    fn place(&self, key: &Key) -> Option<&Place> {
        self.places.iter().find(|p| p.key.as_ref() == Some(key))
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

/// `printed` (the formatted text of `original`, which compiles to the same JSON) with the comments
/// of `original` put back, or the first comment that cannot be.
pub fn keep(original: &Compiled, printed: &Compiled) -> Result<String, Lost> {
    let text = original.file.text();
    let out_text = printed.file.text();
    let from = Layout::of(original);
    let to = Layout::of(printed);
    let comments = find(text);
    // (where, in which order, what), put in by `where` then order.
    let mut inserts: Vec<(usize, usize, String)> = Vec::new();
    let lost = |start: usize| Lost {
        line: original.file.line_of(start) + 1,
    };
    let mut previous_anchor: Option<Anchor> = None;
    for (order, &(start, end)) in comments.iter().enumerate() {
        let comment = &text[start..end];
        let anchor = from.anchor(start, end).ok_or_else(|| lost(start))?;
        // An empty line before a comment on its own line stays: between two comments kept at one
        // place, or before the first of them unless the formatted text has one there already.
        let token_before = from
            .tokens
            .iter()
            .filter(|t| t.kind != TokenKind::Eof)
            .rfind(|t| t.span.end as usize <= start)
            .map_or(0, |t| t.span.end as usize);
        let comment_before = order
            .checked_sub(1)
            .map(|i| comments[i].1)
            .filter(|e| *e >= token_before);
        let blank_before = text[comment_before.unwrap_or(token_before)..start]
            .matches('\n')
            .count()
            > 1;
        let grouped = comment_before.is_some() && previous_anchor.as_ref() == Some(&anchor);
        let blank = |line: usize| {
            let before = out_text[..line].trim_end_matches([' ', '\t']);
            let opens_or_empty = line == 0
                || before.ends_with("\n\n")
                || before.trim_end().ends_with('{')
                || before.trim().is_empty();
            if blank_before && (grouped || !opens_or_empty) {
                "\n"
            } else {
                ""
            }
        };
        previous_anchor = Some(anchor.clone());
        let (at, insert) = match anchor {
            Anchor::Top => {
                // An empty line after it stays (before what follows: another comment or the
                // machine).
                let rest = &text[end..];
                let gap = &rest[..rest.len() - rest.trim_start().len()];
                let blank = if gap.matches('\n').count() > 1 {
                    "\n"
                } else {
                    ""
                };
                (0, format!("{comment}\n{blank}"))
            }
            Anchor::Bottom => {
                // An empty line before it stays (after what precedes: the machine or a comment).
                let before = &text[..start];
                let gap = &before[before.trim_end().len()..];
                let mut insert = String::new();
                if !out_text.is_empty() && !out_text.ends_with('\n') {
                    insert.push('\n');
                }
                if gap.matches('\n').count() > 1 {
                    insert.push('\n');
                }
                insert.push_str(comment);
                insert.push('\n');
                (out_text.len(), insert)
            }
            Anchor::Before(key) => {
                let p = to.place(&key).ok_or_else(|| lost(start))?;
                let line = line_start(out_text, p.start);
                let indent = &out_text[line..p.start];
                if !indent.trim().is_empty() {
                    return Err(lost(start));
                }
                // And an empty line between the last of them and the statement.
                let token_after = from
                    .tokens
                    .iter()
                    .find(|t| t.span.start as usize >= end)
                    .map_or(text.len(), |t| t.span.start as usize);
                let last = comments.get(order + 1).is_none_or(|c| c.0 > token_after);
                let after = if last && text[end..token_after].matches('\n').count() > 1 {
                    "\n"
                } else {
                    ""
                };
                (line, format!("{}{indent}{comment}\n{after}", blank(line)))
            }
            Anchor::After(key) => {
                let p = to.place(&key).ok_or_else(|| lost(start))?;
                let eol = line_end(out_text, p.end);
                if !matches!(out_text[p.end..eol].trim(), "" | ";") {
                    return Err(lost(start));
                }
                (eol, format!(" {comment}"))
            }
            Anchor::BlockStart(key) => {
                let open = to
                    .place(&key)
                    .and_then(|p| p.open)
                    .ok_or_else(|| lost(start))?;
                let eol = line_end(out_text, open);
                if !out_text[open..eol].trim().is_empty() {
                    return Err(lost(start));
                }
                (eol, format!(" {comment}"))
            }
            Anchor::BlockEnd(key) => {
                let close = to
                    .place(&key)
                    .and_then(|p| p.close)
                    .ok_or_else(|| lost(start))?;
                let line = line_start(out_text, close);
                let indent = &out_text[line..close];
                if !indent.trim().is_empty() {
                    return Err(lost(start));
                }
                (line, format!("{}{indent}    {comment}\n", blank(line)))
            }
        };
        inserts.push((at, order, insert));
    }
    inserts.sort_by_key(|(at, order, _)| (*at, *order));
    let mut out = String::with_capacity(out_text.len() + text.len() / 4);
    let mut done = 0;
    for (at, _, insert) in inserts {
        out.push_str(&out_text[done..at]);
        out.push_str(&insert);
        done = at;
    }
    out.push_str(&out_text[done..]);
    Ok(out)
}
