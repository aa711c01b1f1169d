//! The children of agent tools ([`SubAgents`]): each an ordinary run of the child agent in its
//! workspace under the parent's run folder, driven by a runner made for it: the parent's host (its
//! answer source and notices), environment, approvals and interrupt, the parent's sandbox over the
//! child's own, no terminal (a question makes the parent wait).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use store::{Clock, IdSource};

use super::{Approvals, Continue, Host, NewRun, Options, Request, Runner, WorkspaceRef};
use crate::agent::{self, Agent};
use crate::engine::{ChildCall, ChildStop, InteractionRequest, Observer, SubAgents};
use crate::env::Env;
use crate::metadata::RunStatus;
use crate::transcript::{self, Outcome};

/// How deep agents may call agents.
pub const MAX_DEPTH: u32 = 4;

/// What a child run takes from its parent's runner.
pub(super) struct ChildRuns<'h> {
    host: &'h mut dyn Host,
    model: Option<String>,
    /// The parent's sandbox and workspace: a child is confined at least as much.
    parent_sandbox: Option<(crate::sandbox::SandboxPolicy, PathBuf)>,
    /// The parent is a run kept in a store (its children would not be).
    in_store: bool,
    approvals: Approvals,
    env: Env,
    cwd: PathBuf,
    clock: Clock,
    ids: IdSource,
    interrupt: Arc<AtomicBool>,
    depth: u32,
}

impl<'h> ChildRuns<'h> {
    /// The children of a run of `agent` (its sandbox applied) by a runner with `options`, whose
    /// environment with its `.env` files is `env`.
    pub(super) fn new(
        host: &'h mut dyn Host,
        options: &mut Options,
        agent: &Agent,
        (env, workspace): (&Env, &std::path::Path),
    ) -> Self {
        // The parent's own rules come first for its children, and its default is a floor.
        let mut approvals = options.approvals.clone();
        if let Some(permissions) = &agent.permissions {
            approvals.rules.extend(permissions.rules.iter().cloned());
            approvals.default_at_least = Some(
                approvals
                    .default_at_least
                    .map_or(permissions.default, |d| d.stricter(permissions.default)),
            );
        }
        Self {
            host,
            model: options.model.clone(),
            parent_sandbox: agent
                .sandbox
                .clone()
                .map(|policy| (policy, workspace.to_path_buf())),
            in_store: options.upstream.is_some(),
            approvals,
            env: env.clone(),
            cwd: options.cwd.clone(),
            clock: options.clock,
            ids: IdSource::seeded(options.ids.next_u64()),
            interrupt: Arc::clone(&options.interrupt),
            depth: options.depth + 1,
        }
    }

    /// The options of a child runner, in `workspace`, for an agent whose sandbox is `child`: held
    /// within the parent's, setting by setting (`readable:` and `writable:` included).
    fn options(
        &mut self,
        child: Option<crate::sandbox::SandboxPolicy>,
        workspace: &std::path::Path,
    ) -> Options {
        let confine_as = match (&self.parent_sandbox, child) {
            (Some((parent, parent_ws)), child) => Some(
                child
                    .unwrap_or_else(|| parent.clone())
                    .within(parent, parent_ws, workspace),
            ),
            (None, child) => child,
        };
        Options {
            max_iterations: None,
            pause_after: None,
            model: self.model.clone(),
            sandbox: None,
            network: None,
            confine_as,
            adopt: false,
            approvals: self.approvals.clone(),
            stream_text: false,
            interactive: false,
            env: self.env.clone(),
            cwd: self.cwd.clone(),
            clock: self.clock,
            ids: IdSource::seeded(self.ids.next_u64()),
            interrupt: Arc::clone(&self.interrupt),
            last_workspace_record: None,
            process_ends: false,
            upstream: None,
            depth: self.depth,
        }
    }
}

impl SubAgents for ChildRuns<'_> {
    fn drive(&mut self, call: ChildCall<'_>, observer: &mut dyn Observer) -> ChildStop {
        if self.depth > MAX_DEPTH {
            return ChildStop::Failed(format!(
                "agents call agents at most {MAX_DEPTH} deep (an agent that calls itself?)"
            ));
        }
        if self.in_store {
            return ChildStop::Failed(
                "agent tools do not run in runs kept in a store yet (the child's record would stay \
                 in this working copy)"
                    .into(),
            );
        }
        if self.host.records_or_replays() {
            return ChildStop::Failed(
                "agent tools do not run under --record or --playback yet (a child run would \
                 share its parent's recordings)"
                    .into(),
            );
        }
        let request = match request(&call) {
            Ok(request) => request,
            Err(stop) => return stop,
        };
        // A new child's agent is loaded already; one picked up again is loaded by its runner, and
        // here for its sandbox.
        let child_sandbox = match &request {
            Request::Run(new) => new.agent.sandbox.clone(),
            Request::Continue(_) => agent::load(&call.agent).ok().and_then(|a| a.sandbox),
        };
        let runner = Runner {
            options: self.options(child_sandbox, &call.workspace),
            observer,
            human: None,
            host: &mut *self.host,
            tools: None,
        };
        match runner.run(request) {
            Ok(finished) => stop_of(&finished.run, finished.outcome.status),
            Err(e) => ChildStop::Failed(e.message()),
        }
    }
}

/// What to ask of the child of `call`: to start, to go on, or nothing (where it stands already
/// answers: it ended, or waits with no answer given).
fn request(call: &ChildCall<'_>) -> Result<Request, ChildStop> {
    // Only a child that has no folder yet is started: a folder that cannot be read is no reason
    // to run its tools again.
    let latest = if call.workspace.join(".delta").is_dir() {
        crate::runs::list(&call.workspace)
            .map_err(|e| ChildStop::Failed(format!("cannot read the agent's run: {e}")))?
            .into_iter()
            .next()
    } else {
        None
    };
    let Some(latest) = latest else {
        let agent = agent::load(&call.agent)
            .map_err(|e| ChildStop::Failed(format!("cannot load the agent: {e}")))?;
        return Ok(Request::Run(Box::new(NewRun {
            agent,
            workspace: call.workspace.clone(),
            workspace_name: None,
            next_workspace: false,
            auto_resume: false,
            message: call.task.to_string(),
            run_id: None,
        })));
    };
    let go_on = |message: Option<String>| {
        Request::Continue(Continue {
            workspace: WorkspaceRef::Dir(call.workspace.clone()),
            run_id: Some(latest.run.run_id.clone()),
            message,
            with_file: None,
            fork_at: None,
        })
    };
    match latest.status {
        RunStatus::Completed | RunStatus::Failed => Err(stop_of(&latest.run, latest.status)),
        // The answer goes to the question it answers, once: a child that has taken it and asks
        // again waits for the next answer.
        RunStatus::WaitingForInput => match &call.answer {
            Some((asked, answer)) if Some(asked) == waiting_on(&latest.run).as_ref() => {
                Ok(go_on(Some(answer.clone())))
            }
            _ => Err(stop_of(&latest.run, latest.status)),
        },
        RunStatus::Running | RunStatus::Interrupted => Ok(go_on(None)),
    }
}

/// The question child run `run` waits on.
fn read_request(run: &crate::workspace::RunDir) -> Option<InteractionRequest> {
    store::atomic::read_json::<InteractionRequest>(&run.interaction().join("request.json")).ok()
}

/// The id of the question child run `run` waits on.
fn waiting_on(run: &crate::workspace::RunDir) -> Option<String> {
    read_request(run).map(|r| r.request_id)
}

/// What a child run that stopped with `status` tells its parent.
fn stop_of(run: &crate::workspace::RunDir, status: RunStatus) -> ChildStop {
    let outcome = transcript::outcome(run, status);
    match (status, outcome) {
        (RunStatus::Completed, Some(Outcome::Answer(answer))) => ChildStop::Completed(answer),
        (RunStatus::Completed, _) => {
            ChildStop::Completed("(the agent completed without a final answer)".into())
        }
        (RunStatus::WaitingForInput, outcome) => {
            let mut asked = read_request(run).unwrap_or(InteractionRequest {
                request_id: String::new(),
                timestamp: String::new(),
                prompt: String::new(),
                input_type: crate::engine::InputType::Text,
                sensitive: false,
                action_id: None,
                action_digest: None,
            });
            if let Some(Outcome::Question(q)) = outcome {
                asked.prompt = q;
            }
            if asked.prompt.is_empty() {
                asked.prompt = "(no question)".into();
            }
            ChildStop::Waiting(Box::new(asked))
        }
        (RunStatus::Failed, Some(Outcome::Error(e))) => ChildStop::Failed(e),
        (RunStatus::Failed, _) => ChildStop::Failed("the run failed".into()),
        (RunStatus::Interrupted | RunStatus::Running, _) => ChildStop::Interrupted,
    }
}
