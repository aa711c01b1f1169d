//! Attribute values as the canonical JSON shows them, and the number rules behind them.
//!
//! DyGram's outputs follow JavaScript conventions: a string that reads as a number or boolean becomes
//! one, numbers print without a decimal point when they are whole, and so on. These helpers
//! reproduce exactly those conventions.

use serde_json::{Map, Value as Json};

use dygram_syntax::ast::{Primitive, Value};

/// Whitespace as JavaScript's `String.prototype.trim` sees it.
pub fn is_js_space(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t'
            | '\n'
            | '\r'
            | '\u{b}'
            | '\u{c}'
            | '\u{a0}'
            | '\u{feff}'
            | '\u{1680}'
            | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    )
}

/// `s.trim()` in JavaScript.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_space)
}

/// `Number(s)` in JavaScript, `None` for NaN. (An empty string gives `Some(0.0)`, as in JavaScript.)
pub fn js_number(s: &str) -> Option<f64> {
    let t = js_trim(s);
    if t.is_empty() {
        return Some(0.0);
    }
    for (prefix, radix) in [
        ("0x", 16),
        ("0X", 16),
        ("0o", 8),
        ("0O", 8),
        ("0b", 2),
        ("0B", 2),
    ] {
        if let Some(digits) = t.strip_prefix(prefix) {
            if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
                return None;
            }
            // Large literals lose precision as in JavaScript (through f64).
            let mut v = 0f64;
            for c in digits.chars() {
                v = v * f64::from(radix) + f64::from(c.to_digit(radix).unwrap_or(0));
            }
            return Some(v);
        }
    }
    let (sign, body) = match t.as_bytes()[0] {
        b'+' => (1.0, &t[1..]),
        b'-' => (-1.0, &t[1..]),
        _ => (1.0, t),
    };
    if body == "Infinity" {
        return Some(sign * f64::INFINITY);
    }
    // digits [. digits] [e [+-] digits], with at least one digit before or after the dot.
    let bytes = body.as_bytes();
    let mut i = 0;
    let int_digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    i += int_digits;
    let mut frac_digits = 0;
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        frac_digits = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        i += frac_digits;
    }
    if int_digits + frac_digits == 0 {
        return None;
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_digits = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        if exp_digits == 0 {
            return None;
        }
        i += exp_digits;
    }
    if i != bytes.len() {
        return None;
    }
    body.parse::<f64>().ok().map(|v| sign * v)
}

/// A number as JSON: whole numbers as integers, NaN and infinities as `null`.
pub fn number(v: f64) -> Json {
    if !v.is_finite() {
        return Json::Null;
    }
    if v == v.trunc() && v.abs() < 9_007_199_254_740_992.0 {
        // Exactly representable: print without a decimal point (and -0 as 0).
        return Json::from(v as i64);
    }
    serde_json::Number::from_f64(v).map_or(Json::Null, Json::Number)
}

/// `String(n)` in JavaScript.
pub fn js_number_to_string(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if v == 0.0 {
        return "0".into();
    }
    let sign = if v < 0.0 { "-" } else { "" };
    // Shortest round-trip digits and the decimal exponent, e.g. "1.5e-7".
    let sci = format!("{:e}", v.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i64;
    let n = exp.parse::<i64>().unwrap_or(0) + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let e = if e >= 0 {
            format!("+{e}")
        } else {
            e.to_string()
        };
        if k == 1 {
            format!("{digits}e{e}")
        } else {
            format!("{}.{}e{e}", &digits[..1], &digits[1..])
        }
    };
    format!("{sign}{body}")
}

/// Removes one leading and one trailing quote character (`"` or `'`), independently.
pub fn strip_quotes(s: &str) -> &str {
    let s = s.strip_prefix(['"', '\'']).unwrap_or(s);
    s.strip_suffix(['"', '\'']).unwrap_or(s)
}

/// Removes one leading and one trailing `"`.
pub fn strip_double_quotes(s: &str) -> &str {
    let s = s.strip_prefix('"').unwrap_or(s);
    s.strip_suffix('"').unwrap_or(s)
}

/// Removes an outer pair of the same quote character, if there is one.
pub fn strip_matching_quotes(s: &str) -> &str {
    for q in ['"', '\''] {
        if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
            return &s[1..s.len() - 1];
        }
    }
    s
}

/// The text of a single-token value: a string's decoded value, a name's or `#ref`'s text, or a
/// number as JavaScript prints it.
pub fn token_text(p: &Primitive) -> String {
    match p {
        Primitive::Str(s) => s.value.clone(),
        Primitive::Ident(t, _) | Primitive::ExtId(t, _) => t.clone(),
        Primitive::Number(raw, _) => {
            js_number(raw).map_or_else(|| raw.clone(), js_number_to_string)
        }
    }
}

/// The text-to-value rule: a text that does not start with a quote and reads as `true`, `false` or
/// a number becomes that; otherwise the text, with one leading and one trailing quote removed.
pub fn from_text(s: &str) -> Json {
    let quoted = s.starts_with(['"', '\'']);
    let cleaned = strip_quotes(s);
    if !quoted {
        match cleaned {
            "true" => return Json::Bool(true),
            "false" => return Json::Bool(false),
            _ => {}
        }
        if !js_trim(cleaned).is_empty()
            && let Some(v) = js_number(cleaned)
        {
            return number(v);
        }
    }
    Json::String(cleaned.to_string())
}

/// A single-token value as JSON.
pub fn primitive(p: &Primitive) -> Json {
    match p {
        Primitive::Number(raw, _) => js_number(raw).map_or(Json::Null, number),
        Primitive::Str(s) => from_text(&s.value),
        Primitive::Ident(t, _) | Primitive::ExtId(t, _) => from_text(t),
    }
}

/// An attribute value as JSON.
pub fn convert(value: &Value) -> Json {
    match value {
        Value::Primitive(p) => primitive(p),
        Value::Array(items, _) => Json::Array(items.iter().map(convert).collect()),
        Value::Object(attributes, _) => {
            let mut map = Map::new();
            for a in attributes {
                if let Some(v) = &a.value {
                    map.insert(a.name.text.clone(), convert(v));
                }
            }
            Json::Object(map)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_javascript_reads_them() {
        for (text, expected) in [
            (" 42", Some(42.0)),
            ("5.", Some(5.0)),
            (".5", Some(0.5)),
            ("-3", Some(-3.0)),
            ("1e5", Some(100000.0)),
            ("0x10", Some(16.0)),
            ("0b11", Some(3.0)),
            ("1.0.0", None),
            ("3px", None),
            ("NaN", None),
            ("-0x10", None),
            (".", None),
            ("1e", None),
            ("", Some(0.0)),
        ] {
            assert_eq!(js_number(text), expected, "{text:?}");
        }
        assert_eq!(js_number("Infinity"), Some(f64::INFINITY));
    }

    #[test]
    fn numbers_print_as_javascript_prints_them() {
        for (v, text) in [
            (1.0, "1"),
            (0.1, "0.1"),
            (1e21, "1e+21"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (123456.789, "123456.789"),
            (0.000001, "0.000001"),
            (-2.5, "-2.5"),
            (1e20, "100000000000000000000"),
        ] {
            assert_eq!(js_number_to_string(v), text);
        }
        assert_eq!(number(1.0), Json::from(1));
        assert_eq!(number(19.99), serde_json::json!(19.99));
        assert_eq!(number(f64::INFINITY), Json::Null);
    }

    #[test]
    fn texts_become_numbers_and_booleans_unless_quoted() {
        assert_eq!(from_text("42"), Json::from(42));
        assert_eq!(from_text("1.0.0"), Json::from("1.0.0"));
        assert_eq!(from_text("true"), Json::Bool(true));
        assert_eq!(from_text("True"), Json::from("True"));
        assert_eq!(from_text(""), Json::from(""));
        assert_eq!(from_text("'42'"), Json::from("42"));
        assert_eq!(from_text("say \"hi\""), Json::from("say \"hi"));
        assert_eq!(from_text("#ref"), Json::from("#ref"));
    }
}
