//! The linked machine: the syntax tree after the name transformations every output relies on.
//!
//! 1. Dotted declarations (`Task API.Auth`) are moved under their parents; missing parents are
//!    created with the leaf's type, and a declaration of a name that already exists in the same
//!    parent is merged into it.
//! 2. Every node of type `note` gets a `target` attribute naming the node it documents.
//! 3. Unless the machine is `@StrictMode` (or `@strict`), every name used by a top-level edge that
//!    does not name a node (or a node's attribute) gets a placeholder node, after all declared ones.

use dygram_syntax::ast::{self, Annotation, Attribute, Edge, Primitive, StrLit, Value};
use dygram_syntax::source::Span;

/// A linked machine.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    /// The header's title.
    pub title: Option<StrLit>,
    /// The header's annotations.
    pub annotations: Vec<Annotation>,
    /// Header block attributes, then top-level attributes.
    pub attributes: Vec<Attribute>,
    /// Top-level nodes (declared ones first, then placeholders).
    pub nodes: Vec<Node>,
    /// Top-level edges.
    pub edges: Vec<Edge>,
    /// Whether `@StrictMode` is on (exactly that name).
    pub strict: bool,
    /// Whether `@StrictMode`/`@strict` (any case) is on: no placeholders are created.
    pub no_placeholders: bool,
}

/// A node of the linked tree.
#[derive(Debug, Clone)]
pub struct Node {
    /// Simple name.
    pub name: String,
    /// The type as written (not lower-cased).
    pub kind: Option<String>,
    /// The title.
    pub title: Option<StrLit>,
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Attributes.
    pub attributes: Vec<Attribute>,
    /// Child nodes.
    pub nodes: Vec<Node>,
    /// Edges written inside the node's block.
    pub edges: Vec<Edge>,
    /// Where it was declared (`None` for created parents and placeholders).
    pub span: Option<Span>,
    /// Where its name was written.
    pub name_span: Option<Span>,
    /// Created by linking (a missing parent or a placeholder), not declared.
    pub synthetic: bool,
    /// Brought in by an `import` (its spans belong to another file).
    pub imported: bool,
}

impl Node {
    fn synthetic(name: &str, kind: Option<String>) -> Self {
        Self {
            name: name.to_string(),
            kind,
            title: None,
            annotations: Vec::new(),
            attributes: Vec::new(),
            nodes: Vec::new(),
            edges: Vec::new(),
            span: None,
            name_span: None,
            synthetic: true,
            imported: false,
        }
    }

    /// Marks the node and everything in it as imported.
    pub fn mark_imported(&mut self) {
        self.imported = true;
        for child in &mut self.nodes {
            child.mark_imported();
        }
    }

    /// The type, lower-cased.
    pub fn kind_lower(&self) -> Option<String> {
        self.kind.as_ref().map(|k| k.to_lowercase())
    }

    /// Whether the (lower-cased) type is `kind`.
    pub fn is(&self, kind: &str) -> bool {
        self.kind
            .as_deref()
            .is_some_and(|k| k.eq_ignore_ascii_case(kind))
    }

    /// An attribute by name.
    pub fn attribute(&self, name: &str) -> Option<&Attribute> {
        self.attributes.iter().find(|a| a.name.text == name)
    }
}

/// Links a parsed program.
pub fn link(program: &ast::Program) -> Machine {
    link_with(program, Vec::new())
}

/// Links a parsed program whose imports gave `imported` (placed before the file's own nodes, so
/// references to them resolve instead of creating placeholders).
pub fn link_with(program: &ast::Program, imported: Vec<Node>) -> Machine {
    let mut machine = Machine {
        title: program.header.as_ref().map(|h| h.title.clone()),
        annotations: program
            .header
            .as_ref()
            .map(|h| h.annotations.clone())
            .unwrap_or_default(),
        attributes: program
            .header
            .as_ref()
            .map(|h| h.attributes.clone())
            .unwrap_or_default(),
        ..Machine::default()
    };
    machine.strict = machine
        .annotations
        .iter()
        .any(|a| a.name.text == "StrictMode");
    machine.no_placeholders = machine.annotations.iter().any(|a| {
        let n = a.name.text.to_lowercase();
        n == "strictmode" || n == "strict"
    });
    let (own, edges, attributes) = convert_items(&program.items);
    let mut nodes = imported;
    nodes.extend(own);
    machine.attributes.extend(attributes);
    machine.edges = edges;
    expand(&mut nodes, machine.strict);
    machine.nodes = nodes;
    mark_notes(&mut machine.nodes);
    if !machine.no_placeholders {
        create_placeholders(&mut machine);
    }
    machine
}

/// Splits items into nodes (names still dotted as written), edges and attributes.
fn convert_items(items: &[ast::Item]) -> (Vec<Node>, Vec<Edge>, Vec<Attribute>) {
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    let mut attributes = Vec::new();
    for item in items {
        match item {
            ast::Item::Node(n) => nodes.push(declared(n)),
            ast::Item::Edge(e) => edges.push(e.clone()),
            ast::Item::Attribute(a) => attributes.push(a.clone()),
        }
    }
    (nodes, edges, attributes)
}

fn declared(n: &ast::Node) -> Node {
    let (nodes, edges, attributes) = convert_items(&n.items);
    Node {
        name: n.name.text(),
        kind: n.kind.as_ref().map(|k| k.text.clone()),
        title: n.title.clone(),
        annotations: n.annotations.clone(),
        attributes,
        nodes,
        edges,
        span: Some(n.span),
        name_span: Some(n.name.span),
        synthetic: false,
        imported: false,
    }
}

/// Expands the dotted declarations of one container (from the last to the first): each is moved
/// under its parents, which are created (appended, with the declaration's type) when missing; a
/// declaration whose name already exists there is merged into that node. Then every child list is
/// expanded the same way.
fn expand(nodes: &mut Vec<Node>, strict: bool) {
    let dotted: Vec<usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.name.contains('.'))
        .map(|(i, _)| i)
        .collect();
    for index in dotted.into_iter().rev() {
        let mut node = nodes.remove(index);
        let parts: Vec<String> = node.name.split('.').map(str::to_string).collect();
        let Some((leaf, path)) = parts.split_last() else {
            continue;
        };
        let mut container = &mut *nodes;
        for part in path {
            let idx = match container.iter().position(|x| &x.name == part) {
                Some(i) => {
                    if container[i].kind.is_none() && node.kind.is_some() {
                        container[i].kind = node.kind.clone();
                    }
                    i
                }
                None => {
                    container.push(Node::synthetic(part, node.kind.clone()));
                    container.len() - 1
                }
            };
            container = &mut container[idx].nodes;
        }
        node.name = leaf.clone();
        match container.iter_mut().find(|x| x.name == node.name) {
            Some(existing) => merge(existing, node, strict),
            None => container.push(node),
        }
    }
    for n in nodes.iter_mut() {
        if !n.nodes.is_empty() {
            expand(&mut n.nodes, strict);
        }
    }
}

/// Merges a second declaration of a node into the first.
fn merge(existing: &mut Node, new: Node, strict: bool) {
    let new_is_note = new.kind.as_deref() == Some("note");
    let existing_is_other = existing.kind.as_ref().is_some_and(|k| k != "note");
    let has_title = new.title.as_ref().is_some_and(|t| !t.value.is_empty());
    if has_title && !(new_is_note && existing_is_other) {
        existing.title = new.title;
    }
    if let Some(kind) = new.kind {
        match &existing.kind {
            None => existing.kind = Some(kind),
            Some(old) if *old != kind && !strict && !new_is_note => existing.kind = Some(kind),
            Some(_) => {}
        }
    }
    for a in new.annotations {
        if !existing
            .annotations
            .iter()
            .any(|x| x.name.text == a.name.text)
        {
            existing.annotations.push(a);
        }
    }
    for a in new.attributes {
        match existing
            .attributes
            .iter_mut()
            .find(|x| x.name.text == a.name.text)
        {
            Some(slot) => *slot = a,
            None => existing.attributes.push(a),
        }
    }
    for child in new.nodes {
        match existing.nodes.iter_mut().find(|x| x.name == child.name) {
            Some(slot) => merge(slot, child, strict),
            None => existing.nodes.push(child),
        }
    }
    existing.edges.extend(new.edges);
}

/// A note documents the node whose name it carries: it gets `target: <its name>`.
fn mark_notes(nodes: &mut [Node]) {
    for n in nodes {
        if n.kind.as_deref() == Some("note") && n.attribute("target").is_none() {
            let span = n.name_span.unwrap_or_default();
            let value = StrLit {
                raw: format!("\"{}\"", n.name),
                value: n.name.clone(),
                span,
            };
            n.attributes.push(Attribute {
                name: ast::Ident {
                    text: "target".into(),
                    span,
                },
                ty: None,
                value: Some(Value::Primitive(Primitive::Str(value))),
                span,
            });
        }
        mark_notes(&mut n.nodes);
    }
}

/// Names used by edges that name nothing become placeholder nodes: first those of top-level edges,
/// then those of edges inside node blocks (which, unlike top-level ones, are looked up by simple
/// name or by full path from the root only).
fn create_placeholders(machine: &mut Machine) {
    let root_refs = references(machine.edges.iter());
    let known = Known::of(&machine.nodes);
    // Names of nodes created below (a dotted reference creates every missing part).
    let mut created: rustc_hash::FxHashSet<String> = Default::default();
    for reference in root_refs {
        if known.names.contains(&reference) || known.is_attribute(&reference) {
            continue;
        }
        if reference.contains('.') {
            created.extend(reference.split('.').map(str::to_string));
            add_path(&mut machine.nodes, &reference);
        } else if created.insert(reference.clone()) {
            machine.nodes.push(Node::synthetic(&reference, None));
        }
    }
    let nested_refs = {
        let nodes = flatten(&machine.nodes);
        references(nodes.iter().flat_map(|(n, _)| n.edges.iter()))
    };
    let mut known = Known::of(&machine.nodes);
    for reference in nested_refs {
        if known.names.contains(&reference) || known.is_attribute(&reference) {
            continue;
        }
        add_path(&mut machine.nodes, &reference);
        // What `Known::of` would now find, without walking the whole tree again for each name.
        known.add_path(&reference);
    }
}

/// Reference texts of edges (sources, then targets), first occurrences only.
fn references<'e>(edges: impl Iterator<Item = &'e Edge>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: rustc_hash::FxHashSet<String> = Default::default();
    for edge in edges {
        let names = edge
            .sources
            .iter()
            .chain(edge.segments.iter().flat_map(|s| s.targets.iter()));
        for name in names {
            let text = name.text();
            if seen.insert(text.clone()) {
                out.push(text);
            }
        }
    }
    out
}

/// Creates the nodes of a dotted path from the root, reusing those that exist.
fn add_path(nodes: &mut Vec<Node>, path: &str) {
    let mut container = nodes;
    for part in path.split('.') {
        let idx = match container.iter().position(|x| x.name == part) {
            Some(i) => i,
            None => {
                container.push(Node::synthetic(part, None));
                container.len() - 1
            }
        };
        container = &mut container[idx].nodes;
    }
}

/// The names references can use: simple names and full paths, and each node's attributes.
#[cfg_attr(test, derive(Debug, PartialEq))]
struct Known {
    names: rustc_hash::FxHashSet<String>,
    attributes: rustc_hash::FxHashMap<String, rustc_hash::FxHashSet<String>>,
}

impl Known {
    fn of(nodes: &[Node]) -> Self {
        let mut known = Known {
            names: Default::default(),
            attributes: Default::default(),
        };
        known.collect(nodes, None);
        known
    }

    fn collect(&mut self, nodes: &[Node], prefix: Option<&str>) {
        for n in nodes {
            self.names.insert(n.name.clone());
            let qualified = match prefix {
                Some(p) => format!("{p}.{}", n.name),
                None => n.name.clone(),
            };
            if prefix.is_some() {
                self.names.insert(qualified.clone());
            }
            let names: Vec<String> = n.attributes.iter().map(|a| a.name.text.clone()).collect();
            self.attributes
                .entry(qualified.clone())
                .or_default()
                .extend(names.iter().cloned());
            self.attributes
                .entry(n.name.clone())
                .or_default()
                .extend(names);
            self.collect(&n.nodes, Some(&qualified));
        }
    }

    /// Adds the nodes of a dotted path from the root, as [`add_path`] creates them (those that exist
    /// are known already): the same as collecting the tree again, in the time of the path.
    fn add_path(&mut self, path: &str) {
        let mut qualified = String::new();
        for part in path.split('.') {
            if !qualified.is_empty() {
                qualified.push('.');
            }
            qualified.push_str(part);
            self.names.insert(part.to_string());
            self.names.insert(qualified.clone());
            self.attributes.entry(qualified.clone()).or_default();
            self.attributes.entry(part.to_string()).or_default();
        }
    }

    /// `node.attribute` (the attribute of the node with that path, or else that simple name).
    fn is_attribute(&self, reference: &str) -> bool {
        let parts: Vec<&str> = reference.split('.').collect();
        (1..parts.len()).rev().any(|i| {
            let owner = parts[..i].join(".");
            self.attributes
                .get(&owner)
                .or_else(|| self.attributes.get(parts[i - 1]))
                .is_some_and(|names| names.contains(parts[i]))
        })
    }
}

/// The first node named `name` anywhere in the tree (pre-order).
pub fn find<'n>(nodes: &'n [Node], name: &str) -> Option<&'n Node> {
    for n in nodes {
        if n.name == name {
            return Some(n);
        }
        if let Some(found) = find(&n.nodes, name) {
            return Some(found);
        }
    }
    None
}

/// Every node in pre-order with its parent's name.
pub fn flatten(nodes: &[Node]) -> Vec<(&Node, Option<&str>)> {
    fn walk<'n>(
        nodes: &'n [Node],
        parent: Option<&'n str>,
        out: &mut Vec<(&'n Node, Option<&'n str>)>,
    ) {
        for n in nodes {
            out.push((n, parent));
            walk(&n.nodes, Some(&n.name), out);
        }
    }
    let mut out = Vec::new();
    walk(nodes, None, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_added_along_a_path_are_those_the_tree_then_has() {
        let source = dygram_syntax::source::SourceFile::new(
            "t.dy",
            "machine \"M\"\ng { a { x: 1; } }\nb { g.a -> c; }\n",
        );
        let parsed = dygram_syntax::parse(source.text());
        let mut machine = link(&parsed.program);
        let mut known = Known::of(&machine.nodes);
        for path in [
            "new",
            "g.a.deeper.still",
            "g.other",
            "b.c",
            "fresh.x.y",
            "g",
        ] {
            add_path(&mut machine.nodes, path);
            known.add_path(path);
            assert_eq!(known, Known::of(&machine.nodes), "after {path}");
        }
    }
}
