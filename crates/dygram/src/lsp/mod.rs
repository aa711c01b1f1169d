//! `dygram lsp`: a language server (the Language Server Protocol over a connection, stdio for the
//! CLI), so that any editor with an LSP client shows dygram's errors and warnings as you type.
//!
//! Documents are kept as the editor sends them (incremental changes); each change is compiled
//! again, imports read from disk relative to the document, and its diagnostics published. A
//! handler that panics is reported to the editor (`window/logMessage`) and the server goes on.
//! Requests are answered from the document's text as it is now: the outline, hover, completion and
//! semantic tokens, all of which read a document with errors as far as it can be read.

pub mod complete;
pub mod diagnostics;
pub mod hover;
pub mod symbols;
pub mod text;
pub mod tokens;

use std::collections::HashMap;
use std::path::PathBuf;

use lsp_server::{Connection, ErrorCode, Message, Notification, Request, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, LogMessage,
    Notification as _, PublishDiagnostics,
};
use lsp_types::request::{
    Completion, DocumentSymbolRequest, HoverRequest, Request as _, SemanticTokensFullRequest,
};
use lsp_types::{
    CompletionOptions, CompletionResponse, DidChangeTextDocumentParams, DidCloseTextDocumentParams,
    DidOpenTextDocumentParams, DocumentSymbolResponse, LogMessageParams, MessageType,
    PublishDiagnosticsParams, SemanticTokensFullOptions, SemanticTokensOptions,
    SemanticTokensResult, ServerCapabilities, TextDocumentSyncCapability, TextDocumentSyncKind,
    Uri,
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
        // `@` annotations, `.` qualified names and template paths, `<` types, `>` the end of an
        // arrow, `{` a template's `{{`. Not space: it would ask at every word of every title and
        // prompt, and the editors ask anyway as a name is typed.
        completion_provider: Some(CompletionOptions {
            trigger_characters: Some(["@", ".", "<", ">", "{"].map(String::from).to_vec()),
            ..CompletionOptions::default()
        }),
        semantic_tokens_provider: Some(
            SemanticTokensOptions {
                legend: tokens::legend(),
                range: Some(false),
                full: Some(SemanticTokensFullOptions::Bool(true)),
                ..SemanticTokensOptions::default()
            }
            .into(),
        ),
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

/// `content` parsed as an editor has it, often unfinished: the blocks it leaves open are closed
/// after its end (so every span is still the text's own), and what they hold stays in the tree.
pub fn parse_open(content: &str) -> crate::syntax::Parsed {
    use crate::syntax::lexer::{TokenKind, lex};
    let (tokens, _) = lex(content);
    let open = tokens.iter().fold(0usize, |depth, t| match t.kind {
        TokenKind::LBrace => depth + 1,
        TokenKind::RBrace => depth.saturating_sub(1),
        _ => depth,
    });
    if open == 0 {
        return crate::syntax::parse(content);
    }
    let mut closed = String::with_capacity(content.len() + 1 + open);
    closed.push_str(content);
    closed.push('\n');
    closed.extend(std::iter::repeat_n('}', open));
    crate::syntax::parse(&closed)
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
            Completion::METHOD => self.answer::<Completion>(request, |server, p| {
                let at = p.text_document_position;
                let doc = server.documents.get(&at.text_document.uri)?;
                Some(CompletionResponse::Array(complete::complete(
                    &doc.text,
                    at.position,
                )))
            }),
            SemanticTokensFullRequest::METHOD => {
                self.answer::<SemanticTokensFullRequest>(request, |server, p| {
                    let doc = server.documents.get(&p.text_document.uri)?;
                    Some(SemanticTokensResult::Tokens(tokens::tokens(&doc.text)))
                })
            }
            _ => unknown_request(&request),
        }
    }

    /// Answers `request` of kind `R` with `handle`, or refuses parameters that are not `R`'s.
    fn answer<R: lsp_types::request::Request>(
        &self,
        request: Request,
        handle: impl FnOnce(&Self, R::Params) -> R::Result,
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
    fn an_unclosed_block_keeps_what_it_holds() {
        let text = "Process p {\n  Task a;\n  State b {\n";
        let parsed = parse_open(text);
        let [crate::syntax::ast::Item::Node(p)] = parsed.program.items.as_slice() else {
            panic!("{:?}", parsed.program.items)
        };
        assert_eq!(p.items.len(), 2);
        assert!(crate::syntax::parse(text).program.items.is_empty());
    }

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
