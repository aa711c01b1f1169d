//! Who holds a lock or a lease: a process on a host, since when, doing what. Shared by the lock
//! ([`crate::lock`]), the errors that name a holder and the stores.

use serde::{Deserialize, Serialize};

/// Who holds (or held) a lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    /// Process id.
    pub pid: u32,
    /// Host name.
    pub host: String,
    /// When the holder took the lock (RFC 3339).
    pub started_at: String,
    /// What the holder is doing, e.g. `delta run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The boot and the process namespace the holder ran in (a digest of the kernel's boot id and
    /// of `/proc/self/ns/pid`), where the system tells: with them, a holder on this machine whose
    /// process has ended is known to have ended ([`LockHolder::is_gone`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_scope: Option<std::num::NonZeroU64>,
}

impl LockHolder {
    /// Describes the current process.
    pub fn current(started_at: jiff::Timestamp, command: Option<&str>) -> Self {
        Self {
            pid: std::process::id(),
            host: hostname(),
            started_at: started_at.to_string(),
            command: command.map(str::to_string),
            process_scope: process_scope(),
        }
    }

    /// Whether the holder's process is known to have ended: it ran on this machine, in this boot
    /// and this process namespace, and no process has its pid now. `false` whenever that cannot be
    /// told (another machine, a holder that did not record its scope, a pid in use again).
    pub fn is_gone(&self) -> bool {
        let Some(scope) = &self.process_scope else {
            return false;
        };
        self.host == hostname()
            && process_scope() == Some(*scope)
            && !std::path::Path::new(&format!("/proc/{}", self.pid)).exists()
    }

    /// One-line description for messages: `pid 42 on host (delta run) since 2026-01-01T00:00:00Z`.
    pub fn describe(&self) -> String {
        let command = self
            .command
            .as_deref()
            .map(|c| format!(" ({c})"))
            .unwrap_or_default();
        format!(
            "pid {} on {}{command} since {}",
            self.pid, self.host, self.started_at
        )
    }
}

/// A digest (FNV-1a, stable across builds) of this process's boot id and pid namespace
/// (`/proc/sys/kernel/random/boot_id`, `/proc/self/ns/pid`), or `None` where the system has no
/// `/proc`; read once per process.
fn process_scope() -> Option<std::num::NonZeroU64> {
    static SCOPE: std::sync::OnceLock<Option<std::num::NonZeroU64>> = std::sync::OnceLock::new();
    *SCOPE.get_or_init(|| {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let namespace = std::fs::read_link("/proc/self/ns/pid").ok()?;
        let text = format!("{} {}", boot.trim(), namespace.display());
        let digest = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
        std::num::NonZeroU64::new(digest)
    })
}

/// The machine's host name, or `unknown`; read once per process (it is written into every lock and
/// process record).
pub fn hostname() -> String {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        for source in ["/proc/sys/kernel/hostname", "/etc/hostname"] {
            if let Ok(name) = std::fs::read_to_string(source) {
                let name = name.trim();
                if !name.is_empty() {
                    return name.to_string();
                }
            }
        }
        std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "unknown".to_string())
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_is_gone_only_when_it_ran_here_and_its_process_ended() {
        let me = LockHolder::current(jiff::Timestamp::UNIX_EPOCH, Some("test"));
        assert!(!me.is_gone(), "this process is alive");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        child.wait().unwrap();
        let ended = LockHolder {
            pid: child.id(),
            ..me.clone()
        };
        assert_eq!(ended.is_gone(), me.process_scope.is_some());
        let elsewhere = LockHolder {
            host: format!("{}-elsewhere", me.host),
            ..ended.clone()
        };
        assert!(!elsewhere.is_gone());
        let other_boot = LockHolder {
            process_scope: std::num::NonZeroU64::new(me.process_scope.map_or(1, |s| s.get() ^ 1)),
            ..ended.clone()
        };
        assert!(!other_boot.is_gone());
        let unscoped = LockHolder {
            process_scope: None,
            ..ended
        };
        assert!(!unscoped.is_gone());
    }
}
