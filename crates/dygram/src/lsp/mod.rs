//! `dygram lsp`: a language server (the Language Server Protocol over a connection, stdio for the
//! CLI), so that any editor with an LSP client shows dygram's errors and warnings as you type.
//!
//! Documents are kept as the editor sends them (incremental changes); changed documents are
//! compiled again, imports read from the open documents or else from disk relative to the
//! document, and their diagnostics published, with those of the documents importing them. The
//! message loop (`flow.rs`) skips cancelled and overtaken requests, and reports a handler that
//! panics to the editor (`window/logMessage`); the server goes on. Navigation (definition,
//! references, rename) reads the name index ([`dygram_analysis::names`]) across importers
//! ([`navigate`]). Requests are answered from the document's text as it is now by
//! [`dygram_analysis`] (on byte offsets; converted here through the document's line index): the
//! outline, hover, completion and semantic tokens, all of which read a document with errors as far
//! as it can be read; formatting uses the `.dy` printer ([`dygram_analysis::format`]: only when
//! nothing is lost, else the editor is told why) and quick fixes apply "did you mean" suggestions
//! ([`actions`]). The messages are read and
//! written by [`transport`], which holds the editor's input to limits and answers what is no
//! message with an error.

pub mod actions;
mod convert;
pub mod diagnostics;
mod flow;
pub mod navigate;
mod requests;
pub mod text;
pub mod tokens;
pub mod transport;

use std::collections::HashMap;
use std::path::PathBuf;

use lsp_server::{Connection, ErrorCode, Notification, Request, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidChangeWatchedFiles, DidCloseTextDocument, DidOpenTextDocument,
    DidSaveTextDocument, LogMessage, Notification as _, PublishDiagnostics,
};
use lsp_types::{
    CodeActionKind, CodeActionOptions, CodeActionProviderCapability, CompletionOptions,
    DidChangeTextDocumentParams, DidChangeWatchedFilesParams, DidCloseTextDocumentParams,
    DidOpenTextDocumentParams, DidSaveTextDocumentParams, LogMessageParams, MessageType,
    PublishDiagnosticsParams, SemanticTokensFullOptions, SemanticTokensOptions, ServerCapabilities,
    TextDocumentSyncCapability, TextDocumentSyncKind, Uri,
};

use dygram_runtime::files::{Disk, canonical};
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
    /// The editor sent `exit` without `shutdown` first.
    #[error("the editor asked the server to exit without shutting it down first")]
    ExitBeforeShutdown,
}

/// What the server can do.
pub fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Options(
            lsp_types::TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::INCREMENTAL),
                // Saving a file re-checks the documents that import it.
                save: Some(lsp_types::TextDocumentSyncSaveOptions::Supported(true)),
                ..lsp_types::TextDocumentSyncOptions::default()
            },
        )),
        document_symbol_provider: Some(lsp_types::OneOf::Left(true)),
        hover_provider: Some(lsp_types::HoverProviderCapability::Simple(true)),
        definition_provider: Some(lsp_types::OneOf::Left(true)),
        references_provider: Some(lsp_types::OneOf::Left(true)),
        rename_provider: Some(lsp_types::OneOf::Right(lsp_types::RenameOptions {
            prepare_provider: Some(true),
            work_done_progress_options: lsp_types::WorkDoneProgressOptions::default(),
        })),
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
    let initialize = connection.initialize(capabilities)?;
    let mut server = Server {
        root: workspace_root(&initialize),
        ..Server::default()
    };
    flow::run(connection, &mut server)
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

impl flow::Handler for Server {
    fn request(&mut self, request: Request) -> Response {
        Server::request(self, request)
    }

    fn notification(&mut self, notification: Notification) -> flow::Handled {
        Server::notification(self, notification)
    }

    fn diagnose_changed(&mut self, changed: &[Uri]) -> Vec<Notification> {
        Server::diagnose_changed(self, changed)
    }

    fn take_outbox(&mut self) -> Vec<Notification> {
        std::mem::take(&mut self.outbox)
    }
}

/// The folder the editor works in, from its `initialize` parameters.
fn workspace_root(initialize: &serde_json::Value) -> Option<PathBuf> {
    let params = serde_json::from_value::<lsp_types::InitializeParams>(initialize.clone()).ok()?;
    let folder = params.workspace_folders.and_then(|f| f.into_iter().next());
    #[allow(deprecated)] // Older editors send only `rootUri`.
    let uri = folder.map(|f| f.uri).or(params.root_uri)?;
    file_path(&uri)
}

/// The open documents and the workspace's folder.
#[derive(Debug, Default)]
struct Server {
    documents: HashMap<Uri, Document>,
    root: Option<PathBuf>,
    /// For each open document, the canonical paths of the files it imports (as last checked).
    imports: HashMap<Uri, Vec<PathBuf>>,
    /// The canonical path of each open document that is a file.
    paths: HashMap<Uri, PathBuf>,
    /// Notifications a request has for the editor, sent before its answer.
    outbox: Vec<Notification>,
    /// By document, why formatting last left it as is, once shown to the user: the same reason
    /// again (format on save) goes to the log instead of showing again.
    refusals: HashMap<Uri, String>,
}

impl Server {
    /// Handles a notification.
    fn notification(&mut self, notification: Notification) -> flow::Handled {
        let params = notification.params;
        let mut handled = flow::Handled::default();
        match notification.method.as_str() {
            DidOpenTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<DidOpenTextDocumentParams>(params) {
                    let doc = p.text_document;
                    self.documents
                        .insert(doc.uri.clone(), Document::new(doc.text, doc.version));
                    self.locate(&doc.uri);
                    handled.changed.push(doc.uri);
                }
            }
            DidChangeTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<DidChangeTextDocumentParams>(params) {
                    let doc = self
                        .documents
                        .entry(p.text_document.uri.clone())
                        .or_default();
                    doc.apply(p.content_changes, p.text_document.version);
                    self.locate(&p.text_document.uri);
                    handled.changed.push(p.text_document.uri);
                }
            }
            DidCloseTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<DidCloseTextDocumentParams>(params) {
                    let uri = p.text_document.uri;
                    self.documents.remove(&uri);
                    self.imports.remove(&uri);
                    self.paths.remove(&uri);
                    // A closed document keeps no diagnostics; its importers read the disk again.
                    handled.publish.push(publish(uri.clone(), Vec::new(), None));
                    handled.changed.push(uri);
                }
            }
            DidSaveTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<DidSaveTextDocumentParams>(params) {
                    handled.changed.push(p.text_document.uri);
                }
            }
            DidChangeWatchedFiles::METHOD => {
                if let Ok(p) = serde_json::from_value::<DidChangeWatchedFilesParams>(params) {
                    handled.changed.extend(p.changes.into_iter().map(|c| c.uri));
                }
            }
            _ => {}
        }
        handled
    }

    /// Notes where the open document `uri` is on disk (once: a path is resolved when first seen).
    fn locate(&mut self, uri: &Uri) {
        if !self.paths.contains_key(uri)
            && let Some(path) = file_path(uri)
        {
            self.paths.insert(uri.clone(), canonical(&path));
        }
    }

    /// The texts of the open documents other than `except`, by canonical path: what an import
    /// reads instead of the disk.
    fn open_texts(&self, except: &Uri) -> OpenFiles<'_> {
        let open = self
            .paths
            .iter()
            .filter(|(uri, _)| *uri != except)
            .filter_map(|(uri, path)| {
                Some((path.as_path(), self.documents.get(uri)?.text.as_str()))
            })
            .collect();
        OpenFiles { open }
    }

    /// The diagnostics of the documents in `changed` that are open, and of the open documents
    /// importing any of them.
    fn diagnose_changed(&mut self, changed: &[Uri]) -> Vec<Notification> {
        let paths: Vec<PathBuf> = changed
            .iter()
            .filter_map(file_path)
            .map(|p| canonical(&p))
            .collect();
        let mut wanted: Vec<Uri> = Vec::new();
        for uri in changed {
            if self.documents.contains_key(uri) && !wanted.contains(uri) {
                wanted.push(uri.clone());
            }
        }
        for (uri, imported) in &self.imports {
            if imported.iter().any(|p| paths.contains(p)) && !wanted.contains(uri) {
                wanted.push(uri.clone());
            }
        }
        wanted
            .into_iter()
            .filter_map(|uri| self.diagnose(uri))
            .collect()
    }

    /// The diagnostics of the open document `uri` (its imports read from the open documents
    /// first, then the disk).
    fn diagnose(&mut self, uri: Uri) -> Option<Notification> {
        let doc = self.documents.get(&uri)?;
        let path = file_path(&uri);
        let open = self.open_texts(&uri);
        let checked = diagnostics::check(&uri, path.as_deref(), &doc.text, &open);
        let version = doc.version;
        self.imports.insert(uri.clone(), checked.imports);
        Some(publish(uri, checked.diagnostics, Some(version)))
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

/// The `file:` URI of `path` (absolute), its unsafe characters escaped.
fn file_uri(path: &std::path::Path) -> Option<Uri> {
    let text = path.to_str()?;
    let mut out = String::from("file://");
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out.parse().ok()
}

/// The open documents over the disk: how a document's imports are read, an open one by its
/// unsaved text.
struct OpenFiles<'a> {
    /// Open documents' texts by canonical path.
    open: HashMap<&'a std::path::Path, &'a str>,
}

impl dygram_core::imports::Files for OpenFiles<'_> {
    fn read(&self, path: &std::path::Path) -> std::io::Result<String> {
        match self.open.get(canonical(path).as_path()) {
            Some(text) => Ok((*text).to_string()),
            None => Disk.read(path),
        }
    }

    fn is_file(&self, path: &std::path::Path) -> bool {
        Disk.is_file(path)
    }

    fn canonical(&self, path: &std::path::Path) -> PathBuf {
        canonical(path)
    }
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
        let back = file_uri(std::path::Path::new("/home/me/my machines/é.dy")).unwrap();
        assert_eq!(back.as_str(), "file:///home/me/my%20machines/%C3%A9.dy");
        assert_eq!(
            file_path(&back),
            Some(PathBuf::from("/home/me/my machines/é.dy"))
        );
        let untitled: Uri = "untitled:Untitled-1".parse().unwrap();
        assert_eq!(file_path(&untitled), None);
    }
}
