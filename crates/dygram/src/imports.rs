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

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::diagnostic::{Diagnostic, Stage};
use crate::model::Node;
use crate::source::SourceFile;
use crate::syntax::ast::{self, Item};
use crate::{Compiled, compile_parsed};

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

/// Loads `file` (found at `path`, `None` for standard input) and everything it imports.
pub fn load(file: SourceFile, path: Option<&Path>) -> Project {
    load_with(file, path, &|_| None)
}

/// Reads an imported file instead of the disk: its text, or `None` to read it from disk.
pub type Overlay<'a> = &'a dyn Fn(&Path) -> Option<String>;

/// [`load`], with imported files read through `overlay` first (an editor's unsaved documents,
/// keyed by their canonical paths).
pub fn load_with(file: SourceFile, path: Option<&Path>, overlay: Overlay<'_>) -> Project {
    let mut loader = Loader {
        modules: Vec::new(),
        by_path: HashMap::new(),
        overlay,
    };
    let base = path
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let entry_path = path.map_or_else(|| PathBuf::from(file.name()), canonical);
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
fn other_extension(p: &Path) -> Option<PathBuf> {
    let ext = p.extension()?.to_str()?;
    if !EXTENSIONS.contains(&ext) {
        return None;
    }
    EXTENSIONS
        .iter()
        .filter(|e| **e != ext)
        .map(|e| p.with_extension(e))
        .find(|candidate| candidate.is_file())
}

/// `p` with links and `..` resolved when it exists (how a loaded file is known), else as given.
pub fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

struct Loader<'a> {
    modules: Vec<Module>,
    by_path: HashMap<PathBuf, usize>,
    overlay: Overlay<'a>,
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
        let parsed = crate::syntax::parse(file.text());
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
        let Some(found) = find_file(base, written) else {
            let looked = tidy(&base.join(written));
            let hint = match other_extension(&looked) {
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
        let path = canonical(&found);
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
        let text = match (self.overlay)(&path).map_or_else(|| std::fs::read_to_string(&found), Ok) {
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
pub fn find_file(base: &Path, written: &str) -> Option<PathBuf> {
    let candidate = base.join(written);
    let has_extension = candidate
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.contains(&e));
    if has_extension || candidate.is_file() {
        return candidate.is_file().then_some(candidate);
    }
    EXTENSIONS
        .iter()
        .map(|ext| base.join(format!("{written}.{ext}")))
        .find(|p| p.is_file())
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
