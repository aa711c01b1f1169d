//! Answers given by hand (manual mode): the example a person is shown, which moves the machine
//! on, and what an answer of theirs is held to before it is applied (a model's answers are
//! applied as they come).
//!
//! The example is found by trying answers on a copy of the execution, in this order, and taking
//! the first after which the conversation's path has left its node (or completed there) without
//! failing:
//!
//! 1. a call of each open transition;
//! 2. at a node without transitions, a text answer (the node is done);
//! 3. where the transitions are closed until the context changes, a write that opens one and
//!    the transition: for each closed transition and each context the node may write, each field
//!    set to a value taken from the conditions (a number in them, one more or less; a string in
//!    them; the other boolean), one field at a time, then all of them at once.
//!
//! At most [`MAX_TRIALS`] answers are tried. When none moves the path on (a condition no such
//! value satisfies), the example shows the answer's form: a write of the context's fields.

use serde_json::{Map, Value, json};

use llm::{ChatResponse, ContentBlock};

use dygram_core::condition::CompiledCondition;

use super::*;

/// How many answers the search for an example tries at most.
pub const MAX_TRIALS: usize = 64;

/// The text of the example answers.
const DONE: &str = "Done.";

/// An answer as a person writes it: text and tool calls (name, input).
#[derive(Debug, Clone, PartialEq)]
struct Answer {
    text: String,
    calls: Vec<(String, Value)>,
}

impl Answer {
    fn text(text: &str) -> Self {
        Self {
            text: text.to_string(),
            calls: Vec::new(),
        }
    }

    fn calling(calls: Vec<(String, Value)>) -> Self {
        Self {
            text: DONE.to_string(),
            calls,
        }
    }

    /// The manual answer's JSON: `{"response", "tools": [{"name", "input"}]}`.
    fn to_json(&self) -> Value {
        if self.calls.is_empty() {
            return json!({"response": self.text});
        }
        let tools: Vec<Value> = self
            .calls
            .iter()
            .map(|(name, input)| json!({"name": name, "input": input}))
            .collect();
        json!({"response": self.text, "tools": tools})
    }

    /// The answer as the model's response.
    fn to_response(&self) -> ChatResponse {
        let mut content = vec![ContentBlock::text(self.text.clone())];
        for (i, (name, input)) in self.calls.iter().enumerate() {
            content.push(ContentBlock::tool_call(
                format!("example-{i}"),
                name,
                input.clone(),
            ));
        }
        ChatResponse::given(content)
    }
}

/// A tool called in a manual answer that the node cannot run: neither offered nor a transition of
/// the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownTool {
    /// The name called.
    pub name: String,
    /// The name it was probably meant to be.
    pub meant: Option<String>,
}

impl Executor<'_> {
    /// An answer to the open conversation for a person answering by hand, in the manual answer's
    /// shape (`{"response", "tools": [{"name", "input"}]}`): one that moves the machine on when
    /// one is found (see the module documentation).
    pub fn example_answer(&self) -> Value {
        let Some(turn) = self.state.turn_state.as_ref() else {
            return Answer::text(DONE).to_json();
        };
        let found = self
            .candidates(turn)
            .into_iter()
            .take(MAX_TRIALS)
            .find(|answer| self.moves_on(turn, answer));
        found.unwrap_or_else(|| self.form_only(turn)).to_json()
    }

    /// The tools `response` calls that the open conversation's node cannot run: names it does not
    /// offer, other than transitions to its targets (a write in the same answer may open one). A
    /// person answering by hand is told; a model's call of one is answered with an error instead.
    pub fn unknown_tools(&self, response: &ChatResponse) -> Vec<UnknownTool> {
        let Some(turn) = self.state.turn_state.as_ref() else {
            return Vec::new();
        };
        let mut known: Vec<String> = turn.tools.iter().map(|t| t.name.clone()).collect();
        for e in self.choice_edges(&turn.node_name) {
            known.push(format!("{}{}", tools::TRANSITION, e.target));
        }
        response
            .tool_calls()
            .filter(|c| !known.iter().any(|k| k == c.name))
            .map(|c| UnknownTool {
                name: c.name.to_string(),
                meant: dygram_core::suggest::closest(c.name, known.iter().map(String::as_str))
                    .map(str::to_string),
            })
            .collect()
    }

    /// The error that `response`, as the answer to the open conversation, would fail its path
    /// with: an answer that calls no tool while every transition of the node is closed (and no
    /// other path may open one). `None` when the answer would not fail the path. A person answering
    /// by hand can be told so and answer again instead, while a model's answers are applied as
    /// they come.
    pub fn answer_would_fail(&self, response: &ChatResponse) -> Option<String> {
        if response.tool_calls().next().is_some() {
            return None;
        }
        let turn = self.state.turn_state.as_ref()?;
        match self.all_closed(&turn.path_id, &turn.node_name)? {
            Action::Fail(error) => Some(error),
            _ => None,
        }
    }

    /// The answers tried for the example, in order.
    fn candidates(&self, turn: &TurnState) -> Vec<Answer> {
        let reason = || json!({"reason": "…"});
        let mut out: Vec<Answer> = turn
            .tools
            .iter()
            .filter(|t| t.name.starts_with(tools::TRANSITION))
            .map(|t| Answer::calling(vec![(t.name.clone(), reason())]))
            .collect();
        let choices = self.choice_edges(&turn.node_name);
        if choices.is_empty() {
            out.push(Answer::text(DONE));
        }
        let writable: Vec<&str> = turn
            .tools
            .iter()
            .filter_map(|t| t.name.strip_prefix(tools::WRITE))
            .collect();
        for edge in choices.iter().filter(|e| !self.edge_open(&turn.path_id, e)) {
            let Some(condition) = edge.condition() else {
                continue;
            };
            let transition = format!("{}{}", tools::TRANSITION, edge.target);
            for context in &writable {
                for data in self.writes_to_try(context, &condition) {
                    let write = (format!("{}{context}", tools::WRITE), json!({"data": data}));
                    out.push(Answer::calling(vec![write, (transition.clone(), reason())]));
                }
            }
        }
        out
    }

    /// The fields of `context` as they are now (declared, then written).
    fn current_fields(&self, context: &str) -> Map<String, Value> {
        let mut data = self
            .machine
            .node(context)
            .map(|n| n.attribute_object())
            .unwrap_or_default();
        if let Some(Value::Object(current)) = self.state.context_state.get(context) {
            for (k, v) in current {
                data.insert(k.clone(), v.clone());
            }
        }
        data
    }

    /// Writes of `context` to try against `condition`: its fields as they are, with one field
    /// changed to each value the condition suggests, then with every field changed at once.
    fn writes_to_try(&self, context: &str, condition: &str) -> Vec<Map<String, Value>> {
        let current = self.current_fields(context);
        let literals = Literals::of(condition);
        let mut out = Vec::new();
        let mut all_at_once = current.clone();
        for (field, value) in &current {
            let values = literals.values_for(value);
            for v in &values {
                let mut data = current.clone();
                data.insert(field.clone(), v.clone());
                out.push(data);
            }
            if let Some(first) = values.into_iter().next() {
                all_at_once.insert(field.clone(), first);
            }
        }
        out.push(all_at_once);
        out
    }

    /// Whether `answer`, applied to a copy of the execution, moves the conversation's path on:
    /// it leaves its node, or completes there, and does not fail.
    fn moves_on(&self, turn: &TurnState, answer: &Answer) -> bool {
        let mut copy = self.scratch();
        let Some(open) = copy.state.turn_state.take() else {
            return false;
        };
        copy.apply_response(open, answer.to_response());
        copy.state.path(&turn.path_id).is_some_and(|p| {
            p.status != PathStatus::Failed
                && (p.current_node != turn.node_name || p.status == PathStatus::Completed)
        })
    }

    /// The example when no answer tried moves the path on: a transition's call when one is
    /// offered, else a write of the context's fields as they are, else the first tool, else text.
    fn form_only(&self, turn: &TurnState) -> Answer {
        let tool = turn
            .tools
            .iter()
            .find(|t| t.name.starts_with(tools::TRANSITION))
            .or_else(|| turn.tools.iter().find(|t| t.name.starts_with(tools::WRITE)))
            .or(turn.tools.first());
        let Some(tool) = tool else {
            return Answer::text(DONE);
        };
        let input = if tool.name.starts_with(tools::TRANSITION) {
            json!({"reason": "…"})
        } else if let Some(context) = tool.name.strip_prefix(tools::WRITE) {
            json!({"data": self.current_fields(context)})
        } else {
            json!({})
        };
        Answer::calling(vec![(tool.name.clone(), input)])
    }
}

/// The literals a condition holds, for the values tried in the example's writes.
#[derive(Debug, Default)]
struct Literals {
    numbers: Vec<f64>,
    strings: Vec<String>,
}

impl Literals {
    /// The numbers and strings written in `condition` (in order, each once); none when it
    /// cannot be parsed.
    fn of(condition: &str) -> Self {
        let mut found = Self::default();
        let literals =
            CompiledCondition::compile(condition).map_or_else(|_| Vec::new(), |c| c.literals());
        for literal in literals {
            match literal {
                Value::Number(n) => found.numbers.extend(n.as_f64()),
                Value::String(s) => found.strings.push(s),
                _ => {}
            }
        }
        found
    }

    /// The values to try for a field whose value is `now`, of its kind: for a number, each
    /// number of the condition and one more and one less, then one more than now; for a string,
    /// each string of the condition; for a boolean, the other one.
    fn values_for(&self, now: &Value) -> Vec<Value> {
        let mut out: Vec<Value> = Vec::new();
        let mut add = |v: Value| {
            if &v != now && !out.contains(&v) {
                out.push(v);
            }
        };
        match now {
            Value::Number(n) => {
                let integers = now.is_i64() || now.is_u64();
                for base in &self.numbers {
                    for v in [base + 1.0, *base, base - 1.0] {
                        add(number(v, integers));
                    }
                }
                add(number(n.as_f64().unwrap_or(0.0) + 1.0, integers));
            }
            Value::String(_) => {
                for s in &self.strings {
                    add(Value::String(s.clone()));
                }
            }
            Value::Bool(b) => add(Value::Bool(!b)),
            _ => {}
        }
        out
    }
}

/// `v` as JSON, an integer where the field holds integers and `v` is whole.
fn number(v: f64, integers: bool) -> Value {
    if integers && v.fract() == 0.0 && v.abs() < 9.0e15 {
        json!(v as i64)
    } else {
        json!(v)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_literals_of_a_condition_are_its_numbers_and_strings() {
        let l = Literals::of(r#"order.total > 10 && x2 == "ok" || size(s) >= 2.5 && t != 'no'"#);
        assert!(Literals::of("order.total >").numbers.is_empty());
        assert_eq!(l.numbers, [10.0, 2.5]);
        assert_eq!(l.strings, ["ok", "no"]);
        assert_eq!(
            l.values_for(&json!(0)),
            [
                json!(11),
                json!(10),
                json!(9),
                json!(3.5),
                json!(2.5),
                json!(1.5),
                json!(1)
            ]
        );
        assert_eq!(l.values_for(&json!("ok")), [json!("no")]);
        assert_eq!(l.values_for(&json!(true)), [json!(false)]);
        assert_eq!(l.values_for(&Value::Null), Vec::<Value>::new());
    }
}
