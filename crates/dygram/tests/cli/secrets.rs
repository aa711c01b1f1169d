//! API keys never leave the process verbatim, even when the model echoes them: not in the files of a
//! saved execution, recordings, result files, queue requests, nor on stdout or stderr.

use std::path::Path;

use serde_json::json;
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use super::support::{Dir, Out};

const OPENAI_KEY: &str = "sk-test-OPENAI-5ecret-0123456789";
const ANTHROPIC_KEY: &str = "sk-ant-test-ANTHROPIC-5ecret-987";

const MACHINE: &str = "machine \"Order flow\"
Context order { total<number>: 0; note<string>: \"\"; }
Task charge \"Charge the card\" { prompt: \"Charge {{ order.total }}\"; }
State shipped;
start -> charge -when: 'order.total > 0'-> shipped;
charge -writes-> order;
";

/// A model that echoes the key in its text, in tool input and in a transition's reason.
fn echoing_model() -> ScriptedServer {
    ScriptedServer::start([
        Reply::tool_calls([ToolCallSpec::new(
            "w1",
            "write_order",
            json!({"data": {"total": 42, "note": format!("charged with {OPENAI_KEY}")}}),
        )])
        .with_text(&format!(
            "I will use the key {OPENAI_KEY} and {ANTHROPIC_KEY}."
        )),
        Reply::tool_call(
            "t1",
            "transition_to_shipped",
            json!({"reason": format!("paid using {OPENAI_KEY}")}),
        )
        .with_text(&format!("Done with {OPENAI_KEY}")),
    ])
}

/// Every file under `dir` (recursively) that holds a key.
fn leaking_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            if text.contains(OPENAI_KEY) || text.contains(ANTHROPIC_KEY) {
                out.push(path.display().to_string());
            }
        }
    }
    out
}

fn assert_clean(out: &Out, what: &str) {
    for key in [OPENAI_KEY, ANTHROPIC_KEY] {
        assert!(
            !out.stdout.contains(key),
            "{what}: stdout leaks a key: {out:?}"
        );
        assert!(
            !out.stderr.contains(key),
            "{what}: stderr leaks a key: {out:?}"
        );
    }
}

fn with_keys(server: &ScriptedServer) -> Dir {
    let mut d = Dir::with_file("order.dy", MACHINE);
    d.env("OPENAI_API_KEY", OPENAI_KEY);
    d.env("OPENAI_BASE_URL", &server.openai_base());
    d.env("ANTHROPIC_API_KEY", ANTHROPIC_KEY);
    d
}

#[test]
fn a_key_the_model_echoes_is_written_and_printed_nowhere_turn_by_turn() {
    let server = echoing_model();
    let d = with_keys(&server);
    let mut outs = Vec::new();
    for format in ["text", "json", "text", "json"] {
        let out = d.run(&[
            "e",
            "-i",
            "order.dy",
            "--id",
            "k",
            "--provider",
            "openai",
            "--record",
            "rec",
            "-d",
            "out",
            "--format",
            format,
        ]);
        assert!(matches!(out.code, 0 | 2), "{out:?}");
        outs.push(out);
    }
    let last = d.run(&[
        "e",
        "-i",
        "order.dy",
        "--id",
        "k",
        "--provider",
        "openai",
        "-d",
        "out",
    ]);
    assert_eq!(last.code, 2, "{last:?}");
    outs.push(last);
    // The model was asked twice; its echo was saved scrubbed, so the second call (a new process)
    // sends the conversation with the key already replaced.
    assert_eq!(server.request_count(), 2);
    let second = server.requests()[1].json().to_string();
    assert!(!second.contains(OPENAI_KEY), "{second}");
    assert!(second.contains("[REDACTED]"), "{second}");
    for args in [
        &["exec", "show", "k", "--format", "json"][..],
        &["exec", "show", "k"],
        &["exec", "status", "k", "--json"],
        &["exec", "list", "--json"],
    ] {
        outs.push(d.run(args));
    }
    for (i, out) in outs.iter().enumerate() {
        assert_clean(out, &format!("call {i}"));
    }
    assert!(d.path().join("rec/turn-2.json").is_file());
    assert!(d.path().join("out/order-result.json").is_file());
    let shown = d.show_json("k");
    assert_eq!(
        shown["contextState"]["order"]["note"],
        "charged with [REDACTED]"
    );
    assert_eq!(leaking_files(d.path()), Vec::<String>::new());
}

#[test]
fn a_key_the_model_echoes_is_written_and_printed_nowhere_in_a_one_shot_run() {
    let server = echoing_model();
    let d = with_keys(&server);
    for format in ["text", "json"] {
        let out = d.run(&[
            "e",
            "order.dy",
            "--provider",
            "openai",
            "--record",
            "rec",
            "-d",
            "out",
            "--format",
            format,
        ]);
        assert_eq!(out.code, 0, "{out:?}");
        assert_clean(&out, format);
        // The script is used up after the first run; the second one answers the same way.
        server.push(Reply::tool_call(
            "w1",
            "write_order",
            json!({"data": {"total": 1, "note": OPENAI_KEY}}),
        ));
        server
            .push(Reply::tool_call("t1", "transition_to_shipped", json!({})).with_text(OPENAI_KEY));
    }
    assert!(d.path().join("rec/turn-4.json").is_file());
    assert!(d.path().join("out/order-result.json").is_file());
    assert_eq!(leaking_files(d.path()), Vec::<String>::new());
}

#[test]
fn a_key_echoed_in_a_manual_answer_is_written_and_printed_nowhere() {
    // Manual mode (nothing configured for OpenAI), with an Anthropic key in the environment.
    let mut d = Dir::with_file("order.dy", MACHINE);
    d.env("ANTHROPIC_API_KEY", ANTHROPIC_KEY);
    let call = |stdin: &str, format: &str| {
        d.run_with_stdin(
            &[
                "e",
                "-i",
                "order.dy",
                "--id",
                "m",
                "--provider",
                "openai",
                "--record",
                "rec",
                "--format",
                format,
            ],
            stdin,
        )
    };
    let mut outs = vec![call("", "text")];
    let answer = json!({"response": format!("the key is {ANTHROPIC_KEY}"),
        "tools": [{"name": "write_order", "input": {"data": {"note": ANTHROPIC_KEY}}}]});
    outs.push(call(&answer.to_string(), "text"));
    // The next request carries the conversation, where the answer echoed the key: it is shown,
    // saved in pending-request.json and kept in the metadata.
    let waiting = call("", "text");
    assert_eq!(waiting.code, 101, "{waiting:?}");
    outs.push(waiting);
    let waiting = call("", "json");
    assert_eq!(waiting.code, 101, "{waiting:?}");
    outs.push(waiting);
    outs.push(d.run(&["exec", "status", "m", "--json"]));
    for (i, out) in outs.iter().enumerate() {
        assert_clean(out, &format!("call {i}"));
    }
    assert!(d.exec_dir("m").join("pending-request.json").is_file());
    assert!(d.path().join("rec/turn-1.json").is_file());
    assert_eq!(leaking_files(d.path()), Vec::<String>::new());
}

#[test]
fn queued_requests_carry_no_key() {
    let mut d = Dir::with_file("order.dy", MACHINE);
    d.env("ANTHROPIC_API_KEY", ANTHROPIC_KEY);
    d.write(
        "order.dy",
        &MACHINE.replace(
            "Charge {{ order.total }}",
            &format!("Charge {{{{ order.total }}}} ({ANTHROPIC_KEY})"),
        ),
    );
    assert_eq!(
        d.run(&["e", "-i", "order.dy", "--id", "q", "--queue"]).code,
        0
    );
    let mut child = d
        .spawn_command(&["e", "-i", "order.dy", "--id", "q", "--queue-timeout", "30"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let requests = d.path().join(".dygram/interactive-queue/requests");
    let start = std::time::Instant::now();
    let request = loop {
        let found = std::fs::read_dir(&requests).ok().and_then(|mut e| {
            e.find_map(|f| {
                let p = f.ok()?.path();
                let name = p.file_name()?.to_string_lossy().into_owned();
                (name.ends_with(".json") && !name.starts_with('.')).then_some(p)
            })
        });
        if let Some(r) = found {
            break r;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "no request"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let text = std::fs::read_to_string(&request).unwrap();
    let _ = child.kill();
    child.wait().unwrap();
    assert!(text.contains("[REDACTED]"), "{text}");
    assert!(!text.contains(ANTHROPIC_KEY), "{text}");
}
