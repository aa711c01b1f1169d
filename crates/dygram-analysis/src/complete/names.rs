//! Node types and node names: what a statement starts with (a node's type, or an edge's source)
//! and what an edge names after an arrow, a multiplicity or a `,` (qualified, `checkout.pay`, and
//! simple), with a node's attributes after `name.` (attribute ports).

use super::CompletionKind;

use super::Offer;
use super::doc::Doc;

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

/// The node types, as the document writes them when it does, then the others it uses.
pub(super) fn node_types(doc: &Doc<'_>, out: &mut Offer) {
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
        out.push(label, CompletionKind::Class, detail, "1");
    }
    for kind in &doc.kinds {
        if !out.seen.iter().any(|s| s.eq_ignore_ascii_case(kind)) {
            out.push(
                kind,
                CompletionKind::Class,
                "node type used in this document",
                "1",
            );
        }
    }
}

/// The node names (qualified and simple), narrowed to those under `word`'s dotted part.
pub(super) fn node_names(doc: &Doc<'_>, word: &str, out: &mut Offer) {
    let under = word.rfind('.').map(|i| &word[..=i]);
    let fits = |name: &str| under.is_none_or(|u| name.starts_with(u));
    let has_children = |q: &str| {
        let prefix = format!("{q}.");
        doc.nodes.keys().any(|k| k.starts_with(&prefix))
    };
    for (qualified, node) in doc.nodes.iter().filter(|(_, n)| !n.not_in_graph) {
        let kind = node.item_kind(has_children(qualified));
        let detail = node.describe(qualified);
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
            CompletionKind::Reference,
            "named by an edge, not declared",
            "3",
        );
    }
    if let Some(under) = under {
        attribute_ports(doc, under.trim_end_matches('.'), out);
    }
}

/// `node.attribute` (an attribute port) after a node's name and a dot.
fn attribute_ports(doc: &Doc<'_>, node: &str, out: &mut Offer) {
    for info in doc.find(node) {
        for a in &info.attributes {
            let label = format!("{node}.{}", a.name.text);
            out.push(&label, CompletionKind::Field, doc.written(a.span), "4");
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::complete::tests::{SHOP, offers, refuses};

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
}
