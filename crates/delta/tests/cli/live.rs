//! The live tier: `delta run` against a real OpenAI-compatible server (`LLM_E2E_URL`), run by `.ci/run`
//! with llama.cpp's server and a tiny model. The model's choices are not asserted, only the protocol:
//! the run completes and real token usage is recorded.

use crate::support::Sandbox;

#[test]
fn a_real_server_runs_an_agent_with_a_tool_to_completion() {
    let Some(testkit::needs::LiveServer { url, .. }) = testkit::needs::live_server() else {
        return;
    };
    let sb = Sandbox::new(
        "name: live\nllm:\n  model: smollm2\n  temperature: 0\n  max_tokens: 64\ntools:\n  - name: list_files\n    description: List the files in the workspace.\n    exec: \"ls -la\"\n",
    );
    let mut cmd = sb.delta(None);
    cmd.env("DELTA_BASE_URL", &url);
    // -i with answers on stdin: should the model ask the human, the run still goes on.
    cmd.args([
        "run",
        "--agent",
        "agent",
        "-w",
        "ws",
        "-m",
        "List the files.",
        "-i",
        "--max-iterations",
        "2",
        "--format",
        "json",
    ]);
    let out = crate::support::output_with_stdin(cmd, "yes\nyes\nyes\nyes\n");
    let stderr = &out.stderr;
    assert_eq!(out.code, 0, "{stderr}");
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["status"], "COMPLETED");
    let meta = sb.metadata();
    assert!(
        meta["usage"]["input_tokens"].as_u64().unwrap() > 0,
        "{meta}"
    );
    assert!(
        meta["usage"]["output_tokens"].as_u64().unwrap() > 0,
        "{meta}"
    );
    let thought = &sb.events("THOUGHT")[0]["payload"];
    let inv = crate::support::invocation(
        &sb.run_dir(),
        thought["llm_invocation_ref"].as_str().unwrap(),
    );
    assert!(inv["metadata"]["token_usage"]["prompt"].as_u64().unwrap() > 0);
    assert_eq!(inv["request"]["tools"][0]["function"]["name"], "list_files");
}

#[test]
fn a_run_longer_than_the_window_completes_against_a_real_server() {
    let Some(testkit::needs::LiveServer { url, .. }) = testkit::needs::live_server() else {
        return;
    };
    // The example's window (1 024 tokens) is smaller than the server's (2 048): its pages are
    // summarized by the real model as the run goes.
    let sb = Sandbox::new("name: unused\nllm: {}\ntools: []\n");
    let out = crate::examples::read_long(&sb, Some(&url), &["--max-iterations", "16"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    crate::examples::assert_long_run(&sb, 1);
}

#[test]
fn a_real_server_calls_a_tool_of_an_mcp_server() {
    let Some(testkit::needs::LiveServer { url, .. }) = testkit::needs::live_server() else {
        return;
    };
    if testkit::needs::python3().is_none() {
        return;
    }
    let notes = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/mcp-notes/notes_server.py");
    let sb = Sandbox::new(&format!(
        "name: live-mcp\nllm:\n  model: smollm2\n  temperature: 0\n  max_tokens: 64\ntools: []\nmcp_servers:\n  - name: notes\n    command: python3\n    args: [\"{}\"]\n",
        notes.display()
    ));
    sb.file(
        "agent/system_prompt.md",
        "You save notes with the notes tools. Always call notes__list_notes first.",
    );
    let mut cmd = sb.delta(None);
    cmd.env("DELTA_BASE_URL", &url).args([
        "run",
        "--agent",
        "agent",
        "-w",
        "ws",
        "-m",
        "Call the notes__list_notes tool now.",
        "--max-iterations",
        "1",
    ]);
    let out = crate::support::output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let request = crate::support::invocation(
        &sb.run_dir(),
        sb.events("THOUGHT")[0]["payload"]["llm_invocation_ref"]
            .as_str()
            .unwrap(),
    )["request"]
        .clone();
    let offered: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        offered,
        [
            "notes__add_note",
            "notes__list_notes",
            "notes__read_note",
            "ask_human"
        ]
    );
    // At temperature 0 this model calls the tool it is told to call; the call went to the server.
    let results = sb.events("ACTION_RESULT");
    assert_eq!(results.len(), 1, "{}", out.stderr);
    assert_eq!(results[0]["payload"]["status"], "SUCCESS");
    assert_eq!(results[0]["payload"]["observation_content"], "(no notes)");
}
