//! The DSL back-compiler: canonical machine JSON back to `.dy` source.
//!
//! [`to_dsl`] writes a program whose compilation gives back the JSON it was given (leaving
//! `$sourceRange` aside): parse → JSON → DSL → parse gives the same JSON, keys in the same order.
//! The program is a canonical form of the original, not its text:
//!
//! * a `machine "…"` header with the machine's annotations and, in its block, every machine
//!   attribute. Without a title there is no header, and the attributes become top-level
//!   statements;
//! * the nodes as a tree of plain (undotted) declarations, rebuilt from the `parent` fields of the
//!   flattened list (a pre-order), so they come out in the same order. Intermediate and placeholder
//!   nodes are declared like the others, so the linker has nothing to create. A note keeps the
//!   `note` keyword and loses the `target` attribute the linker gives it back; a note without one
//!   was spelled otherwise (`Note`);
//! * the explicit edges in their order; inferred edges, dependencies and styles are derived again.
//!   The JSON lists top-level edge statements first, then the edges of node blocks, block by block
//!   in pre-order. From the end, an edge goes into the innermost block holding both its endpoints
//!   as long as that keeps the order and drops no dependency: conditions (`when:`, `unless:`,
//!   `if:`) give dependencies only on top-level edges. Consecutive records of one segment
//!   (`a -> b, c`, `a, b -> c`) or of a chain (`a -> b -> c`) make one statement.
//!
//! Values are written so that the conversion to JSON gives them back: a string that would be read
//! as a number or a boolean, or that starts or ends with a quote, gets an extra pair of quotes
//! inside the literal (`"'42'"`), which the conversion removes; negative numbers are written as
//! strings (`"-3"`), which it turns back into numbers; `null` (an infinite number) is `1e999`.
//! Labels, multiplicities, titles and annotation arguments are written for their own rules in the
//! same way. Declared types choose between equivalent forms so that checks the original passed
//! pass again: a number is written as a string where a `string` is expected, and a literal union,
//! whose literals the JSON does not keep (`""`), allows the values it checks.
//!
//! Where the JSON does not say how something was written and the derived parts depend on it, those
//! parts decide: a string naming a node gets the extra quotes (which hide it from the edge
//! inference) unless the JSON has the inferred edge it gives; a condition that is a bare name
//! stays bare when quoting it would add a dependency the JSON lacks; a `text: …` label item that
//! went into the style stays a `key: value` item; a record with a condition joins no other source
//! in one statement (`a, b -when: …-> c` would give its dependencies in another order), while it
//! continues a chain as any record does (a condition's dependencies come from its own segment's
//! sources).
//!
//! Limits (no program of the reference corpus meets them): machine annotations, and a machine
//! attribute with neither type nor value, need a header, so they are lost without a title; an edge
//! `attributes` object cannot both drop a label key and set it again; when several same-named nodes
//! are on the path of a node, it goes under the nearest (the JSON is the same either way); a
//! condition reading several names on a segment after one with several targets (`a -> b, c
//! -when: 'x.n > y.n'-> d`) is written once per source, which lists its dependencies source by
//! source instead of name by name.
//!
//! Odd input never makes it panic: keys that are missing or have the wrong kind of value are
//! skipped.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{Map, Value as Json};

use crate::json::{condition_variables, find_condition, semantic};
use crate::render::dsl::edges::{block, is_condition_key, last_part, semantic_word, statements};
use crate::render::dsl::literals::{
    Values, checked_text, is_ident, is_qname, literal, no_hiding, pair_token, split_type,
    stripped_token, token_kinds,
};
use crate::values::{from_text, js_trim};
use dygram_syntax::lexer::TokenKind;

mod edges;
mod literals;

const INDENT: &str = "    ";

/// Writes `machine` (canonical machine JSON) as `.dy` source.
///
/// Compiling the result gives `machine` again, apart from `$sourceRange` keys; the module
/// documentation describes the form of the program and its limits.
///
/// ```
/// use dygram_core::compile;
/// use dygram_syntax::source::SourceFile;
/// let source = "Task a \"A\" { n: 3; }\na -when: 'n > 1'-> b;";
/// let json = compile(SourceFile::new("m.dy", source)).json(Default::default());
/// let dsl = dygram_core::render::dsl::to_dsl(&json);
/// assert_eq!(dsl, "task a \"A\" {\n    n: 3;\n}\n\nb;\n\na -when: \"n > 1\"-> b;\n");
/// assert_eq!(compile(SourceFile::new("m.dy", dsl.as_str())).json(Default::default()), json);
/// ```
pub fn to_dsl(machine: &Json) -> String {
    match machine.as_object() {
        Some(m) => Generator::new(m).program(),
        None => String::new(),
    }
}

/// How deeply the nodes of `machine` (canonical machine JSON) nest, as [`to_dsl`] rebuilds the tree
/// from their `parent` fields (1 for top-level nodes only, 0 without nodes). Callers refuse a
/// machine nested deeper than [`dygram_syntax::parser::MAX_NESTING`] before writing it as `.dy`,
/// which the parser would refuse anyway.
pub fn nesting_depth(machine: &Json) -> usize {
    let Some(m) = machine.as_object() else {
        return 0;
    };
    let mut path: Vec<&str> = Vec::new();
    let mut deepest = 0;
    for json in objects(array_of(m, "nodes")) {
        let Some(name) = str_of(json, "name") else {
            continue;
        };
        match str_of(json, "parent") {
            None => path.clear(),
            Some(parent) => {
                while path.last().is_some_and(|n| *n != parent) {
                    path.pop();
                }
            }
        }
        path.push(name);
        deepest = deepest.max(path.len());
    }
    deepest
}

// ---- JSON access -------------------------------------------------------------------------------

fn str_of<'a>(m: &'a Map<String, Json>, key: &str) -> Option<&'a str> {
    m.get(key).and_then(Json::as_str)
}

fn array_of<'a>(m: &'a Map<String, Json>, key: &str) -> &'a [Json] {
    m.get(key)
        .and_then(Json::as_array)
        .map_or(&[], Vec::as_slice)
}

fn objects(items: &[Json]) -> impl Iterator<Item = &Map<String, Json>> {
    items.iter().filter_map(Json::as_object)
}

// ---- the machine -------------------------------------------------------------------------------

struct TreeNode<'a> {
    json: &'a Map<String, Json>,
    name: &'a str,
    parent: Option<usize>,
    children: Vec<usize>,
    /// Edges written in this node's block.
    edges: Vec<Edge>,
}

/// What the derived parts of the JSON say about how things were written.
#[derive(Default)]
struct Facts {
    /// Simple names of all nodes.
    names: HashSet<String>,
    /// Each attribute name and the first node (pre-order) that has it.
    first_owner: HashMap<String, String>,
    /// What a reference text can name: node names, paths and `path.attribute`, to a node name.
    aliases: HashMap<String, String>,
    /// The targets of the inferred edges, in order, by `(source, sourceAttribute)`.
    inferred: HashMap<(String, String), Vec<String>>,
    /// The condition dependencies.
    conditions: HashSet<Dependency>,
    /// Their conditions.
    condition_paths: HashSet<String>,
}

/// `(source, target, reason, path)`.
type Dependency = (String, String, String, String);

impl Facts {
    /// The node a text in an attribute value names for the edge inference (the longest dotted
    /// prefix that is a known name).
    fn resolve(&self, s: &str) -> Option<&str> {
        let t = js_trim(s);
        let t = t.strip_suffix(';').unwrap_or(t);
        if t.is_empty() {
            return None;
        }
        let parts: Vec<&str> = t.split('.').collect();
        (1..=parts.len())
            .rev()
            .find_map(|i| self.aliases.get(&parts[..i].join(".")))
            .map(String::as_str)
    }

    /// The dependencies a top-level edge from `source` gets from `condition` (a condition's
    /// dependencies come from the sources of its own segment).
    fn dependencies(&self, source: &str, condition: &str) -> Vec<Dependency> {
        condition_variables(condition)
            .into_iter()
            .filter_map(|v| {
                let target = if self.names.contains(v.as_str()) {
                    v.clone()
                } else {
                    self.first_owner.get(&v)?.clone()
                };
                (target != source).then(|| {
                    (
                        source.to_string(),
                        target,
                        format!("condition references {v}"),
                        condition.to_string(),
                    )
                })
            })
            .collect()
    }

    /// Whether the JSON has all these dependencies.
    fn has_all(&self, dependencies: &[Dependency]) -> bool {
        dependencies.iter().all(|d| self.conditions.contains(d))
    }

    /// Whether a `when:`-like label item with value `v` on an edge from `source` is quoted: yes,
    /// unless it is a bare name whose quoting would add a dependency the JSON lacks.
    fn quote_condition(&self, v: &str, source: &str) -> bool {
        !is_ident(v) || self.has_all(&self.dependencies(source, v))
    }
}

/// Where an annotation or a label item is written.
#[derive(Clone, Copy)]
enum Place<'s> {
    /// On the machine or a node.
    Node,
    /// In the label of a top-level edge from this node (as the dependency analysis names it).
    TopLevelEdge(&'s str),
    /// In the label of an edge inside a node's block.
    NestedEdge,
}

/// An explicit edge record, written.
struct Edge {
    source: String,
    target: String,
    /// Multiplicities and the arrow with its label.
    segment: String,
    /// The `{ … }` block's attributes.
    block: Vec<String>,
    /// The condition the dependency analysis finds in the label.
    condition: Option<String>,
}

struct Generator<'a> {
    machine: &'a Map<String, Json>,
    nodes: Vec<TreeNode<'a>>,
    roots: Vec<usize>,
    root_edges: Vec<Edge>,
    facts: Facts,
    /// Attribute types of the nodes usable as types, by node name.
    node_types: HashMap<&'a str, HashMap<&'a str, &'a str>>,
    /// Values that the literal union types of such attributes check.
    union_literals: HashMap<(&'a str, &'a str), Vec<String>>,
}

impl<'a> Generator<'a> {
    fn new(machine: &'a Map<String, Json>) -> Self {
        let mut generator = Self {
            machine,
            nodes: Vec::new(),
            roots: Vec::new(),
            root_edges: Vec::new(),
            facts: Facts::default(),
            node_types: HashMap::new(),
            union_literals: HashMap::new(),
        };
        generator.build_tree();
        generator.collect_node_types();
        generator.union_literals = generator.union_uses();
        generator.gather_facts();
        generator.place_edges();
        generator
    }

    /// Rebuilds the tree from the flattened pre-order list: a node's parent is the nearest node of
    /// that name on the current path (a parent that is not there makes a root).
    fn build_tree(&mut self) {
        let mut path: Vec<usize> = Vec::new();
        for json in objects(array_of(self.machine, "nodes")) {
            let Some(name) = str_of(json, "name") else {
                continue;
            };
            match str_of(json, "parent") {
                None => path.clear(),
                Some(parent) => {
                    while path.last().is_some_and(|&i| self.nodes[i].name != parent) {
                        path.pop();
                    }
                }
            }
            let index = self.nodes.len();
            let parent = path.last().copied();
            self.nodes.push(TreeNode {
                json,
                name,
                parent,
                children: Vec::new(),
                edges: Vec::new(),
            });
            match parent {
                Some(p) => self.nodes[p].children.push(index),
                None => self.roots.push(index),
            }
            path.push(index);
        }
    }

    fn collect_node_types(&mut self) {
        for n in &self.nodes {
            if str_of(n.json, "type") == Some("note") || self.node_types.contains_key(n.name) {
                continue;
            }
            let mut fields = HashMap::new();
            for a in objects(array_of(n.json, "attributes")) {
                if let (Some(name), Some(ty)) = (str_of(a, "name"), str_of(a, "type")) {
                    fields.entry(name).or_insert(ty);
                }
            }
            self.node_types.insert(n.name, fields);
        }
    }

    fn values<'v>(&'v self, hide: &'v dyn Fn(&str) -> bool) -> Values<'v> {
        Values {
            node_types: &self.node_types,
            hide,
        }
    }

    /// For each attribute of a node used as a type, the written values of the fields that the
    /// type checks against it.
    fn union_uses(&self) -> HashMap<(&'a str, &'a str), Vec<String>> {
        fn walk<'a>(
            generator: &Generator<'a>,
            v: &Json,
            ty: Option<&str>,
            out: &mut HashMap<(&'a str, &'a str), Vec<String>>,
        ) {
            let (Some(ty), Json::Object(entries)) = (ty, v) else {
                return;
            };
            let (base, _) = split_type(ty);
            let Some((&node, fields)) = generator.node_types.get_key_value(base) else {
                return;
            };
            for (k, v) in entries {
                let Some((&field, &field_ty)) = fields.get_key_value(k.as_str()) else {
                    continue;
                };
                if field_ty.is_empty() {
                    let written = generator.values(&no_hiding).write(v, Some(""), false);
                    out.entry((node, field))
                        .or_default()
                        .push(checked_text(&written));
                } else {
                    walk(generator, v, Some(field_ty), out);
                }
            }
        }
        let mut out = HashMap::new();
        let machine = std::iter::once(self.machine);
        for owner in machine.chain(self.nodes.iter().map(|n| n.json)) {
            for a in objects(array_of(owner, "attributes")) {
                if let Some(v) = a.get("value") {
                    walk(self, v, str_of(a, "type"), &mut out);
                }
            }
        }
        out
    }

    /// Reads the derived parts of the JSON (see [`Facts`]).
    fn gather_facts(&mut self) {
        fn aliases(generator: &Generator<'_>, index: usize, prefix: Option<&str>, out: &mut Facts) {
            let Some(n) = generator.nodes.get(index) else {
                return;
            };
            let path = match prefix {
                Some(p) => format!("{p}.{}", n.name),
                None => n.name.to_string(),
            };
            out.aliases.insert(n.name.to_string(), n.name.to_string());
            out.aliases.insert(path.clone(), n.name.to_string());
            for a in objects(array_of(n.json, "attributes")).filter_map(|a| str_of(a, "name")) {
                out.aliases
                    .insert(format!("{path}.{a}"), n.name.to_string());
            }
            for &child in &n.children {
                aliases(generator, child, Some(&path), out);
            }
        }
        let mut facts = Facts::default();
        for n in &self.nodes {
            facts.names.insert(n.name.to_string());
            for a in objects(array_of(n.json, "attributes")).filter_map(|a| str_of(a, "name")) {
                facts
                    .first_owner
                    .entry(a.to_string())
                    .or_insert_with(|| n.name.to_string());
            }
        }
        for &root in &self.roots {
            aliases(self, root, None, &mut facts);
        }
        for e in objects(array_of(self.machine, "edges")) {
            if str_of(e, "type") == Some("inferred")
                && let (Some(s), Some(a), Some(t)) = (
                    str_of(e, "source"),
                    str_of(e, "sourceAttribute"),
                    str_of(e, "target"),
                )
            {
                facts
                    .inferred
                    .entry((s.to_string(), a.to_string()))
                    .or_default()
                    .push(t.to_string());
            }
        }
        for d in objects(array_of(self.machine, "inferredDependencies")) {
            if let (Some(reason), Some(path), Some(source)) =
                (str_of(d, "reason"), str_of(d, "path"), str_of(d, "source"))
                && reason.starts_with("condition references ")
            {
                if let Some(target) = str_of(d, "target") {
                    facts.conditions.insert((
                        source.to_string(),
                        target.to_string(),
                        reason.to_string(),
                        path.to_string(),
                    ));
                }
                facts.condition_paths.insert(path.to_string());
            }
        }
        self.facts = facts;
    }

    /// The index of the node an edge endpoint names (a non-note one if there are several).
    fn index_of(&self, name: &str) -> Option<usize> {
        let named = || {
            self.nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| n.name == name)
        };
        named()
            .find(|(_, n)| str_of(n.json, "type") != Some("note"))
            .or_else(|| named().next())
            .map(|(i, _)| i)
    }

    /// The indexes of the nodes holding a node, innermost first.
    fn ancestors(&self, index: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut current = self.nodes.get(index).and_then(|n| n.parent);
        while let Some(i) = current {
            if out.contains(&i) {
                break;
            }
            out.push(i);
            current = self.nodes.get(i).and_then(|n| n.parent);
        }
        out
    }

    /// The innermost node block holding both endpoints of a record, if any.
    fn common_block(&self, record: &Map<String, Json>) -> Option<usize> {
        let source = self.index_of(str_of(record, "source")?)?;
        let target = self.index_of(str_of(record, "target")?)?;
        let around_target = self.ancestors(target);
        self.ancestors(source)
            .into_iter()
            .find(|a| around_target.contains(a))
    }

    /// Chooses where each explicit edge is written (see the module documentation): from the end,
    /// edges go into the innermost block holding both endpoints while that keeps their order and
    /// does not drop a dependency the JSON has; the others stay at the top level.
    fn place_edges(&mut self) {
        let edges: Vec<(&Map<String, Json>, Edge, Option<usize>)> =
            objects(array_of(self.machine, "edges"))
                .filter(|e| str_of(e, "type") != Some("inferred"))
                .filter(|e| str_of(e, "source").is_some() && str_of(e, "target").is_some())
                .map(|record| (record, self.edge(record, true), self.common_block(record)))
                .collect();
        let mut hosts: Vec<Option<usize>> = vec![None; edges.len()];
        let mut limit = usize::MAX;
        for (k, (_, edge, common)) in edges.iter().enumerate().rev() {
            // A condition with dependencies in the JSON was read from a top-level edge.
            let keeps_dependencies = !edge
                .condition
                .as_ref()
                .is_some_and(|c| self.facts.condition_paths.contains(c));
            match *common {
                Some(h) if h <= limit && keeps_dependencies => {
                    hosts[k] = Some(h);
                    limit = h;
                }
                _ => break,
            }
        }
        for ((record, edge, _), host) in edges.into_iter().zip(hosts) {
            match host {
                Some(h) => {
                    // Quoting conditions in blocks adds no dependency.
                    let edge = self.edge(record, false);
                    if let Some(node) = self.nodes.get_mut(h) {
                        node.edges.push(edge);
                    }
                }
                None => self.root_edges.push(edge),
            }
        }
    }

    // ---- writing -------------------------------------------------------------------------------

    fn program(&self) -> String {
        let mut out = String::new();
        self.header(&mut out);
        for (i, &root) in self.roots.iter().enumerate() {
            let block = self.has_block(root);
            let previous_block = i > 0 && self.roots.get(i - 1).is_some_and(|&p| self.has_block(p));
            if i > 0 && (block || previous_block) {
                out.push('\n');
            }
            self.node(root, 0, &mut out);
        }
        if !self.root_edges.is_empty() {
            if !out.is_empty() {
                out.push('\n');
            }
            for statement in statements(&self.root_edges, true) {
                out.push_str(&statement);
                out.push('\n');
            }
        }
        out
    }

    fn header(&self, out: &mut String) {
        let attributes = objects(array_of(self.machine, "attributes"));
        match str_of(self.machine, "title") {
            Some(title) => {
                out.push_str("machine ");
                out.push_str(&literal(title));
                for a in objects(array_of(self.machine, "annotations")) {
                    out.push(' ');
                    out.push_str(&self.annotation(a, Place::Node));
                }
                let values = self.values(&no_hiding);
                let lines: Vec<String> = attributes
                    .filter_map(|a| values.attribute(a, true, &[]))
                    .collect();
                if lines.is_empty() {
                    out.push_str(";\n");
                } else {
                    out.push_str(" {\n");
                    for line in lines {
                        out.push_str(INDENT);
                        out.push_str(&line);
                        out.push('\n');
                    }
                    out.push_str("}\n");
                }
            }
            None => {
                let values = self.values(&no_hiding);
                for line in attributes.filter_map(|a| values.attribute(a, false, &[])) {
                    out.push_str(&line);
                    out.push('\n');
                }
            }
        }
        if !out.is_empty() && !self.roots.is_empty() {
            out.push('\n');
        }
    }

    /// The attribute lines of a node (without the `target` the linker adds to notes).
    fn attribute_lines(&self, n: &TreeNode<'_>, implicit_target: bool) -> Vec<String> {
        const PRIMITIVE_TYPES: [&str; 8] = [
            "string", "number", "boolean", "float", "double", "integer", "int", "decimal",
        ];
        let attributes = array_of(n.json, "attributes");
        let count = attributes
            .len()
            .saturating_sub(usize::from(implicit_target));
        let kind = str_of(n.json, "type").map(str::to_lowercase);
        let inferring = !matches!(kind.as_deref(), Some("note" | "style"));
        attributes
            .iter()
            .take(count)
            .filter_map(Json::as_object)
            .filter_map(|a| {
                let name = str_of(a, "name").unwrap_or("");
                // Quotes hide a node name from the edge inference: a text naming a node gets them
                // unless it gives the next inferred edge the JSON has for this attribute.
                let searched = inferring
                    && !str_of(a, "type")
                        .is_some_and(|t| PRIMITIVE_TYPES.contains(&t.to_lowercase().as_str()));
                let expected: RefCell<VecDeque<String>> = RefCell::new(
                    self.facts
                        .inferred
                        .get(&(n.name.to_string(), name.to_string()))
                        .map(|targets| targets.iter().cloned().collect())
                        .unwrap_or_default(),
                );
                let hide = |s: &str| {
                    let Some(target) = self.facts.resolve(s).filter(|_| searched) else {
                        return false;
                    };
                    let mut expected = expected.borrow_mut();
                    if expected.front().map(String::as_str) == Some(target) {
                        expected.pop_front();
                        false
                    } else {
                        true
                    }
                };
                let literals = self
                    .union_literals
                    .get(&(n.name, name))
                    .map_or(&[][..], Vec::as_slice);
                self.values(&hide).attribute(a, false, literals)
            })
            .collect()
    }

    fn has_block(&self, index: usize) -> bool {
        self.nodes.get(index).is_some_and(|n| {
            !n.children.is_empty()
                || !n.edges.is_empty()
                || !self.attribute_lines(n, self.note_keyword(n).1).is_empty()
        })
    }

    /// The type keyword to write, and whether the last attribute is the note `target` the
    /// linker adds.
    fn note_keyword(&self, n: &TreeNode<'a>) -> (Option<&'a str>, bool) {
        let Some(kind) = str_of(n.json, "type") else {
            return (None, false);
        };
        if !is_ident(kind) {
            return (None, false);
        }
        if kind != "note" {
            return (Some(kind), false);
        }
        // The linker gives a note spelled `note` a `target` attribute when it has none: a note
        // without one was spelled otherwise.
        let attributes = array_of(n.json, "attributes");
        let targets = objects(attributes)
            .filter(|a| str_of(a, "name") == Some("target"))
            .count();
        if targets == 0 {
            return (Some("Note"), false);
        }
        let implicit = targets == 1
            && attributes
                .last()
                .and_then(Json::as_object)
                .is_some_and(|last| {
                    str_of(last, "name") == Some("target")
                        && !last.contains_key("type")
                        && last.get("value") == Some(&from_text(n.name))
                });
        (Some("note"), implicit)
    }

    fn node(&self, index: usize, depth: usize, out: &mut String) {
        let Some(n) = self.nodes.get(index) else {
            return;
        };
        let indent = INDENT.repeat(depth);
        out.push_str(&indent);
        let (kind, implicit_target) = self.note_keyword(n);
        if let Some(kind) = kind {
            out.push_str(kind);
            out.push(' ');
        }
        out.push_str(n.name);
        if let Some(title) = str_of(n.json, "title") {
            // One leading and one trailing `"` are removed from titles, and empty ones dropped.
            let text = if title.is_empty() || title.starts_with('"') || title.ends_with('"') {
                format!("\"{title}\"")
            } else {
                title.to_string()
            };
            out.push(' ');
            out.push_str(&literal(&text));
        }
        for a in objects(array_of(n.json, "annotations")) {
            out.push(' ');
            out.push_str(&self.annotation(a, Place::Node));
        }
        let lines = self.attribute_lines(n, implicit_target);
        if lines.is_empty() && n.children.is_empty() && n.edges.is_empty() {
            out.push_str(";\n");
            return;
        }
        out.push_str(" {\n");
        let inner = INDENT.repeat(depth + 1);
        for line in lines {
            out.push_str(&inner);
            out.push_str(&line);
            out.push('\n');
        }
        for &child in &n.children {
            self.node(child, depth + 1, out);
        }
        for statement in statements(&n.edges, false) {
            out.push_str(&inner);
            out.push_str(&statement);
            out.push('\n');
        }
        out.push_str(&indent);
        out.push_str("}\n");
    }

    /// An annotation. Machine and node annotations keep only parameters; edge annotations also a
    /// string (`@a("v")`) or a dotted name (`@a(Q.Name)`).
    fn annotation(&self, a: &Map<String, Json>, place: Place<'_>) -> String {
        let mut out = format!("@{}", str_of(a, "name").unwrap_or(""));
        if let Some(params) = a.get("attributes").and_then(Json::as_object) {
            // Values come back as strings with one outer quote removed on each side; `true` is a
            // flag. A trailing `;` makes even a single flag a parameter list.
            let items: Vec<String> = params
                .iter()
                .filter(|(k, _)| is_ident(k))
                .map(|(k, v)| match v {
                    Json::Bool(true) => format!("{k};"),
                    other => {
                        let text = match other {
                            Json::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        let quoted = is_condition_key(k) && self.quote_condition(&text, place);
                        format!("{k}: {};", stripped_token(&text, quoted))
                    }
                })
                .collect();
            if !items.is_empty() {
                out.push('(');
                out.push_str(&items.join(" "));
                out.push(')');
            }
        } else if matches!(place, Place::Node) {
            // Single values of node annotations are not kept.
        } else if let Some(v) = str_of(a, "value") {
            // One leading and one trailing `"` are removed; an empty string is dropped.
            let text = if v.is_empty() || v.starts_with('"') || v.ends_with('"') {
                format!("\"{v}\"")
            } else {
                v.to_string()
            };
            out.push('(');
            out.push_str(&literal(&text));
            out.push(')');
        } else if let Some(q) = str_of(a, "qualifiedValue").filter(|q| is_qname(q)) {
            out.push('(');
            out.push_str(q);
            out.push(')');
        }
        out
    }

    // ---- edges ---------------------------------------------------------------------------------

    /// Whether a `when:`-like item's value is quoted (see [`Facts::quote_condition`]).
    fn quote_condition(&self, v: &str, place: Place<'_>) -> bool {
        match place {
            Place::Node => false,
            Place::TopLevelEdge(source) => self.facts.quote_condition(v, source),
            Place::NestedEdge => true,
        }
    }

    fn edge(&self, record: &Map<String, Json>, top_level: bool) -> Edge {
        let reference = |node: &str, attribute: Option<&str>| match attribute {
            Some(a) => format!("{node}.{a}"),
            None => node.to_string(),
        };
        let source = reference(
            str_of(record, "source").unwrap_or(""),
            str_of(record, "sourceAttribute"),
        );
        let target = reference(
            str_of(record, "target").unwrap_or(""),
            str_of(record, "targetAttribute"),
        );
        let place = if top_level {
            Place::TopLevelEdge(last_part(&source))
        } else {
            Place::NestedEdge
        };
        let (arrow, label) = self.arrow(record, place);
        let mut segment = String::new();
        if let Some(m) = str_of(record, "sourceMultiplicity") {
            segment.push_str(&literal(m));
            segment.push(' ');
        }
        segment.push_str(&arrow);
        if let Some(m) = str_of(record, "targetMultiplicity") {
            segment.push(' ');
            segment.push_str(&literal(m));
        }
        Edge {
            source,
            target,
            segment,
            block: block(record, &self.values(&no_hiding)),
            // The analysis reads the label groups' text, joined by spaces.
            condition: find_condition(&label.join(" ")),
        }
    }

    /// The arrow with its label, and the label's items.
    fn arrow(&self, record: &Map<String, Json>, place: Place<'_>) -> (String, Vec<String>) {
        let arrow_type = str_of(record, "arrowType").unwrap_or("->");
        let (start, end) = match arrow_type {
            "->" => ("-", "->"),
            "-->" => ("--", "-->"),
            "=>" => ("=", "=>"),
            other => {
                let complete = token_kinds(other).is_some_and(|k| {
                    matches!(
                        k.as_slice(),
                        [TokenKind::BiArrow
                            | TokenKind::BiLabeled
                            | TokenKind::InheritArrow
                            | TokenKind::ComposeArrow
                            | TokenKind::AggregateArrow]
                    )
                });
                let arrow = if complete { other } else { "->" };
                return (arrow.to_string(), Vec::new());
            }
        };
        let items = self.label(record, place);
        if items.is_empty() {
            (arrow_type.to_string(), items)
        } else {
            (format!("{start}{}{end}", items.join(", ")), items)
        }
    }

    /// The label items, each its own group: the annotations, then the `value` entries in order.
    fn label(&self, record: &Map<String, Json>, place: Place<'_>) -> Vec<String> {
        let mut items: Vec<String> = objects(array_of(record, "annotations"))
            .map(|a| self.annotation(a, place))
            .collect();
        let Some(payload) = record.get("value").and_then(Json::as_object) else {
            return items;
        };
        let wanted = str_of(record, "type");
        // A `text: …` item, unlike a bare text, also goes into the style.
        let text_is_pair = record
            .get("style")
            .and_then(Json::as_object)
            .is_some_and(|style| style.contains_key("text"))
            && !crate::style::from_annotations(array_of(record, "annotations"))
                .is_some_and(|style| style.contains_key("text"));
        for (key, v) in payload {
            // The compiler adds the endpoint attributes to the value itself.
            if (key == "sourceAttribute" || key == "targetAttribute") && record.contains_key(key) {
                continue;
            }
            let text = match v {
                Json::String(s) => s.clone(),
                other => other.to_string(),
            };
            if key == "text"
                && let Some(t) = wanted
                && semantic(&text) != Some(t)
                && let Some(word) = semantic_word(t)
            {
                // The semantic type comes from the text, else from an earlier bare text.
                items.push(word.to_string());
            }
            if key == "text" && !text_is_pair {
                items.push(stripped_token(&text, false));
            } else if is_ident(key) {
                let quoted = is_condition_key(key) && self.quote_condition(&text, place);
                items.push(format!("{key}: {}", pair_token(&text, quoted)));
            }
        }
        items
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_written_so_that_they_convert_back() {
        for (v, text) in [
            (json!("plain"), "\"plain\""),
            (json!("42"), "\"'42'\""),
            (json!("true"), "\"'true'\""),
            (json!("'quoted'"), "\"''quoted''\""),
            (json!("say \"hi"), "'say \"hi'"),
            (json!("say \"hi\""), "\"'say \\\"hi\\\"'\""),
            (json!(-3), "\"-3\""),
            (json!(2.5), "2.5"),
            (json!(null), "1e999"),
            (json!([1, "a"]), "[1, \"a\"]"),
            (json!({"a": {"b": false}}), "{ a: { b: false; }; }"),
        ] {
            let types = HashMap::new();
            let values = Values {
                node_types: &types,
                hide: &no_hiding,
            };
            assert_eq!(values.write(&v, None, true), text, "{v}");
        }
        assert_eq!(literal("a\\b\n\"c"), "'a\\\\b\n\"c'");
        assert_eq!(literal("a\r'\""), "\"a\\r'\\\"\"");
    }

    #[test]
    fn odd_input_gives_no_panic() {
        for v in [
            json!(null),
            json!([]),
            json!({"nodes": 3}),
            json!({"nodes": [1, {"parent": "x"}, {"name": "a", "parent": "zz"}]}),
            json!({"nodes": [{"name": "a", "type": "note", "attributes": [{"name": "target"}]}]}),
            json!({"edges": [{"source": "a"}, {"source": "a", "target": "b", "value": 3}]}),
            json!({"edges": [{"source": "a", "target": "b", "arrowType": "?", "attributes": 1}]}),
            json!({"title": 5, "attributes": [{"value": 1}, {"name": "x"}]}),
            json!({"annotations": [{"name": "a", "attributes": {"k": [1]}}]}),
        ] {
            let _ = to_dsl(&v);
        }
    }
}
