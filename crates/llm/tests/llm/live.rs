//! The live tier: a real OpenAI-compatible server (llama.cpp's, with a tiny model), run when
//! `LLM_E2E_URL` is set (e.g. by `.ci/run` after `../shared/tools/real-llm-server start`); without it
//! these tests say `SKIPPED` and return, unless `LLM_E2E_REQUIRED` is set, in which case they fail.
//! The model is tiny, so these tests check shapes and protocol, never wording (it sometimes writes
//! invalid JSON arguments, which the client keeps verbatim as a string).

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use llm::openai::{OpenAiClient, OpenAiConfig};
use llm::{
    ChatRequest, ContentBlock, HttpOptions, LlmClient, Message, StopReason, StreamEvent,
    ToolChoice, ToolDefinition,
};
use serde_json::json;

/// llama-cpp-python's server interrupts a running stream when another request arrives, so the live
/// tests take turns.
static SERVER: Mutex<()> = Mutex::new(());

fn live() -> Option<(OpenAiClient, String, MutexGuard<'static, ()>)> {
    // Says SKIPPED without a server (CI sets LLM_E2E_REQUIRED, which makes that a failure).
    let testkit::needs::LiveServer { url, model } = testkit::needs::live_server()?;
    let mut config = OpenAiConfig::new(url, None);
    config.http = HttpOptions {
        timeout: Duration::from_secs(120),
        ..HttpOptions::default()
    };
    let turn = SERVER.lock().unwrap_or_else(|p| p.into_inner());
    Some((OpenAiClient::new(config), model, turn))
}

fn weather_tool() -> ToolDefinition {
    ToolDefinition {
        name: "get_weather".into(),
        description: "Get the current weather for a city".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    }
}

#[test]
fn live_plain_answer() {
    let Some((client, model, _turn)) = live() else {
        return;
    };
    let req =
        ChatRequest::new(model, vec![Message::user("Say hello in one word.")]).with_max_tokens(16);
    let response = client.complete(&req).unwrap();
    assert!(!response.text().is_empty(), "{response:?}");
    assert!(
        matches!(
            response.stop_reason,
            StopReason::EndTurn | StopReason::MaxTokens
        ),
        "{response:?}"
    );
    assert!(
        response.usage.input_tokens > 0 && response.usage.output_tokens > 0,
        "{response:?}"
    );
}

#[test]
fn live_streaming() {
    let Some((client, model, _turn)) = live() else {
        return;
    };
    let req =
        ChatRequest::new(model, vec![Message::user("Count from one to five.")]).with_max_tokens(24);
    let mut deltas = String::new();
    let mut chunks = 0;
    let response = client
        .complete_streaming(&req, &mut |e| {
            if let StreamEvent::TextDelta(t) = e {
                deltas.push_str(&t);
                chunks += 1;
            }
        })
        .unwrap();
    assert!(chunks > 1, "a real stream arrives in several chunks");
    assert_eq!(deltas, response.text());
    assert!(!response.text().is_empty());
}

#[test]
fn live_forced_tool_call_and_follow_up_turn() {
    let Some((client, model, _turn)) = live() else {
        return;
    };
    let mut req = ChatRequest::new(model, vec![Message::user("What is the weather in Paris?")])
        .with_tools(vec![weather_tool()])
        .with_tool_choice(ToolChoice::Tool("get_weather".into()))
        .with_max_tokens(64)
        .with_temperature(0.0);
    let first = client.complete(&req).unwrap();
    let calls: Vec<_> = first.tool_calls().collect();
    assert_eq!(calls.len(), 1, "{first:?}");
    assert_eq!(calls[0].name, "get_weather");
    assert!(!calls[0].id.is_empty(), "{first:?}");
    assert_eq!(first.stop_reason, StopReason::ToolUse);

    // The follow-up turn: our assistant turn (tool calls, empty content) and the tool result must be
    // accepted by a strict server.
    let call_id = calls[0].id.to_string();
    req.messages.push(first.to_message());
    req.messages
        .push(Message::tool_results(vec![ContentBlock::tool_result(
            call_id,
            "Sunny, 21 degrees Celsius.",
            false,
        )]));
    req.tool_choice = ToolChoice::Auto;
    let second = client.complete(&req).unwrap();
    assert!(
        !second.content.is_empty(),
        "the server answered the follow-up turn with nothing: {second:?}"
    );
}

#[test]
fn live_streamed_forced_tool_call() {
    let Some((client, model, _turn)) = live() else {
        return;
    };
    let req = ChatRequest::new(model, vec![Message::user("Weather in Oslo?")])
        .with_tools(vec![weather_tool()])
        .with_tool_choice(ToolChoice::Tool("get_weather".into()))
        .with_max_tokens(64);
    let mut started = 0;
    let response = client
        .complete_streaming(&req, &mut |e| {
            if matches!(e, StreamEvent::ToolCallStarted { .. }) {
                started += 1;
            }
        })
        .unwrap();
    let calls: Vec<_> = response.tool_calls().collect();
    assert_eq!(calls.len(), 1, "{response:?}");
    assert_eq!(
        calls[0].name, "get_weather",
        "the repeated name must not be concatenated"
    );
    assert_eq!(started, 1);
    assert!(!calls[0].id.is_empty(), "{response:?}");
}
