//! Keywords: `import` and `machine` at the start of a statement where they may go, the words of an
//! arrow's label (`when`, `unless`, `if` and the data labels), and `as` and `from` in an import.

use super::CompletionKind;

use super::Offer;

/// The words an arrow's label starts with, with what they mean.
const LABEL_WORDS: &[(&str, &str)] = &[
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
];

/// `import` and `machine` at a statement's start, each when it may be written there.
pub(super) fn statement(import: bool, machine: bool, out: &mut Offer) {
    if import {
        out.push(
            "import",
            CompletionKind::Keyword,
            "import { Name } from \"./file.dy\"",
            "0",
        );
    }
    if machine {
        out.push(
            "machine",
            CompletionKind::Keyword,
            "the machine's header: machine \"Title\"",
            "0",
        );
    }
}

/// The words of an arrow's label.
pub(super) fn label(out: &mut Offer) {
    for (label, detail) in LABEL_WORDS {
        out.push(label, CompletionKind::Keyword, detail, "0");
    }
}

/// `as` after an imported name.
pub(super) fn import_as(out: &mut Offer) {
    out.push(
        "as",
        CompletionKind::Keyword,
        "an alias for the imported name",
        "0",
    );
}

/// `from` after the imported names.
pub(super) fn import_from(out: &mut Offer) {
    out.push(
        "from",
        CompletionKind::Keyword,
        "the file to import from, in quotes",
        "0",
    );
}

#[cfg(test)]
mod tests {
    use crate::complete::tests::{SHOP, offers, refuses};

    #[test]
    fn labels_and_imports() {
        offers(&format!("{SHOP}pay -|"), &["when", "unless", "writes"]);
        offers("import { A |", &["as"]);
        offers("import { A, B as C } |", &["from"]);
        refuses("import { A as |", &["as"]);
    }
}
