//! The sandbox of a run's tools and hooks, prepared once when the run starts (see
//! [`crate::sandbox`]).

use std::sync::Arc;

use super::Engine;

impl Engine<'_> {
    /// Prepares the agent's sandbox for its tools and hooks; the error when the kernel cannot
    /// enforce it (the run fails: it never runs unconfined by accident).
    pub(super) fn prepare_sandbox(&mut self) -> Option<String> {
        let policy = self.setup.agent.sandbox.clone()?;
        match policy.prepare(&self.setup.run.workspace) {
            Ok(confinement) => {
                self.confinement = confinement.map(Arc::new);
                self.hooks.confine(self.confinement.clone());
                self.log(&format!("Sandbox: {}", policy.describe()));
                None
            }
            Err(e) => Some(e.to_string()),
        }
    }
}
