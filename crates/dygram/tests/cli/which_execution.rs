//! Which execution a call without `--id` works on: the most recent one of its machine file (not
//! the most recent of the folder, which may belong to another file), and what it says when that
//! choice is not the only one or the execution has ended.

use super::support::{Dir, repo_root};

/// A folder with the examples `order.dy` and `review.dy` and their recordings.
fn examples() -> (Dir, String, String) {
    let d = Dir::new();
    let examples = repo_root().join("examples/dygram");
    for name in ["order.dy", "review.dy"] {
        d.write(name, &std::fs::read_to_string(examples.join(name)).unwrap());
    }
    let rec = |name: &str| examples.join("recordings").join(name).display().to_string();
    (d, rec("order"), rec("review"))
}

/// After `order.dy` ran, `review.dy` started in the same folder; `dygram e -i order.dy` goes on
/// with order's execution (the folder's `last` is review's), however the file is spelled, and
/// `review.dy` with review's.
#[test]
fn a_call_without_id_resumes_the_newest_execution_of_its_own_file() {
    let (d, order, review) = examples();
    let first = d.run(&["e", "-i", "order.dy", "--playback", &order]);
    assert_eq!(first.code, 0, "{first:?}");
    let order_id = first.started_id();
    let second = d.run(&["e", "-i", "review.dy", "--playback", &review]);
    assert_eq!(second.code, 0, "{second:?}");
    let review_id = second.started_id();
    assert_ne!(order_id, review_id);

    for spelled in ["order.dy", "./order.dy"] {
        let out = d.run(&["e", "-i", spelled]);
        assert_eq!(out.code, 0, "{out:?}");
        assert!(
            out.stderr
                .contains(&format!("Resuming execution: {order_id}")),
            "{out:?}"
        );
        assert!(!out.stderr.contains("has changed"), "{out:?}");
    }
    let out = d.run(&["e", "-i", "review.dy"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr
            .contains(&format!("Resuming execution: {review_id}")),
        "{out:?}"
    );
    assert_eq!(d.status_json(&order_id)["turns"], 2);

    // A file that really changed is still refused.
    let edited = std::fs::read_to_string(d.path().join("order.dy"))
        .unwrap()
        .replace("Charge the card", "Charge the card now");
    d.write("order.dy", &edited);
    let out = d.run(&["e", "-i", "order.dy"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("Machine definition has changed"),
        "{out:?}"
    );
    assert!(out.stderr.contains(&order_id), "{out:?}");
}

/// A file with no execution yet starts one, whatever `last` names.
#[test]
fn a_file_without_an_execution_starts_one() {
    let (d, _, review) = examples();
    assert_eq!(
        d.run(&["e", "-i", "review.dy", "--playback", &review]).code,
        0
    );
    let out = d.run(&["e", "-i", "order.dy"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("Starting interactive execution"),
        "{out:?}"
    );
    assert!(!out.stderr.contains("has changed"), "{out:?}");
}

/// Calling a finished execution again says how to run the machine again: `--force` for a new
/// execution, `--id` for another one beside it.
#[test]
fn an_ended_execution_names_force_and_id() {
    let (d, order, _) = examples();
    let mut out = d.run(&["e", "-i", "order.dy", "--playback", &order]);
    for _ in 0..6 {
        if out.code != 0 {
            break;
        }
        out = d.run(&["e", "-i", "order.dy"]);
    }
    assert_eq!(out.code, 2, "{out:?}");
    let out = d.run(&["e", "-i", "order.dy"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stdout.contains("already complete"), "{out:?}");
    assert!(out.stderr.contains("--force"), "{out:?}");
    assert!(out.stderr.contains("--id"), "{out:?}");
}

/// Several active executions of one file: a call without `--id` warns and names them all; with
/// `--id` the call chose, and nothing is said.
#[test]
fn several_active_executions_of_a_file_are_named_in_a_warning() {
    let (d, order, _) = examples();
    for id in ["first", "second"] {
        let out = d.run(&["e", "-i", "order.dy", "--id", id, "--playback", &order]);
        assert_eq!(out.code, 0, "{out:?}");
        assert!(!out.stderr.contains("active executions"), "{out:?}");
    }
    let out = d.run(&["e", "-i", "order.dy"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("2 active executions"), "{out:?}");
    assert!(out.stderr.contains("first"), "{out:?}");
    assert!(out.stderr.contains("second"), "{out:?}");
    assert!(out.stderr.contains("Resuming execution: second"), "{out:?}");
    let out = d.run(&["e", "-i", "order.dy", "--id", "first"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!out.stderr.contains("active executions"), "{out:?}");
    // -q leaves only errors on stderr.
    let out = d.run(&["e", "-i", "order.dy", "-q"]);
    assert!(!out.stderr.contains("active executions"), "{out:?}");
}
