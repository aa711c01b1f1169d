//! What `run` and `continue` share: handing a request to the runner, the model connection, and
//! printing the runner's notices, errors and the stopped run.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use delta::agent::{Agent, AgentError};
use delta::connect::{self, ConnectError, Connection, LlmMode};
use delta::engine::{HumanInput, response_path};
use delta::env::Env;
use delta::metadata::RunStatus;
use delta::resume::Decision;
use delta::runner::{Finished, Host, Launching, Notice, Options, Request, Runner, RunnerError};
use delta::runs::Repair;
use store::{Clock, IdSource};

use super::console::Console;
use delta::run_result::ResultContext;

use super::result::{self, RunFormat};
use super::terminal::{self, TerminalHuman};
use super::{CliError, Exit, TEST_NOW_VAR, TEST_SEED_VAR, eprint_line, print_out, print_text};

/// How `run` and `continue` run: the flags they share.
pub struct Flags {
    pub max_iterations: Option<u32>,
    /// `-q`: no progress or notices on stderr, only errors (the result still goes to stdout).
    pub quiet: bool,
    pub model: Option<String>,
    /// `--sandbox MODE`.
    pub sandbox: Option<delta::sandbox::FsMode>,
    /// `--network on|off`.
    pub network: Option<bool>,
    /// `--approve all`, `--permissions FILE`.
    pub approvals: delta::runner::Approvals,
    pub interactive: bool,
    pub verbose: bool,
    pub format: RunFormat,
    pub mode: LlmMode,
    /// `continue --adopt`: take a run without a seal as it is.
    pub adopt: bool,
}

/// `--sandbox MODE` and `--network on|off`: the sandbox for this call, instead of the agent's.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SandboxArgs {
    /// The filesystem sandbox of the agent's tools and hooks for this call: read-only,
    /// workspace-write or off (default: agent.yaml's sandbox:).
    #[arg(long, value_name = "MODE", value_enum)]
    pub sandbox: Option<delta::sandbox::FsMode>,
    /// Whether the agent's tools may reach the network for this call: on or off.
    #[arg(long, value_name = "on|off", value_enum)]
    pub network: Option<Switch>,
    /// `all`: run every tool call without asking, whatever agent.yaml's permissions: say.
    #[arg(long, value_name = "all", value_parser = ["all"])]
    pub approve: Option<String>,
    /// A YAML file of permission rules (rules: [{tool, command, action}]) checked before the
    /// agent's.
    #[arg(long, value_name = "FILE")]
    pub permissions: Option<std::path::PathBuf>,
}

impl SandboxArgs {
    /// The approvals these flags ask for.
    pub fn approvals(&self) -> Result<delta::runner::Approvals, CliError> {
        let mut approvals = delta::runner::Approvals {
            all: self.approve.is_some(),
            rules: Vec::new(),
            default_at_least: None,
        };
        if let Some(file) = &self.permissions {
            approvals.rules = delta::agent::permissions::read_rules(file).map_err(|e| {
                CliError::new(e.to_string()).hint(
                    "the file holds rules: [{tool: GLOB, command: GLOB, action: allow|ask|deny}]",
                )
            })?;
        }
        Ok(approvals)
    }
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
}

impl Switch {
    pub fn is_on(self) -> bool {
        self == Self::On
    }
}

impl Flags {
    /// The answer source of `--record DIR` / `--playback DIR`.
    pub fn mode(record: Option<&std::path::Path>, playback: Option<&std::path::Path>) -> LlmMode {
        match (record, playback) {
            (_, Some(dir)) => LlmMode::Playback(dir.to_path_buf()),
            (Some(dir), None) => LlmMode::Record(dir.to_path_buf()),
            (None, None) => LlmMode::Live,
        }
    }
}

/// Turns an agent loading error into a CLI error.
pub fn agent_error(err: AgentError) -> CliError {
    let hint = err.hint();
    CliError::new(err.to_string()).maybe_hint(hint)
}

/// The test hooks: pinned clock and seeded ids.
pub fn clock_and_ids() -> Result<(Clock, IdSource), CliError> {
    let clock = Clock::from_env(TEST_NOW_VAR).map_err(|e| CliError::new(e.to_string()))?;
    let ids = IdSource::from_env(TEST_SEED_VAR).map_err(|e| CliError::new(e.to_string()))?;
    Ok((clock, ids))
}

/// Prints the notices of loading an agent.
pub fn show_agent(agent: &Agent, verbose: bool) {
    for w in &agent.warnings {
        eprint_line(&format!("warning: {w}"));
    }
    if verbose {
        eprint_line("Loaded tools:");
        for t in &agent.tools {
            eprint_line(&format!("  - {}: {}", t.name, t.display_command()));
        }
    }
}

/// The sandbox and permissions in force (`-v`): the agent's, as this call applies them.
fn show_policy(agent: &Agent) {
    match &agent.sandbox {
        Some(policy) if policy.confines() => {
            eprint_line(&format!("  Sandbox:        {}", policy.describe()));
        }
        _ => eprint_line(
            "  Sandbox:        none: the agent's tools run unsandboxed, with your rights (add sandbox: to agent.yaml, or --sandbox workspace-write)",
        ),
    }
    let permissions = delta::agent::policy::describe(agent);
    let permissions = permissions.split_once("; ").map_or("", |(_, p)| p);
    eprint_line(&format!("  Permissions:    {permissions}"));
}

/// Runs `request` and reports how the run stopped.
pub fn execute(
    request: Request,
    flags: &Flags,
    clock: Clock,
    ids: IdSource,
) -> Result<Exit, CliError> {
    drive(flags, clock, ids, |runner| {
        runner.run(request).map_err(runner_error)
    })
}

/// Hands a runner set up as the flags say to `go` (which runs it, or hands its parts on), and
/// reports how the run stopped.
pub fn drive(
    flags: &Flags,
    clock: Clock,
    ids: IdSource,
    go: impl FnOnce(Runner<'_>) -> Result<Finished, CliError>,
) -> Result<Exit, CliError> {
    let interrupt = terminal::install_signal_handlers()?;
    let tty = std::io::stderr().is_terminal();
    let mut console = Console::new(flags.verbose, flags.quiet, tty);
    let mut stream = delta::stream::StreamJson::new(|line| print_out(&format!("{line}\n")));
    let observer: &mut dyn delta::engine::Observer = if flags.format == RunFormat::StreamJson {
        &mut stream
    } else {
        &mut console
    };
    let mut human = TerminalHuman {
        interrupt: Arc::clone(&interrupt),
    };
    let mut host = CliHost::new(flags, clock);
    host.quiet = flags.quiet;
    let mut options = options(flags, clock, ids, interrupt);
    options.stream_text = tty && !flags.quiet && flags.format != RunFormat::StreamJson;
    let runner = Runner {
        options,
        observer,
        human: Some(&mut human as &mut dyn HumanInput),
        host: &mut host,
        tools: None,
    };
    let finished = go(runner)?;
    let code = finish(&finished, flags.format, flags.quiet);
    drop(finished.locks);
    Ok(code)
}

/// The runner's settings for the flags.
pub fn options(flags: &Flags, clock: Clock, ids: IdSource, interrupt: Arc<AtomicBool>) -> Options {
    Options {
        max_iterations: flags.max_iterations,
        pause_after: None,
        model: flags.model.clone(),
        sandbox: flags.sandbox,
        network: flags.network,
        approvals: flags.approvals.clone(),
        interactive: flags.interactive,
        env: Env::from_process(),
        cwd: std::env::current_dir().unwrap_or_default(),
        clock,
        ids,
        interrupt,
        last_workspace_record: delta::runs::last_workspace_file(),
        process_ends: true,
        upstream: None,
        stream_text: false,
        depth: 0,
        confine_as: None,
        adopt: flags.adopt,
    }
}

/// The runner's error as the user reads it.
pub fn runner_error(err: RunnerError) -> CliError {
    let hint = err.hint();
    let error = if err.is_usage() {
        CliError::usage(err.message())
    } else {
        CliError::new(err.message())
    };
    let error = error.maybe_hint(hint);
    if err.is_busy() {
        error.code(Exit::Busy)
    } else {
        error
    }
}

/// Prints the notices and connects the way the flags say.
pub struct CliHost<'a> {
    flags: &'a Flags,
    clock: Clock,
    /// Only warnings and connection notes (a worker's runs are reported a line each).
    pub quiet: bool,
}

impl<'a> CliHost<'a> {
    /// A host for the flags.
    pub fn new(flags: &'a Flags, clock: Clock) -> Self {
        Self {
            flags,
            clock,
            quiet: false,
        }
    }
}

impl Host for CliHost<'_> {
    fn notice(&mut self, notice: Notice<'_>) {
        // `-q`: errors only (an agent's warnings and every note included).
        if self.quiet {
            return;
        }
        match notice {
            Notice::UsingLastWorkspace { workspace, record } => eprint_line(&format!(
                "Using the last workspace: {} (recorded in {record})",
                workspace.display()
            )),
            Notice::ResumeFound {
                run_id,
                status,
                crashed,
                decision,
                workspace,
            } => announce_resume(run_id, status, crashed, decision, workspace),
            Notice::Continuing { decision, response } => match decision {
                Decision::Answer(_) => {
                    eprint_line(&format!("Response written to: {}", response.display()));
                }
                Decision::AnswerFromFile => {
                    eprint_line(&format!("Using the response in {}", response.display()));
                }
                Decision::Extend {
                    status: RunStatus::Failed,
                    ..
                } => eprint_line("Retrying the FAILED run with the new message..."),
                Decision::Extend { .. } => eprint_line("Extending the COMPLETED conversation..."),
                Decision::Resume { .. } | Decision::StartNew => {}
            },
            Notice::Repaired {
                run_id,
                repair: Repair::Ended { was },
                now,
            } => eprint_line(&format!(
                "Run {run_id} had ended ({now}) though its metadata.json said {was}: its process \
                 stopped between journaling the end and saving the metadata. metadata.json was \
                 repaired from the journal."
            )),
            Notice::Repaired {
                run_id,
                repair: Repair::Rebuilt { damage },
                now,
            } => eprint_line(&format!(
                "Run {run_id}: {damage}; it was rebuilt from the journal (status {now})."
            )),
            Notice::Forked {
                new_id,
                from,
                iteration,
            } => eprint_line(&format!(
                "Forked run {new_id} from {from} at iteration {iteration}."
            )),
            Notice::AgentLoaded(agent) => show_agent(agent, self.flags.verbose),
            Notice::WorkspaceCreated {
                name: Some(name), ..
            } => eprint_line(&format!("Creating new workspace: {name}")),
            Notice::WorkspaceCreated { name: None, path } => {
                eprint_line(&format!("Created work directory: {}", path.display()));
            }
            Notice::EnvIgnored { file, names } => eprint_line(&format!(
                "warning: ignored {} from {}: the run's tools can write a file inside the \
                 workspace, so it configures neither delta nor a program's loader (set them in \
                 the environment or the agent's .env)",
                names.join(", "),
                file.display()
            )),
            Notice::Launching(launching) => {
                banner(launching);
                if self.flags.verbose {
                    show_policy(launching.agent);
                }
                if self.flags.format == RunFormat::StreamJson {
                    print_out(&format!("{}\n", delta::stream::started(launching)));
                }
            }
        }
    }

    fn records_or_replays(&self) -> bool {
        !matches!(self.flags.mode, LlmMode::Live)
    }

    fn connect(
        &mut self,
        agent: &Agent,
        env: &Env,
        ids: IdSource,
    ) -> Result<Connection, ConnectError> {
        let conn = connect::connect(
            &agent.llm,
            env,
            &self.flags.mode,
            (!self.quiet).then(retry_printer),
            self.clock,
            ids,
        )?;
        if !self.quiet {
            for notice in &conn.notices {
                eprint_line(&format!("note: {notice}"));
            }
        }
        Ok(conn)
    }
}

/// The retry notice printer handed to the LLM client.
fn retry_printer() -> llm::RetryHook {
    Arc::new(|n: &llm::RetryNotice| {
        eprint_line(&format!(
            "⏳ LLM request failed ({}); retrying in {:.1} s (attempt {} of {})",
            n.error,
            n.delay.as_secs_f64(),
            n.attempt + 1,
            n.max_attempts
        ));
    })
}

/// Says which run `delta run -w` resumes and what becomes of its message.
fn announce_resume(
    run_id: &str,
    status: RunStatus,
    crashed: bool,
    decision: &Decision,
    ws: &std::path::Path,
) {
    let died = if crashed { ", its process died" } else { "" };
    let what = match decision {
        Decision::Answer(_) => "the message given with -m answers its question",
        Decision::Resume { message: Some(_) } => {
            "resuming it; the message given with -m is added to it once its pending calls have \
             their results"
        }
        _ => "resuming it",
    };
    eprint_line(&format!(
        "Found a resumable run {run_id} ({status}{died}): {what}."
    ));
    eprint_line(&format!(
        "note: to start a new run here instead, give it an id: delta run -w {} --run-id NEW -m \"...\"",
        ws.display()
    ));
}

/// The lines printed as the loop starts.
fn banner(l: &Launching<'_>) {
    match l.resuming {
        Some(status) => eprint_line(&format!("Resuming run {} ({status})...", l.run_id)),
        None => eprint_line("Starting delta..."),
    }
    eprint_line(&format!(
        "  Agent:          {} {} ({})",
        l.agent.name,
        l.agent.version,
        l.agent.dir.display()
    ));
    eprint_line(&format!("  Work directory: {}", l.workspace.display()));
    eprint_line(&format!("  Run ID:         {}", l.run_id));
    eprint_line(&format!(
        "  Model:          {} via {}",
        l.agent.llm.model.as_deref().unwrap_or("(server default)"),
        l.endpoint
    ));
    let sessions = if l.agent.sessions {
        " + 3 session tools"
    } else {
        ""
    };
    eprint_line(&format!(
        "  Tools:          {}{sessions}",
        l.agent.tools.len()
    ));
    if !l.agent.mcp_servers.is_empty() {
        let names: Vec<&str> = l
            .agent
            .mcp_servers
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        eprint_line(&format!(
            "  MCP servers:    {} (their tools are offered once they start)",
            names.join(", ")
        ));
    }
    eprint_line(&format!("  Max iterations: {}", l.max_iterations));
    for file in l.env_files {
        eprint_line(&format!("  Environment:    {}", file.display()));
    }
    if let Some(note) = l.recovered {
        eprint_line(&format!("warning: {note}; it is resumed as INTERRUPTED"));
    }
}

/// Hands the facts a run's result object tells beside its outcome (agent, model, workspace, the
/// answer file) to `render`.
pub fn with_result_context<T>(f: &Finished, render: impl FnOnce(&ResultContext<'_>) -> T) -> T {
    let ws = f.workspace.display().to_string();
    let response_file = response_path(&f.run).display().to_string();
    render(&ResultContext {
        agent_name: &f.agent.name,
        model: f.agent.llm.model.as_deref(),
        workspace: &ws,
        response_file: &response_file,
        priced: f.priced,
    })
}

/// Prints what a stopped run means and how to go on (stderr), then the result (stdout).
fn finish(f: &Finished, format: RunFormat, quiet: bool) -> Exit {
    let outcome = &f.outcome;
    let ws = f.workspace.display().to_string();
    if !quiet {
        tell_how_it_ended(f, &ws);
    }
    let rendered = with_result_context(f, |ctx| result::render(format, outcome, ctx));
    match format {
        RunFormat::Text => print_text(&rendered),
        _ => print_out(&rendered),
    }
    match outcome.status {
        RunStatus::Completed => Exit::Ok,
        RunStatus::WaitingForInput => Exit::Waiting,
        RunStatus::Interrupted => Exit::Interrupted,
        RunStatus::Failed | RunStatus::Running => Exit::Error,
    }
}

/// Says on stderr how the run stopped and what to do next.
fn tell_how_it_ended(f: &Finished, ws: &str) {
    let outcome = &f.outcome;
    match outcome.status {
        RunStatus::Completed => match outcome.reason {
            None => eprint_line("\n✨ Agent completed successfully."),
            Some(reason) => eprint_line(&format!(
                "\n⚠️  Agent completed without a final answer: {}.",
                reason.describe()
            )),
        },
        RunStatus::Failed => eprint_line(&format!(
            "\nerror: the run failed: {}",
            outcome.error.as_deref().unwrap_or("unknown error")
        )),
        RunStatus::WaitingForInput => {
            eprint_line("\n🔔 Agent paused and is waiting for your input.");
            if let Some(i) = &outcome.interaction {
                eprint_line(&format!("   Prompt: {}", i.prompt));
            }
            eprint_line(&format!(
                "   Answer with: delta continue -w {ws} -m \"<your answer>\""
            ));
            eprint_line(&format!(
                "   (or write it to {} and run: delta continue -w {ws})",
                response_path(&f.run).display()
            ));
        }
        RunStatus::Interrupted => {
            eprint_line("\nRun interrupted.");
            eprint_line(&format!("   Resume with: delta continue -w {ws}"));
        }
        RunStatus::Running => {}
    }
    eprint_line(&format!("   Journal: {}", f.run.journal().display()));
}
