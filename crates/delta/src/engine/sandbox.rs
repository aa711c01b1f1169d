//! The sandbox of a run's tools and hooks, prepared once when the run starts (see
//! [`crate::sandbox`]).

use std::sync::Arc;

use super::{Engine, Observer};

impl Engine<'_> {
    /// Prepares the agent's sandbox for its tools and hooks; the error when the kernel cannot
    /// enforce it (the run fails: it never runs unconfined by accident).
    pub(super) fn prepare_sandbox(&mut self) -> Option<String> {
        let policy = self.setup.agent.sandbox.clone()?;
        if let Some(path) = policy.exposes(&self.setup.run.workspace, &self.setup.agent.dir) {
            return Some(format!(
                "the sandbox lets the run's tools write {}, which holds the agent ({}): they could \
                 rewrite its tools, hooks and sandbox for the next call; use a workspace outside \
                 the agent's folder",
                path.display(),
                self.setup.agent.dir.display()
            ));
        }
        if let Some(state) = crate::seal::state_dir()
            && let Some(path) = policy.exposes(&self.setup.run.workspace, &state)
        {
            return Some(format!(
                "the sandbox lets the run's tools write {}, which holds delta's own state ({}: \
                 the seals of runs, which say what a person approved); set DELTA_STATE_DIR to a \
                 folder outside the workspace and the writable paths",
                path.display(),
                state.display()
            ));
        }
        match policy.prepare(&self.setup.run.workspace) {
            Ok(confinement) => {
                if let Some(why) = confinement
                    .as_ref()
                    .and_then(|c| c.metadata_unprotected())
                    .filter(|_| policy.filesystem != crate::sandbox::FsMode::Off)
                {
                    let note = format!(
                        "Sandbox: files outside the writable paths keep their contents but not \
                         their metadata (chmod, chown, times, extended attributes): {why}"
                    );
                    self.log(&note);
                    self.observer.progress(super::Progress::Note(note));
                }
                self.confinement = confinement.map(Arc::new);
                self.hooks.confine(self.confinement.clone());
                self.log(&format!("Sandbox: {}", policy.describe()));
                None
            }
            Err(e) => Some(e.to_string()),
        }
    }
}
