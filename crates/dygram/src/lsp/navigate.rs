//! Go to definition, find references and rename, within a document and across the files that
//! import it.
//!
//! A name's *home* is the file that declares it: a node used through an import lives in the
//! imported file. References and renames start at the home and reach every file that imports it
//! (the open documents and the machine files under the workspace's folder): the import's name is
//! edited there, and, when the import has no alias, every use of it too.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use dygram_analysis::navigate::{self, Definition, Indexed, Places, Sources};
use lsp_types::{Location, Position, Range, TextEdit, Uri, WorkspaceEdit};

use super::text::{self, Document};
use super::{file_path, file_uri};
use dygram_core::imports;
use dygram_runtime::files::{Disk, canonical};

pub use dygram_analysis::navigate::RenameError;

/// The documents the editor has open and the folder it works in.
#[derive(Debug, Clone, Copy)]
pub struct Workspace<'a> {
    /// Open documents, as edited.
    pub open: &'a HashMap<Uri, Document>,
    /// The canonical path of each open document that is a file.
    pub paths: &'a HashMap<Uri, PathBuf>,
    /// The workspace's folder, if the editor gave one.
    pub root: Option<&'a Path>,
}

/// Documents by URI: the open ones as edited, the others from the disk.
impl Sources for Workspace<'_> {
    type Key = Uri;

    fn text(&self, uri: &Uri) -> Option<String> {
        if let Some(doc) = self.open.get(uri) {
            return Some(doc.text.clone());
        }
        std::fs::read_to_string(file_path(uri)?).ok()
    }

    fn imported(&self, from: &Uri, written: &str) -> Option<Uri> {
        self.uri_for(&imported_file(from, written)?)
    }

    fn candidates(&self, home: &Uri) -> Vec<Uri> {
        match file_path(home) {
            Some(path) => self.candidates_of(&canonical(&path)),
            None => Vec::new(),
        }
    }
}

impl Workspace<'_> {
    /// The URI of the file at `path`: the one the editor opened it with, if it is open.
    fn uri_for(&self, path: &Path) -> Option<Uri> {
        let wanted = canonical(path);
        self.paths
            .iter()
            .find(|(_, p)| **p == wanted)
            .map(|(uri, _)| uri.clone())
            .or_else(|| file_uri(&wanted))
    }

    /// The byte offset of `position` in `uri`'s text.
    fn offset(&self, uri: &Uri, position: Position) -> Option<usize> {
        let text = Sources::text(self, uri)?;
        Some(text::offset(&text, position))
    }

    /// Where the name under `position` is declared; on an import's path, the imported file.
    pub fn definition(&self, uri: &Uri, position: Position) -> Option<Location> {
        let at = self.offset(uri, position)?;
        Some(match navigate::definition(self, uri, at)? {
            Definition::File(file) => Location::new(file, Range::default()),
            Definition::Name(home, span) => location(&home, span),
        })
    }

    /// Every place the name under `position` is written, in its home and in the files importing
    /// it (declarations only when `declarations`).
    pub fn references(&self, uri: &Uri, position: Position, declarations: bool) -> Vec<Location> {
        let Some(at) = self.offset(uri, position) else {
            return Vec::new();
        };
        navigate::references(self, uri, at, declarations)
            .into_iter()
            .flat_map(|Places { file, spans }| {
                let lines = text::LineIndex::new(&file.text);
                spans
                    .into_iter()
                    .map(|span| Location::new(file.key.clone(), lines.span(span)))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The edits that rename the name under `position` to `new_name` everywhere it is written.
    #[allow(clippy::mutable_key_type)] // The protocol's edit is keyed by URI.
    pub fn rename(
        &self,
        uri: &Uri,
        position: Position,
        new_name: &str,
    ) -> Result<WorkspaceEdit, RenameError> {
        let at = self.offset(uri, position).ok_or(RenameError::NoName)?;
        let mut changes: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
        for Places { file, spans } in navigate::rename(self, uri, at, new_name)? {
            let edits = changes.entry(file.key.clone()).or_default();
            let lines = text::LineIndex::new(&file.text);
            for span in spans {
                edits.push(TextEdit::new(lines.span(span), new_name.to_string()));
            }
        }
        Ok(WorkspaceEdit::new(changes))
    }

    /// The range of the name under `position`, if it can be renamed.
    pub fn prepare_rename(&self, uri: &Uri, position: Position) -> Option<Range> {
        let text = Sources::text(self, uri)?;
        let lines = text::LineIndex::new(&text);
        let span = navigate::prepare_rename(&text, lines.offset(position))?;
        Some(lines.span(span))
    }

    /// The machine files that might import `home`: the open ones and those under the root.
    fn candidates_of(&self, home: &Path) -> Vec<Uri> {
        let mut seen: HashSet<PathBuf> = HashSet::new();
        seen.insert(home.to_path_buf());
        let mut out = Vec::new();
        for (uri, path) in self.paths {
            if seen.insert(path.clone()) {
                out.push(uri.clone());
            }
        }
        let root = self
            .root
            .map(Path::to_path_buf)
            .or_else(|| home.parent().map(Path::to_path_buf));
        if let Some(root) = root {
            for path in dygram_runtime::files::machine_files(&root) {
                if seen.insert(canonical(&path))
                    && let Some(uri) = file_uri(&path)
                {
                    out.push(uri);
                }
            }
        }
        out
    }
}

fn location(file: &Indexed<Uri>, span: dygram_syntax::source::Span) -> Location {
    Location::new(
        file.key.clone(),
        text::range(&file.text, span.start as usize, span.end as usize),
    )
}

/// The file an import of `uri` names, if it exists.
fn imported_file(uri: &Uri, written: &str) -> Option<PathBuf> {
    let written = written.trim();
    if written.is_empty() || written.contains("://") {
        return None;
    }
    let base = file_path(uri)?.parent()?.to_path_buf();
    imports::find_file(&Disk, &base, written)
}
