//! Integration tests of the MCP client: a scripted stdio server (`tests/servers/scripted.py`), the
//! reference server `@modelcontextprotocol/server-everything`, and a server written with the official
//! Python SDK (`tests/servers/py_server.py`) over stdio and streamable HTTP. The real servers come
//! from `scripts/install-mcp-servers`; without them those tests say SKIPPED.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bounds;
mod everything;
mod python_sdk;
mod scripted;
mod server_http;
mod support;

/// Every `.rs` file in this folder must be declared above, or its tests would silently never run.
#[test]
fn no_forgotten_test_files() {
    testkit::assert_no_forgotten_test_files(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it"),
    );
}
