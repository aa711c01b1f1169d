//! What hovering shows (`textDocument/hover`): for a node, where it is declared or wherever it is
//! named, its type, name, title, attributes (as written: types and values) and annotations; for an
//! attribute (a context's field too), its owner, declared type and value; for an edge's arrow or
//! label, its kind, ends and label.

use crate::names::{self, Names, Target};
use dygram_syntax::ast;
use dygram_syntax::source::Span;

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

fn contains(span: Span, at: usize) -> bool {
    (span.start as usize) <= at && at <= (span.end as usize)
}

/// What hovering shows: Markdown about what is under the cursor, and the bytes it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hover {
    /// The text, in Markdown.
    pub markdown: String,
    /// What it describes: the name, arrow or label under the cursor.
    pub span: Span,
}

/// The hover at byte `at` of `content`: for a node's name (declared, or used anywhere: edges,
/// values, templates, conditions), the node; for an attribute's, the attribute; for an edge's
/// arrow or label, the edge.
pub fn hover(content: &str, at: usize) -> Option<Hover> {
    let parsed = crate::parse_open(content);
    let names = names::index(&parsed.program);
    let Some(found) = names.at(at) else {
        let (edge, segment) = edge_at(&parsed.program.items, at)?;
        return Some(Hover {
            markdown: describe_edge(content, edge, segment),
            span: segment.span,
        });
    };
    let shown = match &found.target {
        Target::Node(qualified) => {
            let mut nodes = Vec::new();
            declared(&parsed.program.items, "", &mut nodes);
            match nodes.iter().find(|d| &d.qualified == qualified) {
                Some(d) => describe(content, d),
                None => describe_undeclared(&names, qualified),
            }
        }
        Target::Attribute { node, name } => {
            describe_attribute(content, &parsed.program, &names, node, name)?
        }
    };
    Some(Hover {
        markdown: shown,
        span: found.span,
    })
}

/// A node no declaration of this file gives: an imported one, or one the machine creates.
fn describe_undeclared(names: &Names, qualified: &str) -> String {
    match names.import_of(qualified) {
        Some((import, rest)) => {
            let original = if rest.is_empty() {
                import.original.clone()
            } else {
                format!("{}.{rest}", import.original)
            };
            format!(
                "**node** `{qualified}` — imported: `{original}` from `{}`",
                import.path
            )
        }
        None => {
            format!("**node** `{qualified}` — not declared: the machine creates it (a `State`)")
        }
    }
}

/// An attribute: where it is declared, its type and value as written.
fn describe_attribute(
    content: &str,
    program: &ast::Program,
    names: &Names,
    node: &str,
    name: &str,
) -> Option<String> {
    let owner = if node.is_empty() {
        "the machine".to_string()
    } else {
        format!("`{node}`")
    };
    let Some(attribute) = find_attribute(program, node, name) else {
        // An attribute of an imported node: declared in the other file.
        let (import, _) = names.import_of(node)?;
        return Some(format!(
            "**attribute** `{name}` of {owner} (imported from `{}`)",
            import.path
        ));
    };
    let ty = attribute
        .ty
        .as_ref()
        .map(|t| written(content, t.span()).to_string());
    let mut out = format!("**attribute** `{name}` of {owner}");
    if let Some(ty) = &ty {
        out.push_str(&format!(" — `{ty}`"));
    }
    out.push('\n');
    out.push_str(&format!(
        "\n```dygram\n{}\n```",
        written(content, attribute.span).trim_end_matches(';')
    ));
    Some(out)
}

/// The attribute `name` of the node `node` (qualified; empty for the machine's).
fn find_attribute<'a>(
    program: &'a ast::Program,
    node: &str,
    name: &str,
) -> Option<&'a ast::Attribute> {
    if node.is_empty() {
        let header = program.header.iter().flat_map(|h| h.attributes.iter());
        let top = program.items.iter().filter_map(|i| match i {
            ast::Item::Attribute(a) => Some(a),
            _ => None,
        });
        return header.chain(top).find(|a| a.name.text == name);
    }
    let mut nodes = Vec::new();
    declared(&program.items, "", &mut nodes);
    nodes
        .iter()
        .filter(|d| d.qualified == node)
        .flat_map(|d| d.node.items.iter())
        .find_map(|i| match i {
            ast::Item::Attribute(a) if a.name.text == name => Some(a),
            _ => None,
        })
}

/// The edge segment whose arrow or label is at `at`, at every depth.
fn edge_at(items: &[ast::Item], at: usize) -> Option<(&ast::Edge, &ast::Segment)> {
    items.iter().find_map(|item| match item {
        ast::Item::Edge(edge) => edge
            .segments
            .iter()
            .find(|s| contains(s.span, at) && !s.targets.iter().any(|t| contains(t.span, at)))
            .map(|s| (edge, s)),
        ast::Item::Node(node) => edge_at(&node.items, at),
        ast::Item::Attribute(_) => None,
    })
}

/// An edge segment: its sources, arrow, targets and label as written.
fn describe_edge(content: &str, edge: &ast::Edge, segment: &ast::Segment) -> String {
    let index = edge
        .segments
        .iter()
        .position(|s| std::ptr::eq(s, segment))
        .unwrap_or(0);
    let sources: Vec<String> = match index.checked_sub(1) {
        Some(before) => edge.segments[before]
            .targets
            .iter()
            .map(ast::QName::text)
            .collect(),
        None => edge.sources.iter().map(ast::QName::text).collect(),
    };
    let targets: Vec<String> = segment.targets.iter().map(ast::QName::text).collect();
    let kind = match segment.arrow.kind {
        ast::ArrowKind::Single => "transition",
        ast::ArrowKind::Double => "dependency",
        ast::ArrowKind::Fat => "strong transition",
        ast::ArrowKind::Bidirectional | ast::ArrowKind::BidirectionalLabeled => "two-way edge",
        ast::ArrowKind::Inherit => "inheritance",
        ast::ArrowKind::Compose => "composition",
        ast::ArrowKind::Aggregate => "aggregation",
    };
    let mut out = format!(
        "**{kind}** `{}` → `{}`",
        sources.join(", "),
        targets.join(", ")
    );
    let labels: Vec<&str> = segment
        .labels
        .iter()
        .flatten()
        .map(|l| written(content, label_span(l)))
        .collect();
    if !labels.is_empty() {
        out.push_str(&format!("\n\nlabel: `{}`", labels.join(", ")));
    }
    out
}

fn label_span(label: &ast::LabelItem) -> Span {
    match label {
        ast::LabelItem::Annotation(a) => a.span,
        ast::LabelItem::Pair { span, .. } | ast::LabelItem::Flag { span, .. } => *span,
        ast::LabelItem::Text(p) => p.span(),
    }
}

fn written(content: &str, span: Span) -> &str {
    content
        .get(span.start as usize..span.end as usize)
        .unwrap_or("")
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
