//! SVG, through Graphviz: [`to_svg`] pipes DOT through `dot -Tsvg`; [`to_svg_with`] names
//! another program.

use std::io::Write;
use std::process::{Command, Stdio};

/// Why [`to_svg`] failed.
#[derive(Debug, thiserror::Error)]
pub enum SvgError {
    /// The Graphviz program is not installed (or not on `PATH`).
    #[error(
        "cannot render SVG: the Graphviz program `{program}` was not found on PATH; install Graphviz (e.g. `apt-get install graphviz` or `brew install graphviz`)"
    )]
    NotInstalled {
        /// The program looked for.
        program: String,
    },
    /// The program could not be run or talked to.
    #[error("cannot render SVG: running `{program}` failed: {source}")]
    Io {
        /// The program run.
        program: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Graphviz is installed but knows no output format: its plugins were never registered (a
    /// package installed without running `dot -c`).
    #[error("cannot render SVG: Graphviz's `{program}` has no output formats registered: {stderr}")]
    Unconfigured {
        /// The program run.
        program: String,
        /// What it wrote to stderr (trimmed).
        stderr: String,
    },
    /// The program ran and reported an error.
    #[error("`{program} -Tsvg` failed ({status}): {stderr}")]
    Failed {
        /// The program run.
        program: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it wrote to stderr (trimmed).
        stderr: String,
    },
    /// The program wrote something that is not UTF-8.
    #[error("`{program} -Tsvg` wrote output that is not UTF-8")]
    NotUtf8 {
        /// The program run.
        program: String,
    },
}

impl SvgError {
    /// What to do about it, when there is something to do.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::NotInstalled { .. } => Some(
                "install Graphviz (e.g. apt-get install graphviz or brew install graphviz), or use \
                 the DOT or Mermaid output, which need no program"
                    .into(),
            ),
            Self::Unconfigured { program, .. } => Some(format!(
                "register Graphviz's plugins once, with the rights it was installed with: `sudo \
                 {program} -c` (then `{program} -Tsvg` works); or use the DOT or Mermaid output"
            )),
            Self::Io { .. } | Self::Failed { .. } | Self::NotUtf8 { .. } => None,
        }
    }

    /// Whether Graphviz cannot draw at all here (missing, or without formats), as opposed to
    /// failing on one drawing.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::NotInstalled { .. } | Self::Unconfigured { .. })
    }
}

/// SVG for a DOT text, by running Graphviz's `dot -Tsvg` (DOT on stdin, SVG on stdout).
pub fn to_svg(dot: &str) -> Result<String, SvgError> {
    to_svg_with("dot", dot)
}

/// Like [`to_svg`], with the Graphviz program to run (`dot`, a path to it, or another layout
/// engine such as `neato`).
pub fn to_svg_with(program: &str, dot: &str) -> Result<String, SvgError> {
    let io = |source: std::io::Error| SvgError::Io {
        program: program.to_string(),
        source,
    };
    let mut child = match Command::new(program)
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SvgError::NotInstalled {
                program: program.to_string(),
            });
        }
        Err(e) => return Err(io(e)),
    };
    // Write from another thread so that a large output cannot dead-lock against our input.
    let writer = child.stdin.take().map(|mut stdin| {
        let input = dot.as_bytes().to_vec();
        std::thread::spawn(move || stdin.write_all(&input))
    });
    let output = child.wait_with_output().map_err(io)?;
    if let Some(handle) = writer {
        match handle.join() {
            Ok(Ok(())) => {}
            // A program that exits early closes the pipe; its status and stderr say why.
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Ok(Err(e)) => return Err(io(e)),
            Err(_) => return Err(io(std::io::Error::other("the writer thread panicked"))),
        }
    }
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        // Graphviz's words when no plugin is registered: `Format: "svg" not recognized. No
        // formats found. Perhaps "dot -c" needs to be run …`.
        if stderr.contains("No formats found") || stderr.contains("-c\" needs to be run") {
            return Err(SvgError::Unconfigured {
                program: program.to_string(),
                stderr,
            });
        }
        return Err(SvgError::Failed {
            program: program.to_string(),
            status: output.status,
            stderr,
        });
    }
    String::from_utf8(output.stdout).map_err(|_| SvgError::NotUtf8 {
        program: program.to_string(),
    })
}
