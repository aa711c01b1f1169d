//! The environment a run sees: the process environment, completed by `.env` files.
//!
//! Precedence, highest first: the process environment, the workspace's `.env`, the agent's `.env`,
//! then the `.env` at the project root (the nearest folder above the current one that holds `.git`).
//! A variable is never overridden by a lower source. Nothing is written to the process environment:
//! the merged view is passed explicitly to tools, hooks and the LLM setup.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Variables that hold the API keys delta itself uses. They are kept out of tool and hook
/// environments so that a tool printing its environment cannot leak them into the journal.
pub const SECRET_VARS: [&str; 3] = ["DELTA_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"];

/// A merged environment.
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: BTreeMap<String, String>,
    /// `.env` files that contributed, in load order.
    pub loaded_files: Vec<PathBuf>,
    /// More variables whose values are secrets (those an agent's MCP servers take their keys
    /// from), scrubbed like the API keys wherever text leaves the process.
    secret_names: Vec<String>,
}

/// A `.env` file that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot load {path}: {message}")]
pub struct EnvError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

impl Env {
    /// The process environment (variables that are not valid UTF-8 are left out).
    pub fn from_process() -> Self {
        Self {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
            loaded_files: Vec::new(),
            secret_names: Vec::new(),
        }
    }

    /// An environment with exactly these variables (tests).
    pub fn from_pairs<I: IntoIterator<Item = (String, String)>>(pairs: I) -> Self {
        Self {
            vars: pairs.into_iter().collect(),
            loaded_files: Vec::new(),
            secret_names: Vec::new(),
        }
    }

    /// Adds the variables of `.env` files in precedence order, never overriding one already set.
    pub fn load_cascade(
        &mut self,
        workspace: &Path,
        agent_dir: &Path,
        cwd: &Path,
    ) -> Result<(), EnvError> {
        let mut candidates = vec![workspace.join(".env"), agent_dir.join(".env")];
        if let Some(root) = project_root(cwd) {
            candidates.push(root.join(".env"));
        }
        for path in candidates {
            if self.loaded_files.contains(&path) || !path.is_file() {
                continue;
            }
            let iter = dotenvy::from_path_iter(&path).map_err(|e| EnvError {
                path: path.clone(),
                message: e.to_string(),
            })?;
            for item in iter {
                let (key, value) = item.map_err(|e| EnvError {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
                self.vars.entry(key).or_insert(value);
            }
            self.loaded_files.push(path);
        }
        Ok(())
    }

    /// A variable, if set and not empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// Sets a variable (overriding).
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        self.vars.insert(key.to_string(), value.into());
    }

    /// Counts the values of `names` as secrets too.
    pub fn add_secret_names(&mut self, names: impl IntoIterator<Item = String>) {
        for name in names {
            if !self.secret_names.contains(&name) {
                self.secret_names.push(name);
            }
        }
    }

    /// The names of every variable whose value is a secret: delta's API keys, then those added.
    pub fn secret_names(&self) -> Vec<&str> {
        SECRET_VARS
            .iter()
            .copied()
            .chain(self.secret_names.iter().map(String::as_str))
            .collect()
    }

    /// All variables.
    pub fn vars(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The variables for a child process: everything except delta's own API keys.
    pub fn for_child(&self) -> Vec<(String, String)> {
        self.vars
            .iter()
            .filter(|(k, _)| !SECRET_VARS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// The nearest folder at or above `start` that holds `.git` (the filesystem root excluded).
pub fn project_root(start: &Path) -> Option<PathBuf> {
    let mut dir = start.canonicalize().ok()?;
    loop {
        dir.parent()?;
        if dir.join(".git").exists() {
            return Some(dir);
        }
        dir = dir.parent()?.to_path_buf();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_process_then_workspace_then_agent_then_project() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("proj");
        let agent = project.join("agent");
        let ws = agent.join("workspaces/W001");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(project.join(".git")).unwrap();
        std::fs::write(
            project.join(".env"),
            "A=project\nB=project\nC=project\nD=project\n",
        )
        .unwrap();
        std::fs::write(agent.join(".env"), "A=agent\nB=agent\nC=agent\n").unwrap();
        std::fs::write(
            ws.join(".env"),
            "A=workspace\nB=workspace\n# comment\nQ=\"quoted value\"\n",
        )
        .unwrap();
        let mut env = Env::from_pairs([("A".to_string(), "process".to_string())]);
        env.load_cascade(&ws, &agent, &ws).unwrap();
        assert_eq!(env.get("A"), Some("process"));
        assert_eq!(env.get("B"), Some("workspace"));
        assert_eq!(env.get("C"), Some("agent"));
        assert_eq!(env.get("D"), Some("project"));
        assert_eq!(env.get("Q"), Some("quoted value"));
        assert_eq!(env.loaded_files.len(), 3);
    }

    #[test]
    fn bad_files_are_named_and_secrets_stay_out_of_children() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".env"), "NOT A LINE\n").unwrap();
        let mut env = Env::default();
        let err = env
            .load_cascade(dir.path(), dir.path(), dir.path())
            .unwrap_err();
        assert!(err.to_string().contains(".env"), "{err}");
        let env = Env::from_pairs([
            ("DELTA_API_KEY".into(), "k".into()),
            ("PATH".into(), "/bin".into()),
        ]);
        assert_eq!(
            env.for_child(),
            vec![("PATH".to_string(), "/bin".to_string())]
        );
    }
}
