//! A run's seal: what delta keeps of a run outside its workspace, where the run's own programs
//! cannot write (under `read-only` or `workspace-write`), so that nothing they can write decides
//! what was approved or what delta reads back.
//!
//! The journal stays in the workspace (the layout is the seed's), so a tool may rewrite it. The
//! seal holds its length and SHA-256 as delta last left it: a run whose journal no longer starts
//! with those bytes is refused when it is opened again, loudly, naming both files. Lines past the
//! sealed length (a process that died before it sealed what it wrote) are read as they are. The
//! seal also holds what only a person decides: the tools approved for the rest of the run
//! (`always`), and the approval question the run waits on (its call's digest and its words), which
//! the answer given to `delta continue -m` must answer.
//!
//! Seals live in `$DELTA_STATE_DIR`, else `$XDG_STATE_HOME/delta`, else `~/.local/state/delta`,
//! under `seals/`, one file per run named by a digest of the workspace's path and the run's id.
//! A run without a seal (made before seals, or whose workspace moved) is taken as it is found, and
//! sealed from then on.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::events::RunJournal;
use crate::workspace::RunDir;

/// What a seal holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealState {
    /// The run.
    pub run_id: String,
    /// Its workspace.
    pub workspace: String,
    /// The journal's length when it was sealed.
    pub journal_bytes: u64,
    /// The SHA-256 (hex) of those bytes.
    pub journal_sha256: String,
    /// The agent folder the run was made with (`metadata.json`'s `agent_ref`, which a tool could
    /// rewrite to have another agent loaded, without a sandbox).
    #[serde(default)]
    pub agent_ref: String,
    /// Tools the person approved for the rest of the run.
    #[serde(default)]
    pub approved_always: Vec<String>,
    /// The approval question the run waits on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<SealedQuestion>,
}

/// An approval question as it was asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedQuestion {
    /// The call asked about.
    pub action_id: String,
    /// Its digest (id, tool, arguments, resolved command).
    pub digest: String,
    /// The words shown to the person.
    pub prompt: String,
}

/// A run's seal, open.
#[derive(Debug, Clone, Default)]
pub struct Seal {
    /// Its file (`None`: no state folder, so runs are not sealed).
    path: Option<PathBuf>,
    /// Whether a seal was found when the run was opened (otherwise the run was taken as found, and
    /// what this process seals is not yet a person's word for an earlier process).
    found: bool,
    /// What it holds.
    pub state: SealState,
}

/// Why a seal could not be checked or written.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The journal no longer starts with what delta sealed.
    #[error(
        "the journal of run {run_id} ({}) changed since delta last wrote it: its first {sealed} \
         bytes no longer match the seal {} (the journal now holds {found} bytes), so something \
         other than delta rewrote it (the run's tools can write the workspace); delta will not go \
         on with it",
        .journal.display(),
        .seal.display()
    )]
    Tampered {
        run_id: String,
        journal: PathBuf,
        seal: PathBuf,
        sealed: u64,
        found: u64,
    },
    /// The run has no seal, though delta keeps seals: it is not taken as found unless the person
    /// says so.
    #[error(
        "run {run_id} has no seal ({}): delta did not make it here, or made it before it sealed \
         runs, so nothing vouches that its journal and metadata are what delta wrote",
        .seal.display()
    )]
    Unsealed {
        run_id: String,
        workspace: PathBuf,
        seal: PathBuf,
    },
    /// `metadata.json` names another agent than the one the run was made with.
    #[error(
        "run {run_id} was made with the agent {sealed}, but its metadata.json now names {found}: \
         something other than delta rewrote it (the run's tools can write the workspace); delta \
         will not load that agent"
    )]
    AgentChanged {
        run_id: String,
        sealed: String,
        found: String,
        seal: PathBuf,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] store::StoreError),
}

impl SealError {
    /// What a person can do about it.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::Unsealed { workspace, .. } => Some(format!(
                "if the run is yours (made before this version, or its workspace moved), take it as \
                 it is: delta continue -w {} --adopt",
                workspace.display()
            )),
            Self::AgentChanged { seal, .. } => Some(format!(
                "start a new run; if you moved the agent yourself, remove {} to take the run as it \
                 is now",
                seal.display()
            )),
            Self::Tampered { seal, .. } => Some(format!(
                "start a new run; if you changed the journal yourself, remove {} to take it as it \
                 is now",
                seal.display()
            )),
            _ => None,
        }
    }
}

/// The folder that holds delta's own state (seals), outside every workspace.
pub fn state_dir() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("DELTA_STATE_DIR")
        .or_else(|| var("XDG_STATE_HOME").map(|d| d.join("delta")))
        .or_else(|| var("HOME").map(|h| h.join(".local/state/delta")))
        .filter(|p| p.is_absolute())
}

/// The seal file of `run`.
pub fn path_for(run: &RunDir) -> Option<PathBuf> {
    let workspace = run
        .workspace
        .canonicalize()
        .unwrap_or_else(|_| run.workspace.clone());
    let mut hasher = Sha256::new();
    hasher.update(workspace.as_os_str().as_encoded_bytes());
    hasher.update([0u8]);
    hasher.update(run.run_id.as_bytes());
    let name: String = hasher
        .finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    Some(state_dir()?.join("seals").join(format!("{name}.json")))
}

/// Seals `run` anew with `journal` (its whole text) and the approval `question` it waits on, if
/// any: for a working copy rebuilt from a store, whose records are the run's.
pub fn write_for(
    run: &RunDir,
    journal: &[u8],
    question: Option<&crate::engine::InteractionRequest>,
    agent_ref: &str,
) -> Result<(), SealError> {
    let Some(path) = path_for(run) else {
        return Ok(());
    };
    let state = SealState {
        run_id: run.run_id.clone(),
        workspace: run.workspace.display().to_string(),
        journal_bytes: journal.len() as u64,
        journal_sha256: hex(&Sha256::digest(journal)),
        agent_ref: agent_ref.to_string(),
        approved_always: Vec::new(),
        question: question.and_then(|q| {
            Some(SealedQuestion {
                action_id: q.action_id.clone()?,
                digest: q.action_digest.clone()?,
                prompt: q.prompt.clone(),
            })
        }),
    };
    if let Some(dir) = path.parent() {
        private_dir(dir)?;
    }
    store::write_json_atomic(&path, &state, true)?;
    Ok(())
}

/// `run`'s seal file and what it holds; `None` without a state folder or a seal.
fn read_state(run: &RunDir) -> Result<Option<(PathBuf, SealState)>, SealError> {
    let Some(path) = path_for(run) else {
        return Ok(None);
    };
    match std::fs::read(&path) {
        Ok(bytes) => match serde_json::from_slice::<SealState>(&bytes) {
            Ok(state) => Ok(Some((path, state))),
            Err(e) => Err(SealError::Io {
                path,
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            }),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SealError::Io { path, source }),
    }
}

/// `AgentChanged` unless the seal's agent (when it names one) is `agent_ref`.
fn same_agent(
    run: &RunDir,
    path: &Path,
    state: &SealState,
    agent_ref: &str,
) -> Result<(), SealError> {
    if state.agent_ref.is_empty() || state.agent_ref == agent_ref {
        return Ok(());
    }
    Err(SealError::AgentChanged {
        run_id: run.run_id.clone(),
        sealed: state.agent_ref.clone(),
        found: agent_ref.to_string(),
        seal: path.to_path_buf(),
    })
}

/// Checks, before an agent is loaded for `run`, that `agent_ref` is the agent the run was sealed
/// with (a run without a seal passes here: the engine refuses it unless it is adopted).
pub fn check_agent(run: &RunDir, agent_ref: &str) -> Result<(), SealError> {
    match read_state(run)? {
        Some((path, state)) => same_agent(run, &path, &state, agent_ref),
        None => Ok(()),
    }
}

/// Checks, before `run` is copied (a fork), compacted or uploaded to a store, that its journal
/// still starts with the sealed bytes and that `agent_ref` is its agent. A run without a seal is
/// refused with `unsealed_refused` where delta keeps seals (a fork would seal whatever a tool made);
/// otherwise it passes as found.
pub fn check_prefix(
    run: &RunDir,
    agent_ref: &str,
    unsealed_refused: bool,
) -> Result<(), SealError> {
    let Some((path, state)) = read_state(run)? else {
        return match path_for(run).filter(|_| unsealed_refused) {
            Some(seal) => Err(SealError::Unsealed {
                run_id: run.run_id.clone(),
                workspace: run.workspace.clone(),
                seal,
            }),
            None => Ok(()),
        };
    };
    same_agent(run, &path, &state, agent_ref)?;
    let journal = run.journal();
    let text = std::fs::read(&journal).map_err(|source| SealError::Io {
        path: journal.clone(),
        source,
    })?;
    let sealed = usize::try_from(state.journal_bytes)
        .ok()
        .and_then(|n| text.get(..n));
    let same = sealed.is_some_and(|prefix| hex(&Sha256::digest(prefix)) == state.journal_sha256);
    if same {
        return Ok(());
    }
    Err(SealError::Tampered {
        run_id: run.run_id.clone(),
        journal,
        seal: path,
        sealed: state.journal_bytes,
        found: text.len() as u64,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Removes `run`'s seal, if any (the run is removed).
pub fn remove(run: &RunDir) {
    if let Some(path) = path_for(run) {
        let _ = std::fs::remove_file(path);
    }
}

impl Seal {
    /// Opens `run`'s seal and checks that `journal` starts with the bytes it sealed; from then on
    /// `journal` hashes what it appends, so that sealing it again costs nothing.
    pub fn open(run: &RunDir, journal: &mut RunJournal) -> Result<Self, SealError> {
        let Some(path) = path_for(run) else {
            return Ok(Self::default());
        };
        let Some((_, state)) = read_state(run)? else {
            journal.track(0)?;
            return Ok(Self {
                path: Some(path),
                found: false,
                state: SealState::default(),
            });
        };
        let sealed = journal.track(state.journal_bytes)?;
        if sealed.as_ref().map(|(_, sha)| sha) != Some(&state.journal_sha256) {
            return Err(SealError::Tampered {
                run_id: run.run_id.clone(),
                journal: run.journal(),
                seal: path,
                sealed: state.journal_bytes,
                found: journal.digest().map_or(0, |(bytes, _)| bytes),
            });
        }
        Ok(Self {
            path: Some(path),
            found: true,
            state,
        })
    }

    /// A new seal for a run just created: whatever an earlier run of the same id in the same
    /// place left is no longer its record.
    pub fn fresh(run: &RunDir, journal: &mut RunJournal) -> Result<Self, SealError> {
        journal.track(0)?;
        Ok(Self {
            path: path_for(run),
            found: false,
            state: SealState::default(),
        })
    }

    /// Whether the run had a seal when it was opened (what it holds is then a person's).
    pub fn found(&self) -> bool {
        self.found
    }

    /// Seals `journal` as delta wrote it (flushed first), with the rest of the state.
    pub fn save(&mut self, run: &RunDir, journal: &mut RunJournal) -> Result<(), SealError> {
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        journal.sync()?;
        let Some((bytes, sha)) = journal.digest() else {
            return Ok(());
        };
        self.state.run_id = run.run_id.clone();
        self.state.workspace = run.workspace.display().to_string();
        self.state.journal_bytes = bytes;
        self.state.journal_sha256 = sha;
        if let Some(dir) = path.parent() {
            private_dir(dir)?;
        }
        store::write_json_atomic(&path, &self.state, true)?;
        Ok(())
    }
}

/// Makes `dir` (and its parents) with only its user able to enter it.
fn private_dir(dir: &Path) -> Result<(), SealError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| SealError::Io {
            path: dir.to_path_buf(),
            source,
        })
}
