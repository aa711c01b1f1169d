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

//! Where the cursor is comes from `context`; what the document holds from `doc`; what is
//! offered from `names` (node types and names), `annotations`, `types`, `variables` and
//! `keywords`.

mod annotations;
mod context;
mod doc;
mod keywords;
mod names;
mod types;
mod variables;

use std::collections::HashSet;
use std::ops::Range;

pub use annotations::{ANNOTATIONS, Place};
pub use names::NODE_TYPES;
pub use types::ATTRIBUTE_TYPES;

use context::Context;
use doc::Doc;
use dygram_syntax::lexer::lex;

/// Stands for the word being written while the document is read.
const PLACEHOLDER: &str = "__dygram_completion__";

/// What an item is, for the editor's icon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionKind {
    /// A keyword (`machine`, `import`, `when`…).
    Keyword,
    /// A node.
    Class,
    /// A node type, or a context node.
    Struct,
    /// A task node.
    Function,
    /// A tool node.
    Method,
    /// A state node.
    EnumMember,
    /// An attribute.
    Field,
    /// A key of an object value, or a data label.
    Property,
    /// A variable of a template or condition.
    Variable,
    /// An annotation.
    Module,
    /// A type.
    Reference,
}

/// One thing that may be written at the cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// What is written.
    pub label: String,
    /// What it is.
    pub kind: CompletionKind,
    /// One line about it.
    pub detail: String,
    /// Where it sorts among the others (a group, then the label).
    pub sort_text: String,
    /// The bytes it replaces: the word before the cursor (a variable path's last part).
    pub replace: Range<usize>,
}

/// The completions at byte `at` of `content` (clamped to the text, moved back to a character
/// boundary).
pub fn complete(content: &str, at: usize) -> Vec<Completion> {
    let mut at = at.min(content.len());
    while !content.is_char_boundary(at) {
        at -= 1;
    }
    let (tokens, _) = lex(content);
    let (context, word_start) = context::context(content, &tokens, at);
    if context == Context::Nothing {
        return Vec::new();
    }
    let rest = with_placeholder(content, &context, word_start, at);
    let parsed = crate::parse_open(&rest);
    let doc = Doc::read(&rest, &parsed.program);
    let mut out = Offer {
        items: Vec::new(),
        seen: HashSet::new(),
        range: replaced(&context, word_start, at),
    };
    offer(&context, &doc, &content[word_start..at], &mut out);
    out.items
}

/// The document with a placeholder for the word being written (from `word_start`, the cursor at
/// `at`), so that a half-written name does not offer itself; a statement's start also ends there,
/// so as not to swallow the next line. A template or a condition is read as it is.
fn with_placeholder(content: &str, context: &Context, word_start: usize, at: usize) -> String {
    let word_end = content[at..]
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .map_or(content.len(), |i| at + i);
    match context {
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
    }
}

/// What an item replaces: the word before the cursor, or only the last part of a variable's path.
fn replaced(context: &Context, word_start: usize, at: usize) -> Range<usize> {
    let start = match context {
        Context::Variable(path) => at - path.rsplit('.').next().unwrap_or("").len(),
        _ => word_start,
    };
    start..at
}

/// What `context` offers, `word` being written.
fn offer(context: &Context, doc: &Doc<'_>, word: &str, out: &mut Offer) {
    match context {
        Context::Nothing => {}
        Context::Statement {
            import,
            machine,
            nodes,
        } => {
            keywords::statement(*import, *machine, out);
            if *nodes {
                names::node_types(doc, out);
                names::node_names(doc, word, out);
            }
        }
        Context::Annotation(place) => annotations::offer(doc, *place, out),
        Context::NodeName => names::node_names(doc, word, out),
        Context::Type => types::offer(doc, out),
        Context::Label => keywords::label(out),
        Context::ImportAs => keywords::import_as(out),
        Context::ImportFrom => keywords::import_from(out),
        Context::Variable(path) => variables::offer(doc, path, out),
    }
}

/// The items being gathered, each label once.
struct Offer {
    items: Vec<Completion>,
    seen: HashSet<String>,
    /// What an item replaces: the word before the cursor.
    range: Range<usize>,
}

impl Offer {
    fn push(&mut self, label: &str, kind: CompletionKind, detail: &str, sort: &str) {
        if label.is_empty() || label.contains(PLACEHOLDER) || !self.seen.insert(label.to_string()) {
            return;
        }
        self.items.push(Completion {
            label: label.to_string(),
            kind,
            detail: detail.to_string(),
            sort_text: format!("{sort}{label}"),
            replace: self.range.clone(),
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The labels offered where `|` stands in `marked`.
    pub(super) fn labels(marked: &str) -> Vec<String> {
        let at = marked.find('|').unwrap();
        let text = marked.replacen('|', "", 1);
        complete(&text, at).into_iter().map(|i| i.label).collect()
    }

    pub(super) fn offers(marked: &str, wanted: &[&str]) {
        let got = labels(marked);
        for w in wanted {
            assert!(
                got.iter().any(|g| g == w),
                "{w} not offered in {marked:?}: {got:?}"
            );
        }
    }

    pub(super) fn refuses(marked: &str, unwanted: &[&str]) {
        let got = labels(marked);
        for u in unwanted {
            assert!(
                !got.iter().any(|g| g == u),
                "{u} offered in {marked:?}: {got:?}"
            );
        }
    }

    pub(super) const SHOP: &str = "machine \"Shop\" { region: \"eu\"; cfg: { limits: { max: 3; }; }; }\nContext order { total<number>: 0; items<Array<string>>: []; }\nProcess checkout {\n  Task pay \"Pay\" @Async { prompt: \"Pay {{ order.total }}\"; }\n  State done;\n}\ntype Address { street<string>; }\n";

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
                complete(prefix, at);
            }
            complete(prefix, prefix.len());
            crate::highlight::highlight(prefix);
        }
    }

    #[test]
    fn items_replace_the_word_being_written() {
        let text = format!("{SHOP}start -> checkout.p");
        let items = complete(&text, text.len());
        let pay = items.iter().find(|i| i.label == "checkout.pay").unwrap();
        assert_eq!(pay.replace, text.len() - "checkout.p".len()..text.len());
        assert_eq!(pay.kind, CompletionKind::Function);
        assert_eq!(pay.detail, "Task checkout.pay — Pay");
    }
}
