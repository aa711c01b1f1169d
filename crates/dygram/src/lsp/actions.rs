//! Quick fixes (`textDocument/codeAction`): a diagnostic with a fix ([`dygram_core::diagnostic::Suggestion`],
//! a "did you mean" name; [`dygram_analysis::fixes`]) becomes a `quickfix` action titled "Change to
//! `X`", preferred, whose edit replaces the misspelled name.
//!
//! The fix travels in the diagnostic's `data` ([`Data`]): the editor sends the diagnostics at the
//! cursor back with the request, and the actions are made from them. Each fix also carries the text
//! it replaces, and is offered only while the document still has that text there, so a fix made
//! for an older text is never applied to a newer one. An editor that does not send `data` back gets
//! the same fixes from the document's diagnostics computed again, those touching the asked range.

use std::collections::HashMap;
use std::path::Path;

use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeActionParams, Range, TextEdit, Uri,
    WorkspaceEdit,
};
use serde::{Deserialize, Serialize};

use super::{diagnostics, text};
use dygram_analysis::fixes::{quick_fixes, title};
use dygram_core::diagnostic::Suggestion;
use dygram_core::imports;

/// What a diagnostic with a fix carries in its `data`: `{"suggestion": {range, replaces,
/// replacement}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Data {
    /// The fix.
    pub suggestion: Fix,
}

/// A replacement in the document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fix {
    /// What to replace.
    pub range: Range,
    /// The text there when the diagnostic was made.
    pub replaces: String,
    /// What to put there.
    pub replacement: String,
}

impl Data {
    /// The data of a diagnostic of `content` with the fix `suggestion`.
    pub fn of(lines: &text::LineIndex<'_>, suggestion: &Suggestion) -> Self {
        let (start, end) = (suggestion.span.start as usize, suggestion.span.end as usize);
        Self {
            suggestion: Fix {
                range: lines.range(start, end),
                replaces: lines.text().get(start..end).unwrap_or_default().to_string(),
                replacement: suggestion.replacement.clone(),
            },
        }
    }

    /// As the JSON of `data`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The data of one of the server's diagnostics, if it has some.
    fn from_diagnostic(d: &lsp_types::Diagnostic) -> Option<Self> {
        if d.source.as_deref() != Some("dygram") {
            return None;
        }
        serde_json::from_value(d.data.clone()?).ok()
    }
}

/// The quick fixes for `params` in the document `uri` (at `path` on disk, if it is a file there)
/// whose text is `content` (its imports read through `files`, as for its diagnostics).
pub fn actions(
    uri: &Uri,
    path: Option<&Path>,
    content: &str,
    files: &dyn imports::Files,
    params: &CodeActionParams,
) -> Vec<CodeActionOrCommand> {
    if !wants_quick_fixes(params.context.only.as_deref()) {
        return Vec::new();
    }
    let sent = &params.context.diagnostics;
    let mut fixes: Vec<(lsp_types::Diagnostic, Fix)> = sent
        .iter()
        .filter_map(|d| Some((d.clone(), Data::from_diagnostic(d)?.suggestion)))
        .collect();
    if fixes.is_empty() {
        // The editor sent none with its data (some drop `data`): the fixes of the document's own
        // diagnostics where the actions are asked for, each linked to the editor's copy of its
        // diagnostic when it sent one.
        let checked = diagnostics::check(uri, path, content, files);
        let lines = text::LineIndex::new(content);
        let asked = lines.offset(params.range.start)..lines.offset(params.range.end);
        fixes = quick_fixes(content, &checked.found, asked)
            .into_iter()
            .filter_map(|fix| {
                let d = checked.diagnostics.get(fix.diagnostic)?.clone();
                let linked = sent
                    .iter()
                    .find(|s| s.range == d.range && s.message == d.message)
                    .cloned()
                    .unwrap_or(d);
                let replaces = content.get(fix.replace.clone())?.to_string();
                let range = lines.range(fix.replace.start, fix.replace.end);
                let replacement = fix.text;
                Some((
                    linked,
                    Fix {
                        range,
                        replaces,
                        replacement,
                    },
                ))
            })
            .collect();
    }
    let mut offered: Vec<(Range, String)> = Vec::new();
    let mut out = Vec::new();
    for (diagnostic, fix) in fixes {
        let start = text::offset(content, fix.range.start);
        let end = text::offset(content, fix.range.end);
        // A fix made for another text (the document changed since) is not offered.
        if content.get(start..end) != Some(fix.replaces.as_str()) {
            continue;
        }
        let key = (fix.range, fix.replacement.clone());
        if offered.contains(&key) {
            continue;
        }
        offered.push(key);
        out.push(CodeActionOrCommand::CodeAction(CodeAction {
            title: title(&fix.replacement),
            kind: Some(CodeActionKind::QUICKFIX),
            diagnostics: Some(vec![diagnostic]),
            edit: Some(WorkspaceEdit {
                changes: Some(HashMap::from([(
                    uri.clone(),
                    vec![TextEdit::new(fix.range, fix.replacement)],
                )])),
                ..WorkspaceEdit::default()
            }),
            is_preferred: Some(true),
            ..CodeAction::default()
        }));
    }
    out
}

/// Whether the kinds asked for (`only`; none: any) include quick fixes: `quickfix` itself or a
/// kind it belongs to (the empty kind).
fn wants_quick_fixes(only: Option<&[CodeActionKind]>) -> bool {
    only.is_none_or(|kinds| {
        kinds.iter().any(|k| {
            let k = k.as_str();
            k.is_empty() || k == CodeActionKind::QUICKFIX.as_str()
        })
    })
}

#[cfg(test)]
mod tests {
    use lsp_types::{CodeActionContext, Position, TextDocumentIdentifier};

    use super::*;

    const STRICT: &str =
        "machine \"M\" @StrictMode\nstate start;\nstate review;\nstart -> reveiw;\n";

    fn params(uri: &Uri, range: Range, sent: Vec<lsp_types::Diagnostic>) -> CodeActionParams {
        CodeActionParams {
            text_document: TextDocumentIdentifier::new(uri.clone()),
            range,
            context: CodeActionContext {
                diagnostics: sent,
                only: None,
                trigger_kind: None,
            },
            work_done_progress_params: Default::default(),
            partial_result_params: Default::default(),
        }
    }

    fn titles(actions: &[CodeActionOrCommand]) -> Vec<String> {
        actions
            .iter()
            .map(|a| match a {
                CodeActionOrCommand::CodeAction(a) => a.title.clone(),
                CodeActionOrCommand::Command(c) => c.title.clone(),
            })
            .collect()
    }

    #[test]
    fn fixes_come_from_the_data_sent_back_or_from_the_document() {
        let uri: Uri = "untitled:m".parse().unwrap();
        let published =
            diagnostics::check(&uri, None, STRICT, &dygram_core::imports::NoFiles).diagnostics;
        let typo = published
            .iter()
            .find(|d| d.message.starts_with("Reference to undefined state"))
            .unwrap()
            .clone();
        let data: Data = serde_json::from_value(typo.data.clone().unwrap()).unwrap();
        assert_eq!(data.suggestion.replaces, "reveiw");
        assert_eq!(data.suggestion.replacement, "review");
        let at = typo.range;
        let with_data = actions(
            &uri,
            None,
            STRICT,
            &dygram_core::imports::NoFiles,
            &params(&uri, at, vec![typo.clone()]),
        );
        assert_eq!(titles(&with_data), ["Change to `review`"]);
        // Without `data`, the same fix, from the document.
        let mut bare = typo.clone();
        bare.data = None;
        let recomputed = actions(
            &uri,
            None,
            STRICT,
            &dygram_core::imports::NoFiles,
            &params(&uri, at, vec![bare.clone()]),
        );
        assert_eq!(
            recomputed,
            with_data
                .iter()
                .map(|a| match a {
                    CodeActionOrCommand::CodeAction(a) => {
                        let mut a = a.clone();
                        a.diagnostics = Some(vec![bare.clone()]);
                        CodeActionOrCommand::CodeAction(a)
                    }
                    other => other.clone(),
                })
                .collect::<Vec<_>>()
        );
        // Elsewhere in the document, nothing.
        let elsewhere = Range::new(Position::new(1, 0), Position::new(1, 1));
        assert!(
            actions(
                &uri,
                None,
                STRICT,
                &dygram_core::imports::NoFiles,
                &params(&uri, elsewhere, Vec::new())
            )
            .is_empty()
        );
        // A fix for a text that has changed since is not offered.
        let changed = STRICT.replace("reveiw", "revxiw");
        assert!(
            actions(
                &uri,
                None,
                &changed,
                &dygram_core::imports::NoFiles,
                &params(&uri, at, vec![typo.clone()])
            )
            .is_empty()
        );
        // Only refactorings asked for: no quick fix.
        let mut only = params(&uri, at, vec![typo]);
        only.context.only = Some(vec![CodeActionKind::REFACTOR]);
        assert!(actions(&uri, None, STRICT, &dygram_core::imports::NoFiles, &only).is_empty());
    }
}
