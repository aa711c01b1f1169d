//! Recording and playback: the upstream recording sets, round trips, misses, secrets.

use std::path::{Path, PathBuf};

use llm::recording::recording_files;
use llm::{
    ChatRequest, ChatResponse, ContentBlock, LlmClient, LlmError, Message, PlaybackClient,
    PlaybackMode, Recorder, Recording, Role, ToolDefinition,
};
use serde_json::{Value, json};
use store::{Clock, IdSource};
use testkit::{Protocol, Reply, ScriptedServer, ToolCallSpec};

use crate::support::{KEY, client, fast_http};

/// The recording sets of the conformance corpus (`None`, after saying so, without the corpus).
fn upstream_sets() -> Option<Vec<PathBuf>> {
    let root = testkit::needs::conformance()?.join("execution");
    let mut sets: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path().join("recordings"))
        .filter(|p| p.is_dir())
        .collect();
    sets.sort();
    Some(sets)
}

/// Rebuilds a neutral request from a recorded (Anthropic-shaped) one.
fn request_from_recording(recording: &Recording) -> ChatRequest {
    let mut messages = Vec::new();
    for m in &recording.request.messages {
        let role = m["role"].as_str().unwrap();
        match &m["content"] {
            Value::String(text) => messages.push(Message::user(text.clone())),
            Value::Array(blocks) => {
                let mut content = Vec::new();
                let mut results = Vec::new();
                for b in blocks {
                    match b["type"].as_str().unwrap() {
                        "text" => content.push(ContentBlock::text(b["text"].as_str().unwrap())),
                        "tool_use" => content.push(ContentBlock::tool_call(
                            b["id"].as_str().unwrap(),
                            b["name"].as_str().unwrap(),
                            b["input"].clone(),
                        )),
                        "tool_result" => results.push(ContentBlock::tool_result(
                            b["tool_use_id"].as_str().unwrap(),
                            b["content"].as_str().unwrap_or_default(),
                            b["is_error"].as_bool().unwrap_or(false),
                        )),
                        other => panic!("unexpected block {other}"),
                    }
                }
                if role == "assistant" {
                    messages.push(Message::assistant(content));
                } else {
                    if !results.is_empty() {
                        messages.push(Message::tool_results(results));
                    }
                    if !content.is_empty() {
                        messages.push(Message {
                            role: Role::User,
                            content,
                        });
                    }
                }
            }
            other => panic!("unexpected content {other}"),
        }
    }
    let tools = recording
        .request
        .tools
        .iter()
        .map(|t| ToolDefinition {
            name: t["name"].as_str().unwrap().to_string(),
            description: t["description"].as_str().unwrap_or_default().to_string(),
            parameters: t["input_schema"].clone(),
        })
        .collect();
    ChatRequest::new("claude-3-5-haiku-20241022", messages).with_tools(tools)
}

fn as_anthropic_blocks(response: &ChatResponse) -> Value {
    Value::Array(
        response
            .content
            .iter()
            .map(|b| match b {
                ContentBlock::Text { text } => json!({"type": "text", "text": text}),
                ContentBlock::ToolCall {
                    id,
                    name,
                    arguments,
                } => {
                    json!({"type": "tool_use", "id": id, "name": name, "input": arguments})
                }
                other => panic!("unexpected {other:?}"),
            })
            .collect(),
    )
}

#[test]
fn every_upstream_recording_set_replays_unchanged() {
    let Some(sets) = upstream_sets() else { return };
    assert_eq!(sets.len(), 6, "six upstream recording sets: {sets:?}");
    let mut served = 0;
    for dir in sets {
        for mode in [
            PlaybackMode::Hybrid,
            PlaybackMode::Signature,
            PlaybackMode::Sequential,
        ] {
            let playback = PlaybackClient::open(&dir, mode).unwrap();
            for file in recording_files(&dir).unwrap() {
                let raw: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
                let recording = Recording::load(&file).unwrap();
                let response = playback
                    .complete(&request_from_recording(&recording))
                    .unwrap_or_else(|e| panic!("{} ({mode}): {e}", file.display()));
                assert_eq!(
                    as_anthropic_blocks(&response),
                    raw["response"]["response"]["content"],
                    "{} ({mode})",
                    file.display()
                );
                if let Some(stop) = raw["response"]["response"]["stop_reason"].as_str() {
                    assert_eq!(response.stop_reason.as_str(), stop);
                }
                served += 1;
            }
        }
    }
    assert_eq!(served, 3 * 20, "20 recorded turns in all");
}

#[test]
fn signature_matching_does_not_depend_on_request_order() {
    // meta-construct-tool: turns 1-3 offer the same tools and differ only by message count.
    let Some(sets) = upstream_sets() else { return };
    let dir = sets
        .into_iter()
        .find(|d| d.to_string_lossy().contains("meta-construct-tool"))
        .unwrap();
    let files = recording_files(&dir).unwrap();
    let playback = PlaybackClient::open(&dir, PlaybackMode::Signature).unwrap();
    for file in files.iter().take(3).rev() {
        let recording = Recording::load(file).unwrap();
        let response = playback
            .complete(&request_from_recording(&recording))
            .unwrap();
        assert_eq!(response, recording.chat_response(), "{}", file.display());
    }
    assert_eq!(
        playback.state().used,
        vec!["turn-3.json", "turn-2.json", "turn-1.json"]
    );
}

fn scripted_exchanges(
    server: &ScriptedServer,
    protocol: Protocol,
    dir: &Path,
) -> Vec<(ChatRequest, ChatResponse)> {
    let recorder = Recorder::new(client(server, protocol, fast_http()), dir)
        .unwrap()
        .with_clock(Clock::Fixed("2026-01-02T03:04:05Z".parse().unwrap()))
        .with_ids(IdSource::seeded(42));
    let tool = ToolDefinition {
        name: "lookup".into(),
        description: "Look something up".into(),
        parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
    };
    let mut req = ChatRequest::new(
        "rec-model",
        vec![Message::system("sys"), Message::user("find x")],
    )
    .with_tools(vec![tool])
    .with_temperature(0.5);
    let mut out = Vec::new();
    let first = recorder.complete(&req).unwrap();
    out.push((req.clone(), first.clone()));
    req.messages.push(first.to_message());
    req.messages
        .push(Message::tool_results(vec![ContentBlock::tool_result(
            "c1", "x is 4", false,
        )]));
    let second = recorder.complete_streaming(&req, &mut |_| {}).unwrap();
    out.push((req.clone(), second.clone()));
    req.messages.push(second.to_message());
    req.messages.push(Message::user("thanks"));
    let third = recorder.complete(&req).unwrap();
    out.push((req, third));
    out
}

fn script() -> Vec<Reply> {
    vec![
        Reply::tool_calls([ToolCallSpec::new("c1", "lookup", json!({"q": "x"}))])
            .with_text("Looking.")
            .usage(30, 7),
        Reply::text("x is 4.").usage(44, 5),
        Reply::text("You're welcome.").usage(50, 4),
    ]
}

#[test]
fn record_then_playback_reproduces_responses_exactly() {
    for protocol in [Protocol::OpenAi, Protocol::Anthropic] {
        let server = ScriptedServer::start(script());
        let dir = tempfile::tempdir().unwrap();
        let exchanges = scripted_exchanges(&server, protocol, dir.path());
        let names: Vec<String> = recording_files(dir.path())
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["turn-1.json", "turn-2.json", "turn-3.json"]);

        for mode in [
            PlaybackMode::Hybrid,
            PlaybackMode::Signature,
            PlaybackMode::Sequential,
        ] {
            let playback = PlaybackClient::open(dir.path(), mode).unwrap();
            for (request, response) in &exchanges {
                assert_eq!(
                    &playback.complete(request).unwrap(),
                    response,
                    "{protocol:?} {mode}"
                );
            }
        }
        for file in recording_files(dir.path()).unwrap() {
            let text = std::fs::read_to_string(&file).unwrap();
            assert!(
                !text.contains(KEY),
                "the API key reached {}",
                file.display()
            );
        }
        let first: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("turn-1.json")).unwrap())
                .unwrap();
        let keys: Vec<&str> = first
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, vec!["request", "response", "recordedAt", "signature"]);
        assert_eq!(first["request"]["type"], "llm_invocation_request");
        assert_eq!(first["request"]["systemPrompt"], "sys");
        assert_eq!(first["request"]["temperature"], 0.5);
        assert_eq!(
            first["signature"],
            json!({"toolNames": ["lookup"], "messageCount": 1, "contextKeys": []})
        );
        assert_eq!(first["recordedAt"], "2026-01-02T03:04:05Z");
    }
}

#[test]
fn recordings_are_provider_neutral() {
    // The same conversation through each adapter gives the same recorded request, signature and
    // answer, so either set of files plays back for either provider.
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let mut exchanges = Vec::new();
    for (dir, protocol) in dirs.iter().zip([Protocol::OpenAi, Protocol::Anthropic]) {
        let server = ScriptedServer::start(script());
        exchanges.push(scripted_exchanges(&server, protocol, dir.path()));
    }
    for name in ["turn-1.json", "turn-2.json", "turn-3.json"] {
        let read = |d: &tempfile::TempDir| -> Value {
            serde_json::from_slice(&std::fs::read(d.path().join(name)).unwrap()).unwrap()
        };
        let (a, b) = (read(&dirs[0]), read(&dirs[1]));
        assert_eq!(a["request"], b["request"], "{name}");
        assert_eq!(a["signature"], b["signature"], "{name}");
        for key in ["content", "stop_reason", "usage"] {
            assert_eq!(
                a["response"]["response"][key], b["response"]["response"][key],
                "{name} {key}"
            );
        }
    }
    // Cross over: play the OpenAI-recorded files back for the Anthropic conversation.
    let playback = PlaybackClient::open(dirs[0].path(), PlaybackMode::Signature).unwrap();
    for (request, response) in &exchanges[1] {
        let played = playback.complete(request).unwrap();
        assert_eq!(played.content, response.content);
        assert_eq!(played.stop_reason, response.stop_reason);
        assert_eq!(played.usage, response.usage);
    }
}

#[test]
fn concurrent_recorders_never_overwrite_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start((0..40).map(|i| Reply::text(&format!("answer {i}"))));
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                let recorder =
                    Recorder::new(client(&server, Protocol::OpenAi, fast_http()), dir.path())
                        .unwrap();
                for _ in 0..10 {
                    recorder
                        .complete(&ChatRequest::new("m", vec![Message::user("hi")]))
                        .unwrap();
                }
            });
        }
    });
    let files = recording_files(dir.path()).unwrap();
    assert_eq!(files.len(), 40);
    let mut answers: Vec<String> = files
        .iter()
        .map(|f| Recording::load(f).unwrap().chat_response().text())
        .collect();
    answers.sort();
    answers.dedup();
    assert_eq!(answers.len(), 40, "every answer kept exactly once");
}

#[test]
fn recordings_are_deterministic_with_a_fixed_clock_and_seed() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    for dir in &dirs {
        let server = ScriptedServer::start(script());
        scripted_exchanges(&server, Protocol::Anthropic, dir.path());
    }
    for name in ["turn-1.json", "turn-2.json", "turn-3.json"] {
        let a = std::fs::read(dirs[0].path().join(name)).unwrap();
        let b = std::fs::read(dirs[1].path().join(name)).unwrap();
        assert_eq!(a, b, "{name} differs between two identical runs");
    }
}

#[test]
fn recording_continues_numbering_in_a_directory_with_recordings() {
    let server = ScriptedServer::start([Reply::text("one"), Reply::text("two")]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("turn-9.json"), "{}").unwrap();
    let req = ChatRequest::new("m", vec![Message::user("hi")]);
    let recorder =
        Recorder::new(client(&server, Protocol::OpenAi, fast_http()), dir.path()).unwrap();
    recorder.complete(&req).unwrap();
    recorder.complete(&req).unwrap();
    assert!(dir.path().join("turn-10.json").is_file());
    assert!(dir.path().join("turn-11.json").is_file());
    let names: Vec<String> = recording_files(dir.path())
        .unwrap()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["turn-9.json", "turn-10.json", "turn-11.json"]);
}

#[test]
fn failed_exchanges_are_not_recorded() {
    let server = ScriptedServer::start([Reply::error(400, "nope")]);
    let dir = tempfile::tempdir().unwrap();
    let recorder =
        Recorder::new(client(&server, Protocol::OpenAi, fast_http()), dir.path()).unwrap();
    assert!(
        recorder
            .complete(&ChatRequest::new("m", vec![Message::user("hi")]))
            .is_err()
    );
    assert!(recording_files(dir.path()).unwrap().is_empty());
}

#[test]
fn a_miss_says_what_was_asked_and_what_the_directory_holds() {
    let Some(sets) = upstream_sets() else { return };
    let dir = sets
        .into_iter()
        .find(|d| d.to_string_lossy().contains("template-simple"))
        .unwrap();
    let playback = PlaybackClient::open(&dir, PlaybackMode::Signature).unwrap();
    let req = ChatRequest::new("m", vec![Message::user("hi")]).with_tools(vec![ToolDefinition {
        name: "transition_to_nowhere".into(),
        description: String::new(),
        parameters: json!({}),
    }]);
    let err = playback.complete(&req).unwrap_err();
    assert!(matches!(err, LlmError::PlaybackMiss(_)));
    let text = err.to_string();
    assert!(text.contains("no recording matches this request"), "{text}");
    assert!(
        text.contains("requested: tools [transition_to_nowhere], 1 message"),
        "{text}"
    );
    assert!(
        text.contains("turn-1.json: tools [transition_to_compileReport, write_Report], 1 message"),
        "{text}"
    );
    assert!(
        text.contains("turn-2.json: tools [transition_to_end, write_Report], 1 message"),
        "{text}"
    );
}

#[test]
fn sequential_playback_runs_out_and_its_state_carries_across_clients() {
    let Some(sets) = upstream_sets() else { return };
    let dir = sets
        .into_iter()
        .find(|d| d.to_string_lossy().contains("codegen-simple"))
        .unwrap();
    let req = ChatRequest::new("m", vec![Message::user("anything")]);
    let first = PlaybackClient::open(&dir, PlaybackMode::Sequential).unwrap();
    first.complete(&req).unwrap();
    // A later process picks up where the first left off.
    let second = PlaybackClient::open(&dir, PlaybackMode::Sequential)
        .unwrap()
        .with_state(first.state());
    let response = second.complete(&req).unwrap();
    assert!(
        response
            .tool_calls()
            .any(|c| c.name == "transition_to_validateGenerated")
    );
    let err = second.complete(&req).unwrap_err().to_string();
    assert!(err.starts_with("no recording left in"), "{err}");
    assert!(err.contains("turn-2.json: tools [transition_to_validateGenerated, write_Generated], 1 message (already used)"), "{err}");
}

#[test]
fn a_missing_directory_or_a_bad_file_is_named() {
    let err = PlaybackClient::open("/nonexistent/recordings", PlaybackMode::Hybrid).unwrap_err();
    assert_eq!(
        err.to_string(),
        "recordings: recordings directory not found: /nonexistent/recordings"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("turn-1.json"), "{\"request\": 1}").unwrap();
    let err = PlaybackClient::open(dir.path(), PlaybackMode::Hybrid)
        .unwrap_err()
        .to_string();
    assert!(err.contains("turn-1.json is not a recording"), "{err}");
}

#[test]
fn an_empty_directory_misses_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let playback = PlaybackClient::open(dir.path(), PlaybackMode::Hybrid).unwrap();
    assert!(playback.is_empty());
    let err = playback
        .complete(&ChatRequest::new("m", vec![Message::user("hi")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("the directory holds no recordings"), "{err}");
}

#[test]
fn a_key_echoed_by_the_model_never_reaches_a_recording() {
    let key = "sk-echo-0123456789abcdef";
    let server = ScriptedServer::start([Reply::tool_calls([ToolCallSpec::new(
        "c1",
        "lookup",
        json!({"q": format!("use {key}")}),
    )])
    .with_text(&format!("Your key is {key}."))]);
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::new(client(&server, Protocol::OpenAi, fast_http()), dir.path())
        .unwrap()
        .with_redactor(llm::Redactor::new([key]));
    let req = ChatRequest::new("m", vec![Message::user(format!("my key: {key}"))]);
    let answer = recorder.complete(&req).unwrap();
    assert!(
        answer.text().contains(key),
        "the caller still gets the answer"
    );
    let text = std::fs::read_to_string(dir.path().join("turn-1.json")).unwrap();
    assert!(!text.contains(key), "{text}");
    assert!(text.matches("[REDACTED]").count() >= 3, "{text}");
}

fn nowhere_request() -> ChatRequest {
    ChatRequest::new("m", vec![Message::user("hi")]).with_tools(vec![ToolDefinition {
        name: "transition_to_nowhere".into(),
        description: String::new(),
        parameters: json!({}),
    }])
}

#[test]
fn hybrid_playback_can_refuse_recordings_made_for_other_tools() {
    let Some(sets) = upstream_sets() else { return };
    let dir = sets
        .into_iter()
        .find(|d| d.to_string_lossy().contains("template-simple"))
        .unwrap();
    // The original behaviour (dygram keeps it): the fallback serves the next recording anyway.
    let lenient = PlaybackClient::open(&dir, PlaybackMode::Hybrid).unwrap();
    assert!(lenient.complete(&nowhere_request()).is_ok());

    let strict = PlaybackClient::open(&dir, PlaybackMode::Hybrid)
        .unwrap()
        .require_offered_tools();
    let err = strict.complete(&nowhere_request()).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "turn-1.json was recorded with tools that are not offered now: \
             transition_to_compileReport, write_Report (recordings in "
        ),
        "{err}"
    );
    assert!(strict.state().used.is_empty(), "nothing was served");
}

#[test]
fn an_answer_calling_a_tool_not_offered_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Recorded against a server whose answer calls a tool the request did not offer.
    let server = ScriptedServer::start([Reply::tool_call("c1", "rm_rf", json!({}))]);
    let recorder =
        Recorder::new(client(&server, Protocol::OpenAi, fast_http()), dir.path()).unwrap();
    let request =
        ChatRequest::new("m", vec![Message::user("hi")]).with_tools(vec![ToolDefinition {
            name: "lookup".into(),
            description: String::new(),
            parameters: json!({}),
        }]);
    recorder.complete(&request).unwrap();
    let strict = PlaybackClient::open(dir.path(), PlaybackMode::Hybrid)
        .unwrap()
        .require_offered_tools();
    let err = strict.complete(&request).unwrap_err().to_string();
    assert!(
        err.starts_with("turn-1.json answers with calls to tools that are not offered now: rm_rf"),
        "{err}"
    );
}

#[test]
fn used_up_recordings_say_so_and_a_saved_state_can_be_restored() {
    let server = ScriptedServer::start(script());
    let dir = tempfile::tempdir().unwrap();
    let exchanges = scripted_exchanges(&server, Protocol::OpenAi, dir.path());
    let first = PlaybackClient::open(dir.path(), PlaybackMode::Hybrid).unwrap();
    for (req, _) in &exchanges {
        first.complete(req).unwrap();
    }
    let err = first.complete(&exchanges[0].0).unwrap_err().to_string();
    assert!(err.starts_with("the recordings in "), "{err}");
    assert!(err.contains("are used up: all 3 have been served"), "{err}");
    // Another client continues from the first one's state.
    let second = PlaybackClient::open(dir.path(), PlaybackMode::Hybrid).unwrap();
    let mut state = first.state();
    state.used.pop();
    second.set_state(state);
    assert_eq!(second.complete(&exchanges[2].0).unwrap(), exchanges[2].1);
    assert!(second.complete(&exchanges[2].0).is_err());
}
