//! Where each name of a document is declared and used: the index behind go-to-definition, find
//! references and rename.
//!
//! Every part of a dotted name is an occurrence of its own (`checkout.pay` names the node
//! `checkout`, then its child `pay`), so renaming `checkout` edits the first part wherever the
//! longer name is written. Names are found in edges (sources, targets, `@barrier(Ctx.list)`), in
//! node declarations (dotted ones too), in attribute values that name a node (`target: review`),
//! in `{{ a.b }}` templates inside strings and in edge conditions (`when:`, `if:`, `unless:`),
//! whose identifiers are names without braces. Imported names are declared by their import.

use std::collections::HashMap;

use dygram_syntax::ast::{self, AnnotationArg, Item, LabelItem, Primitive, Value};
use dygram_syntax::source::Span;

/// What a name refers to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// A node, by its qualified name (`parent.child`); imported nodes by their local name.
    Node(String),
    /// An attribute of a node (`node` is the qualified name, empty for the machine's own).
    Attribute {
        /// The node's qualified name.
        node: String,
        /// The attribute's name.
        name: String,
    },
}

/// One place a name is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occurrence {
    /// The name's text there (one part of a dotted name).
    pub span: Span,
    /// What it names.
    pub target: Target,
    /// Whether it is the declaration (a node's or attribute's own name, or an import's local name).
    pub declaration: bool,
}

/// A node brought in by an `import`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// Its name in this file (the alias, or the last part of its name).
    pub local: String,
    /// Its qualified name in the imported file.
    pub original: String,
    /// The import path as written (its value).
    pub path: String,
    /// Where the imported name is written, one span per part.
    pub parts: Vec<Span>,
    /// Where the alias is written.
    pub alias: Option<Span>,
}

/// The names of one document.
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// Every occurrence, in no particular order.
    pub occurrences: Vec<Occurrence>,
    /// The document's imports, one entry per imported name.
    pub imports: Vec<Imported>,
    /// Import paths: the path string's span and its value.
    pub import_paths: Vec<(Span, String)>,
    /// Declared nodes: qualified name → where its name is written.
    nodes: HashMap<String, Span>,
    /// Simple name → qualified names, in declaration order.
    simple: HashMap<String, Vec<String>>,
    /// Qualified node name (empty for the machine) → its attributes' names.
    attributes: HashMap<String, Vec<String>>,
}

impl Names {
    /// The occurrence at byte `at` (its end included, where an editor's cursor often is).
    pub fn at(&self, at: usize) -> Option<&Occurrence> {
        let inside = |o: &&Occurrence| o.span.start as usize <= at && at <= o.span.end as usize;
        // Prefer a name that starts at the cursor over one that ends there.
        self.occurrences
            .iter()
            .filter(inside)
            .max_by_key(|o| o.span.start)
    }

    /// Every occurrence of `target`.
    pub fn of<'a>(&'a self, target: &'a Target) -> impl Iterator<Item = &'a Occurrence> + 'a {
        self.occurrences.iter().filter(move |o| &o.target == target)
    }

    /// Where `target` is declared in this document.
    pub fn declaration(&self, target: &Target) -> Option<Span> {
        self.of(target).find(|o| o.declaration).map(|o| o.span)
    }

    /// The import that brings the node `local` (or the node holding it) into this document, with
    /// the rest of the name below the imported node.
    pub fn import_of(&self, qualified: &str) -> Option<(&Imported, String)> {
        self.imports.iter().find_map(|i| {
            if qualified == i.local {
                return Some((i, String::new()));
            }
            let rest = qualified.strip_prefix(&i.local)?.strip_prefix('.')?;
            Some((i, rest.to_string()))
        })
    }

    /// The attributes declared on the node `qualified` (empty for the machine's).
    pub fn attributes_of(&self, qualified: &str) -> &[String] {
        self.attributes.get(qualified).map_or(&[], Vec::as_slice)
    }
}

/// Indexes `program`.
pub fn index(program: &ast::Program) -> Names {
    let mut names = Names::default();
    for import in &program.imports {
        names
            .import_paths
            .push((import.path.span, import.path.value.clone()));
        for symbol in &import.symbols {
            declare_import(&mut names, import, symbol);
        }
    }
    if let Some(header) = &program.header {
        for a in &header.attributes {
            declare_attribute(&mut names, "", a);
        }
    }
    declare(&mut names, &program.items, "");
    let mut uses = Uses { names: &mut names };
    if let Some(header) = &program.header {
        for a in &header.attributes {
            uses.value_of(a);
        }
    }
    uses.items(&program.items, "");
    names
}

fn declare_import(names: &mut Names, import: &ast::Import, symbol: &ast::ImportSymbol) {
    let local = symbol
        .alias
        .as_ref()
        .map_or_else(|| symbol.name.last().to_string(), |a| a.text.clone());
    let at = symbol.alias.as_ref().map_or_else(
        || symbol.name.parts.last().map(|p| p.span),
        |a| Some(a.span),
    );
    if let Some(span) = at {
        names.nodes.insert(local.clone(), span);
        names
            .simple
            .entry(local.clone())
            .or_default()
            .push(local.clone());
        names.occurrences.push(Occurrence {
            span,
            target: Target::Node(local.clone()),
            declaration: true,
        });
    }
    names.imports.push(Imported {
        local,
        original: symbol.name.text(),
        path: import.path.value.clone(),
        parts: symbol.name.parts.iter().map(|p| p.span).collect(),
        alias: symbol.alias.as_ref().map(|a| a.span),
    });
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// Declares the nodes and attributes of `items` under `prefix`.
fn declare(names: &mut Names, items: &[Item], prefix: &str) {
    for item in items {
        match item {
            // A note's name is the node it documents (a use, found with the others).
            Item::Node(node) if is_note(node) => {}
            Item::Node(node) => {
                let mut qualified = prefix.to_string();
                let last = node.name.parts.len().saturating_sub(1);
                for (i, part) in node.name.parts.iter().enumerate() {
                    qualified = join(&qualified, &part.text);
                    // A dotted declaration names its parents (created when they are missing).
                    names.nodes.entry(qualified.clone()).or_insert(part.span);
                    if i == last {
                        names.nodes.insert(qualified.clone(), part.span);
                        let simple = names.simple.entry(part.text.clone()).or_default();
                        if !simple.contains(&qualified) {
                            simple.push(qualified.clone());
                        }
                    }
                    names.occurrences.push(Occurrence {
                        span: part.span,
                        target: Target::Node(qualified.clone()),
                        declaration: i == last,
                    });
                }
                for child in &node.items {
                    if let Item::Attribute(a) = child {
                        declare_attribute(names, &qualified, a);
                    }
                }
                declare(names, &node.items, &qualified);
            }
            Item::Attribute(a) if prefix.is_empty() => declare_attribute(names, "", a),
            Item::Attribute(_) | Item::Edge(_) => {}
        }
    }
}

fn declare_attribute(names: &mut Names, node: &str, a: &ast::Attribute) {
    names
        .attributes
        .entry(node.to_string())
        .or_default()
        .push(a.name.text.clone());
    names.occurrences.push(Occurrence {
        span: a.name.span,
        target: Target::Attribute {
            node: node.to_string(),
            name: a.name.text.clone(),
        },
        declaration: true,
    });
}

/// Finds the uses of names, once every declaration is known.
struct Uses<'a> {
    names: &'a mut Names,
}

impl Uses<'_> {
    fn items(&mut self, items: &[Item], prefix: &str) {
        for item in items {
            match item {
                Item::Node(node) if is_note(node) => {
                    self.chain(&node.name, false);
                    self.items(&node.items, prefix);
                }
                Item::Node(node) => {
                    let qualified = join(prefix, &node.name.text());
                    for annotation in &node.annotations {
                        self.annotation(annotation);
                    }
                    self.items(&node.items, &qualified);
                }
                Item::Edge(edge) => self.edge(edge),
                Item::Attribute(a) => self.value_of(a),
            }
        }
    }

    fn edge(&mut self, edge: &ast::Edge) {
        for name in &edge.sources {
            self.chain(name, true);
        }
        for segment in &edge.segments {
            for group in &segment.labels {
                for label in group {
                    self.label(label);
                }
            }
            for name in &segment.targets {
                self.chain(name, true);
            }
        }
        for a in &edge.attributes {
            self.value_of(a);
        }
    }

    fn label(&mut self, label: &LabelItem) {
        match label {
            LabelItem::Annotation(annotation) => self.annotation(annotation),
            LabelItem::Pair { name, value, .. } => {
                let condition = matches!(name.text.as_str(), "when" | "if" | "unless");
                if let Primitive::Str(s) = value {
                    self.string(s, condition);
                }
            }
            LabelItem::Flag { .. } | LabelItem::Text(_) => {}
        }
    }

    fn annotation(&mut self, annotation: &ast::Annotation) {
        match &annotation.arg {
            Some(AnnotationArg::QName(name)) => self.chain(name, false),
            Some(AnnotationArg::Value(Primitive::Str(s))) => self.string(s, false),
            _ => {}
        }
    }

    fn value_of(&mut self, a: &ast::Attribute) {
        if let Some(value) = &a.value {
            self.value(value);
        }
    }

    fn value(&mut self, value: &Value) {
        match value {
            Value::Object(attributes, _) => {
                for a in attributes {
                    self.value_of(a);
                }
            }
            Value::Array(values, _) => {
                for v in values {
                    self.value(v);
                }
            }
            Value::Primitive(Primitive::Ident(text, span)) => {
                if let Some(qualified) = self.node(text) {
                    self.names.occurrences.push(Occurrence {
                        span: *span,
                        target: Target::Node(qualified),
                        declaration: false,
                    });
                }
            }
            Value::Primitive(Primitive::Str(s)) => self.string(s, false),
            Value::Primitive(_) => {}
        }
    }

    /// The node a simple or qualified name designates.
    fn node(&self, name: &str) -> Option<String> {
        if self.names.nodes.contains_key(name) {
            return Some(name.to_string());
        }
        self.names
            .simple
            .get(name)
            .and_then(|all| all.first())
            .cloned()
    }

    /// A dotted name: each part that names a node (or, after a node, its attribute) is an
    /// occurrence. An edge's name that names nothing is a node the machine creates: the whole
    /// name is one occurrence of it.
    fn chain(&mut self, name: &ast::QName, edge: bool) {
        let parts: Vec<(&str, Span)> = name
            .parts
            .iter()
            .map(|p| (p.text.as_str(), p.span))
            .collect();
        let found = self.resolve(&parts);
        if found.is_empty() && edge && !parts.is_empty() {
            self.names.occurrences.push(Occurrence {
                span: name.span,
                target: Target::Node(name.text()),
                declaration: false,
            });
        }
        self.names.occurrences.extend(found);
    }

    /// The occurrences of a dotted name given as parts with their spans.
    fn resolve(&self, parts: &[(&str, Span)]) -> Vec<Occurrence> {
        let mut out = Vec::new();
        let Some(&(first, first_span)) = parts.first() else {
            return out;
        };
        let mut current = match self.node(first) {
            Some(q) => q,
            None => {
                if self.names.attributes_of("").iter().any(|a| a == first) {
                    out.push(occurrence(first_span, attribute("", first)));
                }
                return out;
            }
        };
        out.push(occurrence(first_span, Target::Node(current.clone())));
        for &(part, span) in &parts[1..] {
            let child = join(&current, part);
            if self.names.nodes.contains_key(&child) {
                out.push(occurrence(span, Target::Node(child.clone())));
                current = child;
            } else {
                let known = self.names.attributes_of(&current).iter().any(|a| a == part);
                if known || self.names.import_of(&current).is_some() {
                    out.push(occurrence(span, attribute(&current, part)));
                }
                break;
            }
        }
        out
    }

    /// Names in a string: inside `{{ … }}` templates, and anywhere in a condition.
    fn string(&mut self, s: &ast::StrLit, condition: bool) {
        // The text between the quotes.
        let quoted = s.raw.len() >= 2;
        let raw = if quoted {
            &s.raw[1..s.raw.len() - 1]
        } else {
            ""
        };
        let base = s.span.start as usize + 1;
        let mut found = Vec::new();
        if condition {
            self.expression(raw, base, &mut found);
        } else {
            let mut from = 0;
            while let Some(open) = raw[from..].find("{{") {
                let start = from + open + 2;
                let end = raw[start..].find("}}").map_or(raw.len(), |i| start + i);
                self.expression(&raw[start..end], base + start, &mut found);
                from = end;
            }
        }
        self.names.occurrences.extend(found);
    }

    /// The dotted identifiers of an expression, skipping quoted strings inside it.
    fn expression(&self, text: &str, base: usize, out: &mut Vec<Occurrence>) {
        let bytes = text.as_bytes();
        let mut i = 0;
        let mut quote: Option<u8> = None;
        while i < bytes.len() {
            let b = bytes[i];
            if let Some(q) = quote {
                if b == b'\\' {
                    i += 1;
                } else if b == q {
                    quote = None;
                }
                i += 1;
                continue;
            }
            if b == b'\'' || b == b'"' {
                quote = Some(b);
                i += 1;
                continue;
            }
            let starts = b.is_ascii_alphabetic() || b == b'_';
            let after_dot_or_word =
                i > 0 && (bytes[i - 1] == b'.' || bytes[i - 1].is_ascii_alphanumeric());
            if !starts || after_dot_or_word {
                i += 1;
                continue;
            }
            let mut parts = Vec::new();
            loop {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                parts.push((&text[start..i], Span::new(base + start, base + i)));
                let next_is_part = bytes.get(i) == Some(&b'.')
                    && bytes
                        .get(i + 1)
                        .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_');
                if !next_is_part {
                    break;
                }
                i += 1;
            }
            out.extend(self.resolve(&parts));
        }
    }
}

fn is_note(node: &ast::Node) -> bool {
    node.kind
        .as_ref()
        .is_some_and(|k| k.text.eq_ignore_ascii_case("note"))
}

fn occurrence(span: Span, target: Target) -> Occurrence {
    Occurrence {
        span,
        target,
        declaration: false,
    }
}

fn attribute(node: &str, name: &str) -> Target {
    Target::Attribute {
        node: node.to_string(),
        name: name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Names {
        index(&dygram_syntax::parse(text).program)
    }

    /// The texts of the occurrences of `target`, declarations marked with `=`.
    fn uses(text: &str, target: &Target) -> Vec<String> {
        let mut found: Vec<(u32, String)> = names(text)
            .of(target)
            .map(|o| {
                let written = &text[o.span.start as usize..o.span.end as usize];
                let mark = if o.declaration { "=" } else { "" };
                (o.span.start, format!("{mark}{written}"))
            })
            .collect();
        found.sort();
        found.into_iter().map(|(_, t)| t).collect()
    }

    #[test]
    fn dotted_names_name_each_part() {
        let text = "Process checkout {\n  Task pay;\n}\nstart -> checkout.pay;\npay -> done;\n";
        let pay = Target::Node("checkout.pay".into());
        assert_eq!(uses(text, &pay), ["=pay", "pay", "pay"]);
        let checkout = Target::Node("checkout".into());
        assert_eq!(uses(text, &checkout), ["=checkout", "checkout"]);
        // A name nothing declares is a node the machine creates, used where it is written.
        assert_eq!(uses(text, &Target::Node("done".into())), ["done"]);
    }

    #[test]
    fn templates_conditions_and_values_name_nodes_and_attributes() {
        let text = "Context order { total<number>: 0; }\nTask pay { prompt: \"Pay {{ order.total }} now\"; }\nnote pay \"About\";\npay -when: \"order.total > 3 && 'order.total' != x\"-> done;\nTask done { after: pay; }\n";
        let total = attribute("order", "total");
        assert_eq!(uses(text, &total), ["=total", "total", "total"]);
        let pay = Target::Node("pay".into());
        let found = uses(text, &pay);
        assert!(found.contains(&"=pay".to_string()), "{found:?}");
        assert_eq!(found.iter().filter(|t| *t == "pay").count(), 3, "{found:?}");
    }

    #[test]
    fn imports_declare_their_local_names() {
        let text = "import { Group.Inner as Alias, Other } from \"./lib.dy\"\nstart -> Alias;\nAlias -> Other;\n";
        let n = names(text);
        assert_eq!(n.imports.len(), 2);
        assert_eq!(n.imports[0].original, "Group.Inner");
        assert_eq!(
            uses(text, &Target::Node("Alias".into())),
            ["=Alias", "Alias", "Alias"]
        );
        assert_eq!(
            uses(text, &Target::Node("Other".into())),
            ["=Other", "Other"]
        );
        let (import, rest) = n.import_of("Alias.deep").unwrap();
        assert_eq!(
            (import.original.as_str(), rest.as_str()),
            ("Group.Inner", "deep")
        );
    }
}
