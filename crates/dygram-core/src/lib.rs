//! The DyGram language past its syntax: linking, imports, validation, the canonical JSON, the
//! condition evaluator and the drawings (DOT, Mermaid, `.dy` source).
//!
//! Pure: no IO of its own (imported files are read through [`imports::Files`]), no terminal, no
//! network, no database, no JavaScript engine. It builds for `wasm32-unknown-unknown`, which is
//! how the playground checks machines in the page.
//!
//! ```
//! let compiled = dygram_core::compile(dygram_syntax::source::SourceFile::new("m.dy", "a -> b;"));
//! assert!(!compiled.has_errors());
//! let json = compiled.json(Default::default());
//! assert_eq!(json["edges"][0]["source"], "a");
//! ```

pub mod condition;
pub mod diagnostic;
pub mod imports;
pub mod json;
pub mod model;
pub mod render;
pub mod style;
pub mod suggest;
pub mod validate;
pub mod values;

use diagnostic::{Diagnostic, Stage};
use dygram_syntax::source::SourceFile;

/// A program read, linked and checked.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The source.
    pub file: SourceFile,
    /// The syntax tree (as much as could be read).
    pub program: dygram_syntax::ast::Program,
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
    let parsed = dygram_syntax::parse(file.text());
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
    parsed: dygram_syntax::Parsed,
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
