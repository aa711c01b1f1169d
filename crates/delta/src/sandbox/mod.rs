//! The sandbox of the processes the model can cause to run: what they may write, read and reach.
//!
//! Built from agent.yaml's `sandbox:` (or `--sandbox` / `--network`) once per run, by the kernel's own
//! mechanisms, no privileges needed:
//!
//! - **Filesystem**: a Landlock ruleset. Everything is readable (or, with `readable:`, only the
//!   system's folders, the workspace and those paths), and only the workspace (with
//!   `workspace-write`), `/dev/null` and the `writable:` paths are writable. With `filesystem: off`
//!   the ruleset allows every path, and still puts the process in a Landlock domain: it can then
//!   neither trace nor read the memory of a process outside it (delta), even as root. Where the
//!   kernel has them (Landlock ABI 6), signals to processes outside the domain are refused, and with
//!   the network off, abstract Unix sockets outside it too.
//! - **A seccomp program** ([`filter`]): no `ptrace` and kin, no keystrokes queued into a terminal, no
//!   mounts or kernel modules, and with the network off no `socket()` at all.
//! - `no_new_privs`, which both require, so a set-uid program cannot shed them.
//!
//! Every confined program also starts in a session of its own, without a controlling terminal.
//!
//! The ruleset and the filter are prepared here, in delta; a tool's process applies them between
//! `clone` and `exec` (the `process-gate` crate), so delta itself keeps its reach (the model, the
//! store) and no program of the agent's runs a moment unconfined. A mode the kernel cannot enforce
//! is refused with an error that names it: a sandbox is never silently left out.

mod filter;
mod mounts;

pub use mounts::{HOLD_COMMAND, hold_enter, ready_line};

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    Scope, path_beneath_rules,
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

    /// This policy (of a run in `workspace`) held within `parent` (of a run in `parent_ws`): the
    /// stricter filesystem mode, the network only when both allow it, only the writable paths the
    /// parent lets write, reading limited to what both let read. A sub-agent's sandbox.
    pub fn within(&self, parent: &SandboxPolicy, parent_ws: &Path, workspace: &Path) -> Self {
        let resolve = |paths: &[PathBuf], base: &Path| -> Vec<PathBuf> {
            paths
                .iter()
                .map(|p| {
                    if p.is_absolute() {
                        p.clone()
                    } else {
                        base.join(p)
                    }
                })
                .collect()
        };
        let inside = |path: &PathBuf, roots: &[PathBuf]| roots.iter().any(|r| path.starts_with(r));
        let mut parent_writes = resolve(&parent.writable, parent_ws);
        match parent.filesystem {
            FsMode::Off => parent_writes.push(PathBuf::from("/")),
            FsMode::WorkspaceWrite => parent_writes.push(parent_ws.to_path_buf()),
            FsMode::ReadOnly => {}
        }
        let mut filesystem = match (self.filesystem, parent.filesystem) {
            (FsMode::ReadOnly, _) | (_, FsMode::ReadOnly) => FsMode::ReadOnly,
            (FsMode::WorkspaceWrite, _) | (_, FsMode::WorkspaceWrite) => FsMode::WorkspaceWrite,
            (FsMode::Off, FsMode::Off) => FsMode::Off,
        };
        if filesystem == FsMode::WorkspaceWrite && !inside(&workspace.to_path_buf(), &parent_writes)
        {
            filesystem = FsMode::ReadOnly;
        }
        let writable = resolve(&self.writable, workspace)
            .into_iter()
            .filter(|p| inside(p, &parent_writes))
            .collect();
        let readable = match (parent.readable.is_empty(), self.readable.is_empty()) {
            (true, _) => resolve(&self.readable, workspace),
            (false, child_all) => {
                let mut roots = resolve(&parent.readable, parent_ws);
                roots.push(parent_ws.to_path_buf());
                let mut kept: Vec<PathBuf> = if child_all {
                    roots.clone()
                } else {
                    resolve(&self.readable, workspace)
                        .into_iter()
                        .filter(|p| inside(p, &roots))
                        .collect()
                };
                // Never empty, which would mean "everything": the child's own workspace, which it
                // may read anyway.
                if kept.is_empty() {
                    kept.push(workspace.to_path_buf());
                }
                kept
            }
        };
        Self {
            filesystem,
            network: self.network && parent.network,
            writable,
            readable,
        }
    }

    /// The writable path (the workspace with `workspace-write`, or one of `writable:`) that holds
    /// `state`, if one does: a sandbox that lets tools write there cannot keep delta's own state
    /// out of their reach. `None` with `filesystem: off`, which keeps nothing out of reach.
    pub fn exposes(&self, workspace: &Path, state: &Path) -> Option<PathBuf> {
        let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let state = canonical(state);
        let mut writable: Vec<PathBuf> = self
            .writable
            .iter()
            .map(|p| {
                if p.is_absolute() {
                    p.clone()
                } else {
                    workspace.join(p)
                }
            })
            .collect();
        match self.filesystem {
            FsMode::Off => return None,
            FsMode::WorkspaceWrite => writable.push(workspace.to_path_buf()),
            FsMode::ReadOnly => {}
        }
        writable
            .into_iter()
            .find(|p| state.starts_with(canonical(p)))
    }

    /// Prepares the ruleset and filter for tools that run in `workspace`; `None` when nothing is
    /// confined. An error when the kernel cannot enforce the mode.
    pub fn prepare(&self, workspace: &Path) -> Result<Option<Confinement>, SandboxError> {
        self.prepare_with(workspace, &crate::shells::host_program())
    }

    /// [`SandboxPolicy::prepare`], with `delta` (the binary that holds the read-only mounts' namespaces)
    /// named: for a program that is not delta itself.
    pub fn prepare_with(
        &self,
        workspace: &Path,
        delta: &Path,
    ) -> Result<Option<Confinement>, SandboxError> {
        if !self.confines() {
            return Ok(None);
        }
        let fd: Option<OwnedFd> = self.created(workspace)?.into();
        if fd.is_none() && self.filesystem != FsMode::Off {
            return Err(SandboxError::Unsupported {
                mode: self.filesystem.as_str(),
                why: NO_LANDLOCK.into(),
            });
        }
        let namespaces = match self.filesystem {
            FsMode::Off => Err("the filesystem is not confined".to_string()),
            _ => mounts::hold(self, workspace, delta),
        };
        Ok(Some(Confinement {
            ruleset: fd,
            filter: Some(self.filter()),
            policy: self.clone(),
            namespaces,
        }))
    }

    /// What tools may write: `/dev/null`, the workspace (`workspace-write`), `writable:` (relative
    /// ones in the workspace); everything with `filesystem: off`.
    fn writable_paths(&self, workspace: &Path) -> Vec<PathBuf> {
        let mut writable: Vec<PathBuf> = vec![PathBuf::from("/dev/null")];
        match self.filesystem {
            FsMode::WorkspaceWrite => writable.push(workspace.to_path_buf()),
            FsMode::Off => writable.push(PathBuf::from("/")),
            FsMode::ReadOnly => {}
        }
        writable.extend(self.writable.iter().map(|p| {
            if p.is_absolute() {
                p.clone()
            } else {
                workspace.join(p)
            }
        }));
        // A path inside another writable one adds nothing, and a tool could replace it with a link
        // (its folder is writable) before the rule is made again: left out.
        let roots = writable.clone();
        writable.retain(|p| !roots.iter().any(|r| r != p && p.starts_with(r)));
        writable
    }

    /// The seccomp program of this policy's processes.
    fn filter(&self) -> std::sync::Arc<[process_gate::Instruction]> {
        filter::program(self.network).into()
    }

    /// Confines this process (and what it starts) from now on; for a process about to `exec` the
    /// program to confine ([`command`]). `warn` hears of what could not be made where the kernel
    /// refuses it (the read-only mounts).
    pub fn enter(&self, workspace: &Path, warn: &mut dyn FnMut(&str)) -> Result<(), SandboxError> {
        let created = self.created(workspace)?;
        if self.filesystem != FsMode::Off {
            let writable = self.writable_paths(workspace);
            let writable: Vec<&Path> = writable.iter().map(PathBuf::as_path).collect();
            // Where the kernel allows it: metadata outside the writable paths cannot change either.
            // A /dev/pts of its own: the user's terminals are not there (a program on a
            // pseudo-terminal keeps the one it was given, open already).
            if let Err(e) = process_gate::harden::private_mounts(&writable, true) {
                warn(&format!(
                    "the sandbox's read-only mounts could not be made: {e}"
                ));
            }
        }
        let status = created
            .restrict_self()
            .map_err(|e| SandboxError::Unsupported {
                mode: self.filesystem.as_str(),
                why: e.to_string(),
            })?;
        if self.filesystem != FsMode::Off && status.ruleset == landlock::RulesetStatus::NotEnforced
        {
            return Err(SandboxError::Unsupported {
                mode: self.filesystem.as_str(),
                why: NO_LANDLOCK.into(),
            });
        }
        process_gate::harden::load_filter(&self.filter())
            .map_err(|e| SandboxError::Filter(e.to_string()))
    }

    /// The Landlock ruleset: with `filesystem: off`, one that allows every path (the process is in
    /// a domain all the same), made only where the kernel has Landlock.
    fn created(&self, workspace: &Path) -> Result<landlock::RulesetCreated, SandboxError> {
        let mode = self.filesystem;
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
        // A path the agent names must exist: a rule left out would silently widen or narrow the
        // sandbox from what its author wrote.
        for (key, paths) in [("writable", &self.writable), ("readable", &self.readable)] {
            if let Some(path) = paths.iter().map(absolute).find(|p| !p.exists()) {
                return Err(SandboxError::Missing { key, path });
            }
            // One in the workspace stays there: a link a tool made (in this run or an earlier one)
            // must not carry the rule elsewhere.
            let inside = workspace
                .canonicalize()
                .unwrap_or_else(|_| workspace.to_path_buf());
            if let Some(path) = paths
                .iter()
                .filter(|p| p.is_relative())
                .map(absolute)
                .find(|p| !p.canonicalize().is_ok_and(|c| c.starts_with(&inside)))
            {
                return Err(SandboxError::Escapes { key, path });
            }
        }
        let writable = self.writable_paths(workspace);
        let readable: Vec<PathBuf> = if self.readable.is_empty() || mode == FsMode::Off {
            vec![PathBuf::from("/")]
        } else {
            SYSTEM_READABLE
                .iter()
                .map(PathBuf::from)
                .chain(std::iter::once(workspace.to_path_buf()))
                .chain(self.readable.iter().map(absolute))
                // What a writable path holds is readable already.
                .filter(|p| !writable.iter().any(|w| p != w && p.starts_with(w)))
                .collect()
        };
        let existing =
            |paths: Vec<PathBuf>| paths.into_iter().filter(|p| p.exists()).collect::<Vec<_>>();
        let mut scopes: landlock::BitFlags<Scope> = Scope::Signal.into();
        if !self.network {
            scopes |= Scope::AbstractUnixSocket;
        }
        // Filesystem access control itself is required (ABI 1) for a filesystem mode; renames
        // across folders (ABI 2), truncation (ABI 3) and the scopes (ABI 6) are used where the
        // kernel has them.
        let required = if mode == FsMode::Off {
            CompatLevel::BestEffort
        } else {
            CompatLevel::HardRequirement
        };
        let created = Ruleset::default()
            .set_compatibility(required)
            .handle_access(AccessFs::from_all(ABI::V1))
            .and_then(|r| {
                r.set_compatibility(CompatLevel::BestEffort)
                    .handle_access(AccessFs::from_all(abi))
            })
            .and_then(|r| r.scope(scopes))
            .and_then(|r| r.create())
            .and_then(|r| {
                r.add_rules(path_beneath_rules(
                    existing(readable),
                    AccessFs::from_read(abi),
                ))
            })
            .and_then(|r| {
                // Everything but device nodes: one made in a writable folder would open a disk.
                let devices = AccessFs::MakeChar | AccessFs::MakeBlock;
                r.add_rules(path_beneath_rules(
                    existing(writable),
                    AccessFs::from_all(abi) & !devices,
                ))
            })
            .map_err(unsupported)?;
        Ok(created)
    }
}

/// Why a filesystem mode cannot be enforced.
const NO_LANDLOCK: &str = "this kernel has no Landlock, which the filesystem sandbox needs (Linux 5.13 \
     or later, with Landlock enabled); --sandbox off runs without it";

/// Makes this process non-dumpable: a program of the same user, confined or not, can then neither
/// trace it nor read its memory or environment through `/proc` (it holds the API key and the
/// connections to the model and the store). A failure is not fatal: the confined programs' own
/// filter and Landlock domain refuse the same.
pub fn protect_this_process() {
    let _ = process_gate::harden::not_dumpable();
}

/// The hidden command of the delta binary that enters a sandbox, then runs a program in it.
pub const ENTER_COMMAND: &str = "__sandboxed";

/// Where the trampoline carries a loader variable for the program it starts ([`command`]).
const CARRIED: &str = "DELTA_SANDBOXED_PROGRAM_ENV_";

/// The command line that runs `program args` with exactly `env` in `policy`'s sandbox for
/// `workspace`, for programs started outside the gate (a session's shell, a stdio MCP server):
/// `delta __sandboxed POLICY WORKSPACE -- PROGRAM ARGS…`, `delta` being `host` (this binary).
///
/// `delta` runs unconfined until it has entered the sandbox, so the loader's variables of `env`
/// (`LD_PRELOAD`, …, which a confined program could have put into a session's saved state) must
/// not act on it: they travel under another name, and only the program gets them back.
pub fn command(
    host: &Path,
    policy: &SandboxPolicy,
    workspace: &Path,
    program: &str,
    args: &[String],
    env: &[(String, String)],
) -> std::process::Command {
    let mut command = std::process::Command::new(host);
    command
        .arg(ENTER_COMMAND)
        .arg(serde_json::to_string(policy).unwrap_or_default())
        .arg(workspace)
        .arg("--")
        .arg(program)
        .args(args)
        .env_clear();
    for (name, value) in env {
        if crate::env::loader_var(name) {
            command.env(format!("{CARRIED}{name}"), value);
        } else if !name.starts_with(CARRIED) {
            command.env(name, value);
        }
    }
    command
}

/// What `delta __sandboxed` does: enters the sandbox, then replaces itself with the program. Returns
/// only with the reason it could not.
pub fn enter_and_exec(
    policy: &str,
    workspace: &Path,
    argv: &[String],
    warn: &mut dyn FnMut(&str),
) -> SandboxError {
    use std::os::unix::process::CommandExt;
    let policy: SandboxPolicy = match serde_json::from_str(policy) {
        Ok(policy) => policy,
        Err(e) => return SandboxError::Filter(format!("bad sandbox policy: {e}")),
    };
    let Some((program, args)) = argv.split_first() else {
        return SandboxError::Filter("no program to run".into());
    };
    if let Err(e) = process_gate::harden::leave_terminal() {
        return SandboxError::Filter(format!("cannot leave the terminal: {e}"));
    }
    if let Err(e) = policy.enter(workspace, warn) {
        return e;
    }
    let mut command = std::process::Command::new(program);
    command.args(args);
    for (name, value) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if let Some(original) = text.strip_prefix(CARRIED) {
            command.env(original, value).env_remove(&name);
        }
    }
    let error = command.exec();
    SandboxError::Exec {
        program: program.clone(),
        source: error,
    }
}

/// Folders every program needs to read to run at all, when `readable:` limits reading.
const SYSTEM_READABLE: [&str; 9] = [
    "/bin", "/sbin", "/usr", "/lib", "/lib64", "/etc", "/dev", "/proc", "/sys",
];

/// A sandbox ready to apply to a process: a Landlock ruleset's descriptor, a seccomp program and
/// the namespaces of its read-only mounts.
#[derive(Debug)]
pub struct Confinement {
    ruleset: Option<OwnedFd>,
    /// The seccomp program, in the kernel's layout, made once and shared by every spawn.
    filter: Option<std::sync::Arc<[process_gate::Instruction]>>,
    policy: SandboxPolicy,
    /// The namespaces whose mounts are read-only outside the writable paths, or why there are none.
    namespaces: Result<mounts::Namespaces, String>,
}

impl Confinement {
    /// The user namespace (absent as root) and mount namespace a tool joins.
    pub fn namespace_fds(&self) -> Option<(Option<RawFd>, RawFd)> {
        self.namespaces.as_ref().ok().map(mounts::Namespaces::fds)
    }

    /// Why metadata outside the writable paths is not protected (no namespaces), if it is not.
    pub fn metadata_unprotected(&self) -> Option<&str> {
        self.namespaces.as_ref().err().map(String::as_str)
    }

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

/// Why a sandbox could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the sandbox mode {mode} cannot be enforced here: {why}")]
    Unsupported { mode: &'static str, why: String },
    #[error("the network filter could not be built: {0}")]
    Filter(String),
    #[error("sandbox.{key} names {}, which does not exist", .path.display())]
    Missing { key: &'static str, path: PathBuf },
    #[error(
        "sandbox.{key} names {}, which leads out of the workspace (through a link): a rule on it \
         would reach what the link points to",
        .path.display()
    )]
    Escapes { key: &'static str, path: PathBuf },
    #[error("cannot start {program} in the sandbox: {source}")]
    Exec {
        program: String,
        source: std::io::Error,
    },
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

    #[test]
    fn a_child_policy_is_held_within_its_parents() {
        let parent = SandboxPolicy {
            filesystem: FsMode::WorkspaceWrite,
            network: false,
            writable: vec![PathBuf::from("/cache")],
            readable: vec![PathBuf::from("/data")],
        };
        let child = SandboxPolicy {
            filesystem: FsMode::Off,
            network: true,
            writable: vec![
                PathBuf::from("/etc"),
                PathBuf::from("/cache/x"),
                "out".into(),
            ],
            readable: vec![PathBuf::from("/home"), PathBuf::from("/data/set")],
        };
        let held = child.within(
            &parent,
            Path::new("/ws"),
            Path::new("/ws/.delta/r/agents/c"),
        );
        assert_eq!(held.filesystem, FsMode::WorkspaceWrite);
        assert!(!held.network);
        assert_eq!(
            held.writable,
            [
                PathBuf::from("/cache/x"),
                PathBuf::from("/ws/.delta/r/agents/c/out")
            ]
        );
        assert_eq!(held.readable, [PathBuf::from("/data/set")]);
        // Nothing the child may read that the parent may: its own workspace, never "everything".
        let narrow = SandboxPolicy {
            readable: vec![PathBuf::from("/home")],
            ..child.clone()
        };
        let held = narrow.within(&parent, Path::new("/ws"), Path::new("/ws/c"));
        assert_eq!(held.readable, [PathBuf::from("/ws/c")]);
        // A parent that reads everything leaves the child's own list; a read-only parent makes the
        // child read-only, and a workspace outside the parent's reach is not writable.
        let reads_all = SandboxPolicy {
            readable: Vec::new(),
            ..parent.clone()
        };
        assert_eq!(
            child
                .within(&reads_all, Path::new("/ws"), Path::new("/ws/c"))
                .readable,
            child.readable
        );
        let read_only = SandboxPolicy {
            filesystem: FsMode::ReadOnly,
            ..parent.clone()
        };
        assert_eq!(
            child
                .within(&read_only, Path::new("/ws"), Path::new("/ws/c"))
                .filesystem,
            FsMode::ReadOnly
        );
        assert_eq!(
            child
                .within(&parent, Path::new("/ws"), Path::new("/elsewhere"))
                .filesystem,
            FsMode::ReadOnly
        );
    }
}
