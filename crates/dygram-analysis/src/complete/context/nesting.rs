//! What is open at a point, as the parser would have it: the blocks (and what each holds, told by
//! what precedes its `{`), and the brackets of lists, annotation arguments and types.

use super::patterns::{annotations_start, is_arrow_end, is_multiplicity, kind_at, qualified_start};
use dygram_syntax::lexer::{Token, TokenKind as T};

/// What an open `{` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Block {
    /// A node's statements.
    Node,
    /// The machine header's attributes.
    Header,
    /// An edge's attributes.
    Edge,
    /// An object value's attributes.
    Object,
    /// The names of an import.
    Import,
}

/// What is open at a point: blocks, and the brackets of lists, annotation arguments and types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Open {
    Brace(Block),
    Paren,
    Bracket,
    Angle,
}

/// What is open after some tokens.
#[derive(Debug)]
pub(super) struct Nesting {
    /// The open blocks and brackets, the innermost last.
    stack: Vec<Open>,
    /// What the last token closed, when it is a `}` closing a block.
    pub(super) closed: Option<Open>,
}

impl Nesting {
    /// What is open after `tokens`.
    pub(super) fn of(tokens: &[Token]) -> Self {
        let mut nesting = Nesting {
            stack: Vec::new(),
            closed: None,
        };
        for (i, t) in tokens.iter().enumerate() {
            nesting.closed = None;
            nesting.step(tokens, i, t.kind);
        }
        nesting
    }

    /// The token `tokens[i]`, of kind `kind`, opens or closes.
    fn step(&mut self, tokens: &[Token], i: usize, kind: T) {
        match kind {
            T::LBrace => {
                self.pop_while(|o| o == Open::Angle);
                let block = brace_kind(tokens, i, self.top());
                self.stack.push(Open::Brace(block));
            }
            T::RBrace => self.close_block(),
            T::LParen => self.stack.push(Open::Paren),
            T::RParen => self.pop_if(Open::Paren),
            T::LBracket => self.stack.push(Open::Bracket),
            T::RBracket => {
                self.pop_while(|o| o == Open::Angle);
                self.pop_if(Open::Bracket);
            }
            T::Lt => self.stack.push(Open::Angle),
            T::Gt => self.pop_if(Open::Angle),
            T::Semi => self.pop_while(|o| matches!(o, Open::Angle | Open::Bracket)),
            _ => {}
        }
    }

    /// A `}`: closes the innermost block and what is open in it.
    fn close_block(&mut self) {
        while let Some(open) = self.stack.pop() {
            if matches!(open, Open::Brace(_)) {
                self.closed = Some(open);
                break;
            }
        }
    }

    fn pop_if(&mut self, open: Open) {
        if self.top() == Some(open) {
            self.stack.pop();
        }
    }

    fn pop_while(&mut self, close: impl Fn(Open) -> bool) {
        while self.top().is_some_and(&close) {
            self.stack.pop();
        }
    }

    /// The innermost open block or bracket.
    pub(super) fn top(&self) -> Option<Open> {
        self.stack.last().copied()
    }

    /// The innermost open block.
    pub(super) fn block(&self) -> Option<Block> {
        self.stack.iter().rev().find_map(|o| match o {
            Open::Brace(b) => Some(*b),
            _ => None,
        })
    }
}

/// What the `{` at `tokens[i]` opens, from what precedes it.
fn brace_kind(tokens: &[Token], i: usize, inside: Option<Open>) -> Block {
    let Some(k) = i.checked_sub(1) else {
        return Block::Node;
    };
    match kind_at(tokens, k) {
        Some(T::Colon) => Block::Object,
        Some(T::KwImport) => Block::Import,
        _ if matches!(inside, Some(Open::Bracket)) => Block::Object,
        _ => after_declaration(tokens, i),
    }
}

/// What the `{` at `tokens[i]` opens after a declaration (a name or an edge's targets, maybe a
/// title, maybe annotations): a node's statements, the header's attributes or an edge's.
fn after_declaration(tokens: &[Token], i: usize) -> Block {
    // Back over annotations, then a title.
    let Some(mut k) = annotations_start(tokens, i).and_then(|end| end.checked_sub(1)) else {
        return Block::Node;
    };
    if kind_at(tokens, k) == Some(T::Str) {
        if k >= 1 && kind_at(tokens, k - 1) == Some(T::KwMachine) {
            return Block::Header;
        }
        if is_multiplicity(tokens, k) {
            return Block::Edge;
        }
        let Some(j) = k.checked_sub(1) else {
            return Block::Node;
        };
        k = j;
    }
    if kind_at(tokens, k) != Some(T::Ident) {
        return Block::Node;
    }
    let first = qualified_start(tokens, k);
    match first.checked_sub(1).and_then(|j| kind_at(tokens, j)) {
        Some(before) if is_arrow_end(before) || before == T::Comma => Block::Edge,
        Some(T::Str) if is_multiplicity(tokens, first - 1) => Block::Edge,
        _ => Block::Node,
    }
}
