//! Tokens and literals of `.dy` source, and attribute values written so that their conversion to
//! JSON gives them back.

use std::collections::HashMap;

use serde_json::{Map, Value as Json};

use super::str_of;
use crate::values::{js_number, js_number_to_string, js_trim};
use dygram_syntax::lexer::{TokenKind, lex, unquote};

/// The kinds of the tokens of `text`, if it lexes without errors.
pub(super) fn token_kinds(text: &str) -> Option<Vec<TokenKind>> {
    let (tokens, errors) = lex(text);
    if !errors.is_empty() {
        return None;
    }
    Some(
        tokens
            .into_iter()
            .map(|t| t.kind)
            .filter(|k| *k != TokenKind::Eof)
            .collect(),
    )
}

/// Whether `text` is one token of the given kind (and nothing else).
pub(super) fn is_single(text: &str, kind: TokenKind) -> bool {
    token_kinds(text).is_some_and(|k| k == [kind])
}

/// A name that can be written bare (`[A-Za-z_][A-Za-z0-9_]*`, not a keyword).
pub(super) fn is_ident(text: &str) -> bool {
    is_single(text, TokenKind::Ident)
}

/// A dotted name whose parts are all plain names.
pub(super) fn is_qname(text: &str) -> bool {
    text.split('.').all(is_ident)
}

/// A number token that prints back as `text` (as labels and annotation parameters print it).
pub(super) fn is_canonical_number(text: &str) -> bool {
    is_single(text, TokenKind::Number)
        && js_number(text).map(js_number_to_string).as_deref() == Some(text)
}

/// A string literal whose value (after the lexer's unescaping) is `value`. Line breaks and tabs
/// are written as they are (strings may span lines).
pub(super) fn literal(value: &str) -> String {
    let quote = if value.contains('"') && !value.contains('\'') {
        '\''
    } else {
        '"'
    };
    let mut out = String::with_capacity(value.len() + 2);
    out.push(quote);
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\r' => out.push_str("\\r"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            '\0' => out.push_str("\\0"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

pub(super) fn starts_or_ends_with_quote(s: &str) -> bool {
    s.starts_with(['"', '\'']) || s.ends_with(['"', '\''])
}

/// A single token whose text is `s`: a name or a number when it can be one (and `quoted` is not
/// asked for), else a string. A lone `o` is quoted: `o-->` reads as an arrow.
pub(super) fn token(s: &str, quoted: bool) -> String {
    if !quoted && ((is_ident(s) && s != "o") || is_canonical_number(s)) {
        s.to_string()
    } else {
        literal(s)
    }
}

/// A token whose text, once one leading and one trailing quote are removed, is `s` (bare label
/// texts and annotation parameters).
pub(super) fn stripped_token(s: &str, quoted: bool) -> String {
    if starts_or_ends_with_quote(s) {
        literal(&format!("\"{s}\""))
    } else {
        token(s, quoted)
    }
}

/// A token whose text, once an outer pair of the same quote is removed, is `s` (`key: value`
/// label items).
pub(super) fn pair_token(s: &str, quoted: bool) -> String {
    let wrapped = ['"', '\'']
        .iter()
        .any(|q| s.len() >= 2 && s.starts_with(*q) && s.ends_with(*q));
    if wrapped {
        literal(&format!("\"{s}\""))
    } else {
        token(s, quoted)
    }
}

// ---- values ------------------------------------------------------------------------------------

/// Writes attribute values so that their JSON conversion gives them back, in the form their
/// declared type asks for (so that the checks the original passed pass again).
pub(super) struct Values<'v> {
    /// Attribute types of the nodes usable as types (`attr<Address>: { … }`), by node name.
    pub(super) node_types: &'v HashMap<&'v str, HashMap<&'v str, &'v str>>,
    /// Whether a string in a position the edge inference searches (not inside arrays) must get
    /// the extra quotes that hide it from it.
    pub(super) hide: &'v dyn Fn(&str) -> bool,
}

/// The base name of a type (`Array` in `Array<string>?`) and its first type argument.
pub(super) fn split_type(ty: &str) -> (&str, Option<&str>) {
    let base_end = ty.find(['<', '?']).unwrap_or(ty.len());
    let base = ty[..base_end].trim();
    let Some(open) = ty.find('<') else {
        return (base, None);
    };
    let inner = &ty[open + 1..];
    let mut depth = 0usize;
    for (i, c) in inner.char_indices() {
        match c {
            '<' => depth += 1,
            '>' if depth == 0 => return (base, Some(inner[..i].trim())),
            '>' => depth -= 1,
            ',' if depth == 0 => return (base, Some(inner[..i].trim())),
            _ => {}
        }
    }
    (base, None)
}

/// Types checked to hold strings (`""` is a literal union): numbers and booleans are written as
/// strings for them (the conversion turns them back).
pub(super) const STRING_TYPES: [&str; 9] = [
    "", "string", "String", "Date", "DateTime", "Duration", "UUID", "URL", "Url",
];

/// What the type check of a union compares with its literals: a string's value, else the text.
pub(super) fn checked_text(written: &str) -> String {
    if written.starts_with(['"', '\'']) {
        unquote(written)
    } else {
        written.to_string()
    }
}

pub(super) fn no_hiding(_: &str) -> bool {
    false
}

impl Values<'_> {
    /// A value whose JSON conversion is `v`, shaped for the declared type `ty`.
    pub(super) fn write(&self, v: &Json, ty: Option<&str>, searched: bool) -> String {
        let (base, element) = ty.map_or(("", None), split_type);
        let as_strings = ty.is_some() && STRING_TYPES.contains(&base);
        match v {
            Json::Null if as_strings => literal("Infinity"),
            Json::Null => "1e999".into(),
            Json::Bool(b) if as_strings => literal(&b.to_string()),
            Json::Bool(b) => b.to_string(),
            Json::Number(n) => {
                let (text, negative) = if let Some(u) = n.as_u64() {
                    (u.to_string(), false)
                } else if let Some(i) = n.as_i64() {
                    (i.to_string(), true)
                } else {
                    let f = n.as_f64().unwrap_or(0.0);
                    (js_number_to_string(f), f < 0.0)
                };
                // Numbers have no sign; a string reads back as the number it spells.
                if negative || as_strings {
                    literal(&text)
                } else {
                    text
                }
            }
            Json::String(s) => {
                if is_single(s, TokenKind::ExtId) {
                    return s.clone();
                }
                let converted = starts_or_ends_with_quote(s)
                    || s == "true"
                    || s == "false"
                    || (!js_trim(s).is_empty() && js_number(s).is_some());
                if converted || (searched && (self.hide)(s)) {
                    literal(&format!("'{s}'"))
                } else {
                    literal(s)
                }
            }
            Json::Array(items) => {
                let element = match base {
                    "Array" | "List" | "array" | "Set" => element,
                    _ => None,
                };
                let items: Vec<String> = items
                    .iter()
                    .map(|v| self.write(v, element, false))
                    .collect();
                format!("[{}]", items.join(", "))
            }
            Json::Object(entries) => {
                let fields = self.node_types.get(base);
                let entries: Vec<String> = entries
                    .iter()
                    .filter(|(k, _)| is_ident(k))
                    .map(|(k, v)| {
                        let ty = fields.and_then(|f| f.get(k.as_str()).copied());
                        format!("{k}: {};", self.write(v, ty, searched))
                    })
                    .collect();
                if entries.is_empty() {
                    "{}".into()
                } else {
                    format!("{{ {} }}", entries.join(" "))
                }
            }
        }
    }

    /// `name<Type>: value;`. `None` when it cannot be written: outside an attribute block, an
    /// attribute with neither type nor value would read as a node. `literals`: values used
    /// elsewhere that a literal union type must allow.
    pub(super) fn attribute(
        &self,
        a: &Map<String, Json>,
        in_attribute_block: bool,
        literals: &[String],
    ) -> Option<String> {
        let name = str_of(a, "name")?;
        let ty = str_of(a, "type");
        let v = a.get("value");
        if ty.is_none() && v.is_none() && !in_attribute_block {
            return None;
        }
        let written = v.map(|v| self.write(v, ty, true));
        let mut line = name.to_string();
        if let Some(ty) = ty {
            line.push('<');
            if ty.is_empty() {
                // A literal union (`'a' | 'b'`) serializes as "": write one that allows the
                // values it checks.
                let mut allowed: Vec<String> = Vec::new();
                for text in written
                    .iter()
                    .map(|w| checked_text(w))
                    .chain(literals.iter().cloned())
                {
                    if !allowed.contains(&text) {
                        allowed.push(text);
                    }
                }
                while allowed.len() < 2 {
                    allowed.push(allowed.first().cloned().unwrap_or_default());
                }
                let allowed: Vec<String> = allowed.iter().map(|t| literal(t)).collect();
                line.push_str(&allowed.join(" | "));
            } else {
                line.push_str(ty);
            }
            line.push('>');
        }
        if let Some(w) = written {
            line.push_str(": ");
            line.push_str(&w);
        }
        line.push(';');
        Some(line)
    }
}
