//! `delta sessions` (also the whole of the `delta-sessions` binary, a link to delta): persistent
//! shell sessions for scripts and agents.
//!
//! Outputs follow the original `delta-sessions`: JSON objects on stdout, `exec` prints the
//! command's output raw and exits with its code, errors are `Error: <message>` on stderr with exit 1.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use delta::shells::{self, SessionStatus, ShellError, ShellSessions, StartOptions};
use serde_json::json;

const SESSIONS_HELP: &str = "\
A session keeps one shell alive between calls: `cd` and `export` in one exec hold for the next, and
background jobs keep running. With --pty the session runs an interactive program (python3, sqlite3)
on a pseudo-terminal; exec sends it one line and prints what it answered (read until it is quiet).

Examples:
  id=$(delta sessions start | jq -r .session_id)
  echo 'cd /tmp && export GREETING=hi' | delta sessions exec \"$id\"
  echo 'pwd; echo $GREETING' | delta sessions exec \"$id\"      # /tmp, hi
  delta sessions start --pty --id py python3 && echo 'x = 41' | delta sessions exec py
  delta sessions end \"$id\" && delta sessions cleanup

Exit codes: exec exits with the command's own code (124 when --timeout stopped it); every other
command 0, or 1 with `Error: <message>` on stderr.";

/// Persistent shell sessions: start, exec, end, list, cleanup.
#[derive(Debug, clap::Args)]
#[command(after_help = SESSIONS_HELP)]
pub struct SessionsArgs {
    /// Folder of the sessions.
    #[arg(long, global = true, value_name = "DIR", default_value = shells::DEFAULT_DIR)]
    sessions_dir: PathBuf,
    #[command(subcommand)]
    command: SessionsCommand,
}

#[derive(Debug, Subcommand)]
enum SessionsCommand {
    /// Start a session; prints {session_id, command, work_dir, status}.
    Start {
        /// The shell to run (bash, sh, dash, zsh, ksh), or with --pty any command line.
        command: Option<String>,
        /// With --pty, the program's arguments; without it, ignored (as the original did).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
        /// A name for the session (default: sess_<8 hex digits>).
        #[arg(long, value_name = "NAME")]
        id: Option<String>,
        /// Run the command on a pseudo-terminal (an interactive program).
        #[arg(long)]
        pty: bool,
    },
    /// Run the command read from stdin in session ID; prints its output, exits with its code.
    Exec {
        id: String,
        /// Stop the command after SECS seconds (the session's process is started again next time).
        #[arg(long, value_name = "SECS")]
        timeout: Option<f64>,
    },
    /// End session ID (its process stops; its folder stays until cleanup).
    End { id: String },
    /// List the sessions as a JSON array.
    List,
    /// Remove the folders of ended sessions; prints {cleaned: [ids]}.
    Cleanup,
    /// Internal: the host process of one session.
    #[command(name = "__host", hide = true)]
    Host {
        dir: PathBuf,
        #[arg(long)]
        rebuild: bool,
        /// The sandbox of the session's process (JSON), from the run that drives it.
        #[arg(long, value_name = "POLICY", requires = "workspace")]
        sandbox: Option<String>,
        /// The workspace that sandbox is for.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
}

/// The `delta-sessions` binary: the same commands at the top level.
#[derive(Debug, Parser)]
#[command(
    name = "delta-sessions",
    disable_version_flag = true,
    max_term_width = 100,
    after_help = SESSIONS_HELP
)]
struct CompatCli {
    /// Print the version.
    #[arg(short = 'v', long = "version")]
    version: bool,
    /// Folder of the sessions.
    #[arg(long, global = true, value_name = "DIR", default_value = shells::DEFAULT_DIR)]
    sessions_dir: PathBuf,
    #[command(subcommand)]
    command: Option<SessionsCommand>,
}

/// Runs `delta-sessions ARGS` as the original binary did.
pub fn compat_main(args: Vec<std::ffi::OsString>) -> ExitCode {
    let cli = match CompatCli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) if e.kind() == clap::error::ErrorKind::InvalidSubcommand => {
            let word = args
                .iter()
                .skip(1)
                .map(|a| a.to_string_lossy())
                .find(|a| !a.starts_with('-'))
                .unwrap_or_default();
            eprintln!("Unknown command: {word}\nRun 'delta-sessions --help' for usage.");
            return ExitCode::from(1);
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 1 } else { 0 });
        }
    };
    if cli.version {
        println!("delta-sessions v{}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    match cli.command {
        Some(command) => cmd_sessions(SessionsArgs {
            sessions_dir: cli.sessions_dir,
            command,
        }),
        None => {
            let _ = <CompatCli as clap::CommandFactory>::command().print_help();
            ExitCode::SUCCESS
        }
    }
}

/// Runs one `delta sessions` command.
pub fn cmd_sessions(args: SessionsArgs) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("Error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: SessionsArgs) -> Result<ExitCode, ShellError> {
    let cwd = std::env::current_dir().map_err(|source| ShellError::Io {
        path: PathBuf::from("."),
        source,
    })?;
    let host_program = std::env::current_exe().map_err(|source| ShellError::Io {
        path: PathBuf::from("/proc/self/exe"),
        source,
    })?;
    let sessions = ShellSessions::new(
        cwd.join(&args.sessions_dir),
        host_program,
        std::env::vars().collect(),
    );
    match args.command {
        SessionsCommand::Start {
            command,
            args: rest,
            id,
            pty,
        } => {
            let command = match (command, pty) {
                (Some(c), true) if !rest.is_empty() => Some(
                    std::iter::once(c)
                        .chain(rest.iter().map(|a| shells::shell::word(a)))
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
                (command, _) => command,
            };
            let meta = sessions.start(&StartOptions {
                command,
                id,
                pty,
                work_dir: cwd,
                owner_run: std::env::var("DELTA_RUN_ID").ok().filter(|r| !r.is_empty()),
            })?;
            print_json(&json!({
                "session_id": meta.session_id,
                "command": meta.command,
                "work_dir": meta.work_dir,
                "status": meta.status,
            }));
        }
        SessionsCommand::Exec { id, timeout } => return exec(&sessions, &id, timeout),
        SessionsCommand::End { id } => {
            let meta = sessions.end(&id)?;
            print_json(&json!({"status": meta.status, "session_id": meta.session_id}));
        }
        SessionsCommand::List => {
            let list: Vec<_> = sessions
                .list()?
                .into_iter()
                .map(|(meta, alive)| {
                    let mut entry = json!({
                        "session_id": meta.session_id,
                        "command": meta.command,
                        "status": meta.status,
                        "created_at": meta.created_at,
                    });
                    if let Some(at) = &meta.last_executed_at {
                        entry["last_executed_at"] = json!(at);
                    }
                    entry["execution_count"] = json!(meta.execution_count);
                    entry["pty"] = json!(meta.pty);
                    entry["alive"] = json!(alive && meta.status == SessionStatus::Active);
                    entry
                })
                .collect();
            print_json(&json!(list));
        }
        SessionsCommand::Cleanup => {
            print_json(&json!({"cleaned": sessions.cleanup()?}));
        }
        SessionsCommand::Host {
            dir,
            rebuild,
            sandbox,
            workspace,
        } => {
            let sandbox = match sandbox.as_deref().map(serde_json::from_str) {
                None => None,
                Some(Ok(policy)) => workspace.map(|ws| (policy, ws)),
                Some(Err(e)) => {
                    return Err(ShellError::Protocol(
                        dir.display().to_string(),
                        format!("bad sandbox policy: {e}"),
                    ));
                }
            };
            shells::host::run(&dir, rebuild, sandbox)?
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn exec(sessions: &ShellSessions, id: &str, timeout: Option<f64>) -> Result<ExitCode, ShellError> {
    let mut command = String::new();
    std::io::stdin()
        .read_to_string(&mut command)
        .map_err(|source| ShellError::Io {
            path: PathBuf::from("<stdin>"),
            source,
        })?;
    if command.trim().is_empty() {
        eprintln!("Error: No command provided (stdin is empty)");
        return Ok(ExitCode::from(1));
    }
    let timeout = timeout
        .filter(|t| t.is_finite() && *t > 0.0)
        .map(Duration::from_secs_f64);
    let out = sessions.exec(id, &command, timeout, None)?;
    if let Some(note) = &out.rebuilt {
        eprintln!("[delta-sessions] {note}");
    }
    let _ = std::io::stdout().write_all(&out.stdout);
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().write_all(&out.stderr);
    if out.timed_out {
        eprintln!("[delta-sessions] the command timed out; the session's process was stopped");
    }
    for (stream, dropped) in ["output", "error output"].iter().zip(out.dropped) {
        if dropped > 0 {
            eprintln!(
                "[delta-sessions] the command's {stream} was cut at {} MiB; {dropped} more bytes were dropped",
                delta::process::MAX_CAPTURE >> 20
            );
        }
    }
    Ok(ExitCode::from(out.exit_code.clamp(0, 255) as u8))
}

fn print_json(value: &serde_json::Value) {
    super::print_out(&format!(
        "{}\n",
        serde_json::to_string_pretty(value).unwrap_or_default()
    ));
}
