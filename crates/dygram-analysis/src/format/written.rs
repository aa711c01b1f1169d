//! What a document says beyond its canonical JSON, which formatting must keep as well.
//!
//! The canonical JSON is what the runtime and every output read, but it drops some of what is
//! written (docs/dygram/deviations.md): a single-value annotation's value (`@Version("1.0")`), the
//! literals of a union type, a bare name in an edge label, a string's trailing quote. The printer,
//! working from the JSON, drops them too. So beside the JSON, the linked machines of the document
//! and of the formatted text are compared as written ([`same`]):
//!
//! * the machine's title, annotations (with their arguments) and attributes (name, type as written,
//!   value), and each node's, in order, with its path, type (in any case), title;
//! * every edge record (one per source and target of a segment) with its arrow, label items (in any
//!   grouping and order), multiplicities and attributes, as a multiset: the printer joins and moves
//!   edge statements;
//! * and, as a last net, every name, string, number and `#ref` of the document must still be
//!   somewhere in the formatted text.
//!
//! Values are compared as text, or as numbers when both read as one (`"42"` and `42`, `1e3` and
//! `1000` are the same number, which the conversion to JSON makes of either).

use std::collections::HashSet;

use serde_json::{Value as Json, json};

use dygram_core::Compiled;
use dygram_core::model::{Machine, flatten};
use dygram_syntax::ast::{
    Annotation, AnnotationArg, Attribute, Edge, LabelItem, Primitive, TypeDef, Value,
};
use dygram_syntax::lexer::{self, TokenKind};

/// Whether `again` (the compiled formatted text) says everything `original` (the compiled
/// document) says, as written.
pub fn same(original: &Compiled, again: &Compiled) -> bool {
    machine(&original.machine) == machine(&again.machine)
        && atoms(original.file.text()).is_subset(&atoms(again.file.text()))
}

/// A value as text, or as a number when it reads as one.
fn scalar(text: &str) -> Json {
    match text.parse::<f64>() {
        Ok(n) => Json::String(format!("n:{n:?}")),
        Err(_) => Json::String(format!("t:{text}")),
    }
}

fn primitive(p: &Primitive) -> Json {
    match p {
        Primitive::Str(s) => scalar(&s.value),
        Primitive::ExtId(t, _) | Primitive::Ident(t, _) | Primitive::Number(t, _) => scalar(t),
    }
}

fn value(v: &Value) -> Json {
    match v {
        Value::Primitive(p) => primitive(p),
        Value::Array(items, _) => Json::Array(items.iter().map(value).collect()),
        Value::Object(attributes, _) => {
            json!({ "object": attributes.iter().map(attribute).collect::<Vec<_>>() })
        }
    }
}

fn type_def(ty: &TypeDef) -> Json {
    match ty {
        TypeDef::Named {
            name,
            generics,
            optional,
            ..
        } => json!([
            name.text(),
            generics.iter().map(type_def).collect::<Vec<_>>(),
            optional
        ]),
        TypeDef::Union { literals, .. } => json!({
            "union": literals.iter().map(|l| l.value.clone()).collect::<Vec<_>>()
        }),
    }
}

fn attribute(a: &Attribute) -> Json {
    json!([
        a.name.text,
        a.ty.as_ref().map(type_def),
        a.value.as_ref().map(value)
    ])
}

fn annotation(a: &Annotation) -> Json {
    let arg = match &a.arg {
        None => Json::Null,
        Some(AnnotationArg::Value(p)) => primitive(p),
        Some(AnnotationArg::QName(q)) => json!({ "name": q.text() }),
        Some(AnnotationArg::Params(params)) => Json::Array(
            params
                .iter()
                .map(|p| json!([p.name.text, p.value.as_ref().map(primitive)]))
                .collect(),
        ),
    };
    json!([a.name.text, arg])
}

fn label_item(item: &LabelItem) -> String {
    match item {
        LabelItem::Annotation(a) => json!({ "annotation": annotation(a) }),
        LabelItem::Pair { name, value, .. } => json!({ "pair": [name.text, primitive(value)] }),
        LabelItem::Flag { name, .. } => json!({ "flag": name.text }),
        LabelItem::Text(p) => json!({ "text": primitive(p) }),
    }
    .to_string()
}

/// One entry per edge record of the statement.
fn edge_records(edge: &Edge, out: &mut Vec<String>) {
    let attributes: Vec<Json> = edge.attributes.iter().map(attribute).collect();
    let mut sources = edge.sources.len();
    for segment in &edge.segments {
        let mut labels: Vec<String> = segment.labels.iter().flatten().map(label_item).collect();
        labels.sort();
        let record = json!([
            segment.arrow.text,
            labels,
            segment
                .source_multiplicity
                .as_ref()
                .map(|m| m.value.clone()),
            segment
                .target_multiplicity
                .as_ref()
                .map(|m| m.value.clone()),
            attributes
        ])
        .to_string();
        let targets = segment.targets.len();
        out.extend(std::iter::repeat_n(record, sources * targets));
        sources = targets;
    }
}

fn machine(m: &Machine) -> Json {
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    for e in &m.edges {
        edge_records(e, &mut edges);
    }
    let mut path: Vec<(&str, String)> = Vec::new();
    for (n, parent) in flatten(&m.nodes) {
        // The path of the parent is the nearest one of that name up the chain (pre-order).
        match parent {
            None => path.clear(),
            Some(parent) => {
                while path.last().is_some_and(|(name, _)| *name != parent) {
                    path.pop();
                }
            }
        }
        let full = match path.last() {
            Some((_, p)) => format!("{p}.{}", n.name),
            None => n.name.clone(),
        };
        path.push((n.name.as_str(), full.clone()));
        nodes.push(json!([
            full,
            n.kind.as_ref().map(|k| k.to_lowercase()),
            n.title.as_ref().map(|t| t.value.clone()),
            n.annotations.iter().map(annotation).collect::<Vec<_>>(),
            n.attributes.iter().map(attribute).collect::<Vec<_>>(),
        ]));
        for e in &n.edges {
            edge_records(e, &mut edges);
        }
    }
    edges.sort();
    json!({
        "title": m.title.as_ref().map(|t| t.value.clone()),
        "annotations": m.annotations.iter().map(annotation).collect::<Vec<_>>(),
        "attributes": m.attributes.iter().map(attribute).collect::<Vec<_>>(),
        "nodes": nodes,
        "edges": edges,
    })
}

/// The names, strings, numbers and `#ref`s of `text` (text in any case, numbers by value).
fn atoms(text: &str) -> HashSet<String> {
    let (tokens, _) = lexer::lex(text);
    tokens
        .iter()
        .filter_map(|t| {
            let raw = text.get(t.span.start as usize..t.span.end as usize)?;
            let written = match t.kind {
                TokenKind::Str => lexer::unquote(raw),
                TokenKind::Ident | TokenKind::Number | TokenKind::ExtId => raw.to_string(),
                _ => return None,
            };
            Some(scalar(&written.to_lowercase()).as_str()?.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dygram_core::compile;
    use dygram_syntax::source::SourceFile;

    fn same_texts(a: &str, b: &str) -> bool {
        same(
            &compile(SourceFile::new("a.dy", a)),
            &compile(SourceFile::new("b.dy", b)),
        )
    }

    #[test]
    fn what_the_json_drops_is_compared() {
        let base = "machine \"M\" @Version(\"1.0\")\nstate a;\na -> b;\n";
        assert!(same_texts(base, base));
        assert!(!same_texts(
            base,
            "machine \"M\" @Version\nstate a;\na -> b;\n"
        ));
        let union = "Context c { u<'x' | 'y'>: \"x\"; }\n";
        assert!(!same_texts(union, "Context c { u<'x' | 'x'>: \"x\"; }\n"));
        let label = "a -rework; attempts: 2-> b;\n";
        assert!(!same_texts(label, "a -attempts: 2-> b;\n"));
        let quoted = "Context c { s: \"say \\\"hi\\\"\"; }\n";
        assert!(!same_texts(quoted, "Context c { s: 'say \"hi'; }\n"));
    }

    #[test]
    fn how_it_is_written_is_not() {
        assert!(same_texts(
            "Task a { n: \"42\"; m: 1e3; t: 'x'; }\nstate b;\na -> b; a -> c;\n",
            "task a {\n    n: 42;\n    m: 1000;\n    t: \"x\";\n}\nstate b;\na -> b, c;\n"
        ));
        assert!(same_texts(
            "a -@Crit(\"y\") @Other-> b;\n",
            "a -@Crit(\"y\"), @Other-> b;\n"
        ));
    }
}
