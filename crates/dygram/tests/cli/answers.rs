//! Where answers come from in `execute -i`: the file queue takes the reference responders' answer
//! format and reports an unreadable answer when it arrives; input on stdin is used as the answer to
//! the request a call reaches, or refused with a message, never dropped silently.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::{Dir, wait_output};

const ORDER: &str = "machine \"Order flow\"
Context order { total<number>: 0; }
Task charge \"Charge the card\" { prompt: \"Charge {{ order.total }}\"; }
State shipped;
start -> charge -when: 'order.total > 0'-> shipped;
charge -writes-> order;
";

fn queue(d: &Dir) -> PathBuf {
    d.path().join(".dygram/interactive-queue")
}

/// The request files of the queue (not temporary files of a write in progress).
fn requests(d: &Dir) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(queue(d).join("requests")) else {
        return Vec::new();
    };
    entries
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.ends_with(".json") && !name.starts_with('.')
        })
        .collect()
}

fn wait_for_request(d: &Dir) -> PathBuf {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if let Some(r) = requests(d).pop() {
            return r;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no request in {}", queue(d).display());
}

/// Writes `text` as the response to `request` (whole, by rename, unless `torn`).
fn respond(d: &Dir, request: &Path, text: &str) {
    let target = queue(d)
        .join("responses")
        .join(request.file_name().unwrap());
    let tmp = queue(d).join("responses").join(".writing");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(tmp, target).unwrap();
}

/// An order execution standing at `charge` (its first call ran start -> charge).
fn at_charge() -> Dir {
    let d = Dir::with_file("order.dy", ORDER);
    let out = d.run(&["e", "-i", "order.dy", "--id", "q"]);
    assert_eq!(out.code, 0, "{out:?}");
    d
}

fn spawn_queue_call(d: &Dir, timeout: &str) -> std::process::Child {
    d.spawn_command(&[
        "e",
        "-i",
        "order.dy",
        "--id",
        "q",
        "--queue",
        "--queue-timeout",
        timeout,
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap()
}

#[test]
fn the_queue_takes_the_reference_responders_answer_format() {
    let d = at_charge();
    let call = spawn_queue_call(&d, "30");
    let request = wait_for_request(&d);
    let request_id = request.file_stem().unwrap().to_string_lossy().into_owned();
    let answer = json!({
        "type": "llm_invocation_response",
        "requestId": request_id,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "reasoning": "",
        "response": {
            "content": [
                {"type": "text", "text": "Charging."},
                {"type": "tool_use", "id": "toolu_1", "name": "write_order", "input": {"data": {"total": 3}}}
            ],
            "stop_reason": "tool_use"
        }
    });
    respond(&d, &request, &answer.to_string());
    let out = wait_output(call, Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let shown = d.run(&["exec", "show", "q", "--format", "json"]).json();
    assert_eq!(shown["contextState"]["order"]["total"], 3);
}

#[test]
fn an_unreadable_queued_answer_is_reported_when_it_arrives() {
    for bad in [
        r#"{"type": "llm_invocation_response", "response": {}}"#,
        r#"{"bogus": true}"#,
        r#"{"type": "llm_invocation_response", "response": {"content": [{"type": "te"#,
    ] {
        let d = at_charge();
        let state_before = std::fs::read(d.exec_dir("q").join("state.json")).unwrap();
        let call = spawn_queue_call(&d, "60");
        let request = wait_for_request(&d);
        let answered = Instant::now();
        respond(&d, &request, bad);
        let out = wait_output(call, Duration::from_secs(30));
        let took = answered.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{bad}: {stderr}");
        assert!(
            took < Duration::from_secs(10),
            "{bad}: reported after {took:?}"
        );
        assert!(stderr.contains("cannot be read"), "{bad}: {stderr}");
        assert!(
            stderr.contains(&request_file_name(&request)),
            "{bad}: {stderr}"
        );
        // Nothing changed, and the next call asks again.
        assert_eq!(
            std::fs::read(d.exec_dir("q").join("state.json")).unwrap(),
            state_before
        );
        assert!(requests(&d).is_empty());
    }
}

fn request_file_name(request: &Path) -> String {
    request.file_name().unwrap().to_string_lossy().into_owned()
}

#[allow(dead_code)]
fn status(d: &Dir, id: &str) -> Value {
    d.run(&["exec", "status", id, "--json"]).json()
}
