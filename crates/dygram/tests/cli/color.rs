//! Colours on stderr: `--color auto|always|never`, `NO_COLOR`, and whether stderr is a terminal
//! (a real one: the command runs under `script`, which gives it a pseudo-terminal); and `-q`.

use super::answers::ORDER;
use super::support::{Dir, copy_dir, repo_root};

const RED_ERROR: &str = "\x1b[31merror:\x1b[0m";

fn colored(text: &str) -> bool {
    text.contains('\x1b')
}

#[test]
fn color_always_and_never_win_over_the_pipe_and_no_color() {
    let mut d = Dir::new();
    let plain = d.run(&["e", "missing.dy"]);
    assert!(!colored(&plain.stderr), "{plain:?}");
    let always = d.run(&["--color", "always", "e", "missing.dy"]);
    assert!(always.stderr.starts_with(RED_ERROR), "{always:?}");
    // Global: it may follow the subcommand.
    let after = d.run(&["e", "missing.dy", "--color=always"]);
    assert!(after.stderr.starts_with(RED_ERROR), "{after:?}");
    d.env("NO_COLOR", "1");
    let forced = d.run(&["e", "missing.dy", "--color", "always"]);
    assert!(forced.stderr.starts_with(RED_ERROR), "{forced:?}");
    let never = d.run(&["e", "missing.dy", "--color", "never"]);
    assert!(!colored(&never.stderr), "{never:?}");
    let bad = d.run(&["e", "missing.dy", "--color", "sometimes"]);
    assert_eq!(bad.code, 64, "{bad:?}");
}

#[test]
fn on_a_terminal_colours_are_on_unless_no_color_is_set() {
    let mut d = Dir::new();
    let Some(tty) = d.run_on_terminal(&["e", "missing.dy"]) else {
        return;
    };
    assert!(tty.contains(RED_ERROR), "{tty:?}");
    d.env("NO_COLOR", "1");
    let Some(tty) = d.run_on_terminal(&["e", "missing.dy"]) else {
        return;
    };
    assert!(tty.contains("error: cannot read missing.dy"), "{tty:?}");
    assert!(!colored(&tty), "{tty:?}");
}

#[test]
fn progress_is_coloured_on_request_and_quiet_leaves_only_errors() {
    let d = Dir::with_file("order.dy", ORDER);
    copy_dir(
        &repo_root().join("examples/dygram/recordings/order"),
        &d.path().join("rec"),
    );
    let run = ["e", "order.dy", "--playback", "rec", "--color", "always"];
    let out = d.run(&run);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("\x1b[34mexecuting order.dy\x1b[0m"),
        "{out:?}"
    );
    assert!(
        out.stderr.contains("\x1b[32m[path_0] completed at shipped"),
        "{out:?}"
    );
    let quiet = d.run(&[&run[..], &["-q"]].concat());
    assert_eq!((quiet.code, quiet.stderr.as_str()), (0, ""), "{quiet:?}");
    let turn = d.run(&[
        "e",
        "-i",
        "order.dy",
        "--playback",
        "rec",
        "--color",
        "always",
    ]);
    assert!(
        turn.stderr
            .contains("\x1b[34m⚡ Starting interactive execution"),
        "{turn:?}"
    );
    assert!(
        turn.stderr.contains("\x1b[2m   Mode: playback (rec)"),
        "{turn:?}"
    );
    let quiet = d.run(&["e", "-i", "order.dy", "-q"]);
    assert_eq!(quiet.stderr, "", "{quiet:?}");
}
