//! Edge statements: labels, `{ … }` blocks, and records of one segment or chain joined into one
//! statement.

use serde_json::{Map, Value as Json};

use super::Edge;
use crate::render::dsl::literals::{Values, is_ident};

/// Whether `key: value` makes the dependency analysis look for a quoted condition after it.
pub(super) fn is_condition_key(key: &str) -> bool {
    let lower = key.to_lowercase();
    ["when", "unless", "if"].iter().any(|k| lower.ends_with(k))
}

/// A bare label text that gives the semantic edge type `t`.
pub(super) fn semantic_word(t: &str) -> Option<&'static str> {
    match t {
        "writes" => Some("writes"),
        "reads" => Some("reads"),
        "catch" => Some("error"),
        _ => None,
    }
}

/// The `{ … }` block of an edge: what `attributes` has beyond the label's `value`.
pub(super) fn block(record: &Map<String, Json>, values: &Values<'_>) -> Vec<String> {
    let Some(attributes) = record.get("attributes").and_then(Json::as_object) else {
        return Vec::new();
    };
    let empty = Map::new();
    let payload = record
        .get("value")
        .and_then(Json::as_object)
        .unwrap_or(&empty);
    let mut out: Vec<String> = attributes
        .iter()
        .filter(|(k, v)| is_ident(k) && payload.get(k.as_str()) != Some(v))
        .map(|(k, v)| format!("{k}: {};", values.write(v, None, false)))
        .collect();
    // A block attribute without a value removes the key (and still makes `attributes` appear).
    out.extend(
        payload
            .keys()
            .filter(|k| is_ident(k) && !attributes.contains_key(k.as_str()))
            .map(|k| format!("{k};")),
    );
    if out.is_empty() && attributes.is_empty() && payload.is_empty() {
        out.push("_;".into());
    }
    out
}

/// The last part of a dotted reference (what the dependency analysis takes as its node).
pub(super) fn last_part(reference: &str) -> &str {
    reference.rsplit('.').next().unwrap_or(reference)
}

/// Edge statements: consecutive records of one segment (same arrow, label and block) share it
/// when they have the same source (`a -> b, c`) or, for a first segment, the same single target
/// (`a, b -> c`); and a record starting where a single-target segment ends continues it as a chain
/// (`a -> b -> c`).
///
/// At the top level the dependency analysis reads a condition with the sources of its own
/// segment, one source after the other for each name the condition reads: a record with a
/// condition joins no other source there (the dependencies would come in another order), while
/// it may continue a chain (its segment's source is the one it has alone).
pub(super) fn statements(edges: &[Edge], top_level: bool) -> Vec<String> {
    struct Statement<'e> {
        sources: Vec<&'e str>,
        /// Segment text, its source (`None`: several) and targets.
        segments: Vec<(&'e str, Option<&'e str>, Vec<&'e str>)>,
        block: &'e [String],
    }
    let mut out: Vec<Statement<'_>> = Vec::new();
    for e in edges {
        let free = !top_level || e.condition.is_none();
        if let Some(current) = out.last_mut()
            && current.block == e.block.as_slice()
        {
            let first = current.segments.len() == 1;
            if let Some((segment, source, targets)) = current.segments.last_mut() {
                let same = *segment == e.segment;
                if same && *source == Some(e.source.as_str()) {
                    targets.push(&e.target);
                    continue;
                }
                if same
                    && free
                    && first
                    && targets.as_slice() == [e.target.as_str()]
                    && !current.sources.contains(&e.source.as_str())
                {
                    current.sources.push(&e.source);
                    *source = None;
                    continue;
                }
                if targets.as_slice() == [e.source.as_str()] {
                    let from = Some(targets[0]);
                    current.segments.push((&e.segment, from, vec![&e.target]));
                    continue;
                }
            }
        }
        out.push(Statement {
            sources: vec![&e.source],
            segments: vec![(&e.segment, Some(&e.source), vec![&e.target])],
            block: &e.block,
        });
    }
    out.into_iter()
        .map(|s| {
            let mut text = s.sources.join(", ");
            for (segment, _, targets) in &s.segments {
                text.push(' ');
                text.push_str(segment);
                text.push(' ');
                text.push_str(&targets.join(", "));
            }
            if !s.block.is_empty() {
                text.push_str(" { ");
                text.push_str(&s.block.join(" "));
                text.push_str(" }");
            }
            text.push(';');
            text
        })
        .collect()
}
