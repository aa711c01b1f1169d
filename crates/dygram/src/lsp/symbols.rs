//! The outline of a document (`textDocument/documentSymbol`): its nodes, nested as they are
//! declared, with their attributes; read from the syntax tree, so a document with errors still has
//! the outline of what could be read.

use lsp_types::{DocumentSymbol, SymbolKind};

use super::text;
use dygram_syntax::ast;

/// The nested symbols of `content`.
pub fn outline(content: &str) -> Vec<DocumentSymbol> {
    let parsed = super::parse_open(content);
    let lines = &text::LineIndex::new(content);
    let mut symbols = Vec::new();
    if let Some(header) = &parsed.program.header {
        let mut machine = symbol(
            lines,
            header.title.value.clone(),
            Some("machine".to_string()),
            SymbolKind::MODULE,
            header.span,
            header.title.span,
        );
        // The machine's attributes, in its header or among the top-level statements, are its.
        let top_level = parsed.program.items.iter().filter_map(|item| match item {
            ast::Item::Attribute(a) => Some(attribute_symbol(lines, a)),
            _ => None,
        });
        let children: Vec<DocumentSymbol> = attributes(lines, &header.attributes)
            .into_iter()
            .chain(top_level)
            .collect();
        machine.children = (!children.is_empty()).then_some(children);
        symbols.push(machine);
        symbols.extend(parsed.program.items.iter().filter_map(|item| match item {
            ast::Item::Node(node) => Some(node_symbol(lines, node)),
            _ => None,
        }));
        return symbols;
    }
    symbols.extend(items(lines, &parsed.program.items));
    symbols
}

fn items(lines: &text::LineIndex<'_>, items: &[ast::Item]) -> Vec<DocumentSymbol> {
    items
        .iter()
        .filter_map(|item| match item {
            ast::Item::Node(node) => Some(node_symbol(lines, node)),
            ast::Item::Attribute(a) => Some(attribute_symbol(lines, a)),
            ast::Item::Edge(_) => None,
        })
        .collect()
}

fn node_symbol(lines: &text::LineIndex<'_>, node: &ast::Node) -> DocumentSymbol {
    let kind = node.kind.as_ref().map(|k| k.text.clone());
    let detail = match (&kind, &node.title) {
        (Some(k), Some(t)) => Some(format!("{k} \"{}\"", t.value)),
        (Some(k), None) => Some(k.clone()),
        (None, Some(t)) => Some(format!("\"{}\"", t.value)),
        (None, None) => None,
    };
    let symbol_kind = match kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("context") => SymbolKind::STRUCT,
        Some("task") => SymbolKind::FUNCTION,
        Some("state") => SymbolKind::ENUM_MEMBER,
        Some("tool") => SymbolKind::METHOD,
        _ => SymbolKind::OBJECT,
    };
    let mut sym = symbol(
        lines,
        node.name.text(),
        detail,
        symbol_kind,
        node.span,
        node.name.span,
    );
    let children = items(lines, &node.items);
    sym.children = (!children.is_empty()).then_some(children);
    sym
}

fn attributes(lines: &text::LineIndex<'_>, attributes: &[ast::Attribute]) -> Vec<DocumentSymbol> {
    attributes
        .iter()
        .map(|a| attribute_symbol(lines, a))
        .collect()
}

fn attribute_symbol(lines: &text::LineIndex<'_>, a: &ast::Attribute) -> DocumentSymbol {
    symbol(
        lines,
        a.name.text.clone(),
        None,
        SymbolKind::FIELD,
        a.span,
        a.name.span,
    )
}

fn symbol(
    lines: &text::LineIndex<'_>,
    name: String,
    detail: Option<String>,
    kind: SymbolKind,
    whole: dygram_syntax::source::Span,
    name_span: dygram_syntax::source::Span,
) -> DocumentSymbol {
    let range = lines.range(whole.start as usize, whole.end as usize);
    let selection = lines.range(name_span.start as usize, name_span.end as usize);
    // An editor requires the name's range inside the whole's.
    let selection = if selection.start >= range.start && selection.end <= range.end {
        selection
    } else {
        range
    };
    #[allow(deprecated)]
    DocumentSymbol {
        name: if name.is_empty() {
            "(unnamed)".into()
        } else {
            name
        },
        detail,
        kind,
        tags: None,
        deprecated: None,
        range,
        selection_range: selection,
        children: None,
    }
}
