//! Outputs of a machine that need more than text in, text out: SVG (DOT laid out by Graphviz's
//! `dot` program, [`svg`]), output files ([`write_all`]) and the views of an execution on its
//! machine ([`execution`]: DOT, SVG, Mermaid and an HTML page). The drawings themselves are
//! `dygram_core::render`.
//!
//! [`Format`] is the one list of formats: `dygram generate -f` and `dygram batch -f` parse it,
//! and [`render`] turns a machine into any of them. A new format is a variant of [`Format`], its
//! row in [`Format::ALL`], and its arm in [`render`].

pub mod execution;
pub mod svg;

use std::path::{Path, PathBuf};

use dygram_core::render::{dot, dsl, json, mermaid};
use serde_json::Value as Json;
use svg::SvgError;

/// An output format: what `-f` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Canonical machine JSON, pretty-printed.
    Json,
    /// Graphviz DOT.
    Dot,
    /// SVG: the DOT laid out by Graphviz's `dot` program.
    Svg,
    /// A Mermaid `stateDiagram-v2`.
    Mermaid,
    /// `.dy` source.
    Dsl,
}

/// A format list that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// A name that is no format.
    #[error("unknown format `{0}`")]
    Unknown(String),
    /// The list names no format.
    #[error("no format given")]
    Empty,
}

/// Why an output could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The JSON text could not be written.
    #[error("cannot write JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Graphviz is missing or failed.
    #[error(transparent)]
    Svg(#[from] SvgError),
}

/// Why outputs could not be written to a folder.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The folder could not be created.
    #[error("cannot create {}: {source}", .path.display())]
    CreateFolder {
        /// The folder.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An output would replace the machine it was made from.
    #[error("refusing to overwrite the input {} with the {extension} output", .path.display())]
    WouldOverwriteInput {
        /// The input.
        path: PathBuf,
        /// The extension of the output.
        extension: &'static str,
    },
    /// An output file could not be written.
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl Format {
    /// Every format with its name and aliases, in the order messages list them.
    pub const ALL: [(Self, &'static str, &'static [&'static str]); 5] = [
        (Self::Json, "json", &[]),
        (Self::Dot, "dot", &["graphviz"]),
        (Self::Svg, "svg", &[]),
        (Self::Mermaid, "mermaid", &["mmd"]),
        (Self::Dsl, "dsl", &["dy"]),
    ];

    /// The format a name means: a name or alias of [`Format`], in any case, spaces around
    /// ignored.
    pub fn parse(name: &str) -> Result<Self, FormatError> {
        let name = name.trim().to_ascii_lowercase();
        Self::ALL
            .iter()
            .find(|(_, n, aliases)| *n == name || aliases.contains(&name.as_str()))
            .map(|(format, _, _)| *format)
            .ok_or(FormatError::Unknown(name))
    }

    /// The formats a list names, duplicates removed and order kept; blank names are skipped.
    pub fn parse_list(names: &[String]) -> Result<Vec<Self>, FormatError> {
        let mut out = Vec::new();
        for name in names.iter().filter(|n| !n.trim().is_empty()) {
            let format = Self::parse(name)?;
            if !out.contains(&format) {
                out.push(format);
            }
        }
        if out.is_empty() {
            return Err(FormatError::Empty);
        }
        Ok(out)
    }

    /// The names `-f` accepts, for messages: `json, dot (or graphviz), …`.
    pub fn names() -> String {
        let names: Vec<String> = Self::ALL
            .iter()
            .map(|(_, name, aliases)| {
                if aliases.is_empty() {
                    (*name).to_string()
                } else {
                    format!("{name} (or {})", aliases.join(", "))
                }
            })
            .collect();
        names.join(", ")
    }

    /// The file extension of the output.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Dot => "dot",
            Self::Svg => "svg",
            Self::Mermaid => "mmd",
            Self::Dsl => "dy",
        }
    }
}

/// One output of a machine (canonical JSON), as the text of a file.
pub fn render(format: Format, machine: &Json) -> Result<String, RenderError> {
    Ok(match format {
        Format::Json => json::to_text(machine)?,
        Format::Dot => {
            let mut text = dot::to_dot(machine);
            text.push('\n');
            text
        }
        Format::Svg => svg::to_svg(&dot::to_dot(machine))?,
        Format::Mermaid => mermaid::to_mermaid(machine),
        Format::Dsl => dsl::to_dsl(machine),
    })
}

/// Writes outputs to `dir/<stem>.<extension>` (creating `dir`), refusing to replace `source`,
/// the file they were made from; returns the written paths.
pub fn write_all(
    dir: &Path,
    stem: &str,
    source: Option<&Path>,
    outputs: &[(Format, String)],
) -> Result<Vec<PathBuf>, WriteError> {
    create_folder(dir)?;
    let mut written = Vec::new();
    for (format, text) in outputs {
        let path = dir.join(format!("{stem}.{}", format.extension()));
        if let Some(source) = source
            && same_file(source, &path)
        {
            return Err(WriteError::WouldOverwriteInput {
                path: source.to_path_buf(),
                extension: format.extension(),
            });
        }
        write_file(&path, text)?;
        written.push(path);
    }
    Ok(written)
}

/// Writes a syntax tree (`dygram_core::render::syntax_tree`, pretty-printed) to
/// `dir/<stem>-raw.json`, creating `dir`; the path written.
pub fn write_syntax_tree(dir: &Path, stem: &str, tree: &Json) -> Result<PathBuf, WriteError> {
    create_folder(dir)?;
    let path = dir.join(format!("{stem}-raw.json"));
    let text = format!(
        "{}\n",
        serde_json::to_string_pretty(tree).unwrap_or_default()
    );
    write_file(&path, &text)?;
    Ok(path)
}

/// Creates the output folder `dir` (and those above it).
pub(crate) fn create_folder(dir: &Path) -> Result<(), WriteError> {
    std::fs::create_dir_all(dir).map_err(|source| WriteError::CreateFolder {
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes one output file; one that holds these bytes already is left untouched (its time
/// stamp too, so tools that watch it see no change, and writing again costs only a read).
pub(crate) fn write_file(path: &Path, text: &str) -> Result<(), WriteError> {
    if holds(path, text.as_bytes()) {
        return Ok(());
    }
    std::fs::write(path, text).map_err(|source| WriteError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Whether `path` is a file holding exactly `bytes` (a length that differs is seen without
/// reading it).
fn holds(path: &Path, bytes: &[u8]) -> bool {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.len() == bytes.len() as u64 => {
            std::fs::read(path).is_ok_and(|old| old == bytes)
        }
        _ => false,
    }
}

/// Whether two paths name the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_read_by_name_or_alias_in_any_case() {
        assert_eq!(Format::parse(" JSON ").unwrap(), Format::Json);
        assert_eq!(Format::parse("graphviz").unwrap(), Format::Dot);
        assert_eq!(Format::parse("mmd").unwrap(), Format::Mermaid);
        assert_eq!(Format::parse("dy").unwrap(), Format::Dsl);
        assert!(matches!(Format::parse("html"), Err(FormatError::Unknown(n)) if n == "html"));
        let list = ["dot", "json", "graphviz", " "].map(String::from);
        assert_eq!(
            Format::parse_list(&list).unwrap(),
            [Format::Dot, Format::Json]
        );
        assert!(matches!(
            Format::parse_list(&[String::new()]),
            Err(FormatError::Empty)
        ));
    }

    fn machine() -> Json {
        let source = "Task a \"A\" { n: 3; }\na -when: 'n > 1'-> b;";
        dygram_core::compile(dygram_syntax::source::SourceFile::new("m.dy", source))
            .json(Default::default())
    }

    #[test]
    fn every_format_but_svg_renders_in_process() {
        let machine = machine();
        let json = render(Format::Json, &machine).unwrap();
        assert_eq!(serde_json::from_str::<Json>(&json).unwrap(), machine);
        assert!(json.ends_with("}\n"));
        let dot = render(Format::Dot, &machine).unwrap();
        assert!(
            dot.starts_with("digraph {") && dot.ends_with("}\n"),
            "{dot}"
        );
        assert!(dot.contains("\"a\" -> \"b\""), "{dot}");
        let mermaid = render(Format::Mermaid, &machine).unwrap();
        assert!(mermaid.starts_with("stateDiagram-v2"), "{mermaid}");
        let dsl = render(Format::Dsl, &machine).unwrap();
        let again =
            dygram_core::compile(dygram_syntax::source::SourceFile::new("m.dy", dsl.as_str()));
        assert_eq!(again.json(Default::default()), machine);
    }

    #[test]
    fn outputs_are_written_by_extension_and_never_over_their_input() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let outputs = [
            (Format::Json, "{}\n".to_string()),
            (Format::Mermaid, "stateDiagram-v2\n".to_string()),
        ];
        let written = write_all(&out, "m", None, &outputs).unwrap();
        assert_eq!(written, [out.join("m.json"), out.join("m.mmd")]);
        assert_eq!(std::fs::read_to_string(&written[1]).unwrap(), outputs[1].1);
        let input = out.join("m.json");
        let refused = write_all(&out, "m", Some(&input), &outputs).unwrap_err();
        assert!(matches!(
            refused,
            WriteError::WouldOverwriteInput {
                extension: "json",
                ..
            }
        ));
        assert_eq!(std::fs::read_to_string(&input).unwrap(), "{}\n");
    }

    #[test]
    fn every_format_is_named_once_with_its_aliases() {
        assert_eq!(
            Format::names(),
            "json, dot (or graphviz), svg, mermaid (or mmd), dsl (or dy)"
        );
    }
}
