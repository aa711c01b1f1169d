//! The lines people read on stderr when an execution starts or goes on (where its answers come
//! from), and `exec show` saying the status once.

use testkit::{Reply, ScriptedServer};

use super::answers::ORDER;
use super::support::{Dir, Out, copy_dir, repo_root};

fn with_recordings() -> Dir {
    let d = Dir::with_file("order.dy", ORDER);
    copy_dir(
        &repo_root().join("examples/dygram/recordings/order"),
        &d.path().join("rec/order"),
    );
    d
}

/// The first call of execution `id`, replaying the example's recordings.
fn start_playback(d: &Dir, id: &str) -> Out {
    let out = d.run(&["e", "-i", "order.dy", "--id", id, "--playback", "rec/order"]);
    assert_eq!(out.code, 0, "{out:?}");
    out
}

#[test]
fn a_playback_execution_says_its_mode_when_it_starts_and_when_it_goes_on() {
    let d = with_recordings();
    let first = start_playback(&d, "p");
    assert!(
        first
            .stderr
            .contains("⚡ Starting interactive execution: p\n   Mode: playback (rec/order)\n"),
        "{first:?}"
    );
    let next = d.run(&["e", "-i", "order.dy", "--id", "p"]);
    assert!(
        next.stderr
            .contains("⚡ Resuming execution: p (playback mode)\n"),
        "{next:?}"
    );
}

#[test]
fn a_recorded_execution_says_so_and_an_unrecorded_one_says_nothing_more() {
    let server = ScriptedServer::start([Reply::text("Thinking."), Reply::text("Still.")]);
    let mut d = Dir::with_file("order.dy", ORDER);
    d.env("OPENAI_BASE_URL", &server.openai_base());
    d.env("OPENAI_API_KEY", "sk-test");
    let api = ["e", "-i", "order.dy", "--provider", "openai"];
    let first = d.run(&[&api[..], &["--id", "r", "--record", "out/r"]].concat());
    assert_eq!(first.code, 0, "{first:?}");
    assert!(
        first.stderr.contains(
            "⚡ Starting interactive execution: r\n   Mode: interactive (recording to out/r)\n"
        ),
        "{first:?}"
    );
    let next = d.run(&[&api[..], &["--id", "r"]].concat());
    assert!(
        next.stderr
            .contains("⚡ Resuming execution: r (recording mode)\n"),
        "{next:?}"
    );
    let plain = d.run(&[&api[..], &["--id", "plain"]].concat());
    assert!(
        plain
            .stderr
            .contains("⚡ Starting interactive execution: plain\n"),
        "{plain:?}"
    );
    assert!(!plain.stderr.contains("Mode:"), "{plain:?}");
}

#[test]
fn exec_show_says_the_status_once() {
    let d = with_recordings();
    start_playback(&d, "s");
    let show = d.run(&["exec", "show", "s"]);
    assert_eq!(show.code, 0, "{show:?}");
    assert_eq!(show.stdout.matches("Status:").count(), 1, "{show:?}");
    assert!(show.stdout.contains("Status: in_progress\n"), "{show:?}");
}

/// A model's text never drives the terminal: the `Output:` line of `execute -i`, `exec show` and
/// `exec status` escape ESC (CSI, OSC), BEL and C1 controls; JSON keeps the text as it was.
#[test]
fn a_models_escapes_never_reach_the_terminal() {
    let d = Dir::with_file(
        "m.dy",
        "machine \"Esc\"\nTask greet { prompt: \"Say hello\"; }\nState done;\nState other;\ngreet -> done;\ngreet -> other;\n",
    );
    let waiting = d.run(&["e", "-i", "m.dy", "--id", "esc"]);
    assert_eq!(waiting.code, 101, "{waiting:?}");
    let hostile = "hi \u{1b}]0;pwned\u{7} \u{1b}[2J \u{9b}31m \u{9d}0;t\u{9c}";
    let answer = serde_json::json!({
        "response": hostile,
        "tools": [{"name": "transition_to_done", "input": {}}]
    })
    .to_string();
    let out = d.run_with_stdin(&["e", "-i", "m.dy", "--id", "esc"], &answer);
    assert!(matches!(out.code, 0 | 2), "{out:?}");
    let inert = |what: &str, text: &str| {
        for c in ['\u{1b}', '\u{7}', '\u{9b}', '\u{9d}', '\u{9c}'] {
            assert!(!text.contains(c), "{what} lets {c:?} through: {text:?}");
        }
    };
    assert!(out.stdout.contains("Output: hi \\x1b]0;pwned"), "{out:?}");
    inert("execute -i", &out.stdout);
    for args in [["exec", "show", "esc"], ["exec", "status", "esc"]] {
        let shown = d.run(&args);
        assert_eq!(shown.code, 0, "{shown:?}");
        inert(args[1], &shown.stdout);
    }
    let json = d.run(&["exec", "show", "esc", "--format", "json"]);
    assert!(json.stdout.contains("\\u001b]0;pwned"), "{json:?}");
}

/// dygram's own variables name the endpoint and the provider, beside the providers' own: a local
/// OpenAI-compatible server is reached with `DYGRAM_PROVIDER=openai DYGRAM_BASE_URL=…` alone (no
/// key, no flag), and `DYGRAM_BASE_URL` wins over `OPENAI_BASE_URL`.
#[test]
fn dygram_reads_its_endpoint_and_provider_from_its_own_variables() {
    let server = ScriptedServer::start([Reply::text("Thinking.")]);
    let mut d = Dir::with_file("order.dy", ORDER);
    d.env("DYGRAM_PROVIDER", "openai");
    d.env("DYGRAM_BASE_URL", &server.openai_base());
    d.env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1");
    let out = d.run(&["e", "-i", "order.dy", "--id", "own"]);
    assert_eq!(out.code, 0, "{out:?}");
    let out = d.run(&["e", "-i", "order.dy", "--id", "own"]);
    assert!(out.stdout.contains("Output: Thinking."), "{out:?}");
    assert_eq!(server.request_count(), 1, "{out:?}");
}

/// Ctrl-C (SIGINT) stops a run with exit 130; `--format stream-json` still ends with
/// `run_finished` (its `exitCode` 130), and a turn of `execute -i` in progress is not saved.
#[test]
fn ctrl_c_exits_130_and_the_stream_still_ends_with_run_finished() {
    use std::io::{BufRead, BufReader};

    let server = ScriptedServer::start([
        Reply::text("slow").delay(std::time::Duration::from_secs(20)),
        Reply::text("slow").delay(std::time::Duration::from_secs(20)),
    ]);
    let mut d = Dir::with_file("order.dy", ORDER);
    d.env("DYGRAM_PROVIDER", "openai");
    d.env("DYGRAM_BASE_URL", &server.openai_base());
    // Starts `dygram ARGS`, waits for its request number `nth` to reach the model (which takes
    // 20 s to answer), sends SIGINT: the exit code and the lines printed.
    let interrupt = |args: &[&str], nth: usize| {
        let mut child = d.spawn_piped(args);
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let start = std::time::Instant::now();
        while server.request_count() < nth {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(20),
                "no request"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let sent = std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let lines: Vec<String> = stdout.lines().map(Result::unwrap).collect();
        let status = child.wait().unwrap();
        assert!(
            start.elapsed() < std::time::Duration::from_secs(15),
            "it waited for the model"
        );
        (status.code(), lines)
    };
    let (code, lines) = interrupt(&["execute", "order.dy", "--format", "stream-json"], 1);
    assert_eq!(code, Some(130), "{lines:?}");
    let last: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(last["type"], "run_finished", "{lines:?}");
    assert_eq!(last["exitCode"], 130, "{last}");
    assert_eq!(last["result"]["kind"], "interrupted", "{last}");
    // A turn of execute -i: nothing of it is saved.
    let first = d.run(&["e", "-i", "order.dy", "--id", "i"]);
    assert_eq!(first.code, 0, "{first:?}");
    let before = std::fs::read(d.exec_dir("i").join("state.json")).unwrap();
    let (code, _) = interrupt(&["e", "-i", "order.dy", "--id", "i"], 2);
    assert_eq!(code, Some(130));
    assert_eq!(
        std::fs::read(d.exec_dir("i").join("state.json")).unwrap(),
        before
    );
}
