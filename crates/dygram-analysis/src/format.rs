//! Formatting a document (`dygram fmt`, and `textDocument/formatting` in an editor) with the `.dy` printer of
//! `dygram generate -f dsl` ([`dygram_core::render::dsl::to_dsl`]): the document is compiled, its
//! canonical JSON printed back as source, and that text replaces the document.
//!
//! The printer writes the machine, not the text, so a document is formatted only when nothing is
//! lost; otherwise it is left as it is and the editor is told why ([`Refusal`]):
//!
//! * it has syntax errors (what could not be read would be dropped);
//! * it imports other files (the imported nodes would be copied into it);
//! * the printed text does not give the same machine again: compiled on its own it must give the
//!   same canonical JSON (what every other output and the runtime read; positions aside), the
//!   same errors and warnings, and say what the document says where the JSON does not keep it
//!   (`written`: an annotation's value, a union's literals, a bare name in a label…);
//! * it has a comment that cannot be kept. The printer drops comments; they are put back next to
//!   what they were next to (`comments`: before or at the end of a node, an attribute, an edge
//!   statement or the header, at the start or end of a block, at the start or end of the
//!   document). A comment inside a statement, or next to an edge statement the printer merges
//!   into the one before it, has no such place. The result is checked: the same machine again, and
//!   every comment of the document, as written.
//!
//! The printer indents by four spaces; with another [`Indent`] each four leading spaces of a line
//! become that many spaces, or a tab (the formatted text is checked again; should that check fail,
//! the four spaces stay). The printer always ends the text with one line break.
//!
//! The change is one [`Change`] covering what differs: the text between the longest common start
//! and end of the document and the formatted text. A document already formatted gets no edit.

mod comments;
mod written;

use std::ops::Range;

use dygram_core::diagnostic::Severity;
use dygram_core::{Compiled, compile};
use dygram_syntax::lexer;
use dygram_syntax::source::SourceFile;

/// Why a document was left as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// It could not be read whole.
    #[error("it has syntax errors (fix them first; what cannot be read would be lost)")]
    SyntaxErrors,
    /// It has a comment that has no place in the formatted text.
    #[error(
        "the comment on line {line} would be lost (comments are kept on their own line before a statement, at the end of a statement's line, or at the start or end of a block; not inside a statement or next to an edge statement that formatting joins to the one before)"
    )]
    Comment {
        /// Its line (from 1).
        line: usize,
    },
    /// Its comments could not all be kept as written.
    #[error("its comments could not all be kept as they are written")]
    Comments,
    /// It imports files, whose nodes the printer would copy in.
    #[error("it imports other files, and formatting would copy the imported nodes into it")]
    Imports,
    /// The printed text is not the same machine, and the document has errors.
    #[error(
        "it has errors, and the formatted text would not give the same machine and errors (fix them first)"
    )]
    Invalid,
    /// The printed text is not the same machine.
    #[error(
        "the formatted text would not say the same (the formatter writes the machine from its JSON, which does not keep everything written, e.g. an annotation's single value or a union type's literals)"
    )]
    NotTheSame,
}

/// How a level of the formatted text is indented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indent {
    /// This many spaces (0: the printer's four).
    Spaces(u32),
    /// One tab.
    Tab,
}

impl Default for Indent {
    fn default() -> Self {
        Self::Spaces(4)
    }
}

/// A change of a text: the bytes `replace` of the text become `text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The bytes replaced.
    pub replace: Range<usize>,
    /// What replaces them.
    pub text: String,
}

/// The changes that format `content` (none when it is formatted already; else one, covering what
/// differs), or why it is left as is.
pub fn format(content: &str, indent: Indent) -> Result<Vec<Change>, Refusal> {
    let formatted = formatted(content, indent)?;
    Ok(change(content, &formatted).into_iter().collect())
}

/// The formatted text of `content`.
pub fn formatted(content: &str, indent: Indent) -> Result<String, Refusal> {
    let original = compile(SourceFile::new("document.dy", content));
    if original.has_syntax_errors() {
        return Err(Refusal::SyntaxErrors);
    }
    if !original.program.imports.is_empty() {
        return Err(Refusal::Imports);
    }
    let json = original.json(Default::default());
    let printed = compile(SourceFile::new(
        "formatted.dy",
        dygram_core::render::dsl::to_dsl(&json),
    ));
    if !same_machine(&original, &printed) {
        return Err(if original.has_errors() {
            Refusal::Invalid
        } else {
            Refusal::NotTheSame
        });
    }
    let written = comment_texts(content);
    let with_comments = if written.is_empty() {
        printed.file.text().to_string()
    } else {
        let kept = comments::keep(&original, &printed)
            .map_err(|lost| Refusal::Comment { line: lost.line })?;
        let again = compile(SourceFile::new("formatted.dy", kept.as_str()));
        if !same_machine(&original, &again) || comment_texts(&kept) != written {
            return Err(Refusal::Comments);
        }
        kept
    };
    let indented = indented(&with_comments, indent);
    if indented != with_comments
        && same_machine(
            &original,
            &compile(SourceFile::new("formatted.dy", indented.as_str())),
        )
        && comment_texts(&indented) == written
    {
        return Ok(indented);
    }
    Ok(with_comments)
}

/// The comments of `text` as written, sorted (the formatted text may have them in another order:
/// the printer writes nodes before edges).
fn comment_texts(text: &str) -> Vec<&str> {
    let mut all: Vec<&str> = comments::find(text)
        .into_iter()
        .map(|(start, end)| &text[start..end])
        .collect();
    all.sort_unstable();
    all
}

/// Whether `again` (a compiled formatted text) is the machine `original` is: the same canonical
/// JSON, the same diagnostics (their positions aside) and the same things written
/// (`written::same`).
fn same_machine(original: &Compiled, again: &Compiled) -> bool {
    if again.has_syntax_errors()
        || again.json(Default::default()) != original.json(Default::default())
        || !written::same(original, again)
    {
        return false;
    }
    let said = |c: &Compiled| {
        let mut all: Vec<(bool, String)> = c
            .diagnostics
            .iter()
            .map(|d| (d.severity == Severity::Error, d.message.clone()))
            .collect();
        all.sort();
        all
    };
    said(again) == said(original)
}

/// `printed` (indented by four spaces a level) indented by `indent`. Lines that start inside a
/// token (a string over several lines) or a comment are left alone.
fn indented(printed: &str, indent: Indent) -> String {
    const PRINTER: usize = 4;
    let unit = match indent {
        Indent::Spaces(0) => " ".repeat(PRINTER),
        Indent::Spaces(size) => " ".repeat(size as usize),
        Indent::Tab => "\t".to_string(),
    };
    if unit == " ".repeat(PRINTER) {
        return printed.to_string();
    }
    let (tokens, _) = lexer::lex(printed);
    let spans: Vec<(usize, usize)> = tokens
        .iter()
        .map(|t| (t.span.start as usize, t.span.end as usize))
        .chain(comments::find(printed))
        .collect();
    let inside_token = |at: usize| spans.iter().any(|&(start, end)| start < at && at < end);
    let mut out = String::with_capacity(printed.len());
    let mut line_start = 0;
    for line in printed.split_inclusive('\n') {
        let spaces = line.len() - line.trim_start_matches(' ').len();
        if spaces == 0 || inside_token(line_start) {
            out.push_str(line);
        } else {
            out.push_str(&unit.repeat(spaces / PRINTER));
            out.push_str(&line[spaces - spaces % PRINTER..]);
        }
        line_start += line.len();
    }
    out
}

/// The one edit turning `from` into `to`: what lies between their longest common start and end;
/// none when they are the same.
pub fn change(from: &str, to: &str) -> Option<Change> {
    if from == to {
        return None;
    }
    let prefix = from
        .char_indices()
        .zip(to.chars())
        .find(|((_, a), b)| a != b)
        .map_or(from.len().min(to.len()), |((i, _), _)| i);
    let suffix = from[prefix..]
        .chars()
        .rev()
        .zip(to[prefix..].chars().rev())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a.len_utf8())
        .sum::<usize>();
    Some(Change {
        replace: prefix..from.len() - suffix,
        text: to[prefix..to.len() - suffix].to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(tab_size: u32, insert_spaces: bool) -> Indent {
        if insert_spaces {
            Indent::Spaces(tab_size)
        } else {
            Indent::Tab
        }
    }

    /// `text` with `changes` applied (ranges of the original text, none overlapping).
    fn apply(text: &str, changes: &[Change]) -> String {
        let mut out = text.to_string();
        let mut changes = changes.to_vec();
        changes.sort_by_key(|c| std::cmp::Reverse(c.replace.start));
        for c in changes {
            out.replace_range(c.replace, &c.text);
        }
        out
    }

    const MESSY: &str = "machine   \"Demo\"\nstate start;   Task  review \"Review it\" {prompt: \"check\";}\nstart->review; review -> done;\nstate done;\n";

    #[test]
    fn a_document_becomes_the_printers_text() {
        let edits = format(MESSY, options(4, true)).unwrap();
        let json = compile(SourceFile::new("m.dy", MESSY)).json(Default::default());
        let printed = dygram_core::render::dsl::to_dsl(&json);
        assert_eq!(apply(MESSY, &edits), printed);
        assert_eq!(edits.len(), 1);
        // Formatted already: no edit.
        assert_eq!(format(&printed, options(4, true)).unwrap(), []);
    }

    #[test]
    fn indentation_follows_the_options() {
        let two = formatted(MESSY, options(2, true)).unwrap();
        assert!(two.contains("\n  prompt: \"check\";\n"), "{two}");
        let tabs = formatted(MESSY, options(8, false)).unwrap();
        assert!(tabs.contains("\n\tprompt: \"check\";\n"), "{tabs}");
        let json = compile(SourceFile::new("m.dy", MESSY)).json(Default::default());
        for text in [&two, &tabs] {
            assert_eq!(
                compile(SourceFile::new("m.dy", text.as_str())).json(Default::default()),
                json
            );
        }
    }

    #[test]
    fn documents_that_would_lose_something_are_refused() {
        let o = options(4, true);
        assert_eq!(format("state a;\na -> ;\n", o), Err(Refusal::SyntaxErrors));
        assert_eq!(
            format("import { A } from \"./lib.dy\"\nA -> b;\n", o),
            Err(Refusal::Imports)
        );
        // The JSON keeps no single annotation value, so neither does the printer.
        assert_eq!(
            format("machine \"M\" @Version(\"2\")\nstate a;\n", o),
            Err(Refusal::NotTheSame)
        );
        // A comment inside a statement has no place.
        assert_eq!(
            format("state a;\na -> /* why */ b;\n", o),
            Err(Refusal::Comment { line: 2 })
        );
        // Nor one before an edge statement the printer joins to the one before.
        assert_eq!(
            format(
                "state a;\nstate b;\nstate c;\na -> b;\n// then\nb -> c;\n",
                o
            ),
            Err(Refusal::Comment { line: 5 })
        );
    }

    #[test]
    fn comments_are_kept_next_to_what_they_were_next_to() {
        let document = "// The order flow.\n\nmachine \"Orders\"\n\n// Where it starts.\nState start;\nTask ship { // packing\n  carrier: \"ups\"; // for now\n  /* more later */\n}\nstart -> ship; // the only way\n\n// the end\n";
        let kept = formatted(document, options(4, true)).unwrap();
        assert_eq!(
            kept,
            "// The order flow.\n\nmachine \"Orders\";\n\n// Where it starts.\nstate start;\n\ntask ship { // packing\n    carrier: \"ups\"; // for now\n    /* more later */\n}\n\nstart -> ship; // the only way\n\n// the end\n"
        );
        // A `//` inside a string is no comment.
        assert!(formatted("state a \"http://x.io\";\n", options(4, true)).is_ok());
    }

    #[test]
    fn comments_are_found_between_tokens_only() {
        let found = |text: &str| -> Vec<String> {
            comments::find(text)
                .into_iter()
                .map(|(a, b)| text[a..b].to_string())
                .collect()
        };
        assert!(found("state a \"/* no */\";\n").is_empty());
        assert_eq!(found("state a;\n// end"), ["// end"]);
        assert_eq!(found("/* a */ state a; // b\r\nx;"), ["/* a */", "// b"]);
        assert!(found("  \n\t").is_empty());
    }

    #[test]
    fn the_change_covers_what_differs() {
        let e = change("abcXYZdef", "abc12def").unwrap();
        assert_eq!(apply("abcXYZdef", std::slice::from_ref(&e)), "abc12def");
        assert_eq!((e.replace, e.text.as_str()), (3..6, "12"));
        assert_eq!(apply("é\nab", &[change("é\nab", "é\nb").unwrap()]), "é\nb");
        assert_eq!(apply("aaa", &[change("aaa", "aa").unwrap()]), "aa");
        assert_eq!(apply("aa", &[change("aa", "aaa").unwrap()]), "aaa");
        assert_eq!(change("same", "same"), None);
    }
}
