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

use super::{LspError, log_error};

/// What the loop asks of the server.
pub(super) trait Handler {
    /// Answers a request.
    fn request(&mut self, request: Request) -> Response;
    /// Handles a notification.
    fn notification(&mut self, notification: Notification) -> Handled;
    /// The diagnostics of the `changed` documents and of those importing them.
    fn diagnose_changed(&mut self, changed: &[Uri]) -> Vec<Notification>;
    /// What the last request had to tell the editor (sent before its answer).
    fn take_outbox(&mut self) -> Vec<Notification>;
}

/// `work`, or, if it panics, the editor's log line saying that `what` failed.
fn guarded<T>(what: &str, work: impl FnOnce() -> T) -> Result<T, Notification> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).map_err(|_| {
        log_error(&format!(
            "dygram lsp: {what} failed unexpectedly (a bug; the server goes on)"
        ))
    })
}

/// Runs the loop until `exit`.
pub(super) fn run(connection: &Connection, server: &mut impl Handler) -> Result<(), LspError> {
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
struct Loop<'a, H> {
    server: &'a mut H,
    connection: &'a Connection,
    /// `shutdown` was answered: only `exit` is accepted now.
    shut_down: bool,
    plan: Plan,
    /// Documents changed since diagnostics were last published.
    changed: Vec<Uri>,
}

impl<H: Handler> Loop<'_, H> {
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
        for message in self.server.take_outbox() {
            self.send(Message::Notification(message))?;
        }
        self.send(Message::Response(answer))
    }

    fn notification(&mut self, notification: Notification) -> Result<(), LspError> {
        let what = format!("handling {}", notification.method);
        let server = &mut *self.server;
        match guarded(&what, || server.notification(notification)) {
            Ok(handled) => {
                for message in handled.publish {
                    self.send(Message::Notification(message))?;
                }
                self.changed.extend(handled.changed);
                Ok(())
            }
            Err(report) => self.send(Message::Notification(report)),
        }
    }

    /// Nothing waits: a fresh plan, and the diagnostics of what changed.
    fn settle(&mut self) -> Result<(), LspError> {
        self.plan = Plan::default();
        if self.changed.is_empty() {
            return Ok(());
        }
        let changed = std::mem::take(&mut self.changed);
        let server = &mut *self.server;
        match guarded("checking the changed documents", || {
            server.diagnose_changed(&changed)
        }) {
            Ok(published) => {
                for message in published {
                    self.send(Message::Notification(message))?;
                }
                Ok(())
            }
            Err(report) => self.send(Message::Notification(report)),
        }
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
    fn answer(&self, seq: u64, request: Request, server: &mut impl Handler) -> Response {
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
        let (id, what) = (request.id.clone(), format!("handling {}", request.method));
        guarded(&what, || server.request(request)).unwrap_or_else(|report| {
            let message = report.params["message"].as_str().unwrap_or_default();
            refuse(id, ErrorCode::InternalError, message)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A server whose handlers panic on the method `boom`, and whose checks panic once asked
    /// about the document `untitled:boom`.
    #[derive(Default)]
    struct Fragile {
        notified: Vec<String>,
    }

    impl Handler for Fragile {
        fn request(&mut self, request: Request) -> Response {
            assert_ne!(request.method, "boom", "a handler that fails");
            Response::new_ok(request.id, self.notified.clone())
        }

        fn notification(&mut self, notification: Notification) -> Handled {
            assert_ne!(notification.method, "boom", "a handler that fails");
            self.notified.push(notification.method.clone());
            let uri = document_of(&notification.params).and_then(|u| u.parse().ok());
            Handled {
                publish: Vec::new(),
                changed: uri.into_iter().collect(),
            }
        }

        fn diagnose_changed(&mut self, changed: &[Uri]) -> Vec<Notification> {
            assert!(changed.iter().all(|u| u.as_str() != "untitled:boom"));
            Vec::new()
        }

        fn take_outbox(&mut self) -> Vec<Notification> {
            Vec::new()
        }
    }

    fn request(id: i32, method: &str) -> Message {
        Message::Request(Request::new(id.into(), method.to_string(), json!({})))
    }

    fn notification(method: &str, params: serde_json::Value) -> Message {
        Message::Notification(Notification::new(method.to_string(), params))
    }

    #[test]
    fn a_panicking_handler_is_reported_and_the_server_goes_on() {
        let (server_side, editor) = Connection::memory();
        let serving = std::thread::spawn(move || run(&server_side, &mut Fragile::default()));
        let send = |m: Message| editor.sender.send(m).unwrap();
        let next = || {
            editor
                .receiver
                .recv_timeout(std::time::Duration::from_secs(20))
                .unwrap()
        };
        send(request(1, "boom"));
        let Message::Response(failed) = next() else {
            panic!("a response first")
        };
        let error = failed.response_result.unwrap_err();
        assert_eq!(error.code, ErrorCode::InternalError as i32);
        assert!(error.message.contains("handling boom failed"), "{error:?}");
        send(notification("boom", json!({})));
        let Message::Notification(logged) = next() else {
            panic!("a log message")
        };
        assert_eq!(logged.method, "window/logMessage");
        assert!(
            logged.params["message"]
                .as_str()
                .unwrap()
                .contains("handling boom")
        );
        // A check that fails is reported the same way.
        send(notification(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": "untitled:boom"}}),
        ));
        let Message::Notification(logged) = next() else {
            panic!("a log message")
        };
        assert!(
            logged.params["message"]
                .as_str()
                .unwrap()
                .contains("checking the changed documents"),
            "{logged:?}"
        );
        // Still answering, with what it was told meanwhile.
        send(request(2, "status"));
        let Message::Response(answered) = next() else {
            panic!("a response")
        };
        assert_eq!(
            answered.response_result.unwrap(),
            json!(["textDocument/didOpen"])
        );
        send(request(3, "shutdown"));
        next();
        send(notification("exit", serde_json::Value::Null));
        assert!(serving.join().unwrap().is_ok());
    }
}
