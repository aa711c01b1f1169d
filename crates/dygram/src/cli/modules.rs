//! `dygram check-imports` and `dygram bundle`: machines made of several files.

use std::path::{Path, PathBuf};

use clap::Args;
use dygram_core::imports::Project;
use dygram_core::json::JsonOptions;

use super::input;
use super::{CliError, Exit, Verbosity, print_out};

/// Check that every import of a machine resolves, and show the files in dependency order.
///
/// Examples:
///   dygram check-imports app.dy
///   dygram ci app.dy -q && echo ok
///   dygram ci app.dy --format json | jq -r '.files[]'
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct CheckImportsArgs {
    /// The machine (.dy, .dygram, .mach).
    file: PathBuf,
    // json: {"valid": bool, "files": [… in dependency order], "diagnostics": […]}.
    #[command(flatten)]
    format: cli_edge::FormatFlag,
    #[command(flatten)]
    verbosity: Verbosity,
}

/// Merge a machine and everything it imports into one self-contained .dy file.
///
/// Examples:
///   dygram bundle app.dy                 # writes app.bundled.dy next to app.dy
///   dygram bundle app.dy -o dist/app.dy
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct BundleArgs {
    /// The machine (.dy, .dygram, .mach).
    file: PathBuf,
    /// Where to write the bundle (default: <name>.bundled.dy next to the input).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    verbosity: Verbosity,
}

/// A short, stable name for a module: relative to the current folder when possible.
fn shown(path: &Path) -> String {
    let cwd = std::env::current_dir()
        .ok()
        .and_then(|d| std::fs::canonicalize(d).ok());
    match cwd.and_then(|d| path.strip_prefix(d).ok().map(Path::to_path_buf)) {
        Some(rel) => rel.display().to_string(),
        None => path.display().to_string(),
    }
}

fn files_in_order(project: &Project) -> Vec<String> {
    project
        .modules
        .iter()
        .chain(std::iter::once(&project.entry))
        .map(|m| shown(&m.path))
        .collect()
}

impl CheckImportsArgs {
    pub fn json_output(&self) -> bool {
        self.format.is_json()
    }
}

pub fn check_imports(args: CheckImportsArgs) -> Result<Exit, CliError> {
    let input = input::read(&args.file, false)?;
    let project = input::compile(&input, false);
    if args.format.is_json() {
        let valid = !project.has_errors();
        let out = serde_json::json!({
            "valid": valid,
            "files": files_in_order(&project),
            "diagnostics": project.diagnostics_json(),
        });
        print_out(&format!("{out}\n"));
        return Ok(if valid { Exit::Ok } else { Exit::Failed });
    }
    if input::show_diagnostics(&project, args.verbosity) > 0 {
        return Ok(Exit::Failed);
    }
    let files = files_in_order(&project);
    let mut out = String::from("✓ All imports resolved successfully\n\nDependency Graph:\n");
    for (i, f) in files.iter().enumerate() {
        out.push_str(&format!("  {}. {f}\n", i + 1));
    }
    out.push_str(&format!("\nTotal files: {}\n", files.len()));
    print_out(&out);
    Ok(Exit::Ok)
}

pub fn bundle(args: BundleArgs) -> Result<Exit, CliError> {
    let input = input::read(&args.file, false)?;
    let project = input::compile(&input, false);
    if input::show_diagnostics(&project, args.verbosity) > 0 {
        return Ok(Exit::Failed);
    }
    let machine = project.entry().json(JsonOptions::default());
    let text = dygram_core::render::dsl::to_dsl(&machine);
    let output = args.output.unwrap_or_else(|| {
        let dir = args.file.parent().unwrap_or(Path::new("."));
        dir.join(format!("{}.bundled.dy", input.stem()))
    });
    if let Some(parent) = output.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| CliError::new(format!("cannot create {}: {e}", parent.display())))?;
    }
    std::fs::write(&output, text)
        .map_err(|e| CliError::new(format!("cannot write {}: {e}", output.display())))?;
    print_out(&format!(
        "✓ Bundled to: {}\n   Merged {} file(s)\n",
        output.display(),
        project.modules.len() + 1
    ));
    Ok(Exit::Ok)
}
