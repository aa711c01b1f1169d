//! Semantic tokens (`textDocument/semanticTokens/full`): every token of the lexer, and every
//! comment, classified by what the tree makes of it: keywords, node types (`type`), node names
//! (`class`; with `declaration` where declared), attribute names (`property`), annotations
//! (`decorator`), strings, numbers, comments and arrows (`operator`). Where the tree has nothing (a
//! statement too broken to read), the tokens around a name decide.
//!
//! Tokens are sent as the protocol encodes them: five numbers each, the line and start relative to
//! the previous token, lengths in UTF-16 code units; a string or comment over several lines is one
//! token per line.

use std::collections::HashMap;

use lsp_types::{
    SemanticToken, SemanticTokenModifier, SemanticTokenType, SemanticTokens, SemanticTokensLegend,
};

use super::complete::{ATTRIBUTE_TYPES, NODE_TYPES};
use super::text::{LineIndex, utf16_len};
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

/// The legend the server announces.
pub fn legend() -> SemanticTokensLegend {
    SemanticTokensLegend {
        token_types: vec![
            SemanticTokenType::KEYWORD,
            SemanticTokenType::TYPE,
            SemanticTokenType::CLASS,
            SemanticTokenType::PROPERTY,
            SemanticTokenType::DECORATOR,
            SemanticTokenType::STRING,
            SemanticTokenType::NUMBER,
            SemanticTokenType::COMMENT,
            SemanticTokenType::OPERATOR,
            SemanticTokenType::VARIABLE,
            SemanticTokenType::PARAMETER,
        ],
        token_modifiers: vec![
            SemanticTokenModifier::DECLARATION,
            SemanticTokenModifier::DEFAULT_LIBRARY,
        ],
    }
}

/// The semantic tokens of `content`.
pub fn tokens(content: &str) -> SemanticTokens {
    let (tokens, errors, comments) = lex_with_comments(content);
    let parsed = super::parse_open(content);
    let mut marks = Marks::default();
    marks.program(&parsed.program);
    let mut raw: Vec<(Span, Kind, u32)> = Vec::with_capacity(tokens.len() + comments.len());
    for (i, t) in tokens.iter().enumerate() {
        let found = marks
            .0
            .get(&t.span.start)
            .copied()
            .or_else(|| by_neighbours(&tokens, i).map(|k| (k, 0)));
        if let Some((kind, modifiers)) = found {
            raw.push((t.span, kind, modifiers));
        }
    }
    raw.extend(comments.into_iter().map(|span| (span, Kind::Comment, 0)));
    // A string left open runs to its line's end: a string all the same while it is being written.
    raw.extend(
        errors
            .iter()
            .filter(|e| e.message.starts_with("unterminated string"))
            .map(|e| (e.span, Kind::String, 0)),
    );
    raw.sort_by_key(|(span, _, _)| span.start);
    SemanticTokens {
        result_id: None,
        data: encode(content, &raw),
    }
}

/// The protocol's encoding of `raw` (sorted by start): overlaps dropped, tokens over several lines
/// cut at each line's end, empty pieces left out.
fn encode(content: &str, raw: &[(Span, Kind, u32)]) -> Vec<SemanticToken> {
    let lines = LineIndex::new(content);
    let mut data = Vec::with_capacity(raw.len());
    let (mut line, mut start) = (0u32, 0u32);
    let mut covered = 0usize;
    for (span, kind, modifiers) in raw {
        let (from, to) = (span.start as usize, (span.end as usize).min(content.len()));
        if from < covered || from >= to {
            continue;
        }
        covered = to;
        let mut piece_start = from;
        for piece in content[from..to].split('\n') {
            let at = piece_start;
            piece_start += piece.len() + 1;
            let piece = piece.strip_suffix('\r').unwrap_or(piece);
            if piece.is_empty() {
                continue;
            }
            let position = lines.position(at);
            let delta_line = position.line - line;
            let delta_start = if delta_line == 0 {
                position.character - start
            } else {
                position.character
            };
            data.push(SemanticToken {
                delta_line,
                delta_start,
                length: utf16_len(piece),
                token_type: *kind as u32,
                token_modifiers_bitset: *modifiers,
            });
            (line, start) = (position.line, position.character);
        }
    }
    data
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The decoded tokens: line, character, length, text, kind, modifiers.
    fn decoded(content: &str) -> Vec<(u32, u32, u32, String, u32, u32)> {
        let data = tokens(content).data;
        let lines: Vec<Vec<u16>> = content
            .split('\n')
            .map(|l| l.encode_utf16().collect())
            .collect();
        let (mut line, mut start) = (0u32, 0u32);
        data.iter()
            .map(|t| {
                if t.delta_line > 0 {
                    start = 0;
                }
                line += t.delta_line;
                start += t.delta_start;
                let units = &lines[line as usize][start as usize..(start + t.length) as usize];
                let text = String::from_utf16(units).unwrap();
                (
                    line,
                    start,
                    t.length,
                    text,
                    t.token_type,
                    t.token_modifiers_bitset,
                )
            })
            .collect()
    }

    fn kind_of(content: &str, text: &str, nth: usize) -> (u32, u32) {
        let found = decoded(content);
        let (_, _, _, _, kind, modifiers) = found
            .iter()
            .filter(|t| t.3 == text)
            .nth(nth)
            .unwrap_or_else(|| panic!("no token {text:?} (#{nth}) in {found:?}"));
        (*kind, *modifiers)
    }

    #[test]
    fn names_types_annotations_and_literals_are_classified() {
        let text = "import { Base as B } from \"./b.dy\";\nmachine \"Shop\" @StrictMode { max<number>: 3; }\n// the flow\nContext order { total<Array<Date>>: []; ok: true; }\nTask pay \"Pay\" @Version(v: 2) { prompt: \"x\"; }\nnote pay \"About it\";\npay -when: 'order.total > 0'; @auto-> done, checkout.end;\na -go-> b;\n";
        let k = |s: &str, nth: usize| kind_of(text, s, nth);
        assert_eq!(k("import", 0), (Kind::Keyword as u32, 0));
        assert_eq!(k("B", 0), (Kind::Class as u32, DECLARATION));
        assert_eq!(k("machine", 0), (Kind::Keyword as u32, 0));
        assert_eq!(k("StrictMode", 0), (Kind::Decorator as u32, 0));
        assert_eq!(k("@", 0), (Kind::Decorator as u32, 0));
        assert_eq!(k("max", 0), (Kind::Property as u32, DECLARATION));
        assert_eq!(k("number", 0), (Kind::Type as u32, DEFAULT_LIBRARY));
        assert_eq!(k("3", 0), (Kind::Number as u32, 0));
        assert_eq!(k("// the flow", 0), (Kind::Comment as u32, 0));
        assert_eq!(k("Context", 0), (Kind::Type as u32, DEFAULT_LIBRARY));
        assert_eq!(k("order", 0), (Kind::Class as u32, DECLARATION));
        assert_eq!(k("Date", 0), (Kind::Type as u32, DEFAULT_LIBRARY));
        assert_eq!(k("true", 0), (Kind::Keyword as u32, 0));
        assert_eq!(k("v", 0), (Kind::Parameter as u32, 0));
        assert_eq!(k("\"Pay\"", 0), (Kind::String as u32, 0));
        // The note's name is a use, the edge's names too (qualified: each part).
        assert_eq!(k("pay", 1), (Kind::Class as u32, 0));
        assert_eq!(k("pay", 2), (Kind::Class as u32, 0));
        assert_eq!(k("when", 0), (Kind::Property as u32, 0));
        assert_eq!(k("auto", 0), (Kind::Decorator as u32, 0));
        assert_eq!(k("-", 0), (Kind::Operator as u32, 0));
        assert_eq!(k("->", 0), (Kind::Operator as u32, 0));
        assert_eq!(k("checkout", 0), (Kind::Class as u32, 0));
        assert_eq!(k("end", 0), (Kind::Class as u32, 0));
        assert_eq!(k("go", 0), (Kind::String as u32, 0));
    }

    #[test]
    fn multi_line_tokens_are_cut_per_line_and_columns_count_utf16() {
        let text = "Task t \"a\r\nb\n\nc\" /* x\ny */ @A;\nState s \"é𝄞\" { x: 1; }\n";
        let found = decoded(text);
        let at = |line: u32, text: &str| {
            found
                .iter()
                .find(|t| t.0 == line && t.3 == text)
                .unwrap_or_else(|| panic!("{text:?} on line {line}: {found:?}"))
                .clone()
        };
        // The string's lines, without the line ends; the empty line has none.
        assert_eq!(at(0, "\"a").4, Kind::String as u32);
        assert_eq!(at(1, "b").4, Kind::String as u32);
        assert_eq!(at(3, "c\"").4, Kind::String as u32);
        assert!(!found.iter().any(|t| t.0 == 2));
        assert_eq!(at(3, "/* x").4, Kind::Comment as u32);
        assert_eq!(at(4, "y */").4, Kind::Comment as u32);
        assert_eq!(at(4, "A").4, Kind::Decorator as u32);
        // `é` is one UTF-16 unit (two bytes), `𝄞` two (four bytes): the title is 5 units long.
        let title = at(5, "\"é𝄞\"");
        assert_eq!((title.1, title.2, title.4), (8, 5, Kind::String as u32));
        let x = at(5, "x");
        assert_eq!((x.1, x.4, x.5), (16, Kind::Property as u32, DECLARATION));
        assert_eq!(at(5, "1").1, 19);
    }

    #[test]
    fn broken_documents_are_still_highlighted() {
        // A block left open, an unterminated string, a statement the parser gives up on.
        let text = "Process p {\n  Task a @Async { n<number>: 1; }\n  a -> ;\n  b: \"open\n";
        let k = |s: &str, nth: usize| kind_of(text, s, nth);
        assert_eq!(k("p", 0), (Kind::Class as u32, DECLARATION));
        assert_eq!(k("a", 0), (Kind::Class as u32, DECLARATION));
        assert_eq!(k("Async", 0), (Kind::Decorator as u32, 0));
        assert_eq!(k("n", 0), (Kind::Property as u32, DECLARATION));
        assert_eq!(k("a", 1), (Kind::Class as u32, 0));
        assert_eq!(k("b", 0).0, Kind::Property as u32);
        assert_eq!(k("\"open", 0), (Kind::String as u32, 0));
    }
}
