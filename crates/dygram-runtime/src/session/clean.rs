//! `exec clean`: removing executions that are done with (complete ones, or with `all` every one),
//! optionally only those whose last call is older than a moment, and what killed creations and
//! removals left behind. An execution a call works on is never removed.

use super::{Executions, SessionError, Summary, aside};
use crate::state::Status;

/// Which executions `exec clean` removes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cleaning {
    /// Every execution and every folder set aside, not only the complete executions.
    pub all: bool,
    /// Only those whose last call was before this moment (a folder set aside whose metadata
    /// cannot be read: set aside before it); `None`: whenever.
    pub before: Option<jiff::Timestamp>,
}

/// What `exec clean` did ([`Executions::clean`]).
#[derive(Debug, Default)]
pub struct Cleaned {
    /// Executions and folders set aside removed.
    pub removed: usize,
    /// Executions kept because a call works on them, with the error that says who.
    pub busy: Vec<(String, SessionError)>,
    /// Executions kept because they are in progress or paused (without `all`).
    pub running: usize,
    /// Executions kept because they ended with an error (without `all`).
    pub failed: usize,
    /// Folders set aside kept (without `all`).
    pub set_aside: usize,
    /// Executions and folders kept because their last call is not older than
    /// [`Cleaning::before`] (or its time is unknown).
    pub recent: usize,
}

impl Executions {
    /// Removes what `which` names, except what a call works on, and what killed creations and
    /// removals left behind.
    pub fn clean(&self, which: Cleaning) -> Result<Cleaned, SessionError> {
        self.sweep();
        clean_among(
            self.list(),
            which,
            |id| self.remove(id),
            |e| match e {
                busy @ SessionError::Busy { .. } => Ok(busy),
                other => Err(other),
            },
        )
    }
}

/// Removes, among `all`, the executions `which` selects, with `remove`; an execution a call works
/// on is kept: `busy` turns its removal's error into the note kept (or gives back an error that
/// stops the cleaning).
pub(crate) fn clean_among<E>(
    all: Vec<Summary>,
    which: Cleaning,
    mut remove: impl FnMut(&str) -> Result<bool, E>,
    busy: impl Fn(E) -> Result<SessionError, E>,
) -> Result<Cleaned, E> {
    let mut cleaned = Cleaned::default();
    for e in all {
        let status = e.metadata.as_ref().map(|m| m.status);
        let done = e.set_aside.is_none() && status == Some(Status::Complete);
        if !(which.all || done) {
            if e.set_aside.is_some() {
                cleaned.set_aside += 1;
            } else if status.is_some_and(Status::is_finished) {
                cleaned.failed += 1;
            } else {
                cleaned.running += 1;
            }
            continue;
        }
        if let Some(before) = which.before
            && last_called(&e).is_none_or(|t| t >= before)
        {
            cleaned.recent += 1;
            continue;
        }
        match remove(&e.id) {
            Ok(true) => cleaned.removed += 1,
            Ok(false) => {}
            Err(e2) => cleaned.busy.push((e.id, busy(e2)?)),
        }
    }
    Ok(cleaned)
}

/// When an execution (or a folder set aside) was last called: its metadata's time, else, for a
/// folder set aside, the time in its name (when it was set aside).
fn last_called(e: &Summary) -> Option<jiff::Timestamp> {
    if let Some(t) = e
        .metadata
        .as_ref()
        .and_then(|m| m.last_executed_at.parse().ok())
    {
        return Some(t);
    }
    e.set_aside?;
    aside::set_aside_at(&e.id)
}
