//! `dygram lsp`: a language server (the Language Server Protocol over a connection, stdio for the
//! CLI), so that any editor with an LSP client shows dygram's errors and warnings as you type.
//!
//! Documents are kept as the editor sends them (incremental changes); each change is compiled
//! again, imports read from disk relative to the document, and its diagnostics published. A
//! handler that panics is reported to the editor (`window/logMessage`) and the server goes on.
//!
//! Besides diagnostics: the outline, hover, formatting with the `.dy` printer ([`mod@format`]: only
//! when nothing is lost, else the editor is told why) and quick fixes for "did you mean"
//! suggestions ([`actions`]).

pub mod actions;
pub mod diagnostics;
pub mod format;
pub mod hover;
pub mod symbols;
pub mod text;

use std::collections::HashMap;
use std::path::PathBuf;

use lsp_server::{Connection, ErrorCode, Message, Notification, Request, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, LogMessage,
    Notification as _, PublishDiagnostics, ShowMessage,
};
use lsp_types::request::{
    CodeActionRequest, DocumentSymbolRequest, Formatting, HoverRequest, Request as _,
};
use lsp_types::{
    CodeActionKind, CodeActionOptions, CodeActionProviderCapability, DidChangeTextDocumentParams,
    DidCloseTextDocumentParams, DidOpenTextDocumentParams, DocumentSymbolResponse,
    LogMessageParams, MessageType, PublishDiagnosticsParams, ServerCapabilities, ShowMessageParams,
    TextDocumentSyncCapability, TextDocumentSyncKind, Uri,
};

use text::Document;

/// Why the server stopped other than by the editor's `shutdown` and `exit`.
#[derive(Debug, thiserror::Error)]
pub enum LspError {
    /// The editor broke the protocol, or the connection failed.
    #[error("the editor's connection failed: {0}")]
    Protocol(#[from] lsp_server::ProtocolError),
    /// The editor went away while the server was answering.
    #[error("the editor's connection closed")]
    Closed,
}

/// What the server can do.
pub fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Kind(
            TextDocumentSyncKind::INCREMENTAL,
        )),
        document_symbol_provider: Some(lsp_types::OneOf::Left(true)),
        hover_provider: Some(lsp_types::HoverProviderCapability::Simple(true)),
        document_formatting_provider: Some(lsp_types::OneOf::Left(true)),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
            ..CodeActionOptions::default()
        })),
        ..ServerCapabilities::default()
    }
}

/// Serves `connection` until the editor shuts the server down (`shutdown`, then `exit`).
pub fn serve(connection: &Connection) -> Result<(), LspError> {
    let capabilities = serde_json::to_value(capabilities()).unwrap_or_default();
    connection.initialize(capabilities)?;
    let mut server = Server::default();
    let send = |message: Message| {
        connection
            .sender
            .send(message)
            .map_err(|_| LspError::Closed)
    };
    for message in &connection.receiver {
        match message {
            Message::Request(request) => {
                if connection.handle_shutdown(&request)? {
                    return Ok(());
                }
                let (id, method) = (request.id.clone(), request.method.clone());
                let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    server.request(request)
                }));
                // What the request had to tell the editor goes before its answer.
                for message in std::mem::take(&mut server.outbox) {
                    send(Message::Notification(message))?;
                }
                send(Message::Response(answered.unwrap_or_else(|_| {
                    Response::new_err(
                        id,
                        ErrorCode::InternalError as i32,
                        format!("dygram lsp: handling {method} failed unexpectedly (a bug)"),
                    )
                })))?;
            }
            Message::Notification(notification) => {
                let method = notification.method.clone();
                let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    server.notification(notification)
                }));
                match handled {
                    Ok(out) => {
                        for message in out {
                            send(Message::Notification(message))?;
                        }
                    }
                    Err(_) => send(Message::Notification(log_error(&format!(
                        "dygram lsp: handling {method} failed unexpectedly (a bug; the server goes on)"
                    ))))?,
                }
            }
            Message::Response(_) => {}
        }
    }
    Ok(())
}

/// The answer to a request whose parameters are not what its method takes.
fn invalid_params(id: lsp_server::RequestId) -> Response {
    Response::new_err(
        id,
        ErrorCode::InvalidParams as i32,
        "the parameters are not those of this request".to_string(),
    )
}

/// The answer to a request the server does not know.
fn unknown_request(request: &Request) -> Response {
    Response::new_err(
        request.id.clone(),
        ErrorCode::MethodNotFound as i32,
        format!("dygram lsp does not handle {}", request.method),
    )
}

fn log_error(text: &str) -> Notification {
    Notification::new(
        LogMessage::METHOD.to_string(),
        LogMessageParams {
            typ: MessageType::ERROR,
            message: text.to_string(),
        },
    )
}

/// The open documents.
#[derive(Debug, Default)]
struct Server {
    documents: HashMap<Uri, Document>,
    /// Notifications a request has for the editor, sent before its answer.
    outbox: Vec<Notification>,
    /// By document, why formatting last left it as is, once shown to the user: the same reason
    /// again (format on save) goes to the log instead of showing again.
    refusals: HashMap<Uri, String>,
}

impl Server {
    /// Answers a request.
    fn request(&mut self, request: Request) -> Response {
        match request.method.as_str() {
            DocumentSymbolRequest::METHOD => {
                self.answer::<DocumentSymbolRequest>(request, |server, p| {
                    let outline = server
                        .documents
                        .get(&p.text_document.uri)
                        .map(|doc| symbols::outline(&doc.text))
                        .unwrap_or_default();
                    Some(DocumentSymbolResponse::Nested(outline))
                })
            }
            HoverRequest::METHOD => self.answer::<HoverRequest>(request, |server, p| {
                let at = p.text_document_position_params;
                server
                    .documents
                    .get(&at.text_document.uri)
                    .and_then(|doc| hover::hover(&doc.text, at.position))
            }),
            Formatting::METHOD => self.answer::<Formatting>(request, |server, p| {
                let uri = p.text_document.uri;
                let doc = server.documents.get(&uri)?;
                match format::format(&doc.text, &p.options) {
                    Ok(edits) => {
                        server.refusals.remove(&uri);
                        Some(edits)
                    }
                    Err(refusal) => {
                        server.refused(uri, refusal.to_string());
                        None
                    }
                }
            }),
            CodeActionRequest::METHOD => self.answer::<CodeActionRequest>(request, |server, p| {
                let uri = &p.text_document.uri;
                let doc = server.documents.get(uri)?;
                let path = file_path(uri);
                Some(actions::actions(uri, path.as_deref(), &doc.text, &p))
            }),
            _ => unknown_request(&request),
        }
    }

    /// Tells the editor why formatting left `uri` as it is: shown to the user, or logged when that
    /// reason was the last one shown for it.
    fn refused(&mut self, uri: Uri, why: String) {
        if self.refusals.get(&uri) == Some(&why) {
            self.outbox.push(Notification::new(
                LogMessage::METHOD.to_string(),
                LogMessageParams {
                    typ: MessageType::INFO,
                    message: why,
                },
            ));
            return;
        }
        self.outbox.push(Notification::new(
            ShowMessage::METHOD.to_string(),
            ShowMessageParams {
                typ: MessageType::WARNING,
                message: why.clone(),
            },
        ));
        self.refusals.insert(uri, why);
    }

    /// Answers `request` of kind `R` with `handle`, or refuses parameters that are not `R`'s.
    fn answer<R: lsp_types::request::Request>(
        &mut self,
        request: Request,
        handle: impl FnOnce(&mut Self, R::Params) -> R::Result,
    ) -> Response {
        match serde_json::from_value::<R::Params>(request.params) {
            Ok(params) => Response::new_ok(request.id, handle(self, params)),
            Err(_) => invalid_params(request.id),
        }
    }

    /// Handles a notification; returns what to send the editor.
    fn notification(&mut self, notification: Notification) -> Vec<Notification> {
        let params = notification.params;
        let uri = match notification.method.as_str() {
            DidOpenTextDocument::METHOD => {
                let Ok(p) = serde_json::from_value::<DidOpenTextDocumentParams>(params) else {
                    return Vec::new();
                };
                let doc = p.text_document;
                self.documents
                    .insert(doc.uri.clone(), Document::new(doc.text, doc.version));
                doc.uri
            }
            DidChangeTextDocument::METHOD => {
                let Ok(p) = serde_json::from_value::<DidChangeTextDocumentParams>(params) else {
                    return Vec::new();
                };
                let doc = self
                    .documents
                    .entry(p.text_document.uri.clone())
                    .or_default();
                doc.apply(p.content_changes, p.text_document.version);
                p.text_document.uri
            }
            DidCloseTextDocument::METHOD => {
                let Ok(p) = serde_json::from_value::<DidCloseTextDocumentParams>(params) else {
                    return Vec::new();
                };
                self.documents.remove(&p.text_document.uri);
                self.refusals.remove(&p.text_document.uri);
                // A closed document keeps no diagnostics.
                return vec![publish(p.text_document.uri, Vec::new(), None)];
            }
            _ => return Vec::new(),
        };
        self.diagnose(uri).into_iter().collect()
    }

    /// The diagnostics of the open document `uri`.
    fn diagnose(&self, uri: Uri) -> Option<Notification> {
        let doc = self.documents.get(&uri)?;
        let path = file_path(&uri);
        let found = diagnostics::check(&uri, path.as_deref(), &doc.text);
        Some(publish(uri, found, Some(doc.version)))
    }
}

fn publish(
    uri: Uri,
    diagnostics: Vec<lsp_types::Diagnostic>,
    version: Option<i32>,
) -> Notification {
    Notification::new(
        PublishDiagnostics::METHOD.to_string(),
        PublishDiagnosticsParams {
            uri,
            diagnostics,
            version,
        },
    )
}

/// The file a `file:` URI names (its `%XX` escapes decoded).
fn file_path(uri: &Uri) -> Option<PathBuf> {
    let rest = uri.as_str().strip_prefix("file://")?;
    let bytes = rest.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(high), Some(low)) => {
                decoded.push(u8::try_from(high * 16 + low).unwrap_or(b'?'));
                i += 3;
            }
            (b, _, _) => {
                decoded.push(b);
                i += 1;
            }
        }
    }
    let path = PathBuf::from(String::from_utf8(decoded).ok()?);
    path.is_absolute().then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_name_their_files() {
        let uri: Uri = "file:///home/me/my%20machines/a.dy".parse().unwrap();
        assert_eq!(
            file_path(&uri),
            Some(PathBuf::from("/home/me/my machines/a.dy"))
        );
        let untitled: Uri = "untitled:Untitled-1".parse().unwrap();
        assert_eq!(file_path(&untitled), None);
    }
}
