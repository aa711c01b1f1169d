//! One spelling for machine-readable output in both tools: `--format json` ([`FormatFlag`]),
//! with `--json` kept as its older spelling, and the check that tells, before the arguments are
//! understood, whether a command line asked for JSON ([`asks_for_json`]).

use std::ffi::OsString;

/// What a command prints on stdout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TextOrJson {
    /// Text for people.
    #[default]
    Text,
    /// One JSON value, for programs.
    Json,
}

/// `--format text|json`; `--json` (hidden) is the older spelling of `--format json`.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct FormatFlag {
    /// What to print on stdout: text, or json (one JSON value, for programs).
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        default_value_t = TextOrJson::Text,
        hide_possible_values = true
    )]
    format: TextOrJson,
    /// The same as --format json.
    #[arg(long, hide = true)]
    json: bool,
}

impl FormatFlag {
    /// `--format json` or `--json`.
    pub fn is_json(self) -> bool {
        self.json || self.format == TextOrJson::Json
    }

    /// The flag set to `format` (for callers that build arguments in code).
    pub fn of(format: TextOrJson) -> Self {
        Self {
            format,
            json: false,
        }
    }
}

/// Whether a command line asks for JSON on stdout (`--json`, `--format json`, `--format=json`,
/// `--format stream-json`): for reporting an error as JSON when the arguments themselves cannot be
/// understood. Arguments after `--` are not options.
pub fn asks_for_json(args: &[OsString]) -> bool {
    let args: Vec<&str> = args
        .iter()
        .map(|a| a.to_str().unwrap_or_default())
        .take_while(|a| *a != "--")
        .collect();
    let json = |v: &str| matches!(v, "json" | "stream-json");
    args.iter().enumerate().any(|(i, a)| {
        *a == "--json"
            || a.strip_prefix("--format=").is_some_and(json)
            || (*a == "--format" && args.get(i + 1).is_some_and(|v| json(v)))
    })
}
