//! Reading DyGram source: the text and its positions ([`source`]), tokens ([`lexer`]), the
//! syntax tree ([`ast`]) and the parser ([`parser`]).
//!
//! No dependencies and no IO: it builds for any target, WebAssembly included.
//!
//! ```
//! let parsed = dygram_syntax::parse("a -> b;");
//! assert!(parsed.errors.is_empty());
//! ```

pub mod ast;
pub mod lexer;
pub mod parser;
pub mod source;

pub use parser::{Parsed, SyntaxError, parse};
