//! Running DyGram machines: the executor and its turns ([`executor`], [`state`], [`tools`], the
//! JavaScript of `@code` nodes in [`js`]), saved executions under `.dygram/executions/` or in
//! PostgreSQL ([`session`]), how a turn reaches a model ([`connect`], recorded answers in
//! [`playback`]), and the outputs that need a process or a disk ([`outputs`]: SVG through
//! Graphviz, output files, the drawings of an execution).
//!
//! The language itself (parsing, linking, validation, conditions, drawings) is `dygram-core`;
//! this crate adds everything that does IO. It never prints: the `dygram` binary owns the
//! terminal.

pub mod agents;
pub mod connect;
pub mod executor;
pub mod files;
pub mod js;
pub mod machine;
pub mod outputs;
pub mod playback;
pub mod prompt;
pub mod session;
pub mod state;
pub mod tools;
