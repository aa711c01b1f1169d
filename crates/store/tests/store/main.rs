//! Integration tests of the durable-state layer: real files, real child processes, real kills.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod child;
mod crash;
mod locks;
mod properties;

/// Every `.rs` file in this folder must be declared above, or its tests would silently never run.
#[test]
fn no_forgotten_test_files() {
    testkit::assert_no_forgotten_test_files(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/store"),
    );
}
