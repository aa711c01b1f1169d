//! Completion (`textDocument/completion`): what may be written at the cursor, from the tokens
//! before it and the tree of the document (read as the editor has it, errors and all).
//!
//! - At the start of a statement (top level or in a node's block): the keywords allowed there
//!   (`import` while only imports precede, `machine` where the header may still go), the node types
//!   and the node names (an edge's source).
//! - After `@`: the annotations of the place (machine header, node, or an arrow's label).
//! - After an arrow, a multiplicity or a `,` of an edge's list: the node names, qualified
//!   (`checkout.pay`) and simple.
//! - After `<` (or `,` in type arguments) in an attribute's type: the types validation knows and the
//!   `type` nodes of the document.
//! - In a `{{ … }}` template of a string, or in an edge's condition (`when:`, `if:`, `unless:`):
//!   the variables conditions and templates see; after `name.`, the attributes of the node (or the
//!   keys of the object value) `name`.
//! - In an arrow's label: `when`, `unless`, `if` and the data labels; in an import: `as`, `from`.
//!
//! Nothing is offered in comments, in other strings, or where a new name is being written.

use std::collections::{BTreeMap, HashSet};

use lsp_types::{
    CompletionItem, CompletionItemKind, CompletionTextEdit, Position, Range, TextEdit,
};

use super::text;
use crate::source::Span;
use crate::syntax::ast;
use crate::syntax::lexer::{Token, TokenKind as T, lex};

/// The node types the tooling gives a meaning to, as users mostly write them, with what they mean.
pub const NODE_TYPES: &[(&str, &str)] = &[
    (
        "Task",
        "node type: a step; with a `prompt` the model decides there",
    ),
    (
        "State",
        "node type: a state; never asks the model, a single edge is taken at once",
    ),
    (
        "Context",
        "node type: data; its attributes are the context tasks read and write",
    ),
    (
        "Process",
        "node type: a group of nodes (no meaning when running)",
    ),
    ("Input", "node type: input data (drawn as a context)"),
    ("Output", "node type: output data (drawn as a context)"),
    ("Result", "node type: result data (drawn as a context)"),
    ("Resource", "node type: a resource (drawn as a context)"),
    ("Concept", "node type: a concept (drawn as a context)"),
    (
        "init",
        "node type: an entry point; its single edge is taken at once",
    ),
    ("tool", "node type: a tool the model can be given"),
    ("note", "a note on the node of the same name"),
    (
        "style",
        "style rule: its attributes style the elements with its annotation",
    ),
    (
        "type",
        "type definition: usable as an attribute's type; its attributes may omit values",
    ),
    ("end", "node type: an end (drawn as an ellipse)"),
];

/// The attribute types validation checks (`name<type>`), with what they take.
pub const ATTRIBUTE_TYPES: &[(&str, &str)] = &[
    ("string", "text"),
    ("number", "a number"),
    ("boolean", "true or false"),
    ("Integer", "a whole number"),
    ("Float", "a number"),
    ("Date", "an ISO 8601 date and time string"),
    ("DateTime", "an ISO 8601 date and time string"),
    (
        "Duration",
        "an ISO 8601 duration (PT4H5M) or 30s, 5min, 2h, 3d",
    ),
    ("UUID", "a UUID string"),
    ("URL", "a URL string"),
    ("Array", "a list: Array<T>"),
    ("List", "a list: List<T>"),
    ("Set", "a list: Set<T>"),
    ("Map", "an object: Map<K, V>"),
    ("Record", "an object: Record<K, V>"),
    ("object", "an object"),
    ("any", "any value"),
];

/// Where an annotation is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// On the `machine` header.
    Machine,
    /// On a node.
    Node,
    /// In an arrow's label.
    Edge,
}

const M: u8 = 1;
const N: u8 = 2;
const E: u8 = 4;

/// The annotations the compiler, the diagrams or the runtime give a meaning to: name, where, what.
pub const ANNOTATIONS: &[(&str, u8, &str)] = &[
    (
        "StrictMode",
        M,
        "edges may name declared nodes only (no placeholder nodes)",
    ),
    (
        "meta",
        M | N,
        "offers the meta-programming tools to the model (on the machine: at every node)",
    ),
    (
        "Version",
        M | N,
        "a version, as metadata: @Version(\"1.0\")",
    ),
    (
        "style",
        M | N | E,
        "diagram style: @style(color: red; penwidth: 3)",
    ),
    ("start", N, "an explicit start node: a path starts here"),
    (
        "Async",
        N,
        "an asynchronous task (metadata; a warning on nodes that are not tasks)",
    ),
    (
        "Abstract",
        N,
        "an abstract node (drawn as an egg; an error on init nodes)",
    ),
    ("Deprecated", N, "deprecated (drawn dashed and grey)"),
    ("Critical", N, "critical (drawn with a thick border)"),
    ("Singleton", N, "a singleton (drawn with a double border)"),
    ("code", N, "code generation (no effect when running)"),
    (
        "auto",
        E,
        "taken at once when its condition holds; never offered to the model",
    ),
    (
        "async",
        E,
        "starts a parallel path at the target (@async(false) turns it off)",
    ),
    (
        "spawn",
        E,
        "starts a parallel path at the target (as @async)",
    ),
    (
        "fork",
        E,
        "starts a parallel path at the target (as @async)",
    ),
    (
        "parallel",
        E,
        "fork: a new path for each @parallel edge, the current one completes",
    ),
    (
        "barrier",
        E,
        "paths wait here for each other: @barrier, @barrier(\"id\"), @barrier(id: x; merge: true)",
    ),
    ("wait", E, "paths wait here for each other (as @barrier)"),
    ("sync", E, "paths wait here for each other (as @barrier)"),
    (
        "join",
        E,
        "paths wait here for each other and merge: only the last goes on",
    ),
    ("merge", E, "paths wait here and merge (as @join)"),
    (
        "map",
        E,
        "one path for each item of a list: @map(Ctx.items), @map(items: Ctx.items; group: g)",
    ),
    ("foreach", E, "one path for each item of a list (as @map)"),
    ("each", E, "one path for each item of a list (as @map)"),
    ("hideLabel", E, "diagram: the edge's label is not shown"),
    (
        "hideAnnotation",
        E,
        "diagram: the edge's annotations are not shown",
    ),
    (
        "showAnnotation",
        E,
        "diagram: whether the edge's annotations are shown",
    ),
];

/// Variables every condition and template sees, besides the machine's attributes and the nodes.
const BUILT_IN_VARIABLES: &[(&str, &str)] = &[
    ("errorCount", "built-in: how many errors so far"),
    ("errors", "built-in: how many errors so far"),
    ("activeState", "built-in: the last `state` node entered"),
    ("_mapItem", "built-in on @map paths: the item"),
    ("_mapIndex", "built-in on @map paths: the item's index"),
];

/// Stands for the word being written while the document is read.
const PLACEHOLDER: &str = "__dygram_completion__";

/// What the cursor is in.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Context {
    /// Nothing to offer.
    Nothing,
    /// The start of a statement at the top level or in a node's block.
    Statement {
        /// `import` may be written here.
        import: bool,
        /// `machine` may be written here.
        machine: bool,
        /// Nodes and edges may be written here.
        nodes: bool,
    },
    /// After `@`.
    Annotation(Place),
    /// Where an edge names a node.
    NodeName,
    /// In an attribute's type.
    Type,
    /// In an arrow's label.
    Label,
    /// `as` after an imported name.
    ImportAs,
    /// `from` after the imported names.
    ImportFrom,
    /// A dotted path in a template or a condition; the path is the text written so far.
    Variable(String),
}

/// The completions at `position` of `content`.
pub fn complete(content: &str, position: Position) -> Vec<CompletionItem> {
    let at = text::offset(content, position);
    let (tokens, _) = lex(content);
    let (context, word_start) = context(content, &tokens, at);
    if context == Context::Nothing {
        return Vec::new();
    }
    // The document with a placeholder for the word being written, so that a half-written name does
    // not offer itself; a statement's start also ends there, so as not to swallow the next line.
    let word_end = content[at..]
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .map_or(content.len(), |i| at + i);
    let rest = match context {
        Context::Variable(_) => content.to_string(),
        Context::Statement { .. } => format!(
            "{}{PLACEHOLDER};{}",
            &content[..word_start],
            &content[word_end..]
        ),
        _ => format!(
            "{}{PLACEHOLDER}{}",
            &content[..word_start],
            &content[word_end..]
        ),
    };
    let parsed = super::parse_open(&rest);
    let doc = Doc::read(&rest, &parsed.program);
    let line_index = text::LineIndex::new(content);
    let whole = Range::new(line_index.position(word_start), position);
    let word = &content[word_start..at];
    let mut out = Offer {
        items: Vec::new(),
        seen: HashSet::new(),
        range: whole,
    };
    match context {
        Context::Nothing => {}
        Context::Statement {
            import,
            machine,
            nodes,
        } => {
            if import {
                out.push(
                    "import",
                    CompletionItemKind::KEYWORD,
                    "import { Name } from \"./file.dy\"",
                    "0",
                );
            }
            if machine {
                out.push(
                    "machine",
                    CompletionItemKind::KEYWORD,
                    "the machine's header: machine \"Title\"",
                    "0",
                );
            }
            if nodes {
                node_types(&doc, &mut out);
                node_names(&doc, word, &mut out);
            }
        }
        Context::Annotation(place) => annotations(&doc, place, &mut out),
        Context::NodeName => node_names(&doc, word, &mut out),
        Context::Type => types(&doc, &mut out),
        Context::Label => {
            for (label, detail) in [
                (
                    "when",
                    "condition (CEL) under which the edge is taken: -when: 'x > 0'->",
                ),
                (
                    "unless",
                    "condition (CEL) under which the edge is not taken",
                ),
                (
                    "if",
                    "condition (CEL) under which the edge is taken (as when)",
                ),
                ("writes", "a data edge: the node writes the context"),
                ("reads", "a data edge: the node reads the context"),
                (
                    "stores",
                    "a data edge: the node writes the context (as writes)",
                ),
            ] {
                out.push(label, CompletionItemKind::KEYWORD, detail, "0");
            }
        }
        Context::ImportAs => out.push(
            "as",
            CompletionItemKind::KEYWORD,
            "an alias for the imported name",
            "0",
        ),
        Context::ImportFrom => out.push(
            "from",
            CompletionItemKind::KEYWORD,
            "the file to import from, in quotes",
            "0",
        ),
        Context::Variable(path) => {
            // Only the path's last part is replaced.
            let last = path.rsplit('.').next().unwrap_or("");
            out.range = Range::new(line_index.position(at - last.len()), position);
            variables(&doc, &path, &mut out);
        }
    }
    out.items
}

/// The items being gathered, each label once.
struct Offer {
    items: Vec<CompletionItem>,
    seen: HashSet<String>,
    /// What an item replaces: the word before the cursor.
    range: Range,
}

impl Offer {
    fn push(&mut self, label: &str, kind: CompletionItemKind, detail: &str, sort: &str) {
        if label.is_empty() || label.contains(PLACEHOLDER) || !self.seen.insert(label.to_string()) {
            return;
        }
        self.items.push(CompletionItem {
            label: label.to_string(),
            kind: Some(kind),
            detail: Some(detail.to_string()),
            sort_text: Some(format!("{sort}{label}")),
            filter_text: Some(label.to_string()),
            text_edit: Some(CompletionTextEdit::Edit(TextEdit::new(
                self.range,
                label.to_string(),
            ))),
            ..CompletionItem::default()
        });
    }
}

// ---- what the cursor is in --------------------------------------------------------------------

/// The context at byte `at` and where the word being written starts.
fn context(content: &str, tokens: &[Token], at: usize) -> (Context, usize) {
    // In a string (a token around the cursor, or one left open on the cursor's line) or a comment?
    let before: Vec<&Token> = tokens
        .iter()
        .filter(|t| t.kind != T::Eof && (t.span.end as usize) <= at)
        .collect();
    if let Some(string) = tokens
        .iter()
        .find(|t| t.kind == T::Str && (t.span.start as usize) < at && at < t.span.end as usize)
    {
        return (
            in_string(content, tokens, string.span.start as usize, at),
            at,
        );
    }
    let gap_start = before.last().map_or(0, |t| t.span.end as usize);
    match in_trivia(content, gap_start, at) {
        Trivia::Comment => return (Context::Nothing, at),
        Trivia::String(start) => return (in_string(content, tokens, start, at), at),
        Trivia::None => {}
    }
    let word_start = path_start(&content[..at]);
    let word = &content[word_start..at];
    if word.starts_with(|c: char| c.is_ascii_digit()) {
        return (Context::Nothing, word_start);
    }
    let prev: Vec<Token> = tokens
        .iter()
        .filter(|t| t.kind != T::Eof && (t.span.end as usize) <= word_start)
        .copied()
        .collect();
    // The keyword being written is not one the document has.
    let elsewhere = |t: &&Token| t.span.start as usize != word_start || word.is_empty();
    let after = |t: &&Token| (t.span.start as usize) >= at && elsewhere(t);
    let later = Later {
        machine: tokens
            .iter()
            .filter(elsewhere)
            .any(|t| t.kind == T::KwMachine),
        header_or_import: tokens
            .iter()
            .filter(after)
            .any(|t| matches!(t.kind, T::KwMachine | T::KwImport)),
        import: tokens.iter().filter(after).any(|t| t.kind == T::KwImport),
    };
    (
        classify(content, &prev, word_start, word, &later),
        word_start,
    )
}

/// What the document has besides the word being written.
struct Later {
    /// A `machine` header, anywhere.
    machine: bool,
    /// A header or an import after the cursor.
    header_or_import: bool,
    /// An import after the cursor.
    import: bool,
}

enum Trivia {
    None,
    Comment,
    /// A string left open (its quote at this byte), which the lexer ends at the line's end.
    String(usize),
}

/// Whether `at` is in a comment or an unterminated string of the gap `from..at` between tokens.
fn in_trivia(content: &str, from: usize, at: usize) -> Trivia {
    let gap = &content[from..at];
    let bytes = gap.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &gap[i..];
        if rest.starts_with("//") || bytes[i] == b'"' || bytes[i] == b'\'' {
            match rest.find('\n') {
                Some(n) => i += n + 1,
                None if bytes[i] == b'/' => return Trivia::Comment,
                None => return Trivia::String(from + i),
            }
        } else if let Some(comment) = rest.strip_prefix("/*") {
            match comment.find("*/") {
                Some(n) => i += n + 4,
                None => return Trivia::Comment,
            }
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    Trivia::None
}

/// The context in the string whose quote is at `start`, the cursor at `at`.
fn in_string(content: &str, tokens: &[Token], start: usize, at: usize) -> Context {
    let inside = content.get(start + 1..at).unwrap_or("");
    let template = inside
        .rfind("{{")
        .is_some_and(|open| !inside[open..].contains("}}"));
    // A condition: the value of `when:`, `if:` or `unless:` (in a label or an edge's block).
    let mut before = tokens
        .iter()
        .filter(|t| (t.span.end as usize) <= start)
        .rev();
    let condition = matches!(
        (before.next(), before.next()),
        (Some(colon), Some(key)) if colon.kind == T::Colon && key.kind == T::Ident
            && matches!(content.get(key.span.range()), Some("when" | "if" | "unless"))
    );
    if !(template || condition) {
        return Context::Nothing;
    }
    let path_start = path_start(inside);
    let path = &inside[path_start..];
    if path.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return Context::Nothing;
    }
    Context::Variable(path.to_string())
}

/// Where the dotted name that ends `text` starts (`text`'s length when there is none).
fn path_start(text: &str) -> usize {
    let is_path = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    text.char_indices()
        .rev()
        .find(|(_, c)| !is_path(*c))
        .map_or(0, |(i, c)| i + c.len_utf8())
}

/// What an open `{` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
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
enum Open {
    Brace(Block),
    Paren,
    Bracket,
    Angle,
}

fn is_arrow_end(kind: T) -> bool {
    matches!(
        kind,
        T::Arrow
            | T::DoubleArrow
            | T::FatArrow
            | T::BiArrow
            | T::BiLabeled
            | T::InheritArrow
            | T::ComposeArrow
            | T::AggregateArrow
    )
}

fn is_label_start(kind: T) -> bool {
    matches!(kind, T::Dash | T::DoubleStart | T::FatStart)
}

/// Whether a statement may end with this token (the `;` being optional).
fn may_end_statement(kind: T) -> bool {
    matches!(
        kind,
        T::Ident
            | T::Str
            | T::Number
            | T::ExtId
            | T::RParen
            | T::RBracket
            | T::RBrace
            | T::Gt
            | T::Question
            | T::Semi
    )
}

/// Whether only blanks precede byte `at` on its line.
fn starts_line(content: &str, at: usize) -> bool {
    let line_start = content[..at].rfind('\n').map_or(0, |i| i + 1);
    content[line_start..at].trim().is_empty()
}

/// What the `{` at `tokens[i]` opens, from what precedes it.
fn brace_kind(tokens: &[Token], i: usize, inside: Option<Open>) -> Block {
    let kind = |k: usize| tokens.get(k).map(|t| t.kind);
    let Some(mut k) = i.checked_sub(1) else {
        return Block::Node;
    };
    match kind(k) {
        Some(T::Colon) => return Block::Object,
        Some(T::KwImport) => return Block::Import,
        _ if matches!(inside, Some(Open::Bracket)) => return Block::Object,
        _ => {}
    }
    // Back over annotations, then a title.
    loop {
        match kind(k) {
            Some(T::RParen) => {
                let mut depth = 0usize;
                loop {
                    match kind(k) {
                        Some(T::RParen) => depth += 1,
                        Some(T::LParen) => depth -= 1,
                        None => return Block::Node,
                        _ => {}
                    }
                    if depth == 0 {
                        break;
                    }
                    let Some(j) = k.checked_sub(1) else {
                        return Block::Node;
                    };
                    k = j;
                }
                let Some(j) = k.checked_sub(1) else {
                    return Block::Node;
                };
                k = j;
            }
            Some(T::Ident) if k >= 1 && kind(k - 1) == Some(T::At) => {
                let Some(j) = k.checked_sub(2) else {
                    return Block::Node;
                };
                k = j;
            }
            _ => break,
        }
    }
    if kind(k) == Some(T::Str) {
        if k >= 1 && kind(k - 1) == Some(T::KwMachine) {
            return Block::Header;
        }
        if k >= 1 && kind(k - 1).is_some_and(is_arrow_end) {
            return Block::Edge;
        }
        let Some(j) = k.checked_sub(1) else {
            return Block::Node;
        };
        k = j;
    }
    if kind(k) != Some(T::Ident) {
        return Block::Node;
    }
    while k >= 2 && kind(k - 1) == Some(T::Dot) && kind(k - 2) == Some(T::Ident) {
        k -= 2;
    }
    match k.checked_sub(1).and_then(kind) {
        Some(before) if is_arrow_end(before) || before == T::Comma => Block::Edge,
        Some(T::Str) if k >= 2 && kind(k - 2).is_some_and(is_arrow_end) => Block::Edge,
        _ => Block::Node,
    }
}

/// The context after the tokens `prev`, where a word starts at `word_start`.
fn classify(
    content: &str,
    prev: &[Token],
    word_start: usize,
    word: &str,
    later: &Later,
) -> Context {
    // What is open, as the parser would have it.
    let mut stack: Vec<Open> = Vec::new();
    let mut closed: Option<Open> = None;
    for (i, t) in prev.iter().enumerate() {
        closed = None;
        match t.kind {
            T::LBrace => {
                while stack.last() == Some(&Open::Angle) {
                    stack.pop();
                }
                let block = brace_kind(prev, i, stack.last().copied());
                stack.push(Open::Brace(block));
            }
            T::RBrace => {
                while let Some(open) = stack.pop() {
                    if matches!(open, Open::Brace(_)) {
                        closed = Some(open);
                        break;
                    }
                }
            }
            T::LParen => stack.push(Open::Paren),
            T::RParen if stack.last() == Some(&Open::Paren) => {
                stack.pop();
            }
            T::LBracket => stack.push(Open::Bracket),
            T::RBracket => {
                while stack.last() == Some(&Open::Angle) {
                    stack.pop();
                }
                if stack.last() == Some(&Open::Bracket) {
                    stack.pop();
                }
            }
            T::Lt => stack.push(Open::Angle),
            T::Gt if stack.last() == Some(&Open::Angle) => {
                stack.pop();
            }
            T::Semi => {
                while matches!(stack.last(), Some(Open::Angle | Open::Bracket)) {
                    stack.pop();
                }
            }
            _ => {}
        }
    }
    let block = stack.iter().rev().find_map(|o| match o {
        Open::Brace(b) => Some(*b),
        _ => None,
    });
    let top = stack.last().copied();
    let Some(last) = prev.last().copied() else {
        return Context::Statement {
            import: true,
            machine: !later.machine && !later.import,
            nodes: !later.header_or_import,
        };
    };
    let adjacent = last.span.end as usize == word_start;
    let kind_at = |i: usize| prev.get(i).map(|t| t.kind);
    let n = prev.len();

    if last.kind == T::At && adjacent {
        return Context::Annotation(annotation_place(prev));
    }
    match top {
        Some(Open::Angle) => {
            return match last.kind {
                T::Lt => {
                    // `a <` with a space is more likely the start of `<-->` than a type.
                    let spaced = n >= 2
                        && kind_at(n - 2) == Some(T::Ident)
                        && prev[n - 2].span.end != last.span.start;
                    if spaced && word.is_empty() {
                        Context::Nothing
                    } else {
                        Context::Type
                    }
                }
                T::Comma => Context::Type,
                _ => Context::Nothing,
            };
        }
        Some(Open::Paren | Open::Bracket) => return Context::Nothing,
        Some(Open::Brace(Block::Import)) => {
            return match last.kind {
                T::Ident if n >= 2 && kind_at(n - 2) != Some(T::KwAs) => Context::ImportAs,
                _ => Context::Nothing,
            };
        }
        _ => {}
    }
    if last.kind == T::RBrace && closed == Some(Open::Brace(Block::Import)) {
        return Context::ImportFrom;
    }
    if is_label_start(last.kind) {
        return Context::Label;
    }
    if is_arrow_end(last.kind) {
        return Context::NodeName;
    }
    if last.kind == T::Str && n >= 2 && kind_at(n - 2).is_some_and(is_arrow_end) {
        return Context::NodeName;
    }
    let in_statements = matches!(block, None | Some(Block::Node));
    if last.kind == T::Comma {
        // Back over `name, name, …`: an arrow before it (targets) or a statement's start (sources).
        let mut k = n - 1;
        loop {
            let Some(name_end) = k.checked_sub(1) else {
                return Context::NodeName;
            };
            if kind_at(name_end) != Some(T::Ident) {
                return Context::Nothing;
            }
            let mut first = name_end;
            while first >= 2
                && kind_at(first - 1) == Some(T::Dot)
                && kind_at(first - 2) == Some(T::Ident)
            {
                first -= 2;
            }
            match first.checked_sub(1).map(|j| prev[j]) {
                None => return Context::NodeName,
                Some(t) if t.kind == T::Comma => k = first - 1,
                Some(t) if is_arrow_end(t.kind) => return Context::NodeName,
                Some(t)
                    if t.kind == T::Str
                        && first >= 2
                        && kind_at(first - 2).is_some_and(is_arrow_end) =>
                {
                    return Context::NodeName;
                }
                Some(t)
                    if in_statements
                        && (matches!(t.kind, T::Semi | T::LBrace | T::RBrace)
                            || starts_line(content, prev[first].span.start as usize)) =>
                {
                    return Context::NodeName;
                }
                Some(_) => return Context::Nothing,
            }
        }
    }
    let statement_start = matches!(last.kind, T::Semi | T::LBrace | T::RBrace)
        || (may_end_statement(last.kind) && starts_line(content, word_start));
    if !statement_start || !in_statements {
        return Context::Nothing;
    }
    let top_level = block.is_none();
    // Only imports so far: every `{` opens an import's names, every string is an import's path.
    let only_imports = top_level
        && prev.iter().enumerate().all(|(i, t)| match t.kind {
            T::KwImport
            | T::RBrace
            | T::Ident
            | T::Comma
            | T::Dot
            | T::KwAs
            | T::KwFrom
            | T::Semi => true,
            T::LBrace => i >= 1 && kind_at(i - 1) == Some(T::KwImport),
            T::Str => i >= 1 && kind_at(i - 1) == Some(T::KwFrom),
            _ => false,
        })
        && prev.first().is_some_and(|t| t.kind == T::KwImport);
    Context::Statement {
        import: only_imports,
        machine: only_imports && !later.machine && !later.import,
        // Nothing but imports and the header may come before them.
        nodes: !(only_imports && later.header_or_import),
    }
}

/// Where the annotation whose `@` ends `prev` is: in an arrow's label, on the header or on a node.
fn annotation_place(prev: &[Token]) -> Place {
    let before = &prev[..prev.len().saturating_sub(1)];
    // Back over label items to the label's start?
    let mut depth = 0usize;
    for t in before.iter().rev() {
        match t.kind {
            T::RParen => depth += 1,
            T::LParen => depth = depth.saturating_sub(1),
            _ if depth > 0 => {}
            k if is_label_start(k) => return Place::Edge,
            T::Ident
            | T::At
            | T::Str
            | T::Number
            | T::ExtId
            | T::Colon
            | T::Semi
            | T::Comma
            | T::Dot => {}
            _ => break,
        }
    }
    // Back over the annotations before this one to `machine "Title"`?
    let mut k = before.len();
    loop {
        let kind = |i: usize| before.get(i).map(|t| t.kind);
        let Some(last) = k.checked_sub(1) else {
            return Place::Node;
        };
        match kind(last) {
            Some(T::RParen) => {
                let mut depth = 0usize;
                let mut j = last;
                loop {
                    match kind(j) {
                        Some(T::RParen) => depth += 1,
                        Some(T::LParen) => depth -= 1,
                        _ => {}
                    }
                    if depth == 0 {
                        break;
                    }
                    let Some(i) = j.checked_sub(1) else {
                        return Place::Node;
                    };
                    j = i;
                }
                k = j;
            }
            Some(T::Ident) if last >= 1 && kind(last - 1) == Some(T::At) => k = last - 1,
            Some(T::Str) if last >= 1 && kind(last - 1) == Some(T::KwMachine) => {
                return Place::Machine;
            }
            _ => return Place::Node,
        }
    }
}

// ---- what the document holds ------------------------------------------------------------------

/// A node, all its declarations merged.
#[derive(Debug, Default)]
struct NodeInfo<'a> {
    /// The name as written, or the simple name.
    simple: String,
    /// The type, as first written.
    kind: Option<String>,
    title: Option<String>,
    attributes: Vec<&'a ast::Attribute>,
    /// Whether every declaration is a note, a style rule or a type (not a node of the graph).
    not_in_graph: bool,
}

/// What completion needs of the document.
#[derive(Debug, Default)]
struct Doc<'a> {
    text: &'a str,
    /// Declared nodes by qualified name (`checkout.pay`).
    nodes: BTreeMap<String, NodeInfo<'a>>,
    /// Names edges use that no declaration has.
    edge_names: Vec<String>,
    /// Types written in the document (`task`, `Implementation`).
    kinds: Vec<String>,
    /// Annotation names written in the document.
    annotations: Vec<String>,
    /// The machine's attributes (header and top level).
    machine_attributes: Vec<&'a ast::Attribute>,
}

impl<'a> Doc<'a> {
    fn read(text: &'a str, program: &'a ast::Program) -> Self {
        let mut doc = Doc {
            text,
            ..Doc::default()
        };
        let mut used = Vec::new();
        if let Some(header) = &program.header {
            doc.machine_attributes.extend(header.attributes.iter());
            doc.note_annotations(&header.annotations);
        }
        doc.machine_attributes
            .extend(program.items.iter().filter_map(|i| match i {
                ast::Item::Attribute(a) => Some(a),
                _ => None,
            }));
        doc.items(&program.items, "", &mut used);
        let declared: HashSet<String> = doc
            .nodes
            .iter()
            .flat_map(|(q, n)| [q.clone(), n.simple.clone()])
            .collect();
        let mut seen = HashSet::new();
        doc.edge_names = used
            .into_iter()
            .filter(|name| !declared.contains(name) && seen.insert(name.clone()))
            .collect();
        doc
    }

    fn note_annotations(&mut self, annotations: &[ast::Annotation]) {
        for a in annotations {
            if !self.annotations.contains(&a.name.text) {
                self.annotations.push(a.name.text.clone());
            }
        }
    }

    fn items(&mut self, items: &'a [ast::Item], prefix: &str, used: &mut Vec<String>) {
        for item in items {
            match item {
                ast::Item::Node(node) => {
                    let name = node.name.text();
                    let qualified = if prefix.is_empty() {
                        name
                    } else {
                        format!("{prefix}.{name}")
                    };
                    let kind = node.kind.as_ref().map(|k| k.text.clone());
                    if let Some(k) = &kind
                        && !self.kinds.contains(k)
                    {
                        self.kinds.push(k.clone());
                    }
                    self.note_annotations(&node.annotations);
                    let outside = kind.as_deref().is_some_and(|k| {
                        ["note", "style", "type"]
                            .iter()
                            .any(|t| k.eq_ignore_ascii_case(t))
                    });
                    let info = self
                        .nodes
                        .entry(qualified.clone())
                        .or_insert_with(|| NodeInfo {
                            simple: node.name.last().to_string(),
                            not_in_graph: true,
                            ..NodeInfo::default()
                        });
                    info.not_in_graph &= outside;
                    if info.kind.is_none()
                        || info
                            .kind
                            .as_deref()
                            .is_some_and(|k| k.eq_ignore_ascii_case("note"))
                    {
                        info.kind = kind.or(info.kind.take());
                    }
                    if info.title.is_none() {
                        info.title = node.title.as_ref().map(|t| t.value.clone());
                    }
                    info.attributes
                        .extend(node.items.iter().filter_map(|i| match i {
                            ast::Item::Attribute(a) => Some(a),
                            _ => None,
                        }));
                    self.items(&node.items, &qualified, used);
                }
                ast::Item::Edge(edge) => {
                    let names = edge
                        .sources
                        .iter()
                        .chain(edge.segments.iter().flat_map(|s| s.targets.iter()));
                    used.extend(names.map(ast::QName::text));
                    for segment in &edge.segments {
                        for group in &segment.labels {
                            for label in group {
                                if let ast::LabelItem::Annotation(a) = label {
                                    self.note_annotations(std::slice::from_ref(a));
                                }
                            }
                        }
                    }
                }
                ast::Item::Attribute(_) => {}
            }
        }
    }

    /// The text of `span`, as written.
    fn written(&self, span: Span) -> &str {
        self.text
            .get(span.start as usize..span.end as usize)
            .unwrap_or("")
            .trim_end_matches(';')
            .trim_end()
    }

    /// The nodes named `name`: the simple name, or the qualified one.
    fn find(&self, name: &str) -> Vec<&NodeInfo<'a>> {
        match self.nodes.get(name) {
            Some(node) => vec![node],
            None => self.nodes.values().filter(|n| n.simple == name).collect(),
        }
    }
}

fn is_context_like(node: &NodeInfo<'_>) -> bool {
    let data = [
        "context", "data", "input", "output", "result", "entity", "resource", "concept",
    ];
    node.kind
        .as_deref()
        .is_some_and(|k| data.iter().any(|d| k.eq_ignore_ascii_case(d)))
        || node.simple.to_ascii_lowercase().contains("context")
}

/// The item kind for a node, as the outline shows it.
fn node_kind(node: &NodeInfo<'_>, has_children: bool) -> CompletionItemKind {
    if is_context_like(node) {
        return CompletionItemKind::STRUCT;
    }
    match node.kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("task") => CompletionItemKind::FUNCTION,
        Some("state") => CompletionItemKind::ENUM_MEMBER,
        Some("tool") => CompletionItemKind::METHOD,
        _ if has_children => CompletionItemKind::MODULE,
        _ => CompletionItemKind::VARIABLE,
    }
}

fn describe_node(qualified: &str, node: &NodeInfo<'_>) -> String {
    let mut out = format!("{} {qualified}", node.kind.as_deref().unwrap_or("node"));
    if let Some(title) = &node.title {
        out.push_str(&format!(" — {title}"));
    }
    out
}

// ---- the offers -------------------------------------------------------------------------------

fn node_types(doc: &Doc<'_>, out: &mut Offer) {
    for (name, detail) in NODE_TYPES {
        // As the document writes it, when it does (`task` rather than `Task`).
        let label = doc
            .kinds
            .iter()
            .find(|k| k.eq_ignore_ascii_case(name))
            .map_or(*name, String::as_str);
        if out.seen.iter().any(|s| s.eq_ignore_ascii_case(label)) {
            continue;
        }
        out.push(label, CompletionItemKind::CLASS, detail, "1");
    }
    for kind in &doc.kinds {
        if !out.seen.iter().any(|s| s.eq_ignore_ascii_case(kind)) {
            out.push(
                kind,
                CompletionItemKind::CLASS,
                "node type used in this document",
                "1",
            );
        }
    }
}

/// The node names (qualified and simple), narrowed to those under `word`'s dotted part.
fn node_names(doc: &Doc<'_>, word: &str, out: &mut Offer) {
    let under = word.rfind('.').map(|i| &word[..=i]);
    let fits = |name: &str| under.is_none_or(|u| name.starts_with(u));
    let has_children = |q: &str| {
        let prefix = format!("{q}.");
        doc.nodes.keys().any(|k| k.starts_with(&prefix))
    };
    for (qualified, node) in doc.nodes.iter().filter(|(_, n)| !n.not_in_graph) {
        let kind = node_kind(node, has_children(qualified));
        let detail = describe_node(qualified, node);
        if fits(qualified) {
            out.push(qualified, kind, &detail, "2");
        }
        if fits(&node.simple) {
            out.push(&node.simple, kind, &detail, "2");
        }
    }
    for name in doc.edge_names.iter().filter(|n| fits(n)) {
        out.push(
            name,
            CompletionItemKind::REFERENCE,
            "named by an edge, not declared",
            "3",
        );
    }
    // `node.attribute` (an attribute port) after a node's name and a dot.
    if let Some(under) = under {
        let node = under.trim_end_matches('.');
        for info in doc.find(node) {
            for a in &info.attributes {
                let label = format!("{node}.{}", a.name.text);
                out.push(&label, CompletionItemKind::FIELD, doc.written(a.span), "4");
            }
        }
    }
}

fn annotations(doc: &Doc<'_>, place: Place, out: &mut Offer) {
    let bit = match place {
        Place::Machine => M,
        Place::Node => N,
        Place::Edge => E,
    };
    for (name, places, detail) in ANNOTATIONS {
        if places & bit != 0 {
            out.push(name, CompletionItemKind::PROPERTY, detail, "0");
        }
    }
    let known: HashSet<&str> = ANNOTATIONS.iter().map(|(n, _, _)| *n).collect();
    for name in &doc.annotations {
        if !known.contains(name.as_str()) {
            out.push(
                name,
                CompletionItemKind::PROPERTY,
                "annotation used in this document",
                "1",
            );
        }
    }
}

fn types(doc: &Doc<'_>, out: &mut Offer) {
    for (name, detail) in ATTRIBUTE_TYPES {
        out.push(name, CompletionItemKind::STRUCT, detail, "0");
    }
    for node in doc.nodes.values() {
        if node
            .kind
            .as_deref()
            .is_some_and(|k| k.eq_ignore_ascii_case("type"))
        {
            out.push(
                &node.simple,
                CompletionItemKind::CLASS,
                "a type of this document",
                "1",
            );
        }
    }
}

/// The variables of a template or a condition after `path` (`order.`, `ord`, `cfg.limits.`).
fn variables(doc: &Doc<'_>, path: &str, out: &mut Offer) {
    let parts: Vec<&str> = path.split('.').collect();
    let Some((_, within)) = parts.split_last() else {
        return;
    };
    if within.is_empty() {
        let mut nodes: Vec<(&String, &NodeInfo<'_>)> =
            doc.nodes.iter().filter(|(_, n)| !n.not_in_graph).collect();
        nodes.sort_by_key(|(_, n)| !is_context_like(n));
        for (qualified, node) in nodes {
            let detail = describe_node(qualified, node);
            if is_context_like(node) {
                out.push(&node.simple, CompletionItemKind::STRUCT, &detail, "0");
            } else if !node.attributes.is_empty() {
                out.push(&node.simple, node_kind(node, false), &detail, "1");
            }
        }
        for a in &doc.machine_attributes {
            out.push(
                &a.name.text,
                CompletionItemKind::FIELD,
                &format!("machine attribute: {}", doc.written(a.span)),
                "2",
            );
        }
        for (name, detail) in BUILT_IN_VARIABLES {
            out.push(name, CompletionItemKind::VARIABLE, detail, "3");
        }
        return;
    }
    // The attributes the first part names: a node's (all its declarations) or a machine attribute's.
    let first = within[0];
    let mut fields: Vec<&ast::Attribute> = doc
        .find(first)
        .into_iter()
        .flat_map(|n| n.attributes.iter().copied())
        .collect();
    if fields.is_empty()
        && let Some(a) = doc.machine_attributes.iter().find(|a| a.name.text == first)
        && let Some(ast::Value::Object(inner, _)) = &a.value
    {
        fields = inner.iter().collect();
    }
    // Then into object values, one part at a time.
    for part in &within[1..] {
        fields = match fields
            .iter()
            .rev()
            .find(|a| a.name.text == *part)
            .and_then(|a| a.value.as_ref())
        {
            Some(ast::Value::Object(inner, _)) => inner.iter().collect(),
            _ => Vec::new(),
        };
    }
    for a in fields {
        out.push(
            &a.name.text,
            CompletionItemKind::FIELD,
            doc.written(a.span),
            "0",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The labels offered where `|` stands in `marked`.
    fn labels(marked: &str) -> Vec<String> {
        let at = marked.find('|').unwrap();
        let text = marked.replacen('|', "", 1);
        let position = text::position(&text, at);
        complete(&text, position)
            .into_iter()
            .map(|i| i.label)
            .collect()
    }

    fn offers(marked: &str, wanted: &[&str]) {
        let got = labels(marked);
        for w in wanted {
            assert!(
                got.iter().any(|g| g == w),
                "{w} not offered in {marked:?}: {got:?}"
            );
        }
    }

    fn refuses(marked: &str, unwanted: &[&str]) {
        let got = labels(marked);
        for u in unwanted {
            assert!(
                !got.iter().any(|g| g == u),
                "{u} offered in {marked:?}: {got:?}"
            );
        }
    }

    const SHOP: &str = "machine \"Shop\" { region: \"eu\"; cfg: { limits: { max: 3; }; }; }\nContext order { total<number>: 0; items<Array<string>>: []; }\nProcess checkout {\n  Task pay \"Pay\" @Async { prompt: \"Pay {{ order.total }}\"; }\n  State done;\n}\ntype Address { street<string>; }\n";

    #[test]
    fn edge_ends_offer_qualified_and_simple_names() {
        let doc = format!("{SHOP}start -> |");
        offers(
            &doc,
            &["checkout", "checkout.pay", "pay", "checkout.done", "order"],
        );
        refuses(&doc, &["Address", "Task", "machine"]);
        offers(
            &format!("{SHOP}start --> checkout.|"),
            &["checkout.pay", "checkout.done"],
        );
        refuses(&format!("{SHOP}start --> checkout.|"), &["order", "pay"]);
        offers(&format!("{SHOP}start -> pay, |\nState x;"), &["done"]);
        offers(&format!("{SHOP}start -> \"1\" |"), &["done"]);
        offers(&format!("{SHOP}a, |"), &["done"]);
        offers(&format!("{SHOP}start -when: 'x'-> d|;"), &["done", "start"]);
        // Attribute ports after a node's name.
        offers(&format!("{SHOP}pay -> order.|"), &["order.total"]);
    }

    #[test]
    fn statements_start_with_keywords_types_and_names() {
        offers("|", &["machine", "import", "Task", "State", "Context"]);
        offers(
            "import { A } from \"./a.dy\";\n|\nstate x;\n",
            &["machine", "import", "Task"],
        );
        let doc = format!("{SHOP}|");
        offers(
            &doc,
            &["Task", "Context", "note", "type", "checkout", "order"],
        );
        refuses(&doc, &["machine", "import", "string", "Async"]);
        // The document's own case wins; unknown types it uses are offered too.
        offers(
            "machine \"m\"\ntask a;\nImplementation b;\n|",
            &["task", "Implementation", "State"],
        );
        refuses("machine \"m\"\ntask a;\n|", &["Task"]);
        // In a node's block, after `;` or on a new line without it.
        offers(
            &format!("{SHOP}Process p {{\n  Task a\n  |\n}}"),
            &["Task", "pay"],
        );
        offers(&format!("{SHOP}Process p {{ Task a; S| }}"), &["State"]);
        // Not where a name is being declared, nor in attribute blocks.
        refuses(&format!("{SHOP}Task |"), &["Task", "pay"]);
        refuses("machine \"m\" {\n  |\n}\n", &["Task"]);
        refuses(&format!("{SHOP}a -> b {{\n  |\n}}"), &["Task"]);
        refuses(&format!("{SHOP}Context c {{ x: {{\n  |\n}}; }}"), &["Task"]);
    }

    #[test]
    fn annotations_fit_their_place() {
        offers(&format!("{SHOP}Task t @|"), &["Async", "Critical", "start"]);
        refuses(&format!("{SHOP}Task t @|"), &["auto", "StrictMode"]);
        offers("machine \"m\" @|", &["StrictMode", "meta", "Version"]);
        offers(
            &format!("{SHOP}a -@|"),
            &["auto", "barrier", "map", "async"],
        );
        offers(&format!("{SHOP}a -when: 'x'; @a|-> b;"), &["auto"]);
        refuses(&format!("{SHOP}a -@|"), &["Critical"]);
        offers(&format!("{SHOP}Task t @Version(\"1\") @|"), &["Async"]);
    }

    #[test]
    fn types_after_lt_and_in_type_arguments() {
        offers(
            &format!("{SHOP}Context c {{ n<| }}"),
            &["string", "number", "boolean", "Array", "Map", "Address"],
        );
        offers(&format!("{SHOP}Context c {{ n<Array<| }}"), &["Date"]);
        offers(
            &format!("{SHOP}Context c {{ n<Map<string, | }}"),
            &["number"],
        );
        offers("machine \"m\" { when<Da| }", &["Date"]);
        refuses(&format!("{SHOP}Context c {{ n<number>| }}"), &["string"]);
        refuses(&format!("{SHOP}a <|"), &["string"]);
    }

    #[test]
    fn templates_and_conditions_offer_variables() {
        let doc = format!("{SHOP}Task t {{ prompt: \"Total {{{{ order.| }}}}\"; }}");
        offers(&doc, &["total", "items"]);
        refuses(&doc, &["prompt", "order"]);
        // Still open, the string unterminated.
        offers(
            &format!("{SHOP}Task t {{ prompt: \"Total {{{{ order.t|"),
            &["total"],
        );
        let top = format!("{SHOP}Task t {{ prompt: \"{{{{ | }}}}\"; }}");
        offers(
            &top,
            &["order", "pay", "region", "errorCount", "activeState"],
        );
        refuses(&top, &["checkout", "done", "Address"]);
        offers(
            &format!("{SHOP}Task t {{ prompt: \"{{{{ cfg.limits.| }}}}\"; }}"),
            &["max"],
        );
        // Conditions need no braces.
        offers(&format!("{SHOP}pay -when: 'order.|'-> done;"), &["total"]);
        offers(&format!("{SHOP}pay -unless: \"ord|\"-> done;"), &["order"]);
        offers(
            &format!("{SHOP}pay -> done {{ when: 'order.| > 1'; }}"),
            &["total"],
        );
        // Plain strings, closed templates and comments offer nothing.
        assert!(labels(&format!("{SHOP}Task t {{ prompt: \"order.|\"; }}")).is_empty());
        assert!(
            labels(&format!(
                "{SHOP}Task t {{ prompt: \"{{{{ order }}}} |\"; }}"
            ))
            .is_empty()
        );
        assert!(labels(&format!("{SHOP}// start -> |\n")).is_empty());
        assert!(labels(&format!("{SHOP}/* start -> | */\n")).is_empty());
    }

    #[test]
    fn labels_and_imports() {
        offers(&format!("{SHOP}pay -|"), &["when", "unless", "writes"]);
        offers("import { A |", &["as"]);
        offers("import { A, B as C } |", &["from"]);
        refuses("import { A as |", &["as"]);
    }

    #[test]
    fn any_position_of_any_prefix_is_answered() {
        let text = format!(
            "{SHOP}// é𝄞 \"\nTask t \"é𝄞\" @Async {{ prompt: '{{{{ order.tot }}}} ü'; n<Map<string, Date>>: {{}}; }}\nt -when: \"order.total > 0\"; @auto-> \"1\" checkout.pay, done {{ w: 1 }}\n/* open"
        );
        for end in (0..=text.len()).filter(|i| text.is_char_boundary(*i)) {
            let prefix = &text[..end];
            for at in (0..=prefix.len())
                .filter(|i| prefix.is_char_boundary(*i))
                .step_by(13)
            {
                complete(prefix, text::position(prefix, at));
            }
            complete(prefix, text::position(prefix, prefix.len()));
            super::super::tokens::tokens(prefix);
        }
    }

    #[test]
    fn words_start_after_any_character() {
        assert_eq!(path_start("a é{{ order.to"), "a é{{ ".len());
        assert_eq!(path_start("éorder"), "é".len());
        assert_eq!(path_start("order"), 0);
        assert_eq!(path_start("x "), 2);
        offers(
            &format!("{SHOP}pay -when: 'é{{{{ order.|'-> done;"),
            &["total"],
        );
        assert!(
            labels(&format!("{SHOP}pay -when: 'ü|'-> done;"))
                .iter()
                .any(|l| l == "order")
        );
    }

    #[test]
    fn items_replace_the_word_being_written() {
        let text = format!("{SHOP}start -> checkout.p");
        let end = text::position(&text, text.len());
        let items = complete(&text, end);
        let pay = items.iter().find(|i| i.label == "checkout.pay").unwrap();
        let Some(CompletionTextEdit::Edit(edit)) = &pay.text_edit else {
            panic!("{pay:?}")
        };
        assert_eq!(
            edit.range.start.character,
            end.character - "checkout.p".len() as u32
        );
        assert_eq!(edit.range.end, end);
        assert_eq!(pay.kind, Some(CompletionItemKind::FUNCTION));
        assert_eq!(pay.detail.as_deref(), Some("Task checkout.pay — Pay"));
    }
}
