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
