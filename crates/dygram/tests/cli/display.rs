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
    assert_eq!(waiting.code, 3, "{waiting:?}");
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
