//! Folders set aside: an execution replaced by `--force` (`ID.replaced-<time>`) or one whose state
//! could not be read (`ID.corrupted-<time>`). They are never deleted behind the user's back; they
//! are listed, and removed with `exec rm NAME` or `exec clean --all`. Names are unique: a second
//! folder set aside in the same second gets `-2`, `-3`, …

use std::path::PathBuf;

use serde::Serialize;

use super::{ClientConfig, Executions, Metadata, SessionError, StateFile, io, valid_id};

/// Why a folder was set aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SetAside {
    /// Its state could not be read; a fresh execution took its id.
    Corrupted,
    /// `--force` started a new execution under its id.
    Replaced,
}

impl SetAside {
    /// As written in folder names and listings.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Corrupted => "corrupted",
            Self::Replaced => "replaced",
        }
    }
}

/// Why `name` was set aside, when it is the name of a set-aside folder:
/// `<id>.<corrupted|replaced>-<YYYYMMDD>-<HHMMSS>[-<n>]`.
pub fn kind_of(name: &str) -> Option<SetAside> {
    let (id, rest) = name.split_once('.')?;
    if !valid_id(id) {
        return None;
    }
    let (kind, stamp) = rest.split_once('-')?;
    let kind = match kind {
        "corrupted" => SetAside::Corrupted,
        "replaced" => SetAside::Replaced,
        _ => return None,
    };
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = stamp.split('-').collect();
    let ok = match parts.as_slice() {
        [d, t] => digits(d, 8) && digits(t, 6),
        [d, t, n] => {
            digits(d, 8) && digits(t, 6) && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
        }
        _ => false,
    };
    ok.then_some(kind)
}

/// When the folder `name` was set aside, from the time in its name (UTC, to the second).
pub fn set_aside_at(name: &str) -> Option<jiff::Timestamp> {
    kind_of(name)?;
    let (_, rest) = name.split_once('.')?;
    let (_, stamp) = rest.split_once('-')?;
    let at = jiff::civil::DateTime::strptime("%Y%m%d-%H%M%S", stamp.get(..15)?).ok()?;
    at.to_zoned(jiff::tz::TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp())
}

impl Executions {
    /// Sets an execution aside for `--force` (`<id>.replaced-<time>`), under its lock (so not
    /// while a call works on it: [`SessionError::Busy`]). Returns the folder it went to; `None`
    /// when there is no such execution (also when another call removed or set it aside
    /// meanwhile).
    pub fn replace(
        &self,
        id: &str,
        command: &str,
        now: jiff::Timestamp,
    ) -> Result<Option<PathBuf>, SessionError> {
        let dir = self.dir(id)?;
        if !dir.is_dir() {
            return Ok(None);
        }
        let lock = match self.lock(id, command) {
            Ok(lock) => lock,
            Err(SessionError::Io { .. }) if !dir.is_dir() => return Ok(None),
            Err(e) => return Err(e),
        };
        let folder = self.set_aside(id, SetAside::Replaced, now)?;
        drop(lock);
        Ok(Some(folder))
    }

    /// Moves an execution's folder aside under a unique name (`<id>.<why>-<time>`, then `-2`,
    /// `-3`, …); returns the new folder. The caller holds the execution's lock.
    pub(super) fn set_aside(
        &self,
        id: &str,
        why: SetAside,
        now: jiff::Timestamp,
    ) -> Result<PathBuf, SessionError> {
        let dir = self.dir(id)?;
        let base = format!("{id}.{}-{}", why.as_str(), now.strftime("%Y%m%d-%H%M%S"));
        for n in 1..=1000u32 {
            let name = if n == 1 {
                base.clone()
            } else {
                format!("{base}-{n}")
            };
            let aside = self.root.join(&name);
            if aside.exists() {
                continue;
            }
            match std::fs::rename(&dir, &aside) {
                Ok(()) => {
                    store::atomic::sync_dir(&self.root).map_err(|e| io(&self.root, e))?;
                    if self.last().is_none() {
                        let _ = std::fs::remove_file(self.root.join("last"));
                    }
                    return Ok(aside);
                }
                // Taken by another process between the look and the rename.
                Err(_) if aside.exists() => continue,
                Err(e) => return Err(io(&dir, e)),
            }
        }
        Err(io(&dir, "no free name to set it aside"))
    }

    /// Where an execution's answers came from, read from whatever of its files can still be read
    /// (its commit point, else `metadata.json`), so that a fresh start after corruption keeps it.
    /// Which recordings were served is not kept: the fresh execution starts from the beginning (and
    /// records as a new execution).
    pub(super) fn answer_source(&self, id: &str) -> Option<ClientConfig> {
        let dir = self.dir(id).ok()?;
        let from_state = store::atomic::read_json::<StateFile>(&dir.join("state.json"))
            .ok()
            .and_then(|s| s.metadata);
        let meta = from_state
            .or_else(|| store::atomic::read_json::<Metadata>(&dir.join("metadata.json")).ok())?;
        let mut config = meta.client_config;
        config.playback_state = None;
        config.recording = None;
        Some(config)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_time_a_folder_was_set_aside_is_read_from_its_name() {
        let at = set_aside_at("run.corrupted-20261122-150102-3").unwrap();
        assert_eq!(at.to_string(), "2026-11-22T15:01:02Z");
        assert_eq!(
            set_aside_at("run.replaced-20260101-000000"),
            Some("2026-01-01T00:00:00Z".parse().unwrap())
        );
        assert_eq!(set_aside_at("run"), None);
        assert_eq!(set_aside_at("run.replaced-2026"), None);
    }
}
