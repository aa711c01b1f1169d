//! Read-only mounts outside the writable paths, for the tools of a run: Landlock decides what may
//! be written, but not `chmod`, `chown`, `utimensat` or extended attributes, which a read-only
//! mount refuses (`EROFS`).
//!
//! Making a mount namespace costs a process start a third of a millisecond, so it is made once per
//! run: a holder process (`delta __mounts POLICY WORKSPACE`) enters a namespace of its own with
//! every mount read-only but the writable paths (`process_gate::harden::private_mounts`), and says
//! it is ready; delta opens its namespaces through `/proc/<pid>/ns/` and lets it go. Each tool then
//! joins them (two `setns` calls) before its working folder is set. Where the kernel refuses (no
//! user namespaces for this user), tools run without them, and the policy says so.

use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::SandboxPolicy;

/// The hidden command of the delta binary that holds a run's namespaces.
pub const HOLD_COMMAND: &str = "__mounts";

/// What the holder prints once its namespaces are ready.
const READY: &str = "ready";

/// A run's namespaces, open.
#[derive(Debug)]
pub struct Namespaces {
    user: Option<OwnedFd>,
    mount: OwnedFd,
}

impl Namespaces {
    /// Their descriptors, for a tool's process to join.
    pub fn fds(&self) -> (Option<RawFd>, RawFd) {
        (
            self.user.as_ref().map(AsRawFd::as_raw_fd),
            self.mount.as_raw_fd(),
        )
    }
}

/// Starts a holder for `policy`'s tools in `workspace` and opens its namespaces; why not, when that
/// fails.
pub fn hold(policy: &SandboxPolicy, workspace: &Path, host: &Path) -> Result<Namespaces, String> {
    let mut child = Command::new(host)
        .arg(HOLD_COMMAND)
        .arg(serde_json::to_string(policy).unwrap_or_default())
        .arg(workspace)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", host.display()))?;
    let opened = open_when_ready(&mut child);
    // The namespaces live on through the descriptors: the holder may go.
    drop(child.stdin.take());
    let mut why = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_string(&mut why);
    }
    let _ = child.wait();
    opened.map_err(|e| match why.trim() {
        "" => e,
        said => format!("{e}: {said}"),
    })
}

/// Waits for the holder's word, then opens its namespaces.
fn open_when_ready(child: &mut std::process::Child) -> Result<Namespaces, String> {
    let stdout = child.stdout.take().ok_or("no pipe from the holder")?;
    let mut line = String::new();
    let _ = BufReader::new(stdout).read_line(&mut line);
    let user = match line.trim().strip_prefix(READY) {
        Some(" user") => true,
        Some("") => false,
        _ => return Err("the holder of the read-only mounts did not start".into()),
    };
    let open = |kind: &str| -> Result<OwnedFd, String> {
        let path = PathBuf::from(format!("/proc/{}/ns/{kind}", child.id()));
        std::fs::File::open(&path)
            .map(OwnedFd::from)
            .map_err(|e| format!("{}: {e}", path.display()))
    };
    Ok(Namespaces {
        user: if user { Some(open("user")?) } else { None },
        mount: open("mnt")?,
    })
}

/// What `delta __mounts POLICY WORKSPACE` does before it says it is ready ([`ready_line`]) and waits
/// for its standard input to end: enters the namespaces. Whether a user namespace was made, or why
/// none could be.
pub fn hold_enter(policy: &str, workspace: &Path) -> Result<bool, String> {
    let policy: SandboxPolicy =
        serde_json::from_str(policy).map_err(|e| format!("bad sandbox policy: {e}"))?;
    let writable = policy.writable_paths(workspace);
    let writable: Vec<&Path> = writable.iter().map(PathBuf::as_path).collect();
    let user = process_gate::harden::private_mounts(&writable, true)
        .map_err(|e| format!("the kernel refused a mount namespace: {e}"))?;
    // Its parent opens the namespaces through /proc, which a non-dumpable process keeps closed.
    process_gate::harden::dumpable().map_err(|e| e.to_string())?;
    Ok(user)
}

/// The line the holder prints once its namespaces are ready.
pub fn ready_line(user: bool) -> String {
    format!("{READY}{}", if user { " user" } else { "" })
}
