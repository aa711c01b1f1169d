//! Edge statements: labels, `{ … }` blocks, and records of one segment or chain joined into one
//! statement.

use serde_json::{Map, Value as Json};

use super::{Edge, Facts};
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
/// At the top level (`facts` given) the dependency analysis reads conditions with the sources of
/// the whole statement: a record with a condition continues a chain only when the JSON has the
/// dependencies of the chain's first source and not its own, and then the chain starts there.
pub(super) fn statements(edges: &[Edge], facts: Option<&Facts>) -> Vec<String> {
    struct Statement<'e> {
        sources: Vec<&'e str>,
        /// Segment text, its source (`None`: several) and targets.
        segments: Vec<(&'e str, Option<&'e str>, Vec<&'e str>)>,
        block: &'e [String],
    }
    let n = edges.len();
    // Whether record `i` can continue record `i - 1` as a chain.
    let links = |i: usize| {
        i > 0
            && edges
                .get(i - 1)
                .zip(edges.get(i))
                .is_some_and(|(before, e)| before.target == e.source && before.block == e.block)
    };
    let mut starts = vec![false; n];
    let mut joins = vec![false; n];
    if let Some(facts) = facts {
        for (k, e) in edges.iter().enumerate() {
            let Some(condition) = &e.condition else {
                continue;
            };
            let own = facts.dependencies(last_part(&e.source), condition);
            if !own.is_empty() && facts.has_all(&own) {
                starts[k] = true;
                continue;
            }
            let mut j = k;
            while links(j) && (j == k || edges[j].condition.is_none()) {
                j -= 1;
                let shared = facts.dependencies(last_part(&edges[j].source), condition);
                if !shared.is_empty() && facts.has_all(&shared) {
                    starts[j] = true;
                    joins[j + 1..=k].iter_mut().for_each(|x| *x = true);
                    break;
                }
            }
        }
    }
    let mut out: Vec<Statement<'_>> = Vec::new();
    for (k, e) in edges.iter().enumerate() {
        // Dependencies read conditions source by source: only unconditional records (at the top
        // level) join other sources.
        let free = facts.is_none() || e.condition.is_none();
        if !starts[k]
            && let Some(current) = out.last_mut()
            && current.block == e.block.as_slice()
        {
            let first = current.segments.len() == 1;
            if let Some((segment, source, targets)) = current.segments.last_mut() {
                let same = *segment == e.segment && !joins[k];
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
                if targets.as_slice() == [e.source.as_str()] && (joins[k] || free) {
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
