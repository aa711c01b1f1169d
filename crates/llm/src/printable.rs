//! Showing text a server sent, safely: what ends up in an error message is printed on a terminal.

/// Characters that would change how a terminal shows what follows them: C0 and C1 controls (escape
/// sequences, bells, carriage returns), DEL, and the Unicode bidirectional controls (which can make
/// text read differently from what it is).
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}')
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// `text` on one line with every control character written as an escape (`\n`, `\x1b`, `\u{202e}`)
/// and at most `max_chars` characters of it, followed by `… (N bytes in all)` when it was cut.
pub fn printable(text: &str, max_chars: usize) -> String {
    shown(text, max_chars, text.len())
}

/// [`printable`] of `text`, a prefix of something `total` bytes long.
fn shown(text: &str, max_chars: usize, total: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars + 32));
    let mut chars = text.chars();
    for c in chars.by_ref().take(max_chars) {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_unsafe(c) && (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if is_unsafe(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    if chars.next().is_some() || text.len() < total {
        out.push_str(&format!("… ({total} bytes in all)"));
    }
    out
}

/// `text` as it may be shown on a terminal: line breaks and tabs kept, every other control character
/// (and the bidirectional controls) written as an escape, so text from a model or a server can never
/// move the cursor, change colours or the window title. Borrowed when there was nothing to escape.
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe(c) && c != '\n' && c != '\t') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            c if is_unsafe(c) && (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if is_unsafe(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// [`printable`] for bytes that may not be UTF-8 (invalid sequences become `�`); only the start that
/// can be shown is converted, and the size given is that of `bytes`.
pub fn printable_bytes(bytes: &[u8], max_chars: usize) -> String {
    // A character is at most four bytes: this prefix holds every character that can be shown.
    let prefix = &bytes[..bytes
        .len()
        .min(max_chars.saturating_mul(4).saturating_add(4))];
    shown(&String::from_utf8_lossy(prefix), max_chars, bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_long_text_is_cut() {
        assert_eq!(
            printable("a\u{1b}[2Jb\u{7}\n\u{9b}\u{202e}x\u{7f}", 100),
            "a\\x1b[2Jb\\x07\\n\\u{9b}\\u{202e}x\\x7f"
        );
        assert_eq!(printable("héllo wörld", 5), "héllo… (13 bytes in all)");
        assert_eq!(printable("short", 5), "short");
        assert_eq!(printable_bytes(b"ok\xff", 10), "ok\u{fffd}");
        assert_eq!(
            printable_bytes(&[b'a'; 100_000], 3),
            "aaa… (100000 bytes in all)"
        );
        assert_eq!(
            terminal_safe("a\n\tb\u{1b}]0;title\u{7}\r\u{202e}"),
            "a\n\tb\\x1b]0;title\\x07\\x0d\\u{202e}"
        );
        assert!(matches!(
            terminal_safe("plain\ntext"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
