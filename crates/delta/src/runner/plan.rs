//! Deciding what a request does with the workspace and its run, once, under their locks.

use std::path::{Path, PathBuf};

use super::launch::Picked;
use super::{Continue, Finished, NewRun, Notice, Runner, RunnerError, WorkspaceRef};
use crate::resume::{self, Caller, RunInWorkspace};
use crate::runs;
use crate::session;
use crate::workspace::{self, RunDir};

const RUN: &str = "delta run";
const CONTINUE: &str = "delta continue";

impl Runner<'_> {
    /// `delta run`: resumes the workspace's paused or interrupted run when asked to, else creates a
    /// new run and runs it.
    pub(super) fn start(mut self, new: NewRun) -> Result<Finished, RunnerError> {
        if let Some(id) = &new.run_id {
            workspace::validate_run_id(id)?;
        }
        let clock = self.options.clock;
        // With `auto_resume`, a paused or interrupted run of the workspace is resumed. The workspace
        // stays locked from this decision until the process ends.
        let mut workspace_lock = None;
        if new.auto_resume && new.workspace.join(".delta").is_dir() {
            let ws = workspace::prepare(&new.workspace)?;
            match resume::claim_for_run(&ws, &new.message, clock, RUN).map_err(|source| {
                RunnerError::Open {
                    source: Box::new(source),
                    workspace: ws.clone(),
                }
            })? {
                RunInWorkspace::Resume { opened, decision } => {
                    self.host.notice(Notice::ResumeFound {
                        run_id: &opened.run.run_id,
                        status: opened.status,
                        crashed: opened.crashed.is_some(),
                        decision: &decision,
                        workspace: &ws,
                    });
                    let message = resume::prepare(&opened, &decision)?;
                    let answer = decision.answer();
                    return self.resume(&ws, *opened, message, answer);
                }
                RunInWorkspace::New {
                    workspace_lock: lock,
                } => workspace_lock = Some(lock),
            }
        }

        // `.env` files first (the workspace's may hold the key), then the key check, then create
        // things.
        let env = self.environment(&new.workspace, &new.agent)?;
        let conn = self.connect(&new.agent, &env)?;
        let ws = self.create_workspace(&new)?;
        let create = session::NewRun {
            agent: &new.agent,
            workspace: &ws,
            task: &conn.redactor.redact(&new.message),
            run_id: new.run_id.as_deref(),
            command: RUN,
            upstream: self.options.upstream.as_ref(),
        };
        let session = session::create(create, clock, &self.options.ids, workspace_lock).map_err(
            |source| RunnerError::Create {
                source: Box::new(source),
                workspace: ws.clone(),
            },
        )?;
        self.launch(Picked {
            agent: new.agent,
            workspace: ws,
            session,
            env,
            conn,
            message: None,
            recovered: None,
            resuming: false,
            answer: None,
        })
    }

    /// Creates the workspace (once the run is sure to start) and records it as last used. With
    /// `next_workspace` the next numbered workspace is claimed now: another `delta run -y` may have
    /// taken the one named at first.
    fn create_workspace(&mut self, new: &NewRun) -> Result<PathBuf, RunnerError> {
        let root = workspace::workspaces_root(&new.agent.dir);
        let (ws, name) = if new.next_workspace {
            let (n, ws) = workspace::create_next(&root)?;
            self.host.notice(Notice::WorkspaceCreated {
                name: Some(&n),
                path: &ws,
            });
            (ws, Some(n))
        } else {
            if !new.workspace.exists() {
                self.host.notice(Notice::WorkspaceCreated {
                    name: new.workspace_name.as_deref(),
                    path: &new.workspace,
                });
            }
            (
                workspace::prepare(&new.workspace)?,
                new.workspace_name.clone(),
            )
        };
        if let Some(n) = &name {
            workspace::set_last_used(&root, n)?;
        }
        Ok(ws)
    }

    /// `delta continue`: resumes, answers, extends or retries the run its status allows, or forks it.
    pub(super) fn go_on(mut self, cont: Continue) -> Result<Finished, RunnerError> {
        let ws = self.continue_workspace(&cont.workspace)?;
        if let Some(id) = &cont.run_id {
            workspace::validate_run_id(id)?;
        }
        let with_file = cont.with_file.as_deref();
        let message = compose(cont.message, with_file, &self.options.cwd)?;
        let run_id = |ws: &Path| -> Result<String, RunnerError> {
            match &cont.run_id {
                Some(id) => Ok(id.clone()),
                None => Ok(runs::latest(ws)
                    .ok_or_else(|| RunnerError::NoRun(ws.to_path_buf()))?
                    .run_id),
            }
        };
        if let Some(iteration) = cont.fork_at {
            let source = RunDir::new(&ws, &run_id(&ws)?);
            return self.fork(&ws, &source, iteration, message);
        }

        // The workspace is locked before its latest run is looked up, so that the run acted on is the
        // latest one while this process works.
        let clock = self.options.clock;
        let open_error = |source| RunnerError::Open {
            source: Box::new(source),
            workspace: ws.clone(),
        };
        let workspace_lock = runs::lock_workspace(&ws, clock, CONTINUE).map_err(open_error)?;
        let opened = runs::open_locked(&ws, &run_id(&ws)?, workspace_lock, clock, CONTINUE)
            .map_err(open_error)?;
        if let Some(repair) = &opened.repaired {
            self.host.notice(Notice::Repaired {
                run_id: &opened.run.run_id,
                repair,
                now: opened.status,
            });
        }
        let decision =
            resume::decide(&opened, message.as_deref(), Caller::Continue).map_err(|source| {
                RunnerError::Refused {
                    source,
                    workspace: ws.clone(),
                }
            })?;
        let message = resume::prepare(&opened, &decision)?;
        let response = crate::engine::response_path(&opened.run);
        self.host.notice(Notice::Continuing {
            decision: &decision,
            response: &response,
        });
        let answer = decision.answer();
        self.resume(&ws, opened, message, answer)
    }

    /// The workspace `continue` names, which must hold runs.
    pub(super) fn continue_workspace(
        &mut self,
        target: &WorkspaceRef,
    ) -> Result<PathBuf, RunnerError> {
        let ws = match target {
            WorkspaceRef::Dir(dir) => self.options.cwd.join(dir),
            WorkspaceRef::Last => match self
                .options
                .last_workspace_record
                .as_deref()
                .and_then(runs::last_workspace)
            {
                None => return Err(RunnerError::NoLastWorkspace),
                Some(ws) if !ws.is_dir() => return Err(RunnerError::LastWorkspaceGone(ws)),
                Some(ws) => ws,
            },
        };
        if !ws.join(".delta").is_dir() {
            return Err(RunnerError::NoRun(ws));
        }
        let ws = ws.canonicalize().unwrap_or(ws);
        if *target == WorkspaceRef::Last {
            let record = (self.options.last_workspace_record.as_ref())
                .map(|f| f.display().to_string())
                .unwrap_or_else(|| "~/.delta/LAST_WORKSPACE".into());
            self.host.notice(Notice::UsingLastWorkspace {
                workspace: &ws,
                record,
            });
        }
        Ok(ws)
    }

    /// Forks `source` at `iteration` into a new run of the workspace and runs it with `message`.
    fn fork(
        self,
        ws: &Path,
        source: &RunDir,
        iteration: usize,
        message: Option<String>,
    ) -> Result<Finished, RunnerError> {
        if !source.metadata().is_file() {
            return Err(RunnerError::NoRun(ws.to_path_buf()));
        }
        let clock = self.options.clock;
        let now = clock.now();
        let mut new_id = workspace::new_run_id(now, &self.options.ids);
        while RunDir::new(ws, &new_id).root.exists() {
            new_id = workspace::new_run_id(now, &self.options.ids);
        }
        let session =
            session::fork(source, iteration, &new_id, clock, CONTINUE).map_err(|source| {
                RunnerError::Fork {
                    source: Box::new(source),
                    workspace: ws.to_path_buf(),
                }
            })?;
        self.host.notice(Notice::Forked {
            new_id: &new_id,
            from: &source.run_id,
            iteration,
        });
        self.pick_up(ws, session, (message, None), None)
    }
}

/// The message with the content of `file` added below it.
/// A relative `file` is read from `cwd`.
fn compose(
    message: Option<String>,
    file: Option<&Path>,
    cwd: &Path,
) -> Result<Option<String>, RunnerError> {
    let Some(file) = file else { return Ok(message) };
    let content =
        std::fs::read_to_string(cwd.join(file)).map_err(|source| RunnerError::ReadFile {
            path: file.to_path_buf(),
            source,
        })?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let block = format!("--- {name} ---\n{}", content.trim_end());
    Ok(Some(match message {
        Some(m) if !m.trim().is_empty() => format!("{m}\n\n{block}"),
        _ => block,
    }))
}
