//! What hovering a name shows (`textDocument/hover`): for a node, where it is declared or where an
//! edge names it, its type, name, title, attributes (as written: types and values) and annotations.

use lsp_types::{Hover, HoverContents, MarkupContent, MarkupKind, Position};

use super::text;
use crate::source::Span;
use crate::syntax::{self, ast};

/// A node with its qualified name (`parent.child`).
struct Declared<'a> {
    qualified: String,
    node: &'a ast::Node,
}

fn declared<'a>(items: &'a [ast::Item], prefix: &str, out: &mut Vec<Declared<'a>>) {
    for item in items {
        if let ast::Item::Node(node) = item {
            let name = node.name.text();
            let qualified = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}.{name}")
            };
            declared(&node.items, &qualified, out);
            out.push(Declared { qualified, node });
        }
    }
}

/// Names used by edges, at every depth.
fn edge_names<'a>(items: &'a [ast::Item], out: &mut Vec<&'a ast::QName>) {
    for item in items {
        match item {
            ast::Item::Edge(edge) => {
                out.extend(edge.sources.iter());
                out.extend(edge.segments.iter().flat_map(|s| s.targets.iter()));
            }
            ast::Item::Node(node) => edge_names(&node.items, out),
            ast::Item::Attribute(_) => {}
        }
    }
}

fn contains(span: Span, at: usize) -> bool {
    (span.start as usize) <= at && at <= (span.end as usize)
}

/// The hover at `position` of `content`, if a node's name is there.
pub fn hover(content: &str, position: Position) -> Option<Hover> {
    let at = text::offset(content, position);
    let parsed = syntax::parse(content);
    let mut nodes = Vec::new();
    declared(&parsed.program.items, "", &mut nodes);
    let (found, span) = match nodes.iter().find(|d| contains(d.node.name.span, at)) {
        Some(d) => (d, d.node.name.span),
        None => {
            let mut names = Vec::new();
            edge_names(&parsed.program.items, &mut names);
            let used = names.into_iter().find(|n| contains(n.span, at))?;
            let wanted = used.text();
            let node = nodes
                .iter()
                .find(|d| d.qualified == wanted)
                .or_else(|| nodes.iter().find(|d| d.node.name.text() == wanted))?;
            (node, used.span)
        }
    };
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: describe(content, found),
        }),
        range: Some(text::range(content, span.start as usize, span.end as usize)),
    })
}

/// The node as Markdown: a heading line, then its attributes and annotations as written.
fn describe(content: &str, d: &Declared<'_>) -> String {
    let node = d.node;
    let written = |span: Span| {
        content
            .get(span.start as usize..span.end as usize)
            .unwrap_or("")
    };
    let kind = node.kind.as_ref().map_or("node", |k| k.text.as_str());
    let mut out = format!("**{kind}** `{}`", d.qualified);
    if let Some(title) = &node.title {
        out.push_str(&format!(" — {}", title.value));
    }
    out.push('\n');
    for annotation in &node.annotations {
        out.push_str(&format!("\n- `{}`", written(annotation.span)));
    }
    for item in &node.items {
        if let ast::Item::Attribute(a) = item {
            out.push_str(&format!("\n- `{}`", written(a.span).trim_end_matches(';')));
        }
    }
    out
}
