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
}

impl LockHolder {
    /// Describes the current process.
    pub fn current(started_at: jiff::Timestamp, command: Option<&str>) -> Self {
        Self {
            pid: std::process::id(),
            host: hostname(),
            started_at: started_at.to_string(),
            command: command.map(str::to_string),
        }
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
