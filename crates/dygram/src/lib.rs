//! The DyGram language: parsing, linking, validation and outputs.
//!
//! A library: it never prints. The `dygram` binary owns the terminal.
//!
//! ```
//! let compiled = dygram::compile(dygram::source::SourceFile::new("m.dy", "a -> b;"));
//! assert!(!compiled.has_errors());
//! let json = compiled.json(Default::default());
//! assert_eq!(json["edges"][0]["source"], "a");
//! ```

pub mod connect;
pub mod diagnostic;
pub mod imports;
pub mod json;
pub mod lsp;
pub mod model;
pub mod playback;
pub mod render;
pub mod runtime;
pub mod session;
pub mod source;
pub mod style;
pub mod suggest;
pub mod syntax;
pub mod validate;
pub mod values;

use diagnostic::{Diagnostic, Stage};
use source::SourceFile;

/// A program read, linked and checked.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The source.
    pub file: SourceFile,
    /// The syntax tree (as much as could be read).
    pub program: syntax::ast::Program,
    /// The linked machine.
    pub machine: model::Machine,
    /// Errors and warnings, syntax ones first.
    pub diagnostics: Vec<Diagnostic>,
}

impl Compiled {
    /// Whether there is any error (syntax or validation).
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// Whether there is a syntax error.
    pub fn has_syntax_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.is_error() && d.stage == Stage::Syntax)
    }

    /// The canonical machine JSON.
    pub fn json(&self, options: json::JsonOptions) -> serde_json::Value {
        json::to_json(&self.machine, &self.file, options)
    }
}

/// Parses, links and checks one file on its own (its imports are not read; see
/// [`imports::load`] for that).
pub fn compile(file: SourceFile) -> Compiled {
    let parsed = syntax::parse(file.text());
    let diagnostics = parsed
        .errors
        .iter()
        .map(|e| Diagnostic::error(Stage::Syntax, e.message.clone(), Some(e.span)))
        .collect();
    compile_parsed(file, parsed, Vec::new(), diagnostics)
}

/// Links and checks a parsed file, with the nodes its imports gave.
pub(crate) fn compile_parsed(
    file: SourceFile,
    parsed: syntax::Parsed,
    imported: Vec<model::Node>,
    mut diagnostics: Vec<Diagnostic>,
) -> Compiled {
    let machine = model::link_with(&parsed.program, imported);
    // A program that could not be read is not checked further: its tree is incomplete.
    if !diagnostics
        .iter()
        .any(|d| d.is_error() && d.stage == Stage::Syntax)
    {
        diagnostics.extend(validate::validate(&machine));
    }
    Compiled {
        file,
        program: parsed.program,
        machine,
        diagnostics,
    }
}
