//! Imports: `import { A, Group.B as C } from "./lib.dy"` brings nodes of another file into this one.
//!
//! * The path is relative to the importing file's folder (or the current folder for standard
//!   input). A path with an extension (`.dy`, `.dygram`, `.mach`) must exist as written; without
//!   one, those extensions are tried in that order. Remote (`http://`) imports are refused: a
//!   machine never fetches code.
//! * Every top-level node of a file can be imported, with everything declared inside it (child
//!   nodes, their attributes and the edges written in their blocks); `Group.B` imports a nested
//!   node. The imported node takes the alias, or its own simple name. Top-level edges of the
//!   imported file stay there: put a flow inside a group node to export it.
//! * Imported nodes come before the file's own nodes, so edges can use their names without
//!   creating placeholders. A name imported twice, or also declared locally, is an error.
//! * Imported files may import others; a cycle is an error. Each file is read and checked once.
//!
//! Files are read through [`Files`], never directly: the command line reads the disk, the
//! language server its open documents first, the playground a map in the page.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::diagnostic::{Diagnostic, Stage};
use crate::model::Node;
use crate::{Compiled, compile_parsed};
use dygram_syntax::ast::{self, Item};
use dygram_syntax::source::SourceFile;

/// Extensions tried for an import without one, in order.
pub const EXTENSIONS: [&str; 3] = ["dy", "dygram", "mach"];

/// A file and its imports, all loaded and checked.
#[derive(Debug, Clone)]
pub struct Project {
    /// The file given.
    pub entry: Module,
    /// The files it imports, directly or not, each after the files it imports.
    pub modules: Vec<Module>,
}

/// One loaded file.
#[derive(Debug, Clone)]
pub struct Module {
    /// Its path as found (canonical when the file exists on disk).
    pub path: PathBuf,
    /// The file checked, with the nodes it imports.
    pub compiled: Compiled,
    /// The files it imports (indexes into [`Project::modules`]).
    pub dependencies: Vec<usize>,
}

impl Project {
    /// Every diagnostic of the imported files and then of the entry file, as JSON objects:
    /// `{severity, stage, message, file, line, column, hint}` (line and column from 1; null for a
    /// problem of the whole file).
    pub fn diagnostics_json(&self) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        for module in self.modules.iter().chain(std::iter::once(&self.entry)) {
            let file = &module.compiled.file;
            for d in &module.compiled.diagnostics {
                let position = d.span.map(|s| file.position(s.start as usize));
                out.push(serde_json::json!({
                    "severity": if d.is_error() { "error" } else { "warning" },
                    "stage": match d.stage {
                        Stage::Syntax => "syntax",
                        Stage::Validation => "validation",
                        Stage::Graph => "graph",
                    },
                    "message": d.message,
                    "file": file.name(),
                    "line": position.map(|p| p.line + 1),
                    "column": position.map(|p| p.character + 1),
                    "hint": d.hint,
                }));
            }
        }
        out
    }

    /// The entry file.
    pub fn entry(&self) -> &Compiled {
        &self.entry.compiled
    }

    /// Whether any file has an error.
    pub fn has_errors(&self) -> bool {
        self.entry.compiled.has_errors() || self.modules.iter().any(|m| m.compiled.has_errors())
    }
}

/// Where imported files come from, and how a file is known.
pub trait Files {
    /// The text of the file at `path`.
    fn read(&self, path: &Path) -> std::io::Result<String>;
    /// Whether a file exists at `path`.
    fn is_file(&self, path: &Path) -> bool;
    /// How a loaded file is known: `path` with links and `..` resolved when it exists, else as
    /// given.
    fn canonical(&self, path: &Path) -> PathBuf;
}

/// No files at all: every import fails to be found (a single file on its own).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoFiles;

impl Files for NoFiles {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{} is not available", path.display()),
        ))
    }

    fn is_file(&self, _: &Path) -> bool {
        false
    }

    fn canonical(&self, path: &Path) -> PathBuf {
        path.to_path_buf()
    }
}

/// Files held in memory by path (the playground's machines, tests).
impl Files for HashMap<PathBuf, String> {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        self.get(path).cloned().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} does not exist", path.display()),
            )
        })
    }

    fn is_file(&self, path: &Path) -> bool {
        self.contains_key(path)
    }

    fn canonical(&self, path: &Path) -> PathBuf {
        tidy(path)
    }
}

/// Loads `file` (found at `path`, `None` for standard input) and everything it imports, read
/// through `files`.
pub fn load(file: SourceFile, path: Option<&Path>, files: &dyn Files) -> Project {
    let mut loader = Loader {
        modules: Vec::new(),
        by_path: HashMap::new(),
        files,
    };
    let base = path
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let entry_path = path.map_or_else(|| PathBuf::from(file.name()), |p| files.canonical(p));
    let mut stack = vec![entry_path.clone()];
    let entry = loader.load(file, entry_path, &base, &mut stack);
    Project {
        entry,
        modules: loader.modules,
    }
}

/// `p` without `.` components (`lib/./a.dy` → `lib/a.dy`), for messages.
fn tidy(p: &Path) -> PathBuf {
    p.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

/// A file beside `p` with the same stem and another machine extension, when `p` has one.
fn other_extension(files: &dyn Files, p: &Path) -> Option<PathBuf> {
    let ext = p.extension()?.to_str()?;
    if !EXTENSIONS.contains(&ext) {
        return None;
    }
    EXTENSIONS
        .iter()
        .filter(|e| **e != ext)
        .map(|e| p.with_extension(e))
        .find(|candidate| files.is_file(candidate))
}

struct Loader<'a> {
    modules: Vec<Module>,
    by_path: HashMap<PathBuf, usize>,
    files: &'a dyn Files,
}

impl Loader<'_> {
    /// Loads one file (its imports first, which are added to the loader's modules).
    fn load(
        &mut self,
        file: SourceFile,
        path: PathBuf,
        base: &Path,
        stack: &mut Vec<PathBuf>,
    ) -> Module {
        let parsed = dygram_syntax::parse(file.text());
        let mut diagnostics: Vec<Diagnostic> = parsed
            .errors
            .iter()
            .map(|e| Diagnostic::error(Stage::Syntax, e.message.clone(), Some(e.span)))
            .collect();
        let local_names = declared_names(&parsed.program.items);
        let mut imported: Vec<Node> = Vec::new();
        let mut imported_from: HashMap<String, String> = HashMap::new();
        let mut dependencies = Vec::new();
        for import in &parsed.program.imports {
            let shown = import.path.value.clone();
            let Some(dependency) = self.resolve_import(import, base, stack, &mut diagnostics)
            else {
                continue;
            };
            dependencies.push(dependency);
            let module = &self.modules[dependency];
            if module.compiled.has_syntax_errors() {
                diagnostics.push(
                    Diagnostic::error(
                        Stage::Validation,
                        format!("Imported file \"{shown}\" has syntax errors"),
                        Some(import.path.span),
                    )
                    .with_hint("its errors are listed with its own path"),
                );
                continue;
            }
            for symbol in &import.symbols {
                let wanted = symbol.name.text();
                let Some(found) = find_path(&module.compiled.machine.nodes, &symbol.name) else {
                    let mut d = Diagnostic::error(
                        Stage::Validation,
                        format!("Module \"{shown}\" has no node named \"{wanted}\""),
                        Some(symbol.name.span),
                    );
                    let mut importable = Vec::new();
                    paths(&module.compiled.machine.nodes, "", &mut importable);
                    if let Some(close) =
                        crate::suggest::closest(&wanted, importable.iter().map(String::as_str))
                    {
                        d = d
                            .with_hint(format!("did you mean `{close}`?"))
                            .with_suggestion(symbol.name.span, close);
                    }
                    diagnostics.push(d);
                    continue;
                };
                let mut node = found.clone();
                node.mark_imported();
                node.name = symbol
                    .alias
                    .as_ref()
                    .map_or_else(|| symbol.name.last().to_string(), |a| a.text.clone());
                if let Some(clash) = subtree_names(&node)
                    .into_iter()
                    .find(|n| local_names.contains(n))
                {
                    diagnostics.push(
                        Diagnostic::error(
                            Stage::Validation,
                            format!(
                                "Imported symbol \"{}\" collides with local node \"{clash}\"",
                                node.name
                            ),
                            Some(symbol.span),
                        )
                        .with_hint("rename the local node, or import under another name with `as`"),
                    );
                    continue;
                }
                if let Some(earlier) = imported_from.get(&node.name) {
                    diagnostics.push(Diagnostic::error(
                        Stage::Validation,
                        format!(
                            "Symbol \"{}\" is imported from both \"{earlier}\" and \"{shown}\"",
                            node.name
                        ),
                        Some(symbol.span),
                    ));
                    continue;
                }
                imported_from.insert(node.name.clone(), shown.clone());
                imported.push(node);
            }
        }
        Module {
            path,
            compiled: compile_parsed(file, parsed, imported, diagnostics),
            dependencies,
        }
    }

    fn resolve_import(
        &mut self,
        import: &ast::Import,
        base: &Path,
        stack: &mut Vec<PathBuf>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Option<usize> {
        let written = import.path.value.trim();
        let span = Some(import.path.span);
        if written.is_empty() {
            diagnostics.push(Diagnostic::error(
                Stage::Validation,
                "Import path cannot be empty",
                span,
            ));
            return None;
        }
        if written.starts_with("http://") || written.starts_with("https://") {
            diagnostics.push(
                Diagnostic::error(
                    Stage::Validation,
                    format!("Remote imports are not supported: \"{written}\""),
                    span,
                )
                .with_hint("download the file and import it by a relative path"),
            );
            return None;
        }
        let Some(found) = find_file(self.files, base, written) else {
            let looked = tidy(&base.join(written));
            let hint = match other_extension(self.files, &looked) {
                Some(sibling) => format!(
                    "{} exists: import it by that name, or leave the extension out",
                    sibling.display()
                ),
                None => "paths are relative to the importing file; without an extension .dy, .dygram and .mach are tried".to_string(),
            };
            diagnostics.push(
                Diagnostic::error(
                    Stage::Validation,
                    format!(
                        "Cannot find module \"{written}\" (looked for {})",
                        looked.display()
                    ),
                    span,
                )
                .with_hint(hint),
            );
            return None;
        };
        let path = self.files.canonical(&found);
        if let Some(pos) = stack.iter().position(|p| *p == path) {
            let mut cycle: Vec<String> = stack[pos..].iter().map(|p| short(p)).collect();
            cycle.push(short(&path));
            diagnostics.push(Diagnostic::error(
                Stage::Validation,
                format!("Circular dependency detected: {}", cycle.join(" → ")),
                span,
            ));
            return None;
        }
        if let Some(&index) = self.by_path.get(&path) {
            return Some(index);
        }
        let text = match self.files.read(&found) {
            Ok(t) => t,
            Err(e) => {
                diagnostics.push(Diagnostic::error(
                    Stage::Validation,
                    format!(
                        "Cannot read module \"{written}\" ({}): {e}",
                        found.display()
                    ),
                    span,
                ));
                return None;
            }
        };
        let file = SourceFile::new(found.display().to_string(), text);
        let dir = found
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        stack.push(path.clone());
        let mut module = self.load(file, path.clone(), &dir, stack);
        stack.pop();
        // A library's nodes are wired up by its importers: graph warnings would only be noise.
        module
            .compiled
            .diagnostics
            .retain(|d| d.stage != Stage::Graph);
        self.modules.push(module);
        let index = self.modules.len() - 1;
        self.by_path.insert(path, index);
        Some(index)
    }
}

/// A file name for cycle messages.
fn short(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The file an import path names, relative to the folder `base`, if it exists.
pub fn find_file(files: &dyn Files, base: &Path, written: &str) -> Option<PathBuf> {
    let candidate = base.join(written);
    let has_extension = candidate
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.contains(&e));
    if has_extension || files.is_file(&candidate) {
        return files.is_file(&candidate).then_some(candidate);
    }
    EXTENSIONS
        .iter()
        .map(|ext| base.join(format!("{written}.{ext}")))
        .find(|p| files.is_file(p))
}

/// The node a dotted name designates among top-level nodes and their children.
fn find_path<'n>(nodes: &'n [Node], name: &ast::QName) -> Option<&'n Node> {
    let mut current = nodes;
    let mut found = None;
    for part in &name.parts {
        let node = current.iter().find(|n| n.name == part.text)?;
        found = Some(node);
        current = &node.nodes;
    }
    found
}

/// What an import can name in `nodes`, in declaration order: each node's dotted path.
fn paths(nodes: &[Node], prefix: &str, out: &mut Vec<String>) {
    for n in nodes.iter().filter(|n| n.kind.as_deref() != Some("note")) {
        let path = if prefix.is_empty() {
            n.name.clone()
        } else {
            format!("{prefix}.{}", n.name)
        };
        out.push(path.clone());
        paths(&n.nodes, &path, out);
    }
}

fn subtree_names(node: &Node) -> Vec<String> {
    let mut out = vec![node.name.clone()];
    for child in &node.nodes {
        out.extend(subtree_names(child));
    }
    out
}

/// Simple names of every node a program declares (notes aside).
fn declared_names(items: &[Item]) -> Vec<String> {
    let mut out = Vec::new();
    for item in items {
        if let Item::Node(n) = item {
            let is_note = n
                .kind
                .as_ref()
                .is_some_and(|k| k.text.eq_ignore_ascii_case("note"));
            if !is_note {
                out.extend(n.name.parts.iter().map(|p| p.text.clone()));
            }
            out.extend(declared_names(&n.items));
        }
    }
    out
}
