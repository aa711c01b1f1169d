//! The syntax tree of a DyGram program, as written (before names are linked).
//!
//! Every node carries the [`Span`] of the text it was parsed from.

use crate::source::Span;

/// A name as written, with its span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ident {
    /// The text.
    pub text: String,
    /// Where.
    pub span: Span,
}

/// A dotted name (`a.b.c`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QName {
    /// The parts, at least one.
    pub parts: Vec<Ident>,
    /// Where.
    pub span: Span,
}

impl QName {
    /// The name with its dots.
    pub fn text(&self) -> String {
        let parts: Vec<&str> = self.parts.iter().map(|p| p.text.as_str()).collect();
        parts.join(".")
    }

    /// The last part.
    pub fn last(&self) -> &str {
        self.parts.last().map_or("", |p| p.text.as_str())
    }

    /// Whether the name has dots.
    pub fn is_qualified(&self) -> bool {
        self.parts.len() > 1
    }
}

/// A string literal: its raw text (with quotes and escapes) and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrLit {
    /// The text between and including the quotes, as written.
    pub raw: String,
    /// The value: quotes removed, escapes decoded.
    pub value: String,
    /// Where.
    pub span: Span,
}

/// A whole file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Program {
    /// `import { … } from "…"` lines.
    pub imports: Vec<Import>,
    /// `machine "Title" …`, when present.
    pub header: Option<Header>,
    /// Top-level nodes, edges and attributes, in order.
    pub items: Vec<Item>,
}

/// `import { A, B.C as D } from "./file.dy"`.
#[derive(Debug, Clone, PartialEq)]
pub struct Import {
    /// What is imported.
    pub symbols: Vec<ImportSymbol>,
    /// The module path.
    pub path: StrLit,
    /// Where.
    pub span: Span,
}

/// One imported name and its optional alias.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportSymbol {
    /// The name in the imported file.
    pub name: QName,
    /// `as Alias`.
    pub alias: Option<Ident>,
    /// Where.
    pub span: Span,
}

/// `machine "Title" @Ann { attributes }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// The title.
    pub title: StrLit,
    /// Machine annotations.
    pub annotations: Vec<Annotation>,
    /// Attributes of the header block.
    pub attributes: Vec<Attribute>,
    /// Where.
    pub span: Span,
}

/// A statement: at each position an edge is tried first, then a node, then an attribute.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A node declaration.
    Node(Node),
    /// An edge statement (possibly a chain of segments).
    Edge(Edge),
    /// An attribute.
    Attribute(Attribute),
}

/// `[type] [#] name ["title"] @annotations* ({ items } | ;)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The type keyword (`Task`, `state`, …), as written.
    pub kind: Option<Ident>,
    /// The (possibly dotted) name.
    pub name: QName,
    /// The title string.
    pub title: Option<StrLit>,
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Contents of the `{ … }` block (nested nodes, edges, attributes).
    pub items: Vec<Item>,
    /// Whether a block was written (even empty).
    pub has_block: bool,
    /// Where (the whole declaration).
    pub span: Span,
}

/// `name [<Type>] [: value] [;]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    /// The name.
    pub name: Ident,
    /// The declared type.
    pub ty: Option<TypeDef>,
    /// The value.
    pub value: Option<Value>,
    /// Where.
    pub span: Span,
}

/// A declared attribute type.
#[derive(Debug, Clone, PartialEq)]
pub enum TypeDef {
    /// `Name`, `Array<T>`, `Map<K, V>`, `T?`.
    Named {
        /// The (possibly dotted) type name.
        name: QName,
        /// Generic arguments.
        generics: Vec<TypeDef>,
        /// Whether `?` follows.
        optional: bool,
        /// Where.
        span: Span,
    },
    /// `'a' | 'b' | 'c'`.
    Union {
        /// The allowed strings.
        literals: Vec<StrLit>,
        /// Where.
        span: Span,
    },
}

impl TypeDef {
    /// Where the type was written.
    pub fn span(&self) -> Span {
        match self {
            Self::Named { span, .. } | Self::Union { span, .. } => *span,
        }
    }
}

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `{ attributes }`.
    Object(Vec<Attribute>, Span),
    /// `[ values ]`.
    Array(Vec<Value>, Span),
    /// A single token.
    Primitive(Primitive),
}

impl Value {
    /// Where the value was written.
    pub fn span(&self) -> Span {
        match self {
            Self::Object(_, span) | Self::Array(_, span) => *span,
            Self::Primitive(p) => p.span(),
        }
    }
}

/// A single-token value.
#[derive(Debug, Clone, PartialEq)]
pub enum Primitive {
    /// `#ref` (text includes the `#`).
    ExtId(String, Span),
    /// A string.
    Str(StrLit),
    /// A bare name (`true`, `red`, `someNode`).
    Ident(String, Span),
    /// An unsigned number, as written.
    Number(String, Span),
}

impl Primitive {
    /// Where it was written.
    pub fn span(&self) -> Span {
        match self {
            Self::ExtId(_, s) | Self::Ident(_, s) | Self::Number(_, s) => *s,
            Self::Str(s) => s.span,
        }
    }

    /// The text as written (strings with their quotes).
    pub fn raw(&self) -> &str {
        match self {
            Self::ExtId(t, _) | Self::Ident(t, _) | Self::Number(t, _) => t,
            Self::Str(s) => &s.raw,
        }
    }
}

/// `@name` or `@name(argument)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    /// The name.
    pub name: Ident,
    /// The argument in parentheses.
    pub arg: Option<AnnotationArg>,
    /// Where.
    pub span: Span,
}

/// What an annotation's parentheses hold.
#[derive(Debug, Clone, PartialEq)]
pub enum AnnotationArg {
    /// One value (`@Version("2")`; on edges only a string).
    Value(Primitive),
    /// A dotted name (edges only: `@barrier(Ctx.list)`).
    QName(QName),
    /// `key: value; flag; …`.
    Params(Vec<AnnotationParam>),
}

/// One `key: value` or `key` in an annotation's parameter list.
#[derive(Debug, Clone, PartialEq)]
pub struct AnnotationParam {
    /// The key.
    pub name: Ident,
    /// The value.
    pub value: Option<Primitive>,
    /// Where.
    pub span: Span,
}

/// An edge statement: `sources segment+ [{ attributes }] [;]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    /// Sources of the first segment.
    pub sources: Vec<QName>,
    /// The segments; each segment's sources are the previous segment's targets.
    pub segments: Vec<Segment>,
    /// Attributes of the `{ … }` block after the last target.
    pub attributes: Vec<Attribute>,
    /// Where (the whole statement).
    pub span: Span,
}

/// `["mult"] arrow ["mult"] targets`.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Multiplicity before the arrow.
    pub source_multiplicity: Option<StrLit>,
    /// The arrow.
    pub arrow: Arrow,
    /// Label groups between the arrow's start and end (`-a, b->`: two groups).
    pub labels: Vec<Vec<LabelItem>>,
    /// Multiplicity after the arrow.
    pub target_multiplicity: Option<StrLit>,
    /// Targets.
    pub targets: Vec<QName>,
    /// From the arrow to the last target.
    pub span: Span,
}

/// Kinds of arrows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrowKind {
    /// `->`
    Single,
    /// `-->`
    Double,
    /// `=>`
    Fat,
    /// `<-->`
    Bidirectional,
    /// `<--label-->`
    BidirectionalLabeled,
    /// `<|--`
    Inherit,
    /// `*-->`
    Compose,
    /// `o-->`
    Aggregate,
}

/// An arrow: its kind and the text of its final token (`->`, `-->`, `<--rel-->`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrow {
    /// The kind.
    pub kind: ArrowKind,
    /// The end token's text.
    pub text: String,
    /// From the start token to the end token.
    pub span: Span,
}

/// One item of an edge label.
#[derive(Debug, Clone, PartialEq)]
pub enum LabelItem {
    /// `@name(…)`.
    Annotation(Annotation),
    /// `key: value` (`;` optional after it).
    Pair {
        /// The key.
        name: Ident,
        /// The value (one token).
        value: Primitive,
        /// Where.
        span: Span,
    },
    /// `key;`.
    Flag {
        /// The key.
        name: Ident,
        /// Where.
        span: Span,
    },
    /// A bare value: a name, string, number or `#ref`.
    Text(Primitive),
}
