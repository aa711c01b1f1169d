//! The same behaviour, checked for both wire protocols against the scripted server.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llm::{
    ChatRequest, ContentBlock, HttpOptions, LlmError, Message, StopReason, StreamEvent, ToolChoice,
    ToolDefinition, Usage,
};
use serde_json::{Value, json};
use testkit::{Protocol, Reply, ScriptedServer, ToolCallSpec};

use crate::support::{KEY, client, fast_http, idle_http};

fn weather_tool() -> ToolDefinition {
    ToolDefinition {
        name: "get_weather".into(),
        description: "Weather for a city".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    }
}

fn request() -> ChatRequest {
    ChatRequest::new(
        "test-model",
        vec![
            Message::system("Be terse."),
            Message::user("Weather in Paris and Oslo?"),
        ],
    )
    .with_tools(vec![weather_tool()])
}

/// Defines one test per protocol for each listed function `fn name(protocol: Protocol)`.
macro_rules! both_protocols {
    ($($name:ident),* $(,)?) => {
        mod openai {
            $( #[test] fn $name() { super::$name(testkit::Protocol::OpenAi) } )*
        }
        mod anthropic {
            $( #[test] fn $name() { super::$name(testkit::Protocol::Anthropic) } )*
        }
    };
}

both_protocols!(
    plain_answer,
    several_tool_calls_in_one_answer,
    streaming_with_fragmented_tool_arguments,
    streaming_plain_text_over_a_trickling_connection,
    follow_up_turn_carries_tool_results,
    bad_request_surfaces_the_server_message,
    unauthorized_is_not_retried_and_the_key_never_leaks,
    rate_limit_with_retry_after_is_retried,
    server_error_is_retried_then_fails,
    server_error_then_success_recovers,
    timeout_is_reported_and_not_retried,
    stream_cut_before_its_end_is_an_error,
    unreachable_server_is_a_transport_error,
    retry_hook_is_told_about_each_retry,
    a_connection_lost_after_sending_is_retried,
    the_key_never_leaks_from_stream_errors,
    a_json_answer_to_a_streaming_request_is_accepted,
    a_body_that_is_not_an_event_stream_is_shown,
    a_whole_answer_may_take_longer_than_the_idle_limit_to_begin,
    a_stream_silent_before_its_headers_hits_the_idle_timeout,
    a_whole_answer_that_stalls_after_its_headers_hits_the_idle_timeout,
    a_stream_that_stalls_hits_the_idle_timeout,
    a_garbage_error_body_is_escaped_and_truncated,
    a_garbage_answer_is_escaped_and_truncated,
);

fn plain_answer(protocol: Protocol) {
    let server = ScriptedServer::start([Reply::text("Sunny.").usage(12, 3)]);
    let response = client(&server, protocol, fast_http())
        .complete(&ChatRequest::new("test-model", vec![Message::user("hi")]))
        .unwrap();
    assert_eq!(response.content, vec![ContentBlock::text("Sunny.")]);
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 12,
            output_tokens: 3
        }
    );
    assert_eq!(response.model.as_deref(), Some("test-model"));

    let sent = &server.requests()[0];
    let body = sent.json();
    assert_eq!(body["model"], "test-model");
    assert!(
        body.get("temperature").is_none(),
        "unset temperature must be omitted: {body}"
    );
    assert!(body.get("stream").is_none());
    match protocol {
        Protocol::OpenAi => {
            assert_eq!(sent.path, "/v1/chat/completions");
            assert_eq!(
                sent.header("authorization"),
                Some(format!("Bearer {KEY}").as_str())
            );
            assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
            assert!(
                body.get("max_tokens").is_none(),
                "unset max_tokens must be omitted: {body}"
            );
        }
        Protocol::Anthropic => {
            assert_eq!(sent.path, "/v1/messages");
            assert_eq!(sent.header("x-api-key"), Some(KEY));
            assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
            assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
            assert_eq!(
                body["max_tokens"], 4096,
                "Anthropic requires max_tokens; a default is sent"
            );
        }
    }
}

fn several_tool_calls_in_one_answer(protocol: Protocol) {
    let server = ScriptedServer::start([Reply::tool_calls([
        ToolCallSpec::new("call_a", "get_weather", json!({"city": "Paris"})),
        ToolCallSpec::new("call_b", "get_weather", json!({"city": "Oslo"})),
    ])
    .with_text("Checking both.")]);
    let response = client(&server, protocol, fast_http())
        .complete(&request())
        .unwrap();
    assert_eq!(
        response.content,
        vec![
            ContentBlock::text("Checking both."),
            ContentBlock::tool_call("call_a", "get_weather", json!({"city": "Paris"})),
            ContentBlock::tool_call("call_b", "get_weather", json!({"city": "Oslo"})),
        ]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    let body = server.requests()[0].json();
    match protocol {
        Protocol::OpenAi => {
            assert_eq!(body["tool_choice"], "auto");
            assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
            assert_eq!(
                body["messages"][0],
                json!({"role": "system", "content": "Be terse."})
            );
        }
        Protocol::Anthropic => {
            assert_eq!(body["tool_choice"], json!({"type": "auto"}));
            assert_eq!(
                body["tools"][0]["input_schema"]["required"],
                json!(["city"])
            );
            assert_eq!(body["system"], "Be terse.");
        }
    }
}

fn streaming_with_fragmented_tool_arguments(protocol: Protocol) {
    // Two-character fragments, the llama.cpp habit of repeating id and name in every delta, and a body
    // written a few bytes at a time so events straddle network reads.
    let server = ScriptedServer::start([Reply::tool_calls([
        ToolCallSpec::new(
            "call_a",
            "get_weather",
            json!({"city": "Paris", "units": "metric"}),
        ),
        ToolCallSpec::new("call_b", "get_weather", json!({"city": "Oslo"})),
    ])
    .with_text("Let me look.")
    .fragment(2)
    .repeat_tool_ids()
    .trickle(7)
    .usage(40, 17)]);
    let mut events = Vec::new();
    let response = client(&server, protocol, fast_http())
        .complete_streaming(&request(), &mut |e| events.push(e))
        .unwrap();
    assert_eq!(
        response.content,
        vec![
            ContentBlock::text("Let me look."),
            ContentBlock::tool_call(
                "call_a",
                "get_weather",
                json!({"city": "Paris", "units": "metric"})
            ),
            ContentBlock::tool_call("call_b", "get_weather", json!({"city": "Oslo"})),
        ]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 40,
            output_tokens: 17
        }
    );
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Let me look.");
    let started: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallStarted { index, name } => Some((*index, name.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(started, vec![(0, "get_weather"), (1, "get_weather")]);
    let body = server.requests()[0].json();
    assert_eq!(body["stream"], true);
    if protocol == Protocol::OpenAi {
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
    }
}

fn streaming_plain_text_over_a_trickling_connection(protocol: Protocol) {
    let text = "Überall sonnig — 21 °C in Paris, 9 °C in Oslo.";
    let server = ScriptedServer::start([Reply::text(text).fragment(3).trickle(1)]);
    let mut deltas = String::new();
    let response = client(&server, protocol, fast_http())
        .complete_streaming(&request(), &mut |e| {
            if let StreamEvent::TextDelta(t) = e {
                deltas.push_str(&t);
            }
        })
        .unwrap();
    assert_eq!(response.text(), text);
    assert_eq!(deltas, text);
    assert_eq!(response.stop_reason, StopReason::EndTurn);
}

fn follow_up_turn_carries_tool_results(protocol: Protocol) {
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "get_weather", json!({"city": "Paris"})),
        Reply::text("It is sunny in Paris."),
    ]);
    let client = client(&server, protocol, fast_http());
    let mut req = request();
    let first = client.complete(&req).unwrap();
    req.messages.push(first.to_message());
    req.messages
        .push(Message::tool_results(vec![ContentBlock::tool_result(
            "call_1",
            "sunny, 21C",
            false,
        )]));
    let second = client.complete(&req).unwrap();
    assert_eq!(second.text(), "It is sunny in Paris.");
    let body = server.requests()[1].json();
    match protocol {
        Protocol::OpenAi => {
            let assistant = &body["messages"][2];
            assert_eq!(assistant["role"], "assistant");
            assert_eq!(
                assistant["content"], "",
                "tool-call turns carry an empty string, never null"
            );
            assert_eq!(
                assistant["tool_calls"][0]["function"]["arguments"],
                r#"{"city":"Paris"}"#
            );
            assert_eq!(
                body["messages"][3],
                json!({"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21C"})
            );
        }
        Protocol::Anthropic => {
            assert_eq!(
                body["messages"][1]["content"][0],
                json!({"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}})
            );
            assert_eq!(
                body["messages"][2],
                json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "sunny, 21C"}]})
            );
        }
    }
}

fn bad_request_surfaces_the_server_message(protocol: Protocol) {
    let server = ScriptedServer::start([
        Reply::error(400, "messages: field required"),
        Reply::text("unused"),
    ]);
    let err = client(&server, protocol, fast_http())
        .complete(&request())
        .unwrap_err();
    assert!(
        matches!(err, LlmError::BadRequest { status: 400, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("messages: field required"),
        "{err}"
    );
    assert_eq!(server.request_count(), 1, "4xx is never retried");
}

fn unauthorized_is_not_retried_and_the_key_never_leaks(protocol: Protocol) {
    let server = ScriptedServer::start([
        Reply::error(401, &format!("Incorrect API key provided: {KEY}")),
        Reply::text("unused"),
    ]);
    let client = client(&server, protocol, fast_http());
    let err = client.complete(&request()).unwrap_err();
    assert!(matches!(err, LlmError::Auth { status: 401, .. }), "{err:?}");
    assert_eq!(server.request_count(), 1);
    for text in [
        err.to_string(),
        format!("{err:?}"),
        format!("{client:?}", client = client.describe()),
    ] {
        assert!(!text.contains(KEY), "the key leaked: {text}");
    }
    assert!(err.to_string().contains("[REDACTED]"), "{err}");
}

fn rate_limit_with_retry_after_is_retried(protocol: Protocol) {
    let server = ScriptedServer::start([
        Reply::error(429, "slow down").header("Retry-After", "1"),
        Reply::text("finally"),
    ]);
    let start = Instant::now();
    let response = client(&server, protocol, fast_http())
        .complete(&request())
        .unwrap();
    assert_eq!(response.text(), "finally");
    assert_eq!(server.request_count(), 2);
    assert!(
        start.elapsed() >= Duration::from_secs(1),
        "Retry-After: 1 was not honoured"
    );
}

fn server_error_is_retried_then_fails(protocol: Protocol) {
    let server = ScriptedServer::start([
        Reply::error(500, "upstream exploded"),
        Reply::error(502, "bad gateway"),
        Reply::error(503, "still down"),
        Reply::text("too late"),
    ]);
    let err = client(&server, protocol, fast_http())
        .complete(&request())
        .unwrap_err();
    assert!(
        matches!(err, LlmError::Server { status: 503, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("still down"), "{err}");
    assert_eq!(server.request_count(), 3, "3 attempts in total by default");
}

fn server_error_then_success_recovers(protocol: Protocol) {
    let server = ScriptedServer::start([Reply::error(500, "blip"), Reply::text("ok")]);
    let response = client(&server, protocol, fast_http())
        .complete(&request())
        .unwrap();
    assert_eq!(response.text(), "ok");
    assert_eq!(server.request_count(), 2);
}

fn timeout_is_reported_and_not_retried(protocol: Protocol) {
    let server = ScriptedServer::start([
        Reply::text("late").delay(Duration::from_secs(3)),
        Reply::text("unused"),
    ]);
    let http = HttpOptions {
        timeout: Duration::from_millis(300),
        ..fast_http()
    };
    let start = Instant::now();
    let err = client(&server, protocol, http)
        .complete(&request())
        .unwrap_err();
    assert!(matches!(err, LlmError::Timeout { .. }), "{err:?}");
    assert_eq!(err.to_string(), "no complete response within 300 ms");
    assert!(start.elapsed() < Duration::from_secs(2));
    assert_eq!(server.request_count(), 1);
}

fn stream_cut_before_its_end_is_an_error(protocol: Protocol) {
    let server = ScriptedServer::start([
        Reply::text("This answer will be cut").cut_stream_after(4),
        Reply::empty_ok(),
    ]);
    let client = client(&server, protocol, fast_http());
    let mut deltas = 0;
    let err = client
        .complete_streaming(&request(), &mut |_| deltas += 1)
        .unwrap_err();
    assert!(matches!(err, LlmError::IncompleteStream { .. }), "{err:?}");
    assert!(
        deltas > 0,
        "the part that arrived was still reported as it came"
    );
    // HTTP 200 with an empty body (llama.cpp does this) is not an empty answer either.
    let err = client
        .complete_streaming(&request(), &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, LlmError::IncompleteStream { .. }), "{err:?}");
    assert!(err.to_string().contains("no events"), "{err}");
}

fn unreachable_server_is_a_transport_error(protocol: Protocol) {
    let server = ScriptedServer::start([]);
    let http = fast_http();
    let client = client(&server, protocol, http);
    drop(server);
    // Give the listener a moment to close.
    std::thread::sleep(Duration::from_millis(50));
    let err = client.complete(&request()).unwrap_err();
    assert!(matches!(err, LlmError::Transport { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("cannot reach http://127.0.0.1:"),
        "{err}"
    );
}

fn retry_hook_is_told_about_each_retry(protocol: Protocol) {
    let server = ScriptedServer::start([
        Reply::error(503, "a"),
        Reply::error(429, "b"),
        Reply::text("c"),
    ]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let http = HttpOptions {
        on_retry: Some(Arc::new(move |n| {
            sink.lock()
                .unwrap()
                .push((n.attempt, n.max_attempts, n.error.clone()))
        })),
        ..fast_http()
    };
    client(&server, protocol, http)
        .complete(&request())
        .unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!((seen[0].0, seen[0].1), (1, 3));
    assert!(seen[0].2.contains("HTTP 503"), "{}", seen[0].2);
    assert!(seen[1].2.contains("HTTP 429"), "{}", seen[1].2);
}

#[test]
fn openai_stream_ending_without_a_finish_reason_is_truncated() {
    let server = ScriptedServer::start([Reply::text("Once upon a time").omit_finish_reason()]);
    let err = client(&server, Protocol::OpenAi, fast_http())
        .complete_streaming(&request(), &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, LlmError::IncompleteStream { .. }), "{err:?}");
    assert!(err.to_string().contains("truncated"), "{err}");
}

#[test]
fn forced_tool_choice_shapes() {
    let server = ScriptedServer::start([
        Reply::tool_call("c", "get_weather", json!({"city": "Rome"})),
        Reply::tool_call("c", "get_weather", json!({"city": "Rome"})),
    ]);
    let req = request().with_tool_choice(ToolChoice::Tool("get_weather".into()));
    client(&server, Protocol::OpenAi, fast_http())
        .complete(&req)
        .unwrap();
    client(&server, Protocol::Anthropic, fast_http())
        .complete(&req)
        .unwrap();
    let requests = server.requests();
    assert_eq!(
        requests[0].json()["tool_choice"],
        json!({"type": "function", "function": {"name": "get_weather"}})
    );
    assert_eq!(
        requests[1].json()["tool_choice"],
        json!({"type": "tool", "name": "get_weather"})
    );
}

#[test]
fn openai_answers_with_invalid_tool_arguments_keep_the_raw_text() {
    let body = json!({"choices": [{"message": {"content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1"}}]},
        "finish_reason": "tool_calls"}]});
    let server = ScriptedServer::start([Reply::raw(200, "application/json", &body.to_string())]);
    let response = client(&server, Protocol::OpenAi, fast_http())
        .complete(&request())
        .unwrap();
    assert_eq!(
        response.content,
        vec![ContentBlock::tool_call(
            "c1",
            "f",
            Value::String("{\"a\": 1".into())
        )]
    );
}

#[test]
fn undecodable_answers_are_decode_errors() {
    let server = ScriptedServer::start([Reply::raw(200, "text/html", "<html>proxy login</html>")]);
    let err = client(&server, Protocol::OpenAi, fast_http())
        .complete(&request())
        .unwrap_err();
    assert!(matches!(err, LlmError::Decode { .. }), "{err:?}");
    assert!(err.to_string().contains("proxy login"), "{err}");
}

fn a_connection_lost_after_sending_is_retried(protocol: Protocol) {
    // The server read the request and closed the connection without an answer: a model call has
    // no effect beyond its cost, so it is asked again (at worst paying twice).
    let server = ScriptedServer::start([Reply::hang_up(), Reply::text("second try")]);
    let response = client(&server, protocol, fast_http())
        .complete(&request())
        .unwrap();
    assert_eq!(response.text(), "second try");
    assert_eq!(server.request_count(), 2);
    // A server that keeps hanging up fails the call after the policy's attempts.
    let server = ScriptedServer::start([Reply::hang_up(), Reply::hang_up(), Reply::hang_up()]);
    let err = client(&server, protocol, fast_http())
        .complete(&request())
        .unwrap_err();
    assert!(matches!(err, LlmError::ConnectionLost { .. }), "{err:?}");
    assert!(
        err.to_string().contains("broke before an answer arrived"),
        "{err}"
    );
    assert_eq!(server.request_count(), 3);
}

fn the_key_never_leaks_from_stream_errors(protocol: Protocol) {
    let event = match protocol {
        Protocol::OpenAi => format!(
            "data: {}\n\n",
            json!({"error": {"message": format!("bad key {KEY}")}})
        ),
        Protocol::Anthropic => format!(
            "event: error\ndata: {}\n\n",
            json!({"type": "error", "error": {"type": "authentication_error", "message": format!("bad key {KEY}")}})
        ),
    };
    let garbage = format!("data: {{not json {KEY}\n\n");
    let server = ScriptedServer::start([
        Reply::raw(200, "text/event-stream", &event),
        Reply::raw(200, "text/event-stream", &garbage),
        Reply::raw(200, "application/json", &format!("{{\"oops\": \"{KEY}\"")),
    ]);
    let client = client(&server, protocol, fast_http());
    let stream_error = client
        .complete_streaming(&request(), &mut |_| {})
        .unwrap_err();
    assert!(
        matches!(stream_error, LlmError::StreamError { .. }),
        "{stream_error:?}"
    );
    let decode_error = client
        .complete_streaming(&request(), &mut |_| {})
        .unwrap_err();
    assert!(
        matches!(decode_error, LlmError::Decode { .. }),
        "{decode_error:?}"
    );
    let plain_decode_error = client.complete(&request()).unwrap_err();
    for err in [stream_error, decode_error, plain_decode_error] {
        let text = format!("{err} / {err:?}");
        assert!(!text.contains(KEY), "the key leaked: {text}");
        assert!(text.contains("[REDACTED]"), "{text}");
    }
}

fn a_json_answer_to_a_streaming_request_is_accepted(protocol: Protocol) {
    // Some servers ignore `stream: true` and answer with one JSON document.
    let body = match protocol {
        Protocol::OpenAi => {
            json!({"choices": [{"message": {"content": "whole"}, "finish_reason": "stop"}]})
        }
        Protocol::Anthropic => {
            json!({"content": [{"type": "text", "text": "whole"}], "stop_reason": "end_turn"})
        }
    };
    let server = ScriptedServer::start([Reply::raw(200, "application/json", &body.to_string())]);
    let mut deltas = Vec::new();
    let response = client(&server, protocol, fast_http())
        .complete_streaming(&request(), &mut |e| deltas.push(e))
        .unwrap();
    assert_eq!(response.text(), "whole");
    assert_eq!(deltas, vec![StreamEvent::TextDelta("whole".into())]);
}

fn a_body_that_is_not_an_event_stream_is_shown(protocol: Protocol) {
    let server =
        ScriptedServer::start([Reply::raw(200, "text/html", "<html>captive portal</html>")]);
    let err = client(&server, protocol, fast_http())
        .complete_streaming(&request(), &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, LlmError::Decode { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("not an event stream (content type text/html)"),
        "{text}"
    );
    assert!(text.contains("<html>captive portal</html>"), "{text}");
}

#[test]
fn clients_never_show_their_key_in_debug_output() {
    use llm::ApiKey;
    use llm::anthropic::{AnthropicClient, AnthropicConfig};
    use llm::openai::{OpenAiClient, OpenAiConfig};
    let openai = OpenAiClient::new(OpenAiConfig::new(
        "http://127.0.0.1:9/v1",
        Some(ApiKey::new(KEY)),
    ));
    let anthropic =
        AnthropicClient::new(AnthropicConfig::new("http://127.0.0.1:9", ApiKey::new(KEY)));
    for text in [format!("{openai:?}"), format!("{anthropic:?}")] {
        assert!(!text.contains(KEY), "{text}");
        assert!(text.contains("ApiKey([REDACTED])"), "{text}");
    }
}

/// No control character (escape sequences, bells, bidi overrides) and at most `max` characters.
fn assert_printable(text: &str, max: usize) {
    assert!(
        !text.chars().any(|c| c.is_control()
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)),
        "raw control characters would reach the terminal: {text:?}"
    );
    assert!(
        text.chars().count() <= max,
        "{} characters: {text:?}",
        text.chars().count()
    );
}

fn a_whole_answer_may_take_longer_than_the_idle_limit_to_begin(protocol: Protocol) {
    // A non-streamed answer comes once the model has finished: thinking is not stalling.
    let server = ScriptedServer::start([Reply::text("late").delay(Duration::from_millis(900))]);
    let response = client(&server, protocol, idle_http(Duration::from_millis(300)))
        .complete(&request())
        .unwrap();
    assert_eq!(response.text(), "late");
}

fn a_stream_silent_before_its_headers_hits_the_idle_timeout(protocol: Protocol) {
    let server = ScriptedServer::start([
        Reply::text("late").delay(Duration::from_secs(4)),
        Reply::text("unused"),
    ]);
    let start = Instant::now();
    let err = client(&server, protocol, idle_http(Duration::from_millis(300)))
        .complete_streaming(&request(), &mut |_| {})
        .unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "waited {:?}",
        start.elapsed()
    );
    assert_eq!(
        err.to_string(),
        "the server sent nothing for 300 ms (idle timeout)"
    );
    assert!(!err.is_retryable());
    assert_eq!(server.request_count(), 1);
}

fn a_whole_answer_that_stalls_after_its_headers_hits_the_idle_timeout(protocol: Protocol) {
    let server = ScriptedServer::start([
        Reply::text("an answer that stalls").stall(0, Duration::from_secs(4)),
        Reply::text("unused"),
    ]);
    let start = Instant::now();
    let err = client(&server, protocol, idle_http(Duration::from_millis(300)))
        .complete(&request())
        .unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "waited {:?}",
        start.elapsed()
    );
    assert!(err.to_string().contains("sent nothing for 300 ms"), "{err}");
    assert!(!err.is_retryable());
    assert_eq!(server.request_count(), 1);
}

fn a_stream_that_stalls_hits_the_idle_timeout(protocol: Protocol) {
    let server = ScriptedServer::start([
        Reply::text("an answer that stalls half way").stall(3, Duration::from_secs(4)),
        Reply::text("unused"),
    ]);
    let start = Instant::now();
    let mut deltas = 0;
    let err = client(&server, protocol, idle_http(Duration::from_millis(300)))
        .complete_streaming(&request(), &mut |_| deltas += 1)
        .unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "waited {:?}",
        start.elapsed()
    );
    assert!(err.to_string().contains("sent nothing for 300 ms"), "{err}");
    assert_eq!(server.request_count(), 1);
}

/// Terminal escape sequences, a bell, a NUL, a C1 control and a bidi override, then `len` letters.
fn garbage_of(len: usize) -> String {
    format!(
        "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{0}\u{9b}31m\u{202e}evil\r\n{}",
        "A".repeat(len)
    )
}

fn garbage() -> String {
    garbage_of(200_000)
}

fn a_garbage_error_body_is_escaped_and_truncated(protocol: Protocol) {
    // A JSON error whose message is the garbage (small enough to be read whole and parsed).
    let json_garbage = json!({"error": {"message": garbage_of(20_000)}}).to_string();
    let server = ScriptedServer::start([
        Reply::raw(400, "application/octet-stream", &garbage()),
        Reply::raw(400, "application/json", &json_garbage),
    ]);
    let client = client(&server, protocol, fast_http());
    for _ in 0..2 {
        let err = client.complete(&request()).unwrap_err();
        let text = err.to_string();
        assert_printable(&text, 1200);
        assert!(text.contains("\\x1b]0;pwned\\x07"), "{text}");
        assert!(text.contains("\\u{202e}evil\\r\\n"), "{text}");
        let body = err
            .response_body()
            .expect("the body is kept for the record");
        assert!(body.starts_with(b"\x1b]0;pwned") || body.starts_with(b"{\"error\""));
    }
}

fn a_garbage_answer_is_escaped_and_truncated(protocol: Protocol) {
    let server = ScriptedServer::start([
        Reply::raw(200, "application/json", &garbage()),
        Reply::raw(200, "text/plain", &garbage()),
    ]);
    let client = client(&server, protocol, fast_http());
    let err = client.complete(&request()).unwrap_err();
    assert!(matches!(err, LlmError::Decode { .. }), "{err:?}");
    assert_printable(&err.to_string(), 1200);
    let err = client
        .complete_streaming(&request(), &mut |_| {})
        .unwrap_err();
    assert_printable(&err.to_string(), 1200);
    assert!(err.to_string().contains("\\x1b[2J"), "{err}");
}

/// Randomised and bounded: streams stalled at random points, with random fragment sizes and idle
/// limits, always end with `Idle` within the limit plus a margin, never with a short answer. The
/// seed is printed so that a failure can be replayed (`STALL_SEED=…`).
#[test]
fn streams_stalled_anywhere_end_with_the_idle_error_in_time() {
    const TRIALS: usize = 8;
    let seed = std::env::var("STALL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!("STALL_SEED={seed}");
    let mut state = seed | 1;
    let mut next = |bound: u64| {
        // xorshift64: enough to vary the trials.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    };
    for trial in 0..TRIALS {
        let protocol = if next(2) == 0 {
            Protocol::OpenAi
        } else {
            Protocol::Anthropic
        };
        let fragment = 1 + next(8) as usize;
        let stall_at = next(9) as usize; // every answer here has more than 9 events
        let idle = Duration::from_millis(150 + next(250));
        let server = ScriptedServer::start([Reply::text("a reply long enough to be cut anywhere")
            .fragment(fragment)
            .stall(stall_at, Duration::from_secs(5))]);
        let start = Instant::now();
        let err = client(&server, protocol, idle_http(idle))
            .complete_streaming(&request(), &mut |_| {})
            .unwrap_err();
        let took = start.elapsed();
        let context = format!(
            "seed {seed}, trial {trial}: {protocol:?}, fragment {fragment}, stall at event {stall_at}, idle {idle:?}"
        );
        assert!(
            matches!(err, LlmError::Idle { after } if after == idle),
            "{context}: {err:?}"
        );
        assert!(took >= idle, "{context}: gave up after {took:?}");
        assert!(
            took < idle + Duration::from_millis(1500),
            "{context}: took {took:?}"
        );
    }
}
