//! Drawings and texts of a machine, all computed from its canonical JSON ([`crate::json`]): the
//! JSON text ([`json`]), Graphviz DOT ([`dot`]), Mermaid ([`mermaid`]), `.dy` source ([`dsl`]) and
//! an SVG drawing laid out here, without Graphviz ([`layout`], the playground's); and, from the
//! syntax tree before the machine is linked, the tree itself as JSON ([`syntax_tree`],
//! `dygram debug`).
//!
//! Text in, text out: laying DOT out as SVG (Graphviz) and writing files belong to the callers
//! (`dygram_runtime::outputs`).

pub mod dot;
pub mod dsl;
pub mod json;
pub mod layout;
pub mod mermaid;
pub mod syntax_tree;

mod access;
pub mod markdown;
