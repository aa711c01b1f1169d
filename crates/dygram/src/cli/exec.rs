//! `dygram exec list|status|show|clean|rm`: the saved executions of `execute -i`.

use cli_edge::FormatFlag;
use serde_json::{Value, json};

use dygram_runtime::session::result::result_json;
use dygram_runtime::session::shared::{SharedError, View};
use dygram_runtime::session::{
    Cleaned, Cleaning, Executions, Metadata, Progress, SessionError, Summary, summary_json,
};
use dygram_runtime::state::ExecutionState;

use super::{CliError, Exit, Verbosity, print_out, print_text};

/// Manage saved executions (.dygram/executions/ in the current folder).
///
/// Examples:
///   dygram exec list
///   dygram exec status            # the last execution
///   dygram exec status my-session --format json
///   dygram exec show my-session --format mermaid
///   dygram exec show my-session --format html > run.html
///   dygram exec clean             # remove completed executions
///   dygram exec clean --all --older-than 30d
///   dygram exec rm my-session
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct ExecArgs {
    #[command(subcommand)]
    pub action: Action,
}

/// What `exec show` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShowFormat {
    /// The path taken and a summary.
    Text,
    /// The result object.
    Json,
    /// Graphviz DOT of the machine with the path taken highlighted.
    Dot,
    /// Mermaid state diagram with the path taken highlighted.
    Mermaid,
    /// SVG of the highlighted machine (through Graphviz's `dot`).
    Svg,
    /// A self-contained HTML page: the drawing, the paths and a timeline of the calls.
    Html,
}

/// What to do.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// List executions, most recent first, then folders set aside (corrupted or replaced ones).
    #[command(visible_alias = "ls")]
    List {
        // json: one JSON array on stdout.
        #[command(flatten)]
        format: FormatFlag,
        /// List the executions shared through this store instead (postgres://… or file:///path; see
        /// `execute --store`).
        #[arg(long, value_name = "URL", env = "DYGRAM_STORE", hide_env_values = true)]
        store: Option<String>,
        #[command(flatten)]
        verbosity: Verbosity,
    },
    /// Machine, status, current node(s), turns, steps, times and mode of an execution.
    Status {
        /// Execution id (default: the last one, else the one with the latest call).
        id: Option<String>,
        /// An execution shared through this store instead (postgres://… or file:///path; see
        /// `execute --store`); the execution is then named by its id.
        #[arg(long, value_name = "URL", env = "DYGRAM_STORE", hide_env_values = true)]
        store: Option<String>,
        // json: one JSON object on stdout.
        #[command(flatten)]
        format: FormatFlag,
        #[command(flatten)]
        verbosity: Verbosity,
    },
    /// The execution's position drawn on its machine, without advancing it.
    Show {
        /// Execution id (default: the last one, else the one with the latest call).
        id: Option<String>,
        /// An execution shared through this store instead (postgres://… or file:///path; see
        /// `execute --store`); the execution is then named by its id.
        #[arg(long, value_name = "URL", env = "DYGRAM_STORE", hide_env_values = true)]
        store: Option<String>,
        /// What to print: the path as text, the result object (json), the machine drawn with the
        /// visited path and the current node(s) (dot, mermaid, svg), or a self-contained HTML page
        /// with that drawing, the paths and a timeline of the calls (html). svg needs Graphviz's
        /// `dot`; without it, html is made without the drawing.
        #[arg(long, value_enum, default_value = "text")]
        format: ShowFormat,
        #[command(flatten)]
        verbosity: Verbosity,
    },
    /// Remove completed executions (with --all, every execution and every folder set aside) and
    /// what killed creations and removals left; executions a call is working on are kept.
    Clean {
        /// Remove executions in progress, paused or failed, and folders set aside, too.
        #[arg(long)]
        all: bool,
        /// Only those whose last call is longer ago than DURATION (e.g. 7d, 12h, 2w 3d, 90m,
        /// P7D; days are 24 hours, months and years are not accepted).
        #[arg(long, value_name = "DURATION", value_parser = parse_age)]
        older_than: Option<Age>,
        /// Clean the executions shared through this store instead (postgres://… or file:///path).
        #[arg(long, value_name = "URL", env = "DYGRAM_STORE", hide_env_values = true)]
        store: Option<String>,
        #[command(flatten)]
        verbosity: Verbosity,
    },
    /// Remove one execution, or a folder set aside (`ID.corrupted-…`, `ID.replaced-…`); refused
    /// while a call is working on it.
    Rm {
        /// Execution id, or the name of a folder set aside.
        id: String,
        /// Remove an execution shared through this store instead (postgres://… or file:///path).
        #[arg(long, value_name = "URL", env = "DYGRAM_STORE", hide_env_values = true)]
        store: Option<String>,
        #[command(flatten)]
        verbosity: Verbosity,
    },
}

impl ExecArgs {
    pub fn json_output(&self) -> bool {
        match &self.action {
            Action::List { format, .. } | Action::Status { format, .. } => format.is_json(),
            Action::Show { format, .. } => *format == ShowFormat::Json,
            Action::Clean { .. } | Action::Rm { .. } => false,
        }
    }
}

/// The executions of the current folder.
fn local() -> Result<Executions, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::new(format!("cannot read the current folder: {e}")))?;
    Ok(Executions::under(&cwd))
}

fn error(e: SessionError) -> CliError {
    let kind = match &e {
        SessionError::NotFound(_) | SessionError::NoExecutions => "not_found",
        SessionError::Busy { .. } => "busy",
        SessionError::Corrupted { .. } => "corrupted",
        _ => "failed",
    };
    let e = match e {
        SessionError::Reserved => CliError::usage(e.to_string())
            .hint("name the execution itself (`dygram exec status` shows which one `last` is)"),
        SessionError::InvalidId(_)
        | SessionError::InvalidName(_)
        | SessionError::SetAsideName(_) => CliError::usage(e.to_string()),
        SessionError::NotFound(_) => {
            CliError::new(e.to_string()).hint("`dygram exec list` shows the executions here")
        }
        SessionError::Busy { .. } => CliError::new(e.to_string())
            .hint("a call is working on it: remove it once that call has ended (or stop it)")
            .code(Exit::Busy),
        SessionError::NoExecutions => {
            CliError::new(e.to_string()).hint("start one with `dygram execute -i FILE`")
        }
        other => CliError::new(other.to_string()),
    };
    if e.exit() == Exit::Usage {
        e
    } else {
        e.kind(kind)
    }
}

/// "3 minutes ago".
fn ago(rfc3339: &str) -> String {
    let Ok(t) = rfc3339.parse::<jiff::Timestamp>() else {
        return rfc3339.to_string();
    };
    let secs = (jiff::Timestamp::now().as_second() - t.as_second()).max(0);
    let (n, unit) = match secs {
        0..60 => (secs, "second"),
        60..3600 => (secs / 60, "minute"),
        3600..86400 => (secs / 3600, "hour"),
        _ => (secs / 86400, "day"),
    };
    format!("{n} {unit}{} ago", if n == 1 { "" } else { "s" })
}

/// Where `exec status|show` read an execution: this folder's executions, or a copy of one
/// shared through a store.
enum Source {
    Here(Executions),
    Shared(View),
}

impl Source {
    fn executions(&self) -> &Executions {
        match self {
            Self::Here(executions) => executions,
            Self::Shared(view) => view.executions(),
        }
    }
}

/// The execution `id` names (default: the folder's last) and where to read it.
fn source(store: Option<&str>, id: Option<&str>) -> Result<(Source, String), CliError> {
    let Some(url) = store else {
        let here = local()?;
        let id = here.resolve(id).map_err(error)?;
        return Ok((Source::Here(here), id));
    };
    let Some(id) = id else {
        return Err(
            CliError::usage("an execution in a store is named by its id: give it")
                .hint("`dygram exec list --store URL` lists the executions of the store"),
        );
    };
    let shared = super::interactive::shared_store(url)?;
    let view = shared.view(id).map_err(super::interactive::shared_error)?;
    Ok((Source::Shared(view), id.to_string()))
}

pub fn run(args: ExecArgs) -> Result<Exit, CliError> {
    match args.action {
        Action::List {
            format,
            store: Some(url),
            ..
        } => {
            let shared = super::interactive::shared_store(&url)?;
            let all = shared.list().map_err(super::interactive::shared_error)?;
            print_listing(&list(&all, format.is_json(), |_| None), format.is_json());
            Ok(Exit::Ok)
        }
        Action::List { format, .. } => {
            let here = local()?;
            let progress = |m: &Metadata| here.progress(m);
            print_listing(
                &list(&here.list(), format.is_json(), progress),
                format.is_json(),
            );
            Ok(Exit::Ok)
        }
        Action::Status {
            id, format, store, ..
        } => {
            let (source, id) = source(store.as_deref(), id.as_deref())?;
            let executions = source.executions();
            if format.is_json() {
                let status = executions.status_json(&id).map_err(error)?;
                print_out(&format!("{status}\n"));
            } else {
                let m = executions.metadata(&id).map_err(error)?;
                let nodes = executions.current_nodes(&id);
                let progress = executions.progress(&m);
                let mut text = status_text(&id, &m, &nodes, progress);
                text.push_str(&agents_text(&executions.agents(&id)));
                print_text(&text);
            }
            Ok(Exit::Ok)
        }
        Action::Show {
            id, format, store, ..
        } => {
            let (source, id) = source(store.as_deref(), id.as_deref())?;
            let executions = source.executions();
            let (state, meta) = executions.view(&id).map_err(error)?;
            let shown = show(executions, &id, &state, &meta, format)?;
            match format {
                ShowFormat::Text => print_text(&shown),
                _ => print_out(&shown),
            }
            Ok(Exit::Ok)
        }
        Action::Clean {
            all,
            older_than,
            store,
            ..
        } => {
            // Longer ago than time can tell: nothing is that old.
            let before = older_than.as_ref().map(|age| {
                jiff::Timestamp::now()
                    .checked_sub(age.duration)
                    .unwrap_or(jiff::Timestamp::MIN)
            });
            let which = Cleaning { all, before };
            let cleaned = match store {
                Some(url) => super::interactive::shared_store(&url)?
                    .clean(which)
                    .map_err(super::interactive::shared_error)?,
                None => local()?.clean(which).map_err(error)?,
            };
            for (id, busy) in &cleaned.busy {
                super::eprint_line(&format!("Kept {id}: {busy}"));
            }
            print_out(&cleaned_text(&cleaned, older_than.as_ref()));
            Ok(Exit::Ok)
        }
        Action::Rm { id, store, .. } => {
            let removed = match &store {
                Some(url) => super::interactive::shared_store(url)?
                    .remove(&id)
                    .map_err(super::interactive::shared_error)?,
                None => local()?.remove(&id).map_err(error)?,
            };
            if !removed {
                return Err(match store {
                    Some(_) => super::interactive::shared_error(SharedError::NotFound(id)),
                    None => error(SessionError::NotFound(id)),
                });
            }
            print_out(&format!("Removed execution: {id}\n"));
            Ok(Exit::Ok)
        }
    }
}

/// Prints `exec list`'s output: JSON as it is, a table for a person with controls escaped.
fn print_listing(text: &str, json: bool) {
    if json {
        print_out(text)
    } else {
        print_text(text)
    }
}

/// `exec list`: a JSON array, or a table; `progress` tells an execution's progress where its
/// total is known.
fn list(all: &[Summary], json: bool, progress: impl Fn(&Metadata) -> Option<Progress>) -> String {
    if json {
        let rows: Vec<Value> = all
            .iter()
            .map(|s| summary_json(s, s.metadata.as_ref().and_then(&progress)))
            .collect();
        return format!("{}\n", Value::Array(rows));
    }
    if all.is_empty() {
        return "No executions found\n".into();
    }
    let mut s = String::from("Executions:\n");
    for e in all {
        if e.set_aside.is_some() && !s.contains("Set aside") {
            s.push_str(
                "Set aside (kept; remove with `dygram exec rm NAME` or `dygram exec clean --all`):\n",
            );
        }
        match &e.metadata {
            Some(m) => s.push_str(&list_row(e, m, progress(m))),
            None => s.push_str(&format!("  {:<24} (metadata unreadable)\n", e.id)),
        }
    }
    s
}

/// Turns, with the total where it is known: `3/5`, or `3`.
fn turns_text(m: &Metadata, progress: Option<Progress>) -> String {
    match progress {
        Some(p) => format!("{}/{}", p.turns, p.total),
        None => m.turn_count.to_string(),
    }
}

/// One row of the `exec list` table.
fn list_row(e: &Summary, m: &Metadata, progress: Option<Progress>) -> String {
    let machine = m
        .machine_file
        .as_deref()
        .and_then(|f| std::path::Path::new(f).file_name())
        .map_or_else(
            || "(stdin)".to_string(),
            |f| f.to_string_lossy().into_owned(),
        );
    let at = if e.current_nodes.is_empty() {
        String::new()
    } else {
        format!("at {}", e.current_nodes.join(","))
    };
    let status = match e.set_aside {
        Some(why) => why.as_str().to_string(),
        None => m.status.to_string(),
    };
    format!(
        "  {:<24} {:<20} turn {:<4} {:<12} {:<20} {}\n",
        e.id,
        machine,
        turns_text(m, progress),
        status,
        at,
        ago(&m.last_executed_at)
    )
}

/// `exec status` as text.
fn status_text(id: &str, m: &Metadata, nodes: &[String], progress: Option<Progress>) -> String {
    let mut s = format!("Execution: {id}\n");
    s.push_str(&format!(
        "  Machine: {}\n",
        m.machine_file.as_deref().unwrap_or("(stdin)")
    ));
    s.push_str(&format!("  Status: {}\n", m.status));
    let question = m
        .pending_request
        .as_ref()
        .is_some_and(|r| r["type"] == dygram_runtime::session::AGENT_QUESTION);
    if question {
        s.push_str("  Waiting for: the answer to an agent's question, on stdin\n");
    } else if m.pending_request.is_some() {
        s.push_str("  Waiting for: an LLM response on stdin (manual mode)\n");
    }
    // For a finished execution: where its paths ended.
    s.push_str(&format!("  Current Node: {}\n", nodes.join(", ")));
    s.push_str(&format!("  Turns: {}\n", turns_text(m, progress)));
    s.push_str(&format!("  Steps: {}\n", m.step_count));
    s.push_str(&format!("  Started: {}\n", m.started_at));
    s.push_str(&format!(
        "  Last Updated: {} ({})\n",
        m.last_executed_at,
        ago(&m.last_executed_at)
    ));
    s.push_str(&format!("  Mode: {}\n", m.mode_text()));
    s
}

/// The lines of `exec status` for the runs of agent nodes ([`Executions::agents`]).
fn agents_text(agents: &[Value]) -> String {
    let mut s = String::new();
    for a in agents {
        let text = |k: &str| a[k].as_str().unwrap_or_default().to_string();
        s.push_str(&format!(
            "  Agent at {}: run {}, {} turn(s){}\n    {}\n",
            text("node"),
            text("run"),
            a["iterations"],
            match a["question"].as_str() {
                Some(q) => format!(", asks: {q}"),
                None => String::new(),
            },
            text("runDir")
        ));
    }
    s
}

/// `exec show`: the execution's position, without advancing it.
fn show(
    store: &Executions,
    id: &str,
    state: &ExecutionState,
    meta: &Metadata,
    format: ShowFormat,
) -> Result<String, CliError> {
    use dygram_runtime::outputs::execution;
    let drawing = |e: dygram_runtime::outputs::svg::SvgError| {
        let hint = e.hint();
        CliError::new(e.to_string()).maybe_hint(hint)
    };
    Ok(match format {
        ShowFormat::Json => {
            let mut v = result_json(state);
            v["id"] = json!(id);
            v["turns"] = json!(meta.turn_count);
            format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
        }
        ShowFormat::Text => {
            let mut s = format!("Runtime Snapshot: {id}\n");
            s.push_str(&format!(
                "Machine: {}\n",
                meta.machine_file.as_deref().unwrap_or("(stdin)"),
            ));
            s.push_str(&super::execute::text_report(state));
            s
        }
        ShowFormat::Dot => execution::to_dot(state),
        ShowFormat::Mermaid => execution::to_mermaid(state),
        ShowFormat::Svg => execution::to_svg(state).map_err(drawing)?,
        ShowFormat::Html => {
            let history = store.history(id).map_err(error)?;
            let page = execution::html::Page {
                id,
                meta,
                state,
                history: &history,
            };
            let (html, missing) = execution::html::to_html(&page).map_err(drawing)?;
            if let Some(e) = missing {
                super::eprint_line(&format!(
                    "warning: the page has no drawing of the machine: {e}{}",
                    e.hint()
                        .map(|h| format!("\n  hint: {h}"))
                        .unwrap_or_default()
                ));
            }
            html
        }
    })
}

/// A duration of `--older-than`, as written and as a length of time.
#[derive(Debug, Clone)]
pub struct Age {
    written: String,
    duration: jiff::SignedDuration,
}

/// Why a `--older-than` duration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AgeError {
    /// Not a duration.
    #[error("not a duration ({0}); write e.g. 7d, 12h, 2w 3d or P7D")]
    Unreadable(jiff::Error),
    /// Months or years, which have no fixed length.
    #[error("months and years have no fixed length; write days or weeks (e.g. 30d)")]
    Calendar,
    /// Before now.
    #[error("a duration cannot be negative")]
    Negative,
}

/// `--older-than`: a span of weeks, days (of 24 hours), hours, minutes and seconds.
fn parse_age(written: &str) -> Result<Age, AgeError> {
    let span: jiff::Span = written.parse().map_err(AgeError::Unreadable)?;
    if span.is_negative() {
        return Err(AgeError::Negative);
    }
    let duration = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .map_err(|_| AgeError::Calendar)?;
    Ok(Age {
        written: written.to_string(),
        duration,
    })
}

/// What `exec clean` says on stdout.
fn cleaned_text(cleaned: &Cleaned, older_than: Option<&Age>) -> String {
    let mut s = if cleaned.removed == 0 {
        "No executions to clean\n".to_string()
    } else {
        format!("Cleaned {} execution(s)\n", cleaned.removed)
    };
    if !cleaned.busy.is_empty() {
        s.push_str(&format!(
            "Kept {} execution(s) in use by a call; clean again once it has ended.\n",
            cleaned.busy.len()
        ));
    }
    if let Some(age) = older_than.filter(|_| cleaned.recent > 0) {
        s.push_str(&format!(
            "Kept {} more recent than {}.\n",
            cleaned.recent, age.written
        ));
    }
    if cleaned.running + cleaned.failed + cleaned.set_aside > 0 {
        s.push_str(&format!(
            "Remaining: {} in progress/paused, {} with errors, {} set aside. Use --all to remove them too.\n",
            cleaned.running, cleaned.failed, cleaned.set_aside
        ));
    }
    s
}
