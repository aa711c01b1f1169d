//! The live tier: `dygram execute` against a real OpenAI-compatible server (llama.cpp's, with a
//! tiny model), run when `LLM_E2E_URL` is set (`.ci/run` starts the server); without it the test
//! says `SKIPPED` and returns, unless `LLM_E2E_REQUIRED` is set, in which case it fails. The model is tiny:
//! the test checks the protocol and that a recorded live run replays to the same state, never what
//! the model chose.

use serde_json::Value;

fn live_url() -> Option<String> {
    testkit::needs::live_server().map(|s| s.url)
}

fn run(dir: &std::path::Path, args: &[&str], url: &str) -> (i32, Value, String) {
    let out = assert_cmd::Command::cargo_bin("dygram")
        .unwrap()
        .current_dir(dir)
        .args(args)
        .env("OPENAI_BASE_URL", url)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .timeout(std::time::Duration::from_secs(600))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not the result JSON ({e}): {stderr}"));
    (out.status.code().unwrap_or(-1), json, stderr)
}

#[test]
fn a_live_run_is_recorded_and_replays_to_the_same_state() {
    let Some(url) = live_url() else {
        return;
    };
    let model = std::env::var("LLM_E2E_MODEL").unwrap_or_else(|_| "smollm2".into());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("m.dy"),
        "machine \"Live\" { maxSteps: 2 }\ncontext Notes { text: \"\" }\n\
         task write \"Write a note\" { prompt: \"Write a one-word note into Notes, then call transition_to_done.\"; }\n\
         state done;\nwrite -writes-> Notes;\nwrite -> done;\n",
    )
    .unwrap();
    let (code, live, stderr) = run(
        dir.path(),
        &[
            "e",
            "m.dy",
            "--provider",
            "openai",
            "-m",
            &model,
            "--max-tokens",
            "48",
            "--record",
            "rec",
            "-d",
            "live",
            "--format",
            "json",
        ],
        &url,
    );
    // Whatever the model did, the run ends (complete, or an error such as a full context).
    assert!(matches!(code, 0 | 1), "{code}: {stderr}");
    let status = live["status"].as_str().unwrap_or("");
    assert!(matches!(status, "complete" | "error"), "{live}");
    assert!(dir.path().join("live/m-result.json").is_file());
    // The first request offered exactly the node's tools, with the model and output limit asked for.
    let first: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("rec/turn-1.json")).unwrap())
            .unwrap();
    let mut tools: Vec<&str> = first["request"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    tools.sort_unstable();
    assert_eq!(tools, ["transition_to_done", "write_Notes"]);
    assert_eq!(first["request"]["model"], model.as_str());
    assert_eq!(first["request"]["maxTokens"], 48);
    // Replayed offline, the recording leads to the same place.
    let (_, replay, stderr) = run(
        dir.path(),
        &[
            "e",
            "m.dy",
            "--playback",
            "rec",
            "-d",
            "replay",
            "--format",
            "json",
        ],
        "http://127.0.0.1:9/unused",
    );
    assert_eq!(replay["contextState"], live["contextState"], "{stderr}");
    assert_eq!(replay["history"], live["history"], "{stderr}");
    assert_eq!(replay["visitedNodes"], live["visitedNodes"]);
}

/// Four agent nodes in a row, each choosing between two transitions (the tiny model calls a tool
/// readily; any tool it may call moves the machine on).
const STAGES: &str = "machine \"Stages\" { maxSteps: 16 }
task plan \"Plan\" { prompt: \"Pick the next stage by calling transition_to_draft or transition_to_outline.\"; }
task draft \"Draft\" { prompt: \"Pick the next stage by calling transition_to_review or transition_to_edit.\"; }
task outline \"Outline\" { prompt: \"Pick the next stage by calling transition_to_review or transition_to_edit.\"; }
task review \"Review\" { prompt: \"Pick the next stage by calling transition_to_publish or transition_to_archive.\"; }
task edit \"Edit\" { prompt: \"Pick the next stage by calling transition_to_publish or transition_to_archive.\"; }
task publish \"Publish\" { prompt: \"Finish by calling transition_to_done or transition_to_shelved.\"; }
task archive \"Archive\" { prompt: \"Finish by calling transition_to_done or transition_to_shelved.\"; }
state done;
state shelved;
plan -> draft;
plan -> outline;
draft -> review;
draft -> edit;
outline -> review;
outline -> edit;
review -> publish;
review -> archive;
edit -> publish;
edit -> archive;
publish -> done;
publish -> shelved;
archive -> done;
archive -> shelved;
";

#[test]
fn a_live_run_through_four_agent_nodes_completes() {
    let Some(url) = live_url() else {
        return;
    };
    let model = std::env::var("LLM_E2E_MODEL").unwrap_or_else(|_| "smollm2".into());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.dy"), STAGES).unwrap();
    // The default answer limit (4 096 tokens) and no `contextWindow`: as a user runs it.
    let (code, result, stderr) = run(
        dir.path(),
        &[
            "e",
            "m.dy",
            "--provider",
            "openai",
            "-m",
            &model,
            "--record",
            "rec",
            "-d",
            "live",
            "--format",
            "json",
        ],
        &url,
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(result["status"], "complete", "{result}");
    let path = &result["paths"][0];
    assert!(path.get("error").is_none(), "{result}");
    let decisions = path["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["transition"] == "agent_decision")
        .count();
    assert!(decisions >= 4, "{result}");
    let ends = ["done", "shelved"];
    assert!(
        ends.contains(&path["currentNode"].as_str().unwrap_or("")),
        "{result}"
    );
    let recordings = std::fs::read_dir(dir.path().join("rec")).unwrap().count();
    assert!(recordings >= 4, "{recordings} recordings: {stderr}");
}

#[test]
fn the_live_servers_refusal_for_length_is_recognised() {
    use llm::openai::{OpenAiClient, OpenAiConfig};
    use llm::{ChatRequest, LlmClient, Message};
    let Some(url) = live_url() else {
        return;
    };
    let model = std::env::var("LLM_E2E_MODEL").unwrap_or_else(|_| "smollm2".into());
    let client = OpenAiClient::new(OpenAiConfig::new(url, None));
    let long = "The quick brown fox jumps over the lazy dog. ".repeat(600);
    let request = ChatRequest::new(model, vec![Message::user(long)]).with_max_tokens(16);
    let Err(error) = client.complete(&request) else {
        eprintln!("the live server's window holds 6 000 tokens: no refusal to read");
        return;
    };
    let overflow = llm::window::overflow(&error)
        .unwrap_or_else(|| panic!("not read as a refusal for length: {error}"));
    let window = overflow.window.expect("the window the server names");
    assert!(window >= 256, "{overflow:?}");
    assert!(overflow.prompt_tokens > Some(window), "{overflow:?}");
}
