//! What an editor asks of a DyGram document, answered on byte offsets and plain types:
//! completion ([`complete`]), hover ([`hover`]), the outline ([`outline`]), highlighting
//! ([`highlight`]), every name's declaration and uses ([`names`]), navigation across files
//! ([`navigate`]), quick fixes ([`fixes`]) and formatting ([`format`]).
//!
//! No protocol: `dygram lsp` converts positions and results at its edge (with [`lines`], one
//! line index per open document), and the playground calls the same functions compiled to
//! WebAssembly. No IO either: a document is its text.
//!
//! ```
//! let text = "Task pay \"Pay\";\nstart -> pa";
//! let items = dygram_analysis::complete::complete(text, text.len());
//! assert!(items.iter().any(|i| i.label == "pay"));
//! ```

pub mod complete;
pub mod fixes;
pub mod format;
pub mod highlight;
pub mod hover;
pub mod lines;
pub mod names;
pub mod navigate;
pub mod outline;

/// `content` parsed as an editor has it, often unfinished: the blocks it leaves open are closed
/// after its end (so every span is still the text's own), and what they hold stays in the tree.
pub fn parse_open(content: &str) -> dygram_syntax::Parsed {
    use dygram_syntax::lexer::{TokenKind, lex};
    let (tokens, _) = lex(content);
    let open = tokens.iter().fold(0usize, |depth, t| match t.kind {
        TokenKind::LBrace => depth + 1,
        TokenKind::RBrace => depth.saturating_sub(1),
        _ => depth,
    });
    if open == 0 {
        return dygram_syntax::parse(content);
    }
    let mut closed = String::with_capacity(content.len() + 1 + open);
    closed.push_str(content);
    closed.push('\n');
    closed.extend(std::iter::repeat_n('}', open));
    dygram_syntax::parse(&closed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unclosed_block_keeps_what_it_holds() {
        let text = "Process p {\n  Task a;\n  State b {\n";
        let parsed = parse_open(text);
        let [dygram_syntax::ast::Item::Node(p)] = parsed.program.items.as_slice() else {
            panic!("{:?}", parsed.program.items)
        };
        assert_eq!(p.items.len(), 2);
        assert!(dygram_syntax::parse(text).program.items.is_empty());
    }
}
