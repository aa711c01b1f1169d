//! The agent templates of `delta init`, embedded in the binary, and writing one into a folder.

use std::path::{Path, PathBuf};

/// One file of a template.
pub struct TemplateFile {
    /// File name.
    pub name: &'static str,
    /// Contents.
    pub content: &'static str,
}

/// A template.
pub struct Template {
    /// Its name (`-t`).
    pub name: &'static str,
    /// One line about it.
    pub summary: &'static str,
    /// Its files.
    pub files: [TemplateFile; 4],
}

macro_rules! template {
    ($name:literal, $summary:literal) => {
        Template {
            name: $name,
            summary: $summary,
            files: [
                TemplateFile {
                    name: "agent.yaml",
                    content: include_str!(concat!("../templates/", $name, "/agent.yaml")),
                },
                TemplateFile {
                    name: "system_prompt.md",
                    content: include_str!(concat!("../templates/", $name, "/system_prompt.md")),
                },
                TemplateFile {
                    name: "context.yaml",
                    content: include_str!(concat!("../templates/", $name, "/context.yaml")),
                },
                TemplateFile {
                    name: "README.md",
                    content: include_str!(concat!("../templates/", $name, "/README.md")),
                },
            ],
        }
    };
}

/// Every template, the default first.
pub const TEMPLATES: [Template; 4] = [
    template!("minimal", "echo and write files: the smallest useful agent"),
    template!(
        "hello-world",
        "print messages, create and list files, tell the date"
    ),
    template!(
        "file-ops",
        "organize files: list, make folders, move, copy, find"
    ),
    template!("api-tester", "test HTTP APIs with curl and report"),
];

/// The template called `name`.
pub fn find(name: &str) -> Option<&'static Template> {
    TEMPLATES.iter().find(|t| t.name == name)
}

/// Why a template could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The target exists and is not a folder.
    #[error("{} exists and is not a folder", .0.display())]
    NotAFolder(PathBuf),
    /// The target holds files already.
    #[error("directory is not empty: {}", .0.display())]
    NotEmpty(PathBuf),
    /// A folder or file could not be read or written.
    #[error("cannot {action} {}: {source}", .path.display())]
    Io {
        /// read, create or write.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Whether `dir` is missing or holds nothing but dot-files (such as `.git`).
fn is_empty(dir: &Path) -> Result<bool, ScaffoldError> {
    if !dir.exists() {
        return Ok(true);
    }
    if !dir.is_dir() {
        return Err(ScaffoldError::NotAFolder(dir.to_path_buf()));
    }
    let entries = std::fs::read_dir(dir).map_err(|source| ScaffoldError::Io {
        action: "read",
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with('.') {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Refuses a `target` that is not a new or empty folder.
pub fn check_target(target: &Path) -> Result<(), ScaffoldError> {
    if is_empty(target)? {
        Ok(())
    } else {
        Err(ScaffoldError::NotEmpty(target.to_path_buf()))
    }
}

/// Sets the first `name:` line of an agent.yaml to `name`.
fn rename(agent_yaml: &str, name: &str) -> String {
    let quoted = serde_json::to_string(name).unwrap_or_else(|_| format!("\"{name}\""));
    let mut done = false;
    let mut out: Vec<String> = Vec::new();
    for line in agent_yaml.lines() {
        if !done && line.starts_with("name:") {
            out.push(format!("name: {quoted}"));
            done = true;
        } else {
            out.push(line.to_string());
        }
    }
    out.join("\n") + "\n"
}

/// Writes `template` into `target` (created) as the agent `agent_name`.
pub fn write(template: &Template, target: &Path, agent_name: &str) -> Result<(), ScaffoldError> {
    std::fs::create_dir_all(target).map_err(|source| ScaffoldError::Io {
        action: "create",
        path: target.to_path_buf(),
        source,
    })?;
    for file in &template.files {
        let content = match file.name {
            "agent.yaml" => rename(file.content, agent_name),
            "README.md" => file.content.replace("{{name}}", agent_name),
            _ => file.content.to_string(),
        };
        let path = target.join(file.name);
        std::fs::write(&path, content).map_err(|source| ScaffoldError::Io {
            action: "write",
            path,
            source,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_replaces_only_the_first_name_line() {
        let out = rename("name: x\nllm: {}\ntools:\n  - name: t\n", "my \"agent\"");
        assert_eq!(
            out,
            "name: \"my \\\"agent\\\"\"\nllm: {}\ntools:\n  - name: t\n"
        );
    }

    #[test]
    fn every_template_is_a_valid_agent() {
        for t in &TEMPLATES {
            let dir = tempfile::tempdir().unwrap();
            write(t, dir.path(), t.name).unwrap();
            let agent =
                crate::agent::load(dir.path()).unwrap_or_else(|e| panic!("{}: {e}", t.name));
            assert!(!agent.tools.is_empty(), "{}", t.name);
            assert!(
                agent.warnings.is_empty(),
                "{}: {:?}",
                t.name,
                agent.warnings
            );
            assert!(agent.context.file.is_some());
        }
    }
}
