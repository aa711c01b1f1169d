//! CEL conditions on edges (`when:`, `unless:`, `if:`), evaluated against a JSON context.
//!
//! A condition is a [CEL](https://cel.dev) expression such as `Alert.count > Alert.threshold`.
//! Its text is first normalised by [`prepare`] (surrounding quotes, `===`, `{{ templates }}`),
//! then parsed by the `cel` crate and evaluated with every top-level key of the context bound
//! as a variable. Negating an `unless:` condition is the caller's job.
//!
//! # Values
//!
//! JSON objects become CEL maps (so `Ctx.field` and `Ctx.nested.deep` work), arrays become
//! lists, and strings, booleans and `null` map to their CEL counterparts. A JSON number that
//! fits an `i64` becomes a CEL `int`, any other number a `double`.
//!
//! # Numbers
//!
//! Conditions are written by people used to JavaScript, where every number is a double. CEL
//! keeps `int` and `double` apart; this module bridges the gap where it would otherwise fail:
//!
//! - comparisons (`<`, `<=`, `>`, `>=`, `==`, `!=`, `in`) between an `int` and a `double`
//!   compare the numeric values: the `cel` crate does this itself (`5.0 == 5`, `5.5 > 3` and
//!   `1 == 1.0` are all true);
//! - arithmetic (`+`, `-`, `*`, `/`, `%`) with one `int` (or `uint`) and one `double` operand
//!   turns the integer into a double and computes in doubles (`ratio * 100` with `ratio`
//!   being `0.7` is `70.0`), where CEL alone reports "no such overload"; `%` also works on two
//!   doubles (as JavaScript's `%`);
//! - what stays CEL: arithmetic on two `int`s is integer arithmetic, so `7 / 2` is `3` (write
//!   `7 / 2.0`, or `double(x) / y`), integer overflow is an error, and integer division by zero
//!   is an error while double division by zero gives an infinity.
//!
//! The arithmetic bridge works by rewriting the parsed expression: each arithmetic operator
//! becomes a call to a function of this module, which computes in doubles when the operands
//! mix integers and doubles, and otherwise does exactly what the CEL operator does.
//!
//! # Robustness
//!
//! A condition comes from a user's file and must never bring the runtime down:
//!
//! - the `cel` crate does not print: it replaces ANTLR's console error listener with one that
//!   collects the syntax errors, which become [`ConditionError::Parse`];
//! - parsing and evaluation run under [`std::panic::catch_unwind`]; a panic (none is known) is
//!   turned into an error, and is not printed either: a panic hook installed on first use stays
//!   silent while this module runs `cel` on the current thread and hands every other panic to
//!   the hook that was there before;
//! - a stack overflow cannot be caught, and the `cel` parser and evaluator recurse as deep as
//!   the expression is nested (with `cel` optimised, a chain of about 1 400 `+` overflows a
//!   2 MiB stack, and each level of parentheses takes 7 to 9 KiB). A condition is therefore
//!   refused before parsing when it is longer than [`MAX_LENGTH`] bytes, nests brackets deeper
//!   than [`MAX_NESTING`] levels or has more than [`MAX_OPERATORS`] operators; at those limits
//!   parsing and evaluation take less than 384 KiB of stack (measured with the workspace's
//!   profiles, where dependencies are optimised even in debug builds: an unoptimised `cel`
//!   takes many times more).

use std::cell::Cell;
use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, LazyLock, Once};

use cel::common::ast::{EntryExpr, Expr, IdedExpr, operators};
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt, DYN_TYPE,
};
use cel::common::value::{CowVal, Val};
use cel::{Context, Env, ExecutionError, ParseErrors, Value};
use serde_json::{Map, Value as JsonValue};

/// The longest condition accepted, in bytes of its prepared text.
pub const MAX_LENGTH: usize = 16 * 1024;

/// How deep brackets (`(`, `[`, `{`) may nest in a condition.
pub const MAX_NESTING: usize = 24;

/// How many operators a condition may have: each `.` and `[` (member access and indexing) counts
/// as one, as does each arithmetic or relational operator (`+`, `==`, `in`...). `&&`, `||`, `!`
/// and `?:` are not counted: `cel` does not recurse on their chains.
pub const MAX_OPERATORS: usize = 160;

/// Words that make a condition depend on something outside the machine (see [`is_simple`]).
const NON_SIMPLE_WORDS: [&str; 4] = ["tool", "external", "api", "call"];

/// Why a condition could not give a boolean.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConditionError {
    /// The text is not a valid CEL expression (or is too large or too deeply nested).
    #[error("condition \"{}\" could not be parsed: {message}", shown(.condition))]
    Parse {
        /// The condition, as written (trimmed, on one line).
        condition: String,
        /// What is wrong with it.
        message: String,
    },
    /// Evaluating the expression failed: an unknown variable, a missing key, a type error...
    #[error("condition \"{}\" could not be evaluated: {message}", shown(.condition))]
    Evaluate {
        /// The condition, as written (trimmed, on one line).
        condition: String,
        /// What went wrong.
        message: String,
    },
    /// The expression evaluated to something other than a boolean.
    #[error("condition \"{}\" evaluated to {got}, not a boolean", shown(.condition))]
    NotBoolean {
        /// The condition, as written (trimmed, on one line).
        condition: String,
        /// The type and (for scalars) the value it evaluated to, e.g. `int 2`.
        got: String,
    },
}

/// Conditions longer than this are shown shortened in messages.
const SHOWN_LENGTH: usize = 200;

/// A condition as messages show it: whole when short, else its beginning and its size (the whole
/// text stays in [`ConditionError::condition`]).
pub fn shown(condition: &str) -> String {
    if condition.len() <= SHOWN_LENGTH {
        return condition.to_string();
    }
    let mut end = SHOWN_LENGTH;
    while !condition.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &condition[..end], condition.len())
}

impl ConditionError {
    /// The condition the error is about, as written (trimmed, on one line).
    pub fn condition(&self) -> &str {
        match self {
            Self::Parse { condition, .. }
            | Self::Evaluate { condition, .. }
            | Self::NotBoolean { condition, .. } => condition,
        }
    }
}

/// Normalises a condition's text before parsing.
///
/// - Surrounding whitespace is trimmed.
/// - If the whole text is one quoted string (`"x == 1"` or `'x == 1'`), the quotes are removed
///   and the quote character escaped inside (`\"`) and `\\` are unescaped.
/// - Outside string literals, JavaScript's `===` and `!==` become `==` and `!=`.
/// - Outside string literals, a template reference `{{ a.b }}` becomes its trimmed inner text
///   `a.b`; an inner text that is more than a dotted name (`{{ a + b }}`) is put in parentheses.
pub fn prepare(text: &str) -> String {
    let text = text.trim();
    let unquoted = strip_whole_quotes(text);
    rewrite_operators_and_templates(&unquoted).trim().to_owned()
}

/// Whether a condition is "simple": deterministic, so that its edge may be taken automatically.
///
/// A condition is not simple when its text contains `tool`, `external`, `api` or `call`
/// (case-sensitive substrings, as in the original tool: `capital` counts as `api`).
pub fn is_simple(text: &str) -> bool {
    !NON_SIMPLE_WORDS.iter().any(|word| text.contains(word))
}

/// Evaluates a condition against `variables`, each top-level key being a CEL variable.
///
/// A blank condition holds. To evaluate the same condition repeatedly, compile it once with
/// [`CompiledCondition::compile`].
pub fn evaluate(text: &str, variables: &Map<String, JsonValue>) -> Result<bool, ConditionError> {
    CompiledCondition::compile(text)?.evaluate(variables)
}

/// A parsed condition, ready to be evaluated against any number of contexts.
///
/// Cloning is cheap (the expression is shared).
#[derive(Debug, Clone)]
pub struct CompiledCondition {
    /// The condition as written (trimmed, on one line), for error messages.
    text: String,
    /// The expression; `None` for a blank condition, which always holds.
    expression: Option<Arc<IdedExpr>>,
    /// The names the expression refers to as variables: only the context keys whose first
    /// dot-separated segment is one of them are bound.
    references: Box<[String]>,
}

impl CompiledCondition {
    /// Prepares (see [`prepare`]) and parses a condition.
    pub fn compile(text: &str) -> Result<Self, ConditionError> {
        Self::compile_prepared(text, prepare(text))
    }

    /// Parses an expression that is not a whole condition, such as the inside of a `{{ template }}`
    /// in a label: prepared like a condition, except that a text quoted as a whole stays a string
    /// literal (`'draft'` is the string `draft`, not the variable `draft`).
    pub fn compile_expression(text: &str) -> Result<Self, ConditionError> {
        let prepared = rewrite_operators_and_templates(text.trim())
            .trim()
            .to_owned();
        Self::compile_prepared(text, prepared)
    }

    /// Parses `prepared`, the prepared form of `text`.
    fn compile_prepared(text: &str, prepared: String) -> Result<Self, ConditionError> {
        let shown = one_line(text);
        if prepared.is_empty() {
            return Ok(Self {
                text: shown,
                expression: None,
                references: Box::default(),
            });
        }
        let parse_error = |message: String| {
            // Positions refer to the prepared text: show it when it differs.
            let message = if prepared == text.trim() {
                message
            } else {
                format!("{message} (read as \"{}\")", one_line(&prepared))
            };
            ConditionError::Parse {
                condition: shown.clone(),
                message,
            }
        };
        check_limits(&prepared).map_err(|e| parse_error(e.to_string()))?;
        let parsed = quietly(|| CEL.env.parser().parse(&prepared))
            .map_err(|panic| parse_error(format!("the CEL parser failed ({panic})")))?;
        let mut expression =
            parsed.map_err(|errors| parse_error(describe_parse_errors(&errors)))?;
        if CEL.arithmetic {
            bridge_arithmetic(&mut expression);
        }
        let references = expression
            .references()
            .variables()
            .into_iter()
            .map(str::to_owned)
            .collect();
        Ok(Self {
            text: shown,
            expression: Some(Arc::new(expression)),
            references,
        })
    }

    /// The condition as written (trimmed, on one line).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The names the expression refers to as variables (the first segment of a dotted name):
    /// the only keys of a context it reads.
    pub fn references(&self) -> &[String] {
        &self.references
    }

    /// Evaluates the condition against `variables`, each top-level key being a CEL variable.
    pub fn evaluate(&self, variables: &Map<String, JsonValue>) -> Result<bool, ConditionError> {
        match self.resolve(variables)? {
            None => Ok(true),
            Some(Value::Bool(holds)) => Ok(holds),
            Some(other) => Err(ConditionError::NotBoolean {
                condition: self.text.clone(),
                got: describe_value(&other),
            }),
        }
    }

    /// Evaluates the expression against `variables` for its value, whatever its type: what a
    /// `{{ template }}` in a diagram label shows. A blank expression is `null`.
    ///
    /// The value comes back as JSON: integers as integers, doubles as numbers (an infinite or
    /// NaN double as `null`), bytes as a string (lossily), maps with their keys sorted (CEL maps
    /// have no order), and durations, timestamps and other CEL-only values as the name of their
    /// type.
    pub fn value(&self, variables: &Map<String, JsonValue>) -> Result<JsonValue, ConditionError> {
        Ok(self
            .resolve(variables)?
            .map_or(JsonValue::Null, |value| val_to_json(&value)))
    }

    /// The literals the expression holds (numbers, strings, booleans, `null`), as JSON, in the
    /// order they are written, each once.
    pub fn literals(&self) -> Vec<JsonValue> {
        let mut out: Vec<JsonValue> = Vec::new();
        let mut stack: Vec<&IdedExpr> = self.expression.iter().map(|e| &**e).collect();
        while let Some(expression) = stack.pop() {
            if let Expr::Literal(literal) = &expression.expr {
                let value = Value::try_from(literal.to_val().as_ref()).map(|v| val_to_json(&v));
                if let Ok(value) = value
                    && !out.contains(&value)
                {
                    out.push(value);
                }
            }
            // Reversed, so that the first operand is looked at first.
            stack.extend(operands(expression).into_iter().rev());
        }
        out
    }

    /// The expression's value (`None` for a blank condition).
    fn resolve(&self, variables: &Map<String, JsonValue>) -> Result<Option<Value>, ConditionError> {
        let Some(expression) = &self.expression else {
            return Ok(None);
        };
        let outcome = quietly(|| {
            let mut context = Context::with_env(Arc::clone(&CEL.env));
            for (key, value) in variables {
                let first = key.split('.').next().unwrap_or(key);
                if self.references.iter().any(|name| name == first) {
                    context.add_variable_as_val(key.as_str(), json_to_val(value));
                }
            }
            // `resolve`, not the `#[inline(always)]` `resolve_val`: that one would be compiled
            // into this crate, with this crate's optimisation level, and its recursive frames
            // are then far larger (about 30 KiB each in a debug build).
            Value::resolve(expression, &context).map_err(|error| describe_execution_error(&error))
        });
        match outcome {
            Ok(Ok(value)) => Ok(Some(value)),
            Ok(Err(message)) => Err(ConditionError::Evaluate {
                condition: self.text.clone(),
                message,
            }),
            Err(panic) => Err(ConditionError::Evaluate {
                condition: self.text.clone(),
                message: format!("the CEL evaluator failed ({panic})"),
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Preparing the text

/// The text without the quotes around it, when it is one quoted string as a whole.
fn strip_whole_quotes(text: &str) -> std::borrow::Cow<'_, str> {
    let bytes = text.as_bytes();
    let Some(&quote) = bytes.first() else {
        return text.into();
    };
    let single = quote == b'"' || quote == b'\'';
    let triple = bytes.get(..3) == Some(&[quote; 3][..]);
    if !single || triple || bytes.len() < 2 || literal_end(text, 0) != (bytes.len(), true) {
        return text.into();
    }
    // The literal ends at the last byte, which is therefore the closing quote.
    let inner = &text[1..text.len() - 1];
    if !inner.contains('\\') {
        return inner.into();
    }
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(next) if next == char::from(quote) || next == '\\' => out.push(next),
                Some(next) => {
                    out.push('\\');
                    out.push(next);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// Whether the byte before `start` makes the literal starting there a raw string (`r"..."`,
/// `br"..."`), in which backslashes escape nothing.
fn is_raw(bytes: &[u8], start: usize) -> bool {
    let before = |back: usize| start.checked_sub(back).and_then(|i| bytes.get(i)).copied();
    let is_ident = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
    match before(1) {
        Some(b'r' | b'R') => match before(2) {
            Some(b'b' | b'B') => !is_ident(before(3)),
            other => !is_ident(other),
        },
        _ => false,
    }
}

/// The byte just past the string literal whose opening quote is at byte `start`, and whether
/// the literal is closed (when it is not, the end of the text).
fn literal_end(text: &str, start: usize) -> (usize, bool) {
    let bytes = text.as_bytes();
    let Some(&quote) = bytes.get(start) else {
        return (bytes.len(), false);
    };
    let raw = is_raw(bytes, start);
    let closing = [quote; 3];
    let triple = bytes.get(start..start + 3) == Some(&closing[..]);
    let mut i = start + if triple { 3 } else { 1 };
    while let Some(&b) = bytes.get(i) {
        if b == b'\\' && !raw {
            // The escaped byte is skipped; landing inside a multi-byte character is harmless as
            // only ASCII bytes are looked for.
            i += 2;
        } else if triple {
            if bytes.get(i..i + 3) == Some(&closing[..]) {
                return (i + 3, true);
            }
            i += 1;
        } else if b == quote {
            return (i + 1, true);
        } else {
            i += 1;
        }
    }
    (bytes.len(), false)
}

/// Rewrites `===`, `!==` and `{{ template }}` outside string literals.
fn rewrite_operators_and_templates(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while let Some(rest) = text.get(i..) {
        let Some(c) = rest.chars().next() else {
            break;
        };
        if c == '"' || c == '\'' {
            let (end, _) = literal_end(text, i);
            out.push_str(text.get(i..end).unwrap_or(rest));
            i = end;
        } else if rest.starts_with("===") {
            out.push_str("==");
            i += 3;
        } else if rest.starts_with("!==") {
            out.push_str("!=");
            i += 3;
        } else if let Some(after) = rest.strip_prefix("{{")
            && let Some(close) = after.find("}}")
        {
            let inner = after[..close].trim();
            let inner = inner.replace("!==", "!=").replace("===", "==");
            let is_name = inner
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.');
            if is_name {
                out.push_str(&inner);
            } else {
                out.push('(');
                out.push_str(&inner);
                out.push(')');
            }
            i += 2 + close + 2;
        } else {
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The text on one line (line breaks and the indentation after them become one space), trimmed.
fn one_line(text: &str) -> String {
    let text = text.trim();
    if !text.contains(['\n', '\r']) {
        return text.to_owned();
    }
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Why a condition is refused before it is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum TooLarge {
    #[error("it is longer than {MAX_LENGTH} bytes ({0} bytes)")]
    Length(usize),
    #[error("brackets are nested more than {MAX_NESTING} levels deep")]
    Nesting,
    #[error("it has more than {MAX_OPERATORS} operators (not counting `&&`, `||`, `!` and `?:`)")]
    Operators,
}

/// Refuses a text whose parsing or evaluation could overflow the stack (see the module docs).
fn check_limits(text: &str) -> Result<(), TooLarge> {
    if text.len() > MAX_LENGTH {
        return Err(TooLarge::Length(text.len()));
    }
    let bytes = text.as_bytes();
    let is_symbol = |b: &u8| b"+-*/%<>=!".contains(b);
    let is_word = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    let (mut depth, mut operators) = (0usize, 0usize);
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let operator = match b {
            b'"' | b'\'' => {
                i = literal_end(text, i).0;
                continue;
            }
            _ if is_symbol(&b) => {
                // A run of symbols is one operator (`==`, `<=`, `- -x`); a run of `!` alone is a
                // logical not, which does not nest.
                let run = bytes.get(i..).unwrap_or_default();
                let run = &run[..run.iter().take_while(|c| is_symbol(c)).count()];
                i += run.len();
                run.iter().any(|&c| c != b'!')
            }
            _ if is_word(&b) => {
                let word = bytes.get(i..).unwrap_or_default();
                let word = &word[..word.iter().take_while(|c| is_word(c)).count()];
                i += word.len();
                word == b"in"
            }
            _ => {
                match b {
                    b'(' | b'[' | b'{' => depth += 1,
                    b')' | b']' | b'}' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                if depth > MAX_NESTING {
                    return Err(TooLarge::Nesting);
                }
                i += 1;
                b == b'.' || b == b'['
            }
        };
        if operator {
            operators += 1;
            if operators > MAX_OPERATORS {
                return Err(TooLarge::Operators);
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The CEL environment and the arithmetic bridge

/// The environment every condition is parsed and evaluated with.
struct Cel {
    /// The standard CEL environment plus the arithmetic functions of this module.
    env: Arc<Env>,
    /// Whether the arithmetic functions are declared (they always are, unless `cel` refused).
    arithmetic: bool,
}

static CEL: LazyLock<Cel> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    let declared: [(&str, cel::common::functions::Function); 5] = [
        (ADD, arithmetic_add),
        (SUBTRACT, arithmetic_subtract),
        (MULTIPLY, arithmetic_multiply),
        (DIVIDE, arithmetic_divide),
        (MODULO, arithmetic_modulo),
    ];
    let arithmetic = declared.into_iter().all(|(name, function)| {
        env.add_overload(name, name, vec![DYN_TYPE, DYN_TYPE], function)
            .is_ok()
    });
    Cel {
        env: Arc::new(env),
        arithmetic,
    }
});

/// The functions the arithmetic operators are rewritten to. A name starting with `@` cannot be
/// written in CEL, so no condition can call them or clash with them.
const ADD: &str = "@dygram_add";
const SUBTRACT: &str = "@dygram_subtract";
const MULTIPLY: &str = "@dygram_multiply";
const DIVIDE: &str = "@dygram_divide";
const MODULO: &str = "@dygram_modulo";

/// Rewrites the arithmetic operators of `expression` to the functions of this module.
///
/// `_+_` with a list literal operand is kept: it cannot be numeric, and the comprehensions of
/// `map` and `filter` accumulate with `accu + [x]`, which `cel` recognises to append in place.
fn bridge_arithmetic(expression: &mut IdedExpr) {
    match &mut expression.expr {
        Expr::Call(call) => {
            if call.target.is_none() && call.args.len() == 2 {
                let has_list = call.args.iter().any(|a| matches!(a.expr, Expr::List(_)));
                let renamed = match call.func_name.as_str() {
                    operators::ADD if !has_list => Some(ADD),
                    operators::SUBSTRACT => Some(SUBTRACT),
                    operators::MULTIPLY => Some(MULTIPLY),
                    operators::DIVIDE => Some(DIVIDE),
                    operators::MODULO => Some(MODULO),
                    _ => None,
                };
                if let Some(name) = renamed {
                    name.clone_into(&mut call.func_name);
                }
            }
            if let Some(target) = &mut call.target {
                bridge_arithmetic(target);
            }
            call.args.iter_mut().for_each(bridge_arithmetic);
        }
        Expr::Comprehension(comprehension) => {
            bridge_arithmetic(&mut comprehension.iter_range);
            bridge_arithmetic(&mut comprehension.accu_init);
            bridge_arithmetic(&mut comprehension.loop_cond);
            bridge_arithmetic(&mut comprehension.loop_step);
            bridge_arithmetic(&mut comprehension.result);
        }
        Expr::List(list) => list.elements.iter_mut().for_each(bridge_arithmetic),
        Expr::Map(map) => map
            .entries
            .iter_mut()
            .for_each(|e| bridge_entry(&mut e.expr)),
        Expr::Struct(s) => s.entries.iter_mut().for_each(|e| bridge_entry(&mut e.expr)),
        Expr::Select(select) => bridge_arithmetic(&mut select.operand),
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
    }
}

/// The expressions `expression` is made of, in the order written.
fn operands(expression: &IdedExpr) -> Vec<&IdedExpr> {
    match &expression.expr {
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(&call.args)
            .collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => map
            .entries
            .iter()
            .flat_map(|e| entry_operands(&e.expr))
            .collect(),
        Expr::Struct(s) => s
            .entries
            .iter()
            .flat_map(|e| entry_operands(&e.expr))
            .collect(),
        Expr::Select(select) => vec![&select.operand],
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => Vec::new(),
    }
}

/// [`operands`] of the entry of a map or struct literal.
fn entry_operands(entry: &EntryExpr) -> Vec<&IdedExpr> {
    match entry {
        EntryExpr::StructField(field) => vec![&field.value],
        EntryExpr::MapEntry(entry) => vec![&entry.key, &entry.value],
    }
}

/// [`bridge_arithmetic`] for the entry of a map or struct literal.
fn bridge_entry(entry: &mut EntryExpr) {
    match entry {
        EntryExpr::StructField(field) => bridge_arithmetic(&mut field.value),
        EntryExpr::MapEntry(entry) => {
            bridge_arithmetic(&mut entry.key);
            bridge_arithmetic(&mut entry.value);
        }
    }
}

/// An arithmetic operator.
#[derive(Clone, Copy)]
enum Arithmetic {
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
}

impl Arithmetic {
    /// The operator's name in `cel`'s errors.
    fn name(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Subtract => "sub",
            Self::Multiply => "mul",
            Self::Divide => "div",
            Self::Modulo => "rem",
        }
    }
}

fn arithmetic_add<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    arithmetic(Arithmetic::Add, args)
}

fn arithmetic_subtract<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    arithmetic(Arithmetic::Subtract, args)
}

fn arithmetic_multiply<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    arithmetic(Arithmetic::Multiply, args)
}

fn arithmetic_divide<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    arithmetic(Arithmetic::Divide, args)
}

fn arithmetic_modulo<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    arithmetic(Arithmetic::Modulo, args)
}

/// The value of a number as a double, and whether it is a double.
fn as_number(value: &dyn Val) -> Option<(f64, bool)> {
    if let Some(d) = value.downcast_ref::<CelDouble>() {
        Some((*d.inner(), true))
    } else if let Some(i) = value.downcast_ref::<CelInt>() {
        Some((*i.inner() as f64, false))
    } else {
        value
            .downcast_ref::<CelUInt>()
            .map(|u| (*u.inner() as f64, false))
    }
}

/// `lhs op rhs`: in doubles when one operand is a double and the other a number (or for `%` on
/// two doubles), else exactly as CEL's operator.
fn arithmetic<'b, 'v>(
    op: Arithmetic,
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [lhs, rhs]: [CowVal<'b, 'v>; 2] = args
        .try_into()
        .map_err(|args: Vec<_>| ExecutionError::invalid_argument_count(2, args.len()))?;
    if let (Some((a, a_double)), Some((b, b_double))) =
        (as_number(lhs.as_ref()), as_number(rhs.as_ref()))
    {
        let mixed = a_double != b_double;
        let both_doubles = a_double && b_double;
        if mixed || (both_doubles && matches!(op, Arithmetic::Modulo)) {
            let result = match op {
                Arithmetic::Add => a + b,
                Arithmetic::Subtract => a - b,
                Arithmetic::Multiply => a * b,
                Arithmetic::Divide => a / b,
                Arithmetic::Modulo => a % b,
            };
            return Ok(CowVal::owned(CelDouble::from(result)));
        }
    }
    let unsupported = || {
        ExecutionError::UnsupportedBinaryOperator(
            op.name(),
            Value::try_from(lhs.as_ref()).unwrap_or(Value::Null),
            Value::try_from(rhs.as_ref()).unwrap_or(Value::Null),
        )
    };
    let rhs = rhs.as_ref();
    let result = match op {
        Arithmetic::Add => lhs.as_adder().ok_or_else(unsupported)?.add(rhs)?,
        Arithmetic::Subtract => lhs.as_subtractor().ok_or_else(unsupported)?.sub(rhs)?,
        Arithmetic::Multiply => lhs.as_multiplier().ok_or_else(unsupported)?.mul(rhs)?,
        Arithmetic::Divide => lhs.as_divider().ok_or_else(unsupported)?.div(rhs)?,
        Arithmetic::Modulo => lhs.as_modder().ok_or_else(unsupported)?.modulo(rhs)?,
    };
    Ok(CowVal::Owned(result.into_owned()))
}

// ---------------------------------------------------------------------------------------------
// Values and messages

/// A JSON value as a CEL value, borrowing its strings.
fn json_to_val(value: &JsonValue) -> Box<dyn Val + '_> {
    match value {
        JsonValue::Null => Box::new(CelNull),
        JsonValue::Bool(b) => Box::new(CelBool::from(*b)),
        JsonValue::Number(n) => match n.as_i64() {
            Some(i) => Box::new(CelInt::from(i)),
            None => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        JsonValue::String(s) => Box::new(CelString::from(s.as_str())),
        JsonValue::Array(items) => Box::new(CelList::from(
            items.iter().map(json_to_val).collect::<Vec<_>>(),
        )),
        JsonValue::Object(map) => Box::new(CelMap::from(
            map.iter()
                .map(|(k, v)| (CelMapKey::from(k.as_str()), json_to_val(v)))
                .collect::<HashMap<_, _>>(),
        )),
    }
}

/// A CEL value as JSON (see [`CompiledCondition::value`]).
fn val_to_json(value: &Value) -> JsonValue {
    match value {
        Value::Null => JsonValue::Null,
        Value::Bool(b) => JsonValue::Bool(*b),
        Value::Int(i) => JsonValue::from(*i),
        Value::UInt(u) => JsonValue::from(*u),
        Value::Float(f) => {
            serde_json::Number::from_f64(*f).map_or(JsonValue::Null, JsonValue::Number)
        }
        Value::String(s) => JsonValue::String(s.as_str().to_owned()),
        Value::Bytes(bytes) => JsonValue::String(String::from_utf8_lossy(bytes).into_owned()),
        Value::List(items) => JsonValue::Array(items.iter().map(val_to_json).collect()),
        Value::Map(map) => {
            let mut entries: Vec<(String, JsonValue)> = map
                .map
                .iter()
                .map(|(key, value)| (key_text(key), val_to_json(value)))
                .collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            JsonValue::Object(entries.into_iter().collect())
        }
        other => JsonValue::String(describe_value(other)),
    }
}

/// A CEL map key as a JSON object key.
fn key_text(key: &cel::objects::Key) -> String {
    match key {
        cel::objects::Key::Int(i) => i.to_string(),
        cel::objects::Key::Uint(u) => u.to_string(),
        cel::objects::Key::Bool(b) => b.to_string(),
        cel::objects::Key::String(s) => s.as_str().to_owned(),
    }
}

/// A value for a message: its type, and its value when it is a scalar (`int 2`).
fn describe_value(value: &Value) -> String {
    match value {
        Value::Int(i) => format!("int {i}"),
        Value::UInt(u) => format!("uint {u}"),
        Value::Float(f) => format!("double {f}"),
        Value::String(s) => format!("string {s:?}"),
        Value::Bool(b) => format!("bool {b}"),
        Value::Null => "null".to_owned(),
        Value::List(items) => format!("a list of {} items", items.len()),
        Value::Map(map) => format!("a map of {} entries", map.map.len()),
        Value::Bytes(bytes) => format!("{} bytes", bytes.len()),
        other => other.type_of().to_string(),
    }
}

/// `cel`'s message with a lower-case first letter, to follow a colon.
fn lower_first(message: &str) -> String {
    let mut chars = message.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// An evaluation error as one line.
fn describe_execution_error(error: &ExecutionError) -> String {
    one_line(&lower_first(&error.to_string()))
}

/// The syntax errors of a condition as one line: the first one, and how many others there are.
fn describe_parse_errors(errors: &ParseErrors) -> String {
    let Some(first) = errors.errors.first() else {
        return "it is not a valid CEL expression".to_owned();
    };
    let mut message = lower_first(&one_line(&first.msg));
    // ANTLR lists every token it would have accepted; past a handful, it is noise.
    if let Some(at) = message.find(" expecting {")
        && message[at..].matches(',').count() >= 6
    {
        message.truncate(at);
    }
    let (line, column) = first.pos;
    let place = if line > 1 {
        format!("line {line}, column {column}")
    } else {
        format!("column {column}")
    };
    let mut described = if column > 0 {
        format!("{message} at {place}")
    } else {
        message
    };
    match errors.errors.len() {
        0 | 1 => {}
        2 => described.push_str(" (and 1 more error)"),
        n => described.push_str(&format!(" (and {} more errors)", n - 1)),
    }
    described
}

// ---------------------------------------------------------------------------------------------
// Containing panics

thread_local! {
    /// Set while this module runs `cel` on this thread: the panic hook then stays silent.
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Installs, once, a panic hook that is silent while [`QUIET`] is set on the panicking thread
/// and calls the previous hook otherwise.
fn install_quiet_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !QUIET.try_with(Cell::get).unwrap_or(false) {
                previous(info);
            }
        }));
    });
}

/// A panic caught by [`quietly`]: its message, on one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("internal panic: {0}")]
struct Panicked(String);

/// Runs `f`, turning a panic into an error carrying its message, without printing it.
fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, Panicked> {
    install_quiet_hook();
    let was_quiet = QUIET.with(|q| q.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(was_quiet));
    result.map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown cause".to_owned());
        Panicked(one_line(&message))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn an_error_shows_a_long_condition_shortened() {
        let long: Vec<String> = (0..3000).map(|i| format!("order.total > {i}")).collect();
        let text = long.join(" && ");
        let e = evaluate(&text, &Map::new()).unwrap_err();
        let shown = e.to_string();
        assert!(shown.len() < 400, "{} bytes", shown.len());
        assert!(
            shown.starts_with("condition \"order.total > 0 && "),
            "{}",
            &shown[..100]
        );
        assert!(
            shown.contains(&format!("… ({} bytes)\"", text.len())),
            "{shown}"
        );
        assert!(shown.contains("could not be parsed"), "{shown}");
        // The whole text stays available.
        assert_eq!(e.condition(), text);
        // Short ones are shown whole.
        let e = evaluate("x > 1", &Map::new()).unwrap_err();
        assert!(e.to_string().starts_with("condition \"x > 1\" "), "{e}");
    }
    use serde_json::json;

    fn vars(value: JsonValue) -> Map<String, JsonValue> {
        match value {
            JsonValue::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    fn eval(text: &str, context: JsonValue) -> Result<bool, ConditionError> {
        evaluate(text, &vars(context))
    }

    fn holds(text: &str, context: JsonValue) -> bool {
        eval(text, context).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn prepare_trims_and_strips_surrounding_quotes() {
        assert_eq!(prepare("  x == 1 \n"), "x == 1");
        assert_eq!(prepare("\"x == 1\""), "x == 1");
        assert_eq!(prepare("'x == 1'"), "x == 1");
        assert_eq!(prepare("  ' x == 1 '  "), "x == 1");
        assert_eq!(prepare(r#""status == \"ok\"""#), r#"status == "ok""#);
        assert_eq!(prepare("\"\""), "");
    }

    #[test]
    fn prepare_keeps_quotes_that_do_not_wrap_the_whole_text() {
        assert_eq!(prepare(r#""a" == "b""#), r#""a" == "b""#);
        assert_eq!(prepare("'a' + x + 'b'"), "'a' + x + 'b'");
        assert_eq!(prepare(r#""unterminated"#), r#""unterminated"#);
        assert_eq!(prepare(r#"'''x'''"#), r#"'''x'''"#);
    }

    #[test]
    fn prepare_rewrites_strict_equality_outside_strings() {
        assert_eq!(prepare("x === 1"), "x == 1");
        assert_eq!(prepare("x !== 1"), "x != 1");
        assert_eq!(prepare("a===b && c!==d"), "a==b && c!=d");
        assert_eq!(prepare(r#"x === "a===b""#), r#"x == "a===b""#);
        assert_eq!(prepare(r#"x === 'it\'s !=='"#), r#"x == 'it\'s !=='"#);
        assert_eq!(prepare("x == 1"), "x == 1");
        assert_eq!(prepare("x != 1"), "x != 1");
    }

    #[test]
    fn prepare_replaces_templates() {
        assert_eq!(prepare("{{ Alert.count }} > 3"), "Alert.count > 3");
        assert_eq!(
            prepare("{{Alert.count}}>{{ Alert.threshold }}"),
            "Alert.count>Alert.threshold"
        );
        assert_eq!(prepare("{{ a + b }} * 2 > 3"), "(a + b) * 2 > 3");
        assert_eq!(prepare("'{{ x }}' == y"), "'{{ x }}' == y");
        assert_eq!(prepare("\"{{ x }} === 1\""), "x == 1");
        assert_eq!(prepare("{{ x > 1"), "{{ x > 1");
    }

    #[test]
    fn simple_conditions() {
        assert!(is_simple("errorCount == 0"));
        assert!(is_simple("Alert.count > 3"));
        assert!(!is_simple("tool.result == 'ok'"));
        assert!(!is_simple("external.ready"));
        assert!(!is_simple("api_status == 200"));
        assert!(!is_simple("callCount > 1"));
        assert!(
            !is_simple("capital == 'Paris'"),
            "substring, as the original"
        );
        assert!(is_simple("Tool == 1"), "case-sensitive");
        assert!(is_simple(""));
    }

    #[test]
    fn nested_context() {
        let ctx = json!({"Alert": {"count": 5, "threshold": 3, "nested": {"deep": true}}});
        assert!(holds("Alert.count > Alert.threshold", ctx.clone()));
        assert!(!holds("Alert.count < Alert.threshold", ctx.clone()));
        assert!(holds("Alert.nested.deep", ctx.clone()));
        assert!(holds("Alert['count'] == 5", ctx));
    }

    #[test]
    fn error_count_and_strings() {
        assert!(holds("errorCount == 0", json!({"errorCount": 0})));
        assert!(!holds("errorCount == 0", json!({"errorCount": 2})));
        assert!(holds(r#"status == "done""#, json!({"status": "done"})));
        assert!(holds("status == 'done'", json!({"status": "done"})));
        assert!(holds("status != 'done'", json!({"status": "failed"})));
        assert!(holds("name == 'héllo ✓'", json!({"name": "héllo ✓"})));
    }

    #[test]
    fn blank_condition_holds() {
        assert!(holds("", json!({})));
        assert!(holds("   \n ", json!({})));
        assert!(holds("''", json!({})));
    }

    #[test]
    fn the_literals_of_a_condition_are_listed_in_order_once() {
        let c = CompiledCondition::compile(
            r#"order.total > 10 && x2 === "it's" || size(s) >= 2.5 && t != 'no' && [10, true].size() > 0 && {{ n }} < 10"#,
        )
        .unwrap();
        assert_eq!(
            c.literals(),
            [
                json!(10),
                json!("it's"),
                json!(2.5),
                json!("no"),
                json!(true),
                json!(0)
            ]
        );
        assert!(
            CompiledCondition::compile("")
                .unwrap()
                .literals()
                .is_empty()
        );
    }

    #[test]
    fn missing_variable_is_an_evaluation_error() {
        let error = eval("x > 1", json!({})).unwrap_err();
        assert_eq!(
            error,
            ConditionError::Evaluate {
                condition: "x > 1".into(),
                message: "undeclared reference to 'x'".into()
            }
        );
        assert_eq!(
            error.to_string(),
            "condition \"x > 1\" could not be evaluated: undeclared reference to 'x'"
        );
        assert_eq!(error.condition(), "x > 1");
    }

    #[test]
    fn missing_key_is_an_evaluation_error() {
        let error = eval("Alert.missing > 1", json!({"Alert": {"count": 1}})).unwrap_err();
        assert!(
            matches!(&error, ConditionError::Evaluate { message, .. } if message.contains("missing")),
            "{error}"
        );
        // `has` tests for the key instead.
        assert!(!holds("has(Alert.missing)", json!({"Alert": {"count": 1}})));
        assert!(holds("has(Alert.count)", json!({"Alert": {"count": 1}})));
    }

    #[test]
    fn type_error_is_an_evaluation_error() {
        let ctx = json!({"Alert": {"service": "db"}});
        let error = eval("Alert.service > 1", ctx).unwrap_err();
        assert!(matches!(error, ConditionError::Evaluate { .. }), "{error}");
        assert!(!error.to_string().contains('\n'));
        let error = eval("'a' > 1", json!({})).unwrap_err();
        assert!(matches!(error, ConditionError::Evaluate { .. }), "{error}");
        let error = eval("!count", json!({"count": 1})).unwrap_err();
        assert!(matches!(error, ConditionError::Evaluate { .. }), "{error}");
    }

    #[test]
    fn non_boolean_result() {
        let error = eval("1 + 1", json!({})).unwrap_err();
        assert_eq!(
            error,
            ConditionError::NotBoolean {
                condition: "1 + 1".into(),
                got: "int 2".into()
            }
        );
        assert_eq!(
            error.to_string(),
            "condition \"1 + 1\" evaluated to int 2, not a boolean"
        );
        let error = eval("name", json!({"name": "x"})).unwrap_err();
        assert_eq!(
            error.to_string(),
            "condition \"name\" evaluated to string \"x\", not a boolean"
        );
        let error = eval("items", json!({"items": [1, 2]})).unwrap_err();
        assert!(error.to_string().contains("a list of 2 items"), "{error}");
        let error = eval("v", json!({"v": null})).unwrap_err();
        assert!(error.to_string().contains("evaluated to null"), "{error}");
    }

    #[test]
    fn garbage_is_a_parse_error() {
        let error = eval("x >>> (", json!({"x": 1})).unwrap_err();
        let ConditionError::Parse { condition, message } = &error else {
            panic!("not a parse error: {error}");
        };
        assert_eq!(condition, "x >>> (");
        assert_eq!(
            message,
            "syntax error: mismatched input '>' at column 4 (and 2 more errors)"
        );
        assert!(!error.to_string().contains('\n'));
        assert!(matches!(
            CompiledCondition::compile("a ==").unwrap_err(),
            ConditionError::Parse { .. }
        ));
    }

    #[test]
    fn parse_errors_show_the_prepared_text_when_it_differs() {
        let error = CompiledCondition::compile("{{ x }} >").unwrap_err();
        assert!(error.to_string().contains("(read as \"x >\")"), "{error}");
        let error = CompiledCondition::compile("x\n  >").unwrap_err();
        assert_eq!(error.condition(), "x >");
    }

    #[test]
    fn mixed_numeric_comparison() {
        assert!(holds("count > 3", json!({"count": 5.5})));
        assert!(!holds("count > 6", json!({"count": 5.5})));
        assert!(holds("ratio >= 1", json!({"ratio": 1.0})));
        assert!(holds("count == 5", json!({"count": 5.0})));
        assert!(holds("count != 4", json!({"count": 5.0})));
        assert!(holds("count < 3.5", json!({"count": 3})));
        assert!(holds("count == 3.0", json!({"count": 3})));
        assert!(holds("1 == 1.0", json!({})));
        assert!(holds("5 in values", json!({"values": [1.0, 5.0]})));
        assert!(holds("size(items) == 2.0", json!({"items": [1, 2]})));
        assert!(holds("a.x < b.y", json!({"a": {"x": 1}, "b": {"y": 1.5}})));
    }

    #[test]
    fn mixed_numeric_arithmetic() {
        assert!(holds("ratio * 100 > 50", json!({"ratio": 0.7})));
        assert!(holds("ratio * 100 == 70.0", json!({"ratio": 0.7})));
        assert!(holds("count + 0.5 == 5.5", json!({"count": 5})));
        assert!(holds("0.5 + count == 5.5", json!({"count": 5})));
        assert!(holds("count - 0.5 == 4.5", json!({"count": 5})));
        assert!(holds("count / 2.0 == 2.5", json!({"count": 5})));
        assert!(holds(
            "total / count > 1.2",
            json!({"total": 6.5, "count": 5})
        ));
        assert!(holds("value % 2 == 1.5", json!({"value": 5.5})));
        assert!(holds("value % 2.0 == 1.5", json!({"value": 5.5})));
        assert!(holds("-count + 1.5 < 0", json!({"count": 5})));
        assert!(holds("3u + 0.5 == 3.5", json!({})));
        // Within `map`, `filter`, `all` and `exists` too.
        assert!(holds(
            "xs.map(x, x * 1.5) == [1.5, 3.0]",
            json!({"xs": [1, 2]})
        ));
        assert!(holds("xs.exists(x, x + 0.5 > 2)", json!({"xs": [1, 2]})));
        assert!(holds(
            "xs.filter(x, x * 0.5 >= 1).size() == 1",
            json!({"xs": [1, 2]})
        ));
    }

    #[test]
    fn same_type_arithmetic_is_plain_cel() {
        assert!(holds("7 / 2 == 3", json!({})), "integer division");
        assert!(holds("count / 2 == 2", json!({"count": 5})));
        assert!(holds("count % 2 == 1", json!({"count": 5})));
        assert!(holds("1.5 * 2.0 == 3.0", json!({})));
        assert!(holds("name + '!' == 'hi!'", json!({"name": "hi"})));
        assert!(holds("xs + [3] == [1, 2, 3]", json!({"xs": [1, 2]})));
        assert!(holds("xs + ys == [1, 2]", json!({"xs": [1], "ys": [2]})));
        assert!(holds("1.0 / 0.0 > 1000000.0", json!({})));
        for (text, fragment) in [
            ("count / 0 > 1", "division by zero"),
            ("9223372036854775807 + count > 1", "overflow"),
            ("name - 1 > 0", "sub"),
            ("name * 2.5 > 0", "mul"),
            ("xs + 1.5 == []", "add"),
        ] {
            let error = eval(text, json!({"count": 1, "name": "a", "xs": [1]})).unwrap_err();
            let ConditionError::Evaluate { message, .. } = &error else {
                panic!("{text}: {error}");
            };
            assert!(
                message.to_lowercase().contains(fragment),
                "{text}: {message}"
            );
        }
    }

    #[test]
    fn numbers_from_json() {
        assert!(holds("big > 1.0e19", json!({"big": u64::MAX})));
        assert!(holds("neg == -3", json!({"neg": -3})));
        assert!(holds("x == 0.1 + 0.2", json!({"x": 0.1 + 0.2})));
    }

    #[test]
    fn lists_strings_and_logic() {
        let ctx = json!({
            "items": ["a", "b"],
            "empty": [],
            "name": "alpha-beta",
            "Ctx": {"field": 1, "flag": false, "none": null},
            "n": 3,
        });
        for text in [
            "size(items) > 0",
            "items.size() == 2",
            "size(empty) == 0",
            "'a' in items",
            "!('c' in items)",
            "has(Ctx.field)",
            "!has(Ctx.other)",
            "has(Ctx.none) && Ctx.none == null",
            "n > 1 && n < 5",
            "n > 5 || n == 3",
            "!Ctx.flag",
            "(n > 2 ? 'big' : 'small') == 'big'",
            "name.startsWith('alpha')",
            "name.endsWith('beta')",
            "name.contains('a-b')",
            "name.matches('^al.*ta$')",
            "size(name) == 10",
            "items.all(i, size(i) == 1)",
            "items.exists(i, i == 'b')",
            "items.exists_one(i, i == 'a')",
            "items[0] == 'a'",
            "'field' in Ctx",
            "type(n) == int",
            "string(n) == '3'",
            "double(n) / 2.0 == 1.5",
        ] {
            assert!(holds(text, ctx.clone()), "{text}");
        }
        assert!(!holds("n > 5 && missing", ctx.clone()), "short-circuit");
        assert!(holds("n == 3 || missing", ctx), "short-circuit");
    }

    #[test]
    fn templates_quotes_and_strict_equality_evaluate() {
        let ctx = json!({"Alert": {"count": 5}, "x": 1, "status": "ok"});
        assert!(holds("{{ Alert.count }} > 3", ctx.clone()));
        assert!(holds("\"x == 1\"", ctx.clone()));
        assert!(holds("'x == 1'", ctx.clone()));
        assert!(holds("x === 1", ctx.clone()));
        assert!(holds("x !== 2", ctx.clone()));
        assert!(holds("status === 'ok'", ctx.clone()));
        assert!(holds(r#""status === \"ok\"""#, ctx));
    }

    #[test]
    fn compiled_condition_is_reusable_and_shareable() {
        fn shareable<T: Send + Sync + Clone>() {}
        shareable::<CompiledCondition>();
        let compiled = CompiledCondition::compile("Alert.count > limit").unwrap();
        assert_eq!(compiled.text(), "Alert.count > limit");
        for (count, expected) in [(1, false), (5, true), (10, true)] {
            let ctx = vars(json!({"Alert": {"count": count}, "limit": 3, "other": [1, 2]}));
            assert_eq!(compiled.evaluate(&ctx).unwrap(), expected);
        }
        let clone = compiled.clone();
        assert!(
            clone
                .evaluate(&vars(json!({"Alert": {"count": 4}, "limit": 3})))
                .unwrap()
        );
        let blank = CompiledCondition::compile("  ").unwrap();
        assert!(blank.evaluate(&Map::new()).unwrap());
    }

    #[test]
    fn expressions_keep_a_quoted_text_a_string_and_give_any_value() {
        let vars = vars(json!({"n": 7, "cfg": {"b": 1, "a": [2.5]}}));
        let value = |text: &str| {
            CompiledCondition::compile_expression(text)
                .unwrap()
                .value(&vars)
        };
        assert_eq!(value("'draft'").unwrap(), json!("draft"));
        assert_eq!(value("n / 2").unwrap(), json!(3));
        assert_eq!(value("n / 2.0").unwrap(), json!(3.5));
        assert_eq!(value("cfg").unwrap(), json!({"a": [2.5], "b": 1}));
        assert_eq!(value("1.0 / 0.0").unwrap(), json!(null));
        assert_eq!(value("size(cfg.a) == 1").unwrap(), json!(true));
        assert!(matches!(
            value("missing"),
            Err(ConditionError::Evaluate { .. })
        ));
        // As a condition, a text quoted as a whole is unquoted first.
        let condition = CompiledCondition::compile("'n > 1'").unwrap();
        assert_eq!(condition.value(&vars).unwrap(), json!(true));
        assert_eq!(condition.references(), ["n".to_string()]);
    }

    #[test]
    fn context_keys_with_dots_are_variables_too() {
        assert!(holds("a.b == 1", json!({"a.b": 1})));
        assert!(holds("a.b == 2", json!({"a": {"b": 2}})));
    }

    #[test]
    fn limits_refuse_what_could_overflow_the_stack() {
        let deep = format!("{}1{} == 1", "(".repeat(500), ")".repeat(500));
        let error = eval(&deep, json!({})).unwrap_err();
        assert!(
            matches!(&error, ConditionError::Parse { message, .. } if message.contains("nested")),
            "{error}"
        );
        let chain = vec!["x"; 5000].join("+") + " > 0";
        let error = eval(&chain, json!({"x": 1})).unwrap_err();
        assert!(
            matches!(&error, ConditionError::Parse { message, .. } if message.contains("operators")),
            "{error}"
        );
        let long = format!("'{}' == x", "a".repeat(MAX_LENGTH));
        let error = eval(&long, json!({"x": 1})).unwrap_err();
        assert!(
            matches!(&error, ConditionError::Parse { message, .. } if message.contains("longer")),
            "{error}"
        );
        // Up to the limits, it works (on a test thread's 2 MiB stack): `MAX_OPERATORS` counts
        // each `+` and the `>`.
        let nested = format!(
            "{}{}{} > 0",
            "(".repeat(MAX_NESTING),
            vec!["x"; MAX_OPERATORS + 1].join(" + "),
            ")".repeat(MAX_NESTING)
        );
        let error = eval(&nested, json!({"x": 1}));
        assert!(
            matches!(&error, Err(ConditionError::Parse { message, .. }) if message.contains("operators")),
            "{error:?}"
        );
        let nested = format!(
            "{}{}{} > 0",
            "(".repeat(MAX_NESTING),
            vec!["x"; MAX_OPERATORS].join(" + "),
            ")".repeat(MAX_NESTING)
        );
        assert!(holds(&nested, json!({"x": 1})));
        let selects = format!("a{} == 1", ".a".repeat(MAX_OPERATORS - 1));
        let mut value = json!(1);
        for _ in 0..MAX_OPERATORS - 1 {
            value = json!({ "a": value });
        }
        assert!(holds(&selects, json!({ "a": value })));
        let flags = vec!["flag"; 1000].join(" && ") + " && !!!!flag";
        assert!(
            holds(&flags, json!({"flag": true})),
            "`&&` and `!` are not counted"
        );
        let string_operators = format!("x == '{}'", "+(".repeat(1000));
        assert!(
            !holds(&string_operators, json!({"x": "y"})),
            "strings are not counted"
        );
    }

    #[test]
    fn malformed_inputs_never_panic() {
        let mut inputs: Vec<String> = [
            "(",
            ")",
            "((x)",
            "(x))",
            "[1, 2",
            "{'a': }",
            "x >>> (",
            "x ? : y",
            "é > 1",
            "x == 'unterminated",
            "x == \"unterminated",
            "\u{0}",
            "\u{feff}x > 1",
            "🙂 == 1",
            "x.🙂",
            "`x` == 1",
            "x.?y",
            "has(x)",
            "a..b",
            "1 +",
            "9223372036854775808 > 1",
            "1e999 > 1",
            "'\\u12' == x",
            "{{ }}",
            "{{{{ x }}}}",
            "'''",
            "r'\\'",
            "x == b'\\xff'",
            "{null: 1}",
            "{1: 1, 1: 2}",
            "int(1e30) > 1",
            "'a'.matches('[')",
            "timestamp('bad') > timestamp('bad')",
            "duration('x') > duration('1s')",
            "[1, 2][5] == 1",
            "[1, 2][-1] == 1",
            "{'a': 1}[1.5] == 1",
            "dyn(1) + 'a'",
            "x.all(y, y.all(z, z))",
            "-9223372036854775808 - 1 < 0",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        inputs.push("(".repeat(500));
        inputs.push(format!("{}x{}", "(".repeat(500), ")".repeat(500)));
        inputs.push(format!("{}x", "!".repeat(3000)));
        inputs.push(format!("{}x", "-".repeat(3000)));
        inputs.push(vec!["x"; 3000].join(" && "));
        inputs.push(vec!["x"; 3000].join(" == "));
        inputs.push(format!("x{}", ".y".repeat(3000)));
        inputs.push(format!("x{}", "[0]".repeat(3000)));
        inputs.push(format!("{}1", "true ? 1 : ".repeat(3000)));
        inputs.push("x".repeat(100_000));
        inputs.push("é".repeat(10_000));
        let ctx = vars(json!({"x": [1, 2], "y": {"z": "é"}}));
        for input in &inputs {
            let result = evaluate(input, &ctx);
            if let Err(error) = &result {
                assert!(!error.to_string().contains('\n'), "{error}");
            }
        }
    }

    #[test]
    fn panics_are_caught_without_printing() {
        let result: Result<(), Panicked> = quietly(|| panic!("boom\nsecond line"));
        assert_eq!(
            result.unwrap_err().to_string(),
            "internal panic: boom second line"
        );
        assert_eq!(quietly(|| 42).unwrap(), 42);
        assert!(!QUIET.with(Cell::get), "restored");
    }
}
