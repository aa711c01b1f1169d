//! `dygram batch`: many machines at once.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::Args;
use serde_json::json;

use super::generate::{formats, render, write_all};
use super::input::{self, SOURCE_EXTENSIONS};
use super::{CliError, Exit, Verbosity, color, eprint_line, print_out};
use dygram_runtime::outputs::Format;

/// Check (and, with -d, generate outputs for) every machine glob patterns match.
///
/// Files are processed in parallel and reported in path order. Without --continue-on-error the
/// batch stops at the first machine with errors (files before it are still written). With -d DIR,
/// outputs keep the files' folders relative to their pattern's fixed prefix. Without -d, the
/// machines are only checked. The summary goes to stdout (--json for a machine-readable one).
/// Several patterns, or the files a shell expanded a pattern into, are taken together (a file
/// two of them match is processed once).
///
/// Examples:
///   dygram batch 'machines/**/*.dy'
///   dygram b 'machines/**/*.dy' -f json,dot -d out/ --continue-on-error
///   dygram batch machines/*.dy                   # expanded by the shell: works the same
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct BatchArgs {
    /// Glob patterns, e.g. 'src/**/*.dy' (quoted, dygram expands `**`), or files.
    #[arg(required = true, value_name = "PATTERN")]
    patterns: Vec<String>,
    /// Formats written with -d, comma-separated: json, dot, svg, mermaid, dsl.
    #[arg(short, long, default_value = "json", value_delimiter = ',')]
    format: Vec<String>,
    /// Write outputs into this folder.
    #[arg(short, long, value_name = "DIR")]
    destination: Option<PathBuf>,
    /// Go on after a machine with errors.
    #[arg(long)]
    continue_on_error: bool,
    /// Do not read imported files.
    #[arg(long)]
    no_imports: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    verbosity: Verbosity,
}

/// A machine file to process, and the fixed prefix of the pattern that matched it (its outputs
/// keep their folders relative to it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Matched {
    path: PathBuf,
    prefix: PathBuf,
}

/// What happened to one file.
struct Outcome {
    path: PathBuf,
    prefix: PathBuf,
    errors: usize,
    /// Rendered diagnostics and whether each is an error (shown in order by the main thread).
    messages: Vec<(bool, String)>,
    outputs: Vec<(Format, String)>,
    /// A failure outside the machine (unreadable file, output error).
    failure: Option<String>,
}

/// The part of a pattern before its first glob character, as a folder.
fn fixed_prefix(pattern: &str) -> PathBuf {
    let mut prefix = PathBuf::new();
    for part in Path::new(pattern).components() {
        let text = part.as_os_str().to_string_lossy();
        if text.contains(['*', '?', '[', '{']) {
            break;
        }
        prefix.push(part);
    }
    // A pattern without glob characters names a file: its folder is the prefix.
    if prefix == Path::new(pattern) {
        prefix.pop();
    }
    prefix
}

/// How every file of a batch is processed.
#[derive(Debug, Clone, Copy)]
struct Job<'a> {
    formats: &'a [Format],
    /// Outputs are rendered (`-d`).
    write: bool,
    no_imports: bool,
    color: bool,
}

impl Outcome {
    /// Nothing happened to `file` yet.
    fn of(file: &Matched) -> Self {
        Self {
            path: file.path.clone(),
            prefix: file.prefix.clone(),
            errors: 0,
            messages: Vec::new(),
            outputs: Vec::new(),
            failure: None,
        }
    }
}

fn process(file: &Matched, job: Job<'_>) -> Outcome {
    let Job {
        formats,
        write,
        no_imports,
        color,
    } = job;
    let path = file.path.as_path();
    let mut outcome = Outcome::of(file);
    let input = match input::read(path, false) {
        Ok(i) => i,
        Err(e) => {
            outcome.failure = Some(e.message().to_string());
            return outcome;
        }
    };
    let project = input::compile(&input, no_imports);
    for module in project
        .modules
        .iter()
        .chain(std::iter::once(&project.entry))
    {
        for d in &module.compiled.diagnostics {
            if d.is_error() {
                outcome.errors += 1;
            }
            outcome
                .messages
                .push((d.is_error(), d.render(&module.compiled.file, color)));
        }
    }
    if outcome.errors == 0 && write {
        let machine = project.entry().json(Default::default());
        for f in formats {
            match render(*f, &machine) {
                Ok(text) => outcome.outputs.push((*f, text)),
                Err(e) => {
                    outcome.failure = Some(e.message().to_string());
                    break;
                }
            }
        }
    }
    outcome
}

/// [`process`], with a panic turned into a failure of that file: one file never takes the other
/// files of its worker thread down with it.
fn process_isolated(file: &Matched, job: Job<'_>) -> Outcome {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| process(file, job))).unwrap_or_else(
        |panic| {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown cause".into());
            Outcome {
                failure: Some(format!("internal error while processing this file: {why}")),
                ..Outcome::of(file)
            }
        },
    )
}

/// Why a path a pattern matched is not a file that can be read.
fn not_a_file(path: &Path) -> String {
    if path.is_dir() {
        return "it is a folder, not a file".into();
    }
    match std::fs::read_link(path) {
        Ok(target) if !path.exists() => {
            format!("a link to {}, which does not exist", target.display())
        }
        _ => "not a regular file".into(),
    }
}

impl BatchArgs {
    pub fn json_output(&self) -> bool {
        self.json
    }
}

pub fn run(args: BatchArgs) -> Result<Exit, CliError> {
    let formats = formats(&args.format)?;
    let files = matching_files(&args)?;
    if !args.json && args.verbosity.verbose {
        eprint_line(&format!(
            "Found {} file(s) matching {}",
            files.len(),
            args.patterns.join(" ")
        ));
    }
    let results = process_all(&files, &formats, &args);
    let mut processed = 0;
    let mut failed = 0;
    let mut report = Vec::new();
    for outcome in results.into_iter().flatten() {
        processed += 1;
        let (ok, row) = settle(&outcome, &args);
        report.push(row);
        if !ok {
            failed += 1;
            if !args.continue_on_error {
                if !args.json {
                    eprint_line(
                        "Stopping at the first machine with errors (use --continue-on-error to go on).",
                    );
                }
                break;
            }
        }
    }
    if args.json {
        let summary = json!({"processed": processed, "failed": failed, "files": report});
        print_out(&format!("{summary}\n"));
    } else {
        print_out(&format!(
            "Processed: {processed} file(s)\nFailed: {failed} file(s)\n"
        ));
    }
    Ok(if failed > 0 { Exit::Failed } else { Exit::Ok })
}

/// The machine files the patterns match, sorted, each once (with the first pattern that matched
/// it); a match with a machine's name that is not a file is said, never dropped silently.
fn matching_files(args: &BatchArgs) -> Result<Vec<Matched>, CliError> {
    let mut files: Vec<Matched> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for pattern in &args.patterns {
        let prefix = fixed_prefix(pattern);
        for path in matching(pattern, args)? {
            if seen.insert(path.clone()) {
                files.push(Matched {
                    path,
                    prefix: prefix.clone(),
                });
            }
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(CliError::new(format!(
            "no machine files match `{}`",
            args.patterns.join(" ")
        ))
        .hint(
            "quote the pattern, e.g. 'machines/**/*.dy'; files must end in .dy, .dygram or .mach",
        ));
    }
    Ok(files)
}

/// The machine files one pattern matches.
fn matching(pattern: &str, args: &BatchArgs) -> Result<Vec<PathBuf>, CliError> {
    let paths = glob::glob(pattern)
        .map_err(|e| CliError::usage(format!("bad pattern `{pattern}`: {e}")))?;
    let is_machine = |p: &Path| {
        p.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| SOURCE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
    };
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in paths {
        match entry {
            Ok(p) if is_machine(&p) && p.is_file() => files.push(p),
            Ok(p) if is_machine(&p) && !args.verbosity.quiet => {
                eprint_line(&format!(
                    "warning: skipped {}: {}",
                    p.display(),
                    not_a_file(&p)
                ));
            }
            Ok(_) => {}
            Err(e) if !args.verbosity.quiet => eprint_line(&format!(
                "warning: skipped {}: {}",
                e.path().display(),
                e.error()
            )),
            Err(_) => {}
        }
    }
    Ok(files)
}

/// Processes the files on as many threads as there are cores; the outcomes in the files' order.
fn process_all(files: &[Matched], formats: &[Format], args: &BatchArgs) -> Vec<Option<Outcome>> {
    let job = Job {
        formats,
        write: args.destination.is_some(),
        no_imports: args.no_imports,
        color: color(),
    };
    let next = AtomicUsize::new(0);
    let workers = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1)
        .min(files.len());
    let mut results: Vec<Option<Outcome>> = (0..files.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        let Some(path) = files.get(i) else { break };
                        done.push((i, process_isolated(path, job)));
                    }
                    done
                })
            })
            .collect();
        for h in handles {
            if let Ok(done) = h.join() {
                for (i, outcome) in done {
                    results[i] = Some(outcome);
                }
            }
        }
    });
    results
}

/// Shows one file's diagnostics, writes its outputs, and returns whether it is fine and its row
/// of the JSON summary.
fn settle(outcome: &Outcome, args: &BatchArgs) -> (bool, serde_json::Value) {
    for (is_error, message) in &outcome.messages {
        if *is_error || !args.verbosity.quiet {
            eprint_line(message.trim_end());
        }
    }
    if args.verbosity.verbose {
        eprint_line(&format!("Processed: {}", outcome.path.display()));
    }
    let mut written = Vec::new();
    let mut failure = outcome.failure.clone();
    if failure.is_none()
        && outcome.errors == 0
        && let Some(dir) = &args.destination
    {
        let relative = outcome
            .path
            .parent()
            .and_then(|p| p.strip_prefix(&outcome.prefix).ok())
            .unwrap_or(Path::new(""));
        let stem = outcome.path.file_stem().map_or_else(
            || "machine".to_string(),
            |s| s.to_string_lossy().into_owned(),
        );
        match write_all(
            &dir.join(relative),
            &stem,
            Some(&outcome.path),
            &outcome.outputs,
        ) {
            Ok(paths) => written = paths,
            Err(e) => failure = Some(e.message().to_string()),
        }
    }
    let ok = outcome.errors == 0 && failure.is_none();
    if let Some(f) = &failure {
        eprint_line(&format!("error: {}: {f}", outcome.path.display()));
    }
    let row = json!({
        "path": outcome.path.display().to_string(),
        "ok": ok,
        "errors": outcome.errors,
        "outputs": written.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "failure": failure,
    });
    (ok, row)
}
