//! The analysis' answers ([`dygram_analysis`], on byte offsets and plain types) as the protocol's,
//! through the document's line index.

use dygram_analysis::complete::{Completion, CompletionKind};
use dygram_analysis::format::{Change, Indent};
use dygram_analysis::hover::Hover as Described;
use dygram_analysis::outline::{Symbol, SymbolKind as Kind};
use lsp_types::{
    CompletionItem, CompletionItemKind, CompletionTextEdit, DocumentSymbol, FormattingOptions,
    Hover, HoverContents, MarkupContent, MarkupKind, SymbolKind, TextEdit,
};

use super::text::LineIndex;

/// A completion as the protocol's item: its edit replaces the word being written.
pub fn completion(lines: &LineIndex<'_>, item: Completion) -> CompletionItem {
    let range = lines.range(item.replace.start, item.replace.end);
    CompletionItem {
        kind: Some(completion_kind(item.kind)),
        detail: Some(item.detail),
        sort_text: Some(item.sort_text),
        filter_text: Some(item.label.clone()),
        text_edit: Some(CompletionTextEdit::Edit(TextEdit::new(
            range,
            item.label.clone(),
        ))),
        label: item.label,
        ..CompletionItem::default()
    }
}

fn completion_kind(kind: CompletionKind) -> CompletionItemKind {
    match kind {
        CompletionKind::Keyword => CompletionItemKind::KEYWORD,
        CompletionKind::Class => CompletionItemKind::CLASS,
        CompletionKind::Struct => CompletionItemKind::STRUCT,
        CompletionKind::Function => CompletionItemKind::FUNCTION,
        CompletionKind::Method => CompletionItemKind::METHOD,
        CompletionKind::EnumMember => CompletionItemKind::ENUM_MEMBER,
        CompletionKind::Field => CompletionItemKind::FIELD,
        CompletionKind::Property => CompletionItemKind::PROPERTY,
        CompletionKind::Variable => CompletionItemKind::VARIABLE,
        CompletionKind::Module => CompletionItemKind::MODULE,
        CompletionKind::Reference => CompletionItemKind::REFERENCE,
    }
}

/// A hover as Markdown over its range.
pub fn hover(lines: &LineIndex<'_>, described: Described) -> Hover {
    Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: described.markdown,
        }),
        range: Some(lines.span(described.span)),
    }
}

/// An outline entry, with its children.
pub fn symbol(lines: &LineIndex<'_>, symbol: Symbol) -> DocumentSymbol {
    let kind = match symbol.kind {
        Kind::Machine => SymbolKind::MODULE,
        Kind::Context => SymbolKind::STRUCT,
        Kind::Task => SymbolKind::FUNCTION,
        Kind::State => SymbolKind::ENUM_MEMBER,
        Kind::Tool => SymbolKind::METHOD,
        Kind::Node => SymbolKind::OBJECT,
        Kind::Attribute => SymbolKind::FIELD,
    };
    let children: Vec<DocumentSymbol> = symbol
        .children
        .into_iter()
        .map(|child| self::symbol(lines, child))
        .collect();
    #[allow(deprecated)]
    DocumentSymbol {
        name: symbol.name,
        detail: symbol.detail,
        kind,
        tags: None,
        deprecated: None,
        range: lines.span(symbol.span),
        selection_range: lines.span(symbol.selection),
        children: (!children.is_empty()).then_some(children),
    }
}

/// The editor's indentation: `tabSize` spaces, or a tab without `insertSpaces` (its other
/// formatting options are not used).
pub fn indent(options: &FormattingOptions) -> Indent {
    if options.insert_spaces {
        Indent::Spaces(options.tab_size)
    } else {
        Indent::Tab
    }
}

/// A change as an edit.
pub fn edit(lines: &LineIndex<'_>, change: Change) -> TextEdit {
    TextEdit::new(
        lines.range(change.replace.start, change.replace.end),
        change.text,
    )
}
