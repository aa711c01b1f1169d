//! The requests the server answers: one method each, dispatched by [`Server::request`].

use lsp_server::{ErrorCode, Notification, Request, Response};
use lsp_types::notification::{LogMessage, Notification as _, ShowMessage};
use lsp_types::request::{
    CodeActionRequest, Completion, DocumentSymbolRequest, Formatting, GotoDefinition, HoverRequest,
    PrepareRenameRequest, References, Rename, Request as _, SemanticTokensFullRequest,
};
use lsp_types::{
    CodeActionParams, CodeActionResponse, CompletionParams, CompletionResponse,
    DocumentFormattingParams, DocumentSymbolParams, DocumentSymbolResponse, GotoDefinitionParams,
    GotoDefinitionResponse, Hover, HoverParams, Location, LogMessageParams, MessageType,
    PrepareRenameResponse, ReferenceParams, RenameParams, SemanticTokensParams,
    SemanticTokensResult, ShowMessageParams, TextDocumentPositionParams, TextEdit, Uri,
    WorkspaceEdit,
};

use dygram_analysis::{complete, format, hover, outline};

use super::{
    Server, actions, convert, file_path, invalid_params, navigate, tokens, unknown_request,
};

impl Server {
    /// Answers a request.
    pub(super) fn request(&mut self, request: Request) -> Response {
        match request.method.as_str() {
            DocumentSymbolRequest::METHOD => {
                self.answer::<DocumentSymbolRequest>(request, Self::outline)
            }
            HoverRequest::METHOD => self.answer::<HoverRequest>(request, Self::hover),
            GotoDefinition::METHOD => self.answer::<GotoDefinition>(request, Self::definition),
            References::METHOD => self.answer::<References>(request, Self::references),
            PrepareRenameRequest::METHOD => {
                self.answer::<PrepareRenameRequest>(request, Self::prepare_rename)
            }
            Rename::METHOD => self.try_answer::<Rename, _>(request, Self::rename),
            Completion::METHOD => self.answer::<Completion>(request, Self::complete),
            SemanticTokensFullRequest::METHOD => {
                self.answer::<SemanticTokensFullRequest>(request, Self::tokens)
            }
            Formatting::METHOD => self.answer::<Formatting>(request, Self::format),
            CodeActionRequest::METHOD => self.answer::<CodeActionRequest>(request, Self::actions),
            _ => unknown_request(&request),
        }
    }

    fn outline(&mut self, p: DocumentSymbolParams) -> Option<DocumentSymbolResponse> {
        let symbols = self.documents.get(&p.text_document.uri).map(|doc| {
            let lines = doc.lines();
            outline::outline(&doc.text)
                .into_iter()
                .map(|s| convert::symbol(&lines, s))
                .collect()
        });
        Some(DocumentSymbolResponse::Nested(symbols.unwrap_or_default()))
    }

    fn hover(&mut self, p: HoverParams) -> Option<Hover> {
        let at: TextDocumentPositionParams = p.text_document_position_params;
        let doc = self.documents.get(&at.text_document.uri)?;
        let lines = doc.lines();
        let described = hover::hover(&doc.text, lines.offset(at.position))?;
        Some(convert::hover(&lines, described))
    }

    fn definition(&mut self, p: GotoDefinitionParams) -> Option<GotoDefinitionResponse> {
        let at = p.text_document_position_params;
        let found = self
            .workspace()
            .definition(&at.text_document.uri, at.position)?;
        Some(GotoDefinitionResponse::Scalar(found))
    }

    fn references(&mut self, p: ReferenceParams) -> Option<Vec<Location>> {
        let at = p.text_document_position;
        let declarations = p.context.include_declaration;
        Some(
            self.workspace()
                .references(&at.text_document.uri, at.position, declarations),
        )
    }

    fn prepare_rename(&mut self, p: TextDocumentPositionParams) -> Option<PrepareRenameResponse> {
        let range = self
            .workspace()
            .prepare_rename(&p.text_document.uri, p.position)?;
        Some(PrepareRenameResponse::Range(range))
    }

    fn rename(&mut self, p: RenameParams) -> Result<Option<WorkspaceEdit>, navigate::RenameError> {
        let at = p.text_document_position;
        let edit = self
            .workspace()
            .rename(&at.text_document.uri, at.position, &p.new_name)?;
        Ok(Some(edit))
    }

    fn complete(&mut self, p: CompletionParams) -> Option<CompletionResponse> {
        let at = p.text_document_position;
        let doc = self.documents.get(&at.text_document.uri)?;
        // A position past a line's or the text's end completes where it is clamped to, so the
        // items' edits stay inside the document.
        let lines = doc.lines();
        let items = complete::complete(&doc.text, lines.offset(at.position))
            .into_iter()
            .map(|item| convert::completion(&lines, item))
            .collect();
        Some(CompletionResponse::Array(items))
    }

    fn tokens(&mut self, p: SemanticTokensParams) -> Option<SemanticTokensResult> {
        let doc = self.documents.get(&p.text_document.uri)?;
        Some(SemanticTokensResult::Tokens(tokens::tokens(&doc.lines())))
    }

    fn format(&mut self, p: DocumentFormattingParams) -> Option<Vec<TextEdit>> {
        let uri = p.text_document.uri;
        let doc = self.documents.get(&uri)?;
        match format::format(&doc.text, convert::indent(&p.options)) {
            Ok(changes) => {
                self.refusals.remove(&uri);
                let lines = doc.lines();
                Some(
                    changes
                        .into_iter()
                        .map(|c| convert::edit(&lines, c))
                        .collect(),
                )
            }
            Err(refusal) => {
                self.refused(
                    uri,
                    format!("dygram: the document was not formatted: {refusal}"),
                );
                None
            }
        }
    }

    fn actions(&mut self, p: CodeActionParams) -> Option<CodeActionResponse> {
        let uri = &p.text_document.uri;
        let doc = self.documents.get(uri)?;
        let path = file_path(uri);
        let open = self.open_texts(uri);
        Some(actions::actions(uri, path.as_deref(), &doc.text, &open, &p))
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

    fn workspace(&self) -> navigate::Workspace<'_> {
        navigate::Workspace {
            open: &self.documents,
            paths: &self.paths,
            root: self.root.as_deref(),
        }
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

    /// Answers `request` of kind `R` with `handle`, whose refusal (a reason) is the editor's
    /// "invalid parameters" error.
    fn try_answer<R: lsp_types::request::Request, E: std::fmt::Display>(
        &mut self,
        request: Request,
        handle: impl FnOnce(&mut Self, R::Params) -> Result<R::Result, E>,
    ) -> Response {
        let id = request.id;
        match serde_json::from_value::<R::Params>(request.params) {
            Ok(params) => match handle(self, params) {
                Ok(result) => Response::new_ok(id, result),
                Err(refused) => {
                    Response::new_err(id, ErrorCode::InvalidParams as i32, refused.to_string())
                }
            },
            Err(_) => invalid_params(id),
        }
    }
}
