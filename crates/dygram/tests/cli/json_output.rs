//! One spelling for machine-readable output (`--format json`, `--json` kept as the older one), and
//! one JSON object on stdout even when a command cannot do its work.

use serde_json::{Value, json};

use super::answers::ORDER;
use super::support::{Dir, Out};

/// The error object of a command that could not do its work: its kind, exit code and message.
fn error_object(out: &Out, kind: &str, exit: i32) -> Value {
    assert_eq!(out.code, exit, "{out:?}");
    let v = out.json_line();
    assert_eq!(v["isError"], true, "{out:?}");
    assert_eq!(v["kind"], kind, "{out:?}");
    assert_eq!(v["exitCode"], exit, "{out:?}");
    let message = v["message"].as_str().unwrap();
    assert!(
        out.stderr.contains(message) || kind == "invalid_machine",
        "{out:?}"
    );
    v
}

#[test]
fn the_older_json_flag_prints_what_format_json_prints() {
    let d = Dir::with_file("order.dy", ORDER);
    assert_eq!(d.run(&["e", "-i", "order.dy", "--id", "a"]).code, 0);
    for args in [
        &["pv", "order.dy"][..],
        &["exec", "list"],
        &["exec", "status", "a"],
    ] {
        let json = d.run(&[args, &["--json"]].concat());
        let format = d.run(&[args, &["--format", "json"]].concat());
        assert_eq!(format.code, 0, "{format:?}");
        assert_eq!(json.code, 0, "{json:?}");
        assert_eq!(json.json_line(), format.json_line(), "{args:?}");
    }
}

#[test]
fn check_imports_lists_the_files_in_order_as_json() {
    let d = Dir::new();
    d.write(
        "lib/auth.dy",
        "Task Login \"Log in\";\nTask Session;\nLogin -> Session;\n",
    );
    d.write(
        "app.dy",
        "import { Login, Session } from \"./lib/auth\"\nmachine \"App\"\nstart -> Login;\n",
    );
    let out = d.run(&["check-imports", "app.dy", "--format", "json"]);
    assert_eq!(out.code, 0, "{out:?}");
    let v = out.json_line();
    assert_eq!(v["valid"], true);
    assert_eq!(v["files"], json!(["lib/auth.dy", "app.dy"]));
    d.write(
        "broken.dy",
        "import { Nope } from \"./missing\"\nstart -> Nope;\n",
    );
    let out = d.run(&["ci", "broken.dy", "--format", "json"]);
    assert_eq!(out.code, 1, "{out:?}");
    let v = out.json_line();
    assert_eq!(v["valid"], false);
    let diagnostics = v["diagnostics"].as_array().unwrap();
    assert!(diagnostics.iter().any(|d| d["severity"] == "error"), "{v}");
}

#[test]
fn a_command_that_cannot_start_prints_an_error_object() {
    let d = Dir::with_file("bad.dy", "machine \"x\"\nstart -> ;\n");
    d.write("order.dy", ORDER);
    error_object(
        &d.run(&["e", "missing.dy", "--format", "json"]),
        "unreadable_input",
        1,
    );
    let bad = error_object(
        &d.run(&["e", "bad.dy", "--format", "json"]),
        "invalid_machine",
        1,
    );
    assert_eq!(bad["message"], "the machine has errors");
    error_object(
        &d.run(&["e", "-i", "bad.dy", "--format", "json"]),
        "invalid_machine",
        1,
    );
    error_object(
        &d.run(&["exec", "status", "nope", "--format", "json"]),
        "not_found",
        1,
    );
    error_object(
        &d.run(&["exec", "show", "--format", "json"]),
        "not_found",
        1,
    );
    let usage = error_object(
        &d.run(&["e", "order.dy", "--format", "json", "--bogus"]),
        "usage",
        64,
    );
    assert!(
        usage["message"].as_str().unwrap().contains("--bogus"),
        "{usage}"
    );
    // Without --format json nothing goes to stdout.
    let out = d.run(&["e", "missing.dy"]);
    assert_eq!((out.code, out.stdout.as_str()), (1, ""), "{out:?}");
}

#[test]
fn a_run_that_fails_for_want_of_a_model_prints_its_own_result_object() {
    let d = Dir::with_file("order.dy", ORDER);
    let one_shot = d.run(&["e", "order.dy", "--format", "json"]);
    assert_eq!(one_shot.code, 1, "{one_shot:?}");
    // The run started: its own result object says how it ended.
    let v = one_shot.json();
    assert_eq!(v["status"], "error", "{one_shot:?}");
    assert!(
        v["error"].as_str().unwrap().contains("no LLM client"),
        "{v}"
    );
}
