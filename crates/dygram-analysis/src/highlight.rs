//! Highlighting: every token of the lexer, and every comment, classified by what the tree makes
//! of it: keywords, node types (`type`), node names (`class`; with `declaration` where declared),
//! attribute names (`property`), annotations (`decorator`), strings, numbers, comments and arrows
//! (`operator`). Where the tree has nothing (a statement too broken to read), the tokens around a
//! name decide. The language server sends them as semantic tokens; the playground colours with
//! them.

use std::collections::HashMap;

use crate::complete::{ATTRIBUTE_TYPES, NODE_TYPES};
use dygram_syntax::ast;
use dygram_syntax::lexer::{Token, TokenKind as T, lex_with_comments};
use dygram_syntax::source::Span;

/// The token types, in the legend's order (a token's type is its index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Kind {
    Keyword,
    Type,
    Class,
    Property,
    Decorator,
    String,
    Number,
    Comment,
    Operator,
    Variable,
    Parameter,
}

/// `declaration`: where a node or an attribute is declared.
pub const DECLARATION: u32 = 1;
/// `defaultLibrary`: a node type or an attribute type the language knows.
pub const DEFAULT_LIBRARY: u32 = 2;

/// A classified piece of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Highlight {
    /// Where it is.
    pub span: Span,
    /// What it is.
    pub kind: Kind,
    /// [`DECLARATION`] and [`DEFAULT_LIBRARY`], or-ed.
    pub modifiers: u32,
}

/// The classified tokens and comments of `content`, sorted by where they start (they may
/// overlap, and a string or comment may run over several lines).
pub fn highlight(content: &str) -> Vec<Highlight> {
    let (tokens, errors, comments) = lex_with_comments(content);
    let parsed = crate::parse_open(content);
    let mut marks = Marks::default();
    marks.program(&parsed.program);
    let mut raw: Vec<Highlight> = Vec::with_capacity(tokens.len() + comments.len());
    let mut push = |span, kind, modifiers| {
        raw.push(Highlight {
            span,
            kind,
            modifiers,
        })
    };
    for (i, t) in tokens.iter().enumerate() {
        let found = marks
            .0
            .get(&t.span.start)
            .copied()
            .or_else(|| by_neighbours(&tokens, i).map(|k| (k, 0)));
        if let Some((kind, modifiers)) = found {
            push(t.span, kind, modifiers);
        }
    }
    for span in comments {
        push(span, Kind::Comment, 0);
    }
    // A string left open runs to its line's end: a string all the same while it is being written.
    for e in errors
        .iter()
        .filter(|e| e.message.starts_with("unterminated string"))
    {
        push(e.span, Kind::String, 0);
    }
    raw.sort_by_key(|h| h.span.start);
    raw
}

/// What the tree says of the tokens it covers, by the byte where each starts.
#[derive(Default)]
struct Marks(HashMap<u32, (Kind, u32)>);

impl Marks {
    fn mark(&mut self, span: Span, kind: Kind, modifiers: u32) {
        self.0.insert(span.start, (kind, modifiers));
    }

    fn qname(&mut self, name: &ast::QName, kind: Kind, modifiers: u32) {
        for part in &name.parts {
            self.mark(part.span, kind, modifiers);
        }
    }

    fn program(&mut self, program: &ast::Program) {
        for import in &program.imports {
            for symbol in &import.symbols {
                self.qname(&symbol.name, Kind::Class, 0);
                if let Some(alias) = &symbol.alias {
                    self.mark(alias.span, Kind::Class, DECLARATION);
                }
            }
        }
        if let Some(header) = &program.header {
            self.annotations(&header.annotations);
            for a in &header.attributes {
                self.attribute(a);
            }
        }
        self.items(&program.items);
    }

    fn items(&mut self, items: &[ast::Item]) {
        for item in items {
            match item {
                ast::Item::Node(node) => self.node(node),
                ast::Item::Edge(edge) => self.edge(edge),
                ast::Item::Attribute(a) => self.attribute(a),
            }
        }
    }

    fn node(&mut self, node: &ast::Node) {
        let mut declares = DECLARATION;
        if let Some(kind) = &node.kind {
            let known = NODE_TYPES
                .iter()
                .any(|(t, _)| t.eq_ignore_ascii_case(&kind.text));
            self.mark(
                kind.span,
                Kind::Type,
                if known { DEFAULT_LIBRARY } else { 0 },
            );
            // A note names the node it is about.
            if kind.text.eq_ignore_ascii_case("note") {
                declares = 0;
            }
        }
        self.qname(&node.name, Kind::Class, declares);
        self.annotations(&node.annotations);
        self.items(&node.items);
    }

    fn edge(&mut self, edge: &ast::Edge) {
        for source in &edge.sources {
            self.qname(source, Kind::Class, 0);
        }
        for segment in &edge.segments {
            for item in segment.labels.iter().flatten() {
                match item {
                    ast::LabelItem::Annotation(a) => self.annotation(a),
                    ast::LabelItem::Pair { name, value, .. } => {
                        self.mark(name.span, Kind::Property, 0);
                        self.primitive(value);
                    }
                    ast::LabelItem::Flag { name, .. } => self.mark(name.span, Kind::Property, 0),
                    // A bare word of a label is its text.
                    ast::LabelItem::Text(ast::Primitive::Ident(_, span)) => {
                        self.mark(*span, Kind::String, 0);
                    }
                    ast::LabelItem::Text(p) => self.primitive(p),
                }
            }
            for target in &segment.targets {
                self.qname(target, Kind::Class, 0);
            }
        }
        for a in &edge.attributes {
            self.attribute(a);
        }
    }

    fn annotations(&mut self, annotations: &[ast::Annotation]) {
        for a in annotations {
            self.annotation(a);
        }
    }

    fn annotation(&mut self, a: &ast::Annotation) {
        self.mark(a.span, Kind::Decorator, 0);
        self.mark(a.name.span, Kind::Decorator, 0);
        match &a.arg {
            None => {}
            Some(ast::AnnotationArg::Value(p)) => self.primitive(p),
            // `@barrier(Ctx.list)`: a node and its attribute.
            Some(ast::AnnotationArg::QName(q)) => {
                for (i, part) in q.parts.iter().enumerate() {
                    let kind = if i == 0 { Kind::Class } else { Kind::Property };
                    self.mark(part.span, kind, 0);
                }
            }
            Some(ast::AnnotationArg::Params(params)) => {
                for p in params {
                    self.mark(p.name.span, Kind::Parameter, 0);
                    if let Some(v) = &p.value {
                        self.primitive(v);
                    }
                }
            }
        }
    }

    fn attribute(&mut self, a: &ast::Attribute) {
        self.mark(a.name.span, Kind::Property, DECLARATION);
        if let Some(ty) = &a.ty {
            self.type_def(ty);
        }
        if let Some(value) = &a.value {
            self.value(value);
        }
    }

    fn type_def(&mut self, ty: &ast::TypeDef) {
        if let ast::TypeDef::Named { name, generics, .. } = ty {
            let text = name.text();
            let known = ATTRIBUTE_TYPES.iter().any(|(t, _)| *t == text)
                || matches!(
                    text.as_str(),
                    "String"
                        | "Number"
                        | "Boolean"
                        | "bool"
                        | "integer"
                        | "int"
                        | "float"
                        | "double"
                        | "decimal"
                        | "Url"
                        | "array"
                        | "Object"
                        | "Any"
                        | "unknown"
                        | "Promise"
                        | "Result"
                        | "Optional"
                        | "Tuple"
                );
            self.qname(name, Kind::Type, if known { DEFAULT_LIBRARY } else { 0 });
            for g in generics {
                self.type_def(g);
            }
        }
    }

    fn value(&mut self, value: &ast::Value) {
        match value {
            ast::Value::Object(attributes, _) => {
                for a in attributes {
                    self.attribute(a);
                }
            }
            ast::Value::Array(values, _) => {
                for v in values {
                    self.value(v);
                }
            }
            ast::Value::Primitive(p) => self.primitive(p),
        }
    }

    fn primitive(&mut self, p: &ast::Primitive) {
        if let ast::Primitive::Ident(text, span) = p
            && matches!(text.as_str(), "true" | "false" | "null")
        {
            self.mark(*span, Kind::Keyword, 0);
        }
    }
}

/// A token the tree says nothing of, by its kind and its neighbours.
fn by_neighbours(tokens: &[Token], i: usize) -> Option<Kind> {
    let t = tokens[i];
    let prev = i.checked_sub(1).map(|j| tokens[j]);
    let next = tokens.get(i + 1).copied();
    let touches = |a: Option<Token>, b: Option<Token>| matches!((a, b), (Some(a), Some(b)) if a.span.end == b.span.start);
    match t.kind {
        T::KwMachine | T::KwImport | T::KwFrom | T::KwAs => Some(Kind::Keyword),
        T::Str => Some(Kind::String),
        T::Number => Some(Kind::Number),
        T::ExtId => Some(Kind::Variable),
        T::Pipe | T::Question => Some(Kind::Operator),
        k if k.is_arrow_start() => Some(Kind::Operator),
        T::At if next.is_some_and(|n| n.kind == T::Ident) && touches(Some(t), next) => {
            Some(Kind::Decorator)
        }
        T::Ident => {
            if prev.is_some_and(|p| p.kind == T::At) && touches(prev, Some(t)) {
                Some(Kind::Decorator)
            } else if next.is_some_and(|n| matches!(n.kind, T::Colon | T::Lt)) {
                Some(Kind::Property)
            } else if prev.is_some_and(|p| p.kind.is_arrow_start())
                || next.is_some_and(|n| n.kind.is_arrow_start())
            {
                Some(Kind::Class)
            } else {
                None
            }
        }
        _ => None,
    }
}
