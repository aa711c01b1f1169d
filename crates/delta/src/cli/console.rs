//! Progress on stderr.

use delta::engine::{Observer, Progress};
use delta::events::HookStatus;
use serde_json::Value;

/// Prints engine progress on stderr.
#[derive(Debug, Default)]
pub struct Console {
    /// Show hook runs and other details.
    pub verbose: bool,
    /// Print nothing (`-q`).
    pub quiet: bool,
    /// stderr is a terminal: a wait is shown on one line, rewritten each second.
    pub tty: bool,
    /// A streamed answer is being printed (the line is open).
    streaming: bool,
    /// The wait line is on the screen.
    waiting: bool,
    /// Colours (`--color`, `NO_COLOR`, a terminal).
    paint: cli_edge::Paint,
}

/// How a line is coloured.
#[derive(Debug, Clone, Copy)]
enum Tone {
    Plain,
    Good,
    Bad,
    Warn,
    Strong,
}

impl Console {
    /// A console: details with `verbose`, nothing with `quiet`, waits shown on a terminal (`tty`).
    pub fn new(verbose: bool, quiet: bool, tty: bool) -> Self {
        Self {
            verbose,
            quiet,
            tty,
            paint: super::paint(),
            ..Self::default()
        }
    }

    /// Writes a line on stderr: its control characters escaped, then coloured by `tone`.
    fn say(&self, tone: Tone, text: &str) {
        let safe = llm::terminal_safe(text);
        let line = match tone {
            Tone::Plain => safe.into_owned(),
            Tone::Good => self.paint.green(&safe),
            Tone::Bad => self.paint.red(&safe),
            Tone::Warn => self.paint.yellow(&safe),
            Tone::Strong => self.paint.bold(&safe),
        };
        use std::io::Write;
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }

    /// Writes `text` on stderr as it is (no line break), control characters escaped.
    fn write(text: &str) {
        use std::io::Write;
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{}", llm::terminal_safe(text));
        let _ = err.flush();
    }

    /// Handles the events that print part of a line; `false` for the others, which print lines.
    fn partial(&mut self, event: &Progress) -> bool {
        match event {
            Progress::Waiting { seconds } => {
                if self.tty && !self.streaming {
                    Self::write(&format!("\r⏳ Waiting for the model... {seconds} s"));
                    self.waiting = true;
                }
                true
            }
            Progress::TextDelta(text) => {
                self.clear_wait();
                if !self.streaming {
                    Self::write("💭 ");
                    self.streaming = true;
                }
                Self::write(text);
                true
            }
            Progress::Thought(_) if self.streaming => {
                // Its text is on the screen already.
                Self::write("\n");
                self.streaming = false;
                true
            }
            _ => {
                self.clear_wait();
                if self.streaming {
                    Self::write("\n");
                    self.streaming = false;
                }
                false
            }
        }
    }

    /// Removes the wait line.
    fn clear_wait(&mut self) {
        if self.waiting {
            Self::write("\r\x1b[K");
            self.waiting = false;
        }
    }
}

fn short(value: &Value) -> String {
    match value {
        Value::String(s) if s.chars().count() > 40 => {
            format!(
                "\"{}...\"",
                s.chars().take(37).collect::<String>().replace('\n', " ")
            )
        }
        Value::String(s) => format!("\"{}\"", s.replace('\n', " ")),
        other => other.to_string(),
    }
}

/// `name(k="v", n=3)` for the console.
pub fn call_preview(name: &str, args: &Value) -> String {
    let parts: Vec<String> = args
        .as_object()
        .map(|o| o.iter().map(|(k, v)| format!("{k}={}", short(v))).collect())
        .unwrap_or_default();
    format!("{name}({})", parts.join(", "))
}

impl Observer for Console {
    fn progress(&mut self, event: Progress) {
        if self.quiet || self.partial(&event) {
            return;
        }
        match event {
            Progress::Iteration {
                n,
                max,
                run_iteration,
            } => self.say(
                Tone::Strong,
                &if run_iteration == u64::from(n) {
                    format!("\n[Iteration {n}/{max}]")
                } else {
                    format!("\n[Iteration {run_iteration} ({n}/{max} in this call)]")
                },
            ),
            Progress::Thinking => self.say(Tone::Plain, "🤔 Thinking..."),
            Progress::Thought(text) => self.say(Tone::Plain, &format!("💭 {}", text.trim())),
            Progress::Executing(n) => {
                self.say(Tone::Plain, &format!("🛠️  Executing {n} tool call(s)..."))
            }
            Progress::ToolCall { name, args, .. } => {
                self.say(Tone::Plain, &format!("  → {}", call_preview(&name, &args)))
            }
            Progress::ToolDone {
                exit_code,
                success,
                preview,
                chars,
                stopped,
                ..
            } => {
                let (tone, line) = tool_done(exit_code, success, preview, chars, stopped);
                self.say(tone, &line)
            }
            Progress::ToolNotFound(name) => {
                self.say(Tone::Bad, &format!("  ❌ Tool not found: {name}"))
            }
            Progress::ToolError(message) => self.say(Tone::Bad, &format!("  ❌ {message}")),
            Progress::Hook {
                name,
                status,
                problems,
            } => {
                if status == HookStatus::Failed || !problems.is_empty() {
                    let line = format!(
                        "  ⚠️  hook {} {}: {}",
                        name.as_str(),
                        status_word(status),
                        problems.join("; ")
                    );
                    self.say(Tone::Warn, &line);
                } else if self.verbose {
                    self.say(Tone::Plain, &format!("  ↪ hook {} ok", name.as_str()));
                }
            }
            Progress::Question(prompt) => {
                self.say(Tone::Warn, "🔔 Agent is asking for your input:");
                self.say(Tone::Plain, &format!("   {prompt}"));
            }
            Progress::Note(text) | Progress::Compacted { note: text, .. } => {
                self.say(Tone::Warn, &format!("⚠️  {text}"))
            }
            // The result says it, once the run has stopped; the others were handled above.
            Progress::Paused(_) | Progress::TextDelta(_) | Progress::Waiting { .. } => {}
        }
    }
}

/// The line for a finished tool: its output's start, or why it was stopped or failed.
fn tool_done(
    exit_code: i32,
    success: bool,
    preview: Option<String>,
    chars: usize,
    stopped: Option<String>,
) -> (Tone, String) {
    let shown = preview
        .map(|p| format!("\"{p}\""))
        .unwrap_or_else(|| "(no output)".into());
    if let Some(mut why) = stopped {
        if let Some(first) = why.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        (Tone::Bad, format!("  ✗ {why}: {shown}"))
    } else if success {
        let line = format!("  ✓ Output: {shown} ({chars} chars, exit {exit_code})");
        (Tone::Good, line)
    } else {
        (Tone::Bad, format!("  ✗ Failed: {shown} (exit {exit_code})"))
    }
}

fn status_word(status: HookStatus) -> &'static str {
    match status {
        HookStatus::Success => "succeeded with warnings",
        HookStatus::Failed => "failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn call_previews_shorten_long_strings() {
        let p = call_preview(
            "write",
            &json!({"path": "a.txt", "content": "x".repeat(50), "n": 3}),
        );
        assert_eq!(
            p,
            format!(
                "write(path=\"a.txt\", content=\"{}...\", n=3)",
                "x".repeat(37)
            )
        );
    }
}
