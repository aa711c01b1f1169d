//! Navigation across files on plain keys: where a name is declared (following imports to the file
//! that declares it), every place it is written (there and in the files importing it) and the
//! edits of a rename. The documents, how an import path is found and which files may import a
//! document are the caller's ([`Sources`]): the language server keys them by URI, with its open
//! documents over the disk.

use std::collections::HashSet;
use std::hash::Hash;

use dygram_syntax::source::Span;

use crate::names::{self, Imported, Names, Target};

/// Where the documents come from.
pub trait Sources {
    /// How a document is named; two keys of one file are equal.
    type Key: Clone + Eq + Hash;
    /// The text of a document.
    fn text(&self, key: &Self::Key) -> Option<String>;
    /// The document that an import path `written` in `from` names, if it exists.
    fn imported(&self, from: &Self::Key, written: &str) -> Option<Self::Key>;
    /// The documents that might import `home` (`home` itself left out).
    fn candidates(&self, home: &Self::Key) -> Vec<Self::Key>;
}

/// A document with its names.
#[derive(Debug, Clone)]
pub struct Indexed<K> {
    /// Its key.
    pub key: K,
    /// Its text.
    pub text: String,
    names: Names,
}

/// Places in one document.
#[derive(Debug, Clone)]
pub struct Places<K> {
    /// The document (its text, to turn the spans into positions).
    pub file: Indexed<K>,
    /// The spans, in order.
    pub spans: Vec<Span>,
}

/// Where a definition is.
#[derive(Debug, Clone)]
pub enum Definition<K> {
    /// A whole file (on an import's path).
    File(K),
    /// A declaration (in its document).
    Name(Box<Indexed<K>>, Span),
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

/// `key`'s document and its names.
pub fn indexed<S: Sources>(sources: &S, key: &S::Key) -> Option<Indexed<S::Key>> {
    let text = sources.text(key)?;
    let names = names::index(&crate::parse_open(&text).program);
    Some(Indexed {
        key: key.clone(),
        text,
        names,
    })
}

/// The name under byte `at` of `key`: its document, span and target.
fn at<S: Sources>(sources: &S, key: &S::Key, at: usize) -> Option<(Indexed<S::Key>, Span, Target)> {
    let file = indexed(sources, key)?;
    let found = file.names.at(at)?;
    let (span, target) = (found.span, found.target.clone());
    Some((file, span, target))
}

/// Where the name under byte `at` of `key` is declared; on an import's path, the imported file.
pub fn definition<S: Sources>(sources: &S, key: &S::Key, at: usize) -> Option<Definition<S::Key>> {
    let file = indexed(sources, key)?;
    let on_path = file
        .names
        .import_paths
        .iter()
        .find(|(span, _)| (span.start as usize) <= at && at <= (span.end as usize));
    if let Some((_, written)) = on_path {
        return sources.imported(key, written).map(Definition::File);
    }
    let target = file.names.at(at)?.target.clone();
    let (home, target) = home(sources, file, target)?;
    let span = home.names.declaration(&target)?;
    Some(Definition::Name(Box::new(home), span))
}

/// The span of the name under byte `at` of `text`, if it can be renamed.
pub fn prepare_rename(text: &str, at: usize) -> Option<Span> {
    let names = names::index(&crate::parse_open(text).program);
    names.at(at).map(|found| found.span)
}

/// Every place the name under byte `at` of `key` is written, in its home and in the files
/// importing it (declarations only when `declarations`).
pub fn references<S: Sources>(
    sources: &S,
    key: &S::Key,
    at: usize,
    declarations: bool,
) -> Vec<Places<S::Key>> {
    let Some((file, _, target)) = self::at(sources, key, at) else {
        return Vec::new();
    };
    let Some((home, target)) = home(sources, file, target) else {
        return Vec::new();
    };
    spans_everywhere(sources, &home, &target, declarations)
}

/// The places a rename of the name under byte `at` of `key` to `new_name` changes.
pub fn rename<S: Sources>(
    sources: &S,
    key: &S::Key,
    at: usize,
    new_name: &str,
) -> Result<Vec<Places<S::Key>>, RenameError> {
    if !is_name(new_name) {
        return Err(RenameError::Invalid(new_name.to_string()));
    }
    let (file, _, target) = self::at(sources, key, at).ok_or(RenameError::NoName)?;
    if alias_of(&file.names, &target).is_some() {
        // An import's alias is this file's own name: renamed here only.
        let spans = file.names.of(&target).map(|o| o.span).collect();
        return Ok(vec![Places { file, spans }]);
    }
    let (home, target) = home(sources, file, target).ok_or(RenameError::NoName)?;
    Ok(spans_everywhere(sources, &home, &target, true))
}

/// The file that declares `target` (following imports) and the target's name there.
fn home<S: Sources>(
    sources: &S,
    file: Indexed<S::Key>,
    target: Target,
) -> Option<(Indexed<S::Key>, Target)> {
    let mut current = (file, target);
    // Imports may chain; a cycle is cut by the visited set.
    let mut visited = HashSet::new();
    while visited.insert(current.0.key.clone()) {
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
        let key = sources.imported(&current.0.key, &import.path)?;
        let next = indexed(sources, &key)?;
        current = (next, next_target);
    }
    None
}

/// The spans naming `target` in `home` and in every file that imports it.
fn spans_everywhere<S: Sources>(
    sources: &S,
    home: &Indexed<S::Key>,
    target: &Target,
    declarations: bool,
) -> Vec<Places<S::Key>> {
    let own: Vec<Span> = home
        .names
        .of(target)
        .filter(|o| declarations || !o.declaration)
        .map(|o| o.span)
        .collect();
    let mut out = vec![Places {
        file: home.clone(),
        spans: own,
    }];
    for key in sources.candidates(&home.key) {
        let Some(importer) = indexed(sources, &key) else {
            continue;
        };
        let mut spans = Vec::new();
        for import in &importer.names.imports {
            if sources.imported(&key, &import.path).as_ref() == Some(&home.key) {
                spans.extend(in_importer(&importer.names, import, target, declarations));
            }
        }
        if !spans.is_empty() {
            spans.sort_by_key(|s| (s.start, s.end));
            spans.dedup();
            out.push(Places {
                file: importer,
                spans,
            });
        }
    }
    out
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

/// Whether `text` can be a node's or attribute's name.
fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !matches!(text, "machine" | "import" | "from" | "as")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// Documents by name in memory; an import path names a document by its text.
    struct Memory(HashMap<&'static str, &'static str>);

    impl Sources for Memory {
        type Key = String;

        fn text(&self, key: &String) -> Option<String> {
            self.0.get(key.as_str()).map(|t| (*t).to_string())
        }

        fn imported(&self, _: &String, written: &str) -> Option<String> {
            let name = written.trim_start_matches("./");
            self.0.contains_key(name).then(|| name.to_string())
        }

        fn candidates(&self, home: &String) -> Vec<String> {
            let mut all: Vec<String> = self.0.keys().map(|k| (*k).to_string()).collect();
            all.retain(|k| k != home);
            all.sort();
            all
        }
    }

    fn files() -> Memory {
        Memory(HashMap::from([
            ("lib.dy", "Task pay \"Pay\";\n"),
            (
                "main.dy",
                "import { pay } from \"./lib.dy\"\nstart -> pay;\n",
            ),
            (
                "other.dy",
                "import { pay as settle } from \"./lib.dy\"\nsettle -> done;\n",
            ),
        ]))
    }

    fn spans(places: &[Places<String>]) -> Vec<(String, Vec<String>)> {
        places
            .iter()
            .map(|p| {
                let texts = p
                    .spans
                    .iter()
                    .map(|s| p.file.text[s.start as usize..s.end as usize].to_string());
                (p.file.key.clone(), texts.collect())
            })
            .collect()
    }

    fn owned(key: &str, texts: &[&str]) -> (String, Vec<String>) {
        (
            key.to_string(),
            texts.iter().map(|t| (*t).to_string()).collect(),
        )
    }

    #[test]
    fn a_name_is_followed_to_its_file_and_found_in_its_importers() {
        let files = files();
        let main = "main.dy".to_string();
        let use_at = files.0["main.dy"].rfind("pay").unwrap();
        let Some(Definition::Name(home, span)) = definition(&files, &main, use_at) else {
            panic!("no definition")
        };
        assert_eq!(
            (
                home.key.as_str(),
                &home.text[span.start as usize..span.end as usize]
            ),
            ("lib.dy", "pay")
        );
        let path_at = files.0["main.dy"].find("lib.dy").unwrap();
        assert!(
            matches!(definition(&files, &main, path_at), Some(Definition::File(f)) if f == "lib.dy")
        );
        let found = spans(&references(&files, &main, use_at, true));
        assert_eq!(found[0], owned("lib.dy", &["pay"]));
        assert!(
            found.contains(&owned("main.dy", &["pay", "pay"])),
            "{found:?}"
        );
        // The aliased importer names the import, not its own alias.
        assert!(found.contains(&owned("other.dy", &["pay"])), "{found:?}");
    }

    #[test]
    fn an_alias_is_renamed_in_its_own_file_and_bad_names_are_refused() {
        let files = files();
        let other = "other.dy".to_string();
        let at = files.0["other.dy"].rfind("settle").unwrap();
        let renamed = spans(&rename(&files, &other, at, "close").unwrap());
        assert_eq!(renamed, [owned("other.dy", &["settle", "settle"])]);
        assert_eq!(
            rename(&files, &other, at, "2bad").unwrap_err(),
            RenameError::Invalid("2bad".into())
        );
        assert_eq!(
            rename(&files, &other, 0, "x").unwrap_err(),
            RenameError::NoName
        );
        assert_eq!(
            prepare_rename("a -> b;", 5).map(|s| (s.start, s.end)),
            Some((5, 6))
        );
    }
}
