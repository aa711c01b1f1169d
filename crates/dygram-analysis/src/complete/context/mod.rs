//! Where the cursor is ([`Context`]), from the tokens before it: in a comment or a string (a
//! template or a condition), after `@`, an arrow, a `<` of a type, in an import, at the start of a
//! statement… (`classify` reads the tokens, `nesting` what is open, `patterns` the shapes
//! of tokens it looks back over).

mod classify;
mod nesting;
mod patterns;

use super::annotations::Place;
use dygram_syntax::lexer::{Token, TokenKind as T};

/// What the cursor is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Context {
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

/// The context at byte `at` and where the word being written starts.
pub(super) fn context(content: &str, tokens: &[Token], at: usize) -> (Context, usize) {
    if let Some(context) = in_string_or_comment(content, tokens, at) {
        return (context, at);
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
    let later = Later::of(tokens, word_start, word, at);
    (
        classify::classify(content, &prev, word_start, word, &later),
        word_start,
    )
}

/// The context when `at` is in a string (a token around the cursor, or one left open on the
/// cursor's line) or a comment; `None` elsewhere.
fn in_string_or_comment(content: &str, tokens: &[Token], at: usize) -> Option<Context> {
    if let Some(string) = tokens
        .iter()
        .find(|t| t.kind == T::Str && (t.span.start as usize) < at && at < t.span.end as usize)
    {
        return Some(in_string(content, tokens, string.span.start as usize, at));
    }
    let gap_start = tokens
        .iter()
        .rfind(|t| t.kind != T::Eof && (t.span.end as usize) <= at)
        .map_or(0, |t| t.span.end as usize);
    match in_trivia(content, gap_start, at) {
        Trivia::Comment => Some(Context::Nothing),
        Trivia::String(start) => Some(in_string(content, tokens, start, at)),
        Trivia::None => None,
    }
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

impl Later {
    /// What `tokens` have besides the word `word` at `word_start`, the cursor at `at`.
    fn of(tokens: &[Token], word_start: usize, word: &str, at: usize) -> Self {
        // The keyword being written is not one the document has.
        let elsewhere = |t: &&Token| t.span.start as usize != word_start || word.is_empty();
        let after = |t: &&Token| (t.span.start as usize) >= at && elsewhere(t);
        Later {
            machine: tokens
                .iter()
                .filter(elsewhere)
                .any(|t| t.kind == T::KwMachine),
            header_or_import: tokens
                .iter()
                .filter(after)
                .any(|t| matches!(t.kind, T::KwMachine | T::KwImport)),
            import: tokens.iter().filter(after).any(|t| t.kind == T::KwImport),
        }
    }
}

/// What the gap between the last token and the cursor leaves the cursor in.
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

#[cfg(test)]
mod tests {
    use super::path_start;
    use crate::complete::tests::{SHOP, labels, offers};

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
}
