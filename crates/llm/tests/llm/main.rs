//! Integration tests of the LLM layer. Every HTTP test talks to `testkit::ScriptedServer` on
//! 127.0.0.1; the `live` module talks to a real OpenAI-compatible server when `LLM_E2E_URL` is set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod connect;
mod live;
mod properties;
mod protocols;
mod recordings;
mod support;

/// Every `.rs` file in this folder must be declared above, or its tests would silently never run.
#[test]
fn no_forgotten_test_files() {
    testkit::assert_no_forgotten_test_files(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/llm"),
    );
}
