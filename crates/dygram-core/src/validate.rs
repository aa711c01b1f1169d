//! Checks on a linked machine: errors that make it invalid and warnings about likely mistakes.
//!
//! Errors: duplicate node names, references to undefined nodes in `@StrictMode`, malformed
//! multiplicities, typed attributes without a value or with a value of the wrong type, `@Abstract`
//! on an `init` node. Warnings: graph problems (unreachable or orphaned nodes, no entry point),
//! names that shadow built-in condition variables, annotations where they mean little.
//!
//! Where a name that names nothing is close to a known one (an undefined reference or note in
//! `@StrictMode`, an attribute type that is no type), the error's hint says "did you mean `X`?" and
//! the error carries the fix ([`crate::diagnostic::Suggestion`], found by [`crate::suggest`]).

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::diagnostic::{Diagnostic, Stage};
use crate::json::type_text;
use crate::model::{Machine, Node, flatten};
use crate::suggest;
use dygram_syntax::ast::{Attribute, Edge, Primitive, TypeDef, Value};
use dygram_syntax::source::Span;

/// Every diagnostic for `machine`, errors first, each group in source order.
pub fn validate(machine: &Machine) -> Vec<Diagnostic> {
    let mut v = Validator {
        machine,
        nodes: flatten(&machine.nodes),
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    v.duplicates();
    v.references();
    v.multiplicities();
    v.attribute_types();
    v.annotations();
    v.graph_warnings();
    let mut out = v.errors;
    out.sort_by_key(|d| d.span.map_or(0, |s| s.start));
    let mut warnings = v.warnings;
    warnings.sort_by_key(|d| d.span.map_or(0, |s| s.start));
    out.extend(warnings);
    out
}

struct Validator<'m> {
    machine: &'m Machine,
    nodes: Vec<(&'m Node, Option<&'m str>)>,
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
}

fn is_note(n: &Node) -> bool {
    n.is("note")
}

impl<'m> Validator<'m> {
    fn error(&mut self, message: String, span: Option<Span>) {
        self.push(Diagnostic::error(Stage::Validation, message, span));
    }

    fn push(&mut self, d: Diagnostic) {
        self.errors.push(d);
    }

    fn warn(&mut self, message: String, span: Option<Span>) {
        self.warnings.push(Diagnostic::warning(message, span));
    }

    fn graph_warn(&mut self, message: String, span: Option<Span>) {
        let mut warning = Diagnostic::warning(message, span);
        warning.stage = Stage::Graph;
        self.warnings.push(warning);
    }

    /// Node names are one namespace across the whole tree (notes aside).
    fn duplicates(&mut self) {
        let mut first: HashMap<&str, Option<Span>> = HashMap::default();
        let nodes = self.nodes.clone();
        for (n, _) in nodes {
            // Imported nodes were checked in their own file (and against this one when imported).
            if is_note(n) || n.imported {
                continue;
            }
            match first.get(n.name.as_str()) {
                None => {
                    first.insert(&n.name, n.name_span.or(n.span));
                }
                Some(earlier) => {
                    let earlier = *earlier;
                    let span = n.name_span.or(n.span);
                    let mut d = Diagnostic::error(
                        Stage::Validation,
                        format!("Duplicate state name: {}", n.name),
                        span,
                    )
                    .with_hint(
                        "node names must be unique in the whole machine, nested nodes included; rename one of them",
                    );
                    if let Some(e) = earlier {
                        d = d.with_related(e, "first declared here");
                    }
                    self.push(d);
                }
            }
        }
    }

    /// In `@StrictMode`, every edge endpoint and every note must name a node.
    fn references(&mut self) {
        if !self.machine.no_placeholders {
            return;
        }
        // What a reference can name, in declaration order (the order decides between names
        // equally close to a misspelled one).
        let mut known: Vec<String> = Vec::new();
        fn collect(nodes: &[Node], prefix: Option<&str>, known: &mut Vec<String>) {
            for n in nodes {
                let path = match prefix {
                    Some(p) => format!("{p}.{}", n.name),
                    None => n.name.clone(),
                };
                known.push(n.name.clone());
                known.push(path.clone());
                for a in &n.attributes {
                    known.push(format!("{path}.{}", a.name.text));
                    known.push(format!("{}.{}", n.name, a.name.text));
                }
                collect(&n.nodes, Some(&path), known);
            }
        }
        collect(&self.machine.nodes, None, &mut known);
        let lookup: HashSet<&str> = known.iter().map(String::as_str).collect();
        let mut edges: Vec<&Edge> = self.machine.edges.iter().collect();
        for (n, _) in self.nodes.iter().filter(|(n, _)| !n.imported) {
            edges.extend(n.edges.iter());
        }
        for edge in edges {
            let names = edge
                .sources
                .iter()
                .chain(edge.segments.iter().flat_map(|s| s.targets.iter()));
            for name in names {
                let text = name.text();
                if !lookup.contains(text.as_str()) {
                    const HINT: &str = "declare the node, or remove @StrictMode to let undeclared nodes be created";
                    let d = Diagnostic::error(
                        Stage::Validation,
                        format!("Reference to undefined state: {text}"),
                        Some(name.span),
                    );
                    let d = match suggest::closest(&text, known.iter().map(String::as_str)) {
                        Some(close) => d
                            .with_hint(format!("did you mean `{close}`? Otherwise, {HINT}"))
                            .with_suggestion(name.span, close),
                        None => d.with_hint(HINT),
                    };
                    self.push(d);
                }
            }
        }
        let declared: HashSet<&str> = self
            .nodes
            .iter()
            .filter(|(n, _)| !is_note(n))
            .map(|(n, _)| n.name.as_str())
            .collect();
        // In declaration order, for suggestions.
        let declared_in_order: Vec<&str> = self
            .nodes
            .iter()
            .filter(|(n, _)| !is_note(n))
            .map(|(n, _)| n.name.as_str())
            .collect();
        let notes: Vec<(String, Option<Span>)> = self
            .nodes
            .iter()
            .filter(|(n, _)| is_note(n) && !n.synthetic && !n.imported)
            .filter(|(n, _)| !declared.contains(n.name.as_str()))
            .map(|(n, _)| (n.name.clone(), n.name_span))
            .collect();
        for (name, span) in notes {
            let mut d = Diagnostic::error(
                Stage::Validation,
                format!("Note references undefined node: {name}"),
                span,
            );
            if let Some(close) = suggest::closest(&name, declared_in_order.iter().copied()) {
                d = d.with_hint(format!("did you mean `{close}`?"));
                // The name is the last part of what was written (`note Group.child`).
                if let Some(span) = span {
                    let end = span.end as usize;
                    let start = end.saturating_sub(name.len()).max(span.start as usize);
                    d = d.with_suggestion(Span::new(start, end), close);
                }
            }
            self.push(d);
        }
    }

    fn multiplicities(&mut self) {
        let mut edges: Vec<&Edge> = self.machine.edges.iter().collect();
        for (n, _) in self.nodes.iter().filter(|(n, _)| !n.imported) {
            edges.extend(n.edges.iter());
        }
        for edge in edges {
            for segment in &edge.segments {
                for (which, m) in [
                    ("source", &segment.source_multiplicity),
                    ("target", &segment.target_multiplicity),
                ] {
                    if let Some(m) = m
                        && !valid_multiplicity(&m.value)
                    {
                        self.error(
                            format!(
                                "Invalid {which} multiplicity format: \"{}\". Expected format: \"1\", \"*\", \"0..1\", \"1..*\", etc.",
                                m.value
                            ),
                            Some(m.span),
                        );
                    }
                }
            }
        }
    }

    fn attribute_types(&mut self) {
        let machine_attributes: Vec<&Attribute> = self.machine.attributes.iter().collect();
        for a in machine_attributes {
            self.check_attribute(a, false);
        }
        let nodes = self.nodes.clone();
        for (n, _) in nodes.into_iter().filter(|(n, _)| !n.imported) {
            let is_type = n.is("type");
            for a in &n.attributes {
                self.check_attribute(a, is_type);
            }
        }
    }

    fn check_attribute(&mut self, a: &Attribute, in_type_node: bool) {
        let Some(ty) = &a.ty else { return };
        let ty_text = type_text(ty);
        match &a.value {
            None => {
                let optional = matches!(ty, TypeDef::Named { optional: true, .. });
                if !optional && !in_type_node {
                    self.push(
                        Diagnostic::error(
                            Stage::Validation,
                            format!(
                                "Attribute '{}' has type {ty_text} but no value provided",
                                a.name.text
                            ),
                            Some(ty.span()),
                        )
                        .with_hint(format!(
                            "give it a value, or make the type optional: `{}<{ty_text}?>`",
                            a.name.text
                        )),
                    );
                }
            }
            Some(value) => {
                if let Err(mismatch) = self.check_value(ty, value) {
                    let mut d = Diagnostic::error(
                        Stage::Validation,
                        mismatch.to_string(),
                        Some(value.span()),
                    );
                    if let Some((span, close)) = self.type_suggestion(ty, value) {
                        d = d
                            .with_hint(format!("did you mean `{close}`?"))
                            .with_suggestion(span, close);
                    }
                    self.push(d);
                }
            }
        }
    }

    /// Checks `value` against `ty`: how it does not fit, when it does not.
    fn check_value(&self, ty: &TypeDef, value: &Value) -> Result<(), Mismatch> {
        let expected = type_text(ty);
        let got = kind_of(value);
        let mismatch = |detail: Option<&str>| Mismatch::Type {
            expected: expected.clone(),
            got: got.clone(),
            detail: detail.map(str::to_string),
        };
        let (name, generics) = match ty {
            TypeDef::Union { literals, .. } => {
                let text = match value {
                    Value::Primitive(Primitive::Str(s)) => s.value.clone(),
                    Value::Primitive(p) => p.raw().to_string(),
                    _ => return Err(mismatch(None)),
                };
                if literals.iter().any(|l| l.value == text) {
                    return Ok(());
                }
                let allowed: Vec<String> =
                    literals.iter().map(|l| format!("'{}'", l.value)).collect();
                return Err(Mismatch::Literal {
                    text,
                    allowed: allowed.join(", "),
                });
            }
            TypeDef::Named { name, generics, .. } => (name.text(), generics),
        };
        let string = |value: &Value| match value {
            Value::Primitive(Primitive::Str(s)) => Some(s.value.clone()),
            Value::Primitive(Primitive::Ident(t, _)) if t != "true" && t != "false" => {
                Some(t.clone())
            }
            Value::Primitive(Primitive::ExtId(t, _)) => Some(t.clone()),
            _ => None,
        };
        // A `#ref` stands for a value defined elsewhere: it fits any scalar type.
        let is_ref = matches!(value, Value::Primitive(Primitive::ExtId(..)));
        match name.as_str() {
            "any" | "Any" | "unknown" => Ok(()),
            "string" | "String" => match string(value) {
                Some(_) => Ok(()),
                None => Err(mismatch(None)),
            },
            "number" | "Number" | "Float" | "float" | "double" | "decimal" => {
                match value {
                    Value::Primitive(Primitive::Number(..)) => Ok(()),
                    _ if is_ref => Ok(()),
                    _ => Err(mismatch(Some(&format!("Expected number, received {got}")))),
                }
            }
            "Integer" | "integer" | "int" => match value {
                Value::Primitive(Primitive::Number(raw, _)) => {
                    if raw.contains(['.', 'e', 'E']) && !raw.parse::<f64>().is_ok_and(|v| v.fract() == 0.0) {
                        Err(mismatch(Some("Must be an integer")))
                    } else {
                        Ok(())
                    }
                }
                _ if is_ref => Ok(()),
                _ => Err(mismatch(Some(&format!("Expected number, received {got}")))),
            },
            "boolean" | "Boolean" | "bool" => match value {
                Value::Primitive(Primitive::Ident(t, _)) if t == "true" || t == "false" => Ok(()),
                _ if is_ref => Ok(()),
                _ => Err(mismatch(Some(&format!("Expected boolean, received {got}")))),
            },
            "Date" | "DateTime" => self.formatted(value, is_ref, is_iso_datetime, "Must be a valid ISO 8601 date string", &mismatch),
            "Duration" => self.formatted(
                value,
                is_ref,
                is_duration,
                "Must be a valid ISO 8601 duration (e.g., P1Y2M3D, PT4H5M6S) or shorthand format (e.g., 30s, 5min, 2h, 3d)",
                &mismatch,
            ),
            "UUID" => self.formatted(value, is_ref, is_uuid, "Must be a valid UUID string", &mismatch),
            "URL" | "Url" => self.formatted(value, is_ref, is_url, "Must be a valid URL", &mismatch),
            "Array" | "List" | "array" | "Set" => match value {
                Value::Array(items, _) => {
                    // Elements are checked against built-in element types only.
                    if let Some(element) = generics.first().filter(|e| is_builtin(e)) {
                        for item in items {
                            self.check_value(element, item).map_err(|_| mismatch(None))?;
                        }
                    }
                    Ok(())
                }
                _ if is_ref => Ok(()),
                _ => Err(mismatch(Some(&format!("Expected array, received {got}")))),
            },
            "Map" | "Record" | "object" | "Object" => match value {
                Value::Object(..) => Ok(()),
                _ => Err(mismatch(Some(&format!("Expected object, received {got}")))),
            },
            "Promise" | "Result" | "Optional" | "Tuple" => Ok(()),
            other => match self.node_type(other) {
                Some(node) => match value {
                    Value::Object(fields, _) => {
                        for a in &node.attributes {
                            let (Some(field_ty), Some(field)) = (
                                &a.ty,
                                fields.iter().find(|f| f.name.text == a.name.text),
                            ) else {
                                continue;
                            };
                            if let Some(v) = &field.value {
                                self.check_value(field_ty, v)?;
                            }
                        }
                        Ok(())
                    }
                    _ if is_ref => Ok(()),
                    _ => Err(mismatch(None)),
                },
                None => Err(mismatch(None)),
            },
        }
    }

    fn formatted(
        &self,
        value: &Value,
        is_ref: bool,
        check: fn(&str) -> bool,
        message: &str,
        mismatch: &dyn Fn(Option<&str>) -> Mismatch,
    ) -> Result<(), Mismatch> {
        if is_ref {
            return Ok(());
        }
        match value {
            Value::Primitive(Primitive::Str(s)) => {
                if check(&s.value) {
                    Ok(())
                } else {
                    Err(mismatch(Some(message)))
                }
            }
            _ => Err(mismatch(None)),
        }
    }

    /// For a value that does not fit a type whose name is no known type (`strng`): the span of
    /// that name and the closest known type name, when it is close and the value fits it.
    fn type_suggestion(&self, ty: &TypeDef, value: &Value) -> Option<(Span, String)> {
        let TypeDef::Named { name, .. } = ty else {
            return None;
        };
        let written = name.text();
        if KNOWN_TYPES.contains(&written.as_str()) || self.node_type(&written).is_some() {
            return None;
        }
        let nodes = self
            .nodes
            .iter()
            .filter(|(n, _)| !is_note(n))
            .map(|(n, _)| n.name.as_str());
        let close = suggest::closest(&written, KNOWN_TYPES.iter().copied().chain(nodes))?;
        let mut fixed = ty.clone();
        if let TypeDef::Named { name, .. } = &mut fixed {
            name.parts = vec![dygram_syntax::ast::Ident {
                text: close.to_string(),
                span: name.span,
            }];
        }
        self.check_value(&fixed, value).ok()?;
        Some((name.span, close.to_string()))
    }

    /// A node usable as a type: any node with that name.
    fn node_type(&self, name: &str) -> Option<&'m Node> {
        self.nodes
            .iter()
            .find(|(n, _)| n.name == name && !is_note(n))
            .map(|(n, _)| *n)
    }

    fn annotations(&mut self) {
        let nodes = self.nodes.clone();
        for (n, _) in nodes.into_iter().filter(|(n, _)| !n.imported) {
            let has = |name: &str| n.annotations.iter().any(|a| a.name.text == name);
            if n.is("init") && has("Abstract") {
                self.error(
                    format!(
                        "@Abstract annotation cannot be used on init node '{}'. Init nodes are concrete entry points.",
                        n.name
                    ),
                    n.name_span,
                );
            }
            if has("Async") && !n.is("task") {
                self.warn(
                    format!(
                        "@Async annotation is typically used only on task nodes, but '{}' is of type '{}'.",
                        n.name,
                        n.kind_lower().unwrap_or_else(|| "untyped".into())
                    ),
                    n.name_span,
                );
            }
            if has("Singleton") && n.is("state") {
                self.warn(
                    format!(
                        "@Singleton annotation on state node '{}' may not be meaningful: a state is already a single point in the flow.",
                        n.name
                    ),
                    n.name_span,
                );
            }
            self.agent_annotation(n);
            if ["errorCount", "errors", "activeState"].contains(&n.name.as_str()) {
                self.warn(
                    format!(
                        "Node name '{}' is reserved for built-in CEL variables. Built-in variable will take precedence. Consider renaming the node.",
                        n.name
                    ),
                    n.name_span,
                );
            }
        }
    }

    /// `@Agent("path")`: on a task with a prompt (the agent's task), naming the agent's folder.
    fn agent_annotation(&mut self, n: &Node) {
        let Some(a) = n
            .annotations
            .iter()
            .find(|a| a.name.text == crate::json::AGENT_ANNOTATION)
        else {
            return;
        };
        let span = Some(a.span);
        let path = match &a.arg {
            Some(dygram_syntax::ast::AnnotationArg::Value(dygram_syntax::ast::Primitive::Str(
                s,
            ))) => crate::values::strip_double_quotes(&s.value)
                .trim()
                .to_string(),
            _ => String::new(),
        };
        if path.is_empty() {
            self.error(
                format!(
                    "@Agent on '{}' needs the agent's folder as a string, relative to this file: @Agent(\"agents/reviewer\")",
                    n.name
                ),
                span,
            );
        }
        if !n.is("task") {
            self.error(
                format!(
                    "@Agent can only be used on task nodes, but '{}' is of type '{}'.",
                    n.name,
                    n.kind_lower().unwrap_or_else(|| "untyped".into())
                ),
                span,
            );
        } else if n.attribute("prompt").is_none() {
            self.error(
                format!(
                    "Task '{}' runs an agent (@Agent) but has no prompt: its prompt is the agent's task.",
                    n.name
                ),
                span,
            );
        }
    }

    /// Unreachable and orphaned nodes, missing entry points (edges touching context nodes and
    /// attribute ports are data flow, not control flow, and are left out).
    fn graph_warnings(&mut self) {
        let relevant: Vec<&Node> = self
            .nodes
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| !is_note(n) && !n.is("style") && !n.is("type"))
            .collect();
        if relevant.is_empty() {
            return;
        }
        let graph = self.graph();
        self.orphan_warning(&relevant, &graph);
        let controlled: Vec<&Node> = relevant
            .iter()
            .copied()
            .filter(|n| !n.is("context") && graph.touched.contains(&n.name))
            .collect();
        if controlled.is_empty() {
            return;
        }
        self.reachability_warnings(&controlled, &graph);
    }

    /// The machine's edges between its names: which names an edge touches, and, context nodes
    /// left out, where each name leads and which names are led to.
    fn graph(&self) -> Graph {
        let contexts: HashSet<&str> = self
            .nodes
            .iter()
            .filter(|(n, _)| n.is("context") || n.is("data"))
            .map(|(n, _)| n.name.as_str())
            .collect();
        let mut graph = Graph::default();
        let mut all_edges: Vec<&Edge> = self.machine.edges.iter().collect();
        for (n, _) in &self.nodes {
            all_edges.extend(n.edges.iter());
        }
        for edge in &all_edges {
            let mut sources: Vec<String> =
                edge.sources.iter().map(|q| q.last().to_string()).collect();
            for segment in &edge.segments {
                let targets: Vec<String> = segment
                    .targets
                    .iter()
                    .map(|q| q.last().to_string())
                    .collect();
                for s in &sources {
                    for t in &targets {
                        graph.touched.insert(s.clone());
                        graph.touched.insert(t.clone());
                        if contexts.contains(s.as_str()) || contexts.contains(t.as_str()) {
                            continue;
                        }
                        graph
                            .out_edges
                            .entry(s.clone())
                            .or_default()
                            .push(t.clone());
                        graph.incoming.insert(t.clone());
                    }
                }
                sources = targets;
            }
        }
        graph
    }

    /// Declared nodes no edge touches; an undeclared edge end close to one's name is probably
    /// its misspelling, and the warning says so.
    fn orphan_warning(&mut self, relevant: &[&Node], graph: &Graph) {
        let orphans: Vec<&str> = relevant
            .iter()
            .filter(|n| n.nodes.is_empty() && !graph.touched.contains(&n.name) && !n.is("context"))
            .map(|n| n.name.as_str())
            .collect();
        if orphans.is_empty() || relevant.len() <= 1 {
            return;
        }
        let mut warning = Diagnostic::warning(
            format!(
                "Orphaned nodes detected: {}. These nodes have no incoming or outgoing edges.",
                name_list(&orphans)
            ),
            None,
        );
        warning.stage = Stage::Graph;
        let misspelt: Vec<String> = relevant
            .iter()
            .filter(|n| n.synthetic && graph.touched.contains(&n.name))
            .filter_map(|n| {
                suggest::closest(&n.name, orphans.iter().copied()).map(|close| {
                    format!(
                        "an edge names `{}`, which is not declared: did you mean `{close}`?",
                        n.name
                    )
                })
            })
            .collect();
        if !misspelt.is_empty() {
            warning = warning.with_hint(misspelt.join("; "));
        }
        self.warnings.push(warning);
    }

    /// Whether the `controlled` nodes (those edges touch) have an entry point, can all be reached
    /// from one, and whether an init node can move on.
    fn reachability_warnings(&mut self, controlled: &[&Node], graph: &Graph) {
        let entries: Vec<&str> = controlled
            .iter()
            .filter(|n| {
                n.is("init")
                    || n.name.eq_ignore_ascii_case("start")
                    || n.annotations.iter().any(|a| a.name.text == "start")
                    || !graph.incoming.contains(&n.name)
            })
            .map(|n| n.name.as_str())
            .collect();
        if entries.is_empty() {
            self.graph_warn(
                "No entry points found. Consider adding an init node or a node with no incoming edges.".into(),
                None,
            );
            return;
        }
        let mut reached: HashSet<&str> = HashSet::default();
        let mut stack: Vec<&str> = entries.clone();
        while let Some(n) = stack.pop() {
            if !reached.insert(n) {
                continue;
            }
            if let Some(next) = graph.out_edges.get(n) {
                stack.extend(next.iter().map(String::as_str));
            }
        }
        let unreachable: Vec<&str> = controlled
            .iter()
            .map(|n| n.name.as_str())
            .filter(|n| !reached.contains(n))
            .collect();
        if !unreachable.is_empty() {
            self.graph_warn(
                format!(
                    "Unreachable nodes detected: {}. These nodes cannot be reached from entry points.",
                    name_list(&unreachable)
                ),
                None,
            );
        }
        for n in controlled {
            if n.is("init") && !graph.out_edges.contains_key(&n.name) {
                self.graph_warn(
                    format!(
                        "Init node '{}' has no outgoing edges. The machine cannot proceed from it.",
                        n.name
                    ),
                    n.name_span,
                );
            }
        }
    }
}

/// The edges of a machine between names (see [`Validator::graph`]).
#[derive(Debug, Default)]
struct Graph {
    /// Where each name leads (context nodes left out).
    out_edges: HashMap<String, Vec<String>>,
    /// Every name an edge touches.
    touched: HashSet<String>,
    /// The names an edge leads to (context nodes left out).
    incoming: HashSet<String>,
}

/// Node names for a warning: all of them up to twenty, else the first twenty and how many more.
fn name_list(names: &[&str]) -> String {
    const SHOWN: usize = 20;
    if names.len() <= SHOWN {
        return names.join(", ");
    }
    format!(
        "{} and {} more",
        names[..SHOWN].join(", "),
        names.len() - SHOWN
    )
}

/// The type names [`Validator::check_value`] knows, the usual spellings first (they win a tie
/// when a misspelled name is as close to several).
const KNOWN_TYPES: &[&str] = &[
    "string", "number", "boolean", "Integer", "Float", "Date", "Duration", "UUID", "URL", "Array",
    "Map", "Record", "object", "any", "String", "Number", "Boolean", "integer", "int", "float",
    "double", "decimal", "bool", "DateTime", "Url", "List", "array", "Set", "Object", "Any",
    "unknown", "Promise", "Result", "Optional", "Tuple",
];

/// Whether a type is one of the built-in scalar types.
fn is_builtin(ty: &TypeDef) -> bool {
    match ty {
        TypeDef::Union { .. } => true,
        TypeDef::Named { name, .. } => matches!(
            name.text().as_str(),
            "string"
                | "number"
                | "boolean"
                | "Date"
                | "UUID"
                | "URL"
                | "Duration"
                | "Integer"
                | "Float"
        ),
    }
}

/// The kind of a value, as messages name it.
/// How an attribute's value does not fit its declared type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum Mismatch {
    /// A value of another kind.
    #[error("Type mismatch: expected {expected}, got {got}{}", detail.as_ref().map(|d| format!(". {d}")).unwrap_or_default())]
    Type {
        expected: String,
        got: String,
        detail: Option<String>,
    },
    /// A value outside a union of literals.
    #[error("Value \"{text}\" does not match any of the allowed literals: {allowed}")]
    Literal { text: String, allowed: String },
}

fn kind_of(value: &Value) -> String {
    match value {
        Value::Primitive(Primitive::Number(..)) => "number".into(),
        Value::Primitive(Primitive::Ident(t, _)) if t == "true" || t == "false" => "boolean".into(),
        Value::Primitive(_) => "string".into(),
        Value::Array(items, _) => match items.first() {
            Some(first) => format!("Array<{}>", kind_of(first)),
            None => "Array<any>".into(),
        },
        Value::Object(..) => "Record<string, any>".into(),
    }
}

/// `1`, `*`, `0..1`, `1..*`.
fn valid_multiplicity(m: &str) -> bool {
    let (lower, upper) = match m.split_once("..") {
        Some((l, u)) => (l, Some(u)),
        None => (m, None),
    };
    let lower_ok = lower == "*" || (!lower.is_empty() && lower.bytes().all(|b| b.is_ascii_digit()));
    let upper_ok =
        upper.is_none_or(|u| !u.is_empty() && u.bytes().all(|b| b.is_ascii_digit() || b == b'*'));
    lower_ok && upper_ok
}

fn digits(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| b.is_ascii_digit())
}

/// `YYYY-MM-DDTHH:MM[:SS[.fff]][Z|±HH:MM]` (a date alone is not enough: a time is required).
pub fn is_iso_datetime(s: &str) -> bool {
    let Some((date, time)) = s.split_once(['T', 't']) else {
        return false;
    };
    let d: Vec<&str> = date.split('-').collect();
    if d.len() != 3 || !digits(d[0], 4) || !digits(d[1], 2) || !digits(d[2], 2) {
        return false;
    }
    let (clock, zone_ok) = if let Some(c) = time.strip_suffix(['Z', 'z']) {
        (c, true)
    } else if let Some(i) = time.rfind(['+', '-']) {
        let zone = &time[i + 1..];
        let z: Vec<&str> = zone.split(':').collect();
        let ok = (z.len() == 2 && digits(z[0], 2) && digits(z[1], 2))
            || digits(zone, 4)
            || digits(zone, 2);
        (&time[..i], ok)
    } else {
        (time, true)
    };
    let (hms, frac) = match clock.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (clock, None),
    };
    let t: Vec<&str> = hms.split(':').collect();
    let clock_ok = (t.len() == 2 || t.len() == 3) && t.iter().all(|p| digits(p, 2));
    let frac_ok = frac.is_none_or(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()));
    zone_ok && clock_ok && frac_ok
}

/// ISO 8601 durations (`P1Y2M3DT4H5M6S`, `P2W`) or shorthands (`30s`, `5min`, `2h`, `3d`, `1w`).
pub fn is_duration(s: &str) -> bool {
    if let Some(rest) = s.strip_prefix('P') {
        if rest.is_empty() {
            return false;
        }
        let (date, time) = match rest.split_once('T') {
            Some((d, t)) => (d, Some(t)),
            None => (rest, None),
        };
        let units_ok = |part: &str, units: &str| {
            let mut number = String::new();
            let mut seen = 0;
            let mut last_unit: Option<usize> = None;
            for c in part.chars() {
                if c.is_ascii_digit() || c == '.' || c == ',' {
                    number.push(c);
                } else if let Some(pos) = units.find(c) {
                    if number.is_empty() || last_unit.is_some_and(|l| pos <= l) {
                        return None;
                    }
                    last_unit = Some(pos);
                    number.clear();
                    seen += 1;
                } else {
                    return None;
                }
            }
            number.is_empty().then_some(seen)
        };
        let date_units = units_ok(date, "YMWD");
        let time_units = match time {
            Some(t) => units_ok(t, "HMS").filter(|n| *n > 0),
            None => Some(0),
        };
        return matches!((date_units, time_units), (Some(a), Some(b)) if a + b > 0);
    }
    let number_len = s
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b'.')
        .count();
    if number_len == 0 {
        return false;
    }
    matches!(
        &s[number_len..],
        "ms" | "s" | "sec" | "m" | "min" | "h" | "hr" | "d" | "w"
    )
}

/// `8-4-4-4-12` hexadecimal digits.
pub fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && [8, 4, 4, 4, 12]
            .iter()
            .zip(&parts)
            .all(|(n, p)| p.len() == *n && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `scheme://rest` (or `mailto:`-style `scheme:rest`) with a letter-first scheme.
pub fn is_url(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    !rest.is_empty()
        && scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !s.contains(char::is_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_warnings_name_at_most_twenty_nodes() {
        let mut text = String::from("machine \"m\"\nstate a;\nstate b;\na -> b;\n");
        for i in 0..500 {
            text.push_str(&format!("state lonely{i};\n"));
        }
        let compiled = crate::compile(dygram_syntax::source::SourceFile::new(
            "m.dy",
            text.as_str(),
        ));
        let messages: Vec<&str> = compiled
            .diagnostics
            .iter()
            .map(|d| d.message.as_str())
            .collect();
        let orphans = messages
            .iter()
            .find(|m| m.starts_with("Orphaned nodes detected: "))
            .unwrap();
        assert!(orphans.len() < 600, "{orphans}");
        assert!(
            orphans.contains("lonely0, lonely1, ") && orphans.contains("lonely19 and 480 more."),
            "{orphans}"
        );
        assert!(!orphans.contains("lonely20,"), "{orphans}");
    }

    /// A fix as `(replaced text, replacement)`.
    type Fix = Option<(String, String)>;

    /// The errors of `text`: `(message, hint, fix)`.
    fn suggested(text: &str) -> Vec<(String, Option<String>, Fix)> {
        let compiled = crate::compile(dygram_syntax::source::SourceFile::new("m.dy", text));
        compiled
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| {
                let fix = d.suggestion.as_ref().map(|s| {
                    (
                        text[s.span.start as usize..s.span.end as usize].to_string(),
                        s.replacement.clone(),
                    )
                });
                (d.message.clone(), d.hint.clone(), fix)
            })
            .collect()
    }

    fn fix(replaced: &str, replacement: &str) -> Fix {
        Some((replaced.to_string(), replacement.to_string()))
    }

    #[test]
    fn undefined_references_suggest_the_closest_declared_name() {
        let found = suggested(
            "machine \"M\" @StrictMode\nstate start;\nTask review;\nProcess flow { state inner; }\nstart -> reveiw -> flow.iner;\nstart -> payment;\n",
        );
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(found[0].0, "Reference to undefined state: reveiw");
        assert_eq!(
            found[0].1.as_deref(),
            Some(
                "did you mean `review`? Otherwise, declare the node, or remove @StrictMode to let undeclared nodes be created"
            )
        );
        assert_eq!(found[0].2, fix("reveiw", "review"));
        // A qualified name: the closest path.
        assert_eq!(found[1].2, fix("flow.iner", "flow.inner"));
        // Nothing close: the hint as it was, no fix.
        assert_eq!(found[2].0, "Reference to undefined state: payment");
        assert_eq!(
            found[2].1.as_deref(),
            Some("declare the node, or remove @StrictMode to let undeclared nodes be created")
        );
        assert_eq!(found[2].2, None);
    }

    #[test]
    fn notes_of_undefined_nodes_suggest_the_closest_node() {
        let found = suggested(
            "machine \"M\" @StrictMode\nstate review;\nstate done;\nreview -> done;\nnote reveiw \"Check it\";\n",
        );
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "Note references undefined node: reveiw");
        assert_eq!(found[0].1.as_deref(), Some("did you mean `review`?"));
        assert_eq!(found[0].2, fix("reveiw", "review"));
        // Of a dotted note, the last part is the name.
        let text =
            "machine \"M\" @StrictMode\nProcess flow { state inner; }\nnote flow.iner \"x\";\n";
        let found = suggested(text);
        assert_eq!(found[0].2, fix("iner", "inner"), "{found:?}");
    }

    #[test]
    fn unknown_attribute_types_suggest_a_close_type_the_value_fits() {
        let found = suggested(
            "Context c {\n  a<strng>: \"x\";\n  b<Interger>: 3;\n  c<Interger>: \"three\";\n  d<Widget>: 1;\n}\n",
        );
        assert_eq!(found.len(), 4, "{found:?}");
        assert_eq!(found[0].0, "Type mismatch: expected strng, got string");
        assert_eq!(found[0].1.as_deref(), Some("did you mean `string`?"));
        assert_eq!(found[0].2, fix("strng", "string"));
        assert_eq!(found[1].2, fix("Interger", "Integer"));
        // `Integer` is close, but "three" is no integer either: no fix that would not fix it.
        assert_eq!(found[2].2, None);
        assert_eq!(found[2].1, None);
        // Nothing close.
        assert_eq!(found[3].2, None);
        // A known type that the value does not fit is no misspelling.
        let found = suggested("Context c { n<number>: \"x\"; }\n");
        assert_eq!(found[0].2, None, "{found:?}");
    }

    #[test]
    fn imports_of_missing_names_suggest_the_closest_importable_one() {
        let files = std::collections::HashMap::from([(
            std::path::PathBuf::from("m/lib.dy"),
            "state Alpha;\nGroup g { state beta; }\n".to_string(),
        )]);
        let main = std::path::Path::new("m/main.dy");
        let text = "import { Alpa, g.bta, Gamma } from \"./lib.dy\"\n";
        let project = crate::imports::load(
            dygram_syntax::source::SourceFile::new("main.dy", text),
            Some(main),
            &files,
        );
        let fixes: Vec<Fix> = project
            .entry()
            .diagnostics
            .iter()
            .filter(|d| d.message.contains("has no node named"))
            .map(|d| {
                d.suggestion.as_ref().map(|s| {
                    (
                        text[s.span.start as usize..s.span.end as usize].to_string(),
                        s.replacement.clone(),
                    )
                })
            })
            .collect();
        assert_eq!(
            fixes,
            [fix("Alpa", "Alpha"), fix("g.bta", "g.beta"), None],
            "{:?}",
            project.entry().diagnostics
        );
    }

    #[test]
    fn formats() {
        assert!(valid_multiplicity("1") && valid_multiplicity("*") && valid_multiplicity("0..*"));
        assert!(!valid_multiplicity("0..many items") && !valid_multiplicity(""));
        assert!(
            is_iso_datetime("2024-01-15T10:30:00Z")
                && is_iso_datetime("2024-01-15T10:30:00.123+02:00")
        );
        assert!(!is_iso_datetime("2024-01-15"));
        assert!(
            is_duration("PT1H30M")
                && is_duration("P1Y2M3D")
                && is_duration("30s")
                && is_duration("5min")
        );
        assert!(!is_duration("P") && !is_duration("PT") && !is_duration("soon"));
        assert!(is_uuid("123e4567-e89b-12d3-a456-426614174000") && !is_uuid("123"));
        assert!(is_url("https://x.io/a?b=1") && !is_url("not a url") && !is_url("x"));
    }
}
