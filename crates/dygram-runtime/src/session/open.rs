//! [`Session::open`]: the execution of a call, found or created, locked.

use super::call::{
    CallError, CallRequest, CompiledMachine, Host, Notice, Opening, Refusal, Session,
};
use super::manual::ManualInput;
use super::{ClientConfig, Executions, Found, Metadata, NewId, OfMachine, Opened, sources};
use crate::executor::{ExecutionEvent, Executor, NextUnit, Options};
use crate::state::Status;

/// The command the locks and set-aside folders name.
const COMMAND: &str = "dygram execute -i";

pub(super) fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

pub(super) fn rfc3339(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// The machine compiled once per call, with its hash and the sources' fingerprint.
struct Compiled {
    machine: serde_json::Value,
    hash: String,
    fingerprint: String,
    files: Vec<String>,
}

/// What one opening knows and compiles at most once.
struct Opener<'a, H: Host> {
    request: &'a CallRequest,
    store: &'a Executions,
    host: &'a mut H,
    input: &'a mut ManualInput,
    compiled: Option<Compiled>,
    /// Without an id: the executions of the call's machine file.
    of_machine: OfMachine,
}

type Opens<E> = Result<Option<Session>, CallError<E>>;

impl Session {
    /// Finds the execution of a call: `request.id`, else the most recent one of its machine file
    /// (unless `force`), else a new one; locked, repaired, and its answer source set from the
    /// call's flags. Input given to the first call of a new execution is checked (and read)
    /// before anything is created. Without an id, other running executions of the file are
    /// named in a notice ([`Notice::SeveralActive`]).
    pub fn open<H: Host>(
        request: CallRequest,
        store: &Executions,
        host: &mut H,
        input: &mut ManualInput,
    ) -> Result<Opening, CallError<H::Error>> {
        if let Some(id) = &request.id {
            super::check_id(id)?;
        }
        let of_machine = match &request.id {
            Some(_) => OfMachine::default(),
            None => store.of_machine(request.machine_file.as_deref()),
        };
        let mut opener = Opener {
            request: &request,
            store,
            host,
            input,
            compiled: None,
            of_machine,
        };
        let Some(mut session) = opener.open_or_create()? else {
            return Ok(Opening::Invalid);
        };
        let compiled = opener.compiled.take();
        let active = std::mem::take(&mut opener.of_machine.active);
        let host = opener.host;
        session.meta.client_config =
            sources::client_config(&request.sources, Some(&session.meta.client_config), &*host);
        session.meta.mode = sources::mode_of(&session.meta.client_config).into();
        let (id, config) = (&session.id, &session.meta.client_config);
        host.notice(if session.started {
            Notice::Started { id, config }
        } else {
            Notice::Resumed { id, config }
        });
        let others: Vec<String> = active.into_iter().filter(|a| a != id).collect();
        if !others.is_empty() {
            host.notice(Notice::SeveralActive {
                machine_file: request.machine_file.as_deref(),
                id,
                others: &others,
            });
        }
        if let Some(c) = compiled {
            session.meta.source_files = c.files;
            session.meta.source_fingerprint = Some(c.fingerprint);
        }
        session.request = request;
        Ok(Opening::Ready(Box::new(session)))
    }
}

impl<H: Host> Opener<'_, H> {
    /// Compiles the machine once; `None` when it has errors (shown by the host).
    fn compile(&mut self) -> Option<&Compiled> {
        if self.compiled.is_none() {
            let CompiledMachine { machine, files } = self.host.compile()?;
            self.compiled = Some(Compiled {
                hash: super::machine_hash(&machine),
                fingerprint: super::source_fingerprint(&self.request.machine_text, &files),
                machine,
                files,
            });
        }
        self.compiled.as_ref()
    }

    /// `--id`, else the most recent execution of the machine file (unless `--force`), else a new
    /// one. `None` when the machine has errors.
    fn open_or_create(&mut self) -> Opens<H::Error> {
        let request = self.request;
        let mut id = request.id.clone().or_else(|| {
            if request.force {
                None
            } else {
                self.of_machine.latest.clone()
            }
        });
        if request.force
            && let Some(existing) = &id
            && let Some(aside) = self
                .store
                .replace(existing, "dygram execute -i --force", now())?
        {
            self.host.notice(Notice::StartedOver {
                previous: existing,
                aside: &aside,
            });
        }
        let mut source = None;
        if let Some(existing) = id.clone().filter(|_| !request.force) {
            match self.store.open_or_set_aside(&existing, COMMAND, now())? {
                Found::Opened(opened) => return self.resume(existing, *opened),
                Found::SetAside(restart) => {
                    self.host.notice(Notice::Corrupted {
                        reason: &restart.reason,
                        folder: &restart.folder,
                    });
                    let flags = &request.sources;
                    if restart.source.is_none() && flags.playback.is_none() && !flags.queue {
                        let now = sources::client_config(flags, None, &*self.host);
                        self.host.notice(Notice::SourceLost {
                            id: &existing,
                            now: &now,
                        });
                    }
                    source = restart.source;
                    if request.id.is_none() {
                        id = None;
                    }
                }
                // Without --id, the last execution went away meanwhile: a new one.
                Found::Missing if request.id.is_none() => id = None,
                Found::Missing => {}
            }
        }
        self.create(id, source)
    }

    /// Resumes an opened execution after checking that its machine did not change.
    fn resume(&mut self, id: String, opened: Opened) -> Opens<H::Error> {
        if !opened.repaired.is_empty() {
            self.host.notice(Notice::Repaired {
                id: &id,
                files: &opened.repaired,
            });
        }
        let meta = opened.metadata;
        let unchanged = meta.source_fingerprint.as_deref()
            == Some(
                super::source_fingerprint(&self.request.machine_text, &meta.source_files).as_str(),
            );
        if !unchanged && self.compile().is_none() {
            return Ok(None);
        }
        let saved = opened.state.machine_hash.clone();
        let current = self
            .compiled
            .as_ref()
            .map_or(saved.as_str(), |c| c.hash.as_str());
        if saved != current {
            return Err(CallError::MachineChanged {
                current: current.to_string(),
                id,
                saved,
            });
        }
        let last_call = opened.state.last_call.clone();
        let state = match opened.state.restore(&id, opened.machine) {
            Ok(state) => state,
            Err(error) => return Err(CallError::Restore { id, error }),
        };
        Ok(Some(Session {
            id,
            _lock: opened.lock,
            state: Some(state),
            meta,
            hash: saved,
            started: false,
            last_call,
            request: CallRequest::default(),
        }))
    }

    /// Creates a new execution (atomically: whole or not at all).
    fn create(&mut self, id: Option<String>, source: Option<ClientConfig>) -> Opens<H::Error> {
        let config = sources::client_config(&self.request.sources, source.as_ref(), &*self.host);
        let Some(c) = self.compile() else {
            return Ok(None);
        };
        let state = Executor::start(c.machine.clone(), None, Options::default())
            .map_err(CallError::NoStart)?
            .into_state();
        let (hash, files, fingerprint) = (c.hash.clone(), c.files.clone(), c.fingerprint.clone());
        // Input must be the answer to the request the first call reaches: checked (and the answer
        // read) before anything is created.
        if self.input.given() {
            if config.kind != llm::SourceKind::Manual {
                return Err(CallError::Refused(Refusal::Source(Box::new(config))));
            }
            let mut dry = Executor::resume(state.clone(), None, Options::default());
            match dry.next_unit() {
                Ok(NextUnit::Request(_)) => {
                    if let Some(answer) = self.input.answer()? {
                        check_answer(&dry, &answer)?;
                    }
                }
                _ => return Err(refused_without_request(&dry.take_events())),
            }
        }
        let t = rfc3339(now());
        let meta = Metadata {
            id: String::new(),
            machine_file: self.request.machine_file.clone(),
            machine_source: if self.request.machine_file.is_some() {
                "file"
            } else {
                "stdin"
            }
            .into(),
            started_at: t.clone(),
            last_executed_at: t,
            turn_count: 0,
            step_count: 0,
            status: Status::InProgress,
            mode: sources::mode_of(&config).into(),
            client_config: config,
            pending_request: None,
            source_files: files,
            source_fingerprint: Some(fingerprint),
        };
        let choice = match id {
            Some(id) => NewId::Given(id),
            None => NewId::Generated(now()),
        };
        let (id, lock) = self
            .store
            .create(choice, &state, &hash, meta.clone(), COMMAND)?;
        Ok(Some(Session {
            meta: Metadata {
                id: id.clone(),
                ..meta
            },
            id,
            _lock: lock,
            state: Some(state),
            hash,
            started: true,
            last_call: None,
            request: CallRequest::default(),
        }))
    }
}

/// Input for a call that does not reach a request for an answer.
pub(super) fn refused_without_request<E>(events: &[ExecutionEvent]) -> CallError<E> {
    let did = events
        .iter()
        .find_map(|e| match e {
            ExecutionEvent::Transition { from, to, .. } => Some(format!(" ({from} -> {to})")),
            ExecutionEvent::Completed { node, .. } => Some(format!(" (completing at {node})")),
            _ => None,
        })
        .unwrap_or_default();
    CallError::Refused(Refusal::NoRequest { did })
}

/// Refuses a manual answer that calls a tool the node cannot run (a misspelled name), or that
/// would fail the execution for good (no tool call while every transition is closed): the person
/// can answer again, with the example's kind of answer.
pub(super) fn check_answer<E>(
    executor: &Executor<'_>,
    answer: &llm::ChatResponse,
) -> Result<(), CallError<E>> {
    let unknown = executor.unknown_tools(answer);
    if !unknown.is_empty() {
        return Err(CallError::UnknownTools {
            node: turn_node(executor),
            tools: unknown,
            example: executor.example_answer(),
        });
    }
    let Some(error) = executor.answer_would_fail(answer) else {
        return Ok(());
    };
    Err(CallError::WouldFail {
        node: turn_node(executor),
        error,
        example: executor.example_answer(),
    })
}

/// The node of the open conversation (empty when none is open).
pub(super) fn turn_node(executor: &Executor<'_>) -> String {
    executor
        .state()
        .turn_state
        .as_ref()
        .map(|t| t.node_name.clone())
        .unwrap_or_default()
}
