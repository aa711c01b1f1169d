//! Graphviz DOT output.
//!
//! [`to_dot`] turns the canonical machine JSON (see [`crate::json`], with or without
//! `$sourceRange`) into a `digraph`. The layout follows the reference implementation's generator,
//! so that for most programs the text is byte for byte the reference's:
//!
//! * a graph label (an HTML table with the title, version and annotations, description and the
//!   machine attributes) and the machine `style` keys as graph attributes;
//! * one node per leaf node, with an HTML label (name, `<type>`, annotations, title, `desc`,
//!   prompt preview `→ …`, and an attribute table whose cells are ports `<attr>__key` /
//!   `<attr>__value`), a shape and colours chosen by its type (explicit or inferred), and
//!   `URL="#L<line>:<col>-<line>:<col>"` with the 0-based source range;
//! * a `cluster_<name>` subgraph per parent node, holding an invisible point node
//!   `<name>__cluster_anchor` that edges to and from the parent attach to (`lhead`/`ltail`), and a
//!   `shape=plain` node with the parent's own attributes;
//! * `note_<target>_<i>` note nodes with a dashed link to what they annotate;
//! * the edges, with HTML labels (text, annotations, attribute table), multiplicities as
//!   `taillabel`/`headlabel`, arrow styles per arrow type, inline label pairs and matching `style`
//!   nodes as DOT attributes, attribute ports, and condition styling;
//! * inferred dependencies as dashed blue edges.
//!
//! Titles, `desc` and prompts go through `{{ node.attribute }}` template resolution against every
//! node's attributes (one that cannot be resolved stays as written; a list value is written as
//! JSON, where the reference writes its CEL library's internal `{"_array":[…]}`, and a map as JSON
//! with its keys sorted), and through a small inline Markdown converter (`**bold**`, `*italic*`,
//! `~~strike~~`, `` `code` ``, links, bare URLs and e-mail addresses) to Graphviz's HTML subset;
//! all other text is HTML-escaped. The text has no final line break, like the reference's.
//!
//! Where the reference would write DOT that Graphviz rejects, we deviate: an HTML table without
//! rows is left out (the graph label becomes `""`, an edge gets no label), text right after a tag
//! that starts with `]` is written `&#93;` (Graphviz 2.43 misreads `>]`), names that are not plain
//! DOT identifiers are quoted in `subgraph` statements, and attribute names that are not
//! identifiers are quoted. Node ids are always quoted.
//!
//! # Condition styling
//!
//! An edge whose attributes hold `when:`, `unless:` (negated) or `if:` gets `style=solid,
//! color="#4CAF50", penwidth=2` when its condition holds and `style=dashed, color="#9E9E9E",
//! penwidth=1` when it does not. Conditions, and the `{{ … }}` templates of labels, are evaluated
//! by the runtime's CEL evaluator ([`crate::condition`]); `expressions.rs` says against
//! what, and how an outcome is drawn:
//!
//! * a condition that cannot be parsed is **inactive**;
//! * a condition that parses but fails while evaluating (an unknown name such as `Data.priority`
//!   when `Data` is not a machine attribute, a missing key, mismatched types) is **active**: the
//!   reference's CEL library returns an error *object* there, which JavaScript counts as true.
//!   The reference corpus relies on this (e.g. `when: "Data.priority == 'high'"` is drawn
//!   active), so we keep it.
//!
//! SVG is DOT through Graphviz: see `dygram_runtime::outputs::svg`.
//!
//! # Modules
//!
//! `graph.rs` holds the generator and draws the graph, its label and the hierarchy of clusters;
//! `nodes.rs` and `edges.rs` draw the elements; `labels.rs` builds the HTML-like labels (through
//! the Markdown converter, `render/markdown.rs`), `styles.rs` the shapes, colours and grids,
//! `syntax.rs` the DOT text; `expressions.rs` evaluates conditions and templates.

mod edges;
mod expressions;
mod graph;
mod labels;
mod nodes;
mod styles;
mod syntax;

use serde_json::Value as Json;

use graph::Generator;
use syntax::{anchor, id};

/// Graphviz DOT for a canonical machine JSON. Never fails: missing or ill-typed keys are skipped.
pub fn to_dot(machine: &Json) -> String {
    Generator::new(machine).render()
}

/// [`to_dot`] with an execution drawn on it: visited nodes get a thick green outline, current
/// nodes are filled, and the transitions taken are drawn as bold green edges.
pub fn to_dot_highlighted(
    machine: &Json,
    visited: &[String],
    current: &[String],
    taken: &[(String, String)],
) -> String {
    let mut dot = to_dot(machine);
    let Some(end) = dot.rfind('}') else {
        return dot;
    };
    let parents: std::collections::HashSet<&str> = machine
        .get("nodes")
        .and_then(Json::as_array)
        .map(|nodes| {
            nodes
                .iter()
                .filter_map(|n| n.get("parent").and_then(Json::as_str))
                .collect()
        })
        .unwrap_or_default();
    // The ids `to_dot` gave the nodes (a parent is drawn through its cluster's anchor).
    let node_id = |name: &str| {
        if parents.contains(name) {
            id(&anchor(name))
        } else {
            id(name)
        }
    };
    let mut extra = String::from("  // execution\n");
    for n in visited.iter().filter(|n| !parents.contains(n.as_str())) {
        extra.push_str(&format!(
            "  {} [penwidth=3, color=\"#2E7D32\"];\n",
            node_id(n)
        ));
    }
    for n in current.iter().filter(|n| !parents.contains(n.as_str())) {
        extra.push_str(&format!(
            "  {} [penwidth=3, color=\"#1B5E20\", style=\"filled\", fillcolor=\"#A5D6A7\"];\n",
            node_id(n)
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for (from, to) in taken {
        if seen.insert((from, to)) {
            extra.push_str(&format!(
                "  {} -> {} [color=\"#2E7D32\", penwidth=3, constraint=false];\n",
                node_id(from),
                node_id(to)
            ));
        }
    }
    dot.insert_str(end, &extra);
    dot
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn highlights_use_the_ids_of_the_drawn_nodes() {
        let machine = json!({
            "title": "M",
            "nodes": [
                {"name": "G", "attributes": []},
                {"name": "x\\y\"z", "attributes": [], "parent": "G"},
                {"name": "end", "attributes": []}
            ],
            "edges": [{"source": "x\\y\"z", "target": "end", "arrowType": "->"}]
        });
        let plain = to_dot(&machine);
        let drawn = to_dot_highlighted(
            &machine,
            &["G".into(), "x\\y\"z".into()],
            &["end".into()],
            &[("G".into(), "end".into())],
        );
        let odd = id("x\\y\"z");
        assert!(plain.contains(&odd), "{plain}");
        assert!(drawn.contains(&format!("{odd} [penwidth=3")), "{drawn}");
        // A parent is highlighted through its cluster's anchor, as edges to it are drawn.
        assert!(
            drawn.contains(&format!("{} -> \"end\"", id(&anchor("G")))),
            "{drawn}"
        );
        assert!(!drawn.contains("\"G\" [penwidth"), "{drawn}");
        assert!(drawn.contains("\"end\" [penwidth=3, color=\"#1B5E20\", style=\"filled\""));
    }

    #[test]
    fn odd_json_does_not_panic() {
        for v in [
            json!(null),
            json!([]),
            json!({"nodes": 3}),
            json!({"nodes": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]}),
            json!({"nodes": [{"name": "a"}, {"name": "b", "parent": "a"}, {"name": "a", "parent": "b"}]}),
            json!({"nodes": [{"name": "x\"y\\"}], "edges": [{"source": 1}, "e"], "style": {"grid": 0}}),
        ] {
            let dot = to_dot(&v);
            assert!(dot.starts_with("digraph {"), "{dot}");
        }
    }
}
