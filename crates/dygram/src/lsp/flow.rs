//! The server's message loop. Messages are queued as they arrive, and everything waiting is
//! looked at before the next one is handled, so that work the editor no longer needs is skipped.
//!
//! * A request the editor cancelled (`$/cancelRequest`) before it was reached is answered
//!   `RequestCancelled`; one about a document that a later waiting change edits is answered
//!   `ContentModified` (its answer would describe text that is gone), as the protocol asks.
//! * Diagnostics are computed when nothing waits, once for each document changed meanwhile, and
//!   for the open documents that import a changed one.
//! * A handler that panics is answered `InternalError` (a request) or reported in the editor's log
//!   (a notification); the server goes on.
//! * `shutdown` is answered, then only `exit` is accepted.

use std::collections::{HashMap, HashSet, VecDeque};

use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::Uri;

use super::{LspError, Server, log_error};

/// Runs the loop until `exit`.
pub(super) fn run(connection: &Connection, server: &mut Server) -> Result<(), LspError> {
    // The connection hands messages over one at a time; a thread moves them to a queue as they
    // arrive, so what waits while the server works can be seen together.
    let (queue, waiting) = std::sync::mpsc::channel();
    let incoming = connection.receiver.clone();
    std::thread::spawn(move || {
        for message in incoming {
            if queue.send(message).is_err() {
                return;
            }
        }
    });
    let mut state = Loop {
        server,
        connection,
        shut_down: false,
        plan: Plan::default(),
        changed: Vec::new(),
    };
    let mut pending: VecDeque<(u64, Message)> = VecDeque::new();
    let mut arrived = 0u64;
    loop {
        if pending.is_empty() {
            let Ok(message) = waiting.recv() else {
                return Ok(());
            };
            pending.push_back((arrived, message));
            arrived += 1;
        }
        // Everything that came meanwhile is known before the next message is handled.
        for message in waiting.try_iter() {
            pending.push_back((arrived, message));
            arrived += 1;
        }
        let plan = &mut state.plan;
        for (seq, message) in pending.iter().skip(plan.seen) {
            plan.note(*seq, message);
        }
        plan.seen = pending.len();
        let Some((seq, message)) = pending.pop_front() else {
            continue;
        };
        plan.seen -= 1;
        if state.handle(seq, message)? == Step::Exit {
            return Ok(());
        }
        // Once nothing waits: diagnostics for what changed, and a fresh plan.
        if pending.is_empty() {
            state.settle()?;
        }
    }
}

/// Whether the loop goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Continue,
    Exit,
}

/// The loop's state between messages.
struct Loop<'a> {
    server: &'a mut Server,
    connection: &'a Connection,
    /// `shutdown` was answered: only `exit` is accepted now.
    shut_down: bool,
    plan: Plan,
    /// Documents changed since diagnostics were last published.
    changed: Vec<Uri>,
}

impl Loop<'_> {
    fn send(&self, message: Message) -> Result<(), LspError> {
        self.connection
            .sender
            .send(message)
            .map_err(|_| LspError::Closed)
    }

    /// Handles the message that arrived `seq`-th.
    fn handle(&mut self, seq: u64, message: Message) -> Result<Step, LspError> {
        match message {
            Message::Request(request) => self.request(seq, request)?,
            Message::Notification(notification) if notification.method == "exit" => {
                return if self.shut_down {
                    Ok(Step::Exit)
                } else {
                    Err(LspError::ExitBeforeShutdown)
                };
            }
            Message::Notification(notification) => self.notification(notification)?,
            Message::Response(_) => {}
        }
        Ok(Step::Continue)
    }

    fn request(&mut self, seq: u64, request: Request) -> Result<(), LspError> {
        let answer = if self.shut_down {
            refuse(
                request.id,
                ErrorCode::InvalidRequest,
                "the server is shut down",
            )
        } else if request.method == "shutdown" {
            self.shut_down = true;
            Response::new_ok(request.id, ())
        } else {
            self.plan.answer(seq, request, self.server)
        };
        // What the request had to tell the editor goes before its answer.
        for message in std::mem::take(&mut self.server.outbox) {
            self.send(Message::Notification(message))?;
        }
        self.send(Message::Response(answer))
    }

    fn notification(&mut self, notification: Notification) -> Result<(), LspError> {
        let method = notification.method.clone();
        let server = &mut *self.server;
        let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            server.notification(notification)
        }));
        match handled {
            Ok(handled) => {
                for message in handled.publish {
                    self.send(Message::Notification(message))?;
                }
                self.changed.extend(handled.changed);
                Ok(())
            }
            Err(_) => self.send(Message::Notification(log_error(&format!(
                "dygram lsp: handling {method} failed unexpectedly (a bug; the server goes on)"
            )))),
        }
    }

    /// Nothing waits: a fresh plan, and the diagnostics of what changed.
    fn settle(&mut self) -> Result<(), LspError> {
        self.plan = Plan::default();
        if self.changed.is_empty() {
            return Ok(());
        }
        let changed = std::mem::take(&mut self.changed);
        let connection = self.connection;
        publish_changed(self.server, &changed, &|message| {
            connection
                .sender
                .send(message)
                .map_err(|_| LspError::Closed)
        })
    }
}

/// Sends the diagnostics of the changed documents and their importers.
fn publish_changed(
    server: &mut Server,
    changed: &[Uri],
    send: &impl Fn(Message) -> Result<(), LspError>,
) -> Result<(), LspError> {
    let published = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        server.diagnose_changed(changed)
    }));
    match published {
        Ok(out) => {
            for message in out {
                send(Message::Notification(message))?;
            }
            Ok(())
        }
        Err(_) => send(Message::Notification(log_error(
            "dygram lsp: checking the changed documents failed unexpectedly (a bug; the server goes on)",
        ))),
    }
}

/// What the waiting messages say about the requests among them.
#[derive(Debug, Default)]
struct Plan {
    /// How many waiting messages have been noted.
    seen: usize,
    /// Requests the editor cancelled.
    cancelled: HashSet<RequestId>,
    /// For each document, the arrival number of its last change.
    last_change: HashMap<String, u64>,
}

impl Plan {
    /// Takes note of the message that arrived `seq`-th.
    fn note(&mut self, seq: u64, message: &Message) {
        let Message::Notification(n) = message else {
            return;
        };
        match n.method.as_str() {
            "$/cancelRequest" => {
                let id = &n.params["id"];
                if let Some(number) = id.as_i64().and_then(|v| i32::try_from(v).ok()) {
                    self.cancelled.insert(RequestId::from(number));
                } else if let Some(text) = id.as_str() {
                    self.cancelled.insert(RequestId::from(text.to_string()));
                }
            }
            "textDocument/didChange" | "textDocument/didClose" => {
                if let Some(uri) = document_of(&n.params) {
                    self.last_change.insert(uri, seq);
                }
            }
            _ => {}
        }
    }

    /// The answer to the request that arrived `seq`-th.
    fn answer(&self, seq: u64, request: Request, server: &mut Server) -> Response {
        if self.cancelled.contains(&request.id) {
            return refuse(
                request.id,
                ErrorCode::RequestCanceled,
                "cancelled by the editor",
            );
        }
        let superseded = document_of(&request.params)
            .and_then(|uri| self.last_change.get(&uri))
            .is_some_and(|&change| change > seq);
        if superseded {
            return refuse(
                request.id,
                ErrorCode::ContentModified,
                "the document changed after this request",
            );
        }
        let (id, method) = (request.id.clone(), request.method.clone());
        let answered =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| server.request(request)));
        answered.unwrap_or_else(|_| {
            refuse(
                id,
                ErrorCode::InternalError,
                &format!("dygram lsp: handling {method} failed unexpectedly (a bug)"),
            )
        })
    }
}

/// The document a message's parameters are about.
fn document_of(params: &serde_json::Value) -> Option<String> {
    params["textDocument"]["uri"].as_str().map(str::to_string)
}

fn refuse(id: RequestId, code: ErrorCode, message: &str) -> Response {
    Response::new_err(id, code as i32, message.to_string())
}

/// What handling a notification gives.
#[derive(Debug, Default)]
pub(super) struct Handled {
    /// To send the editor now.
    pub publish: Vec<Notification>,
    /// Documents (or files) whose text changed: they and their importers are checked again.
    pub changed: Vec<Uri>,
}
