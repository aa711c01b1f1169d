//! The shapes of tokens the context is told by, read backwards from a point: arrows and label
//! starts, a statement's possible end, a dotted name, a parenthesised group, annotations.

use dygram_syntax::lexer::{Token, TokenKind as T};

/// The kind of `tokens[i]`, if there is one.
pub(super) fn kind_at(tokens: &[Token], i: usize) -> Option<T> {
    tokens.get(i).map(|t| t.kind)
}

/// Whether an arrow ends with this token (a node's name may follow).
pub(super) fn is_arrow_end(kind: T) -> bool {
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

/// Whether an arrow's label starts with this token.
pub(super) fn is_label_start(kind: T) -> bool {
    matches!(kind, T::Dash | T::DoubleStart | T::FatStart)
}

/// Whether a statement may end with this token (the `;` being optional).
pub(super) fn may_end_statement(kind: T) -> bool {
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
pub(super) fn starts_line(content: &str, at: usize) -> bool {
    let line_start = content[..at].rfind('\n').map_or(0, |i| i + 1);
    content[line_start..at].trim().is_empty()
}

/// Whether `tokens[i]` is a string right after an arrow (a multiplicity, `-> "1" b`).
pub(super) fn is_multiplicity(tokens: &[Token], i: usize) -> bool {
    kind_at(tokens, i) == Some(T::Str) && i >= 1 && kind_at(tokens, i - 1).is_some_and(is_arrow_end)
}

/// The first token of the dotted name (`a.b.c`) whose last part is `tokens[last]`.
pub(super) fn qualified_start(tokens: &[Token], last: usize) -> usize {
    let mut first = last;
    while first >= 2
        && kind_at(tokens, first - 1) == Some(T::Dot)
        && kind_at(tokens, first - 2) == Some(T::Ident)
    {
        first -= 2;
    }
    first
}

/// The `(` matching the `)` at `tokens[close]`; `None` when the tokens start before it.
fn matching_paren(tokens: &[Token], close: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut k = close;
    loop {
        match kind_at(tokens, k) {
            Some(T::RParen) => depth += 1,
            Some(T::LParen) => depth -= 1,
            None => return None,
            _ => {}
        }
        if depth == 0 {
            return Some(k);
        }
        k = k.checked_sub(1)?;
    }
}

/// Back over the annotations (`@name`, `@name(…)`) ending just before `tokens[end]`: where they
/// start (`end` when there are none); `None` when a `)` has no `(`.
pub(super) fn annotations_start(tokens: &[Token], mut end: usize) -> Option<usize> {
    loop {
        let Some(last) = end.checked_sub(1) else {
            return Some(0);
        };
        match kind_at(tokens, last) {
            Some(T::RParen) => end = matching_paren(tokens, last)?,
            Some(T::Ident) if last >= 1 && kind_at(tokens, last - 1) == Some(T::At) => {
                end = last - 1;
            }
            _ => return Some(end),
        }
    }
}
