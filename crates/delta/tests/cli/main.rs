//! End-to-end tests of the `delta` binary: real processes, real files, the LLM played by
//! `testkit::ScriptedServer` on 127.0.0.1 (or a real server in the live tier).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod agent_config;
mod answers;
mod approvals;
mod basics;
mod context_sources;
mod context_window;
mod crash;
mod damaged;
mod dotenv;
mod duplicate_ids;
mod examples;
mod finished;
mod fleet;
mod fleet_edges;
mod hooks;
mod human;
mod imports;
mod init;
mod io_records;
mod last;
mod library;
mod live;
mod llm_errors;
mod lost_journal;
mod mcp;
mod mcp_server;
mod playback;
mod readme;
mod red_team;
mod reserved_ids;
mod results;
mod resume;
mod run_in_workspace;
mod runs;
mod sandbox;
mod scripting;
mod secrets;
mod sessions;
mod show;
mod signals;
mod sub_agents;
mod tool_expand;
mod tool_processes;
mod tools;

/// Every `.rs` file in this folder must be declared above, or its tests would silently never run.
#[test]
fn no_forgotten_test_files() {
    testkit::assert_no_forgotten_test_files(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli"),
    );
}
