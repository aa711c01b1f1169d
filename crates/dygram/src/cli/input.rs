//! Reading the machine a command works on, and showing its diagnostics.

use std::io::Read;
use std::path::{Path, PathBuf};

use dygram_core::imports::{self, Project};
use dygram_syntax::source::SourceFile;

use super::{CliError, Verbosity, color, eprint_line};

/// Source file extensions.
pub const SOURCE_EXTENSIONS: [&str; 3] = ["dy", "dygram", "mach"];

/// A machine source: a file or standard input.
pub struct Input {
    /// The file, `None` for standard input.
    pub path: Option<PathBuf>,
    /// Its text.
    pub text: String,
}

impl Input {
    /// The name used in messages.
    pub fn name(&self) -> String {
        self.path
            .as_ref()
            .map_or_else(|| "<stdin>".to_string(), |p| p.display().to_string())
    }

    /// The file name without its extension (`machine` for standard input).
    pub fn stem(&self) -> String {
        self.path.as_ref().and_then(|p| p.file_stem()).map_or_else(
            || "machine".to_string(),
            |s| s.to_string_lossy().into_owned(),
        )
    }

    /// Whether the input is canonical JSON (a `.json` file).
    pub fn is_json(&self) -> bool {
        self.path
            .as_ref()
            .and_then(|p| p.extension())
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
    }
}

/// Reads `arg` (a path or `-` for standard input). `.json` files are accepted when `json_ok`.
pub fn read(arg: &Path, json_ok: bool) -> Result<Input, CliError> {
    if arg == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| {
            CliError::new(format!("cannot read standard input: {e}")).kind("unreadable_input")
        })?;
        return Ok(Input { path: None, text });
    }
    let ext = arg
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let accepted = SOURCE_EXTENSIONS.contains(&ext.as_str()) || (json_ok && ext == "json");
    if !accepted {
        let choices = if json_ok {
            ".dy, .dygram, .mach or (canonical JSON) .json"
        } else {
            ".dy, .dygram or .mach"
        };
        return Err(CliError::usage(format!(
            "{}: not a machine file (expected {choices})",
            arg.display()
        ))
        .hint("use - to read the machine from standard input"));
    }
    let text = std::fs::read_to_string(arg).map_err(|e| {
        let err =
            CliError::new(format!("cannot read {}: {e}", arg.display())).kind("unreadable_input");
        if e.kind() == std::io::ErrorKind::NotFound {
            err.hint("check the path (relative paths start at the current folder)")
        } else {
            err
        }
    })?;
    Ok(Input {
        path: Some(arg.to_path_buf()),
        text,
    })
}

/// Checks the input (with its imports unless `no_imports`).
pub fn compile(input: &Input, no_imports: bool) -> Project {
    let file = SourceFile::new(input.name(), input.text.as_str());
    if no_imports {
        let compiled = dygram_core::compile(file);
        return Project {
            entry: imports::Module {
                path: input.path.clone().unwrap_or_default(),
                compiled,
                dependencies: Vec::new(),
            },
            modules: Vec::new(),
        };
    }
    imports::load(file, input.path.as_deref(), &dygram_runtime::files::Disk)
}

/// Shows every diagnostic of every file (imported files first); warnings unless quiet. Returns the
/// number of errors.
pub fn show_diagnostics(project: &Project, verbosity: Verbosity) -> usize {
    let color = color();
    let mut errors = 0;
    for module in project
        .modules
        .iter()
        .chain(std::iter::once(&project.entry))
    {
        let c = &module.compiled;
        for d in &c.diagnostics {
            if d.is_error() {
                errors += 1;
            } else if verbosity.quiet {
                continue;
            }
            eprint_line(d.render(&c.file, color).trim_end());
            eprint_line("");
        }
    }
    if errors > 0 && !verbosity.quiet {
        let s = if errors == 1 { "" } else { "s" };
        eprint_line(&format!("{errors} error{s}"));
    }
    errors
}
