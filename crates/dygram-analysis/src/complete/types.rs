//! Attribute types (`name<type>`): the types validation checks and the `type` nodes of the
//! document, offered after `<` or a `,` of type arguments.

use super::CompletionKind;

use super::Offer;
use super::doc::Doc;

/// The attribute types validation checks (`name<type>`), with what they take.
pub const ATTRIBUTE_TYPES: &[(&str, &str)] = &[
    ("string", "text"),
    ("number", "a number"),
    ("boolean", "true or false"),
    ("Integer", "a whole number"),
    ("Float", "a number"),
    ("Date", "an ISO 8601 date and time string"),
    ("DateTime", "an ISO 8601 date and time string"),
    (
        "Duration",
        "an ISO 8601 duration (PT4H5M) or 30s, 5min, 2h, 3d",
    ),
    ("UUID", "a UUID string"),
    ("URL", "a URL string"),
    ("Array", "a list: Array<T>"),
    ("List", "a list: List<T>"),
    ("Set", "a list: Set<T>"),
    ("Map", "an object: Map<K, V>"),
    ("Record", "an object: Record<K, V>"),
    ("object", "an object"),
    ("any", "any value"),
];

/// The types validation knows, then the `type` nodes of the document.
pub(super) fn offer(doc: &Doc<'_>, out: &mut Offer) {
    for (name, detail) in ATTRIBUTE_TYPES {
        out.push(name, CompletionKind::Struct, detail, "0");
    }
    for node in doc.nodes.values() {
        if node
            .kind
            .as_deref()
            .is_some_and(|k| k.eq_ignore_ascii_case("type"))
        {
            out.push(
                &node.simple,
                CompletionKind::Class,
                "a type of this document",
                "1",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::complete::tests::{SHOP, offers, refuses};

    #[test]
    fn types_after_lt_and_in_type_arguments() {
        offers(
            &format!("{SHOP}Context c {{ n<| }}"),
            &["string", "number", "boolean", "Array", "Map", "Address"],
        );
        offers(&format!("{SHOP}Context c {{ n<Array<| }}"), &["Date"]);
        offers(
            &format!("{SHOP}Context c {{ n<Map<string, | }}"),
            &["number"],
        );
        offers("machine \"m\" { when<Da| }", &["Date"]);
        refuses(&format!("{SHOP}Context c {{ n<number>| }}"), &["string"]);
        refuses(&format!("{SHOP}a <|"), &["string"]);
    }
}
