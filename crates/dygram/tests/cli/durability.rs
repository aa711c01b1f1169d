//! The order in which `execute -i` makes its files durable, as a power loss would test it: the
//! system calls of a real call are traced (`strace`) and their order checked. A file whose content
//! the next commit no longer carries must be on the disk before that commit is: the previous call's
//! history line, and a machine a meta tool changed.
//!
//! Without a usable `strace` the tests say SKIPPED and return (unless `STRACE_TEST_REQUIRED` is
//! set, as CI does).

use std::path::Path;
use std::process::{Command, Stdio};

use super::answers::ORDER;
use super::support::{Dir, LLM_ENV, bin};

/// One call of `dygram ARGS` in `d` with `stdin`, traced: its exit code and the traced calls that
/// make files durable or move them (`fsync`, `fdatasync`, renames), one per line, with paths.
fn traced(d: &Dir, args: &[&str], stdin: &str) -> (i32, Vec<String>) {
    let input = d.path().join("stdin.txt");
    std::fs::write(&input, stdin).unwrap();
    let log = d.path().join("strace.log");
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-y", "-e"])
        .arg("trace=fsync,fdatasync,rename,renameat,renameat2")
        .arg("-o")
        .arg(&log)
        .arg(bin())
        .args(args)
        .current_dir(d.path())
        .stdin(std::fs::File::open(&input).unwrap())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for var in LLM_ENV {
        cmd.env_remove(var);
    }
    let status = cmd.status().unwrap();
    let lines = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    (status.code().unwrap_or(-1), lines)
}

/// Index of the first traced line that flushes `path` (`fsync`/`fdatasync` of a descriptor of it).
fn flush_of(lines: &[String], path: &Path) -> Option<usize> {
    let fd = format!("<{}>)", path.display());
    lines
        .iter()
        .position(|l| (l.contains(" fsync(") || l.contains(" fdatasync(")) && l.contains(&fd))
}

/// Index of the first traced line that flushes a temporary file for `name` in `dir`.
fn flush_of_temporary(lines: &[String], dir: &Path, name: &str) -> Option<usize> {
    let prefix = format!("<{}/.{name}.", dir.display());
    lines
        .iter()
        .position(|l| (l.contains(" fsync(") || l.contains(" fdatasync(")) && l.contains(&prefix))
}

/// Index of the first traced line that renames something onto `path`.
fn rename_onto(lines: &[String], path: &Path) -> Option<usize> {
    let target = format!("\"{}\")", path.display());
    lines
        .iter()
        .position(|l| l.contains(" rename") && l.contains(&target))
}

#[test]
fn the_previous_history_line_is_on_disk_before_the_next_commit() {
    if testkit::needs::strace().is_none() {
        return;
    }
    let d = Dir::with_file("order.dy", ORDER);
    let args = ["e", "-i", "order.dy", "--id", "s"];
    // Call 1 (start -> charge) appends history line 1 after its commit.
    assert_eq!(d.run(&args).code, 0);
    let dir = d.exec_dir("s");
    let history = dir.join("history.jsonl");
    let state = dir.join("state.json");

    // Call 2 only shows the request: its commit carries line 1 still, so nothing needs flushing.
    let (code, lines) = traced(&d, &args, "");
    assert_eq!(code, 101, "{lines:#?}");
    assert_eq!(flush_of(&lines, &history), None, "{lines:#?}");

    // Call 3 advances the execution: its commit carries line 2 only, so line 1 must be on the disk
    // before that commit is made.
    let answer = r#"{"response": "Charged.", "tools": [{"name": "write_order", "input": {"data": {"total": 42}}}]}"#;
    let (code, lines) = traced(&d, &args, answer);
    assert_eq!(code, 0, "{lines:#?}");
    let commit = rename_onto(&lines, &state).unwrap_or_else(|| panic!("{lines:#?}"));
    let flushed = flush_of(&lines, &history);
    assert!(
        flushed.is_some_and(|f| f < commit),
        "history.jsonl is not flushed before the commit: {lines:#?}"
    );
    assert_eq!(d.history("s").len(), 2);
}

#[test]
fn a_machine_changed_by_a_meta_tool_is_written_durably() {
    if testkit::needs::strace().is_none() {
        return;
    }
    let d = Dir::with_file(
        "meta.dy",
        "machine \"Meta\" @meta
Task build { prompt: \"build a tool\"; }
State done;
start -> build -> done;
",
    );
    let args = ["e", "-i", "meta.dy", "--id", "m"];
    assert_eq!(d.run(&args).code, 0);
    assert_eq!(d.run(&args).code, 101);
    let answer = r#"{"tools": [{"name": "construct_tool", "input": {"name": "adder", "description": "adds", "input_schema": {"type": "object"}, "implementation_strategy": "code_generation", "implementation_details": "return 1;"}}]}"#;
    let (code, lines) = traced(&d, &args, answer);
    assert_eq!(code, 0, "{lines:#?}");
    let dir = d.exec_dir("m");
    let machine = dir.join("machine.json");
    // The commit after this one no longer carries the machine: machine.json must be on the disk,
    // its data flushed before it is renamed into place and the folder flushed after.
    let renamed = rename_onto(&lines, &machine).unwrap_or_else(|| panic!("{lines:#?}"));
    let data = flush_of_temporary(&lines, &dir, "machine.json");
    assert!(data.is_some_and(|f| f < renamed), "{lines:#?}");
    let folder = lines[renamed..]
        .iter()
        .any(|l| l.contains(" fsync(") && l.contains(&format!("<{}>)", dir.display())));
    assert!(folder, "{lines:#?}");
    let saved = d.read_json("m", "machine.json");
    assert!(saved.to_string().contains("adder"), "{saved}");
}
