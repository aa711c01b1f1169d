//! The agents in `examples/` replay offline from their recordings, as the README shows.

use std::path::PathBuf;

use crate::support::{Sandbox, output};

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
        .canonicalize()
        .unwrap()
}

fn replay(name: &str, message: &str) -> Sandbox {
    let sb = Sandbox::new("name: unused\nllm: {}\ntools: []\n");
    let dir = example(name);
    let mut cmd = sb.delta(None);
    cmd.args(["run", "--agent"])
        .arg(&dir)
        .args(["-m", message, "-w", "ws", "--playback"])
        .arg(dir.join("recordings"));
    let out = output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    sb
}

#[test]
fn hello_world_replays_and_creates_its_file() {
    let sb = replay(
        "hello-world",
        "Create hello.txt with a greeting, then check it is there.",
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("hello.txt")).unwrap(),
        "Hello from delta!\n"
    );
    assert_eq!(sb.metadata()["status"], "COMPLETED");
    assert_eq!(sb.metadata()["usage"]["llm_calls"], 3);
}

#[test]
fn text_tools_replays_with_real_tool_output() {
    let sb = replay(
        "text-tools",
        "Write a short poem to poem.txt, count its words and find the lines with 'on'.",
    );
    assert!(
        std::fs::read_to_string(sb.ws().join("poem.txt"))
            .unwrap()
            .starts_with("The fog comes")
    );
    let results = sb.events("ACTION_RESULT");
    assert_eq!(
        results[1]["payload"]["observation_content"],
        "=== STDOUT ===\n21\n\n=== EXIT CODE: 0 ==="
    );
    assert!(
        results[2]["payload"]["observation_content"]
            .as_str()
            .unwrap()
            .contains("5:on silent haunches")
    );
}
