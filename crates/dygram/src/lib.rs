//! The DyGram language: parsing, linking, validation and outputs.
//!
//! A library: it never prints. The `dygram` binary owns the terminal.

pub mod diagnostic;
pub mod json;
pub mod model;
pub mod source;
pub mod style;
pub mod syntax;
pub mod values;
