//! The `dygram` command's library half: the language server ([`lsp`]). The language is
//! `dygram-syntax` and `dygram-core`; running machines is `dygram-runtime`; the binary's own
//! modules parse arguments and render reports.

pub mod agent_nodes;
pub mod lsp;
