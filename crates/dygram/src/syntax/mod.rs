//! Reading DyGram source: tokens, the syntax tree and the parser.

pub mod ast;
pub mod lexer;
pub mod parser;

pub use parser::{Parsed, SyntaxError, parse};
