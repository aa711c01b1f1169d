//! The compiler's diagnostics of a document, as LSP diagnostics: the same errors and warnings as
//! `dygram pv`, with ranges, codes (the stage) and related information; a diagnostic with a fix
//! (a "did you mean" suggestion) carries it in `data` ([`super::actions::Data`]), from which the
//! quick fix is made when the editor sends the diagnostic back.

use std::path::{Path, PathBuf};

use lsp_types::{DiagnosticRelatedInformation, DiagnosticSeverity, Location, NumberOrString, Uri};

use super::{actions, text};
use dygram_core::diagnostic::{Diagnostic, Severity, Stage};
use dygram_core::imports;
use dygram_syntax::source::SourceFile;

/// A document's diagnostics and the files it imports.
#[derive(Debug, Clone, Default)]
pub struct Checked {
    /// The diagnostics, for the editor.
    pub diagnostics: Vec<lsp_types::Diagnostic>,
    /// The canonical paths of every file it imports, directly or not.
    pub imports: Vec<PathBuf>,
    /// The diagnostics as the compiler gave them, one for each of `diagnostics`.
    pub found: Vec<Diagnostic>,
}

/// The diagnostics of the document `uri` with `content` (found at `path` on disk, if it is a file
/// there: its imports are read relative to it, through `files`).
pub fn check(uri: &Uri, path: Option<&Path>, content: &str, files: &dyn imports::Files) -> Checked {
    let name = path.map_or_else(|| uri.as_str().to_string(), |p| p.display().to_string());
    let project = imports::load(SourceFile::new(name, content), path, files);
    let lines = text::LineIndex::new(content);
    Checked {
        diagnostics: project
            .entry
            .compiled
            .diagnostics
            .iter()
            .map(|d| convert(uri, &lines, d))
            .collect(),
        imports: project.modules.iter().map(|m| m.path.clone()).collect(),
        found: project.entry.compiled.diagnostics.clone(),
    }
}

fn convert(uri: &Uri, lines: &text::LineIndex<'_>, d: &Diagnostic) -> lsp_types::Diagnostic {
    let range = d.span.map_or_else(
        || lines.range(0, 0),
        |s| lines.range(s.start as usize, s.end as usize),
    );
    let message = match &d.hint {
        Some(hint) => format!("{}\n{hint}", d.message),
        None => d.message.clone(),
    };
    let related = d.related.as_ref().map(|(span, note)| {
        vec![DiagnosticRelatedInformation {
            location: Location::new(
                uri.clone(),
                lines.range(span.start as usize, span.end as usize),
            ),
            message: note.clone(),
        }]
    });
    lsp_types::Diagnostic {
        range,
        severity: Some(match d.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        }),
        code: Some(NumberOrString::String(
            match d.stage {
                Stage::Syntax => "syntax",
                Stage::Validation => "validation",
                Stage::Graph => "graph",
            }
            .to_string(),
        )),
        source: Some("dygram".to_string()),
        message,
        related_information: related,
        data: d
            .suggestion
            .as_ref()
            .map(|s| actions::Data::of(lines, s).to_json()),
        ..lsp_types::Diagnostic::default()
    }
}
