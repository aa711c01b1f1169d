//! Edge conditions and `{{ … }}` templates in labels, evaluated by the runtime's CEL evaluator
//! ([`crate::condition`]): one language, one evaluator.
//!
//! What the diagram adds is the context and the reading of the outcome:
//!
//! * a condition is evaluated against the machine-level attributes (quotes removed; not
//!   `description`, `desc`, `prompt`, `style`, `version`) plus `errorCount`/`errors` (0 unless
//!   the machine sets `errorCount`) and `activeState` (`""`). One that cannot be parsed is
//!   **inactive**; one that fails while evaluating (an unknown name, a missing key, mismatched
//!   types) is **active**, as the reference draws it (its CEL library returns an error object,
//!   which JavaScript counts as true, and the reference corpus relies on it); otherwise the
//!   value's JavaScript truthiness decides;
//! * a template is evaluated against every node's attributes by node name (string values read
//!   as JSON when they are JSON, typed values converted); one that cannot be evaluated stays as
//!   written, and all stay as written when a `json`-typed value is not JSON.

use std::cell::RefCell;
use std::collections::HashMap;

use serde_json::{Map, Value as Json};

use crate::condition::{CompiledCondition, ConditionError};
use crate::render::access::{attributes, get_str, js_string, js_truthy, json_compact, node_name};
use crate::values::strip_quotes;

/// What an expression is: a whole condition, or the inside of a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Condition,
    Template,
}

/// The contexts of one machine, and the expressions compiled so far (a machine repeats them).
pub(super) struct Expressions {
    /// What conditions see.
    conditions: Map<String, Json>,
    /// What templates see (`None`: templates are left as written).
    templates: Option<Map<String, Json>>,
    /// Compiled expressions by text (`None`: the text does not parse).
    compiled: RefCell<HashMap<(String, Kind), Option<CompiledCondition>>>,
}

impl Expressions {
    /// The contexts of `machine`, whose nodes are `nodes`.
    pub(super) fn new(machine: &Json, nodes: &[&Json]) -> Self {
        Expressions {
            conditions: condition_context(machine),
            templates: template_context(nodes),
            compiled: RefCell::new(HashMap::new()),
        }
    }

    /// Whether an edge's condition is drawn as holding.
    pub(super) fn condition_holds(&self, condition: &str) -> bool {
        match self.compiled(condition, Kind::Condition) {
            None => false,
            Some(compiled) => {
                evaluate(&compiled, &self.conditions).map_or(true, |value| js_truthy(&value))
            }
        }
    }

    /// `text` with each `{{ expression }}` replaced by its value; one that cannot be evaluated
    /// stays as it is.
    pub(super) fn resolve_templates(&self, text: &str) -> String {
        let Some(context) = &self.templates else {
            return text.to_string();
        };
        let mut out = String::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            let after = &rest[open + 2..];
            // The expression: no `}` inside, then `}}`.
            let Some(end) = after.find('}') else { break };
            if !after[end..].starts_with("}}") || after[..end].trim().is_empty() {
                out.push_str(&rest[..open + 2]);
                rest = after;
                continue;
            }
            out.push_str(&rest[..open]);
            let value = self
                .compiled(after[..end].trim(), Kind::Template)
                .and_then(|compiled| evaluate(&compiled, context).ok());
            match value {
                Some(value) => out.push_str(&display(&value)),
                None => out.push_str(&rest[open..open + 2 + end + 2]),
            }
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        out
    }

    /// The compiled expression of a text (compiled once per machine).
    fn compiled(&self, text: &str, kind: Kind) -> Option<CompiledCondition> {
        let mut cache = self.compiled.borrow_mut();
        cache
            .entry((text.to_string(), kind))
            .or_insert_with(|| match kind {
                Kind::Condition => CompiledCondition::compile(text).ok(),
                Kind::Template => CompiledCondition::compile_expression(text).ok(),
            })
            .clone()
    }
}

/// The value of an expression in a context. Only the names it refers to are looked up: a
/// context holds every node of the machine.
fn evaluate(
    compiled: &CompiledCondition,
    context: &Map<String, Json>,
) -> Result<Json, ConditionError> {
    let variables: Map<String, Json> = compiled
        .references()
        .iter()
        .filter_map(|name| Some((name.clone(), context.get(name)?.clone())))
        .collect();
    compiled.value(&variables)
}

/// The machine attributes and the built-ins conditions see.
fn condition_context(machine: &Json) -> Map<String, Json> {
    let mut context = Map::new();
    for a in attributes(machine) {
        let name = get_str(a, "name").unwrap_or("");
        if matches!(
            name,
            "description" | "desc" | "prompt" | "style" | "version"
        ) {
            continue;
        }
        let value = match a.get("value") {
            Some(Json::Object(m)) if m.get("value").is_some_and(|v| !v.is_null()) => m.get("value"),
            other => other,
        };
        let value = match value {
            Some(Json::String(s)) => Json::String(strip_quotes(s).to_string()),
            Some(v) => v.clone(),
            None => Json::Null,
        };
        context.insert(name.to_string(), value);
    }
    let errors = context
        .get("errorCount")
        .cloned()
        .unwrap_or_else(|| Json::from(0));
    context.insert("errorCount".into(), errors.clone());
    context.insert("errors".into(), errors);
    context.insert("activeState".into(), Json::String(String::new()));
    context
}

/// Every node's attributes by node name, for templates; `None` when a `json`-typed value is not
/// JSON (the reference then leaves all templates alone).
fn template_context(nodes: &[&Json]) -> Option<Map<String, Json>> {
    let mut context = Map::new();
    for n in nodes {
        let mut values = Map::new();
        for a in attributes(n) {
            let value = match a.get("value") {
                None => Json::Null,
                Some(Json::String(s)) => typed(s, get_str(a, "type"))?,
                Some(v) => v.clone(),
            };
            values.insert(get_str(a, "name").unwrap_or("").to_string(), value);
        }
        if !values.is_empty() {
            context.insert(node_name(n).to_string(), Json::Object(values));
        }
    }
    Some(context)
}

/// A string attribute value as its type reads it (`None`: `json` that is not JSON).
fn typed(s: &str, ty: Option<&str>) -> Option<Json> {
    let clean = strip_quotes(s);
    Some(match ty {
        None | Some("") => {
            serde_json::from_str::<Json>(s).unwrap_or_else(|_| Json::String(clean.to_string()))
        }
        Some("number") => {
            crate::values::number(crate::values::js_number(clean).unwrap_or(f64::NAN))
        }
        Some("boolean") => Json::Bool(clean.eq_ignore_ascii_case("true")),
        Some("json") => serde_json::from_str::<Json>(clean).ok()?,
        Some(_) => Json::String(clean.to_string()),
    })
}

/// A template's value as text.
fn display(value: &Json) -> String {
    match value {
        Json::Null => String::new(),
        Json::String(s) => s.clone(),
        Json::Array(_) | Json::Object(_) => json_compact(value),
        other => js_string(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn machine() -> Expressions {
        let machine = json!({"attributes": [
            {"name": "status", "value": "valid"},
            {"name": "retryCount", "value": 0},
            {"name": "maxRetries", "value": 3},
            {"name": "limits", "value": {"max": 5}},
            {"name": "tags", "value": ["a", "b"]},
        ]});
        Expressions::new(&machine, &[])
    }

    #[test]
    fn conditions_evaluate_against_machine_attributes() {
        let e = machine();
        assert!(e.condition_holds("status == \"valid\""));
        assert!(!e.condition_holds("status == 'invalid'"));
        assert!(e.condition_holds("retryCount < maxRetries"));
        assert!(!e.condition_holds("errorCount > 0"));
        assert!(e.condition_holds("!(errorCount > 0)"));
        assert!(e.condition_holds("limits.max >= 5 && (1 + 2) * 2 == 6"));
        assert!(e.condition_holds("'a' in tags || false"));
        assert!(e.condition_holds("{{ status }} === 'valid'"));
        assert!(!e.condition_holds("retryCount > 0 ? true : false"));
        assert!(e.condition_holds("size(tags) > 1"));
    }

    #[test]
    fn unknown_names_are_active_and_syntax_errors_inactive() {
        let e = machine();
        assert!(e.condition_holds("Data.priority == 'high'"));
        assert!(e.condition_holds("circuitOpen"));
        assert!(!e.condition_holds("false && unknown"));
        assert!(!e.condition_holds("status == 'unterminated"));
        assert!(!e.condition_holds("(((("));
    }

    #[test]
    fn values_other_than_booleans_count_by_truthiness() {
        let e = machine();
        assert!(e.condition_holds("status"));
        assert!(!e.condition_holds("retryCount"));
        assert!(!e.condition_holds("''"));
    }

    #[test]
    fn templates_resolve_or_stay() {
        let a = json!({"name": "a", "attributes": [
            {"name": "p", "value": "x"},
            {"name": "n", "value": "42"},
            {"name": "f", "value": 2.5},
        ]});
        let e = Expressions::new(&json!({}), &[&a]);
        assert_eq!(
            e.resolve_templates("{{ a.p }}-{{a.n}}-{{ b.q }}-{{ }}-{{ a.f * 2 }}"),
            "x-42-{{ b.q }}-{{ }}-5"
        );
    }

    #[test]
    fn templates_stay_when_a_json_value_is_not_json() {
        let a = json!({"name": "a", "attributes": [
            {"name": "p", "value": "x"},
            {"name": "j", "type": "json", "value": "{not json"},
        ]});
        let e = Expressions::new(&json!({}), &[&a]);
        assert_eq!(e.resolve_templates("{{ a.p }}"), "{{ a.p }}");
    }
}
