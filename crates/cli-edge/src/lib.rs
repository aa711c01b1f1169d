//! The edge both command-line tools share: the error a command reports ([`CliError`]: what
//! happened, the chain of causes, hints, the exit code) and the helpers that print results to stdout
//! and progress to stderr.
//!
//! Each tool keeps its own exit codes as an enum implementing [`ExitStatus`]; the error is generic
//! over it, so `delta` and `dygram` share one type and one report format:
//!
//! ```text
//! error: cannot read the agent: agent.yaml:3: unknown field `tols`
//!   caused by: permission denied (os error 13)
//!   hint: did you mean `tools`?
//! ```
//!
//! A cause is printed only when the message does not already say it (library errors often embed
//! their source in their own message).
#![warn(clippy::print_stdout, clippy::print_stderr)]

pub mod color;
pub mod format;
pub mod generated;
pub mod paths;

use std::error::Error as StdError;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

pub use color::{ColorChoice, ColorFlag, Paint};
pub use format::{FormatFlag, TextOrJson, asks_for_json};
pub use generated::{CompletionsArgs, ManArgs, Shell};

/// Whether this process wrote anything on stdout (through a [`Printer`]).
static STDOUT_USED: AtomicBool = AtomicBool::new(false);

/// A tool's exit codes, and how its JSON names fields.
pub trait ExitStatus: Copy + std::fmt::Debug {
    /// The code of a command that failed.
    const FAILED: Self;
    /// The code of a command used wrongly.
    const USAGE: Self;
    /// How the tool's JSON names its fields (each tool keeps one case everywhere).
    const FIELDS: FieldCase = FieldCase::Snake;
    /// The process exit code.
    fn code(self) -> u8;
}

/// How a tool's JSON names its fields: `exit_code` or `exitCode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldCase {
    /// `exit_code` (delta, as the original engine's results).
    Snake,
    /// `exitCode` (dygram, as the original language's outputs).
    Camel,
}

impl FieldCase {
    /// `name` (given in snake case) in this case.
    pub fn name(self, name: &str) -> String {
        match self {
            Self::Snake => name.to_string(),
            Self::Camel => {
                let mut out = String::with_capacity(name.len());
                let mut upper = false;
                for c in name.chars() {
                    if c == '_' {
                        upper = true;
                    } else if upper {
                        out.extend(c.to_uppercase());
                        upper = false;
                    } else {
                        out.push(c);
                    }
                }
                out
            }
        }
    }
}

/// An error for the user: what happened, why (the source chain), what to do, and the exit code.
#[derive(Debug)]
pub struct CliError<X: ExitStatus> {
    message: String,
    source: Option<Box<dyn StdError + Send + Sync>>,
    hints: Vec<String>,
    exit: X,
    kind: Option<&'static str>,
    reported: bool,
}

impl<X: ExitStatus> CliError<X> {
    /// A failure (the tool's failure code) with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
            hints: Vec::new(),
            exit: X::FAILED,
            kind: None,
            reported: false,
        }
    }

    /// A usage error.
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(message).code(X::USAGE)
    }

    /// A failure reporting `error`: its text is the message, its sources are kept for the report.
    pub fn from_error(error: impl StdError + Send + Sync + 'static) -> Self {
        Self::new(error.to_string()).caused_by(error)
    }

    /// A failure with its own message, caused by `error` (kept with its whole chain).
    pub fn with_source(
        message: impl Into<String>,
        error: impl StdError + Send + Sync + 'static,
    ) -> Self {
        Self::new(message).caused_by(error)
    }

    fn caused_by(mut self, error: impl StdError + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(error));
        self
    }

    /// Adds a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }

    /// Adds a hint if there is one.
    pub fn maybe_hint(self, hint: Option<String>) -> Self {
        match hint {
            Some(hint) => self.hint(hint),
            None => self,
        }
    }

    /// Changes the exit code.
    pub fn code(mut self, exit: X) -> Self {
        self.exit = exit;
        self
    }

    /// Names the kind of error for programs (`kind` of [`CliError::to_json`]): a short
    /// snake_case word such as `missing_api_key` or `invalid_machine`.
    pub fn kind(mut self, kind: &'static str) -> Self {
        self.kind = Some(kind);
        self
    }

    /// The kind of error: the one named with [`CliError::kind`], else `usage` for a usage error and
    /// `failed` for any other.
    pub fn kind_name(&self) -> &'static str {
        self.kind.unwrap_or(if self.exit.code() == X::USAGE.code() {
            "usage"
        } else {
            "failed"
        })
    }

    /// Marks the error as already shown on stderr (diagnostics a command printed itself): the
    /// report prints nothing more, the JSON object is still printed where one is asked for.
    pub fn already_reported(mut self) -> Self {
        self.reported = true;
        self
    }

    /// The error as the result object of a command asked for JSON:
    /// `{"is_error": true, "kind", "message", "causes", "hints", "exit_code"}`.
    pub fn to_json(&self) -> serde_json::Value {
        let case = X::FIELDS;
        let mut object = serde_json::Map::new();
        object.insert(case.name("is_error"), true.into());
        object.insert("kind".into(), self.kind_name().into());
        object.insert("message".into(), self.message.clone().into());
        object.insert("causes".into(), self.causes().into());
        object.insert("hints".into(), self.hints.clone().into());
        object.insert(case.name("exit_code"), self.exit.code().into());
        serde_json::Value::Object(object)
    }

    /// The usage error clap reported for an unreadable command line, for the JSON object a
    /// script asked for: its message without clap's `error: `, with the lines that complete it
    /// (the arguments a "required arguments were not provided" names) joined to it, and without
    /// the usage and help lines that follow.
    pub fn from_clap(error: &clap::Error) -> Self {
        let text = error.to_string();
        let message: Vec<&str> = text
            .lines()
            .take_while(|line| !line.trim().is_empty())
            .map(str::trim)
            .collect();
        Self::usage(message.join(" ").trim_start_matches("error: "))
    }

    /// What happened.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// What to do about it.
    pub fn hints(&self) -> &[String] {
        &self.hints
    }

    /// The exit code.
    pub fn exit(&self) -> X {
        self.exit
    }

    /// The causes the report prints: the error's sources, outermost first, without those whose text
    /// the message (or a cause printed before) already contains.
    pub fn causes(&self) -> Vec<String> {
        let mut shown = self.message.clone();
        let mut causes = Vec::new();
        let mut next: Option<&(dyn StdError + 'static)> = match &self.source {
            Some(source) => {
                let source: &(dyn StdError + 'static) = source.as_ref();
                // The source itself is the message when the error was built with `from_error`.
                if source.to_string() == self.message {
                    source.source()
                } else {
                    Some(source)
                }
            }
            None => None,
        };
        while let Some(cause) = next {
            let text = cause.to_string();
            if !text.is_empty() && !shown.contains(&text) {
                shown.push('\n');
                shown.push_str(&text);
                causes.push(text);
            }
            next = cause.source();
        }
        causes
    }

    /// The report's lines: `error: …`, `  caused by: …` for each cause, `  hint: …` for each hint.
    pub fn report_lines(&self) -> Vec<String> {
        let mut lines = vec![format!("error: {}", self.message)];
        lines.extend(self.causes().iter().map(|c| format!("  caused by: {c}")));
        lines.extend(self.hints.iter().map(|h| format!("  hint: {h}")));
        lines
    }
}

impl<X: ExitStatus> std::fmt::Display for CliError<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// How a tool prints: text that leaves the process has the secrets scrubbed, and progress can have
/// its control characters escaped (a model's or a tool's text must never drive the terminal).
#[derive(Debug, Clone, Default)]
pub struct Printer {
    secrets: llm::Redactor,
    escape_controls: bool,
    paint: Paint,
}

impl Printer {
    /// A printer scrubbing `secrets`.
    pub fn new(secrets: llm::Redactor) -> Self {
        Self {
            secrets,
            escape_controls: false,
            paint: Paint::default(),
        }
    }

    /// Colours the reports of errors on stderr (`error:` in red) when `paint` is on.
    pub fn with_paint(mut self, paint: Paint) -> Self {
        self.paint = paint;
        self
    }

    /// The colours of stderr.
    pub fn paint(&self) -> Paint {
        self.paint
    }

    /// Escapes control characters (other than line breaks and tabs) in what goes to stderr: for a
    /// tool whose progress carries text it did not write (a tool that colours its own messages
    /// does not).
    pub fn escaping_controls(mut self) -> Self {
        self.escape_controls = true;
        self
    }

    /// The secrets it scrubs.
    pub fn secrets(&self) -> &llm::Redactor {
        &self.secrets
    }

    /// Writes one line on stderr. Failures are ignored: a closed stderr must not crash a command.
    pub fn eprint_line(&self, text: &str) {
        let text = self.secrets.redact(text);
        let text = if self.escape_controls {
            llm::terminal_safe(&text)
        } else {
            text
        };
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{text}");
    }

    /// Writes text on stdout as it is (results, JSON), secrets scrubbed; a closed pipe
    /// (`… | head`) is not an error worth reporting.
    pub fn print_out(&self, text: &str) {
        if !text.is_empty() {
            STDOUT_USED.store(true, Ordering::Relaxed);
        }
        let text = self.secrets.redact(text);
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    /// Writes text meant for a person on stdout (a summary, a transcript, a listing): as
    /// [`Printer::print_out`], with every control character but line breaks and tabs escaped, so
    /// text from a model or a tool never drives the terminal, even cut short in the middle of an
    /// escape sequence. Results for programs (JSON, raw answers, diagrams) go through
    /// [`Printer::print_out`] unchanged.
    pub fn print_text(&self, text: &str) {
        self.print_out(&llm::terminal_safe(text));
    }

    /// Whether this process printed anything on stdout through a printer.
    pub fn wrote_out(&self) -> bool {
        STDOUT_USED.load(Ordering::Relaxed)
    }

    /// Reports `error` on stderr (unless it was [already reported](CliError::already_reported))
    /// and gives the exit code to return.
    pub fn report<X: ExitStatus>(&self, error: &CliError<X>) -> ExitCode {
        if !error.reported {
            for line in error.report_lines() {
                match line.strip_prefix("error:") {
                    Some(rest) => self.eprint_line(&format!("{}{rest}", self.paint.red("error:"))),
                    None => self.eprint_line(&line),
                }
            }
        }
        ExitCode::from(error.exit.code())
    }

    /// [`Printer::report`] for a command that was asked for JSON (`json`): its result object is the
    /// error's ([`CliError::to_json`]), printed on stdout unless the command already printed its
    /// own result there. So `--format json` always leaves one object on stdout.
    pub fn report_as<X: ExitStatus>(&self, error: &CliError<X>, json: bool) -> ExitCode {
        if json && !self.wrote_out() {
            self.print_out(&format!("{}\n", error.to_json()));
        }
        self.report(error)
    }
}

#[cfg(test)]
mod tests;
