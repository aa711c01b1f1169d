//! Which execution a call without `--id` works on: the most recent execution of its machine file,
//! not the most recent one of the folder (which may belong to another file); and the other
//! executions of that file still running, which the call warns about.
//!
//! An execution's file is the `machineFile` of its metadata, relative to the folder the
//! executions are in (`<base>/.dygram/executions`), as the call that created it was given it; two
//! spellings of one file (`order.dy`, `./order.dy`) are the same file. A machine read from standard
//! input is matched with the executions of machines read from standard input.

use std::path::{Path, PathBuf};

use super::{Executions, Metadata, Summary};
use crate::files::canonical;

impl Executions {
    /// The folder the executions' machine files are relative to (`<base>` of
    /// [`Executions::under`]).
    pub(super) fn base(&self) -> PathBuf {
        self.root()
            .parent()
            .and_then(Path::parent)
            .map_or_else(|| self.root().to_path_buf(), Path::to_path_buf)
    }

    /// The executions of `machine_file` (`None`: standard input): the one a call without an id
    /// resumes, and those still running. The folder is listed once.
    pub fn of_machine(&self, machine_file: Option<&str>) -> OfMachine {
        let listed = self.list();
        let base = self.base();
        let wanted = machine_file.map(|file| canonical(&base.join(file)));
        let ours = |s: &Summary| {
            s.metadata
                .as_ref()
                .is_some_and(|m| runs(&base, m, wanted.as_deref()))
        };
        let last = self.last().filter(|last| {
            match listed.iter().find(|s| &s.id == last) {
                Some(s) => s.metadata.is_none() || ours(s),
                // Nothing of it can be read: opening it sets it aside.
                None => true,
            }
        });
        let all: Vec<&Summary> = listed
            .iter()
            .filter(|s| s.set_aside.is_none() && ours(s))
            .collect();
        let active = all
            .iter()
            .filter(|s| s.metadata.as_ref().is_some_and(|m| !m.status.is_finished()))
            .map(|s| s.id.clone())
            .collect();
        OfMachine {
            latest: last.or_else(|| all.first().map(|s| s.id.clone())),
            active,
        }
    }
}

/// Whether `meta` is an execution of the machine file `wanted` (canonical; `None`: standard
/// input).
fn runs(base: &Path, meta: &Metadata, wanted: Option<&Path>) -> bool {
    match (wanted, meta.machine_file.as_deref()) {
        (None, None) => true,
        (Some(wanted), Some(saved)) => wanted == canonical(&base.join(saved)),
        _ => false,
    }
}

/// The executions of one machine file ([`Executions::of_machine`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OfMachine {
    /// The execution a call without an id resumes: the one `last` names when it is of that file
    /// (or its metadata cannot be read), else the one of that file with the latest call; `None`
    /// when the file has none.
    pub latest: Option<String>,
    /// Those in progress or paused, most recent call first.
    pub active: Vec<String>,
}
