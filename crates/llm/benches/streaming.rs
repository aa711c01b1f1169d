//! Streaming throughput: `cargo bench -p llm --bench streaming`.
//!
//! Parses a large OpenAI-style event stream with the SSE parser (fed in 1 KiB network-sized pieces),
//! and measures a whole streamed answer through the client against the scripted server on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use llm::openai::{OpenAiClient, OpenAiConfig};
use llm::sse::SseParser;
use llm::{ChatRequest, LlmClient, Message};
use testkit::{Reply, ScriptedServer};

fn main() {
    let chunk = r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":"word "},"finish_reason":null}]}"#;
    let mut stream = String::new();
    while stream.len() < 20_000_000 {
        stream.push_str(chunk);
        stream.push_str("\n\n");
    }
    let bytes = stream.as_bytes();
    let start = Instant::now();
    let mut parser = SseParser::new();
    let mut events = 0usize;
    for piece in bytes.chunks(1024) {
        events += parser.feed(piece).len();
    }
    events += parser.finish().len();
    let secs = start.elapsed().as_secs_f64();
    println!(
        "SSE parse (1 KiB pieces)           {events:>8} events  {:>7.1} MB/s  {:>9.0} events/s",
        bytes.len() as f64 / secs / 1e6,
        events as f64 / secs
    );

    let text = "lorem ipsum dolor sit amet ".repeat(40_000);
    let server = ScriptedServer::start([Reply::text(&text).fragment(5)]);
    let client = OpenAiClient::new(OpenAiConfig::new(server.openai_base(), None));
    let request = ChatRequest::new("m", vec![Message::user("go")]);
    let start = Instant::now();
    let mut deltas = 0usize;
    let response = client
        .complete_streaming(&request, &mut |_| deltas += 1)
        .unwrap();
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(response.text(), text);
    println!(
        "streamed answer over loopback      {deltas:>8} deltas  {:>7.1} MB/s  {:>9.0} deltas/s",
        text.len() as f64 / secs / 1e6,
        deltas as f64 / secs
    );
}
