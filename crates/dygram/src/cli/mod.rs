//! Command-line interface of `dygram`: argument parsing, terminal output and exit codes.

mod batch;
mod client;
mod debug;
mod exec;
mod execute;
mod fmt;
mod generate;
mod input;
mod interactive;
mod interrupt;
mod live;
mod mcp;
mod modules;
mod serve;
mod validate;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

const EXIT_CODES: &str = "\
Exit codes (docs/exit-codes.md; the numbers delta shares with dygram mean the same in both):
  0    success (warnings do not change it); with execute -i: a turn ran and there is more to do
  1    the program has errors, an execution failed, or a command failed (missing file, …)
  2    execute -i: the execution is complete
  64   usage error (unknown flag or format, unsupported file extension, missing argument)
  70   internal error: dygram itself failed (a bug; please report it with the message)
  75   busy: another dygram process is working on the execution
  101  execute -i: waiting for an answer on stdin in the next call: an LLM response (manual
       mode) or the answer to an agent node's question
  130  interrupted (Ctrl-C, SIGINT or SIGTERM); nothing of the turn in progress is saved";

/// dygram — an executable state-machine language.
///
/// A .dy file describes nodes, typed edges and annotations. dygram checks it and turns it into
/// canonical JSON, Graphviz DOT, SVG, Mermaid or back into .dy, and executes it: nodes that need a
/// decision ask a model (or replay recorded answers). Errors are shown with the file, line and
/// column, the source line and a caret; warnings are shown too and do not fail a command.
///
/// Examples:
///   dygram pv machine.dy                      # check a machine
///   dygram generate machine.dy                # canonical JSON on stdout
///   dygram g machine.dy -f dot | dot -Tpng > machine.png
///   dygram g machine.dy -f json,svg,mermaid -d out/
///   dygram batch 'examples/**/*.dy' -d out/ --continue-on-error
///   dygram execute machine.dy --playback recordings/ --format json
#[derive(Debug, Parser)]
#[command(name = "dygram", version, max_term_width = 100, verbatim_doc_comment, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    color: cli_edge::ColorFlag,
}

#[derive(Debug, Subcommand)]
enum Command {
    #[command(visible_alias = "g")]
    Generate(generate::GenerateArgs),
    #[command(name = "parseAndValidate", visible_alias = "pv")]
    ParseAndValidate(validate::ValidateArgs),
    #[command(name = "check-imports", visible_alias = "ci")]
    CheckImports(modules::CheckImportsArgs),
    Bundle(modules::BundleArgs),
    #[command(visible_alias = "b")]
    Batch(batch::BatchArgs),
    #[command(visible_alias = "e")]
    Execute(execute::ExecuteArgs),
    #[command(visible_alias = "d")]
    Debug(debug::DebugArgs),
    /// Manage saved executions: list, status, show, clean, rm.
    Exec(exec::ExecArgs),
    Fmt(fmt::FmtArgs),
    #[command(visible_aliases = ["server", "s"])]
    Serve(serve::ServeArgs),
    /// Print the shell completion script for bash, zsh or fish.
    ///
    /// Examples:
    ///   dygram completions bash -o ~/.local/share/bash-completion/completions/dygram
    ///   dygram completions zsh -o ~/.zfunc/_dygram    # with fpath+=(~/.zfunc) before compinit
    ///   dygram completions fish -o ~/.config/fish/completions/dygram.fish
    ///   dygram completions bash > FILE                # or print it
    #[command(verbatim_doc_comment)]
    Completions(cli_edge::CompletionsArgs),
    /// Print the man page (roff), or with -d write one page per command into a folder.
    ///
    /// Examples:
    ///   dygram man | man -l -
    ///   dygram man -d ~/.local/share/man/man1
    #[command(verbatim_doc_comment)]
    Man(cli_edge::ManArgs),
    Mcp(mcp::McpArgs),
    /// Run the language server on stdin/stdout, for editors (errors and warnings as you type).
    ///
    /// Editors start it themselves: point an LSP client at the command `dygram lsp` for .dy files
    /// (see docs/dygram/editors.md). It offers diagnostics (imports followed, also unsaved ones),
    /// hover, completion, semantic highlighting, the outline, go to definition, references, rename
    /// across the files that import a node, quick fixes for misspelled names, and formatting.
    Lsp,
}

impl Command {
    /// Whether the command was asked for machine-readable output on stdout: then an error that
    /// stops it is printed there too, as a result object ([`cli_edge::CliError::to_json`]).
    fn json_output(&self) -> bool {
        match self {
            Self::ParseAndValidate(args) => args.json_output(),
            Self::CheckImports(args) => args.json_output(),
            Self::Batch(args) => args.json_output(),
            Self::Execute(args) => matches!(
                args.format,
                execute::ExecFormat::Json | execute::ExecFormat::StreamJson
            ),
            Self::Exec(args) => args.json_output(),
            Self::Fmt(args) => args.json_output(),
            Self::Serve(_) | Self::Mcp(_) => false,
            Self::Generate(_)
            | Self::Debug(_)
            | Self::Bundle(_)
            | Self::Completions(_)
            | Self::Man(_)
            | Self::Lsp => false,
        }
    }
}

/// Exit codes (see [`EXIT_CODES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// Errors in the program, or a failed command.
    Failed = 1,
    /// `execute -i`: the execution is complete.
    Complete = 2,
    /// Bad usage (sysexits' EX_USAGE; delta's too).
    Usage = 64,
    /// dygram itself failed (a panic: a bug), never confused with a machine's outcome (delta's too).
    Internal = 70,
    /// Another dygram process works on the execution (sysexits' EX_TEMPFAIL; delta's too).
    Busy = 75,
    /// `execute -i`: a request waits for an answer (manual mode); delta's number for a run that
    /// waits for an answer.
    Waiting = 101,
    /// Interrupted (Ctrl-C, SIGINT or SIGTERM), as a shell reports it (delta's too).
    Interrupted = 130,
}

impl cli_edge::ExitStatus for Exit {
    const FAILED: Self = Exit::Failed;
    const USAGE: Self = Exit::Usage;
    const FIELDS: cli_edge::FieldCase = cli_edge::FieldCase::Camel;
    fn code(self) -> u8 {
        self as u8
    }
}

/// An error shown at the edge: message, causes, hints, exit code (shared with delta).
pub type CliError = cli_edge::CliError<Exit>;

/// The error of a command whose machine has errors: they were shown on stderr already, so it
/// adds nothing there (exit 1, and the result object of `--format json`).
fn invalid_machine() -> CliError {
    CliError::new("the machine has errors")
        .kind("invalid_machine")
        .already_reported()
}

/// Verbosity shared by the commands.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct Verbosity {
    /// More detail on stderr (each file processed, the dependency order, …).
    #[arg(short, long, global = true)]
    verbose: bool,
    /// Only errors on stderr (no warnings, no progress).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
}

/// Whether stderr gets colours (`--color`, `NO_COLOR`, a terminal; see [`paint`]).
pub fn color() -> bool {
    paint().enabled()
}

/// The colours of stderr, chosen once by [`main`] from `--color` (before that: `auto`).
pub fn paint() -> cli_edge::Paint {
    printer().paint()
}

/// How this process prints: the API keys in use scrubbed (see [`client::redactor`]); set once by
/// [`main`].
static PRINTER: std::sync::OnceLock<cli_edge::Printer> = std::sync::OnceLock::new();

fn printer() -> &'static cli_edge::Printer {
    PRINTER.get_or_init(|| {
        cli_edge::Printer::new(client::redactor())
            .with_paint(cli_edge::ColorChoice::Auto.for_stderr())
    })
}

/// The process's redactor (empty before [`main`] sets it).
pub fn secrets() -> llm::Redactor {
    printer().secrets().clone()
}

/// Writes a line to stderr (with the API keys in use redacted).
pub fn eprint_line(text: &str) {
    printer().eprint_line(text);
}

/// Writes text to stdout (with the API keys in use redacted); a closed pipe is not an error worth
/// a panic.
pub fn print_out(text: &str) {
    printer().print_out(text);
}

/// Writes text meant for a person to stdout (a report, a listing): as [`print_out`], with the
/// control characters of a model's or a machine's text (ESC, CSI, OSC, C1) escaped, line breaks
/// and tabs kept.
pub fn print_text(text: &str) {
    printer().print_text(text);
}

/// `dygram exec FILE …` means `dygram execute FILE …` when FILE is not one of `exec`'s actions.
fn execute_alias(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    const ACTIONS: [&str; 9] = [
        "list", "ls", "status", "show", "clean", "rm", "help", "--help", "-h",
    ];
    let is_exec = args.get(1).is_some_and(|a| a == "exec");
    let next_is_action = args
        .get(2)
        .and_then(|a| a.to_str())
        .is_none_or(|a| ACTIONS.contains(&a));
    if is_exec && !next_is_action {
        args[1] = "execute".into();
    }
    args
}

/// `dygram lsp`: serves the editor on stdin and stdout until it says `shutdown` and `exit`.
fn lsp() -> Result<Exit, CliError> {
    let (connection, transport) = dygram::lsp::transport::stdio();
    let served = dygram::lsp::serve(&connection);
    drop(connection);
    // Reading stops after `exit`, at the end of the input or at broken framing; a server that
    // stopped otherwise (its output closed) does not wait for more input. A server that found the
    // connection gone stopped because reading did (the reader may not have returned yet).
    let reader_gone =
        matches!(&served, Err(dygram::lsp::LspError::Protocol(e)) if e.channel_is_disconnected());
    let read = if served.is_ok() || reader_gone || transport.reading_stopped() {
        transport.join()
    } else {
        Ok(())
    };
    match (served, read) {
        // Input that is not the protocol says more than the connection that ended with it.
        (_, Err(unreadable)) => Err(CliError::with_source(
            "the language server could not read the editor's messages",
            unreadable,
        )
        .hint("`dygram lsp` is started by an editor, which speaks the Language Server Protocol on its standard input; see docs/dygram/editors.md")),
        (Err(stopped), Ok(())) => Err(CliError::with_source(
            "the language server stopped",
            stopped,
        )),
        (Ok(()), Ok(())) => Ok(Exit::Ok),
    }
}

/// `dygram man`: the page on stdout, or every page into a folder (their paths on stdout).
fn man(args: cli_edge::ManArgs) -> Result<Exit, CliError> {
    print_out(&cli_edge::generated::man_output(Cli::command(), &args)?);
    Ok(Exit::Ok)
}

pub fn main() -> ExitCode {
    let args = execute_alias(std::env::args_os().collect());
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => {
            let paint = cli.color.color.for_stderr();
            let _ = PRINTER.set(cli_edge::Printer::new(client::redactor()).with_paint(paint));
            cli
        }
        Err(e) => {
            // Help and version go to stdout with exit 0; usage errors to stderr with exit 64
            // (2 means "complete" for `execute -i`).
            if e.use_stderr() && cli_edge::asks_for_json(&args) {
                let usage = CliError::from_clap(&e);
                printer().print_out(&format!("{}\n", usage.to_json()));
            }
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { Exit::Usage as u8 } else { 0 });
        }
    };
    let json = cli.command.json_output();
    // A panic is a bug: its message is printed by the default hook, and the exit code says
    // "internal error" (70, as delta's), not the 101 Rust gives panics, which means "waiting for
    // an answer" here.
    let dispatched = std::panic::catch_unwind(|| match cli.command {
        Command::Generate(args) => generate::run(args),
        Command::ParseAndValidate(args) => validate::run(args),
        Command::CheckImports(args) => modules::check_imports(args),
        Command::Bundle(args) => modules::bundle(args),
        Command::Batch(args) => batch::run(args),
        Command::Execute(args) => execute::run(args),
        Command::Debug(args) => debug::run(args),
        Command::Exec(args) => exec::run(args),
        Command::Fmt(args) => fmt::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Completions(args) => {
            let script = cli_edge::generated::completions_output(Cli::command(), &args)?;
            print_out(&String::from_utf8_lossy(&script));
            Ok(Exit::Ok)
        }
        Command::Man(args) => man(args),
        Command::Lsp => lsp(),
    });
    let result = dispatched.unwrap_or_else(|_| {
        Err(CliError::new(
            "internal error: dygram stopped on a bug (the message above); please report it",
        )
        .code(Exit::Internal)
        .kind("internal"))
    });
    match result {
        Ok(exit) => ExitCode::from(exit as u8),
        Err(e) => printer().report_as(&e, json),
    }
}
