//! Go to definition, find references and rename, within a document and across the files that
//! import it.
//!
//! A name's *home* is the file that declares it: a node used through an import lives in the
//! imported file. References and renames start at the home and reach every file that imports it
//! (the open documents and the machine files under the workspace's folder): the import's name is
//! edited there, and, when the import has no alias, every use of it too.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use lsp_types::{Location, Position, Range, TextEdit, Uri, WorkspaceEdit};

use super::text::{self, Document};
use super::{file_path, file_uri};
use dygram_analysis::names::{self, Imported, Names, Target};
use dygram_core::imports::{self, EXTENSIONS};
use dygram_runtime::files::{Disk, canonical};
use dygram_syntax::source::Span;

/// Folders never searched for importers.
const SKIPPED: [&str; 4] = ["target", "node_modules", ".git", ".dygram"];
/// At most this many files are read when looking for importers.
const MAX_FILES: usize = 5_000;
/// At most this many folder entries are looked at (a workspace that is a whole home folder).
const MAX_ENTRIES: usize = 100_000;

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

/// A file's text and names.
#[derive(Clone)]
struct Indexed {
    uri: Uri,
    text: String,
    names: Names,
}

/// Why a rename is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenameError {
    /// The cursor is not on a name.
    #[error("there is no node or attribute name here to rename")]
    NoName,
    /// The new name is not a name.
    #[error(
        "`{0}` is not a valid name: use letters, digits and `_`, starting with a letter or `_`"
    )]
    Invalid(String),
}

impl Workspace<'_> {
    /// The text of `uri`: the open document's, else the file's on disk.
    fn text(&self, uri: &Uri) -> Option<String> {
        if let Some(doc) = self.open.get(uri) {
            return Some(doc.text.clone());
        }
        std::fs::read_to_string(file_path(uri)?).ok()
    }

    /// The URI of the file at `path`: the one the editor opened it with, if it is open.
    fn uri_for(&self, path: &Path) -> Option<Uri> {
        let wanted = canonical(path);
        self.paths
            .iter()
            .find(|(_, p)| **p == wanted)
            .map(|(uri, _)| uri.clone())
            .or_else(|| file_uri(path))
    }

    fn indexed(&self, uri: &Uri) -> Option<Indexed> {
        let text = self.text(uri)?;
        let names = names::index(&dygram_analysis::parse_open(&text).program);
        Some(Indexed {
            uri: uri.clone(),
            text,
            names,
        })
    }

    /// The occurrence's file and name under `position` of `uri`.
    fn at(&self, uri: &Uri, position: Position) -> Option<(Indexed, Span, Target)> {
        let file = self.indexed(uri)?;
        let at = text::offset(&file.text, position);
        let found = file.names.at(at)?;
        let (span, target) = (found.span, found.target.clone());
        Some((file, span, target))
    }

    /// Where the name under `position` is declared; on an import's path, the imported file.
    pub fn definition(&self, uri: &Uri, position: Position) -> Option<Location> {
        let file = self.indexed(uri)?;
        let at = text::offset(&file.text, position);
        let on_path = file
            .names
            .import_paths
            .iter()
            .find(|(span, _)| (span.start as usize) <= at && at <= (span.end as usize));
        if let Some((_, written)) = on_path {
            let found = imported_file(uri, written)?;
            return Some(Location::new(self.uri_for(&found)?, Range::default()));
        }
        let target = file.names.at(at)?.target.clone();
        let (home, target) = self.home(file, target)?;
        let span = home.names.declaration(&target)?;
        Some(location(&home, span))
    }

    /// The file that declares `target` (following imports) and the target's name there.
    fn home(&self, file: Indexed, target: Target) -> Option<(Indexed, Target)> {
        let mut current = (file, target);
        // Imports may chain; a cycle is cut by the visited set.
        let mut visited = HashSet::new();
        while visited.insert(current.0.uri.as_str().to_string()) {
            let node = match &current.1 {
                Target::Node(q) | Target::Attribute { node: q, .. } => q.clone(),
            };
            let Some((import, rest)) = current.0.names.import_of(&node) else {
                return Some(current);
            };
            let original = join(&import.original, &rest);
            let next_target = match &current.1 {
                Target::Node(_) => Target::Node(original),
                Target::Attribute { name, .. } => Target::Attribute {
                    node: original,
                    name: name.clone(),
                },
            };
            let path = imported_file(&current.0.uri, &import.path)?;
            let next = self.indexed(&self.uri_for(&path)?)?;
            current = (next, next_target);
        }
        None
    }

    /// Every place the name under `position` is written, in its home and in the files importing
    /// it (declarations only when `declarations`).
    pub fn references(&self, uri: &Uri, position: Position, declarations: bool) -> Vec<Location> {
        let Some((file, _, target)) = self.at(uri, position) else {
            return Vec::new();
        };
        let Some((home, target)) = self.home(file, target) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (file, spans) in self.spans_everywhere(&home, &target, declarations) {
            let lines = text::LineIndex::new(&file.text);
            out.extend(spans.into_iter().map(|span| {
                Location::new(
                    file.uri.clone(),
                    lines.range(span.start as usize, span.end as usize),
                )
            }));
        }
        out
    }

    /// The edits that rename the name under `position` to `new_name` everywhere it is written.
    #[allow(clippy::mutable_key_type)] // The protocol's edit is keyed by URI.
    pub fn rename(
        &self,
        uri: &Uri,
        position: Position,
        new_name: &str,
    ) -> Result<WorkspaceEdit, RenameError> {
        if !is_name(new_name) {
            return Err(RenameError::Invalid(new_name.to_string()));
        }
        let (file, _, target) = self.at(uri, position).ok_or(RenameError::NoName)?;
        let spans = if alias_of(&file.names, &target).is_some() {
            // An import's alias is this file's own name: renamed here only.
            let own = file.names.of(&target).map(|o| o.span).collect();
            vec![(file, own)]
        } else {
            let (home, target) = self.home(file, target).ok_or(RenameError::NoName)?;
            self.spans_everywhere(&home, &target, true)
        };
        let mut changes: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
        for (file, spans) in spans {
            let edits = changes.entry(file.uri.clone()).or_default();
            let lines = text::LineIndex::new(&file.text);
            for span in spans {
                let range = lines.range(span.start as usize, span.end as usize);
                edits.push(TextEdit::new(range, new_name.to_string()));
            }
        }
        Ok(WorkspaceEdit::new(changes))
    }

    /// The range of the name under `position`, if it can be renamed.
    pub fn prepare_rename(&self, uri: &Uri, position: Position) -> Option<Range> {
        let (file, span, _) = self.at(uri, position)?;
        Some(text::range(
            &file.text,
            span.start as usize,
            span.end as usize,
        ))
    }

    /// The spans naming `target` in `home` and in every file that imports it.
    fn spans_everywhere(
        &self,
        home: &Indexed,
        target: &Target,
        declarations: bool,
    ) -> Vec<(Indexed, Vec<Span>)> {
        let own: Vec<Span> = home
            .names
            .of(target)
            .filter(|o| declarations || !o.declaration)
            .map(|o| o.span)
            .collect();
        let mut out = vec![(home.clone(), own)];
        let Some(home_path) = file_path(&home.uri).map(|p| canonical(&p)) else {
            return out;
        };
        for uri in self.candidates(&home_path) {
            let Some(importer) = self.indexed(&uri) else {
                continue;
            };
            let mut spans = Vec::new();
            for import in &importer.names.imports {
                let from = imported_file(&uri, &import.path).map(|p| canonical(&p));
                if from.as_deref() == Some(home_path.as_path()) {
                    spans.extend(in_importer(&importer.names, import, target, declarations));
                }
            }
            if !spans.is_empty() {
                spans.sort_by_key(|s| (s.start, s.end));
                spans.dedup();
                out.push((importer, spans));
            }
        }
        out
    }

    /// The machine files that might import `home`: the open ones and those under the root.
    fn candidates(&self, home: &Path) -> Vec<Uri> {
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
            for path in machine_files(&root) {
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

/// The import whose alias is exactly `target`'s node, if any.
fn alias_of<'n>(names: &'n Names, target: &Target) -> Option<&'n Imported> {
    let Target::Node(q) = target else { return None };
    names
        .imports
        .iter()
        .find(|i| i.alias.is_some() && &i.local == q)
}

/// The spans of an importer that name `target` (a name of the imported file) through `import`.
fn in_importer(names: &Names, import: &Imported, target: &Target, declarations: bool) -> Vec<Span> {
    let node = match target {
        Target::Node(q) | Target::Attribute { node: q, .. } => q.as_str(),
    };
    let original: Vec<&str> = import.original.split('.').collect();
    let wanted: Vec<&str> = node.split('.').collect();
    let mut out = Vec::new();
    // The import's own name: `target` is the imported node or one of its parents.
    if matches!(target, Target::Node(_))
        && wanted.len() <= original.len()
        && original[..wanted.len()] == wanted[..]
        && let Some(span) = import.parts.get(wanted.len() - 1)
    {
        out.push(*span);
    }
    // Uses in the importer: `target` is the imported node or inside it.
    let Some(rest) = wanted.get(original.len()..) else {
        return out;
    };
    if wanted[..original.len()] != original[..] {
        return out;
    }
    let local = std::iter::once(import.local.as_str())
        .chain(rest.iter().copied())
        .collect::<Vec<_>>()
        .join(".");
    let mapped = match target {
        Target::Node(_) => Target::Node(local),
        Target::Attribute { name, .. } => Target::Attribute {
            node: local,
            name: name.clone(),
        },
    };
    // An aliased import keeps its local name when the imported node is renamed.
    if import.alias.is_some() && rest.is_empty() && matches!(target, Target::Node(_)) {
        return out;
    }
    out.extend(
        names
            .of(&mapped)
            .filter(|o| declarations || !o.declaration)
            .map(|o| o.span),
    );
    out
}

fn join(prefix: &str, rest: &str) -> String {
    if rest.is_empty() {
        prefix.to_string()
    } else {
        format!("{prefix}.{rest}")
    }
}

fn location(file: &Indexed, span: Span) -> Location {
    Location::new(
        file.uri.clone(),
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

/// The machine files under `root` (hidden and build folders skipped), at most [`MAX_FILES`]
/// among the first [`MAX_ENTRIES`] entries.
fn machine_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    let mut looked = 0;
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            looked += 1;
            if looked > MAX_ENTRIES {
                return out;
            }
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if !name.starts_with('.') && !SKIPPED.contains(&name.as_str()) {
                    folders.push(path);
                }
            } else if path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| EXTENSIONS.contains(&e))
            {
                out.push(path);
                if out.len() >= MAX_FILES {
                    return out;
                }
            }
        }
    }
    out
}

/// Whether `text` can be a node's or attribute's name.
fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !matches!(text, "machine" | "import" | "from" | "as")
}
