//! Property tests: the SSE parser against arbitrary chunk boundaries.

use llm::sse::{SseEvent, SseParser};
use proptest::prelude::*;

fn arb_event() -> impl Strategy<Value = (Option<String>, Vec<String>, bool)> {
    (
        proptest::option::of("[a-z_]{1,12}"),
        proptest::collection::vec("[^\r\n]{0,24}", 1..4),
        any::<bool>(),
    )
}

fn encode(events: &[(Option<String>, Vec<String>, bool)], crlf: bool) -> Vec<u8> {
    let nl = if crlf { "\r\n" } else { "\n" };
    let mut out = String::new();
    for (name, lines, comment) in events {
        if *comment {
            out.push_str(&format!(": keep-alive{nl}"));
        }
        if let Some(name) = name {
            out.push_str(&format!("event: {name}{nl}"));
        }
        for line in lines {
            out.push_str(&format!("data: {line}{nl}"));
        }
        out.push_str(nl);
    }
    out.into_bytes()
}

fn expected(events: &[(Option<String>, Vec<String>, bool)]) -> Vec<SseEvent> {
    events
        .iter()
        .map(|(name, lines, _)| SseEvent {
            event: name.clone(),
            data: lines.join("\n"),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn any_chunking_yields_the_same_events(
        events in proptest::collection::vec(arb_event(), 0..8),
        crlf in any::<bool>(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let bytes = encode(&events, crlf);
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        points.sort_unstable();
        points.dedup();
        let mut parser = SseParser::new();
        let mut got = Vec::new();
        let mut start = 0;
        for p in points.into_iter().chain(std::iter::once(bytes.len())) {
            got.extend(parser.feed(&bytes[start..p]));
            start = p;
        }
        got.extend(parser.finish());
        prop_assert_eq!(got, expected(&events));
    }

    #[test]
    fn byte_at_a_time_equals_all_at_once(events in proptest::collection::vec(arb_event(), 0..6)) {
        let bytes = encode(&events, false);
        let mut whole = SseParser::new();
        let mut a = whole.feed(&bytes);
        a.extend(whole.finish());
        let mut single = SseParser::new();
        let mut b = Vec::new();
        for byte in &bytes {
            b.extend(single.feed(std::slice::from_ref(byte)));
        }
        b.extend(single.finish());
        prop_assert_eq!(a, b);
    }
}
