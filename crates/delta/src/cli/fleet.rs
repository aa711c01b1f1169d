//! The commands of runs kept in a shared store: `submit`, `worker`, `export`, `import`, and the
//! `--store` forms of `continue` and `list-runs`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::Args;
use delta::engine::{Observer, Silent};
use delta::fleet::admin::{self, StoreRun};
use delta::fleet::upstream::Loss;
use delta::fleet::work::{Ask, Parts, Settings, Worked, continue_run};
use delta::fleet::worker::{self, Crew, WorkerConfig, WorkerEvent};
use delta::fleet::{self, FleetError, Submission};
use delta::runner::{Host, Options, Runner};
use delta::{agent, runs};
use store::{Clock, IdSource, RunStore};

use super::console::Console;
use super::report::{self, CliHost, Flags, agent_error, clock_and_ids};
use super::result::Format;
use super::terminal;
use super::{CliError, Exit, eprint_line, print_out, print_text};

/// The store flag every command of this module takes.
#[derive(Debug, Args)]
pub struct StoreArg {
    /// The store: a PostgreSQL URL (postgres://user@host/db), or a folder every worker reaches
    /// (file:///shared/delta-store). Also DELTA_STORE.
    #[arg(long, value_name = "URL", env = "DELTA_STORE")]
    pub store: String,
}

/// Where working copies are made when a run has none this process can use.
const DEFAULT_COPIES: &str = "delta-runs";

/// The CLI error of a fleet error.
pub fn fleet_error(e: FleetError) -> CliError {
    let (hint, usage, busy) = (e.hint(), e.is_usage(), e.is_busy());
    let error = match e {
        FleetError::Runner(inner) => return report::runner_error(*inner),
        e if usage => CliError::usage(e.to_string()),
        e => CliError::from_error(e),
    };
    let error = error.maybe_hint(hint);
    if busy { error.code(Exit::Busy) } else { error }
}

/// Connects to the store.
fn open(store: &StoreArg) -> Result<Arc<dyn RunStore>, CliError> {
    fleet::open(&store.store).map_err(fleet_error)
}

/// Queue a run for the workers of a store.
///
/// The run is created in the store and waits until a `delta worker` claims it. Its id is printed as
/// the last line of stdout. The agent folder (and the workspace, if given) must be reachable at the
/// same path by every worker: shared storage, or the same layout on every machine.
///
/// Examples:
///   delta submit --store postgres://db/delta --agent ./agent -m "Summarise notes.txt"
///   ID=$(delta submit --agent /shared/agent -m "task" | tail -n1)   # DELTA_STORE set
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct SubmitArgs {
    #[command(flatten)]
    store: StoreArg,

    /// Agent folder (agent.yaml, system_prompt.md, ...).
    #[arg(short = 'a', long, value_name = "PATH", default_value = ".")]
    agent: PathBuf,

    /// The task ("-": read it from standard input).
    #[arg(short = 'm', long, value_name = "TEXT")]
    message: String,

    /// The model to ask instead of the agent's llm.model (also DELTA_MODEL).
    #[arg(long, value_name = "NAME", env = "DELTA_MODEL")]
    model: Option<String>,

    /// Workspace every worker reaches (shared storage); default: one the worker creates per run.
    #[arg(short = 'w', long = "work-dir", value_name = "PATH")]
    work_dir: Option<PathBuf>,

    /// Id for the run (letters, digits, '-', '_', '.'); refused if the store has it already.
    #[arg(long, value_name = "ID")]
    run_id: Option<String>,

    /// Iteration budget (default: the agent's max_iterations).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_iterations: Option<u32>,
}

pub fn cmd_submit(args: SubmitArgs) -> Result<(), CliError> {
    let message = super::message_arg(Some(args.message))?.unwrap_or_default();
    if message.trim().is_empty() {
        return Err(CliError::usage("the task (-m) is empty")
            .hint("delta submit --agent <path> -m \"your task\""));
    }
    let (clock, ids) = clock_and_ids()?;
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::new(format!("cannot read the current folder: {e}")))?;
    let loaded = agent::load(&args.agent).map_err(agent_error)?;
    let submission = Submission {
        agent: loaded.dir.clone(),
        task: message,
        model: args.model,
        workspace: args.work_dir.map(|w| cwd.join(w)),
        max_iterations: args.max_iterations,
        submitted: delta::events::timestamp(clock.now()),
    };
    let store = open(&args.store)?;
    let id = fleet::submit(&*store, &submission, args.run_id.as_deref(), clock, &ids)
        .map_err(fleet_error)?;
    eprint_line(&format!("Queued run {id}"));
    print_out(&format!("{id}\n"));
    Ok(())
}

/// Claim queued runs of a store and run them, until stopped (SIGINT/SIGTERM).
///
/// Each of --concurrency slots claims the oldest queued run nobody holds, runs the ordinary loop on
/// it and renews its lease while it works. A run whose worker died or was cut off is taken over once
/// its lease has run out, and resumed with the rules of a local crash. A worker whose lease was taken
/// over stops its tool and gives the run up: it never writes after its successor. Stopping a worker
/// interrupts its runs and puts them back in the queue.
///
/// Examples:
///   delta worker --store postgres://db/delta --concurrency 4
///   delta worker --exit-when-done      # DELTA_STORE set: work the batch, then stop
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct WorkerArgs {
    #[command(flatten)]
    store: StoreArg,

    /// Runs worked on at once.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    concurrency: u16,

    /// Seconds a lease holds without renewal: a dead worker's run is taken over after this.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    lease: f64,

    /// Where working copies are made for runs submitted without a workspace.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_COPIES)]
    dir: PathBuf,

    /// Milliseconds an idle slot waits before looking at the queue again.
    #[arg(long, value_name = "MS", default_value_t = 500)]
    poll_ms: u64,

    /// Stop once no run of the store is queued or being worked on.
    #[arg(long)]
    exit_when_done: bool,

    /// Show each run's progress on stderr.
    #[arg(short, long)]
    verbose: bool,

    /// Answer from recordings in DIR instead of calling an LLM.
    #[arg(long, value_name = "DIR")]
    playback: Option<PathBuf>,
}

/// What the worker hands each run: the CLI's host and console.
struct CliCrew<'a> {
    flags: &'a Flags,
    clock: Clock,
    ids: std::sync::Mutex<IdSource>,
}

impl Crew for CliCrew<'_> {
    fn options(&self) -> Options {
        let ids = match self.ids.lock() {
            Ok(ids) => IdSource::seeded(ids.next_u64()),
            Err(_) => IdSource::random(),
        };
        let mut options = report::options(
            self.flags,
            self.clock,
            ids,
            Arc::new(AtomicBool::new(false)),
        );
        options.last_workspace_record = None;
        options.process_ends = false;
        options
    }

    fn host(&self) -> Box<dyn Host + '_> {
        let mut host = CliHost::new(self.flags, self.clock);
        host.quiet = !self.flags.verbose;
        Box::new(host)
    }

    fn observer(&self) -> Box<dyn Observer + '_> {
        if self.flags.verbose {
            Box::new(Console::new(true, false, false))
        } else {
            Box::new(Silent)
        }
    }

    fn event(&self, event: WorkerEvent<'_>) {
        eprint_line(&describe(&event));
    }
}

/// A worker event as a line of the log.
fn describe(event: &WorkerEvent<'_>) -> String {
    match event {
        WorkerEvent::Claimed {
            slot,
            run_id,
            epoch,
            stale,
        } => match stale {
            Some(h) => format!(
                "[{slot}] {run_id}: taken over from {} (lease {epoch})",
                h.describe()
            ),
            None => format!("[{slot}] {run_id}: claimed (lease {epoch})"),
        },
        WorkerEvent::Stopped {
            slot,
            run_id,
            status,
            requeued,
        } => {
            let back = if *requeued { ", back in the queue" } else { "" };
            format!("[{slot}] {run_id}: {status}{back}")
        }
        WorkerEvent::Settled {
            slot,
            run_id,
            status,
        } => format!("[{slot}] {run_id}: had already stopped ({status}); left the queue"),
        WorkerEvent::Waiting {
            slot,
            run_id,
            reason,
        } => format!("[{slot}] {run_id}: {reason}; back in the queue"),
        WorkerEvent::Lost {
            slot,
            run_id,
            why: Loss::TakenOver,
        } => format!("[{slot}] {run_id}: another process took the run over; given up"),
        WorkerEvent::Lost {
            slot,
            run_id,
            why: Loss::Paused,
        } => format!(
            "[{slot}] {run_id}: this worker was paused past its lease; the run's tool was stopped \
             and the run given up (another process takes it over)"
        ),
        WorkerEvent::Lost {
            slot,
            run_id,
            why: Loss::CutOff,
        } => format!(
            "[{slot}] {run_id}: the store could not be reached to renew the lease before it ran \
             out; the run's tool was stopped and the run given up (another process takes it over)"
        ),
        WorkerEvent::Failed {
            slot,
            run_id,
            error,
        } => format!("[{slot}] {}: {error}", run_id.unwrap_or("claiming")),
    }
}

pub fn cmd_worker(args: WorkerArgs) -> Result<Exit, CliError> {
    if !(args.lease.is_finite() && args.lease >= 0.5 && args.lease <= 86_400.0) {
        return Err(
            CliError::usage(format!("--lease {} is out of range", args.lease))
                .hint("give seconds between 0.5 and 86400"),
        );
    }
    let (clock, ids) = clock_and_ids()?;
    let shutdown = terminal::install_signal_handlers()?;
    let lease = Duration::from_secs_f64(args.lease);
    let flags = Flags {
        quiet: false,
        model: None,
        sandbox: None,
        network: None,
        approvals: Default::default(),
        max_iterations: None,
        interactive: false,
        verbose: args.verbose,
        format: super::result::RunFormat::Text,
        mode: Flags::mode(None, args.playback.as_deref()),
        adopt: false,
    };
    let config = WorkerConfig {
        url: args.store.store.clone(),
        concurrency: usize::from(args.concurrency),
        lease,
        poll: Duration::from_millis(args.poll_ms),
        exit_when_done: args.exit_when_done,
        settings: Settings {
            dir: absolute(&args.dir)?,
            renew: lease / 3,
            shutdown,
        },
    };
    let crew = CliCrew {
        flags: &flags,
        clock,
        ids: std::sync::Mutex::new(ids),
    };
    eprint_line(&format!(
        "delta worker: {} slot(s), lease {:.1} s, working copies in {}",
        config.concurrency,
        lease.as_secs_f64(),
        config.settings.dir.display()
    ));
    let tally = worker::run(&config, &crew).map_err(fleet_error)?;
    eprint_line(&format!(
        "delta worker: stopped ({} run(s) stopped, {} given up, {} failed)",
        tally.stopped, tally.lost, tally.failed
    ));
    Ok(Exit::Ok)
}

/// `path` from the current folder.
fn absolute(path: &std::path::Path) -> Result<PathBuf, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::new(format!("cannot read the current folder: {e}")))?;
    Ok(cwd.join(path))
}

/// `delta continue --store`: the run is worked on here, in its working copy, as `delta continue`
/// works on a local run; the store keeps its record.
pub struct StoreContinue {
    /// The store.
    pub url: String,
    /// The run.
    pub run_id: String,
    /// The message.
    pub message: Option<String>,
    /// A file to add to it.
    pub with_file: Option<PathBuf>,
    /// Where a working copy is made when the run's own cannot be used.
    pub dir: PathBuf,
}

pub fn continue_in_store(
    cont: StoreContinue,
    flags: &Flags,
    clock: Clock,
    ids: IdSource,
) -> Result<Exit, CliError> {
    let store = fleet::open(&cont.url).map_err(fleet_error)?;
    let settings = Settings {
        dir: absolute(&cont.dir)?,
        renew: store.renew_every(),
        shutdown: Arc::new(AtomicBool::new(false)),
    };
    let ask = Ask::Continue {
        message: cont.message,
        with_file: cont.with_file,
    };
    report::drive(flags, clock, ids, |runner: Runner<'_>| {
        let parts = Parts {
            options: runner.options,
            observer: runner.observer,
            host: runner.host,
            human: runner.human,
        };
        match continue_run(&store, &cont.run_id, ask, &settings, parts).map_err(fleet_error)? {
            Worked::Stopped { finished, .. } => Ok(*finished),
            Worked::Settled { .. } | Worked::Waiting { .. } => Err(CliError::new(
                "internal: a continued run was treated as a queued one",
            )
            .code(Exit::Internal)),
            Worked::Lost {
                run_id,
                why: Loss::TakenOver,
            } => Err(CliError::new(format!(
                "another process took run {run_id} over while this one worked on it; nothing more was written"
            ))
            .code(Exit::Busy)),
            Worked::Lost {
                run_id,
                why: Loss::CutOff | Loss::Paused,
            } => Err(CliError::new(format!(
                "the store could not be reached to renew the lease of run {run_id} before it ran out: \
                 the run was stopped here and nothing more was written"
            ))
            .hint(format!("once the store is back: delta continue --store URL --run-id {run_id}"))),
        }
    })
}

/// Where working copies go by default.
pub fn default_copies() -> PathBuf {
    PathBuf::from(DEFAULT_COPIES)
}

/// `list-runs --store`: every run of the store, newest first.
pub fn list_in_store(
    url: &str,
    status: Option<&str>,
    first: bool,
    format: Format,
) -> Result<(), CliError> {
    let store = fleet::open(url).map_err(fleet_error)?;
    let mut list: Vec<StoreRun> = admin::list(&*store).map_err(fleet_error)?;
    list.sort_by(|a, b| b.created.cmp(&a.created).then(b.run_id.cmp(&a.run_id)));
    if let Some(status) = status {
        list.retain(|r| r.status.eq_ignore_ascii_case(status));
    }
    if first {
        list.truncate(1);
    }
    match format {
        Format::Json if first => print_out(&format!("{}\n", json(list.first()))),
        Format::Json => print_out(&format!("{}\n", json(&list))),
        Format::Raw => print_out(
            &list
                .iter()
                .map(|r| format!("{}\n", r.run_id))
                .collect::<String>(),
        ),
        Format::Text => {
            if list.is_empty() {
                eprint_line("No runs found.");
            }
            let mut out = String::new();
            for r in &list {
                out.push_str(&format!(
                    "{}\nRun ID:     {}\nStatus:     {}{}\nCreated:    {}\nIterations: {}\nWorkspace:  {}\nTask:       {}\n",
                    "-".repeat(80),
                    r.run_id,
                    r.status,
                    r.holder.as_deref().map(|h| format!(" (held by {h})")).unwrap_or_default(),
                    r.created,
                    r.iterations,
                    r.workspace.as_deref().unwrap_or("-"),
                    r.task.chars().take(60).collect::<String>(),
                ));
                if let Some(error) = &r.error {
                    out.push_str(&format!("Error:      {error}\n"));
                }
                if let Some(question) = &r.pending_question {
                    out.push_str(&format!("Question:   {question}\n"));
                }
                if let Some(waiting) = &r.waiting {
                    out.push_str(&format!("Waiting:    {waiting}\n"));
                }
                if let Some(damage) = &r.damaged {
                    out.push_str(&format!("Damaged:    {damage}\n"));
                }
            }
            print_text(&out);
        }
    }
    Ok(())
}

fn json<T: serde::Serialize>(value: T) -> String {
    serde_json::to_string(&value).unwrap_or_else(|_| "null".into())
}

/// Print a run's journal from the store as JSON lines (the format of journal.jsonl).
///
/// Example:
///   delta export --store postgres://db/delta --run-id R > journal.jsonl
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ExportArgs {
    #[command(flatten)]
    store: StoreArg,

    /// The run.
    #[arg(long, value_name = "ID")]
    run_id: String,
}

pub fn cmd_export(args: ExportArgs) -> Result<(), CliError> {
    let store = open(&args.store)?;
    let mut out = String::new();
    admin::export(&*store, &args.run_id, &mut |line| {
        out.push_str(line);
        out.push('\n');
    })
    .map_err(fleet_error)?;
    print_out(&out);
    Ok(())
}

/// Move a run of a workspace into a store.
///
/// The run's journal, metadata and io/ records are copied into the store; the workspace stays as
/// the run's working copy. The run must not be running. Continue it afterwards with
/// `delta continue --store URL --run-id ID`; its id is printed on stdout. The journal and metadata
/// go in at once (an import killed before that leaves nothing); `--resume` finishes an import
/// killed after it.
///
/// Example:
///   delta import --store postgres://db/delta -w ./ws --run-id R
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ImportArgs {
    #[command(flatten)]
    store: StoreArg,

    /// Workspace holding the run.
    #[arg(short = 'w', long = "work-dir", value_name = "PATH")]
    work_dir: PathBuf,

    /// The run (default: the workspace's latest).
    #[arg(long, value_name = "ID")]
    run_id: Option<String>,

    /// Finish an import that was cut short: the store has the run already, with the workspace's
    /// journal line for line; its io/ records are copied and the workspace is handed over to the
    /// store.
    #[arg(long)]
    resume: bool,
}

pub fn cmd_import(args: ImportArgs) -> Result<(), CliError> {
    let (clock, _) = clock_and_ids()?;
    let ws = absolute(&args.work_dir)?;
    let run_id = match args.run_id {
        Some(id) => id,
        None => {
            runs::latest(&ws)
                .ok_or_else(|| {
                    CliError::new(format!("No existing run found in {}", ws.display()))
                        .hint("name the run with --run-id")
                })?
                .run_id
        }
    };
    let store = open(&args.store)?;
    let records = admin::import(&*store, &ws, &run_id, args.resume, clock).map_err(fleet_error)?;
    eprint_line(&format!(
        "Imported run {run_id} ({records} journal records)"
    ));
    print_out(&format!("{run_id}\n"));
    Ok(())
}

/// `delta show --store`: the transcript of a run of the store, read from a scratch copy.
pub fn store_transcript(
    url: &str,
    run_id: &str,
) -> Result<delta::transcript::Transcript, CliError> {
    let store = fleet::open(url).map_err(fleet_error)?;
    let scratch = tempfile::Builder::new()
        .prefix("delta-show-")
        .tempdir()
        .map_err(|e| CliError::new(format!("cannot make a scratch folder: {e}")))?;
    admin::transcript(&*store, run_id, scratch.path()).map_err(fleet_error)
}

/// `delta rm --store`: removes a run from the store.
pub fn remove_from_store(url: &str, run_id: &str, clock: Clock) -> Result<(), CliError> {
    let store = fleet::open(url).map_err(fleet_error)?;
    admin::remove(&*store, run_id, clock).map_err(fleet_error)
}
