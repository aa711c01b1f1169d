use super::*;
use std::ffi::OsString;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    Failed = 1,
    Usage = 64,
    Busy = 75,
}

impl ExitStatus for Exit {
    const FAILED: Self = Exit::Failed;
    const USAGE: Self = Exit::Usage;
    fn code(self) -> u8 {
        self as u8
    }
}

#[derive(Debug)]
struct Layer {
    text: String,
    source: Option<Box<Layer>>,
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl StdError for Layer {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn StdError + 'static))
    }
}

fn chain(texts: &[&str]) -> Layer {
    let mut layer: Option<Box<Layer>> = None;
    for text in texts.iter().rev() {
        layer = Some(Box::new(Layer {
            text: (*text).to_string(),
            source: layer,
        }));
    }
    *layer.unwrap()
}

type Error = CliError<Exit>;

#[test]
fn the_report_has_the_message_each_new_cause_and_each_hint_with_the_tools_exit_code() {
    let err = Error::from_error(chain(&[
        "cannot open the run",
        "cannot read journal.jsonl",
        "permission denied",
    ]))
    .hint("check the folder's owner")
    .code(Exit::Busy);
    assert_eq!(
        err.report_lines(),
        [
            "error: cannot open the run",
            "  caused by: cannot read journal.jsonl",
            "  caused by: permission denied",
            "  hint: check the folder's owner",
        ]
    );
    assert_eq!(err.exit(), Exit::Busy);
}

#[test]
fn a_cause_the_message_already_says_is_not_repeated() {
    // Library errors often embed their source: `cannot read x: permission denied`.
    let err = Error::with_source(
        "cannot read x: permission denied",
        chain(&["permission denied"]),
    );
    assert_eq!(
        err.report_lines(),
        ["error: cannot read x: permission denied"]
    );
    let err = Error::from_error(chain(&["a: b: c", "b: c", "c", "d"]));
    assert_eq!(err.report_lines(), ["error: a: b: c", "  caused by: d"]);
}

#[test]
fn usage_and_failure_use_the_tools_codes() {
    assert_eq!(Error::new("x").exit(), Exit::Failed);
    assert_eq!(Error::usage("x").exit(), Exit::Usage);
    let err = Error::new("x")
        .maybe_hint(None)
        .maybe_hint(Some("y".into()));
    assert_eq!(err.hints(), ["y"]);
    assert_eq!(err.to_string(), "x");
}

#[test]
fn an_error_as_json_has_its_kind_message_hints_and_exit_code() {
    let e = CliError::<Exit>::new("no key")
        .hint("set KEY")
        .kind("missing_api_key");
    assert_eq!(
        e.to_json(),
        serde_json::json!({"is_error": true, "kind": "missing_api_key", "message": "no key",
            "causes": [], "hints": ["set KEY"], "exit_code": 1})
    );
    assert_eq!(CliError::<Exit>::usage("bad").kind_name(), "usage");
    assert_eq!(CliError::<Exit>::new("bad").kind_name(), "failed");
}

/// A tool whose JSON names fields in camel case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CamelExit {
    Failed = 1,
    Usage = 64,
}

impl ExitStatus for CamelExit {
    const FAILED: Self = CamelExit::Failed;
    const USAGE: Self = CamelExit::Usage;
    const FIELDS: FieldCase = FieldCase::Camel;
    fn code(self) -> u8 {
        self as u8
    }
}

#[test]
fn an_error_as_json_names_its_fields_in_the_tools_case() {
    let e = CliError::<CamelExit>::usage("bad flag");
    let json = e.to_json();
    assert_eq!(json["isError"], true, "{json}");
    assert_eq!(json["exitCode"], 64, "{json}");
    assert!(json.get("exit_code").is_none(), "{json}");
    assert_eq!(
        FieldCase::Camel.name("waiting_for_answer"),
        "waitingForAnswer"
    );
    assert_eq!(FieldCase::Snake.name("exit_code"), "exit_code");
}

#[test]
fn json_is_asked_for_in_every_spelling_but_not_after_a_double_dash() {
    let ask = |args: &[&str]| asks_for_json(&args.iter().map(OsString::from).collect::<Vec<_>>());
    assert!(ask(&["dygram", "exec", "status", "--json"]));
    assert!(ask(&["dygram", "e", "x.dy", "--format", "json"]));
    assert!(ask(&["dygram", "e", "x.dy", "--format=stream-json"]));
    assert!(!ask(&["dygram", "e", "x.dy", "--format", "text"]));
    assert!(!ask(&["dygram", "e", "--", "--json"]));
    assert!(!ask(&["dygram", "e", "x.dy", "--format"]));
}

#[derive(clap::Parser)]
struct WithFormat {
    #[command(flatten)]
    format: FormatFlag,
}

#[test]
fn format_json_and_the_older_json_flag_mean_the_same() {
    use clap::Parser;
    let parse = |args: &[&str]| WithFormat::try_parse_from(args).map(|w| w.format.is_json());
    assert!(!parse(&["t"]).unwrap());
    assert!(parse(&["t", "--format", "json"]).unwrap());
    assert!(parse(&["t", "--json"]).unwrap());
    assert!(!parse(&["t", "--format", "text"]).unwrap());
    assert!(parse(&["t", "--format", "yaml"]).is_err());
}

#[test]
fn colours_follow_the_flag_the_terminal_and_no_color() {
    let set = Some(std::ffi::OsStr::new("1"));
    let empty = Some(std::ffi::OsStr::new(""));
    assert!(ColorChoice::Auto.decide(true, None));
    assert!(
        ColorChoice::Auto.decide(true, empty),
        "an empty NO_COLOR is unset"
    );
    assert!(!ColorChoice::Auto.decide(true, set));
    assert!(!ColorChoice::Auto.decide(false, None));
    assert!(ColorChoice::Always.decide(false, set));
    assert!(!ColorChoice::Never.decide(true, None));
    assert_eq!(Paint::new(true).red("x"), "\x1b[31mx\x1b[0m");
    assert_eq!(Paint::new(false).red("x"), "x");
}

#[derive(clap::Parser)]
#[command(name = "tool", about = "A tool.")]
struct Tool {
    #[command(subcommand)]
    command: ToolCommand,
}

#[derive(clap::Subcommand)]
enum ToolCommand {
    /// Runs it.
    Run {
        /// Fast.
        #[arg(long)]
        fast: bool,
    },
}

#[test]
fn completions_and_man_pages_come_from_the_command_definition() {
    use clap::CommandFactory;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let script = String::from_utf8(generated::completions(Tool::command(), shell)).unwrap();
        assert!(script.contains("fast"), "{shell:?}: {script}");
    }
    let page = String::from_utf8(generated::man_page(Tool::command()).unwrap()).unwrap();
    assert!(page.contains(".TH tool 1"), "{page}");
    let dir = std::env::temp_dir().join(format!("cli-edge-man-{}", std::process::id()));
    let written = generated::man_pages(Tool::command(), &dir).unwrap();
    let names: Vec<String> = written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["tool.1", "tool-run.1"]);
    let _ = std::fs::remove_dir_all(&dir);
}
