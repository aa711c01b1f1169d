//! The tool message the model sees after a tool ran.

use std::time::Duration;

/// Characters of each stream shown to the model (everything is kept in `io/tool_executions/`).
pub const STREAM_LIMIT: usize = 5000;

fn section(text: &str, truncated_note: &str) -> String {
    let total = text.chars().count();
    if total <= STREAM_LIMIT {
        return text.to_string();
    }
    let head: String = text.chars().take(STREAM_LIMIT).collect();
    format!("{head}\n\n[{truncated_note} - {total} total characters]")
}

/// How a tool run ended, for the observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited.
    Exited,
    /// It was killed at its deadline.
    TimedOut(Duration),
    /// It was killed because the run was interrupted.
    Interrupted,
}

/// Formats an observation:
///
/// ```text
/// === STDOUT ===
/// <stdout, at most 5000 characters, then "[Output truncated - N total characters]">
/// === STDERR ===
/// <stderr, likewise>
/// === EXIT CODE: n ===
/// (Command executed with no output)        when both streams are empty
/// ```
pub fn format(stdout: &str, stderr: &str, exit_code: i32, ending: Ending) -> String {
    let mut lines: Vec<String> = Vec::new();
    if !stdout.is_empty() {
        lines.push("=== STDOUT ===".into());
        lines.push(section(stdout, "Output truncated"));
    }
    if !stderr.is_empty() {
        lines.push("=== STDERR ===".into());
        lines.push(section(stderr, "Error output truncated"));
    }
    match ending {
        Ending::Exited => {}
        Ending::TimedOut(after) => lines.push(format!(
            "=== TIMED OUT after {} s: the tool's process group was killed ===",
            after.as_secs_f64()
        )),
        Ending::Interrupted => lines.push(
            "=== INTERRUPTED: the run was stopped and the tool's process group was killed; \
             it may or may not have taken effect ==="
                .into(),
        ),
    }
    lines.push(format!("=== EXIT CODE: {exit_code} ==="));
    if stdout.is_empty() && stderr.is_empty() {
        lines.push("(Command executed with no output)".into());
    }
    lines.join("\n")
}

/// A one-line preview for the console: ANSI stripped, newlines as spaces, at most 80 characters.
pub fn preview(stdout: &str, stderr: &str) -> Option<String> {
    let source = if stdout.trim().is_empty() {
        stderr
    } else {
        stdout
    };
    let text = strip_ansi(source).replace(['\n', '\r'], " ");
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    Some(if text.chars().count() > 80 {
        format!("{}...", text.chars().take(77).collect::<String>())
    } else {
        text.to_string()
    })
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for n in chars.by_ref() {
                if n.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_documented_shapes() {
        assert_eq!(
            format("hi there\n", "", 0, Ending::Exited),
            "=== STDOUT ===\nhi there\n\n=== EXIT CODE: 0 ==="
        );
        assert_eq!(
            format("hello file", "", 0, Ending::Exited),
            "=== STDOUT ===\nhello file\n=== EXIT CODE: 0 ==="
        );
        assert_eq!(
            format("", "", 1, Ending::Exited),
            "=== EXIT CODE: 1 ===\n(Command executed with no output)"
        );
        let long = "a".repeat(6001);
        let obs = format(&long, "err\n", 3, Ending::Exited);
        assert!(obs.ends_with("aaaa\n\n[Output truncated - 6001 total characters]\n=== STDERR ===\nerr\n\n=== EXIT CODE: 3 ==="));
        let kept = obs.split("\n\n[Output truncated").next().unwrap();
        assert_eq!(kept, format!("=== STDOUT ===\n{}", "a".repeat(5000)));
    }

    #[test]
    fn timeouts_and_interruptions_are_said() {
        let obs = format("", "", 143, Ending::TimedOut(Duration::from_secs(2)));
        assert!(obs.contains("TIMED OUT after 2 s"), "{obs}");
        assert!(format("", "", 137, Ending::Interrupted).contains("INTERRUPTED"));
    }

    #[test]
    fn previews_are_short_single_lines() {
        assert_eq!(
            preview("\u{1b}[31mred\u{1b}[0m\nline", ""),
            Some("red line".into())
        );
        assert_eq!(preview("", "only err"), Some("only err".into()));
        assert_eq!(preview(" ", ""), None);
        let p = preview(&"x".repeat(100), "").unwrap();
        assert_eq!(p.len(), 80);
        assert!(p.ends_with("..."));
    }
}
