//! The environment a run sees: the process environment, completed by `.env` files.
//!
//! Precedence, highest first: the process environment, the workspace's `.env`, the agent's `.env`,
//! then the `.env` at the project root (the nearest folder above the current one that holds `.git`).
//! A variable is never overridden by a lower source. Nothing is written to the process environment:
//! the merged view is passed explicitly to tools, hooks and the LLM setup.
//!
//! A `.env` file inside the workspace may have been written by the run's own tools, so it is not
//! trusted: its variables reach the programs a run starts, never delta's own settings (what
//! [`Env::get`] answers: the key, the endpoint, `${VAR}` in agent.yaml), and those that configure
//! delta or a program's loader ([`configures_delta`]) are left out altogether and reported
//! ([`Env::ignored`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Variables that hold the API keys delta itself uses. They are kept out of tool and hook
/// environments so that a tool printing its environment cannot leak them into the journal.
pub const SECRET_VARS: [&str; 3] = ["DELTA_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"];

/// delta's API keys as this process started with them, once [`take_secrets_from_process`] has
/// taken them out of its environment.
static TAKEN: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();

/// Takes delta's API keys ([`SECRET_VARS`]) out of this process's environment, their bytes
/// overwritten, so that nothing that can read `/proc/<pid>/environ` (root, or a debugger) finds
/// them there; [`Env::from_process`] still has them. Call it first thing in `main`, before any
/// thread starts.
pub fn take_secrets_from_process() {
    let _ = TAKEN.set(process_gate::harden::take_env(&SECRET_VARS));
}

/// A merged environment.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// What delta reads: the process environment and the trusted `.env` files.
    vars: BTreeMap<String, String>,
    /// The names in `vars` that came from a `.env` file (a workspace's `.env` ranks above them for
    /// the programs a run starts).
    from_files: std::collections::BTreeSet<String>,
    /// The variables of `.env` files inside the workspace: for the programs a run starts only.
    untrusted: BTreeMap<String, String>,
    /// `.env` files that contributed, in load order.
    pub loaded_files: Vec<PathBuf>,
    /// Variables left out of files inside the workspace, with their file.
    ignored: Vec<(String, PathBuf)>,
    /// The values of secret variables left out (still scrubbed from what leaves the process).
    ignored_secrets: Vec<String>,
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

/// Whether `name` changes what code a program loads or how the C library behaves before `main`
/// (the dynamic loader's variables, glibc's tunables, the allocators'): delta's own processes are
/// never started with such a variable from a file or a saved state a confined program could have
/// written.
pub fn loader_var(name: &str) -> bool {
    const PREFIXES: [&str; 4] = ["LD_", "GLIBC_", "MALLOC_", "MIMALLOC_"];
    const NAMES: [&str; 5] = [
        "GCONV_PATH",
        "LOCPATH",
        "HOSTALIASES",
        "RESOLV_HOST_CONF",
        "NLSPATH",
    ];
    let upper = name.to_ascii_uppercase();
    PREFIXES.iter().any(|p| upper.starts_with(p)) || NAMES.contains(&upper.as_str())
}

/// Whether `name` configures delta (its key, endpoint, model or any other `DELTA_` setting, a
/// provider's variables) or what code a program loads (the dynamic loader's and the C library's
/// variables): such a variable is never taken from a file a confined program could have written.
pub fn configures_delta(name: &str) -> bool {
    const PREFIXES: [&str; 3] = ["DELTA_", "OPENAI_", "ANTHROPIC_"];
    let upper = name.to_ascii_uppercase();
    loader_var(name)
        || PREFIXES.iter().any(|p| upper.starts_with(p))
        || upper.ends_with("_API_KEY")
        || upper.ends_with("_BASE_URL")
        || upper.ends_with("_PROXY")
}

impl Env {
    /// The process environment (variables that are not valid UTF-8 are left out), with the keys
    /// [`take_secrets_from_process`] took.
    pub fn from_process() -> Self {
        let taken = TAKEN.get().into_iter().flatten().cloned();
        Self::from_pairs(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .chain(taken),
        )
    }

    /// An environment with exactly these variables (tests).
    pub fn from_pairs<I: IntoIterator<Item = (String, String)>>(pairs: I) -> Self {
        Self {
            vars: pairs.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Adds the variables of `.env` files in precedence order, never overriding one already set.
    /// Files inside `workspace` (its own `.env`, and the agent's or the project's when they lie
    /// there) count for the programs a run starts only.
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
        // Where the file's name lies decides, not where a link there points: a link a tool made in
        // the workspace may point anywhere.
        let inside = |path: &Path| {
            let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
            let folder = path.parent().map(canonical).unwrap_or_default();
            folder.starts_with(canonical(workspace))
        };
        for path in candidates {
            if self.loaded_files.contains(&path) || !path.is_file() {
                continue;
            }
            let trusted = !inside(&path);
            for (key, value) in read_env_file(&path)? {
                if trusted {
                    if !self.vars.contains_key(&key) {
                        self.from_files.insert(key.clone());
                        self.vars.insert(key, value);
                    }
                } else if configures_delta(&key) {
                    if SECRET_VARS.contains(&key.as_str()) && value.len() >= 4 {
                        self.ignored_secrets.push(value);
                    }
                    self.ignored.push((key, path.clone()));
                } else {
                    self.untrusted.entry(key).or_insert(value);
                }
            }
            self.loaded_files.push(path);
        }
        Ok(())
    }

    /// The variables left out of `.env` files inside the workspace (they configure delta or a
    /// loader), each with its file.
    pub fn ignored(&self) -> &[(String, PathBuf)] {
        &self.ignored
    }

    /// The values of API keys found in a `.env` file inside the workspace and left out: not used,
    /// but scrubbed all the same wherever text leaves the process.
    pub fn ignored_secrets(&self) -> &[String] {
        &self.ignored_secrets
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

    /// The variables for a child process: everything except delta's own API keys, a workspace
    /// `.env`'s variables ranked above the other files'.
    pub fn for_child(&self) -> Vec<(String, String)> {
        let mut merged = self.vars.clone();
        for (key, value) in &self.untrusted {
            if !merged.contains_key(key) || self.from_files.contains(key) {
                merged.insert(key.clone(), value.clone());
            }
        }
        merged
            .into_iter()
            .filter(|(k, _)| !SECRET_VARS.contains(&k.as_str()))
            .collect()
    }
}

/// The variables of one `.env` file, in order.
fn read_env_file(path: &Path) -> Result<Vec<(String, String)>, EnvError> {
    let error = |message: String| EnvError {
        path: path.to_path_buf(),
        message,
    };
    dotenvy::from_path_iter(path)
        .map_err(|e| error(e.to_string()))?
        .map(|item| item.map_err(|e| error(e.to_string())))
        .collect()
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
        // What delta reads: the workspace's file does not count.
        assert_eq!(env.get("A"), Some("process"));
        assert_eq!(env.get("B"), Some("agent"));
        assert_eq!(env.get("C"), Some("agent"));
        assert_eq!(env.get("D"), Some("project"));
        assert_eq!(env.get("Q"), None);
        // What the run's programs get: the workspace's file ranks below the process only.
        let child: BTreeMap<_, _> = env.for_child().into_iter().collect();
        assert_eq!(child["A"], "process");
        assert_eq!(child["B"], "workspace");
        assert_eq!(child["C"], "agent");
        assert_eq!(child["D"], "project");
        assert_eq!(child["Q"], "quoted value");
        assert_eq!(env.loaded_files.len(), 3);
        assert!(env.ignored().is_empty());
    }

    #[test]
    fn a_workspace_env_configures_neither_delta_nor_a_loader() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let agent = dir.path().join("agent");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::write(
            ws.join(".env"),
            "DELTA_BASE_URL=http://evil\nDELTA_API_KEY=sk-planted-1\nLD_PRELOAD=/ws/x.so\n\
             https_proxy=http://evil\nOTHER_BASE_URL=x\nGLIBC_TUNABLES=x\nKEEP=1\n",
        )
        .unwrap();
        std::fs::write(agent.join(".env"), "DELTA_BASE_URL=http://good\n").unwrap();
        let mut env = Env::default();
        env.load_cascade(&ws, &agent, &agent).unwrap();
        assert_eq!(env.get("DELTA_BASE_URL"), Some("http://good"));
        assert_eq!(env.get("DELTA_API_KEY"), None);
        let ignored: Vec<&str> = env.ignored().iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            ignored,
            [
                "DELTA_BASE_URL",
                "DELTA_API_KEY",
                "LD_PRELOAD",
                "https_proxy",
                "OTHER_BASE_URL",
                "GLIBC_TUNABLES"
            ]
        );
        assert_eq!(env.ignored_secrets(), ["sk-planted-1"]);
        let child: BTreeMap<_, _> = env.for_child().into_iter().collect();
        assert_eq!(child.get("KEEP").map(String::as_str), Some("1"));
        assert!(!child.contains_key("LD_PRELOAD"));
        assert_eq!(child["DELTA_BASE_URL"], "http://good");
        // A link in the workspace to a file elsewhere is the workspace's all the same.
        let elsewhere = dir.path().join("elsewhere.env");
        std::fs::write(&elsewhere, "DELTA_BASE_URL=http://evil\n").unwrap();
        std::fs::remove_file(ws.join(".env")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, ws.join(".env")).unwrap();
        let mut env = Env::default();
        env.load_cascade(&ws, &agent, &agent).unwrap();
        assert_eq!(env.get("DELTA_BASE_URL"), Some("http://good"));
        assert_eq!(env.ignored().len(), 1);
        std::fs::remove_file(ws.join(".env")).unwrap();
        std::fs::write(ws.join(".env"), "KEEP=1\n").unwrap();
        // The agent's folder inside the workspace is not trusted either.
        let inner = ws.join("agent");
        std::fs::create_dir_all(&inner).unwrap();
        std::fs::write(inner.join(".env"), "DELTA_MODEL=x\n").unwrap();
        let mut env = Env::default();
        std::fs::remove_file(ws.join(".env")).unwrap();
        env.load_cascade(&ws, &inner, &inner).unwrap();
        assert_eq!(env.get("DELTA_MODEL"), None);
        assert_eq!(env.ignored().len(), 1);
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
