//! Inline Markdown to Graphviz's HTML subset: `**bold**`, `*italic*`, `~~strike~~`, `` `code` ``,
//! `[links](…)` and bare URLs/e-mail addresses (underlined). Text without Markdown characters is
//! only escaped.

/// The HTML for one line of text.
pub(super) fn to_html(text: &str) -> String {
    if !text.contains(['*', '_', '`', '#', '[', ']', '~']) {
        return escape_html(text);
    }
    let chars: Vec<char> = text.chars().collect();
    inline(&chars, 0)
}

const CODE_OPEN: &str = r##"<font face="monospace" color="#6C757D">"##;

fn is_punct(c: char) -> bool {
    c.is_ascii_punctuation()
}

fn inline(s: &[char], depth: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    let mut text = String::new();
    let flush = |text: &mut String, out: &mut String| {
        out.push_str(&escape_html(text));
        text.clear();
    };
    while i < s.len() {
        let c = s[i];
        let prev = if i == 0 { None } else { Some(s[i - 1]) };
        if c == '\\' && i + 1 < s.len() && is_punct(s[i + 1]) {
            text.push(s[i + 1]);
            i += 2;
            continue;
        }
        if c == '\n' {
            flush(&mut text, &mut out);
            out.push_str("<br/>");
            i += 1;
            continue;
        }
        if c == '`'
            && let Some((content, next)) = code_span(s, i)
        {
            flush(&mut text, &mut out);
            out.push_str(CODE_OPEN);
            out.push_str(&escape_html(&content));
            out.push_str("</font>");
            i = next;
            continue;
        }
        if depth < 8 {
            if (c == '[' || (c == '!' && s.get(i + 1) == Some(&'[')))
                && let Some((label, next)) = link(s, if c == '!' { i + 1 } else { i })
            {
                flush(&mut text, &mut out);
                if c == '!' {
                    let alt: String = label.iter().collect();
                    out.push_str(&escape_html(if alt.is_empty() { "[image]" } else { &alt }));
                } else {
                    out.push_str("<u>");
                    out.push_str(&inline(label, depth + 1));
                    out.push_str("</u>");
                }
                i = next;
                continue;
            }
            if matches!(c, '*' | '_' | '~')
                && let Some((tag, inner, next)) = emphasis(s, i)
            {
                flush(&mut text, &mut out);
                out.push_str(&format!("<{tag}>{}</{tag}>", inline(inner, depth + 1)));
                i = next;
                continue;
            }
        }
        if autolink_may_start(prev)
            && let Some(len) = url_len(&s[i..]).or_else(|| email_len(&s[i..]))
        {
            flush(&mut text, &mut out);
            let url: String = s[i..i + len].iter().collect();
            out.push_str(&format!("<u>{}</u>", escape_html(&url)));
            i += len;
            continue;
        }
        text.push(c);
        i += 1;
    }
    flush(&mut text, &mut out);
    out
}

/// A code span starting at `i` (a run of backticks): its content and the index after it.
fn code_span(s: &[char], i: usize) -> Option<(String, usize)> {
    let run = s[i..].iter().take_while(|c| **c == '`').count();
    let mut j = i + run;
    while j < s.len() {
        if s[j] == '`' {
            let close = s[j..].iter().take_while(|c| **c == '`').count();
            if close == run {
                let mut content: String = s[i + run..j]
                    .iter()
                    .map(|c| if *c == '\n' { ' ' } else { *c })
                    .collect();
                if content.len() >= 2
                    && content.starts_with(' ')
                    && content.ends_with(' ')
                    && !content.trim().is_empty()
                {
                    content = content[1..content.len() - 1].to_string();
                }
                return Some((content, j + close));
            }
            j += close;
        } else {
            j += 1;
        }
    }
    None
}

/// `[label](destination)` at `i`: the label and the index after it.
fn link(s: &[char], i: usize) -> Option<(&[char], usize)> {
    let mut depth = 0;
    let mut j = i;
    let close = loop {
        match s.get(j)? {
            '\\' => j += 1,
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    break j;
                }
            }
            _ => {}
        }
        j += 1;
    };
    if s.get(close + 1) != Some(&'(') {
        return None;
    }
    let mut k = close + 2;
    let mut parens = 0;
    while let Some(c) = s.get(k) {
        match c {
            '(' => parens += 1,
            ')' if parens == 0 => return Some((&s[i + 1..close], k + 1)),
            ')' => parens -= 1,
            '\n' => return None,
            _ => {}
        }
        k += 1;
    }
    None
}

/// Emphasis at `i` (`*`, `_` or `~` run): the tag, its content and the index after it.
fn emphasis(s: &[char], i: usize) -> Option<(&'static str, &[char], usize)> {
    let c = s[i];
    let run = s[i..].iter().take_while(|x| **x == c).count();
    let prev = if i == 0 { None } else { Some(s[i - 1]) };
    let next = s.get(i + run).copied();
    if next.is_none_or(char::is_whitespace) {
        return None;
    }
    if c == '_' && prev.is_some_and(char::is_alphanumeric) {
        return None;
    }
    if c == '~' && run > 2 {
        return None;
    }
    // Try the widest match first: strong (2), then emphasis (1).
    let widths: &[usize] = match (c, run) {
        ('~', 2) => &[2],
        ('~', _) => &[1],
        (_, 1) => &[1],
        _ => &[2, 1],
    };
    for &w in widths {
        let start = i + w;
        let mut j = start;
        while j < s.len() {
            if s[j] == '`'
                && let Some((_, next)) = code_span(s, j)
            {
                j = next;
                continue;
            }
            if s[j] == c {
                let close = s[j..].iter().take_while(|x| **x == c).count();
                let before = s[j - 1];
                let after = s.get(j + close).copied();
                let closes = !before.is_whitespace()
                    && j > start
                    && close >= w
                    && (c != '_' || !after.is_some_and(char::is_alphanumeric))
                    && (c != '~' || close == w);
                if closes {
                    let tag = match (c, w) {
                        ('~', _) => "s",
                        (_, 2) => "b",
                        _ => "i",
                    };
                    return Some((tag, &s[start..j], j + w));
                }
                j += close;
                continue;
            }
            j += 1;
        }
    }
    None
}

fn autolink_may_start(prev: Option<char>) -> bool {
    prev.is_none_or(|p| p.is_whitespace() || matches!(p, '(' | '*' | '_' | '~' | '"' | '\''))
}

/// The length of a bare URL at the start (`http://`, `https://`, `www.`), trailing punctuation
/// and unbalanced `)` excluded.
fn url_len(s: &[char]) -> Option<usize> {
    let starts = |p: &str| {
        p.chars().count() <= s.len()
            && s.iter()
                .zip(p.chars())
                .all(|(a, b)| a.eq_ignore_ascii_case(&b))
    };
    let prefix = ["https://", "http://", "www."]
        .into_iter()
        .find(|p| starts(p))?;
    let mut len = s
        .iter()
        .take_while(|c| !c.is_whitespace() && **c != '<')
        .count();
    loop {
        let last = s[..len].last().copied()?;
        if matches!(
            last,
            '?' | '!' | '.' | ',' | ':' | '*' | '_' | '~' | '\'' | '"'
        ) {
            len -= 1;
        } else if last == ')' {
            let open = s[..len].iter().filter(|c| **c == '(').count();
            let close = s[..len].iter().filter(|c| **c == ')').count();
            if close > open {
                len -= 1;
            } else {
                break;
            }
        } else {
            break;
        }
    }
    (len > prefix.len()).then_some(len)
}

/// The length of an e-mail address at the start.
fn email_len(s: &[char]) -> Option<usize> {
    let local = s
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-'))
        .count();
    if local == 0 || s.get(local) != Some(&'@') {
        return None;
    }
    let mut j = local + 1;
    let mut dots = 0;
    let mut label = 0;
    while let Some(c) = s.get(j) {
        if c.is_ascii_alphanumeric() || *c == '-' || *c == '_' {
            label += 1;
        } else if *c == '.' && label > 0 && s.get(j + 1).is_some_and(char::is_ascii_alphanumeric) {
            dots += 1;
            label = 0;
        } else {
            break;
        }
        j += 1;
    }
    let last = s[j - 1];
    (dots > 0 && label > 0 && last != '-' && last != '_').then_some(j)
}

/// Escapes text for HTML (and Graphviz's HTML-like labels): content and double-quoted attribute
/// values; control characters other than line breaks and tabs are dropped.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            // Control characters are not allowed in Graphviz's HTML labels.
            c if c.is_control() && !matches!(c, '\n' | '\t' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_graphviz_html() {
        assert_eq!(
            to_html("**Critical**: Run `npm test` *before*"),
            r##"<b>Critical</b>: Run <font face="monospace" color="#6C757D">npm test</font> <i>before</i>"##
        );
        assert_eq!(to_html("~~Old method~~ new"), "<s>Old method</s> new");
        assert_eq!(
            to_html("See [docs](https://x.y) & more"),
            "See <u>docs</u> &amp; more"
        );
        assert_eq!(
            to_html("Docs](https://api.example.com)"),
            "Docs](<u>https://api.example.com</u>)"
        );
        assert_eq!(to_html("snake_case_name"), "snake_case_name");
        assert_eq!(to_html("a < b"), "a &lt; b");
    }
}
