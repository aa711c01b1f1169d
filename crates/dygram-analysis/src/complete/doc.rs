//! What completion needs of the document, read from its tree (the editor's text with a placeholder
//! for the word being written, errors and all): the nodes with their declarations merged, the
//! names edges use without a declaration, the types, annotations and machine attributes written.

use std::collections::{BTreeMap, HashSet};

use super::CompletionKind;

use dygram_syntax::ast;
use dygram_syntax::source::Span;

/// A node, all its declarations merged.
#[derive(Debug, Default)]
pub(super) struct NodeInfo<'a> {
    /// The name as written, or the simple name.
    pub(super) simple: String,
    /// The type, as first written.
    pub(super) kind: Option<String>,
    /// The title, as first written.
    pub(super) title: Option<String>,
    /// The attributes of every declaration.
    pub(super) attributes: Vec<&'a ast::Attribute>,
    /// Whether every declaration is a note, a style rule or a type (not a node of the graph).
    pub(super) not_in_graph: bool,
}

impl<'a> NodeInfo<'a> {
    /// Whether the node holds data (a context, an input, an output…), as conditions read it.
    pub(super) fn is_context_like(&self) -> bool {
        let data = [
            "context", "data", "input", "output", "result", "entity", "resource", "concept",
        ];
        self.kind
            .as_deref()
            .is_some_and(|k| data.iter().any(|d| k.eq_ignore_ascii_case(d)))
            || self.simple.to_ascii_lowercase().contains("context")
    }

    /// The item kind for the node, as the outline shows it.
    pub(super) fn item_kind(&self, has_children: bool) -> CompletionKind {
        if self.is_context_like() {
            return CompletionKind::Struct;
        }
        match self.kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
            Some("task") => CompletionKind::Function,
            Some("state") => CompletionKind::EnumMember,
            Some("tool") => CompletionKind::Method,
            _ if has_children => CompletionKind::Module,
            _ => CompletionKind::Variable,
        }
    }

    /// An item's detail for the node named `qualified`: its type, name and title.
    pub(super) fn describe(&self, qualified: &str) -> String {
        let mut out = format!("{} {qualified}", self.kind.as_deref().unwrap_or("node"));
        if let Some(title) = &self.title {
            out.push_str(&format!(" — {title}"));
        }
        out
    }

    /// Merges in a declaration of the node, of type `kind`.
    fn merge(&mut self, node: &'a ast::Node, kind: Option<String>) {
        let outside = kind.as_deref().is_some_and(|k| {
            ["note", "style", "type"]
                .iter()
                .any(|t| k.eq_ignore_ascii_case(t))
        });
        self.not_in_graph &= outside;
        if self.kind.is_none()
            || self
                .kind
                .as_deref()
                .is_some_and(|k| k.eq_ignore_ascii_case("note"))
        {
            self.kind = kind.or(self.kind.take());
        }
        if self.title.is_none() {
            self.title = node.title.as_ref().map(|t| t.value.clone());
        }
        self.attributes.extend(attributes(&node.items));
    }
}

/// The attributes among `items`.
fn attributes(items: &[ast::Item]) -> impl Iterator<Item = &ast::Attribute> {
    items.iter().filter_map(|i| match i {
        ast::Item::Attribute(a) => Some(a),
        _ => None,
    })
}

/// What completion needs of the document.
#[derive(Debug, Default)]
pub(super) struct Doc<'a> {
    text: &'a str,
    /// Declared nodes by qualified name (`checkout.pay`).
    pub(super) nodes: BTreeMap<String, NodeInfo<'a>>,
    /// Names edges use that no declaration has.
    pub(super) edge_names: Vec<String>,
    /// Types written in the document (`task`, `Implementation`).
    pub(super) kinds: Vec<String>,
    /// Annotation names written in the document.
    pub(super) annotations: Vec<String>,
    /// The machine's attributes (header and top level).
    pub(super) machine_attributes: Vec<&'a ast::Attribute>,
}

impl<'a> Doc<'a> {
    /// Reads `program`, the tree of `text`.
    pub(super) fn read(text: &'a str, program: &'a ast::Program) -> Self {
        let mut doc = Doc {
            text,
            ..Doc::default()
        };
        let mut used = Vec::new();
        if let Some(header) = &program.header {
            doc.machine_attributes.extend(header.attributes.iter());
            doc.note_annotations(&header.annotations);
        }
        doc.machine_attributes.extend(attributes(&program.items));
        doc.items(&program.items, "", &mut used);
        doc.edge_names = doc.undeclared(used);
        doc
    }

    /// The names of `used` that no declaration has, each once.
    fn undeclared(&self, used: Vec<String>) -> Vec<String> {
        let declared: HashSet<String> = self
            .nodes
            .iter()
            .flat_map(|(q, n)| [q.clone(), n.simple.clone()])
            .collect();
        let mut seen = HashSet::new();
        used.into_iter()
            .filter(|name| !declared.contains(name) && seen.insert(name.clone()))
            .collect()
    }

    fn note_annotations(&mut self, annotations: &[ast::Annotation]) {
        for a in annotations {
            if !self.annotations.contains(&a.name.text) {
                self.annotations.push(a.name.text.clone());
            }
        }
    }

    fn items(&mut self, items: &'a [ast::Item], prefix: &str, used: &mut Vec<String>) {
        for item in items {
            match item {
                ast::Item::Node(node) => self.node(node, prefix, used),
                ast::Item::Edge(edge) => self.edge(edge, used),
                ast::Item::Attribute(_) => {}
            }
        }
    }

    /// A node's declaration in the block of the node `prefix` (empty: the top level).
    fn node(&mut self, node: &'a ast::Node, prefix: &str, used: &mut Vec<String>) {
        let name = node.name.text();
        let qualified = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}.{name}")
        };
        let kind = node.kind.as_ref().map(|k| k.text.clone());
        if let Some(k) = &kind
            && !self.kinds.contains(k)
        {
            self.kinds.push(k.clone());
        }
        self.note_annotations(&node.annotations);
        self.nodes
            .entry(qualified.clone())
            .or_insert_with(|| NodeInfo {
                simple: node.name.last().to_string(),
                not_in_graph: true,
                ..NodeInfo::default()
            })
            .merge(node, kind);
        self.items(&node.items, &qualified, used);
    }

    /// An edge statement: the names it uses, the annotations of its labels.
    fn edge(&mut self, edge: &ast::Edge, used: &mut Vec<String>) {
        let names = edge
            .sources
            .iter()
            .chain(edge.segments.iter().flat_map(|s| s.targets.iter()));
        used.extend(names.map(ast::QName::text));
        for segment in &edge.segments {
            for group in &segment.labels {
                for label in group {
                    if let ast::LabelItem::Annotation(a) = label {
                        self.note_annotations(std::slice::from_ref(a));
                    }
                }
            }
        }
    }

    /// The text of `span`, as written.
    pub(super) fn written(&self, span: Span) -> &str {
        self.text
            .get(span.start as usize..span.end as usize)
            .unwrap_or("")
            .trim_end_matches(';')
            .trim_end()
    }

    /// The nodes named `name`: the simple name, or the qualified one.
    pub(super) fn find(&self, name: &str) -> Vec<&NodeInfo<'a>> {
        match self.nodes.get(name) {
            Some(node) => vec![node],
            None => self.nodes.values().filter(|n| n.simple == name).collect(),
        }
    }
}
