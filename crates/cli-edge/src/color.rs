//! Whether a tool colours what it writes on a terminal, decided once for the process: `--color
//! auto|always|never` ([`ColorFlag`]), the `NO_COLOR` convention (any non-empty value turns colours
//! off under `auto`) and whether the stream is a terminal; and [`Paint`], which wraps text in the
//! few styles the tools use (nothing at all when colours are off).

use std::io::IsTerminal;

/// `--color`: when to colour.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set.
    #[default]
    Auto,
    /// Always (also into a pipe or a file, and whatever `NO_COLOR` says).
    Always,
    /// Never.
    Never,
}

impl ColorChoice {
    /// Whether to colour a stream, given whether it is a terminal and the value of `NO_COLOR`.
    pub fn decide(self, terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
        match self {
            Self::Always => true,
            Self::Never => false,
            Self::Auto => terminal && no_color.is_none_or(|v| v.is_empty()),
        }
    }

    /// Whether to colour stderr in this process.
    pub fn for_stderr(self) -> Paint {
        let no_color = std::env::var_os("NO_COLOR");
        Paint::new(self.decide(std::io::stderr().is_terminal(), no_color.as_deref()))
    }
}

/// The `--color` flag, for a tool's top-level arguments (global: it may follow the subcommand).
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct ColorFlag {
    /// When to colour stderr: auto (on a terminal, unless NO_COLOR is set), always or never.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto, global = true)]
    pub color: ColorChoice,
}

/// Styles for text on a stream that may be coloured: each method returns the text wrapped in the
/// style's escape codes, or the text as it is when colours are off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Paint {
    enabled: bool,
}

impl Paint {
    /// Colours on or off.
    pub fn new(enabled: bool) -> Self {
        Self { enabled }
    }

    /// Whether colours are on.
    pub fn enabled(self) -> bool {
        self.enabled
    }

    fn wrap(self, code: &str, text: &str) -> String {
        if self.enabled {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    /// Errors.
    pub fn red(self, text: &str) -> String {
        self.wrap("31", text)
    }

    /// Warnings.
    pub fn yellow(self, text: &str) -> String {
        self.wrap("33", text)
    }

    /// Success.
    pub fn green(self, text: &str) -> String {
        self.wrap("32", text)
    }

    /// Headings of progress (a run starts or goes on).
    pub fn blue(self, text: &str) -> String {
        self.wrap("34", text)
    }

    /// Details.
    pub fn dim(self, text: &str) -> String {
        self.wrap("2", text)
    }

    /// Emphasis.
    pub fn bold(self, text: &str) -> String {
        self.wrap("1", text)
    }
}
