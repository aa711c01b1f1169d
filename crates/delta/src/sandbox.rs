//! The sandbox of the processes the model can cause to run: what they may write, read and reach.
//!
//! Built from agent.yaml's `sandbox:` (or `--sandbox` / `--network`) once per run, by the kernel's own
//! mechanisms, no privileges needed:
//!
//! - **Filesystem**: a Landlock ruleset. Everything is readable (or, with `readable:`, only the
//!   system's folders, the workspace and those paths), and only the workspace (with
//!   `workspace-write`), `/dev/null` and the `writable:` paths are writable.
//! - **Network**: a seccomp filter that refuses sockets other than Unix ones (`socket()` of any other
//!   family fails with EACCES) and `io_uring_setup` (which could open them behind the filter's back).
//! - `no_new_privs`, which both require, so a set-uid program cannot shed them.
//!
//! The ruleset and the filter are prepared here, in delta; a tool's process applies them between
//! `clone` and `exec` (the `process-gate` crate), so delta itself keeps its reach (the model, the
//! store) and no program of the agent's runs a moment unconfined. A mode the kernel cannot enforce
//! is refused with an error that names it: a sandbox is never silently left out.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    path_beneath_rules,
};
use serde::{Deserialize, Serialize};

/// What the filesystem allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum FsMode {
    /// Nothing may be written but `/dev/null` and the `writable:` paths.
    ReadOnly,
    /// The workspace may be written too.
    WorkspaceWrite,
    /// No filesystem sandbox (explicit).
    Off,
}

impl FsMode {
    /// The mode's name, as written in agent.yaml.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::WorkspaceWrite => "workspace-write",
            Self::Off => "off",
        }
    }

    /// A mode from its name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "read-only" => Some(Self::ReadOnly),
            "workspace-write" => Some(Self::WorkspaceWrite),
            "off" => Some(Self::Off),
            _ => None,
        }
    }
}

/// An agent's sandbox, as configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxPolicy {
    pub filesystem: FsMode,
    /// Whether the network may be reached.
    pub network: bool,
    /// More paths that may be written (relative ones: to the workspace).
    pub writable: Vec<PathBuf>,
    /// When not empty: the only paths (besides the workspace and the system's folders) that may be
    /// read.
    pub readable: Vec<PathBuf>,
}

impl SandboxPolicy {
    /// The sandbox of a new agent from `delta init`: the workspace writable, no network.
    pub fn recommended() -> Self {
        Self {
            filesystem: FsMode::WorkspaceWrite,
            network: false,
            writable: Vec::new(),
            readable: Vec::new(),
        }
    }

    /// Whether it confines anything.
    pub fn confines(&self) -> bool {
        self.filesystem != FsMode::Off || !self.network
    }

    /// One line for people: `workspace-write, network off`.
    pub fn describe(&self) -> String {
        format!(
            "{}, network {}",
            self.filesystem.as_str(),
            if self.network { "on" } else { "off" }
        )
    }

    /// What the sandbox refuses, for a tool failure that may be its doing.
    pub fn refusals(&self) -> String {
        let mut rules = Vec::new();
        match self.filesystem {
            FsMode::ReadOnly => rules.push("writing any file (read-only)".to_string()),
            FsMode::WorkspaceWrite => {
                rules.push("writing outside the workspace (workspace-write)".to_string())
            }
            FsMode::Off => {}
        }
        if !self.readable.is_empty() {
            rules.push("reading outside the readable paths".into());
        }
        if !self.network {
            rules.push("opening network connections (network off)".into());
        }
        rules.join("; ")
    }

    /// Prepares the ruleset and filter for tools that run in `workspace`; `None` when nothing is
    /// confined. An error when the kernel cannot enforce the mode.
    pub fn prepare(&self, workspace: &Path) -> Result<Option<Confinement>, SandboxError> {
        if !self.confines() {
            return Ok(None);
        }
        let ruleset = match self.filesystem {
            FsMode::Off => None,
            mode => Some(self.ruleset(mode, workspace)?),
        };
        let filter = if self.network {
            None
        } else {
            Some(instructions(&network_filter()?))
        };
        Ok(Some(Confinement {
            ruleset,
            filter,
            policy: self.clone(),
        }))
    }

    /// Confines this process (and what it starts) from now on; for a process about to `exec` the
    /// program to confine ([`command`]).
    pub fn enter(&self, workspace: &Path) -> Result<(), SandboxError> {
        if self.filesystem != FsMode::Off {
            let created = self.created(self.filesystem, workspace)?;
            created
                .restrict_self()
                .map_err(|e| SandboxError::Unsupported {
                    mode: self.filesystem.as_str(),
                    why: e.to_string(),
                })?;
        }
        if !self.network {
            let program = network_filter()?;
            seccompiler::apply_filter(&program).map_err(|e| SandboxError::Filter(e.to_string()))?;
        }
        Ok(())
    }

    fn ruleset(&self, mode: FsMode, workspace: &Path) -> Result<OwnedFd, SandboxError> {
        let fd: Option<OwnedFd> = self.created(mode, workspace)?.into();
        fd.ok_or_else(|| SandboxError::Unsupported {
            mode: mode.as_str(),
            why: NO_LANDLOCK.into(),
        })
    }

    fn created(
        &self,
        mode: FsMode,
        workspace: &Path,
    ) -> Result<landlock::RulesetCreated, SandboxError> {
        let unsupported = |_: landlock::RulesetError| SandboxError::Unsupported {
            mode: mode.as_str(),
            why: NO_LANDLOCK.into(),
        };
        let abi = ABI::V3;
        let absolute = |p: &PathBuf| {
            if p.is_absolute() {
                p.clone()
            } else {
                workspace.join(p)
            }
        };
        let mut writable: Vec<PathBuf> = vec![PathBuf::from("/dev/null")];
        if mode == FsMode::WorkspaceWrite {
            writable.push(workspace.to_path_buf());
        }
        writable.extend(self.writable.iter().map(absolute));
        let readable: Vec<PathBuf> = if self.readable.is_empty() {
            vec![PathBuf::from("/")]
        } else {
            SYSTEM_READABLE
                .iter()
                .map(PathBuf::from)
                .chain(std::iter::once(workspace.to_path_buf()))
                .chain(self.readable.iter().map(absolute))
                .collect()
        };
        let existing =
            |paths: Vec<PathBuf>| paths.into_iter().filter(|p| p.exists()).collect::<Vec<_>>();
        // Filesystem access control itself is required (ABI 1); renames across folders (ABI 2) and
        // truncation (ABI 3) are handled where the kernel has them.
        let created = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(ABI::V1))
            .and_then(|r| {
                r.set_compatibility(CompatLevel::BestEffort)
                    .handle_access(AccessFs::from_all(abi))
            })
            .and_then(|r| r.create())
            .and_then(|r| {
                r.add_rules(path_beneath_rules(
                    existing(readable),
                    AccessFs::from_read(abi),
                ))
            })
            .and_then(|r| {
                r.add_rules(path_beneath_rules(
                    existing(writable),
                    AccessFs::from_all(abi),
                ))
            })
            .map_err(unsupported)?;
        Ok(created)
    }
}

/// Why a filesystem mode cannot be enforced.
const NO_LANDLOCK: &str = "this kernel has no Landlock, which the filesystem sandbox needs (Linux 5.13 \
     or later, with Landlock enabled); --sandbox off runs without it";

/// The hidden command of the delta binary that enters a sandbox, then runs a program in it.
pub const ENTER_COMMAND: &str = "__sandboxed";

/// The command line that runs `program args` in `policy`'s sandbox for `workspace`, for programs
/// started outside the gate (a session's shell, a stdio MCP server): `delta __sandboxed POLICY
/// WORKSPACE -- PROGRAM ARGS…`, `delta` being `host` (this binary).
pub fn command(
    host: &Path,
    policy: &SandboxPolicy,
    workspace: &Path,
    program: &str,
    args: &[String],
) -> std::process::Command {
    let mut command = std::process::Command::new(host);
    command
        .arg(ENTER_COMMAND)
        .arg(serde_json::to_string(policy).unwrap_or_default())
        .arg(workspace)
        .arg("--")
        .arg(program)
        .args(args);
    command
}

/// What `delta __sandboxed` does: enters the sandbox, then replaces itself with the program. Returns
/// only with the reason it could not.
pub fn enter_and_exec(policy: &str, workspace: &Path, argv: &[String]) -> SandboxError {
    use std::os::unix::process::CommandExt;
    let policy: SandboxPolicy = match serde_json::from_str(policy) {
        Ok(policy) => policy,
        Err(e) => return SandboxError::Filter(format!("bad sandbox policy: {e}")),
    };
    let Some((program, args)) = argv.split_first() else {
        return SandboxError::Filter("no program to run".into());
    };
    if let Err(e) = policy.enter(workspace) {
        return e;
    }
    let error = std::process::Command::new(program).args(args).exec();
    SandboxError::Exec {
        program: program.clone(),
        source: error,
    }
}

/// Folders every program needs to read to run at all, when `readable:` limits reading.
const SYSTEM_READABLE: [&str; 9] = [
    "/bin", "/sbin", "/usr", "/lib", "/lib64", "/etc", "/dev", "/proc", "/sys",
];

/// A sandbox ready to apply to a process: a Landlock ruleset's descriptor and a seccomp program.
#[derive(Debug)]
pub struct Confinement {
    ruleset: Option<OwnedFd>,
    /// The seccomp program, in the kernel's layout, made once and shared by every spawn.
    filter: Option<std::sync::Arc<[process_gate::Instruction]>>,
    policy: SandboxPolicy,
}

impl Confinement {
    /// The ruleset's descriptor, for `landlock_restrict_self` in the child.
    pub fn ruleset_fd(&self) -> Option<RawFd> {
        self.ruleset.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// The seccomp program's instructions, for the child to load.
    pub fn filter(&self) -> Option<std::sync::Arc<[process_gate::Instruction]>> {
        self.filter.clone()
    }

    /// The policy it enforces.
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }
}

/// `program` in the kernel's layout.
fn instructions(
    program: &[seccompiler::sock_filter],
) -> std::sync::Arc<[process_gate::Instruction]> {
    program
        .iter()
        .map(|i| process_gate::Instruction {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect()
}

/// Why a sandbox could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the sandbox mode {mode} cannot be enforced here: {why}")]
    Unsupported { mode: &'static str, why: String },
    #[error("the network filter could not be built: {0}")]
    Filter(String),
    #[error("cannot start {program} in the sandbox: {source}")]
    Exec {
        program: String,
        source: std::io::Error,
    },
}

/// The seccomp program that refuses every socket but Unix ones.
fn network_filter() -> Result<Vec<seccompiler::sock_filter>, SandboxError> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let fail = |e: &dyn std::fmt::Display| SandboxError::Filter(e.to_string());
    let arch = if cfg!(target_arch = "aarch64") {
        TargetArch::aarch64
    } else {
        TargetArch::x86_64
    };
    let not_unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        nix::libc::AF_UNIX as u64,
    )
    .map_err(|e| fail(&e))?;
    let rules = [
        (
            nix::libc::SYS_socket,
            vec![SeccompRule::new(vec![not_unix]).map_err(|e| fail(&e))?],
        ),
        (nix::libc::SYS_io_uring_setup, Vec::new()),
    ]
    .into_iter()
    .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(nix::libc::EACCES as u32),
        arch,
    )
    .map_err(|e| fail(&e))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| fail(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_back_and_describe_what_they_refuse() {
        for mode in [FsMode::ReadOnly, FsMode::WorkspaceWrite, FsMode::Off] {
            assert_eq!(FsMode::parse(mode.as_str()), Some(mode));
        }
        let policy = SandboxPolicy::recommended();
        assert_eq!(policy.describe(), "workspace-write, network off");
        assert!(policy.refusals().contains("writing outside the workspace"));
        let open = SandboxPolicy {
            filesystem: FsMode::Off,
            network: true,
            ..policy
        };
        assert!(!open.confines());
        assert!(open.prepare(Path::new("/")).unwrap().is_none());
    }
}
