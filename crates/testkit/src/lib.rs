//! Test support shared by every crate's integration tests (dev-only).
//!
//! [`ScriptedServer`] is a real HTTP server on `127.0.0.1` that speaks the OpenAI-compatible Chat
//! Completions protocol (`…/chat/completions`) and Anthropic Messages (`…/v1/messages`), streaming
//! included. A test scripts its answers in advance ([`Reply`]: text, tool calls, HTTP errors, delays,
//! cut streams, server quirks), points the code under test at [`ScriptedServer::url`], and afterwards
//! inspects every request body the server received.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

pub mod browser;
pub mod mcp_clients;
pub mod needs;
pub mod postgres;
mod server;

pub use server::{Protocol, ReceivedRequest, Reply, ScriptedServer, ToolCallSpec};

/// Fails if a `.rs` file in an integration-test folder is not declared as a module in its `main.rs`,
/// so no test file is silently left out of the test binary.
pub fn assert_no_forgotten_test_files(test_dir: &std::path::Path) {
    let main = std::fs::read_to_string(test_dir.join("main.rs")).unwrap();
    for entry in std::fs::read_dir(test_dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(stem) = name.strip_suffix(".rs")
            && stem != "main"
        {
            assert!(
                main.contains(&format!("mod {stem};")),
                "{}/{name} is not declared in main.rs",
                test_dir.display()
            );
        }
    }
}
