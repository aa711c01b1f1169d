//! The context after the tokens before the word being written: what is open there, and the last
//! tokens (an `@`, an arrow, a label's start, a `,` of a list of names, a statement's end).

use super::nesting::{Block, Nesting, Open};
use super::patterns::{
    annotations_start, is_arrow_end, is_label_start, is_multiplicity, kind_at, may_end_statement,
    qualified_start, starts_line,
};
use super::{Context, Later, Place};
use dygram_syntax::lexer::{Token, TokenKind as T};

/// The context after the tokens `prev`, where the word `word` starts at `word_start`.
pub(super) fn classify(
    content: &str,
    prev: &[Token],
    word_start: usize,
    word: &str,
    later: &Later,
) -> Context {
    let nesting = Nesting::of(prev);
    let Some(last) = prev.last().copied() else {
        return Context::Statement {
            import: true,
            machine: !later.machine && !later.import,
            nodes: !later.header_or_import,
        };
    };
    if last.kind == T::At && last.span.end as usize == word_start {
        return Context::Annotation(annotation_place(prev));
    }
    if let Some(context) = in_brackets(prev, nesting.top(), word) {
        return context;
    }
    if let Some(context) = after_edge_part(prev, nesting.closed) {
        return context;
    }
    let in_statements = matches!(nesting.block(), None | Some(Block::Node));
    if last.kind == T::Comma {
        return after_comma(content, prev, in_statements);
    }
    statement(content, prev, last, word_start, nesting.block(), later)
}

/// The context when what is open innermost is a bracket or an import's names; `None` otherwise.
fn in_brackets(prev: &[Token], top: Option<Open>, word: &str) -> Option<Context> {
    let n = prev.len();
    let last = prev.last()?;
    let context = match top? {
        Open::Angle => match last.kind {
            T::Lt => after_lt(prev, word),
            T::Comma => Context::Type,
            _ => Context::Nothing,
        },
        Open::Paren | Open::Bracket => Context::Nothing,
        Open::Brace(Block::Import) => match last.kind {
            T::Ident if n >= 2 && kind_at(prev, n - 2) != Some(T::KwAs) => Context::ImportAs,
            _ => Context::Nothing,
        },
        Open::Brace(_) => return None,
    };
    Some(context)
}

/// After the `<` ending `prev`: a type.
fn after_lt(prev: &[Token], word: &str) -> Context {
    let n = prev.len();
    // `a <` with a space is more likely the start of `<-->` than a type.
    let spaced = n >= 2
        && kind_at(prev, n - 2) == Some(T::Ident)
        && prev[n - 2].span.end != prev[n - 1].span.start;
    if spaced && word.is_empty() {
        Context::Nothing
    } else {
        Context::Type
    }
}

/// The context after the end of an import's names, a label's start, an arrow or a multiplicity;
/// `None` after anything else. `closed`: what the last token closed.
fn after_edge_part(prev: &[Token], closed: Option<Open>) -> Option<Context> {
    let last = prev.last()?;
    if last.kind == T::RBrace && closed == Some(Open::Brace(Block::Import)) {
        return Some(Context::ImportFrom);
    }
    if is_label_start(last.kind) {
        return Some(Context::Label);
    }
    if is_arrow_end(last.kind) || is_multiplicity(prev, prev.len() - 1) {
        return Some(Context::NodeName);
    }
    None
}

/// After the `,` ending `prev`: a node's name when it continues a list of names an edge starts or
/// ends with.
fn after_comma(content: &str, prev: &[Token], in_statements: bool) -> Context {
    // Back over `name, name, …`: an arrow before it (targets) or a statement's start (sources).
    let mut comma = prev.len().saturating_sub(1);
    loop {
        let Some(name_end) = comma.checked_sub(1) else {
            return Context::NodeName;
        };
        if kind_at(prev, name_end) != Some(T::Ident) {
            return Context::Nothing;
        }
        let first = qualified_start(prev, name_end);
        match first.checked_sub(1) {
            Some(before) if kind_at(prev, before) == Some(T::Comma) => comma = before,
            _ if list_of_ends(content, prev, first, in_statements) => return Context::NodeName,
            _ => return Context::Nothing,
        }
    }
}

/// Whether a list of names starting at `prev[first]` (and no `,` before it) is an edge's: after
/// an arrow or a multiplicity (targets), or at a statement's start (sources).
fn list_of_ends(content: &str, prev: &[Token], first: usize, in_statements: bool) -> bool {
    let Some(before) = first.checked_sub(1) else {
        return true;
    };
    let kind = prev[before].kind;
    is_arrow_end(kind)
        || is_multiplicity(prev, before)
        || (in_statements
            && (matches!(kind, T::Semi | T::LBrace | T::RBrace)
                || starts_line(content, prev[first].span.start as usize)))
}

/// The context at a statement's start (after `last`, the last of `prev`), where only statements
/// may be written (the top level, or a node's `block`).
fn statement(
    content: &str,
    prev: &[Token],
    last: Token,
    word_start: usize,
    block: Option<Block>,
    later: &Later,
) -> Context {
    let statement_start = matches!(last.kind, T::Semi | T::LBrace | T::RBrace)
        || (may_end_statement(last.kind) && starts_line(content, word_start));
    let in_statements = matches!(block, None | Some(Block::Node));
    if !statement_start || !in_statements {
        return Context::Nothing;
    }
    let only_imports = block.is_none() && only_imports(prev);
    Context::Statement {
        import: only_imports,
        machine: only_imports && !later.machine && !later.import,
        // Nothing but imports and the header may come before them.
        nodes: !(only_imports && later.header_or_import),
    }
}

/// Whether `prev` (at the top level) is imports only: every `{` opens an import's names, every
/// string is an import's path.
fn only_imports(prev: &[Token]) -> bool {
    prev.iter().enumerate().all(|(i, t)| match t.kind {
        T::KwImport | T::RBrace | T::Ident | T::Comma | T::Dot | T::KwAs | T::KwFrom | T::Semi => {
            true
        }
        T::LBrace => i >= 1 && kind_at(prev, i - 1) == Some(T::KwImport),
        T::Str => i >= 1 && kind_at(prev, i - 1) == Some(T::KwFrom),
        _ => false,
    }) && prev.first().is_some_and(|t| t.kind == T::KwImport)
}

/// Where the annotation whose `@` ends `prev` is: in an arrow's label, on the header or on a node.
fn annotation_place(prev: &[Token]) -> Place {
    let before = &prev[..prev.len().saturating_sub(1)];
    if in_label(before) {
        Place::Edge
    } else if on_header(before) {
        Place::Machine
    } else {
        Place::Node
    }
}

/// Whether `before` ends in an arrow's label: back over label items to the label's start.
fn in_label(before: &[Token]) -> bool {
    let mut depth = 0usize;
    for t in before.iter().rev() {
        match t.kind {
            T::RParen => depth += 1,
            T::LParen => depth = depth.saturating_sub(1),
            _ if depth > 0 => {}
            k if is_label_start(k) => return true,
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
    false
}

/// Whether `before` ends in `machine "Title"` and annotations.
fn on_header(before: &[Token]) -> bool {
    let Some(end) = annotations_start(before, before.len()) else {
        return false;
    };
    let Some(title) = end.checked_sub(1) else {
        return false;
    };
    kind_at(before, title) == Some(T::Str)
        && title >= 1
        && kind_at(before, title - 1) == Some(T::KwMachine)
}

#[cfg(test)]
mod tests {
    use crate::complete::tests::{SHOP, offers, refuses};

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
}
