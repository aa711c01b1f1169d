//! Semantic tokens (`textDocument/semanticTokens/full`): the classification of
//! [`dygram_analysis::highlight`], sent as the protocol encodes it: five numbers each, the line and
//! start relative to the previous token, lengths in UTF-16 code units; a string or comment over
//! several lines is one token per line. The legend's order is that of
//! [`dygram_analysis::highlight::Kind`].

use dygram_analysis::highlight::{Highlight, highlight};
use dygram_analysis::lines::utf16_len;
use lsp_types::{
    SemanticToken, SemanticTokenModifier, SemanticTokenType, SemanticTokens, SemanticTokensLegend,
};

use super::text::LineIndex;

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

/// The semantic tokens of `content` (whose lines are `lines`).
pub fn tokens(lines: &LineIndex<'_>) -> SemanticTokens {
    let content = lines.text();
    SemanticTokens {
        result_id: None,
        data: encode(content, lines, &highlight(content)),
    }
}

/// The protocol's encoding of `raw` (sorted by start): overlaps dropped, tokens over several lines
/// cut at each line's end, empty pieces left out.
fn encode(content: &str, lines: &LineIndex<'_>, raw: &[Highlight]) -> Vec<SemanticToken> {
    let mut data = Vec::with_capacity(raw.len());
    let (mut line, mut start) = (0u32, 0u32);
    let mut covered = 0usize;
    for Highlight {
        span,
        kind,
        modifiers,
    } in raw
    {
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

#[cfg(test)]
mod tests {
    use super::*;
    use dygram_analysis::highlight::Kind;
    use dygram_analysis::highlight::{DECLARATION, DEFAULT_LIBRARY};

    /// The decoded tokens: line, character, length, text, kind, modifiers.
    fn decoded(content: &str) -> Vec<(u32, u32, u32, String, u32, u32)> {
        let data = tokens(&LineIndex::new(content)).data;
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
