//! The delta agent engine.
//!
//! An agent is a folder: `agent.yaml` (model, tools, hooks), `system_prompt.md`, optional
//! `context.yaml` and `hooks.yaml`. A run lives in a workspace folder; every event goes to an
//! append-only journal there, and the conversation sent to the model is rebuilt from that journal on
//! every iteration, so a run can be picked up by a later process.
//!
//! This crate never prints: progress is reported through [`engine::Observer`], questions for a human go
//! through [`engine::HumanInput`]; the `delta` binary renders both.
#![warn(clippy::print_stdout, clippy::print_stderr)]

pub mod agent;
pub mod connect;
pub mod context;
pub mod diag;
pub mod engine;
pub mod env;
pub mod events;
pub mod fleet;
pub mod hooks;
mod io_files;
mod io_packs;
pub mod mcp_servers;
pub mod metadata;
pub mod playback;
pub mod pricing;
pub mod process;
pub mod redaction;
pub mod resume;
pub mod run_result;
pub mod runner;
pub mod runs;
pub mod sandbox;
pub mod seal;
pub mod session;
pub mod shells;
pub mod stream;
pub mod tail;
pub mod templates;
pub mod transcript;
pub mod workspace;
