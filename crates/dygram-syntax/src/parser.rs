//! A hand-written recursive-descent parser with error recovery.
//!
//! Statements are decided by looking ahead: a list of dotted names followed by an arrow (or by a
//! multiplicity string and an arrow) is an edge; a name followed by `:` or `<` is an attribute;
//! anything else that starts with a name or `#` is a node. So `foo;` is a node, `foo: 1;` an
//! attribute and `a b` a node `b` of type `a`.
//!
//! A syntax error is recorded and the parser skips to the end of the statement (after a `;` or
//! before a `}` that closes the enclosing block), so one run reports every error in a file.

use super::ast::*;
use super::lexer::{LexError, Token, TokenKind, lex, unquote};
use crate::source::Span;

/// A syntax error: what was expected and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// The message.
    pub message: String,
    /// Where.
    pub span: Span,
}

/// The result of parsing: the tree (as much as could be read) and every error.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The program.
    pub program: Program,
    /// Lexing and parsing errors, in source order.
    pub errors: Vec<SyntaxError>,
}

/// At most this many errors are reported per file.
const MAX_ERRORS: usize = 100;

/// How deeply blocks, lists, objects and type arguments may nest (counted together). Every later
/// stage walks nested structures recursively, so a limit here keeps them all within their stacks
/// (also on `batch`'s worker threads), and keeps values within what JSON readers accept.
pub const MAX_NESTING: usize = 64;

/// Parses `text`.
pub fn parse(text: &str) -> Parsed {
    let (tokens, lex_errors) = lex(text);
    let mut parser = Parser {
        text,
        tokens,
        pos: 0,
        errors: Vec::new(),
        in_block: 0,
        nesting: 0,
    };
    let program = parser.program();
    let mut errors: Vec<SyntaxError> = lex_errors
        .into_iter()
        .map(|LexError { message, span }| SyntaxError { message, span })
        .chain(parser.errors)
        .collect();
    errors.sort_by_key(|e| (e.span.start, e.span.end));
    errors.truncate(MAX_ERRORS);
    Parsed { program, errors }
}

/// Marker: an error was recorded; the caller recovers.
struct Failed;

type PResult<T> = Result<T, Failed>;

struct Parser<'a> {
    text: &'a str,
    tokens: Vec<Token>,
    pos: usize,
    errors: Vec<SyntaxError>,
    /// How many `{ … }` blocks enclose the current position.
    in_block: usize,
    /// How many blocks, lists, objects and type arguments enclose the current position.
    nesting: usize,
}

use TokenKind as T;

impl<'a> Parser<'a> {
    // ---- token access ------------------------------------------------------------------------

    fn peek(&self) -> TokenKind {
        self.nth(0)
    }

    fn nth(&self, n: usize) -> TokenKind {
        self.tokens.get(self.pos + n).map_or(T::Eof, |t| t.kind)
    }

    fn token(&self) -> Token {
        self.tokens.get(self.pos).copied().unwrap_or(Token {
            kind: T::Eof,
            span: Span::new(self.text.len(), self.text.len()),
        })
    }

    fn at(&self, kind: TokenKind) -> bool {
        self.peek() == kind
    }

    fn bump(&mut self) -> Token {
        let t = self.token();
        if t.kind != T::Eof {
            self.pos += 1;
        }
        t
    }

    fn eat(&mut self, kind: TokenKind) -> Option<Token> {
        self.at(kind).then(|| self.bump())
    }

    fn text_of(&self, t: Token) -> &'a str {
        self.text.get(t.span.range()).unwrap_or("")
    }

    /// End of the last consumed token.
    fn prev_end(&self) -> u32 {
        self.pos
            .checked_sub(1)
            .and_then(|i| self.tokens.get(i))
            .map_or(0, |t| t.span.end)
    }

    fn span_from(&self, start: u32) -> Span {
        Span {
            start,
            end: self.prev_end().max(start),
        }
    }

    fn error_here(&mut self, expected: &str) -> Failed {
        let t = self.token();
        let found = match t.kind {
            T::Eof => "the end of the file".to_string(),
            _ => format!("`{}`", self.text_of(t)),
        };
        self.errors.push(SyntaxError {
            message: format!("expected {expected}, found {found}"),
            span: t.span,
        });
        Failed
    }

    /// Enters one more level of nesting at the current token (an opening `{`, `[` or `<`); past
    /// [`MAX_NESTING`] the error is recorded there, the whole nested part is skipped (without
    /// recursion) and `Failed` returned. [`Parser::leave`] undoes a successful call.
    fn enter(&mut self) -> PResult<()> {
        if self.nesting < MAX_NESTING {
            self.nesting += 1;
            return Ok(());
        }
        let open = self.token();
        self.errors.push(SyntaxError {
            message: format!(
                "nested more than {MAX_NESTING} levels deep (blocks, lists, objects and type arguments count together); flatten this part of the machine"
            ),
            span: open.span,
        });
        let close = match open.kind {
            T::LBrace => T::RBrace,
            T::LBracket => T::RBracket,
            _ => T::Gt,
        };
        let mut depth = 0usize;
        loop {
            let kind = self.peek();
            if kind == T::Eof {
                break;
            }
            self.bump();
            if kind == open.kind {
                depth += 1;
            } else if kind == close {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
        }
        Err(Failed)
    }

    fn leave(&mut self) {
        self.nesting = self.nesting.saturating_sub(1);
    }

    fn expect(&mut self, kind: TokenKind, expected: &str) -> PResult<Token> {
        match self.eat(kind) {
            Some(t) => Ok(t),
            None => Err(self.error_here(expected)),
        }
    }

    /// Skips to the end of the current statement: past a `;` or up to a `}` closing the enclosing
    /// block (balanced brackets are skipped whole). Always moves at least one token unless at `}`.
    fn recover(&mut self) {
        let start = self.pos;
        let mut depth = 0usize;
        loop {
            match self.peek() {
                T::Eof => return,
                T::LBrace | T::LBracket | T::LParen => depth += 1,
                T::RBrace | T::RBracket | T::RParen if depth > 0 => depth -= 1,
                T::RBrace if depth == 0 => {
                    if self.pos == start && self.in_block == 0 {
                        // A stray `}` at the top level: skip it.
                        self.bump();
                    }
                    return;
                }
                T::Semi if depth == 0 => {
                    self.bump();
                    return;
                }
                _ => {}
            }
            self.bump();
        }
    }

    // ---- program -----------------------------------------------------------------------------

    fn program(&mut self) -> Program {
        let mut program = Program::default();
        while self.at(T::KwImport) {
            match self.import() {
                Ok(import) => program.imports.push(import),
                Err(Failed) => self.recover(),
            }
        }
        if self.at(T::KwMachine) {
            match self.header() {
                Ok(header) => program.header = Some(header),
                Err(Failed) => self.recover(),
            }
        }
        program.items = self.items(false);
        program
    }

    fn import(&mut self) -> PResult<Import> {
        let start = self.bump().span.start;
        self.expect(T::LBrace, "`{` and the names to import")?;
        let mut symbols = vec![self.import_symbol()?];
        while self.eat(T::Comma).is_some() {
            symbols.push(self.import_symbol()?);
        }
        self.expect(T::RBrace, "`,` or `}`")?;
        self.expect(T::KwFrom, "`from`")?;
        let path = self.string("the path of the file to import, in quotes")?;
        self.eat(T::Semi);
        Ok(Import {
            symbols,
            path,
            span: self.span_from(start),
        })
    }

    fn import_symbol(&mut self) -> PResult<ImportSymbol> {
        let name = self.qname("a name to import")?;
        let alias = match self.eat(T::KwAs) {
            Some(_) => Some(self.ident("an alias after `as`")?),
            None => None,
        };
        Ok(ImportSymbol {
            span: self.span_from(name.span.start),
            name,
            alias,
        })
    }

    fn header(&mut self) -> PResult<Header> {
        let start = self.bump().span.start;
        let title = self.string("the machine's title, in quotes")?;
        let annotations = self.annotations(false)?;
        let mut attributes = Vec::new();
        if self.eat(T::LBrace).is_some() {
            attributes = self.attribute_block()?;
            self.eat(T::Semi);
        } else {
            self.eat(T::Semi);
        }
        Ok(Header {
            title,
            annotations,
            attributes,
            span: self.span_from(start),
        })
    }

    /// Statements until `}` (inside a block) or the end of the file.
    fn items(&mut self, in_block: bool) -> Vec<Item> {
        let mut items = Vec::new();
        loop {
            match self.peek() {
                T::Eof => break,
                T::RBrace if in_block => break,
                _ => {}
            }
            if self.errors.len() >= MAX_ERRORS {
                while !self.at(T::Eof) {
                    self.bump();
                }
                break;
            }
            let before = self.pos;
            match self.item() {
                Ok(item) => items.push(item),
                Err(Failed) => {
                    self.recover();
                    if self.pos == before && !(in_block && self.at(T::RBrace)) {
                        self.bump();
                    }
                }
            }
        }
        items
    }

    fn item(&mut self) -> PResult<Item> {
        if self.looks_like_edge() {
            return self.edge().map(Item::Edge);
        }
        match (self.peek(), self.nth(1)) {
            (T::Ident, T::Colon | T::Lt) => self.attribute().map(Item::Attribute),
            (T::Ident | T::Hash, _) => self.node().map(Item::Node),
            (T::KwMachine, _) => {
                let t = self.token();
                self.errors.push(SyntaxError {
                    message: "a file has at most one `machine` header, before everything else"
                        .into(),
                    span: t.span,
                });
                Err(Failed)
            }
            (T::KwImport, _) => {
                let t = self.token();
                self.errors.push(SyntaxError {
                    message: "imports must come first in the file, before the `machine` header"
                        .into(),
                    span: t.span,
                });
                Err(Failed)
            }
            _ => Err(self.error_here("a node, an edge or an attribute")),
        }
    }

    /// `name(.name)* (, name(.name)*)*` followed by an arrow, or by a string and an arrow; or an
    /// arrow (or string and arrow) right away.
    fn looks_like_edge(&self) -> bool {
        let arrow_at = |i: usize| {
            self.nth(i).is_arrow_start()
                || (self.nth(i) == T::Str && self.nth(i + 1).is_arrow_start())
        };
        if arrow_at(0) {
            return true;
        }
        let mut i = 0;
        loop {
            if self.nth(i) != T::Ident {
                return false;
            }
            i += 1;
            while self.nth(i) == T::Dot && self.nth(i + 1) == T::Ident {
                i += 2;
            }
            if self.nth(i) == T::Comma {
                i += 1;
                continue;
            }
            return arrow_at(i);
        }
    }

    // ---- nodes and attributes ------------------------------------------------------------------

    fn node(&mut self) -> PResult<Node> {
        let start = self.token().span.start;
        let kind = if self.at(T::Ident) && matches!(self.nth(1), T::Ident | T::Hash) {
            Some(self.ident("a type")?)
        } else {
            None
        };
        self.eat(T::Hash);
        let name = self.qname("a node name")?;
        let title = match self.peek() {
            T::Str => Some(self.string("a title")?),
            _ => None,
        };
        let annotations = self.annotations(false)?;
        let mut items = Vec::new();
        let mut has_block = false;
        if self.at(T::LBrace) {
            self.enter()?;
            self.bump();
            has_block = true;
            self.in_block += 1;
            items = self.items(true);
            self.in_block -= 1;
            self.leave();
            self.expect(T::RBrace, "`}` to close the node's block")?;
            self.eat(T::Semi);
        } else {
            self.eat(T::Semi);
        }
        Ok(Node {
            kind,
            name,
            title,
            annotations,
            items,
            has_block,
            span: self.span_from(start),
        })
    }

    /// Attributes until `}` (which is consumed).
    fn attribute_block(&mut self) -> PResult<Vec<Attribute>> {
        let mut attributes = Vec::new();
        loop {
            match self.peek() {
                T::RBrace => {
                    self.bump();
                    return Ok(attributes);
                }
                T::Ident => match self.attribute() {
                    Ok(a) => attributes.push(a),
                    Err(Failed) => {
                        self.recover_in_attributes();
                    }
                },
                T::Eof => return Err(self.error_here("`}`")),
                _ => {
                    self.error_here("an attribute (`name: value;`) or `}`");
                    self.recover_in_attributes();
                }
            }
        }
    }

    fn recover_in_attributes(&mut self) {
        let before = self.pos;
        self.in_block += 1;
        self.recover();
        self.in_block -= 1;
        if self.pos == before && !self.at(T::RBrace) {
            self.bump();
        }
    }

    fn attribute(&mut self) -> PResult<Attribute> {
        let name = self.ident("an attribute name")?;
        let start = name.span.start;
        let ty = if self.eat(T::Lt).is_some() {
            let ty = self.type_def()?;
            self.expect(T::Gt, "`>` to close the type")?;
            Some(ty)
        } else {
            None
        };
        let mut value = None;
        if self.eat(T::Colon).is_some() {
            value = Some(self.value()?);
            self.eat(T::Semi);
        } else {
            self.eat(T::Semi);
        }
        Ok(Attribute {
            name,
            ty,
            value,
            span: self.span_from(start),
        })
    }

    fn type_def(&mut self) -> PResult<TypeDef> {
        let start = self.token().span.start;
        if self.at(T::Str) {
            let mut literals = vec![self.string("a string")?];
            self.expect(T::Pipe, "`|` between the allowed strings")?;
            literals.push(self.string("a string after `|`")?);
            while self.eat(T::Pipe).is_some() {
                literals.push(self.string("a string after `|`")?);
            }
            return Ok(TypeDef::Union {
                literals,
                span: self.span_from(start),
            });
        }
        let name = self.qname("a type name")?;
        let mut generics = Vec::new();
        if self.at(T::Lt) {
            self.enter()?;
            self.bump();
            let args = self.type_arguments(&mut generics);
            self.leave();
            args?;
        }
        let optional = self.eat(T::Question).is_some();
        Ok(TypeDef::Named {
            name,
            generics,
            optional,
            span: self.span_from(start),
        })
    }

    /// `T, U, …>` after the `<` of a generic type.
    fn type_arguments(&mut self, generics: &mut Vec<TypeDef>) -> PResult<()> {
        generics.push(self.type_def()?);
        while self.eat(T::Comma).is_some() {
            generics.push(self.type_def()?);
        }
        self.expect(T::Gt, "`,` or `>` to close the type arguments")?;
        Ok(())
    }

    fn value(&mut self) -> PResult<Value> {
        let start = self.token().span.start;
        match self.peek() {
            T::LBrace | T::LBracket => {
                self.enter()?;
                let value = self.nested_value(start);
                self.leave();
                value
            }
            _ => self.primitive("a value").map(Value::Primitive),
        }
    }

    /// An object or list value (the current token opens it).
    fn nested_value(&mut self, start: u32) -> PResult<Value> {
        if self.eat(T::LBrace).is_some() {
            let attributes = self.attribute_block()?;
            return Ok(Value::Object(attributes, self.span_from(start)));
        }
        self.bump();
        let mut values = Vec::new();
        if !self.at(T::RBracket) {
            values.push(self.value()?);
            while self.eat(T::Comma).is_some() {
                values.push(self.value()?);
            }
        }
        self.expect(T::RBracket, "`,` or `]`")?;
        Ok(Value::Array(values, self.span_from(start)))
    }

    fn primitive(&mut self, expected: &str) -> PResult<Primitive> {
        let t = self.token();
        let text = self.text_of(t).to_string();
        let p = match t.kind {
            T::ExtId => Primitive::ExtId(text, t.span),
            T::Str => Primitive::Str(StrLit {
                value: unquote(&text),
                raw: text,
                span: t.span,
            }),
            T::Ident => Primitive::Ident(text, t.span),
            T::Number => Primitive::Number(text, t.span),
            T::Dash => {
                self.errors.push(SyntaxError {
                    message: format!(
                        "expected {expected}, found `-`: numbers cannot be negative here (write the value in quotes)"
                    ),
                    span: t.span,
                });
                return Err(Failed);
            }
            _ => return Err(self.error_here(expected)),
        };
        self.bump();
        Ok(p)
    }

    // ---- annotations ---------------------------------------------------------------------------

    fn annotations(&mut self, edge: bool) -> PResult<Vec<Annotation>> {
        let mut annotations = Vec::new();
        while self.at(T::At) {
            annotations.push(self.annotation(edge)?);
        }
        Ok(annotations)
    }

    fn annotation(&mut self, edge: bool) -> PResult<Annotation> {
        let start = self.bump().span.start;
        let name = self.ident("an annotation name after `@`")?;
        let mut arg = None;
        if self.eat(T::LParen).is_some() {
            let is_params = self.at(T::Ident) && matches!(self.nth(1), T::Colon | T::Semi);
            arg = Some(if is_params {
                AnnotationArg::Params(self.annotation_params()?)
            } else if edge {
                match self.peek() {
                    T::Str => AnnotationArg::Value(self.primitive("a string")?),
                    T::Ident => AnnotationArg::QName(self.qname("a name")?),
                    _ => {
                        return Err(self.error_here(
                            "a string, a name or `key: value` parameters (edge annotations take no bare numbers)",
                        ));
                    }
                }
            } else {
                AnnotationArg::Value(self.primitive("a value or `key: value` parameters")?)
            });
            self.expect(T::RParen, "`)` to close the annotation")?;
        }
        Ok(Annotation {
            name,
            arg,
            span: self.span_from(start),
        })
    }

    fn annotation_params(&mut self) -> PResult<Vec<AnnotationParam>> {
        let mut params = vec![self.annotation_param()?];
        while self.eat(T::Semi).is_some() {
            if self.at(T::RParen) {
                break;
            }
            params.push(self.annotation_param()?);
        }
        Ok(params)
    }

    fn annotation_param(&mut self) -> PResult<AnnotationParam> {
        let name = self.ident("a parameter name")?;
        let value = match self.eat(T::Colon) {
            Some(_) => Some(self.primitive("a value (one word, number or string)")?),
            None => None,
        };
        Ok(AnnotationParam {
            span: self.span_from(name.span.start),
            name,
            value,
        })
    }

    // ---- edges ---------------------------------------------------------------------------------

    fn edge(&mut self) -> PResult<Edge> {
        let start = self.token().span.start;
        let mut sources = Vec::new();
        if self.at(T::Ident) {
            sources.push(self.qname("a node name")?);
            while self.eat(T::Comma).is_some() {
                sources.push(self.qname("a node name after `,`")?);
            }
        }
        let mut segments = vec![self.segment()?];
        while self.peek().is_arrow_start() || (self.at(T::Str) && self.nth(1).is_arrow_start()) {
            segments.push(self.segment()?);
        }
        let mut attributes = Vec::new();
        if self.eat(T::LBrace).is_some() {
            attributes = self.attribute_block()?;
        }
        self.eat(T::Semi);
        Ok(Edge {
            sources,
            segments,
            attributes,
            span: self.span_from(start),
        })
    }

    fn segment(&mut self) -> PResult<Segment> {
        let start = self.token().span.start;
        let source_multiplicity = match self.peek() {
            T::Str => Some(self.string("a multiplicity")?),
            _ => None,
        };
        let arrow_start = self.token();
        let (kind, end_kind) = match arrow_start.kind {
            T::BiArrow => (ArrowKind::Bidirectional, None),
            T::BiLabeled => (ArrowKind::BidirectionalLabeled, None),
            T::InheritArrow => (ArrowKind::Inherit, None),
            T::ComposeArrow => (ArrowKind::Compose, None),
            T::AggregateArrow => (ArrowKind::Aggregate, None),
            T::DoubleArrow => (ArrowKind::Double, None),
            T::FatArrow => (ArrowKind::Fat, None),
            T::Arrow => (ArrowKind::Single, None),
            T::DoubleStart => (ArrowKind::Double, Some(T::DoubleArrow)),
            T::FatStart => (ArrowKind::Fat, Some(T::FatArrow)),
            T::Dash => (ArrowKind::Single, Some(T::Arrow)),
            _ => return Err(self.error_here("an arrow")),
        };
        self.bump();
        let mut labels = Vec::new();
        let end_token = match end_kind {
            None => arrow_start,
            Some(end) => {
                if !self.at(end) {
                    labels.push(self.label_group(end)?);
                    while self.eat(T::Comma).is_some() {
                        labels.push(self.label_group(end)?);
                    }
                }
                self.expect(end, &format!("{} to end the arrow's label", end.describe()))?
            }
        };
        let arrow = Arrow {
            kind,
            text: self.text_of(end_token).to_string(),
            span: arrow_start.span.to(end_token.span),
        };
        let target_multiplicity = match self.peek() {
            T::Str => Some(self.string("a multiplicity")?),
            _ => None,
        };
        let mut targets = vec![self.qname("the edge's target node")?];
        while self.eat(T::Comma).is_some() {
            targets.push(self.qname("a node name after `,`")?);
        }
        Ok(Segment {
            source_multiplicity,
            arrow,
            labels,
            target_multiplicity,
            targets,
            span: self.span_from(start),
        })
    }

    /// One comma-separated group of label items (at least one).
    fn label_group(&mut self, end: TokenKind) -> PResult<Vec<LabelItem>> {
        let mut items = Vec::new();
        loop {
            let t = self.token();
            match (t.kind, self.nth(1)) {
                (k, _) if k == end || k == T::Comma => {
                    if items.is_empty() {
                        return Err(self.error_here("a label"));
                    }
                    return Ok(items);
                }
                (T::At, _) => items.push(LabelItem::Annotation(self.annotation(true)?)),
                (T::Ident, T::Colon) => {
                    let name = self.ident("a name")?;
                    self.bump();
                    let value = self.primitive("a value (one word, number or quoted string)")?;
                    self.eat(T::Semi);
                    items.push(LabelItem::Pair {
                        span: self.span_from(name.span.start),
                        name,
                        value,
                    });
                }
                (T::Ident, T::Semi) => {
                    let name = self.ident("a name")?;
                    self.bump();
                    items.push(LabelItem::Flag {
                        span: self.span_from(name.span.start),
                        name,
                    });
                }
                (k, _) if k.is_primitive() => {
                    items.push(LabelItem::Text(self.primitive("a label")?));
                }
                _ => {
                    return Err(self.error_here(&format!(
                        "a label item or {} to end the arrow",
                        end.describe()
                    )));
                }
            }
        }
    }

    // ---- small pieces --------------------------------------------------------------------------

    fn ident(&mut self, expected: &str) -> PResult<Ident> {
        let t = self.expect(T::Ident, expected)?;
        Ok(Ident {
            text: self.text_of(t).to_string(),
            span: t.span,
        })
    }

    fn qname(&mut self, expected: &str) -> PResult<QName> {
        let first = self.ident(expected)?;
        let start = first.span.start;
        let mut parts = vec![first];
        while self.at(T::Dot) && self.nth(1) == T::Ident {
            self.bump();
            parts.push(self.ident("a name after `.`")?);
        }
        Ok(QName {
            parts,
            span: self.span_from(start),
        })
    }

    fn string(&mut self, expected: &str) -> PResult<StrLit> {
        let t = self.expect(T::Str, expected)?;
        let raw = self.text_of(t).to_string();
        Ok(StrLit {
            value: unquote(&raw),
            raw,
            span: t.span,
        })
    }
}
