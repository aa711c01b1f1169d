//! Annotations (`@name`): the ones the compiler, the diagrams or the runtime give a meaning to,
//! where each may be written (the machine header, a node, an arrow's label), and the offer after
//! `@`.

use std::collections::HashSet;

use super::CompletionKind;

use super::Offer;
use super::doc::Doc;

/// Where an annotation is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// On the `machine` header.
    Machine,
    /// On a node.
    Node,
    /// In an arrow's label.
    Edge,
}

const M: u8 = 1;
const N: u8 = 2;
const E: u8 = 4;

/// The annotations the compiler, the diagrams or the runtime give a meaning to: name, where, what.
pub const ANNOTATIONS: &[(&str, u8, &str)] = &[
    (
        "StrictMode",
        M,
        "edges may name declared nodes only (no placeholder nodes)",
    ),
    (
        "meta",
        M | N,
        "offers the meta-programming tools to the model (on the machine: at every node)",
    ),
    (
        "Version",
        M | N,
        "a version, as metadata: @Version(\"1.0\")",
    ),
    (
        "style",
        M | N | E,
        "diagram style: @style(color: red; penwidth: 3)",
    ),
    ("start", N, "an explicit start node: a path starts here"),
    (
        "Async",
        N,
        "an asynchronous task (metadata; a warning on nodes that are not tasks)",
    ),
    (
        "Abstract",
        N,
        "an abstract node (drawn as an egg; an error on init nodes)",
    ),
    ("Deprecated", N, "deprecated (drawn dashed and grey)"),
    ("Critical", N, "critical (drawn with a thick border)"),
    ("Singleton", N, "a singleton (drawn with a double border)"),
    ("code", N, "code generation (no effect when running)"),
    (
        "auto",
        E,
        "taken at once when its condition holds; never offered to the model",
    ),
    (
        "async",
        E,
        "starts a parallel path at the target (@async(false) turns it off)",
    ),
    (
        "spawn",
        E,
        "starts a parallel path at the target (as @async)",
    ),
    (
        "fork",
        E,
        "starts a parallel path at the target (as @async)",
    ),
    (
        "parallel",
        E,
        "fork: a new path for each @parallel edge, the current one completes",
    ),
    (
        "barrier",
        E,
        "paths wait here for each other: @barrier, @barrier(\"id\"), @barrier(id: x; merge: true)",
    ),
    ("wait", E, "paths wait here for each other (as @barrier)"),
    ("sync", E, "paths wait here for each other (as @barrier)"),
    (
        "join",
        E,
        "paths wait here for each other and merge: only the last goes on",
    ),
    ("merge", E, "paths wait here and merge (as @join)"),
    (
        "map",
        E,
        "one path for each item of a list: @map(Ctx.items), @map(items: Ctx.items; group: g)",
    ),
    ("foreach", E, "one path for each item of a list (as @map)"),
    ("each", E, "one path for each item of a list (as @map)"),
    ("hideLabel", E, "diagram: the edge's label is not shown"),
    (
        "hideAnnotation",
        E,
        "diagram: the edge's annotations are not shown",
    ),
    (
        "showAnnotation",
        E,
        "diagram: whether the edge's annotations are shown",
    ),
];

/// The annotations of `place`, then the others the document uses.
pub(super) fn offer(doc: &Doc<'_>, place: Place, out: &mut Offer) {
    let bit = match place {
        Place::Machine => M,
        Place::Node => N,
        Place::Edge => E,
    };
    for (name, places, detail) in ANNOTATIONS {
        if places & bit != 0 {
            out.push(name, CompletionKind::Property, detail, "0");
        }
    }
    let known: HashSet<&str> = ANNOTATIONS.iter().map(|(n, _, _)| *n).collect();
    for name in &doc.annotations {
        if !known.contains(name.as_str()) {
            out.push(
                name,
                CompletionKind::Property,
                "annotation used in this document",
                "1",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::complete::tests::{SHOP, offers, refuses};

    #[test]
    fn annotations_fit_their_place() {
        offers(&format!("{SHOP}Task t @|"), &["Async", "Critical", "start"]);
        refuses(&format!("{SHOP}Task t @|"), &["auto", "StrictMode"]);
        offers("machine \"m\" @|", &["StrictMode", "meta", "Version"]);
        offers(
            &format!("{SHOP}a -@|"),
            &["auto", "barrier", "map", "async"],
        );
        offers(&format!("{SHOP}a -when: 'x'; @a|-> b;"), &["auto"]);
        refuses(&format!("{SHOP}a -@|"), &["Critical"]);
        offers(&format!("{SHOP}Task t @Version(\"1\") @|"), &["Async"]);
    }
}
