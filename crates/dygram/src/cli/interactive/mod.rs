//! `dygram execute -i`: one unit of work per call, the execution saved under
//! `.dygram/executions/<id>/`. Opening, creating, advancing and committing executions are the
//! library's ([`dygram_runtime::session::Session`]); this module turns the arguments into a call, gives
//! the library what only the binary has (compiling with diagnostics, API clients, stderr), and
//! reports.

mod errors;
mod report;

use std::io::IsTerminal;

use std::path::Path;
use std::sync::Arc;

use dygram_runtime::executor::Listener;
use dygram_runtime::session::shared::{SharedCall, SharedStore};
use dygram_runtime::session::{
    Advance, CallRequest, ClientConfig, CompiledMachine, Executions, Host, ManualInput, Notice,
    Opening, Session, SourceFlags, Unit,
};

use super::client;
use super::execute::ExecuteArgs;
use super::input::Input;
use super::live::{Live, Shows};
use super::{CliError, Exit, eprint_line, input};
pub use errors::shared_error;
use errors::{call_error, source_lost};
use report::{Saved, Shown, exit_for, finish_already, print_report};

pub fn run(args: ExecuteArgs) -> Result<Exit, CliError> {
    let store_url = store_url(&args)?;
    // A wrong playback folder is reported before anything is created.
    if let Some(dir) = &args.llm.playback {
        client::open_playback(dir)?;
    }
    let input = input::read(&args.file, true)?;
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::new(format!("cannot read the current folder: {e}")))?;
    let mut manual = if args.file == Path::new("-") || std::io::stdin().is_terminal() {
        ManualInput::none()
    } else {
        ManualInput::start(std::io::stdin())
    };
    let mut host = CliHost {
        args: &args,
        input: &input,
        live: (!args.verbosity.quiet).then(|| Live::start(Shows::now(super::paint(), false))),
    };
    let request = call_request(&args, &input);
    let called = match store_url {
        Some(url) => call_shared(url, &cwd, request, &mut host, &mut manual),
        None => call_files(&cwd, request, &mut host, &mut manual),
    };
    if let Some(live) = &host.live {
        live.finish();
    }
    let called = called?;
    let Some((mut session, advance, saved)) = called else {
        return Err(super::invalid_machine());
    };
    let Some(shown) = Shown::of(&session, saved) else {
        return Ok(Exit::Failed);
    };
    let exit = match advance {
        Advance::AlreadyFinished => finish_already(&args, &shown),
        Advance::Done(report) => {
            print_report(&args, &report, &shown);
            if let Some(unread) = manual.at_end() {
                eprint_line(&unread.note());
            }
            exit_for(report.status, report.waiting.is_some())
        }
    };
    // The process ends here: tearing down the machine's data structures one by one would only
    // cost time.
    std::mem::forget(session.take_state());
    Ok(exit)
}

/// A call made: the session, what its unit of work did, and where it was saved (`None`: the
/// machine has errors, shown).
type Called = Option<(Box<Session>, Advance, Saved)>;

/// The call on `.dygram/executions/` of the current folder.
fn call_files(
    cwd: &Path,
    request: CallRequest,
    host: &mut CliHost<'_>,
    manual: &mut ManualInput,
) -> Result<Called, CliError> {
    let store = Executions::under(cwd).with_redactor(super::secrets());
    let opening = Session::open(request, &store, host, manual);
    let mut session = match opening.map_err(|e| call_error(e, None))? {
        Opening::Ready(session) => session,
        Opening::Invalid => return Ok(None),
    };
    let advance = session
        .advance(host, &store, manual)
        .map_err(|e| call_error(e, Some(session.metadata())))?;
    Ok(Some((session, advance, Saved::Folder)))
}

/// The call on an execution shared through the store at `url` (the library takes the lease,
/// works on a private copy and uploads it).
fn call_shared(
    url: &str,
    cwd: &Path,
    request: CallRequest,
    host: &mut CliHost<'_>,
    manual: &mut ManualInput,
) -> Result<Called, CliError> {
    let store = SharedStore::connect(url, cwd)
        .map_err(shared_error)?
        .with_redactor(super::secrets());
    match store
        .call(request, host, manual)
        .map_err(|e| call_error(e, None))?
    {
        SharedCall::Invalid => Ok(None),
        SharedCall::Done { session, advance } => Ok(Some((session, *advance, Saved::Store))),
    }
}

/// `--store` (or `DYGRAM_STORE`), checked: a PostgreSQL URL, given with `--id`.
fn store_url(args: &ExecuteArgs) -> Result<Option<&str>, CliError> {
    let Some(url) = args.store.as_deref() else {
        return Ok(None);
    };
    check_store_url(url)?;
    if args.id.is_none() {
        return Err(CliError::usage(
            "--store needs --id: an execution in a store is shared by name, never found as the last one",
        )
        .hint("add --id NAME, the same name on every machine that advances the execution"));
    }
    Ok(Some(url))
}

/// A usage error unless `url` is a PostgreSQL URL or a folder's (the value is not repeated: it
/// may hold a password).
fn check_store_url(url: &str) -> Result<(), CliError> {
    if url.starts_with("postgres://")
        || url.starts_with("postgresql://")
        || url.starts_with("file:///")
    {
        return Ok(());
    }
    Err(CliError::usage(
        "--store (or DYGRAM_STORE) takes a PostgreSQL URL starting with postgres:// or postgresql://, or a folder as file:///path",
    )
    .hint("e.g. --store postgresql://dygram@db.example.com/dygram; a Unix socket's folder is the host, percent-encoded: postgresql://postgres@%2Fvar%2Frun%2Fpostgresql/postgres; or --store file:///shared/dygram-store on storage every caller reaches"))
}

/// The shared executions of the store at `url` (for `exec list --store`).
pub fn shared_store(url: &str) -> Result<SharedStore, CliError> {
    check_store_url(url)?;
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::new(format!("cannot read the current folder: {e}")))?;
    SharedStore::connect(url, &cwd).map_err(shared_error)
}

/// The call the arguments ask for.
fn call_request(args: &ExecuteArgs, input: &Input) -> CallRequest {
    let unit = if args.step {
        Unit::Step
    } else if args.step_path {
        Unit::Path
    } else {
        Unit::Turn
    };
    CallRequest {
        id: args.id.clone(),
        force: args.force,
        unit,
        sources: SourceFlags {
            queue: args.queue,
            playback: args.llm.playback.clone(),
            record: args.llm.record.clone(),
            model: args.llm.model.clone(),
            max_tokens: args.llm.max_tokens,
            // The default provider does not replace the execution's.
            provider: (args.llm.provider != llm::Provider::Anthropic).then_some(args.llm.provider),
        },
        queue_timeout: std::time::Duration::from_secs(args.queue_timeout),
        machine_text: input.text.clone(),
        machine_file: input.path.as_ref().map(|p| p.display().to_string()),
        result: args.destination.clone().map(|dir| (dir, input.stem())),
    }
}

/// What the library gets from the binary: compiling with diagnostics on stderr, the API clients
/// of `client.rs`, and the progress lines.
struct CliHost<'a> {
    args: &'a ExecuteArgs,
    input: &'a Input,
    /// The model's text as it streams in, the waiting line and retries (none with -q).
    live: Option<Arc<Live>>,
}

impl CliHost<'_> {
    /// Prints progress on stderr unless `-q`.
    fn say(&self, line: &str) {
        if !self.args.verbosity.quiet {
            eprint_line(line);
        }
    }
}

impl Host for CliHost<'_> {
    type Error = CliError;

    fn compile(&mut self) -> Option<CompiledMachine> {
        let project = input::compile(self.input, self.args.no_imports);
        if input::show_diagnostics(&project, self.args.verbosity) > 0 {
            return None;
        }
        Some(CompiledMachine::of(&project))
    }

    fn connect(
        &self,
        config: &ClientConfig,
        (queue_dir, queue_timeout): (&Path, std::time::Duration),
        id: &str,
    ) -> Result<Option<llm::Connection>, CliError> {
        let on_retry = self.live.as_ref().map(Live::retry_hook);
        client::for_execution(config, queue_dir, queue_timeout, id, on_retry)
    }

    fn agents(
        &self,
        place: &dygram_runtime::session::AgentPlace,
    ) -> Option<Box<dyn dygram_runtime::agents::AgentDriver>> {
        // Agent folders are relative to the machine file (to the current folder for stdin).
        let base = match self.input.path.as_deref().and_then(Path::parent) {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        Some(Box::new(dygram::agent_nodes::DeltaAgents::new(
            base,
            place.clone(),
        )))
    }

    fn live(&mut self) -> Option<Listener<'static>> {
        let live = Arc::clone(self.live.as_ref().filter(|l| l.streams())?);
        Some(Box::new(move |event| live.event(event)))
    }

    fn api_configured(&self, config: &ClientConfig) -> bool {
        client::api_configured(config.provider())
    }

    fn default_model(&self, config: &ClientConfig) -> String {
        client::default_model(config.provider())
    }

    fn notice(&mut self, notice: Notice<'_>) {
        let paint = super::paint();
        match notice {
            Notice::StartedOver { previous, aside } => self.say(&format!(
                "Starting over: the previous execution {previous} was moved to {}",
                aside.display()
            )),
            Notice::Corrupted { reason, folder } => eprint_line(&paint.yellow(&format!(
                "⚠️  Warning: State file corrupted, starting fresh execution ({reason}; the old folder was kept as {})",
                folder.display()
            ))),
            Notice::SourceLost { id, now } => eprint_line(&paint.yellow(&source_lost(id, now))),
            Notice::Repaired { id, files } => self.say(&format!(
                "Note: the previous call on {id} was interrupted after it was saved; {} brought up to date",
                files.join(", ")
            )),
            Notice::Started { id, config } => {
                self.say(&paint.blue(&format!("⚡ Starting interactive execution: {id}")));
                if let Some(line) = config.start_line() {
                    self.say(&paint.dim(&format!("   {line}")));
                }
            }
            Notice::Resumed { id, config } => {
                let mode = config.resume_mode().map(|m| format!(" ({m})"));
                let line = format!("⚡ Resuming execution: {id}{}", mode.unwrap_or_default());
                self.say(&paint.blue(&line));
            }
            Notice::SeveralActive {
                machine_file,
                id,
                others,
            } => {
                if !self.args.verbosity.quiet {
                    eprint_line(&paint.yellow(&several_active(machine_file, id, others)));
                }
            }
            Notice::Unrepaired(e) => eprint_line(&paint.yellow(&format!(
                "⚠️  Warning: this call was saved, but a file derived from its state.json could not be written ({e}); the next call brings it up to date"
            ))),
        }
    }
}

/// The warning of a call without `--id` when other executions of its machine file are running.
fn several_active(machine_file: Option<&str>, id: &str, others: &[String]) -> String {
    let machine = machine_file.unwrap_or("the machine on standard input");
    format!(
        "⚠️  Warning: {machine} has {} active executions: {id} (this call's, the most recent), {}; --id NAME works on another",
        others.len() + 1,
        others.join(", ")
    )
}
