//! End-to-end tests of the `dygram` binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;

mod agent_nodes;
mod answers;
mod color;
mod commands;
mod completions;
mod conformance;
mod context_window;
mod debug;
mod display;
mod dot_output;
mod dsl_output;
mod durability;
mod execution;
mod faults;
mod feedback;
mod fmt;
mod json_output;
mod live;
mod lsp;
mod manage;
mod mcp;
mod mcp_clients;
mod nesting;
mod playback;
mod playground;
mod readme;
mod robustness;
mod runtime;
mod secrets;
mod session;
mod stateful;
mod status;
mod store;
mod stream_json;
#[allow(dead_code)] // shared helpers; not every test module uses all of them
mod support;
mod views;
mod which_execution;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("dygram")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn help_explains_the_tool() {
    let (code, stdout, stderr) = run(&["--help"]);
    assert_eq!(code, 0);
    assert_eq!(stderr, "");
    insta::assert_snapshot!(stdout);
}

#[test]
fn version_is_printed() {
    let (code, stdout, _) = run(&["--version"]);
    assert_eq!(code, 0);
    assert_eq!(stdout, format!("dygram {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn unknown_arguments_are_usage_errors() {
    let (code, stdout, stderr) = run(&["--bogus"]);
    assert_eq!(code, 64);
    assert_eq!(stdout, "");
    assert!(stderr.contains("unexpected argument '--bogus'"), "{stderr}");
}

#[test]
fn every_test_file_is_declared() {
    testkit::assert_no_forgotten_test_files(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli"),
    );
}
