//! The outline of a document (`textDocument/documentSymbol`): its nodes, nested as they are
//! declared, with their attributes; read from the syntax tree, so a document with errors still has
//! the outline of what could be read.

use dygram_syntax::ast;
use dygram_syntax::source::Span;

/// What a symbol is, for the editor's icon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolKind {
    /// The machine (its header).
    Machine,
    /// A context node.
    Context,
    /// A task node.
    Task,
    /// A state node.
    State,
    /// A tool node.
    Tool,
    /// Any other node.
    Node,
    /// An attribute.
    Attribute,
}

/// One entry of the outline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Its name (`(unnamed)` when it has none).
    pub name: String,
    /// Its type and title.
    pub detail: Option<String>,
    /// What it is.
    pub kind: SymbolKind,
    /// All of it.
    pub span: Span,
    /// Its name (inside `span`).
    pub selection: Span,
    /// What it holds.
    pub children: Vec<Symbol>,
}

/// The nested symbols of `content`.
pub fn outline(content: &str) -> Vec<Symbol> {
    let parsed = crate::parse_open(content);
    let mut symbols = Vec::new();
    if let Some(header) = &parsed.program.header {
        let mut machine = symbol(
            header.title.value.clone(),
            Some("machine".to_string()),
            SymbolKind::Machine,
            header.span,
            header.title.span,
        );
        // The machine's attributes, in its header or among the top-level statements, are its.
        let top_level = parsed.program.items.iter().filter_map(|item| match item {
            ast::Item::Attribute(a) => Some(attribute_symbol(a)),
            _ => None,
        });
        machine.children = attributes(&header.attributes)
            .into_iter()
            .chain(top_level)
            .collect();
        symbols.push(machine);
        symbols.extend(parsed.program.items.iter().filter_map(|item| match item {
            ast::Item::Node(node) => Some(node_symbol(node)),
            _ => None,
        }));
        return symbols;
    }
    symbols.extend(items(&parsed.program.items));
    symbols
}

fn items(items: &[ast::Item]) -> Vec<Symbol> {
    items
        .iter()
        .filter_map(|item| match item {
            ast::Item::Node(node) => Some(node_symbol(node)),
            ast::Item::Attribute(a) => Some(attribute_symbol(a)),
            ast::Item::Edge(_) => None,
        })
        .collect()
}

fn node_symbol(node: &ast::Node) -> Symbol {
    let kind = node.kind.as_ref().map(|k| k.text.clone());
    let detail = match (&kind, &node.title) {
        (Some(k), Some(t)) => Some(format!("{k} \"{}\"", t.value)),
        (Some(k), None) => Some(k.clone()),
        (None, Some(t)) => Some(format!("\"{}\"", t.value)),
        (None, None) => None,
    };
    let symbol_kind = match kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("context") => SymbolKind::Context,
        Some("task") => SymbolKind::Task,
        Some("state") => SymbolKind::State,
        Some("tool") => SymbolKind::Tool,
        _ => SymbolKind::Node,
    };
    let mut sym = symbol(
        node.name.text(),
        detail,
        symbol_kind,
        node.span,
        node.name.span,
    );
    sym.children = items(&node.items);
    sym
}

fn attributes(attributes: &[ast::Attribute]) -> Vec<Symbol> {
    attributes.iter().map(attribute_symbol).collect()
}

fn attribute_symbol(a: &ast::Attribute) -> Symbol {
    symbol(
        a.name.text.clone(),
        None,
        SymbolKind::Attribute,
        a.span,
        a.name.span,
    )
}

fn symbol(
    name: String,
    detail: Option<String>,
    kind: SymbolKind,
    span: Span,
    name_span: Span,
) -> Symbol {
    // An editor requires the name's range inside the whole's.
    let selection = if name_span.start >= span.start && name_span.end <= span.end {
        name_span
    } else {
        span
    };
    Symbol {
        name: if name.is_empty() {
            "(unnamed)".into()
        } else {
            name
        },
        detail,
        kind,
        span,
        selection,
        children: Vec::new(),
    }
}
