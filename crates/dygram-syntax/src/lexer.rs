//! Turns source text into tokens.
//!
//! Whitespace, `// line` and `/* block */` comments are skipped. At each position the first rule
//! that matches wins, in this order: punctuation and the keywords `machine import from as` (a
//! keyword or `<`/`#` gives way to a longer arrow, identifier or external reference starting at the
//! same place), the arrows from the most specific to the least (`<-->`, `<--label-->`, `<|--`,
//! `*-->`, `o-->`, `-->`, `--`, `=>`, `=`, `->`, `-`), identifiers, strings, numbers and `#refs`.
//! So `-` is always an arrow token (numbers are unsigned) and `o-->` is an arrow even without
//! spaces around it.

use crate::source::Span;

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// `[A-Za-z_][A-Za-z0-9_]*`, not a keyword.
    Ident,
    /// `machine`.
    KwMachine,
    /// `import`.
    KwImport,
    /// `from`.
    KwFrom,
    /// `as`.
    KwAs,
    /// A quoted string (double or single quotes; may span lines).
    Str,
    /// An unsigned number.
    Number,
    /// `#name`: a reference to something outside the machine.
    ExtId,
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `;`
    Semi,
    /// `:`
    Colon,
    /// `<`
    Lt,
    /// `>`
    Gt,
    /// `,`
    Comma,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `@`
    At,
    /// `.`
    Dot,
    /// `#` alone.
    Hash,
    /// `|`
    Pipe,
    /// `?`
    Question,
    /// `<-->`
    BiArrow,
    /// `<--label-->` (one token).
    BiLabeled,
    /// `<|--`
    InheritArrow,
    /// `*-->`
    ComposeArrow,
    /// `o-->`
    AggregateArrow,
    /// `-->`
    DoubleArrow,
    /// `--` (starts a labelled `-->`).
    DoubleStart,
    /// `=>`
    FatArrow,
    /// `=` (starts a labelled `=>`).
    FatStart,
    /// `->`
    Arrow,
    /// `-` (starts a labelled `->`).
    Dash,
    /// End of input.
    Eof,
}

impl TokenKind {
    /// How the token is named in messages.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Ident => "a name",
            Self::KwMachine => "`machine`",
            Self::KwImport => "`import`",
            Self::KwFrom => "`from`",
            Self::KwAs => "`as`",
            Self::Str => "a string",
            Self::Number => "a number",
            Self::ExtId => "a #reference",
            Self::LBrace => "`{`",
            Self::RBrace => "`}`",
            Self::Semi => "`;`",
            Self::Colon => "`:`",
            Self::Lt => "`<`",
            Self::Gt => "`>`",
            Self::Comma => "`,`",
            Self::LBracket => "`[`",
            Self::RBracket => "`]`",
            Self::LParen => "`(`",
            Self::RParen => "`)`",
            Self::At => "`@`",
            Self::Dot => "`.`",
            Self::Hash => "`#`",
            Self::Pipe => "`|`",
            Self::Question => "`?`",
            Self::BiArrow => "`<-->`",
            Self::BiLabeled => "a labelled `<--…-->`",
            Self::InheritArrow => "`<|--`",
            Self::ComposeArrow => "`*-->`",
            Self::AggregateArrow => "`o-->`",
            Self::DoubleArrow => "`-->`",
            Self::DoubleStart => "`--`",
            Self::FatArrow => "`=>`",
            Self::FatStart => "`=`",
            Self::Arrow => "`->`",
            Self::Dash => "`-`",
            Self::Eof => "the end of the file",
        }
    }

    /// Whether this token can start an edge segment (an arrow or the start of a labelled one).
    pub fn is_arrow_start(self) -> bool {
        matches!(
            self,
            Self::BiArrow
                | Self::BiLabeled
                | Self::InheritArrow
                | Self::ComposeArrow
                | Self::AggregateArrow
                | Self::DoubleArrow
                | Self::DoubleStart
                | Self::FatArrow
                | Self::FatStart
                | Self::Arrow
                | Self::Dash
        )
    }

    /// Whether this token is a single value (`#ref`, string, name or number).
    pub fn is_primitive(self) -> bool {
        matches!(self, Self::ExtId | Self::Str | Self::Ident | Self::Number)
    }
}

/// A token and where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    /// What it is.
    pub kind: TokenKind,
    /// Where it is.
    pub span: Span,
}

/// Something the lexer could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError {
    /// What went wrong.
    pub message: String,
    /// Where.
    pub span: Span,
}

/// The tokens of `text` (ending with [`TokenKind::Eof`]) and the lexing errors.
pub fn lex(text: &str) -> (Vec<Token>, Vec<LexError>) {
    let (tokens, errors, _) = lex_with_comments(text);
    (tokens, errors)
}

/// [`lex`], and where the comments are (an unterminated `/*` runs to the end of the text).
pub fn lex_with_comments(text: &str) -> (Vec<Token>, Vec<LexError>, Vec<Span>) {
    let bytes = text.as_bytes();
    let mut tokens = Vec::with_capacity(text.len() / 4);
    let mut errors = Vec::new();
    let mut comments = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if let Some(next) = skip_trivia(bytes, i, &mut errors) {
            if bytes[i] == b'/' {
                comments.push(Span::new(i, next));
            }
            i = next;
            continue;
        }
        match scan(text, i) {
            Scanned::Token(kind, len) => {
                tokens.push(Token {
                    kind,
                    span: Span::new(i, i + len),
                });
                i += len;
            }
            Scanned::Error(error, next) => {
                errors.push(error);
                i = next;
            }
        }
    }
    tokens.push(Token {
        kind: TokenKind::Eof,
        span: Span::new(bytes.len(), bytes.len()),
    });
    (tokens, errors, comments)
}

/// Where the text goes on after whitespace or a comment at `i`; `None` when a token starts there.
#[inline]
fn skip_trivia(bytes: &[u8], i: usize, errors: &mut Vec<LexError>) -> Option<usize> {
    let b = bytes[i];
    if b.is_ascii_whitespace() {
        return Some(i + 1);
    }
    if b != b'/' {
        return None;
    }
    match bytes.get(i + 1) {
        Some(b'/') => {
            let mut end = i;
            while end < bytes.len() && bytes[end] != b'\n' && bytes[end] != b'\r' {
                end += 1;
            }
            Some(end)
        }
        Some(b'*') => match find(bytes, i + 2, b"*/") {
            Some(end) => Some(end + 2),
            None => {
                errors.push(LexError {
                    message: "unterminated comment: `/*` without `*/`".into(),
                    span: Span::new(i, i + 2),
                });
                Some(bytes.len())
            }
        },
        _ => None,
    }
}

/// What starts at `i`: a token and its length, or an error and where lexing goes on.
enum Scanned {
    Token(TokenKind, usize),
    Error(LexError, usize),
}

#[inline]
fn scan(text: &str, i: usize) -> Scanned {
    let bytes = text.as_bytes();
    let rest = &bytes[i..];
    if let Some((kind, len)) = symbol(rest) {
        return Scanned::Token(kind, len);
    }
    match rest[0] {
        b'"' | b'\'' => match string_len(rest) {
            Some(n) => Scanned::Token(TokenKind::Str, n),
            None => {
                // Unterminated: report it once and skip the rest of the line.
                let end = rest
                    .iter()
                    .skip(1)
                    .position(|&b| b == b'\n')
                    .map_or(bytes.len(), |p| i + 1 + p);
                let error = LexError {
                    message: "unterminated string".into(),
                    span: Span::new(i, end),
                };
                Scanned::Error(error, end)
            }
        },
        b'0'..=b'9' => Scanned::Token(TokenKind::Number, number_len(rest)),
        b'A'..=b'Z' | b'a'..=b'z' | b'_' => {
            let n = ident_len(rest, true);
            let kind = match &rest[..n] {
                b"machine" => TokenKind::KwMachine,
                b"import" => TokenKind::KwImport,
                b"from" => TokenKind::KwFrom,
                b"as" => TokenKind::KwAs,
                _ => TokenKind::Ident,
            };
            Scanned::Token(kind, n)
        }
        _ => {
            let end = unexpected_end(text, i);
            let error = LexError {
                message: format!("unexpected character `{}`", text.get(i..end).unwrap_or("?")),
                span: Span::new(i, end),
            };
            Scanned::Error(error, end)
        }
    }
}

/// The punctuation, arrow or `#id` token at the start of `rest`.
#[inline]
fn symbol(rest: &[u8]) -> Option<(TokenKind, usize)> {
    let one = |kind| Some((kind, 1));
    match rest[0] {
        b'{' => one(TokenKind::LBrace),
        b'}' => one(TokenKind::RBrace),
        b';' => one(TokenKind::Semi),
        b':' => one(TokenKind::Colon),
        b'>' => one(TokenKind::Gt),
        b',' => one(TokenKind::Comma),
        b'[' => one(TokenKind::LBracket),
        b']' => one(TokenKind::RBracket),
        b'(' => one(TokenKind::LParen),
        b')' => one(TokenKind::RParen),
        b'@' => one(TokenKind::At),
        b'.' => one(TokenKind::Dot),
        b'|' => one(TokenKind::Pipe),
        b'?' => one(TokenKind::Question),
        b'<' if rest.starts_with(b"<-->") => Some((TokenKind::BiArrow, 4)),
        b'<' => match labelled_bidirectional(rest) {
            Some(n) => Some((TokenKind::BiLabeled, n)),
            None if rest.starts_with(b"<|--") => Some((TokenKind::InheritArrow, 4)),
            None => one(TokenKind::Lt),
        },
        b'#' => match ident_len(&rest[1..], false) {
            0 => one(TokenKind::Hash),
            n => Some((TokenKind::ExtId, n + 1)),
        },
        b'*' if rest.starts_with(b"*-->") => Some((TokenKind::ComposeArrow, 4)),
        b'o' if rest.starts_with(b"o-->") => Some((TokenKind::AggregateArrow, 4)),
        b'-' if rest.starts_with(b"-->") => Some((TokenKind::DoubleArrow, 3)),
        b'-' if rest.starts_with(b"--") => Some((TokenKind::DoubleStart, 2)),
        b'-' if rest.starts_with(b"->") => Some((TokenKind::Arrow, 2)),
        b'-' => one(TokenKind::Dash),
        b'=' if rest.starts_with(b"=>") => Some((TokenKind::FatArrow, 2)),
        b'=' => one(TokenKind::FatStart),
        _ => None,
    }
}

/// The end of the unexpected character at `i` and those right after it that start no token (one
/// error for the run of them).
fn unexpected_end(text: &str, i: usize) -> usize {
    let ch = text[i..].chars().next().unwrap_or('?');
    let mut end = i + ch.len_utf8();
    while let Some(c) = text[end..].chars().next() {
        if c.is_ascii() && (starts_token(c as u8) || c.is_ascii_whitespace()) {
            break;
        }
        end += c.len_utf8();
    }
    end
}

fn starts_token(b: u8) -> bool {
    matches!(
        b,
        b'{' | b'}'
            | b';'
            | b':'
            | b'<'
            | b'>'
            | b','
            | b'['
            | b']'
            | b'('
            | b')'
            | b'@'
            | b'.'
            | b'#'
            | b'|'
            | b'?'
            | b'-'
            | b'='
            | b'"'
            | b'\''
            | b'/'
            | b'0'..=b'9'
            | b'A'..=b'Z'
            | b'a'..=b'z'
            | b'_'
    )
}

fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Length of `[A-Za-z_][A-Za-z0-9_]*` (or `[A-Za-z0-9_]+` when `!first_alpha`) at the start.
fn ident_len(bytes: &[u8], first_alpha: bool) -> usize {
    let mut n = 0;
    for &b in bytes {
        let ok = b.is_ascii_alphanumeric() || b == b'_';
        if !ok || (n == 0 && first_alpha && b.is_ascii_digit()) {
            break;
        }
        n += 1;
    }
    n
}

/// `<--[A-Za-z0-9_]+-?-?>`
fn labelled_bidirectional(bytes: &[u8]) -> Option<usize> {
    let rest = bytes.strip_prefix(b"<--")?;
    let word = rest
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
        .count();
    if word == 0 {
        return None;
    }
    let mut n = 3 + word;
    for _ in 0..2 {
        if bytes.get(n) == Some(&b'-') {
            n += 1;
        }
    }
    (bytes.get(n) == Some(&b'>')).then_some(n + 1)
}

/// Length of a quoted string at the start (quotes included), if it is terminated.
fn string_len(bytes: &[u8]) -> Option<usize> {
    let quote = bytes[0];
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b if b == quote => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// `[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?`
fn number_len(bytes: &[u8]) -> usize {
    let digits = |from: usize| {
        bytes
            .get(from..)
            .map_or(0, |r| r.iter().take_while(|b| b.is_ascii_digit()).count())
    };
    let mut n = digits(0);
    if bytes.get(n) == Some(&b'.') {
        let d = digits(n + 1);
        if d > 0 {
            n += 1 + d;
        }
    }
    if matches!(bytes.get(n), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(n + 1), Some(b'+' | b'-')));
        let d = digits(n + 1 + sign);
        if d > 0 {
            n += 1 + sign + d;
        }
    }
    n
}

/// The value of a string token: quotes removed, `\n \t \r \b \f \v \0` decoded, any other `\c` is `c`.
pub fn unquote(raw: &str) -> String {
    let inner = if raw.len() >= 2 {
        &raw[1..raw.len() - 1]
    } else {
        ""
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('v') => out.push('\u{b}'),
            Some('0') => out.push('\0'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<TokenKind> {
        let (tokens, errors) = lex(text);
        assert!(errors.is_empty(), "{errors:?}");
        tokens.into_iter().map(|t| t.kind).collect()
    }

    use TokenKind::*;

    #[test]
    fn arrows_are_read_most_specific_first() {
        assert_eq!(
            kinds("a <--> b <--rel--> c <|-- d *--> e o--> f --> g -- h => i = j -> k - l"),
            [
                Ident,
                BiArrow,
                Ident,
                BiLabeled,
                Ident,
                InheritArrow,
                Ident,
                ComposeArrow,
                Ident,
                AggregateArrow,
                Ident,
                DoubleArrow,
                Ident,
                DoubleStart,
                Ident,
                FatArrow,
                Ident,
                FatStart,
                Ident,
                Arrow,
                Ident,
                Dash,
                Ident,
                Eof
            ]
        );
        assert_eq!(kinds("o-->b"), [AggregateArrow, Ident, Eof]);
        assert_eq!(kinds("foo-->b"), [Ident, DoubleArrow, Ident, Eof]);
        assert_eq!(kinds("x: -3"), [Ident, Colon, Dash, Number, Eof]);
    }

    #[test]
    fn keywords_give_way_to_longer_names_and_refs() {
        assert_eq!(
            kinds("machine machines as ask"),
            [KwMachine, Ident, KwAs, Ident, Eof]
        );
        assert_eq!(kinds("#ref # y"), [ExtId, Hash, Ident, Eof]);
        assert_eq!(
            kinds("a<Array<Date>>"),
            [Ident, Lt, Ident, Lt, Ident, Gt, Gt, Eof]
        );
    }

    #[test]
    fn strings_numbers_and_comments() {
        assert_eq!(
            kinds("\"a\\\"b\" 'c\nd' 1.5e3 1.0.0 // x\n/* y */ z"),
            [Str, Str, Number, Number, Dot, Number, Ident, Eof]
        );
        assert_eq!(unquote(r#""a\"b\nc\qd""#), "a\"b\nc".to_string() + "qd");
        let (_, errors) = lex("a \"open\nb");
        assert_eq!(errors[0].message, "unterminated string");
        let (tokens, errors) = lex("a $$ b");
        assert_eq!(errors[0].message, "unexpected character `$$`");
        assert_eq!(tokens.len(), 3);
    }

    #[test]
    fn comments_are_found_where_they_are_skipped() {
        let text = "a // x \"y\n/* b\n*/ c / d /* open";
        let (tokens, errors, comments) = lex_with_comments(text);
        let found: Vec<&str> = comments.iter().map(|s| &text[s.range()]).collect();
        assert_eq!(found, ["// x \"y", "/* b\n*/", "/* open"]);
        assert_eq!((tokens, errors), lex(text));
    }
}
