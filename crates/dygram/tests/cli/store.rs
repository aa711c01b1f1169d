//! `execute -i --store URL --id ID`: one execution advanced by callers in different folders
//! through PostgreSQL. The server is a throwaway cluster (`testkit::postgres`) or `PG_TEST_URL`;
//! without either, the tests that need it say SKIPPED and return.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use ::store::RunStore;
use dygram_runtime::session::shared::{SharedError, SharedStore};
use store_pg::PgStore;
use testkit::postgres::Postgres;

use super::answers::ORDER;
use super::support::{Dir, Out, bin, repo_root};

/// A machine that needs no model: one step per call, four calls.
const WALK: &str = "machine \"Walk\"
State start;
State middle;
State done;
start -> middle -> done;
";

fn review() -> String {
    std::fs::read_to_string(repo_root().join("examples/dygram/review.dy")).unwrap()
}

fn review_recordings() -> String {
    repo_root()
        .join("examples/dygram/recordings/review")
        .display()
        .to_string()
}

/// `execute -i review.dy --id ID --format json` in `d`, with the store when given; the first call
/// names the recordings (later calls take them from the execution, as a user's would).
fn review_call(d: &Dir, id: &str, store: Option<&str>, first: bool) -> Out {
    let recordings = review_recordings();
    let mut args = vec!["e", "-i", "review.dy", "--id", id, "--format", "json"];
    if let Some(url) = store {
        args.extend(["--store", url]);
    }
    if first {
        args.extend(["--playback", recordings.as_str()]);
    }
    d.run(&args)
}

/// Calls `call(n)` (n from 0) until the execution completes (exit 2); each call's JSON report.
fn until_complete(mut call: impl FnMut(usize) -> Out) -> Vec<Value> {
    let mut reports = Vec::new();
    for n in 0..40 {
        let out = call(n);
        assert!(matches!(out.code, 0 | 2), "call {n}: {out:?}");
        reports.push(out.json_line());
        if out.code == 2 {
            return reports;
        }
    }
    panic!("not complete after 40 calls: {reports:?}");
}

/// The store's documents of execution `id` (without the empty ones, which stand for removed
/// files), written as `.dygram/executions/<id>/` of `d`.
fn materialise(store: &PgStore, id: &str, d: &Dir) -> Vec<String> {
    let mut keys = Vec::new();
    for key in store.keys(id, "").unwrap() {
        let bytes = store.get(id, &key).unwrap().unwrap();
        if bytes.is_empty() {
            continue;
        }
        let path = d.exec_dir(id).join(&key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
        keys.push(key);
    }
    keys
}

/// A JSON value without the fields that hold times.
fn timeless(mut v: Value) -> Value {
    const TIMES: [&str; 5] = [
        "startedAt",
        "lastExecutedAt",
        "timestamp",
        "lastUpdated",
        "startTime",
    ];
    match &mut v {
        Value::Object(map) => {
            map.retain(|k, _| !TIMES.contains(&k.as_str()));
            map.values_mut()
                .for_each(|value| *value = timeless(value.take()));
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| *item = timeless(item.take())),
        _ => {}
    }
    v
}

/// The same through a folder (`file:///…`), with no database at all: the calls alternate between
/// two folders and end as in one, and the store's folder holds the execution's files.
#[test]
fn an_execution_shared_through_a_folder_store_ends_as_in_one_folder() {
    let folder = tempfile::tempdir().unwrap();
    let url = format!("file://{}", folder.path().display());
    let (a, b, alone) = (Dir::new(), Dir::new(), Dir::new());
    for d in [&a, &b, &alone] {
        d.write("review.dy", &review());
    }
    let shared = until_complete(|n| {
        let d = if n % 2 == 0 { &a } else { &b };
        review_call(d, "shared", Some(&url), n == 0)
    });
    let single = until_complete(|n| review_call(&alone, "shared", None, n == 0));
    assert_eq!(shared, single, "the same reports, call by call");
    assert!(a.folders().is_empty() && b.folders().is_empty());
    let kept = folder.path().join("dygram/shared/state.json");
    assert!(kept.is_file(), "{}", kept.display());
    let listed = b.run(&["exec", "list", "--json", "--store", &url]);
    assert_eq!(listed.code, 0, "{listed:?}");
    let listed = listed.json_line();
    assert_eq!(
        (&listed[0]["id"], &listed[0]["status"]),
        (&json!("shared"), &json!("complete")),
        "{listed}"
    );
    let relative = a.run(&[
        "e",
        "-i",
        "review.dy",
        "--id",
        "x",
        "--store",
        "file://relative",
    ]);
    assert_eq!(relative.code, 64, "{relative:?}");
}

/// The issue's acceptance item: a dygram execution advanced alternately by two processes in
/// different directories through the store completes, every call once, and ends as the same
/// execution advanced in one folder does.
#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn an_execution_advanced_alternately_from_two_folders_ends_as_in_one_folder() {
    let Some(pg) = Postgres::start() else { return };
    let url = pg.store_url();
    let (a, b, alone) = (Dir::new(), Dir::new(), Dir::new());
    for d in [&a, &b, &alone] {
        d.write("review.dy", &review());
    }
    let shared = until_complete(|n| {
        let d = if n % 2 == 0 { &a } else { &b };
        review_call(d, "shared", Some(&url), n == 0)
    });
    let single = until_complete(|n| review_call(&alone, "shared", None, n == 0));
    assert_eq!(shared, single, "the same reports, call by call");
    // Every call advanced the execution once: steps count 1, 2, 3, …
    for (n, report) in shared.iter().enumerate() {
        assert_eq!(report["steps"], json!(n + 1), "call {n}: {report}");
    }
    assert_eq!(shared.last().unwrap()["turns"], 4);
    // Neither folder keeps an execution of its own.
    assert!(a.folders().is_empty() && b.folders().is_empty());

    let store = PgStore::connect(&pg.url, "dygram").unwrap();
    let seen = Dir::new();
    let mut keys = materialise(&store, "shared", &seen);
    keys.sort();
    let mut files: Vec<String> = std::fs::read_dir(alone.exec_dir("shared"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "execution.lock")
        .collect();
    files.sort();
    assert_eq!(
        keys, files,
        "the store holds the files of the folder, not its lock"
    );

    let history = seen.history("shared");
    let turns: Vec<u64> = history
        .iter()
        .map(|l| l["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, (1..=shared.len() as u64).collect::<Vec<_>>());
    assert_eq!(
        timeless(json!(history)),
        timeless(json!(alone.history("shared")))
    );
    assert_eq!(
        timeless(seen.show_json("shared")),
        timeless(alone.show_json("shared"))
    );
    assert_eq!(
        timeless(seen.status_json("shared")),
        timeless(alone.status_json("shared"))
    );

    let listed = a.run(&["exec", "list", "--json", "--store", &url]);
    assert_eq!(listed.code, 0, "{listed:?}");
    let listed = listed.json_line();
    assert_eq!(listed[0]["id"], "shared", "{listed}");
    assert_eq!(listed[0]["status"], "complete", "{listed}");
    assert_eq!(listed[0]["turns"], 4, "{listed}");
}

/// A call cut short between its documents and its `state.json` (here: its `state.json` put back
/// to the one before) did not happen: the next call redoes it, with the history line of the
/// cut-short attempt dropped, and the execution ends as an uninterrupted one.
#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_call_whose_state_never_reached_the_store_is_redone() {
    let Some(pg) = Postgres::start() else { return };
    let url = pg.store_url();
    let (a, b, alone) = (Dir::new(), Dir::new(), Dir::new());
    for d in [&a, &b, &alone] {
        d.write("review.dy", &review());
    }
    let store = PgStore::connect(&pg.url, "dygram").unwrap();
    let mut before_third = None;
    let mut cut_short_line = None;
    let shared = until_complete(|n| {
        let d = if n % 2 == 0 { &a } else { &b };
        let out = review_call(d, "cut", Some(&url), n == 0);
        if n == 1 {
            before_third = store.get("cut", "state.json").unwrap();
        }
        if n == 2 {
            // The third call's documents are there, its commit point is not.
            let holder = ::store::LockHolder::current(jiff::Timestamp::now(), Some("test"));
            let mut lease = store.lease("cut", &holder).unwrap();
            let old = before_third.take().unwrap();
            let history = store.get("cut", "history.jsonl").unwrap().unwrap();
            cut_short_line = String::from_utf8(history)
                .unwrap()
                .lines()
                .nth(2)
                .map(str::to_string);
            store
                .put(&mut lease, "state.json", &old, ::store::Flush::Durable)
                .unwrap();
        }
        out
    });
    let single = until_complete(|n| review_call(&alone, "cut", None, n == 0));
    let mut expected = single[..3].to_vec();
    expected.extend(single[2..].iter().cloned());
    assert_eq!(
        shared, expected,
        "the third call done twice, the rest as in one folder"
    );
    let seen = Dir::new();
    materialise(&store, "cut", &seen);
    let cut_short: Value = serde_json::from_str(&cut_short_line.unwrap()).unwrap();
    assert_eq!(cut_short["turn"], 3);
    assert_ne!(
        seen.history("cut")[2],
        cut_short,
        "the line of the call that did not happen is gone; the redone call's is there"
    );
    assert_eq!(
        timeless(json!(seen.history("cut"))),
        timeless(json!(alone.history("cut")))
    );
    assert_eq!(
        timeless(seen.status_json("cut")),
        timeless(alone.status_json("cut"))
    );
}

/// Manual answers given from the other folder: the request waits in the store
/// (`pending-request.json`), and is gone from it once answered.
#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_request_shown_in_one_folder_is_answered_from_another() {
    let Some(pg) = Postgres::start() else { return };
    let url = pg.store_url();
    let (a, b) = (
        Dir::with_file("order.dy", ORDER),
        Dir::with_file("order.dy", ORDER),
    );
    let args = [
        "e", "-i", "order.dy", "--id", "o", "--store", &url, "--format", "json",
    ];
    let first = a.run(&args);
    assert_eq!(first.code, 0, "{first:?}");
    let asks = b.run(&args);
    assert_eq!(asks.code, 101, "{asks:?}");
    assert_eq!(
        asks.json_line()["requestFile"],
        "store:dygram/o/pending-request.json"
    );
    let store = PgStore::connect(&pg.url, "dygram").unwrap();
    let pending = store.get("o", "pending-request.json").unwrap().unwrap();
    assert!(!pending.is_empty());
    let answer = r#"{"tools": [{"name": "write_order", "input": {"data": {"total": 3}}}]}"#;
    let answered = a.run_with_stdin(&args, answer);
    assert_eq!(answered.code, 0, "{answered:?}");
    let seen = Dir::new();
    materialise(&store, "o", &seen);
    assert_eq!(seen.show_json("o")["contextState"]["order"]["total"], 3);
    // No request waits: the empty document stands for the removed file.
    assert_eq!(
        store.get("o", "pending-request.json").unwrap(),
        Some(Vec::new())
    );
    assert!(!seen.exec_dir("o").join("pending-request.json").exists());
}

/// While another caller holds the execution's lease, a call is refused as busy (exit 1), as it is
/// when another process holds an execution's lock in the file mode.
#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_held_execution_is_busy() {
    let Some(pg) = Postgres::start() else { return };
    let store = PgStore::connect(&pg.url, "dygram").unwrap();
    let holder = ::store::LockHolder::current(jiff::Timestamp::now(), Some("another caller"));
    let lease = store.create("held", &holder).unwrap();
    let d = Dir::with_file("m.dy", WALK);
    let out = d.run(&[
        "e",
        "-i",
        "m.dy",
        "--id",
        "held",
        "--store",
        &pg.store_url(),
    ]);
    assert_eq!(out.code, 75, "{out:?}");
    assert!(
        out.stderr
            .contains("execution held is in use by another dygram process (pid"),
        "{out:?}"
    );
    assert!(out.stderr.contains("another caller"), "{out:?}");
    assert!(out.stderr.contains("one call at a time"), "{out:?}");
    assert_eq!(out.stdout, "");
    assert!(
        store.keys("held", "").unwrap().is_empty(),
        "nothing written"
    );
    drop(lease);
    let out = d.run(&[
        "e",
        "-i",
        "m.dy",
        "--id",
        "held",
        "--store",
        &pg.store_url(),
    ]);
    assert_eq!(out.code, 0, "free again: {out:?}");
}

/// Runs the file mode's `execute -i MACHINE --id ID` in `base` (a checkout's private folder).
fn file_call(base: &Path, machine: &Path, id: &str) {
    let out = std::process::Command::new(bin())
        .args(["e", "-i", "-q"])
        .arg(machine)
        .args(["--id", id])
        .current_dir(base)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// A caller whose lease ran out while it worked, and whose execution another caller took over,
/// is refused when it uploads: nothing of its turn is committed, the store keeps the successor's.
#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_caller_whose_lease_was_taken_over_saves_nothing() {
    let Some(pg) = Postgres::start() else { return };
    let url = pg.store_url();
    let caller = Dir::with_file("m.dy", WALK);
    let machine = caller.path().join("m.dy");
    let slow =
        SharedStore::connect_with_lease(&url, caller.path(), Duration::from_millis(300)).unwrap();
    let first = slow.checkout("taken").unwrap();
    file_call(first.base(), &machine, "taken");
    std::thread::sleep(Duration::from_millis(700));

    let other = SharedStore::connect(&url, caller.path()).unwrap();
    let second = other.checkout("taken").unwrap();
    file_call(second.base(), &machine, "taken");
    file_call(second.base(), &machine, "taken");
    let successor =
        std::fs::read(second.base().join(".dygram/executions/taken/state.json")).unwrap();
    let written = second.check_in().unwrap().written;
    assert_eq!(
        written.last().map(String::as_str),
        Some("state.json"),
        "{written:?}"
    );

    match first.check_in() {
        Err(SharedError::Fenced { id, held, current }) => {
            assert_eq!((id.as_str(), held, current), ("taken", 1, 2));
        }
        other => panic!("not fenced: {other:?}"),
    }
    let state = other.store().get("taken", "state.json").unwrap().unwrap();
    assert_eq!(state, successor);
    let state: Value = serde_json::from_slice(&state).unwrap();
    assert_eq!(state["callCount"], 2);
}

/// `--store` takes a PostgreSQL URL and needs `--id`; anything else is a usage error that
/// creates nothing.
#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_store_that_is_not_a_postgresql_url_is_a_usage_error() {
    let mut d = Dir::with_file("m.dy", WALK);
    let out = d.run(&["e", "-i", "m.dy", "--id", "x", "--store", "mysql://db/x"]);
    assert_eq!(out.code, 64, "{out:?}");
    assert_eq!(out.stdout, "");
    insta::assert_snapshot!(out.stderr);

    let out = d.run(&["e", "-i", "m.dy", "--store", "postgresql://db/x"]);
    assert_eq!(out.code, 64, "{out:?}");
    assert!(out.stderr.contains("--store needs --id"), "{out:?}");
    assert!(out.stderr.contains("hint: add --id NAME"), "{out:?}");

    d.env("DYGRAM_STORE", "host=/tmp port=5432");
    let out = d.run(&["e", "-i", "m.dy", "--id", "x"]);
    assert_eq!(out.code, 64, "{out:?}");
    assert!(out.stderr.contains("DYGRAM_STORE"), "{out:?}");
    assert!(
        !out.stderr.contains("host=/tmp"),
        "the value is not repeated: {out:?}"
    );
    assert!(d.folders().is_empty(), "nothing created");
}

/// `exec status|show|clean|rm` take the store as `exec list` does: a shared execution is seen from
/// any folder, never reported "not found" with a hint to look locally, and removed under its lease.
#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn status_show_clean_and_rm_take_the_store() {
    let Some(pg) = Postgres::start() else { return };
    let url = pg.store_url();
    let (a, elsewhere) = (Dir::new(), Dir::new());
    a.write("review.dy", &review());
    until_complete(|n| review_call(&a, "seen", Some(&url), n == 0));
    let status = elsewhere.run(&[
        "exec", "status", "seen", "--format", "json", "--store", &url,
    ]);
    assert_eq!(status.code, 0, "{status:?}");
    let status = status.json_line();
    assert_eq!(status["id"], "seen");
    assert_eq!(status["status"], "complete", "{status}");
    let show = elsewhere.run(&[
        "exec", "show", "seen", "--format", "mermaid", "--store", &url,
    ]);
    assert_eq!(show.code, 0, "{show:?}");
    assert!(show.stdout.contains("stateDiagram"), "{}", show.stdout);
    // Not in the store: said so, with the store's listing as the way to look.
    let missing = elsewhere.run(&["exec", "status", "nope", "--store", &url]);
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(
        missing.stderr.contains("in the store"),
        "{}",
        missing.stderr
    );
    assert!(
        missing.stderr.contains("exec list --store"),
        "{}",
        missing.stderr
    );
    assert!(
        !missing.stderr.contains("executions here"),
        "{}",
        missing.stderr
    );
    // Without an id there is no "last" in a store.
    let unnamed = elsewhere.run(&["exec", "status", "--store", &url]);
    assert_eq!(unnamed.code, 64, "{unnamed:?}");
    // A held execution is not removed; a free one is, and clean removes completed ones.
    until_complete(|n| review_call(&a, "done-too", Some(&url), n == 0));
    let store = PgStore::connect(&pg.url, "dygram").unwrap();
    let holder = ::store::LockHolder::current(jiff::Timestamp::now(), Some("test"));
    let lease = store.lease("seen", &holder).unwrap();
    let busy = elsewhere.run(&["exec", "rm", "seen", "--store", &url]);
    assert_eq!(busy.code, 75, "{busy:?}");
    assert!(busy.stderr.contains("in use"), "{}", busy.stderr);
    drop(lease);
    let removed = elsewhere.run(&["exec", "rm", "seen", "--store", &url]);
    assert_eq!(removed.code, 0, "{removed:?}");
    let cleaned = elsewhere.run(&["exec", "clean", "--store", &url]);
    assert_eq!(cleaned.code, 0, "{cleaned:?}");
    assert!(store.list().unwrap().is_empty(), "{:?}", store.list());
    let gone = elsewhere.run(&["exec", "rm", "seen", "--store", &url]);
    assert_eq!(gone.code, 1, "{gone:?}");
    assert!(
        gone.stderr.contains("no execution seen in the store"),
        "{}",
        gone.stderr
    );
}
