//! Agent tools: a tool of kind `agent:` runs another delta agent on the task the model gives it, as
//! a child run in a workspace of its own under this run's folder (`agents/<call>/`). The child is
//! an ordinary run, driven by the caller's [`SubAgents`] (the runner): journaled, resumable, shown
//! by `delta show`. Its final answer is the call's result. A child that waits for an answer makes
//! this run wait with the child's question; the answer given to this run goes to the child. A run
//! stopped while its child works (interrupted, killed) leaves the call open: the next process
//! drives the same child on from where it stopped, so nothing the child did is done twice.

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::act::{Begin, Requested};
use super::{Engine, EngineError, Observer, RunOutcome};
use crate::agent::Tool;
use crate::events::Event;
use crate::process;

/// What a child run is asked.
#[derive(Debug)]
pub struct ChildCall<'a> {
    /// The child agent's folder.
    pub agent: PathBuf,
    /// The child's workspace: `<run folder>/agents/<call>`.
    pub workspace: PathBuf,
    /// Its task (for a child not started yet).
    pub task: &'a str,
    /// The answer to the child's question, for a child that waits for one: the id of the
    /// question it answers (the child's `interaction/request.json`), and the text. An answer to
    /// another question than the one the child waits on is not given.
    pub answer: Option<(String, String)>,
}

/// Where a child run stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum ChildStop {
    /// It completed with this final answer.
    Completed(String),
    /// It failed, or could not run: why.
    Failed(String),
    /// It waits for the answer to its question (its `interaction/request.json`: the prompt, how
    /// to answer, whether the answer is secret, and the request's id).
    Waiting(Box<super::InteractionRequest>),
    /// It was interrupted (this run's interrupt): it goes on with this run.
    Interrupted,
}

/// Runs the children of a run's agent tools (the runner does).
pub trait SubAgents {
    /// Starts the child of `call`, or drives it on from where it stopped, until it stops again.
    fn drive(&mut self, call: ChildCall<'_>, observer: &mut dyn Observer) -> ChildStop;
}

/// The folder under a run's folder that holds the workspaces of its children.
pub const AGENTS_DIR: &str = "agents";

impl Engine<'_> {
    /// Runs call `id` of agent tool `tool`: `ACTION_REQUEST`, the `pre_tool_exec` hook, the child run,
    /// then its answer as the result (or this run waits, or stops, with it).
    pub(super) fn run_agent_tool(
        &mut self,
        id: &str,
        name: &str,
        tool: &Tool,
        args: &Map<String, Value>,
    ) -> Result<Option<RunOutcome>, EngineError> {
        let Some(task) = task_of(args) else {
            self.error_result(
                id,
                format!("Error: {name} needs a task: what the agent should do"),
            )?;
            return Ok(None);
        };
        let resolved = format!("{} {task}", tool.display_command());
        let call = match self.begin_call(id, name, args, &resolved)? {
            Begin::Run(call) => call,
            Begin::Done(outcome) => return Ok(outcome.map(|o| *o)),
        };
        let stop = self.drive_child(call.id, tool, &task, None);
        self.conclude_child(call, tool, stop)
    }

    /// Settles call `id` of agent tool `name` that an earlier process started: its child is driven
    /// on, given the answer waiting in `interaction/response.txt` for this call, if any.
    pub(super) fn resume_agent_tool(
        &mut self,
        id: &str,
        name: &str,
        args: &Value,
    ) -> Result<Option<RunOutcome>, EngineError> {
        let Some(tool) = self.setup.agent.tool(name).cloned() else {
            return Ok(None);
        };
        let empty = Map::new();
        let args = args.as_object().unwrap_or(&empty);
        let task = task_of(args).unwrap_or_default();
        // The child's question is answered by the person's answer given to this process, never by
        // a file on disk: the child may be asking for an approval, which only a person gives.
        let asked = self
            .pending_for(id, false)
            .map(|(request, _)| request.request_id);
        let answer = match asked {
            Some(request_id) => self.setup.answer.take().map(|text| (request_id, text)),
            None => None,
        };
        let stop = self.drive_child(id, &tool, &task, answer.clone());
        if answer.is_some() && stop != ChildStop::Interrupted {
            // The child has journaled the answer as its own: it answers nothing more.
            self.remove_interaction_files()?;
        }
        let resolved = format!("{} {task}", tool.display_command());
        let call = Requested {
            id,
            name,
            args,
            resolved: &resolved,
            exec_ref: self.execution_ref(id),
        };
        self.conclude_child(call, &tool, stop)
    }

    /// The child of call `id`, driven until it stops.
    fn drive_child(
        &mut self,
        id: &str,
        tool: &Tool,
        task: &str,
        answer: Option<(String, String)>,
    ) -> ChildStop {
        let workspace = self.child_workspace_of(id);
        // The run folder is the tools' to write: a link put where the child's folder goes (or
        // above it) would take the child, and its sandbox's workspace, elsewhere.
        if let Err(why) = within_run(&self.setup.run.root, &workspace) {
            return ChildStop::Failed(why);
        }
        let Some(children) = self.children.as_deref_mut() else {
            return ChildStop::Failed(
                "agent tools run only where delta's runner runs the loop".into(),
            );
        };
        let call = ChildCall {
            agent: self
                .setup
                .agent
                .dir
                .join(tool.template.as_deref().unwrap_or_default()),
            workspace,
            task,
            answer,
        };
        children.drive(call, &mut self.observer)
    }

    /// Journals what the child's stop means for call `call`.
    fn conclude_child(
        &mut self,
        call: Requested<'_>,
        tool: &Tool,
        stop: ChildStop,
    ) -> Result<Option<RunOutcome>, EngineError> {
        match stop {
            ChildStop::Completed(answer) => self.finish_call(
                call,
                &process::Outcome::printed(&answer),
                tool.timeout,
                None,
            ),
            ChildStop::Failed(why) => {
                let out = process::Outcome {
                    stderr: format!("the agent did not complete: {why}").into_bytes(),
                    exit_code: 1,
                    ..process::Outcome::default()
                };
                self.finish_call(call, &out, tool.timeout, None)
            }
            ChildStop::Waiting(asked) => {
                let request = self.child_question(call.id, *asked);
                Ok(Some(self.pause(request)?))
            }
            ChildStop::Interrupted => Ok(Some(self.interrupt_run()?)),
        }
    }
}

/// The task a call gives (a non-empty `task` string).
fn task_of(args: &Map<String, Value>) -> Option<String> {
    args.get("task")
        .and_then(Value::as_str)
        .filter(|t| !t.trim().is_empty())
        .map(str::to_string)
}

impl Engine<'_> {
    /// The workspace of the child of call `id`: named after the call and the journal line of its
    /// `ACTION_REQUEST`, which is unique in the run (call ids repeat where a provider leaves them
    /// out) and the same when the call is settled by a later process.
    fn child_workspace_of(&self, id: &str) -> PathBuf {
        let seq = self
            .typed
            .iter()
            .zip(&self.seqs)
            .rev()
            .find(|(e, _)| matches!(e, Event::ActionRequest { action_id, .. } if action_id == id))
            .map_or(0, |(_, seq)| *seq);
        child_workspace(&self.setup.run.root, id, seq)
    }
}

/// Makes `workspace` (when missing) and checks that it is a folder inside `run_root` once every
/// link on the way is followed.
fn within_run(run_root: &std::path::Path, workspace: &std::path::Path) -> Result<(), String> {
    let refused = |e: &dyn std::fmt::Display| {
        format!(
            "the agent's folder {} cannot be used: {e}",
            workspace.display()
        )
    };
    let root = run_root.canonicalize().map_err(|e| refused(&e))?;
    let outside = |real: &std::path::Path| {
        refused(&format!(
            "it leads to {} (through a link), outside its run's folder",
            real.display()
        ))
    };
    // Nothing is made before the way to it is known to stay in the run's folder.
    let existing = workspace
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(run_root);
    let real = existing.canonicalize().map_err(|e| refused(&e))?;
    if !real.starts_with(&root) {
        return Err(outside(&real));
    }
    std::fs::create_dir_all(workspace).map_err(|e| refused(&e))?;
    let real = workspace.canonicalize().map_err(|e| refused(&e))?;
    if real.starts_with(&root) && real.is_dir() {
        Ok(())
    } else {
        Err(outside(&real))
    }
}

/// The workspace of the child of call `id`, asked for on journal line `seq`, of the run whose
/// folder is `run_root`.
pub fn child_workspace(run_root: &std::path::Path, id: &str, seq: u64) -> PathBuf {
    run_root
        .join(AGENTS_DIR)
        .join(format!("{}-{seq}", super::act::safe_dir_name(id)))
}
