//! The canonical machine JSON (what `dygram generate -f json` writes).
//!
//! The layout, key order and value conversions follow the reference implementation's output, so
//! that tools reading its JSON read ours; docs/dygram/json.md describes the format.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use serde_json::{Map, Value as Json, json};

use crate::model::{Machine, Node, flatten};
use crate::style;
use crate::values::{
    convert, js_trim, strip_double_quotes, strip_matching_quotes, strip_quotes, token_text,
};
use dygram_syntax::ast::{
    Annotation, AnnotationArg, Attribute, Edge, LabelItem, Primitive, QName, Segment, TypeDef,
    Value,
};
use dygram_syntax::source::{SourceFile, Span};

/// Options for the JSON.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonOptions {
    /// Add `$sourceRange` (0-based positions) to nodes and edges.
    pub source_ranges: bool,
}

/// The machine as canonical JSON.
pub fn to_json(machine: &Machine, file: &SourceFile, options: JsonOptions) -> Json {
    Serializer {
        machine,
        file,
        options,
        aliases: aliases(&machine.nodes),
    }
    .machine()
}

/// A type as text: `Array<Date>`, `Map<string, number>`, `string?`; a literal union is `""`.
pub fn type_text(ty: &TypeDef) -> String {
    match ty {
        TypeDef::Union { .. } => String::new(),
        TypeDef::Named {
            name,
            generics,
            optional,
            ..
        } => {
            let mut text = name.text();
            if !generics.is_empty() {
                let args: Vec<String> = generics.iter().map(type_text).collect();
                text.push('<');
                text.push_str(&args.join(", "));
                text.push('>');
            }
            if *optional {
                text.push('?');
            }
            text
        }
    }
}

/// Names a reference can use for a node: its simple name, its path from the root, and
/// `<path>.<attribute>` for each attribute (which stands for the node). Later nodes win.
fn aliases(nodes: &[Node]) -> HashMap<String, &Node> {
    fn walk<'n>(nodes: &'n [Node], prefix: Option<&str>, out: &mut HashMap<String, &'n Node>) {
        for n in nodes {
            let path = match prefix {
                Some(p) => format!("{p}.{}", n.name),
                None => n.name.clone(),
            };
            out.insert(n.name.clone(), n);
            out.insert(path.clone(), n);
            for a in &n.attributes {
                out.insert(format!("{path}.{}", a.name.text), n);
            }
            walk(&n.nodes, Some(&path), out);
        }
    }
    let mut out = HashMap::default();
    walk(nodes, None, &mut out);
    out
}

struct Serializer<'a> {
    machine: &'a Machine,
    file: &'a SourceFile,
    options: JsonOptions,
    aliases: HashMap<String, &'a Node>,
}

/// A resolved edge endpoint: the node's simple name and an attribute path.
struct Endpoint {
    node: String,
    attribute: Option<String>,
}

impl<'a> Serializer<'a> {
    fn machine(&self) -> Json {
        let m = self.machine;
        let mut out = Map::new();
        if let Some(title) = &m.title {
            out.insert("title".into(), Json::String(title.value.clone()));
        }
        let attributes = attributes(&m.attributes);
        let annotations: Vec<Json> = m.annotations.iter().map(|a| annotation(a, false)).collect();
        let machine_style = self.machine_style(&attributes, &annotations);
        out.insert("attributes".into(), Json::Array(attributes));
        out.insert("annotations".into(), Json::Array(annotations));
        out.insert("nodes".into(), Json::Array(self.nodes()));
        let mut edges = self.explicit_edges();
        let inferred = self.inferred_edges(&edges);
        edges.extend(inferred);
        out.insert("edges".into(), Json::Array(edges));
        out.insert(
            "inferredDependencies".into(),
            Json::Array(self.dependencies()),
        );
        if let Some(style) = machine_style {
            out.insert("style".into(), Json::Object(style));
        }
        Json::Object(out)
    }

    fn range(&self, span: Span) -> Json {
        let start = self.file.position(span.start as usize);
        let end = self.file.position(span.end as usize);
        json!({
            "start": {"line": start.line, "character": start.character, "offset": start.offset},
            "end": {"line": end.line, "character": end.character, "offset": end.offset},
        })
    }

    fn machine_style(
        &self,
        attributes: &[Json],
        annotations: &[Json],
    ) -> Option<Map<String, Json>> {
        let from_attribute = first_named(attributes, "style")
            .and_then(|a| a.get("value"))
            .and_then(style::from_value);
        let mut wrapping = Map::new();
        for key in [
            "maxEdgeLabelLength",
            "maxMultiplicityLength",
            "maxAttributeKeyLength",
            "maxAttributeValueLength",
            "maxNodeTitleLength",
            "maxNoteContentLength",
        ] {
            match first_named(attributes, key).and_then(|a| a.get("value")) {
                Some(Json::Number(n)) => {
                    wrapping.insert(key.into(), Json::Number(n.clone()));
                }
                Some(Json::String(s)) => {
                    let cleaned = js_trim(strip_quotes(s));
                    if !cleaned.is_empty()
                        && let Some(v) = crate::values::js_number(cleaned)
                    {
                        wrapping.insert(key.into(), crate::values::number(v));
                    }
                }
                _ => {}
            }
        }
        style::merge([
            style::from_annotations(annotations),
            from_attribute,
            (!wrapping.is_empty()).then_some(wrapping),
        ])
    }

    // ---- nodes ---------------------------------------------------------------------------------

    fn nodes(&self) -> Vec<Json> {
        flatten(&self.machine.nodes)
            .into_iter()
            .map(|(n, parent)| self.node(n, parent))
            .collect()
    }

    fn node(&self, n: &Node, parent: Option<&str>) -> Json {
        let attrs = attributes(&n.attributes);
        let annotations: Vec<Json> = n.annotations.iter().map(|a| annotation(a, false)).collect();
        let from_attribute = first_named(&attrs, "style")
            .and_then(|a| a.get("value"))
            .and_then(style::from_value);
        let from_type = n.is("style").then(|| {
            let mut m = Map::new();
            for a in &attrs {
                let name = a.get("name").and_then(Json::as_str).unwrap_or("");
                if name != "style" {
                    style::assign(&mut m, name, a.get("value").unwrap_or(&Json::Null));
                }
            }
            m
        });
        let node_style = style::merge([
            style::from_annotations(&annotations),
            from_attribute,
            from_type.filter(|m| !m.is_empty()),
        ]);
        let mut out = Map::new();
        out.insert("name".into(), Json::String(n.name.clone()));
        if let Some(kind) = n.kind_lower() {
            out.insert("type".into(), Json::String(kind));
        }
        out.insert("attributes".into(), Json::Array(attrs));
        if let Some(parent) = parent {
            out.insert("parent".into(), Json::String(parent.to_string()));
        }
        if !annotations.is_empty() {
            out.insert("annotations".into(), Json::Array(annotations));
        }
        if let Some(title) = &n.title
            && !title.value.is_empty()
        {
            out.insert(
                "title".into(),
                Json::String(strip_double_quotes(&title.value).to_string()),
            );
        }
        if let Some(style) = node_style {
            out.insert("style".into(), Json::Object(style));
        }
        if self.options.source_ranges
            && !n.imported
            && let Some(span) = n.span
        {
            out.insert("$sourceRange".into(), self.range(span));
        }
        Json::Object(out)
    }

    // ---- explicit edges ------------------------------------------------------------------------

    fn explicit_edges(&self) -> Vec<Json> {
        let mut out = Vec::new();
        for edge in &self.machine.edges {
            self.edge(edge, &mut out);
        }
        for (node, _) in flatten(&self.machine.nodes) {
            for edge in &node.edges {
                let start = out.len();
                self.edge(edge, &mut out);
                // An imported node's edges have positions in another file.
                if node.imported {
                    for e in &mut out[start..] {
                        if let Some(m) = e.as_object_mut() {
                            m.shift_remove("$sourceRange");
                        }
                    }
                }
            }
        }
        out
    }

    /// An endpoint: the node a dotted reference names and the attribute path after it.
    fn endpoint(&self, reference: &str) -> Endpoint {
        let parts: Vec<&str> = reference.split('.').collect();
        if parts.len() == 1 {
            return Endpoint {
                node: reference.to_string(),
                attribute: None,
            };
        }
        for i in (1..=parts.len()).rev() {
            let candidate = parts[..i].join(".");
            if let Some(node) = self.aliases.get(&candidate)
                && node.name == parts[i - 1]
            {
                let rest = parts[i..].join(".");
                return Endpoint {
                    node: node.name.clone(),
                    attribute: (!rest.is_empty()).then_some(rest),
                };
            }
        }
        if let Some(node) = self.aliases.get(parts[0]) {
            return Endpoint {
                node: node.name.clone(),
                attribute: Some(parts[1..].join(".")),
            };
        }
        Endpoint {
            node: parts[parts.len() - 1].to_string(),
            attribute: None,
        }
    }

    fn edge(&self, edge: &Edge, out: &mut Vec<Json>) {
        let mut active: Vec<Endpoint> = edge
            .sources
            .iter()
            .map(|s| self.endpoint(&s.text()))
            .collect();
        if active.is_empty() {
            return;
        }
        for segment in &edge.segments {
            let targets: Vec<Endpoint> = segment
                .targets
                .iter()
                .map(|t| self.endpoint(&t.text()))
                .collect();
            let shared = SegmentPayload::new(segment);
            for source in &active {
                for target in &targets {
                    out.push(self.edge_record(edge, segment, &shared, source, target));
                }
            }
            active = targets;
        }
    }

    fn edge_record(
        &self,
        edge: &Edge,
        segment: &Segment,
        shared: &SegmentPayload,
        source: &Endpoint,
        target: &Endpoint,
    ) -> Json {
        let mut value = shared.value.clone();
        if let Some(a) = &source.attribute {
            value.insert("sourceAttribute".into(), Json::String(a.clone()));
        }
        if let Some(a) = &target.attribute {
            value.insert("targetAttribute".into(), Json::String(a.clone()));
        }
        let mut rec = Map::new();
        rec.insert("source".into(), Json::String(source.node.clone()));
        rec.insert("target".into(), Json::String(target.node.clone()));
        if !shared.annotations.is_empty() {
            rec.insert(
                "annotations".into(),
                Json::Array(shared.annotations.clone()),
            );
        }
        rec.insert("arrowType".into(), Json::String(segment.arrow.text.clone()));
        if let Some(m) = &segment.source_multiplicity {
            rec.insert(
                "sourceMultiplicity".into(),
                Json::String(m.value.replace('"', "")),
            );
        }
        if let Some(m) = &segment.target_multiplicity {
            rec.insert(
                "targetMultiplicity".into(),
                Json::String(m.value.replace('"', "")),
            );
        }
        if let Some(a) = &source.attribute {
            rec.insert("sourceAttribute".into(), Json::String(a.clone()));
        }
        if let Some(a) = &target.attribute {
            rec.insert("targetAttribute".into(), Json::String(a.clone()));
        }
        // Block attributes go over the inline payload; one without a value still counts as set.
        let mut attributes = value.clone();
        let mut any = !attributes.is_empty();
        for a in &edge.attributes {
            any = true;
            match &a.value {
                Some(v) => {
                    attributes.insert(a.name.text.clone(), convert(v));
                }
                None => {
                    attributes.shift_remove(&a.name.text);
                }
            }
        }
        if any {
            rec.insert("attributes".into(), Json::Object(attributes));
        }
        if !value.is_empty() {
            rec.insert("value".into(), Json::Object(value));
        }
        if let Some(style) = &shared.style {
            rec.insert("style".into(), Json::Object(style.clone()));
        }
        if let Some(kind) = shared.semantic {
            rec.insert("type".into(), Json::String(kind.into()));
        }
        if self.options.source_ranges {
            rec.insert("$sourceRange".into(), self.range(segment.span));
        }
        Json::Object(rec)
    }

    // ---- inferred edges ------------------------------------------------------------------------

    /// A text naming a node (or `node.attribute`): the node and the attribute path.
    fn resolve_text(&self, text: &str) -> Option<Endpoint> {
        let mut s = js_trim(text);
        if let Some(stripped) = s.strip_suffix(';') {
            s = stripped;
        }
        if s.is_empty() {
            return None;
        }
        let parts: Vec<&str> = s.split('.').collect();
        for i in (1..=parts.len()).rev() {
            if let Some(node) = self.aliases.get(&parts[..i].join(".")) {
                let rest = parts[i..].join(".");
                return Some(Endpoint {
                    node: node.name.clone(),
                    attribute: (!rest.is_empty()).then_some(rest),
                });
            }
        }
        None
    }

    fn inferred_edges(&self, explicit: &[Json]) -> Vec<Json> {
        let keys: HashSet<String> = explicit
            .iter()
            .map(|e| {
                let value = e.get("value");
                let label = value
                    .and_then(|v| v.get("attribute").or_else(|| v.get("text")))
                    .and_then(Json::as_str)
                    .unwrap_or("");
                format!(
                    "{}->{}:{label}",
                    e.get("source").and_then(Json::as_str).unwrap_or(""),
                    e.get("target").and_then(Json::as_str).unwrap_or("")
                )
            })
            .collect();
        const PRIMITIVE_TYPES: [&str; 8] = [
            "string", "number", "boolean", "float", "double", "integer", "int", "decimal",
        ];
        let mut out = Vec::new();
        for (node, _) in flatten(&self.machine.nodes) {
            if node.is("style") || node.is("note") {
                continue;
            }
            for a in &node.attributes {
                let ty = a.ty.as_ref().map(type_text);
                if ty
                    .as_deref()
                    .is_some_and(|t| PRIMITIVE_TYPES.contains(&t.to_lowercase().as_str()))
                {
                    continue;
                }
                let mut texts = Vec::new();
                if let Some(v) = &a.value {
                    reference_texts(v, &mut texts);
                }
                for text in texts {
                    let Some(target) = self.resolve_text(&text) else {
                        continue;
                    };
                    let key = format!("{}->{}:{}", node.name, target.node, a.name.text);
                    if keys.contains(&key) {
                        continue;
                    }
                    let mut value = Map::new();
                    value.insert("attribute".into(), Json::String(a.name.text.clone()));
                    value.insert("text".into(), Json::String(a.name.text.clone()));
                    if let Some(t) = &ty {
                        value.insert("type".into(), Json::String(t.clone()));
                    }
                    value.insert("sourceAttribute".into(), Json::String(a.name.text.clone()));
                    if let Some(attr) = &target.attribute {
                        value.insert("targetAttribute".into(), Json::String(attr.clone()));
                    }
                    let mut rec = Map::new();
                    rec.insert("source".into(), Json::String(node.name.clone()));
                    rec.insert("target".into(), Json::String(target.node.clone()));
                    rec.insert("value".into(), Json::Object(value.clone()));
                    rec.insert("attributes".into(), Json::Object(value));
                    rec.insert("type".into(), Json::String("inferred".into()));
                    rec.insert("sourceAttribute".into(), Json::String(a.name.text.clone()));
                    if let Some(attr) = &target.attribute {
                        rec.insert("targetAttribute".into(), Json::String(attr.clone()));
                    }
                    if self.options.source_ranges && !node.imported {
                        rec.insert("$sourceRange".into(), self.range(a.span));
                    }
                    out.push(Json::Object(rec));
                }
            }
        }
        out
    }

    // ---- dependencies --------------------------------------------------------------------------

    fn dependencies(&self) -> Vec<Json> {
        let all = flatten(&self.machine.nodes);
        let names: HashSet<&str> = all.iter().map(|(n, _)| n.name.as_str()).collect();
        let mut found = Dependencies::default();
        for (node, _) in &all {
            for a in &node.attributes {
                let Some(v) = &a.value else { continue };
                let text = self.scan_text(v);
                for reference in template_references(&text) {
                    let root = reference.split('.').next().unwrap_or("");
                    if names.contains(root) && root != node.name {
                        found.add(&node.name, root, format!("reads {reference}"), &reference);
                    }
                }
            }
        }
        for edge in &self.machine.edges {
            self.condition_dependencies(edge, &all, &names, &mut found);
        }
        found.out
    }

    /// The dependencies the conditions of a top-level edge statement give. A condition guards
    /// its own segment, whose sources are the statement's for the first segment and the previous
    /// segment's targets after it (docs/dygram/deviations.md).
    fn condition_dependencies(
        &self,
        edge: &Edge,
        all: &[(&Node, Option<&str>)],
        names: &HashSet<&str>,
        found: &mut Dependencies,
    ) {
        for (i, segment) in edge.segments.iter().enumerate() {
            if segment.labels.is_empty() {
                continue;
            }
            let sources = match i.checked_sub(1).and_then(|p| edge.segments.get(p)) {
                Some(previous) => &previous.targets,
                None => &edge.sources,
            };
            let label_text: Vec<&str> = segment
                .labels
                .iter()
                .filter_map(|group| group_span(group).map(|s| self.file.slice(s)))
                .filter(|t| !t.is_empty())
                .collect();
            let Some(condition) = find_condition(&label_text.join(" ")) else {
                continue;
            };
            for variable in condition_variables(&condition) {
                let target = if names.contains(variable.as_str()) {
                    Some(variable.clone())
                } else {
                    all.iter()
                        .find(|(n, _)| n.attribute(&variable).is_some())
                        .map(|(n, _)| n.name.clone())
                };
                let Some(target) = target else { continue };
                for source in sources.iter().map(QName::last) {
                    if source != target {
                        let reason = format!("condition references {variable}");
                        found.add(source, &target, reason, &condition);
                    }
                }
            }
        }
    }

    /// The text scanned for `{{ … }}`: a non-empty string's value, else the value's source text.
    fn scan_text(&self, v: &Value) -> String {
        match v {
            Value::Primitive(Primitive::Str(s)) if !s.value.is_empty() => s.value.clone(),
            Value::Primitive(Primitive::Ident(t, _) | Primitive::ExtId(t, _)) if !t.is_empty() => {
                t.clone()
            }
            other => self.file.slice(other.span()).to_string(),
        }
    }
}

/// What a segment's label gives every edge record of the segment.
struct SegmentPayload {
    annotations: Vec<Json>,
    value: Map<String, Json>,
    style: Option<Map<String, Json>>,
    semantic: Option<&'static str>,
}

/// The inferred dependencies found so far, each once (by source, target and path), in order.
#[derive(Default)]
struct Dependencies {
    seen: HashSet<String>,
    out: Vec<Json>,
}

impl Dependencies {
    fn add(&mut self, source: &str, target: &str, reason: String, path: &str) {
        if self.seen.insert(format!("{source}:{target}:{path}")) {
            self.out
                .push(json!({"source": source, "target": target, "reason": reason, "path": path}));
        }
    }
}

/// The semantic edge type a label text gives (`writes`, `reads`, `catch`).
pub(crate) fn semantic(text: &str) -> Option<&'static str> {
    match js_trim(text).to_lowercase().as_str() {
        "writes" | "stores" => Some("writes"),
        "reads" => Some("reads"),
        "catch" | "error" => Some("catch"),
        _ => None,
    }
}

impl SegmentPayload {
    fn new(segment: &Segment) -> Self {
        let mut annotations = Vec::new();
        let mut value = Map::new();
        let mut inline_style = Map::new();
        let mut texts = Vec::new();
        for group in &segment.labels {
            for item in group {
                match item {
                    LabelItem::Annotation(a) => annotations.push(annotation(a, true)),
                    LabelItem::Text(p) => {
                        let text = token_text(p);
                        value.insert("text".into(), Json::String(strip_quotes(&text).to_string()));
                        texts.push(text);
                    }
                    LabelItem::Pair { name, value: v, .. } => {
                        let text = token_text(v);
                        let stored = strip_matching_quotes(&text).to_string();
                        style::assign(&mut inline_style, &name.text, &Json::String(stored.clone()));
                        value.insert(name.text.clone(), Json::String(stored));
                    }
                    LabelItem::Flag { .. } => {}
                }
            }
        }
        let has_text = value
            .get("text")
            .and_then(Json::as_str)
            .is_some_and(|t| !t.is_empty());
        if !has_text
            && let Some(text) = annotations
                .iter()
                .find(|a| {
                    a.get("name")
                        .and_then(Json::as_str)
                        .is_some_and(|n| n.eq_ignore_ascii_case("style"))
                })
                .and_then(|a| a.get("value"))
                .and_then(Json::as_str)
        {
            value.insert("text".into(), Json::String(text.to_string()));
        }
        let style = style::merge([
            (!inline_style.is_empty()).then_some(inline_style),
            style::from_annotations(&annotations),
        ]);
        let semantic = value
            .get("text")
            .and_then(Json::as_str)
            .filter(|t| !t.is_empty())
            .and_then(semantic)
            .or_else(|| texts.iter().find_map(|t| semantic(t)));
        Self {
            annotations,
            value,
            style,
            semantic,
        }
    }
}

/// The span of one label group (first item to last).
fn group_span(group: &[LabelItem]) -> Option<Span> {
    let span = |item: &LabelItem| match item {
        LabelItem::Annotation(a) => a.span,
        LabelItem::Pair { span, .. } | LabelItem::Flag { span, .. } => *span,
        LabelItem::Text(p) => p.span(),
    };
    let first = span(group.first()?);
    let last = span(group.last()?);
    Some(first.to(last))
}

/// The first `when:` (else `unless:`, else `if:`) condition of a label: the text after the opening
/// quote up to the next quote of either kind.
pub(crate) fn find_condition(label: &str) -> Option<String> {
    let lower = label.to_ascii_lowercase();
    for keyword in ["when", "unless", "if"] {
        let pattern = format!("{keyword}:");
        let mut from = 0;
        while let Some(pos) = lower[from..].find(&pattern) {
            let after = from + pos + pattern.len();
            let rest = &label[after..];
            let trimmed = rest.trim_start();
            if let Some(quote_rest) = trimmed.strip_prefix(['\'', '"']) {
                let end = quote_rest.find(['\'', '"']);
                if let Some(end) = end
                    && end > 0
                {
                    return Some(quote_rest[..end].to_string());
                }
            }
            from = after;
        }
    }
    None
}

/// Identifiers in a condition (`[A-Za-z_][A-Za-z0-9_]*` at word boundaries), minus literals and
/// built-in variables, in order of first appearance.
pub(crate) fn condition_variables(condition: &str) -> Vec<String> {
    const RESERVED: [&str; 6] = [
        "true",
        "false",
        "null",
        "errorCount",
        "errors",
        "activeState",
    ];
    let bytes = condition.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let boundary = i == 0 || !is_word(bytes[i - 1]);
        if boundary && (bytes[i].is_ascii_alphabetic() || bytes[i] == b'_') {
            let start = i;
            while i < bytes.len() && is_word(bytes[i]) {
                i += 1;
            }
            let word = &condition[start..i];
            if !RESERVED.contains(&word) && !out.iter().any(|w| w == word) {
                out.push(word.to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// `{{ path }}` references in a text, in order.
fn template_references(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let inner = after.trim_start_matches(|c: char| c.is_whitespace());
        let path_len = inner
            .char_indices()
            .take_while(|(i, c)| {
                if *i == 0 {
                    c.is_ascii_alphabetic() || *c == '_'
                } else {
                    c.is_ascii_alphanumeric() || *c == '_' || *c == '.'
                }
            })
            .count();
        if path_len > 0 {
            let path = &inner[..path_len];
            let tail = inner[path_len..].trim_start_matches(|c: char| c.is_whitespace());
            if tail.starts_with("}}") {
                out.push(path.to_string());
                let consumed = text.len() - tail.len() + 2;
                rest = &text[consumed..];
                continue;
            }
        }
        rest = &rest[open + 1..];
    }
    out
}

/// Texts in a value that may name nodes: strings, names and refs, inside objects too (arrays and
/// numbers never do).
fn reference_texts(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Primitive(Primitive::Str(s)) => out.push(s.value.clone()),
        Value::Primitive(Primitive::Ident(t, _) | Primitive::ExtId(t, _)) => out.push(t.clone()),
        Value::Primitive(Primitive::Number(..)) | Value::Array(..) => {}
        Value::Object(attributes, _) => {
            for a in attributes {
                if let Some(v) = &a.value {
                    reference_texts(v, out);
                }
            }
        }
    }
}

/// Attributes as `{name, type?, value?}` entries.
pub fn attributes(attrs: &[Attribute]) -> Vec<Json> {
    attrs
        .iter()
        .map(|a| {
            let mut m = Map::new();
            m.insert("name".into(), Json::String(a.name.text.clone()));
            if let Some(ty) = &a.ty {
                m.insert("type".into(), Json::String(type_text(ty)));
            }
            if let Some(v) = &a.value {
                m.insert("value".into(), convert(v));
            }
            Json::Object(m)
        })
        .collect()
}

fn first_named<'j>(entries: &'j [Json], name: &str) -> Option<&'j Json> {
    entries
        .iter()
        .find(|a| a.get("name").and_then(Json::as_str) == Some(name))
}

/// The annotation of a task node that runs a delta agent: `@Agent("path/to/agent")`.
pub const AGENT_ANNOTATION: &str = "Agent";

/// An annotation: `{name}`, plus `attributes` for a parameter list; on edges also `value` (a
/// string argument) or `qualifiedValue` (a dotted name). Single values of node annotations are
/// not kept, but for `@Agent("path")`, whose path is what the node runs.
pub fn annotation(a: &Annotation, edge: bool) -> Json {
    let mut out = Map::new();
    out.insert("name".into(), Json::String(a.name.text.clone()));
    let keeps_value = edge || a.name.text == AGENT_ANNOTATION;
    match &a.arg {
        Some(AnnotationArg::Value(Primitive::Str(s))) if keeps_value && !s.value.is_empty() => {
            out.insert(
                "value".into(),
                Json::String(strip_double_quotes(&s.value).to_string()),
            );
        }
        Some(AnnotationArg::QName(q)) if edge => {
            out.insert("qualifiedValue".into(), Json::String(q.text()));
        }
        Some(AnnotationArg::Params(params)) => {
            let mut m = Map::new();
            for p in params {
                let v = match &p.value {
                    Some(v) => Json::String(strip_quotes(&token_text(v)).to_string()),
                    None => Json::Bool(true),
                };
                m.insert(p.name.text.clone(), v);
            }
            out.insert("attributes".into(), Json::Object(m));
        }
        _ => {}
    }
    Json::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_and_conditions_are_found() {
        assert_eq!(
            template_references("a {{ x.y }} b {{z}} {{ a + 1 }} {{q }}"),
            ["x.y", "z", "q"]
        );
        assert_eq!(
            find_condition("when: \"Data.priority == 'high'\"").as_deref(),
            Some("Data.priority == ")
        );
        assert_eq!(
            find_condition("if: 'a > 1'; @auto").as_deref(),
            Some("a > 1")
        );
        assert_eq!(find_condition("when: x"), None);
        assert_eq!(
            condition_variables("a.b == 3px && true || errors > c_1"),
            ["a", "b", "c_1"]
        );
    }
}
