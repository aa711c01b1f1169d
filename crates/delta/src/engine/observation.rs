//! The tool message the model sees after a tool ran.

use std::time::Duration;

use crate::process::MAX_CAPTURE;

/// Characters of each stream shown to the model (everything is kept in `io/tool_executions/`).
pub const STREAM_LIMIT: usize = 5000;

fn section(text: &str, truncated_note: &str, dropped: u64) -> String {
    let total = text.chars().count();
    if total <= STREAM_LIMIT && dropped == 0 {
        return text.to_string();
    }
    let head: String = text.chars().take(STREAM_LIMIT).collect();
    if dropped == 0 {
        return format!("{head}\n\n[{truncated_note} - {total} total characters]");
    }
    format!(
        "{head}\n\n[{truncated_note} - {} total bytes: {total} characters kept, then {dropped} bytes past \
         the {} MiB a stream keeps were dropped]",
        text.len() as u64 + dropped,
        MAX_CAPTURE >> 20
    )
}

/// `text` as the model reads it: its first [`STREAM_LIMIT`] characters, then `[<note> - N total
/// characters]` when there was more.
pub fn clip(text: &str, note: &str) -> String {
    section(text, note, 0)
}

/// The line that ends a stream in its record (`stdout`) where its capture stopped: `dropped` more
/// bytes came and were not kept.
pub fn cut_mark(dropped: u64) -> String {
    format!(
        "\n[delta: the output was cut here; {dropped} more bytes past the {} MiB a stream keeps were \
         dropped]\n",
        MAX_CAPTURE >> 20
    )
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
///
/// `dropped` counts the bytes of each stream past what is kept ([`MAX_CAPTURE`]): a stream cut there
/// says how many bytes it had in all.
pub fn format(
    stdout: &str,
    stderr: &str,
    dropped: [u64; 2],
    exit_code: i32,
    ending: Ending,
) -> String {
    let mut lines: Vec<String> = Vec::new();
    if !stdout.is_empty() {
        lines.push("=== STDOUT ===".into());
        lines.push(section(stdout, "Output truncated", dropped[0]));
    }
    if !stderr.is_empty() {
        lines.push("=== STDERR ===".into());
        lines.push(section(stderr, "Error output truncated", dropped[1]));
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
            format("hi there\n", "", [0, 0], 0, Ending::Exited),
            "=== STDOUT ===\nhi there\n\n=== EXIT CODE: 0 ==="
        );
        assert_eq!(
            format("hello file", "", [0, 0], 0, Ending::Exited),
            "=== STDOUT ===\nhello file\n=== EXIT CODE: 0 ==="
        );
        assert_eq!(
            format("", "", [0, 0], 1, Ending::Exited),
            "=== EXIT CODE: 1 ===\n(Command executed with no output)"
        );
        let long = "a".repeat(6001);
        let obs = format(&long, "err\n", [0, 0], 3, Ending::Exited);
        assert!(obs.ends_with("aaaa\n\n[Output truncated - 6001 total characters]\n=== STDERR ===\nerr\n\n=== EXIT CODE: 3 ==="));
        let kept = obs.split("\n\n[Output truncated").next().unwrap();
        assert_eq!(kept, format!("=== STDOUT ===\n{}", "a".repeat(5000)));
    }

    #[test]
    fn a_stream_cut_at_the_capture_limit_says_how_much_it_had() {
        let obs = format("ab", "", [1000, 0], 0, Ending::Exited);
        assert!(
            obs.contains("[Output truncated - 1002 total bytes: 2 characters kept, then 1000 bytes past the 64 MiB a stream keeps were dropped]"),
            "{obs}"
        );
        assert!(cut_mark(1000).contains("1000 more bytes"));
    }

    #[test]
    fn timeouts_and_interruptions_are_said() {
        let obs = format(
            "",
            "",
            [0, 0],
            143,
            Ending::TimedOut(Duration::from_secs(2)),
        );
        assert!(obs.contains("TIMED OUT after 2 s"), "{obs}");
        assert!(format("", "", [0, 0], 137, Ending::Interrupted).contains("INTERRUPTED"));
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
