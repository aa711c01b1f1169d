//! Command-line interface: argument parsing, dispatch, exit codes, error rendering.
//!
//! Results go to stdout, progress and diagnostics to stderr.

mod compact;
mod console;
mod continue_cmd;
mod fleet;
mod init;
mod list_runs;
mod mcp;
mod report;
mod result;
mod rm;
mod run;
mod sessions;
mod show;
mod terminal;
mod tool_expand;
mod tools;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// Variable that pins the clock (RFC 3339), for reproducible tests.
pub const TEST_NOW_VAR: &str = "DELTA_TEST_NOW";
/// Variable that seeds ids, for reproducible tests.
pub const TEST_SEED_VAR: &str = "DELTA_TEST_SEED";

const EXIT_CODES: &str = "\
Exit codes (docs/exit-codes.md; the numbers dygram shares with delta mean the same in both):
  0    the run completed (also when it stopped at its iteration limit)
  1    the run failed, or delta could not start it (bad agent, missing API key, a finished run
       continued without a message, ...)
  64   usage error (unknown flag, missing argument)
  70   internal error: delta itself failed (a bug; please report it with the message)
  75   busy: another delta process is working on the run or in its workspace
  101  the run is waiting for an answer to an ask_human question
  130  the run was interrupted (Ctrl-C, SIGINT or SIGTERM)";

/// delta: an AI-agent engine.
///
/// An agent is a folder (agent.yaml, system_prompt.md, tools that are plain shell commands). delta
/// runs the Think-Act-Observe loop against an LLM and journals every event in the workspace, so any
/// run can be resumed, answered, extended or retried by a later, separate call.
#[derive(Debug, Parser)]
#[command(name = "delta", version, max_term_width = 100, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    color: cli_edge::ColorFlag,
}

#[derive(Debug, Subcommand)]
enum Command {
    Run(run::RunArgs),
    Continue(continue_cmd::ContinueArgs),
    #[command(name = "list-runs")]
    ListRuns(list_runs::ListRunsArgs),
    #[command(visible_alias = "log")]
    Show(show::ShowArgs),
    Rm(rm::RmArgs),
    Init(init::InitArgs),
    #[command(name = "tool:expand")]
    ToolExpand(tool_expand::ToolExpandArgs),
    Tools(tools::ToolsArgs),
    Compact(compact::CompactArgs),
    Sessions(sessions::SessionsArgs),
    Submit(fleet::SubmitArgs),
    Worker(fleet::WorkerArgs),
    Export(fleet::ExportArgs),
    Import(fleet::ImportArgs),
    Mcp(mcp::McpArgs),
    /// Print a shell completion script: bash, zsh or fish.
    ///
    /// Examples:
    ///   delta completions bash -o ~/.local/share/bash-completion/completions/delta
    ///   delta completions zsh -o ~/.zfunc/_delta      # with fpath+=(~/.zfunc) before compinit
    ///   delta completions fish -o ~/.config/fish/completions/delta.fish
    ///   delta completions bash > FILE                 # or print it
    #[command(verbatim_doc_comment)]
    Completions(cli_edge::CompletionsArgs),
    /// Print delta's man page, or write one page per command into a folder with -d.
    ///
    /// Examples:
    ///   delta man | man -l -
    ///   delta man -d /usr/local/share/man/man1
    #[command(verbatim_doc_comment)]
    Man(cli_edge::ManArgs),
}

/// Process exit codes (documented in `--help` and the README).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Completed.
    Ok = 0,
    /// Failed, or an error.
    Error = 1,
    /// Usage error (sysexits' EX_USAGE; dygram's too).
    Usage = 64,
    /// delta itself failed (a panic): never confused with a run's status.
    Internal = 70,
    /// Another process holds the run.
    Busy = 75,
    /// Waiting for a human answer.
    Waiting = 101,
    /// Interrupted.
    Interrupted = 130,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e as u8)
    }
}

impl cli_edge::ExitStatus for Exit {
    const FAILED: Self = Exit::Error;
    const USAGE: Self = Exit::Usage;
    fn code(self) -> u8 {
        self as u8
    }
}

/// An error for the user: what happened, why, what to do, which exit code (shared with dygram).
pub type CliError = cli_edge::CliError<Exit>;

/// A store error for the user: a run another process holds is `Busy` (exit 75), with what to do.
pub fn store_error(e: store::StoreError) -> CliError {
    match &e {
        store::StoreError::Busy { .. } => CliError::from_error(e)
            .hint("wait for that process to finish, or stop it; a run has one writer at a time")
            .code(Exit::Busy),
        _ => CliError::from_error(e),
    }
}

/// `-w PATH`: a workspace whose runs a command reads (default: the current folder).
#[derive(Debug, clap::Args)]
pub struct WorkspaceArg {
    /// Workspace (default: the current folder).
    #[arg(
        short = 'w',
        long = "work-dir",
        value_name = "PATH",
        default_value = "."
    )]
    work_dir: std::path::PathBuf,
}

impl WorkspaceArg {
    /// The workspace, absolute; an error with a hint when it holds no `.delta/` folder.
    pub fn existing(&self) -> Result<std::path::PathBuf, CliError> {
        let ws = std::env::current_dir()
            .unwrap_or_default()
            .join(&self.work_dir);
        if ws.join(".delta").is_dir() {
            Ok(ws)
        } else {
            Err(
                CliError::new(format!("No .delta directory found in {}", ws.display()))
                    .hint("is this a workspace? runs live in <workspace>/.delta/"),
            )
        }
    }
}

/// The text of `-m`: as given, or standard input's whole content for `-` (its final line break
/// dropped).
pub fn message_arg(message: Option<String>) -> Result<Option<String>, CliError> {
    match message.as_deref() {
        Some("-") => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(|e| {
                CliError::new(format!("cannot read the message from standard input: {e}"))
                    .hint("-m - reads UTF-8 text until the end of standard input")
            })?;
            let text = text.strip_suffix('\n').unwrap_or(&text);
            Ok(Some(text.strip_suffix('\r').unwrap_or(text).to_string()))
        }
        _ => Ok(message),
    }
}

/// How this process prints: progress carries the model's and the tools' text, whose control
/// characters (other than line breaks and tabs) are shown escaped so it never drives the terminal;
/// colours as `--color` says (set once by [`main`]; before that: `auto`).
static PRINTER: std::sync::OnceLock<cli_edge::Printer> = std::sync::OnceLock::new();

fn printer() -> &'static cli_edge::Printer {
    PRINTER.get_or_init(|| {
        cli_edge::Printer::default()
            .escaping_controls()
            .with_paint(cli_edge::ColorChoice::Auto.for_stderr())
    })
}

/// The colours of stderr.
pub fn paint() -> cli_edge::Paint {
    printer().paint()
}

/// Writes one line on stderr, ignoring failures (a closed stderr must not crash a run), its control
/// characters escaped.
pub fn eprint_line(text: &str) {
    printer().eprint_line(text);
}

/// Writes text on stdout; a closed pipe (`delta run … | head`) is not an error worth reporting.
pub fn print_out(text: &str) {
    printer().print_out(text);
}

/// Writes text meant for a person on stdout (`--format text`), its control characters escaped
/// (line breaks and tabs kept): a model's or a tool's text in it never drives the terminal.
pub fn print_text(text: &str) {
    printer().print_text(text);
}

fn report(err: &CliError) -> ExitCode {
    printer().report(err)
}

/// Whether the command line's command is `run` or `continue` (whose JSON is a RunResult).
fn names_a_run(args: &[std::ffi::OsString]) -> bool {
    let mut words = args.iter().skip(1).map(|a| a.to_string_lossy());
    while let Some(word) = words.next() {
        if word == "--color" {
            words.next();
        } else if !word.starts_with('-') {
            return word == "run" || word == "continue";
        }
    }
    false
}

/// Runs `delta __sandboxed`: returns only when the program could not be started in the sandbox.
fn sandboxed(args: &[std::ffi::OsString]) -> ExitCode {
    let text: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let error = match text.as_slice() {
        [_, _, policy, workspace, dashes, argv @ ..] if dashes == "--" => {
            delta::sandbox::enter_and_exec(
                policy,
                std::path::Path::new(workspace),
                argv,
                &mut |warning| eprint_line(&format!("warning: {warning}")),
            )
        }
        _ => delta::sandbox::SandboxError::Filter(
            "usage: delta __sandboxed POLICY WORKSPACE -- PROGRAM [ARGS...]".into(),
        ),
    };
    eprint_line(&format!("error: {error}"));
    ExitCode::from(126)
}

/// The exit code of a command that ended without a run status to report.
fn done((): ()) -> ExitCode {
    Exit::Ok.into()
}

/// `delta man`: the page on stdout, or every command's page written into `-d DIR`.
fn man(args: cli_edge::ManArgs) -> Result<(), CliError> {
    print_out(&cli_edge::generated::man_output(Cli::command(), &args)?);
    Ok(())
}

/// The binary's internal commands, which delta starts itself: `__sandboxed POLICY WORKSPACE --
/// PROGRAM ARGS…` (a session's shell or a stdio MCP server entering the agent's sandbox, see
/// `delta::sandbox::command`) and `__mounts POLICY WORKSPACE` (the holder of a run's read-only
/// mounts). `None` for any other command line.
fn internal(args: &[std::ffi::OsString]) -> Option<ExitCode> {
    let command = args.get(1)?;
    if command == delta::sandbox::ENTER_COMMAND {
        return Some(sandboxed(args));
    }
    if command != delta::sandbox::HOLD_COMMAND {
        return None;
    }
    let Some([policy, workspace]) = args.get(2..4) else {
        eprint_line("error: usage: delta __mounts POLICY WORKSPACE");
        return Some(ExitCode::from(2));
    };
    Some(
        match delta::sandbox::hold_enter(&policy.to_string_lossy(), std::path::Path::new(workspace))
        {
            Ok(user) => {
                print_out(&format!("{}\n", delta::sandbox::ready_line(user)));
                // The namespaces are held until delta has opened them and closes this pipe.
                let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprint_line(&format!("error: {e}"));
                ExitCode::from(1)
            }
        },
    )
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // Installed as `delta-sessions` (a link to this binary), delta is the sessions tool.
    let invoked_as = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned());
    if invoked_as.as_deref() == Some("delta-sessions") {
        return sessions::compat_main(args);
    }
    if let Some(code) = internal(&args) {
        return code;
    }
    if args.len() == 1 {
        let _ = Cli::command().print_help();
        return ExitCode::SUCCESS;
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            // With --format json (or stream-json) a script reads stdout: it gets the error too,
            // in the shape of the command's result (a run's RunResult; any other's error object).
            if e.use_stderr() && cli_edge::asks_for_json(&args) {
                let usage = CliError::from_clap(&e);
                let object = if names_a_run(&args) {
                    result::error_json(&usage)
                } else {
                    usage.to_json()
                };
                print_out(&format!("{object}\n"));
            }
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { Exit::Usage as u8 } else { 0 });
        }
    };
    let _ = PRINTER.set(
        cli_edge::Printer::default()
            .escaping_controls()
            .with_paint(cli.color.color.for_stderr()),
    );
    if matches!(
        cli.command,
        Command::Run(_) | Command::Continue(_) | Command::Worker(_)
    ) && let Err(err) = terminal::install_signal_handlers()
    {
        return report(&err);
    }
    // A panic is a bug: its message is printed by the default hook, and the exit code says "internal
    // error" rather than the 101 Rust gives panics, which means "waiting for an answer" here.
    let dispatched = std::panic::catch_unwind(|| match cli.command {
        Command::Run(args) => run::cmd_run(args).map(ExitCode::from),
        Command::Continue(args) => continue_cmd::cmd_continue(args).map(ExitCode::from),
        Command::ListRuns(args) => list_runs::cmd_list_runs(args).map(done),
        Command::Show(args) => show::cmd_show(args).map(done),
        Command::Rm(args) => rm::cmd_rm(args).map(done),
        Command::Init(args) => init::cmd_init(args).map(done),
        Command::ToolExpand(args) => tool_expand::cmd_tool_expand(args).map(done),
        Command::Tools(args) => tools::cmd_tools(args).map(done),
        Command::Compact(args) => compact::cmd_compact(args).map(done),
        // Sessions print their own errors, as the original delta-sessions did.
        Command::Sessions(args) => Ok(sessions::cmd_sessions(args)),
        Command::Submit(args) => fleet::cmd_submit(args).map(done),
        Command::Worker(args) => fleet::cmd_worker(args).map(ExitCode::from),
        Command::Export(args) => fleet::cmd_export(args).map(done),
        Command::Import(args) => fleet::cmd_import(args).map(done),
        Command::Mcp(args) => mcp::cmd_mcp(args).map(ExitCode::from),
        Command::Completions(args) => {
            let script = cli_edge::generated::completions_output(Cli::command(), &args)?;
            print_out(&String::from_utf8_lossy(&script));
            Ok(ExitCode::SUCCESS)
        }
        Command::Man(args) => man(args).map(done),
    });
    let Ok(result) = dispatched else {
        eprint_line(
            "error: delta failed unexpectedly (an internal error, not a run status); please report it with the message above",
        );
        return Exit::Internal.into();
    };
    match result {
        Ok(code) => code,
        // A run's error object (its RunResult) is printed by the run; any other command asked for
        // JSON gets the error's object, so that `--format json` always leaves one on stdout.
        Err(err) => printer().report_as(&err, cli_edge::asks_for_json(&args)),
    }
}
