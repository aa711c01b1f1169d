//! Variables of a `{{ … }}` template or an edge's condition (`when:`, `if:`, `unless:`): the data
//! nodes and the nodes with attributes, the machine's attributes and the built-in variables; after
//! `name.`, the attributes of the node (or the keys of the object value) `name`.

use super::CompletionKind;

use super::Offer;
use super::doc::{Doc, NodeInfo};
use dygram_syntax::ast;

/// Variables every condition and template sees, besides the machine's attributes and the nodes.
const BUILT_IN_VARIABLES: &[(&str, &str)] = &[
    ("errorCount", "built-in: how many errors so far"),
    ("errors", "built-in: how many errors so far"),
    ("activeState", "built-in: the last `state` node entered"),
    ("_mapItem", "built-in on @map paths: the item"),
    ("_mapIndex", "built-in on @map paths: the item's index"),
];

/// The variables of a template or a condition after `path` (`order.`, `ord`, `cfg.limits.`).
pub(super) fn offer(doc: &Doc<'_>, path: &str, out: &mut Offer) {
    let parts: Vec<&str> = path.split('.').collect();
    let Some((_, within)) = parts.split_last() else {
        return;
    };
    if within.is_empty() {
        top_level(doc, out);
        return;
    }
    for a in fields(doc, within) {
        out.push(
            &a.name.text,
            CompletionKind::Field,
            doc.written(a.span),
            "0",
        );
    }
}

/// The names a path starts with: data nodes first, then nodes with attributes, the machine's
/// attributes and the built-in variables.
fn top_level(doc: &Doc<'_>, out: &mut Offer) {
    let mut nodes: Vec<(&String, &NodeInfo<'_>)> =
        doc.nodes.iter().filter(|(_, n)| !n.not_in_graph).collect();
    nodes.sort_by_key(|(_, n)| !n.is_context_like());
    for (qualified, node) in nodes {
        let detail = node.describe(qualified);
        if node.is_context_like() {
            out.push(&node.simple, CompletionKind::Struct, &detail, "0");
        } else if !node.attributes.is_empty() {
            out.push(&node.simple, node.item_kind(false), &detail, "1");
        }
    }
    for a in &doc.machine_attributes {
        out.push(
            &a.name.text,
            CompletionKind::Field,
            &format!("machine attribute: {}", doc.written(a.span)),
            "2",
        );
    }
    for (name, detail) in BUILT_IN_VARIABLES {
        out.push(name, CompletionKind::Variable, detail, "3");
    }
}

/// The attributes under the path `within` (its parts before the one being written): those of the
/// node (all its declarations) or the machine attribute it starts with, then into object values,
/// one part at a time.
fn fields<'a>(doc: &Doc<'a>, within: &[&str]) -> Vec<&'a ast::Attribute> {
    let Some((first, rest)) = within.split_first() else {
        return Vec::new();
    };
    let mut fields: Vec<&ast::Attribute> = doc
        .find(first)
        .into_iter()
        .flat_map(|n| n.attributes.iter().copied())
        .collect();
    if fields.is_empty()
        && let Some(a) = doc
            .machine_attributes
            .iter()
            .find(|a| a.name.text == *first)
        && let Some(ast::Value::Object(inner, _)) = &a.value
    {
        fields = inner.iter().collect();
    }
    for part in rest {
        fields = match fields
            .iter()
            .rev()
            .find(|a| a.name.text == *part)
            .and_then(|a| a.value.as_ref())
        {
            Some(ast::Value::Object(inner, _)) => inner.iter().collect(),
            _ => Vec::new(),
        };
    }
    fields
}

#[cfg(test)]
mod tests {
    use crate::complete::tests::{SHOP, labels, offers, refuses};

    #[test]
    fn templates_and_conditions_offer_variables() {
        let doc = format!("{SHOP}Task t {{ prompt: \"Total {{{{ order.| }}}}\"; }}");
        offers(&doc, &["total", "items"]);
        refuses(&doc, &["prompt", "order"]);
        // Still open, the string unterminated.
        offers(
            &format!("{SHOP}Task t {{ prompt: \"Total {{{{ order.t|"),
            &["total"],
        );
        let top = format!("{SHOP}Task t {{ prompt: \"{{{{ | }}}}\"; }}");
        offers(
            &top,
            &["order", "pay", "region", "errorCount", "activeState"],
        );
        refuses(&top, &["checkout", "done", "Address"]);
        offers(
            &format!("{SHOP}Task t {{ prompt: \"{{{{ cfg.limits.| }}}}\"; }}"),
            &["max"],
        );
        // Conditions need no braces.
        offers(&format!("{SHOP}pay -when: 'order.|'-> done;"), &["total"]);
        offers(&format!("{SHOP}pay -unless: \"ord|\"-> done;"), &["order"]);
        offers(
            &format!("{SHOP}pay -> done {{ when: 'order.| > 1'; }}"),
            &["total"],
        );
        // Plain strings, closed templates and comments offer nothing.
        assert!(labels(&format!("{SHOP}Task t {{ prompt: \"order.|\"; }}")).is_empty());
        assert!(
            labels(&format!(
                "{SHOP}Task t {{ prompt: \"{{{{ order }}}} |\"; }}"
            ))
            .is_empty()
        );
        assert!(labels(&format!("{SHOP}// start -> |\n")).is_empty());
        assert!(labels(&format!("{SHOP}/* start -> | */\n")).is_empty());
    }
}
