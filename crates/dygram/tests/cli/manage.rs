//! Managing saved executions (`dygram exec list|status|show|rm|clean`) around calls that work on
//! them: an execution in use is never removed, names that are not executions get their own
//! messages, a `last` that names nothing does not hide the executions there, and a finished
//! parallel run is reported with all its paths.

use std::time::Duration;

use serde_json::json;

use super::answers::{at_charge, ended, respond, spawn_queue_call, wait_for_request};
use super::support::wait_output;

#[test]
fn an_execution_in_use_is_neither_removed_nor_cleaned() {
    let d = at_charge();
    // A call waits for the queue's answer, holding the execution.
    let call = spawn_queue_call(&d, "30");
    let pid = call.id();
    let request = wait_for_request(&d);

    let out = d.run(&["exec", "rm", "q"]);
    assert_eq!(out.code, 75, "{out:?}");
    assert!(out.stderr.contains("in use"), "{out:?}");
    assert!(out.stderr.contains(&format!("pid {pid}")), "{out:?}");
    assert!(!out.stdout.contains("Removed"), "{out:?}");
    assert!(d.exec_dir("q").join("state.json").is_file());

    let out = d.run(&["exec", "clean", "--all"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("q"), "{out:?}");
    assert!(out.stderr.contains(&format!("pid {pid}")), "{out:?}");
    assert!(d.exec_dir("q").join("state.json").is_file());

    // The call goes on undisturbed.
    let answer = json!({"response": "Charged.", "tools": [
        {"name": "write_order", "input": {"data": {"total": 5}}}
    ]});
    respond(&d, &request, &answer.to_string());
    let out = ended(wait_output(call, Duration::from_secs(20)));
    assert_eq!(out.code, 0, "{out:?}");
    let shown = d.show_json("q");
    assert_eq!(shown["contextState"]["order"]["total"], 5);

    // Once no call holds it, it can be removed.
    let out = d.run(&["exec", "rm", "q"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!d.exec_dir("q").exists());
    assert_eq!(d.folders(), Vec::<String>::new());
}

#[test]
fn what_a_killed_removal_left_is_deleted_by_the_next_creation() {
    let d = at_charge();
    // A removal killed after it renamed the folder, before it deleted it.
    std::fs::rename(d.exec_dir("q"), d.exec_dir(".rm-q-4242")).unwrap();
    assert_eq!(d.run(&["exec", "list", "--json"]).json(), json!([]));
    let out = d.run(&["e", "-i", "order.dy", "--id", "other"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(d.folders(), ["other"]);
}

/// A call on an existing execution does not clean up after other processes (a folder left by a
/// killed removal may be large, and the call holds its execution's lock): `exec clean` does.
#[test]
fn a_call_on_an_existing_execution_leaves_the_leftovers_of_others_to_exec_clean() {
    let d = at_charge();
    let out = d.run(&["e", "-i", "order.dy", "--id", "gone"]);
    assert_eq!(out.code, 0, "{out:?}");
    std::fs::rename(d.exec_dir("gone"), d.exec_dir(".rm-gone-4242")).unwrap();
    let out = d.run(&["e", "-i", "order.dy", "--id", "q"]);
    assert_eq!(out.code, 101, "{out:?}");
    assert_eq!(d.folders(), [".rm-gone-4242", "q"]);
    let out = d.run(&["exec", "clean"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(d.folders(), ["q"]);
}

/// A creation killed after it renamed the execution into place, before it removed its claim file:
/// the next call on that execution removes the claim (no process holds it); a claim of another
/// execution is left to the next creation or `exec clean`.
#[test]
fn a_call_removes_the_claim_a_killed_creation_of_its_execution_left() {
    let d = at_charge();
    let root = d.path().join(".dygram/executions");
    std::fs::write(root.join(".new-q-4242-0.lock"), "").unwrap();
    std::fs::write(root.join(".new-other-4242-0.lock"), "").unwrap();
    let out = d.run(&["e", "-i", "order.dy", "--id", "q"]);
    assert_eq!(out.code, 101, "{out:?}");
    assert!(!root.join(".new-q-4242-0.lock").exists());
    assert!(root.join(".new-other-4242-0.lock").exists());
}

#[test]
fn names_that_are_not_executions_get_messages_of_their_own() {
    let d = at_charge();
    std::fs::write(d.exec_dir("q").join("state.json"), "{ torn").unwrap();
    let out = d.run(&["e", "-i", "order.dy", "--id", "q"]);
    assert_eq!(out.code, 0, "{out:?}");
    let aside = d
        .folders()
        .into_iter()
        .find(|f| f.starts_with("q.corrupted-"))
        .unwrap();

    // A folder set aside can be listed and removed, not shown or resumed.
    for args in [
        vec!["exec", "status", aside.as_str()],
        vec!["exec", "show", aside.as_str()],
        vec!["e", "-i", "order.dy", "--id", aside.as_str()],
    ] {
        let out = d.run(&args);
        assert_eq!(out.code, 64, "{args:?}: {out:?}");
        assert!(
            out.stderr
                .contains(&format!("{aside} is a folder set aside")),
            "{args:?}: {out:?}"
        );
        assert!(out.stderr.contains("dygram exec rm"), "{args:?}: {out:?}");
        assert!(!out.stderr.contains("invalid execution id"), "{out:?}");
    }
    // `last` is the link to the most recent execution: not an id to create, but it names that
    // execution where one is read.
    let out = d.run(&["e", "-i", "order.dy", "--id", "last"]);
    assert_eq!(out.code, 64, "{out:?}");
    assert!(out.stderr.contains("\"last\" is reserved"), "{out:?}");
    assert!(!out.stderr.contains("invalid execution id"), "{out:?}");
    let out = d.run(&["exec", "status", "last", "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json()["id"], "q");
    let out = d.run(&["exec", "rm", "last"]);
    assert_eq!(out.code, 64, "{out:?}");
    assert!(out.stderr.contains("\"last\" is reserved"), "{out:?}");
    assert!(d.exec_dir("q").is_dir());
    // Anything else is still an invalid id.
    let out = d.run(&["exec", "status", "../q"]);
    assert_eq!(out.code, 64, "{out:?}");
    assert!(out.stderr.contains("invalid execution"), "{out:?}");
}

#[test]
fn a_last_that_names_nothing_does_not_hide_the_executions() {
    let d = at_charge();
    assert_eq!(d.run(&["e", "-i", "order.dy", "--id", "older"]).code, 0);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(d.run(&["e", "-i", "order.dy", "--id", "q"]).code, 101);
    // A creation killed after it pointed `last` at its new id, before the folder was renamed into
    // place, leaves `last` naming nothing.
    let last = d.path().join(".dygram/executions/last");
    std::fs::remove_file(&last).unwrap();
    std::os::unix::fs::symlink("exec-20260101-000000", &last).unwrap();

    let out = d.run(&["exec", "status", "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json()["id"], "q", "the most recent one");
    let out = d.run(&["exec", "show"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("Runtime Snapshot: q"), "{out:?}");
    // A call without --id goes on with the most recent execution of its file (the killed call,
    // run again as it was, starts its own).
    let out = d.run(&["e", "-i", "order.dy"]);
    assert_eq!(out.code, 101, "{out:?}");
    assert!(out.stderr.contains("Resuming execution: q"), "{out:?}");
    assert_eq!(d.folders().len(), 2, "{:?}", d.folders());
    let out = d.run(&["e", "-i", "order.dy", "--force"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("Starting interactive execution"),
        "{out:?}"
    );
    assert_eq!(d.folders().len(), 3, "{:?}", d.folders());
}

#[test]
fn a_finished_parallel_run_reports_every_path() {
    let examples = super::support::repo_root().join("examples/dygram");
    let trip = std::fs::read_to_string(examples.join("trip.dy")).unwrap();
    let rec = examples.join("recordings/trip").display().to_string();
    let d = super::support::Dir::with_file("trip.dy", &trip);
    let out = d.run(&["e", "trip.dy", "--playback", &rec]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .contains("Visited: start, flights, hotels, booked, summary\n"),
        "{out:?}"
    );
    let mut code = 0;
    for _ in 0..10 {
        code = d
            .run(&["e", "-i", "trip.dy", "--id", "t", "--playback", &rec])
            .code;
        if code != 0 {
            break;
        }
    }
    assert_eq!(code, 2);
    let out = d.run(&["exec", "status", "t"]);
    assert!(out.stdout.contains("Status: complete"), "{out:?}");
    // Where each path ended, not only the main one (which stayed at start).
    assert!(
        out.stdout
            .contains("Current Node: start, flights, summary\n"),
        "{out:?}"
    );
    let out = d.run(&["exec", "show", "t"]);
    assert!(
        out.stdout
            .contains("Visited: start, flights, hotels, booked, summary\n"),
        "{out:?}"
    );
}

/// Runs `order.dy` as execution `id` with its recordings until `calls` calls were made or it
/// ended: the last exit code.
fn order_calls(d: &super::support::Dir, id: &str, calls: usize) -> i32 {
    let rec = super::support::repo_root()
        .join("examples/dygram/recordings/order")
        .display()
        .to_string();
    let mut code = 0;
    for _ in 0..calls {
        code = d
            .run(&["e", "-i", "order.dy", "--id", id, "--playback", &rec])
            .code;
        if code != 0 {
            break;
        }
    }
    code
}

/// Makes the last call of `id` look as if it was made on 1 January 2020 (in its commit point
/// and in `metadata.json`).
fn last_called_long_ago(d: &super::support::Dir, id: &str) {
    let long_ago = "2020-01-01T00:00:00.000Z";
    let mut state = d.read_json(id, "state.json");
    state["metadata"]["lastExecutedAt"] = json!(long_ago);
    state["lastUpdated"] = json!(long_ago);
    let mut meta = d.read_json(id, "metadata.json");
    meta["lastExecutedAt"] = json!(long_ago);
    let dir = d.exec_dir(id);
    std::fs::write(dir.join("state.json"), state.to_string()).unwrap();
    std::fs::write(dir.join("metadata.json"), meta.to_string()).unwrap();
}

/// `exec clean --older-than DURATION` removes only what was last called longer ago: complete
/// executions, or with `--all` every one; a duration it cannot read is a usage error.
#[test]
fn clean_older_than_removes_only_what_was_last_called_longer_ago() {
    let d = super::support::Dir::with_file("order.dy", super::answers::ORDER);
    assert_eq!(order_calls(&d, "old-done", 10), 2);
    assert_eq!(order_calls(&d, "new-done", 10), 2);
    assert_eq!(order_calls(&d, "old-running", 1), 0);
    last_called_long_ago(&d, "old-done");
    last_called_long_ago(&d, "old-running");

    let out = d.run(&["exec", "clean", "--older-than", "7d"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("Cleaned 1 execution(s)"), "{out:?}");
    assert!(out.stdout.contains("1 more recent than 7d"), "{out:?}");
    assert_eq!(d.folders(), ["new-done", "old-running"]);

    let out = d.run(&["exec", "clean", "--all", "--older-than", "2w 3d"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("Cleaned 1 execution(s)"), "{out:?}");
    assert_eq!(d.folders(), ["new-done"]);

    for bad in ["soon", "1 month", "-3d"] {
        let out = d.run(&["exec", "clean", &format!("--older-than={bad}")]);
        assert_eq!(out.code, 64, "{bad}: {out:?}");
        assert!(out.stderr.contains("--older-than"), "{bad}: {out:?}");
    }
    assert_eq!(d.folders(), ["new-done"]);
}

/// `exec list` and `exec status` show how far an execution is where the total is known: one
/// whose answers are replayed has as many turns as its recordings give. One answered by hand, or
/// one that has ended, shows its turns alone.
#[test]
fn list_and_status_show_progress_where_the_total_is_known() {
    let d = super::support::Dir::with_file("order.dy", super::answers::ORDER);
    // start -> charge, then the first of the two recorded answers.
    assert_eq!(order_calls(&d, "replayed", 2), 0);
    assert_eq!(d.run(&["e", "-i", "order.dy", "--id", "by-hand"]).code, 0);

    let status = d.status_json("replayed");
    assert_eq!(status["turns"], 1);
    assert_eq!(status["progress"], json!({"turns": 1, "total": 2}));
    assert_eq!(d.status_json("by-hand")["progress"], json!(null));
    let text = d.run(&["exec", "status", "replayed"]).stdout;
    assert!(text.contains("  Turns: 1/2\n"), "{text}");
    let text = d.run(&["exec", "status", "by-hand"]).stdout;
    assert!(text.contains("  Turns: 0\n"), "{text}");
    let list = d.run(&["exec", "list"]).stdout;
    let row = |id: &str| list.lines().find(|l| l.contains(id)).unwrap().to_string();
    assert!(row("replayed").contains("turn 1/2"), "{list}");
    assert!(!row("by-hand").contains('/'), "{list}");
    let rows = d.run(&["exec", "list", "--format", "json"]).json();
    let replayed = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "replayed")
        .unwrap();
    assert_eq!(replayed["progress"], json!({"turns": 1, "total": 2}));

    // Once it has ended, its turns are all there is.
    assert_eq!(order_calls(&d, "replayed", 5), 2);
    assert_eq!(d.status_json("replayed")["progress"], json!(null));
}
