//! Live feedback: on a terminal the model's text streams in as it arrives (asked for with
//! `"stream": true`, asked again without when the server refuses), a line counts the seconds while
//! the model works, and retries are announced on any stderr (not with -q).

use std::time::Duration;

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use super::answers::ORDER;
use super::support::Dir;

fn order_with(server: &ScriptedServer) -> Dir {
    let mut d = Dir::with_file("order.dy", ORDER);
    d.env("OPENAI_BASE_URL", &server.openai_base());
    d.env("OPENAI_API_KEY", "sk-feedback-test");
    d
}

/// One answer that writes the order's total and ships it.
fn charge_and_ship() -> Reply {
    Reply::tool_calls([
        ToolCallSpec::new("c1", "write_order", json!({"data": {"total": 7}})),
        ToolCallSpec::new("c2", "transition_to_shipped", json!({})),
    ])
}

fn streamed(server: &ScriptedServer) -> Vec<bool> {
    server
        .requests()
        .iter()
        .map(|r| r.json()["stream"] == json!(true))
        .collect()
}

#[test]
fn on_a_terminal_the_text_streams_in_after_a_waiting_line() {
    let server = ScriptedServer::start([
        Reply::tool_call("w", "write_order", json!({"data": {"total": 7}}))
            .with_text("Charging the card now.")
            .fragment(3)
            .delay(Duration::from_millis(1600)),
        Reply::tool_call("t", "transition_to_shipped", json!({})),
    ]);
    let d = order_with(&server);
    let Some(screen) = d.run_on_terminal(&["e", "order.dy", "--provider", "openai"]) else {
        return;
    };
    assert_eq!(streamed(&server), [true, true], "{screen}");
    assert!(
        screen.contains("⏳ waiting for gpt-4o-mini at charge: 1s"),
        "{screen:?}"
    );
    assert!(screen.contains("[path_0]   model: "), "{screen:?}");
    assert!(screen.contains("Charging the card now.\n"), "{screen:?}");
    // Shown once, as it came, not again as a summary line.
    assert_eq!(screen.matches("model: ").count(), 1, "{screen:?}");
    assert!(screen.contains("completed at shipped"), "{screen:?}");
}

#[test]
fn without_a_terminal_nothing_is_streamed() {
    let server = ScriptedServer::start([charge_and_ship()]);
    let d = order_with(&server);
    let out = d.run(&["e", "order.dy", "--provider", "openai"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(streamed(&server), [false], "{out:?}");
    assert!(!out.stderr.contains("waiting for"), "{out:?}");
}

#[test]
fn a_server_that_cannot_stream_with_tools_is_asked_again_without() {
    // A refusal, and what llama.cpp's servers do: an empty 200, or a stream with nothing but the
    // role and its end marker.
    let role_only = || {
        let chunk = json!({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": null}]});
        Reply::raw(
            200,
            "text/event-stream",
            &format!("data: {chunk}\n\ndata: [DONE]\n\n"),
        )
    };
    for refusal in [
        || Reply::error(400, "streaming is not supported with tools"),
        Reply::empty_ok,
        role_only,
    ] {
        let server = ScriptedServer::responding(move |request: &Value| {
            if request["stream"] == json!(true) {
                return refusal();
            }
            charge_and_ship()
        });
        let d = order_with(&server);
        let Some(screen) = d.run_on_terminal(&["e", "order.dy", "--provider", "openai"]) else {
            return;
        };
        // Refused once; asked whole from then on.
        assert_eq!(streamed(&server), [true, false], "{screen:?}");
        assert!(screen.contains("completed at shipped"), "{screen:?}");
    }
}

#[test]
fn retries_are_announced_unless_quiet() {
    let busy = || Reply::error(503, "overloaded").header("retry-after", "0");
    for quiet in [false, true] {
        let server = ScriptedServer::start([busy(), charge_and_ship()]);
        let d = order_with(&server);
        let mut args = vec!["e", "order.dy", "--provider", "openai"];
        if quiet {
            args.push("-q");
        }
        let out = d.run(&args);
        assert_eq!(out.code, 0, "{out:?}");
        let announced = out.stderr.contains("↻ attempt 1 of 3 failed (");
        assert_eq!(announced, !quiet, "{out:?}");
        assert!(!out.stderr.contains("sk-feedback-test"), "{out:?}");
    }
    // Turn by turn: the first call moves to `charge`, the second asks the model.
    let server = ScriptedServer::start([busy(), charge_and_ship()]);
    let d = order_with(&server);
    let call = ["e", "-i", "order.dy", "--id", "r", "--provider", "openai"];
    assert_eq!(d.run(&call).code, 0);
    let out = d.run(&call);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("↻ attempt 1 of 3 failed ("), "{out:?}");
}

#[test]
fn turn_by_turn_on_a_terminal_streams_the_text_too() {
    let server = ScriptedServer::start([charge_and_ship().with_text("Shipping it.")]);
    let d = order_with(&server);
    let call = ["e", "-i", "order.dy", "--id", "t", "--provider", "openai"];
    assert_eq!(d.run(&call).code, 0);
    let Some(screen) = d.run_on_terminal(&call) else {
        return;
    };
    assert_eq!(streamed(&server), [true], "{screen:?}");
    let streamed_line = screen.find("model: ").map(|at| &screen[at..]);
    assert!(
        streamed_line.is_some_and(|l| l.contains("Shipping it.\n📍 Turn 1")),
        "{screen:?}"
    );
    // The call's report follows on stdout, as without a terminal.
    assert!(screen.contains("now at shipped"), "{screen:?}");
}
