//! The statements of a compiled text, each told by what it is in the canonical JSON (which the
//! document and the printed text share), and where a comment of the document goes ([`Anchor`]):
//! next to which statement, or at the start or the end.

use std::collections::HashMap;

use serde_json::Value as Json;

use dygram_core::Compiled;
use dygram_core::json::JsonOptions;
use dygram_syntax::ast::{self, Item};
use dygram_syntax::lexer::{self, Token, TokenKind};
use dygram_syntax::source::{SourceFile, Span};

/// What a comment is kept next to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Key {
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
pub(super) enum Anchor {
    /// At the start of the text.
    Top,
    /// At the end of the text.
    Bottom,
    /// On its own line before a statement.
    Before(Key),
    /// At the end of a statement's line.
    After(Key),
    /// After the `{` opening a statement's block.
    BlockStart(Key),
    /// On its own line before the `}` closing a statement's block.
    BlockEnd(Key),
}

/// A statement of a text: what it is (when it can be told) and where (bytes).
#[derive(Debug, Clone)]
pub(super) struct Place {
    key: Option<Key>,
    /// Where it starts.
    pub(super) start: usize,
    /// Where it ends.
    pub(super) end: usize,
    /// Just after its block's `{`, when it has a block.
    pub(super) open: Option<usize>,
    /// At its block's `}`, when it has a block.
    pub(super) close: Option<usize>,
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
pub(super) struct Layout<'a> {
    compiled: &'a Compiled,
    /// The tokens of the text.
    pub(super) tokens: Vec<Token>,
    /// JSON paths by source range, in the JSON's order.
    paths: HashMap<Lines, Vec<String>>,
    places: Vec<Place>,
}

impl<'a> Layout<'a> {
    /// The statements of `compiled`.
    pub(super) fn of(compiled: &'a Compiled) -> Self {
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
            layout.header(header);
        }
        layout.items(&program.items, None, true);
        layout
    }

    /// The `machine` header and its attributes.
    fn header(&mut self, header: &ast::Header) {
        let after = header
            .annotations
            .iter()
            .map(|a| a.span.end)
            .fold(header.title.span.end, u32::max);
        let (open, close) = self.block(after, header.span);
        self.places.push(Place {
            key: Some(Key::Header),
            start: header.span.start as usize,
            end: header.span.end as usize,
            open,
            close,
        });
        for a in &header.attributes {
            self.attribute(None, a);
        }
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
                Item::Node(n) => self.node(n),
                Item::Attribute(a) => self.attribute(if top { None } else { owner }, a),
                Item::Edge(e) => self.edge(e),
            }
        }
    }

    /// A node, then what its block holds.
    fn node(&mut self, n: &ast::Node) {
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

    /// An edge statement, told by its first record.
    fn edge(&mut self, e: &ast::Edge) {
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

    /// Where the comment at `start..end` of the document goes, if it can be told.
    pub(super) fn anchor(&self, start: usize, end: usize) -> Option<Anchor> {
        let text = self.compiled.file.text();
        let real = |t: &&Token| t.kind != TokenKind::Eof;
        let Some(previous) = self
            .tokens
            .iter()
            .filter(real)
            .rfind(|t| t.span.end as usize <= start)
        else {
            return Some(Anchor::Top);
        };
        if !text[previous.span.end as usize..start].contains(['\n', '\r']) {
            return self.on_line_of(previous);
        }
        match self
            .tokens
            .iter()
            .filter(real)
            .find(|t| t.span.start as usize >= end)
        {
            Some(next) => self.on_line_before(next),
            None => Some(Anchor::Bottom),
        }
    }

    /// Where a comment goes on the line of the token `previous`: after the statement it ends, or
    /// after the `{` it is.
    fn on_line_of(&self, previous: &Token) -> Option<Anchor> {
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
        opened.and_then(|p| p.key.clone().map(Anchor::BlockStart))
    }

    /// Where a comment on its own line goes, the token `next` after it: before the statement it
    /// starts, or before the `}` it is.
    fn on_line_before(&self, next: &Token) -> Option<Anchor> {
        let at = next.span.start as usize;
        if let Some(p) = self.places.iter().find(|p| p.start == at) {
            return p.key.clone().map(Anchor::Before);
        }
        let closed = self.places.iter().find(|p| p.close == Some(at));
        closed.and_then(|p| p.key.clone().map(Anchor::BlockEnd))
    }

    /// The statement `key` is.
    pub(super) fn place(&self, key: &Key) -> Option<&Place> {
        self.places.iter().find(|p| p.key.as_ref() == Some(key))
    }
}
