//! Where answers come from in `execute -i`: the file queue takes the reference responders' answer
//! format and reports an unreadable answer when it arrives; input on stdin is used as the answer to
//! the request a call reaches, or refused with a message, never dropped silently.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;

use super::support::{Dir, peak_memory_kb, wait_output};

pub(super) const ORDER: &str = "machine \"Order flow\"
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

pub(super) fn wait_for_request(d: &Dir) -> PathBuf {
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
pub(super) fn respond(d: &Dir, request: &Path, text: &str) {
    let target = queue(d)
        .join("responses")
        .join(request.file_name().unwrap());
    let tmp = queue(d).join("responses").join(".writing");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(tmp, target).unwrap();
}

/// An order execution standing at `charge` (its first call ran start -> charge).
pub(super) fn at_charge() -> Dir {
    let d = Dir::with_file("order.dy", ORDER);
    let out = d.run(&["e", "-i", "order.dy", "--id", "q"]);
    assert_eq!(out.code, 0, "{out:?}");
    d
}

pub(super) fn spawn_queue_call(d: &Dir, timeout: &str) -> std::process::Child {
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
    let shown = d.show_json("q");
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

fn call_with(d: &Dir, stdin: &str) -> super::support::Out {
    d.run_with_stdin(&["e", "-i", "order.dy", "--id", "s"], stdin)
}

const WRITE_42: &str = r#"{"response": "Charged.", "tools": [{"name": "write_order", "input": {"data": {"total": 42}}}]}"#;

#[test]
fn input_on_the_call_that_reaches_a_request_is_its_answer() {
    let d = Dir::with_file("order.dy", ORDER);
    assert_eq!(call_with(&d, "").code, 0);
    // No request was shown yet: this call reaches it, and the input answers it.
    let out = call_with(&d, WRITE_42);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("Tools: write_order"), "{out:?}");
    let shown = d.show_json("s");
    assert_eq!(shown["contextState"]["order"]["total"], 42);
    assert!(!d.exec_dir("s").join("pending-request.json").exists());
    assert_eq!(d.status_json("s")["turns"], 1);
}

#[test]
fn input_on_a_call_that_cannot_use_it_is_refused_and_changes_nothing() {
    // The first call of a new execution takes an automatic step: nothing is created.
    let d = Dir::with_file("order.dy", ORDER);
    let out = call_with(&d, WRITE_42);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("input was given on stdin"), "{out:?}");
    assert!(out.stderr.contains("start -> charge"), "{out:?}");
    assert_eq!(d.folders(), Vec::<String>::new());

    // Later, a call that completes the path without the model.
    assert_eq!(call_with(&d, "").code, 0);
    assert_eq!(call_with(&d, WRITE_42).code, 0);
    let out = call_with(
        &d,
        r#"{"tools": [{"name": "transition_to_shipped", "input": {}}]}"#,
    );
    assert_eq!(out.code, 0, "{out:?}");
    let before = std::fs::read(d.exec_dir("s").join("state.json")).unwrap();
    let history = d.history("s").len();
    let out = call_with(&d, "More text.");
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("does not reach a request"), "{out:?}");
    assert_eq!(
        std::fs::read(d.exec_dir("s").join("state.json")).unwrap(),
        before
    );
    assert_eq!(d.history("s").len(), history);

    // An execution that has ended.
    assert_eq!(call_with(&d, "").code, 2);
    let out = call_with(&d, "Hello?");
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("already ended"), "{out:?}");
}

#[test]
fn input_for_an_execution_whose_answers_come_from_elsewhere_is_refused() {
    let d = Dir::with_file("order.dy", ORDER);
    let rec = super::support::repo_root()
        .join("examples/dygram/recordings/order")
        .display()
        .to_string();
    // Before anything is created.
    let out = d.run_with_stdin(
        &["e", "-i", "order.dy", "--id", "p", "--playback", &rec],
        WRITE_42,
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("replays the recordings"), "{out:?}");
    assert!(!d.exec_dir("p").exists());
    // And on a later call.
    assert_eq!(
        d.run(&["e", "-i", "order.dy", "--id", "p", "--playback", &rec])
            .code,
        0
    );
    let before = std::fs::read(d.exec_dir("p").join("state.json")).unwrap();
    let out = d.run_with_stdin(&["e", "-i", "order.dy", "--id", "p"], WRITE_42);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("replays the recordings"), "{out:?}");
    assert_eq!(
        std::fs::read(d.exec_dir("p").join("state.json")).unwrap(),
        before
    );
}

#[test]
fn an_unreadable_answer_on_the_first_call_creates_nothing() {
    let d = Dir::with_file(
        "m.dy",
        "machine \"m\"\ntask start { prompt: \"pick\"; }\nstate a;\nstate b;\nstart -> a;\nstart -> b;\n",
    );
    let out = d.run_with_stdin(&["e", "-i", "m.dy", "--id", "u"], r#"{"action": "go"}"#);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("Failed to parse response"), "{out:?}");
    assert_eq!(d.folders(), Vec::<String>::new());
    // A good one is taken by that same first call.
    let out = d.run_with_stdin(
        &["e", "-i", "m.dy", "--id", "u"],
        r#"{"tools": [{"name": "transition_to_b", "input": {}}]}"#,
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("start --(agent_decision)--> b"),
        "{out:?}"
    );
}

/// Output of a call that ended.
pub(super) fn ended(out: std::process::Output) -> super::support::Out {
    super::support::Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

#[test]
fn an_open_pipe_nobody_writes_to_is_no_answer_and_costs_a_call_little() {
    let d = Dir::with_file("order.dy", ORDER);
    assert_eq!(call_with(&d, "").code, 0);
    // At `charge` the call reaches a request; its stdin is a pipe that stays open and silent (as
    // with Node's `spawn` default, or `sleep 3 | dygram …`).
    let mut child = d.spawn_piped(&["e", "-i", "order.dy", "--id", "s"]);
    let silent = child.stdin.take().unwrap();
    let start = Instant::now();
    let out = ended(wait_output(child, Duration::from_secs(20)));
    let took = start.elapsed();
    drop(silent);
    assert_eq!(out.code, 101, "{out:?}");
    assert!(took < Duration::from_secs(2), "took {took:?}: {out:?}");
    assert!(out.stdout.contains("Waiting for LLM response"), "{out:?}");
    assert!(d.exec_dir("s").join("pending-request.json").is_file());
    // It says that nothing was read from the open pipe.
    assert!(
        out.stderr.contains("standard input is still open"),
        "{out:?}"
    );
}

#[test]
fn an_answer_that_starts_within_the_grace_is_read_to_its_end() {
    use std::io::Write;
    let d = Dir::with_file("order.dy", ORDER);
    assert_eq!(call_with(&d, "").code, 0);
    let mut child = d.spawn_piped(&["e", "-i", "order.dy", "--id", "s"]);
    let mut input = child.stdin.take().unwrap();
    let (head, tail) = WRITE_42.split_at(20);
    input.write_all(head.as_bytes()).unwrap();
    input.flush().unwrap();
    // The rest comes well after the grace: the call waits for the end of the input.
    std::thread::sleep(Duration::from_millis(700));
    input.write_all(tail.as_bytes()).unwrap();
    drop(input);
    let out = ended(wait_output(child, Duration::from_secs(20)));
    assert_eq!(out.code, 0, "{out:?}");
    let shown = d.show_json("s");
    assert_eq!(shown["contextState"]["order"]["total"], 42);
}

#[test]
fn input_that_arrives_while_a_call_works_is_refused_before_its_commit() {
    use std::io::Write;
    let d = at_charge();
    let before = std::fs::read(d.exec_dir("q").join("state.json")).unwrap();
    let mut child = d.spawn_piped(&[
        "e",
        "-i",
        "order.dy",
        "--id",
        "q",
        "--queue",
        "--queue-timeout",
        "30",
    ]);
    let mut input = child.stdin.take().unwrap();
    // The call has looked at its stdin (nothing there) and waits for the queue; then input comes.
    let request = wait_for_request(&d);
    input.write_all(WRITE_42.as_bytes()).unwrap();
    drop(input);
    std::thread::sleep(Duration::from_millis(300));
    let answer = json!({"type": "llm_response", "response": {"content": [
        {"type": "tool_use", "id": "t1", "name": "write_order", "input": {"data": {"total": 7}}}
    ]}});
    respond(&d, &request, &answer.to_string());
    let out = ended(wait_output(child, Duration::from_secs(20)));
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains("input arrived on stdin while this call was working"),
        "{out:?}"
    );
    assert!(out.stderr.contains("nothing was changed"), "{out:?}");
    assert_eq!(
        std::fs::read(d.exec_dir("q").join("state.json")).unwrap(),
        before
    );
}

/// The last look at stdin before the commit does not wait: a byte that arrived while the call
/// worked is refused at once, although the writer keeps the pipe open (the call does not hold the
/// execution's lock until the end of its input).
#[test]
fn a_late_byte_on_a_pipe_left_open_is_refused_without_waiting_for_its_end() {
    use std::io::Write;
    let d = at_charge();
    let before = std::fs::read(d.exec_dir("q").join("state.json")).unwrap();
    let mut child = d.spawn_piped(&[
        "e",
        "-i",
        "order.dy",
        "--id",
        "q",
        "--queue",
        "--queue-timeout",
        "30",
    ]);
    let mut input = child.stdin.take().unwrap();
    let request = wait_for_request(&d);
    input.write_all(b"late").unwrap();
    input.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let answered = Instant::now();
    let answer = json!({"type": "llm_response", "response": {"content": [
        {"type": "tool_use", "id": "t1", "name": "write_order", "input": {"data": {"total": 7}}}
    ]}});
    respond(&d, &request, &answer.to_string());
    // The pipe stays open: the call must end on its own, well before this limit.
    let limit = Duration::from_secs(6);
    while child.try_wait().unwrap().is_none() && answered.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = answered.elapsed();
    drop(input);
    let out = ended(wait_output(child, Duration::from_secs(20)));
    assert!(took < Duration::from_secs(3), "took {took:?}: {out:?}");
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains("input arrived on stdin while this call was working"),
        "{out:?}"
    );
    assert_eq!(
        std::fs::read(d.exec_dir("q").join("state.json")).unwrap(),
        before
    );
}

/// Input nobody takes is not read ahead without bound: a writer that pours 256 MB into the pipe of
/// a call waiting for the queue does not make the call hold it in memory.
#[test]
fn input_a_call_does_not_take_is_not_read_into_memory_without_bound() {
    use std::io::Write;
    if peak_memory_kb(std::process::id()).is_none() {
        eprintln!(
            "SKIPPED input_a_call_does_not_take_is_not_read_into_memory_without_bound: needs /proc"
        );
        return;
    }
    let d = at_charge();
    let mut child = d.spawn_piped(&[
        "e",
        "-i",
        "order.dy",
        "--id",
        "q",
        "--queue",
        "--queue-timeout",
        "30",
    ]);
    let mut input = child.stdin.take().unwrap();
    let request = wait_for_request(&d);
    let writer = std::thread::spawn(move || {
        let block = vec![b'x'; 1024 * 1024];
        for _ in 0..256 {
            if input.write_all(&block).is_err() {
                return false;
            }
        }
        true
    });
    // Long enough for the call's reader to take all of it, were it not bounded.
    std::thread::sleep(Duration::from_millis(1500));
    let peak = peak_memory_kb(child.id()).unwrap();
    let answer = json!({"type": "llm_response", "response": {"content": [
        {"type": "tool_use", "id": "t1", "name": "write_order", "input": {"data": {"total": 7}}}
    ]}});
    respond(&d, &request, &answer.to_string());
    let out = ended(wait_output(child, Duration::from_secs(20)));
    // The writer ends once the call has gone (its pipe is closed).
    let _ = writer.join();
    assert!(peak < 64 * 1024, "peak memory {peak} kB: {out:?}");
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains("input arrived on stdin while this call was working"),
        "{out:?}"
    );
}

#[test]
fn a_call_that_ends_with_its_stdin_open_and_unread_says_so() {
    // The first call takes an automatic step; input would come later than the call looks.
    let d = Dir::with_file("order.dy", ORDER);
    let mut child = d.spawn_piped(&["e", "-i", "order.dy", "--id", "s2"]);
    let silent = child.stdin.take().unwrap();
    let out = ended(wait_output(child, Duration::from_secs(20)));
    drop(silent);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("standard input is still open"),
        "{out:?}"
    );
    // A closed stdin, or one that was used, gives no such note.
    let out = call_with(&d, "");
    assert!(!out.stderr.contains("still open"), "{out:?}");
}

/// Recordings of another machine are refused, not replayed: those made at nodes of other names
/// are passed over, and one made at a node of the same name for other tools is refused.
#[test]
fn recordings_made_for_other_tools_are_refused_not_replayed() {
    let examples = super::support::repo_root().join("examples/dygram");
    let review = std::fs::read_to_string(examples.join("review.dy")).unwrap();
    let order_recordings = examples.join("recordings/order").display().to_string();
    let d = Dir::with_file("review.dy", &review);
    // `charge` of this machine writes a bill, where the recordings' `charge` wrote the order.
    d.write(
        "bill.dy",
        "machine \"Bill\"\nContext bill { total<number>: 0; }\nTask charge { prompt: \"Bill it\"; }\nstart -> charge;\ncharge -writes-> bill;\n",
    );
    for (file, id, refusal) in [
        (
            "review.dy",
            "review",
            "the recordings of other nodes are not served to it: turn-1.json (made at charge)",
        ),
        (
            "bill.dy",
            "bill",
            "turn-1.json was recorded with tools that are not offered now: write_order",
        ),
    ] {
        for args in [
            vec!["e", file, "--playback", order_recordings.as_str()],
            vec![
                "e",
                "-i",
                file,
                "--id",
                id,
                "--playback",
                order_recordings.as_str(),
            ],
        ] {
            let mut out = d.run(&args);
            // With -i the first call takes the automatic step from start; the next one asks.
            if args.contains(&"-i") {
                assert_eq!(out.code, 0, "{out:?}");
                out = d.run(&["e", "-i", file, "--id", id]);
            }
            assert_eq!(out.code, 1, "{args:?}: {out:?}");
            assert!(out.stderr.contains(refusal), "{args:?}: {out:?}");
            // Nothing of the foreign answers was applied.
            assert!(!out.stderr.contains("write_order (failed)"), "{out:?}");
            assert!(!out.stdout.contains("write_order (failed)"), "{out:?}");
        }
    }
}

#[test]
fn a_text_answer_that_would_end_the_execution_with_an_error_is_refused() {
    let d = Dir::with_file("order.dy", ORDER);
    assert_eq!(call_with(&d, "").code, 0);
    // At `charge` the only transition is closed (order.total is 0): an answer without a tool call
    // would fail the execution for good.
    let before = std::fs::read(d.exec_dir("s").join("state.json")).unwrap();
    let out = call_with(&d, "hello there");
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("calls no tool"), "{out:?}");
    assert!(out.stderr.contains("No transition available"), "{out:?}");
    assert!(out.stderr.contains("nothing was changed"), "{out:?}");
    assert!(out.stderr.contains("write_order"), "the example: {out:?}");
    assert_eq!(
        std::fs::read(d.exec_dir("s").join("state.json")).unwrap(),
        before
    );
    assert_eq!(d.status_json("s")["status"], "in_progress");
    // The person answers again, with a tool call this time.
    let out = call_with(&d, WRITE_42);
    assert_eq!(out.code, 0, "{out:?}");
    let out = call_with(&d, "Shipping it.");
    assert_eq!(
        out.code, 0,
        "an open transition: the node asks again: {out:?}"
    );

    // On the first call, such an answer creates nothing.
    let d = Dir::with_file(
        "m.dy",
        "machine \"m\"\nContext c { n<number>: 0; }\ntask start { prompt: \"go\"; }\nstate a;\nstart -when: 'c.n > 0'-> a;\nstart -writes-> c;\n",
    );
    let out = d.run_with_stdin(&["e", "-i", "m.dy", "--id", "u"], "hello");
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("calls no tool"), "{out:?}");
    assert_eq!(d.folders(), Vec::<String>::new());
}

#[test]
fn the_text_output_says_why_a_tool_failed() {
    let d = Dir::with_file("order.dy", ORDER);
    assert_eq!(call_with(&d, "").code, 0);
    let out = call_with(
        &d,
        r#"{"tools": [{"name": "write_order", "input": {"data": {"total": "lots"}}}]}"#,
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("Tools: write_order (failed)"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains(
            "write_order failed: Nothing was written to order: `total`: expected number, got string"
        ),
        "{out:?}"
    );
}

/// A request shown in manual mode and then answered by another source (here the recordings) is
/// no longer waiting: the status, `pending-request.json` and the text status all say so.
#[test]
fn a_request_answered_by_another_source_is_no_longer_pending() {
    let d = Dir::with_file("order.dy", ORDER);
    let rec = super::support::repo_root()
        .join("examples/dygram/recordings/order")
        .display()
        .to_string();
    assert_eq!(call_with(&d, "").code, 0);
    let out = call_with(&d, "");
    assert_eq!(out.code, 101, "{out:?}");
    assert_eq!(d.status_json("s")["waitingForAnswer"], true);
    assert!(d.exec_dir("s").join("pending-request.json").exists());

    let playback = [
        "e",
        "-i",
        "order.dy",
        "--id",
        "s",
        "--playback",
        rec.as_str(),
    ];
    let out = d.run(&playback);
    assert_eq!(out.code, 0, "{out:?}");
    // Answered (by the recording): nothing waits for a manual answer any more.
    assert_eq!(d.status_json("s")["waitingForAnswer"], false);
    assert!(!d.exec_dir("s").join("pending-request.json").exists());
    let mut last = out;
    for _ in 0..5 {
        if last.code != 0 {
            break;
        }
        last = d.run(&playback);
    }
    assert_eq!(last.code, 2, "{last:?}");
    let s = d.status_json("s");
    assert_eq!(s["status"], "complete");
    assert_eq!(s["waitingForAnswer"], false);
    assert!(!d.exec_dir("s").join("pending-request.json").exists());
    let text = d.run(&["exec", "status", "s"]);
    assert!(!text.stdout.contains("Waiting for"), "{text:?}");
}

/// The example answer a waiting call prints, read from its text report.
fn printed_example(out: &super::support::Out) -> String {
    let mut lines = out.stdout.lines();
    lines
        .by_ref()
        .find(|l| l.starts_with("EXAMPLE RESPONSE"))
        .unwrap_or_else(|| panic!("no example: {out:?}"));
    lines.next().unwrap().trim().to_string()
}

/// Answers every request of `file` (execution `id`) with the example the call before printed:
/// the codes of the calls, the last one 2 when the examples took the execution to its end.
fn follow_the_examples(d: &Dir, file: &str, id: &str, calls: usize) -> Vec<i32> {
    let args = ["e", "-i", file, "--id", id];
    let mut codes = Vec::new();
    let mut answer = String::new();
    for _ in 0..calls {
        let out = d.run_with_stdin(&args, &answer);
        codes.push(out.code);
        answer = match out.code {
            0 => String::new(),
            101 => printed_example(&out),
            _ => break,
        };
    }
    codes
}

/// The example is an answer that moves the machine on: where every transition is closed until
/// the model writes the context, it writes values that open one and takes it (following the
/// examples ends the execution), and `--format json` gives it to programs too.
#[test]
fn the_example_answer_moves_the_machine_on() {
    let d = Dir::with_file("order.dy", ORDER);
    let codes = follow_the_examples(&d, "order.dy", "s", 10);
    assert_eq!(codes.last(), Some(&2), "{codes:?}");
    assert_eq!(d.status_json("s")["status"], "complete");
    let shown = d.show_json("s");
    assert_eq!(shown["currentNode"], "shipped", "{shown}");

    let d = Dir::with_file(
        "ticket.dy",
        "machine \"Tickets\"\nContext ticket { state<string>: \"open\"; priority<number>: 0; }\nTask triage { prompt: \"Triage the ticket.\"; }\nState urgent;\nState closed;\nstart -> triage;\ntriage -when: 'ticket.state == \"closed\"'-> closed;\ntriage -when: 'ticket.priority >= 3'-> urgent;\ntriage -writes-> ticket;\n",
    );
    let codes = follow_the_examples(&d, "ticket.dy", "t", 10);
    assert_eq!(codes.last(), Some(&2), "{codes:?}");
    assert_eq!(d.status_json("t")["status"], "complete");

    let d = Dir::with_file("order.dy", ORDER);
    let args = ["e", "-i", "order.dy", "--id", "j", "--format", "json"];
    assert_eq!(d.run(&args).code, 0);
    let out = d.run(&args);
    assert_eq!(out.code, 101, "{out:?}");
    let example = out.json_line()["example"].clone();
    let names: Vec<&str> = example["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{out:?}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["write_order", "transition_to_shipped"], "{out:?}");
}

/// A tool name the node does not offer (nor a transition of the node) is a misspelling in a
/// manual answer: refused with the name it was probably meant to be, nothing committed; a
/// transition that the same answer's write opens is still taken.
#[test]
fn a_misspelled_tool_in_a_manual_answer_is_refused() {
    let d = Dir::with_file("order.dy", ORDER);
    // On the first call nothing is created.
    let misspelled_write =
        r#"{"tools": [{"name": "write_ordr", "input": {"data": {"total": 5}}}]}"#;
    let out = call_with(&d, misspelled_write);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(d.folders(), Vec::<String>::new());

    assert_eq!(call_with(&d, "").code, 0);
    let before = std::fs::read(d.exec_dir("s").join("state.json")).unwrap();
    for (answer, wrong, meant) in [
        (misspelled_write, "write_ordr", "write_order"),
        (
            r#"{"tools": [{"name": "transition_to_shiped", "input": {"reason": "paid"}}]}"#,
            "transition_to_shiped",
            "transition_to_shipped",
        ),
    ] {
        let out = call_with(&d, answer);
        assert_eq!(out.code, 1, "{out:?}");
        assert!(out.stderr.contains(wrong), "{out:?}");
        assert!(
            out.stderr.contains(&format!("did you mean {meant}")),
            "{out:?}"
        );
        assert!(out.stderr.contains("nothing was changed"), "{out:?}");
        assert_eq!(
            std::fs::read(d.exec_dir("s").join("state.json")).unwrap(),
            before,
            "{answer}"
        );
        assert_eq!(d.status_json("s")["turns"], 0);
        assert!(
            d.history("s")
                .iter()
                .all(|h| h["tools"] == serde_json::json!([]))
        );
    }
    let out = call_with(
        &d,
        r#"{"tools": [{"name": "write_order", "input": {"data": {"total": 5}}}, {"name": "transition_to_shipped", "input": {"reason": "paid"}}]}"#,
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(d.show_json("s")["currentNode"], "shipped");
}
