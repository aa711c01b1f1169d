//! Stateful execution: `dygram execute -i` (one unit of work per call, the execution saved in
//! `.dygram/executions/<id>/`) and `dygram exec list|status|show|clean|rm`.
//!
//! The examples of the design (`shared/seeds/dygram-cli-stateful-execution.md`, §CLI Interface,
//! §Usage Examples, §Error Handling) run as written, with recorded answers (`--playback`) or
//! manual answers on stdin instead of a live API. Every call is a real process in a temporary
//! folder, without `ANTHROPIC_API_KEY`, `OPENAI_API_KEY` and `OPENAI_BASE_URL`, so that without
//! playback the execution is in manual mode (exit 3, the request saved and printed).
//!
//! Exit codes of `execute -i`: 0 a unit ran and there is more to do, 1 error, 2 complete,
//! 3 waiting for an answer, 64 usage error.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::{Dir, LLM_ENV, Out, bin, graphviz_available, wait_output};

/// The conformance corpus: its `context-basic.dy` and `meta-construct-tool` machines, their recordings
/// and expected results are what these tests run. Every test first checks that it is there
/// ([`corpus_is_here`]); without it the test says SKIPPED.
fn corpus() -> PathBuf {
    testkit::needs::shared_dir().join("conformance/dygram")
}

/// Whether the corpus is here (otherwise the calling test says SKIPPED and returns).
fn corpus_is_here() -> bool {
    testkit::needs::conformance().is_some()
}

/// Recordings of `context-basic.dy`: start → updateActivity → displaySummary → end, 3 turns.
fn context_recordings() -> String {
    corpus()
        .join("execution/context-basic/recordings")
        .display()
        .to_string()
}

fn meta_recordings() -> String {
    corpus()
        .join("execution/meta-construct-tool/recordings")
        .display()
        .to_string()
}

/// `expected.json` of a conformance oracle.
fn expected(oracle: &str) -> Value {
    let path = corpus()
        .join("execution")
        .join(oracle)
        .join("expected.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A temporary working folder with the machine `m.dy` (the helpers of [`Dir`], and those of the
/// examples of the design).
struct Sandbox {
    dir: Dir,
}

impl std::ops::Deref for Sandbox {
    type Target = Dir;

    fn deref(&self) -> &Dir {
        &self.dir
    }
}

impl Sandbox {
    /// With `context-basic.dy` as `m.dy`.
    fn new() -> Self {
        Self::with("context-basic.dy")
    }

    /// With `examples/execution-features/<name>` as `m.dy`.
    fn with(name: &str) -> Self {
        let dir = Dir::new();
        std::fs::copy(
            corpus().join("examples/execution-features").join(name),
            dir.path().join("m.dy"),
        )
        .unwrap();
        Self { dir }
    }

    fn spawn(&self, args: &[&str]) -> Child {
        self.spawn_command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// `bash -c SCRIPT` in the folder, with `dygram` on the PATH.
    fn bash(&self, script: &str) -> Out {
        let bin_dir = bin().parent().unwrap().to_path_buf();
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![bin_dir];
        dirs.extend(std::env::split_paths(&path));
        let mut cmd = std::process::Command::new("bash");
        cmd.arg("-c")
            .arg(script)
            .current_dir(self.path())
            .env("PATH", std::env::join_paths(dirs).unwrap())
            .env("R", context_recordings())
            .stdin(Stdio::null());
        for var in LLM_ENV {
            cmd.env_remove(var);
        }
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_output(child, Duration::from_secs(60));
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }

    fn executions(&self) -> PathBuf {
        self.path().join(".dygram/executions")
    }

    fn read(&self, id: &str, file: &str) -> String {
        std::fs::read_to_string(self.exec_dir(id).join(file)).unwrap()
    }

    /// Calls `e -i m.dy --id ID` until it stops returning 0; returns the last exit code and the
    /// number of calls.
    fn drive(&self, id: &str) -> (i32, usize) {
        for n in 1..=30 {
            let out = self.run(&["e", "-i", "m.dy", "--id", id, "-q"]);
            if out.code != 0 {
                return (out.code, n);
            }
        }
        panic!("execution {id} did not stop within 30 calls");
    }
}

/// Polls `cond` every 10 ms for at most `limit`.
fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cond()
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

/// `exec-YYYYMMDD-HHMMSS`, optionally followed by `-N`.
fn is_generated_id(id: &str) -> bool {
    let Some(rest) = id.strip_prefix("exec-") else {
        return false;
    };
    let parts: Vec<&str> = rest.split('-').collect();
    let digits = |s: &str, n: usize| s.len() == n && s.chars().all(|c| c.is_ascii_digit());
    match parts.as_slice() {
        [d, t] => digits(d, 8) && digits(t, 6),
        [d, t, n] => digits(d, 8) && digits(t, 6) && n.parse::<u32>().is_ok(),
        _ => false,
    }
}

/// Final context and visited nodes of the reference run of context-basic.
fn context_basic_final() -> (Value, Value) {
    let e = expected("context-basic");
    (e["contextState"].clone(), e["visited"].clone())
}

// ---------------------------------------------------------------------------------------------
// §CLI Interface: Basic Usage
// ---------------------------------------------------------------------------------------------

#[test]
fn basic_usage_starts_resumes_and_completes() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    let rec = context_recordings();

    // Start new execution (auto-generates ID).
    let first = sb.run(&["execute", "--interactive", "m.dy", "--playback", &rec]);
    assert_eq!(first.code, 0, "{first:?}");
    let id = first.started_id();
    assert!(is_generated_id(&id), "id {id}");
    assert!(
        first.stdout.contains("📍 Turn 1 - Node: start"),
        "{first:?}"
    );
    assert!(
        first
            .stdout
            .contains(&format!("State saved (.dygram/executions/{id})")),
        "{first:?}"
    );

    // Continue execution (auto-resumes last), twice.
    for turn in 2..=3 {
        let out = sb.run(&["execute", "--interactive", "m.dy"]);
        assert_eq!(out.code, 0, "{out:?}");
        assert!(
            out.stderr.contains(&format!("⚡ Resuming execution: {id}")),
            "{out:?}"
        );
        assert!(
            out.stdout.contains(&format!("📍 Turn {turn} - Node: ")),
            "{out:?}"
        );
    }

    // The call that reaches the end exits 2.
    let last = sb.run(&["execute", "--interactive", "m.dy"]);
    assert_eq!(last.code, 2, "{last:?}");
    assert!(last.stderr.contains("Resuming execution"), "{last:?}");
    assert!(last.stdout.contains("✅ Execution complete!"), "{last:?}");
    assert!(last.stdout.contains("Total turns: 3"), "{last:?}");
    assert!(last.stdout.contains("Status: complete"), "{last:?}");

    // Once more: still 2, nothing left to do.
    let again = sb.run(&["execute", "--interactive", "m.dy"]);
    assert_eq!(again.code, 2, "{again:?}");
    assert!(again.stdout.contains("already complete"), "{again:?}");

    // The state folder.
    let dir = sb.exec_dir(&id);
    for file in [
        "state.json",
        "metadata.json",
        "machine.json",
        "history.jsonl",
    ] {
        assert!(
            dir.join(file).is_file(),
            "{file} missing in {}",
            dir.display()
        );
    }
    assert_eq!(sb.folders(), vec![id.clone()]);
    let link = std::fs::read_link(sb.executions().join("last")).unwrap();
    assert!(link.is_relative(), "last -> {}", link.display());
    assert_eq!(link, Path::new(&id));

    let state = sb.read_json(&id, "state.json");
    assert_eq!(state["status"], "complete");
    assert_eq!(state["version"], "1.0");
    let hash = state["machineHash"].as_str().unwrap();
    assert!(
        hash.len() == 64 && hash.chars().all(|c| c.is_ascii_hexdigit()),
        "{hash}"
    );
    assert_eq!(state["executionState"]["currentNode"], "end");
    let (context, visited) = context_basic_final();
    assert_eq!(state["executionState"]["contextValues"], context);
    assert_eq!(state["executionState"]["visitedNodes"], visited);

    let meta = sb.read_json(&id, "metadata.json");
    assert_eq!(meta["id"], id.as_str());
    assert_eq!(meta["turnCount"], 3);
    assert_eq!(meta["status"], "complete");
    assert_eq!(meta["mode"], "playback");

    // One line per call that did work (the already-complete call adds none), turns increasing.
    let history = sb.read(&id, "history.jsonl");
    let lines: Vec<Value> = history
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 4, "{history}");
    let turns: Vec<u64> = lines.iter().map(|l| l["turn"].as_u64().unwrap()).collect();
    assert_eq!(turns, vec![1, 2, 3, 4]);
    let nodes: Vec<&str> = lines.iter().map(|l| l["node"].as_str().unwrap()).collect();
    assert_eq!(
        nodes,
        vec!["start", "updateActivity", "displaySummary", "end"]
    );
    assert_eq!(lines[0]["tools"][0], "write_UserProfile");
    assert_eq!(lines[3]["status"], "complete");
}

#[test]
fn bash_loop_runs_to_completion() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    // As in §Usage Examples, `dygram` found on the PATH; the loop must end by itself.
    let out = sb.bash(r#"while dygram e -i m.dy --playback "$R"; do :; done"#);
    assert_eq!(out.code, 0, "a while loop that ended: {out:?}");
    let status = sb.run(&["exec", "status", "--json"]);
    assert_eq!(status.code, 0, "{status:?}");
    let status = status.json_line();
    assert_eq!(status["status"], "complete");
    assert_eq!(status["turns"], 3);
    assert_eq!(status["currentNodes"], json!(["end"]));

    // The same loop, keeping the exit status of the call that ended it.
    let sb = Sandbox::new();
    let out = sb.bash(
        r#"n=0
        while dygram e -i m.dy --playback "$R" -q >/dev/null; rc=$?; [ "$rc" -eq 0 ]; do n=$((n+1)); done
        echo "calls with more to do: $n"
        exit "$rc""#,
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stdout.contains("calls with more to do: 3"), "{out:?}");
}

#[test]
fn agent_usage_pattern_script() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    // §Usage Examples, Agent Usage Pattern, with playback on the first call instead of an API.
    let out = sb.bash(
        r#"
# Start execution
dygram execute --interactive ./m.dy --playback "$R"

# Continue execution (multiple times)
for i in {1..5}; do
    dygram execute --interactive ./m.dy

    # Check exit code
    if [ $? -ne 0 ]; then
        echo "Execution failed or complete"
        break
    fi
done

# Check final status
dygram exec status
"#,
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        out.stdout.matches("Execution failed or complete").count(),
        1,
        "{out:?}"
    );
    assert!(out.stdout.contains("✅ Execution complete!"), "{out:?}");
    let status = &out.stdout[out.stdout.find("Execution: exec-").unwrap()..];
    assert!(status.contains("Status: complete"), "{status}");
    assert!(status.contains("Current Node: end"), "{status}");
    assert!(status.contains("Turns: 3"), "{status}");
}

// ---------------------------------------------------------------------------------------------
// §CLI Interface: Managing Multiple Executions
// ---------------------------------------------------------------------------------------------

#[test]
fn managing_executions() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    let rec = context_recordings();

    // Explicit execution ID, then resume it.
    let out = sb.run(&[
        "execute",
        "--interactive",
        "./m.dy",
        "--id",
        "my-session",
        "--playback",
        &rec,
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr
            .contains("⚡ Starting interactive execution: my-session"),
        "{out:?}"
    );
    let out = sb.run(&["execute", "--interactive", "./m.dy", "--id", "my-session"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("⚡ Resuming execution: my-session"),
        "{out:?}"
    );

    // A second execution, run to the end: it is the most recent.
    std::thread::sleep(Duration::from_millis(20));
    let out = sb.run(&["e", "-i", "m.dy", "--id", "done-run", "--playback", &rec]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(sb.drive("done-run"), (2, 3));

    // List, most recent first.
    let list = sb.run(&["exec", "list"]);
    assert_eq!(list.code, 0, "{list:?}");
    let done_at = list.stdout.find("done-run").expect("done-run listed");
    let session_at = list.stdout.find("my-session").expect("my-session listed");
    assert!(done_at < session_at, "{list:?}");
    let session_line = list
        .stdout
        .lines()
        .find(|l| l.contains("my-session"))
        .unwrap();
    assert!(session_line.contains("m.dy"), "{session_line}");
    assert!(session_line.contains("turn 2"), "{session_line}");
    assert!(session_line.contains("in_progress"), "{session_line}");
    assert!(session_line.contains("displaySummary"), "{session_line}");
    let done_line = list
        .stdout
        .lines()
        .find(|l| l.contains("done-run"))
        .unwrap();
    assert!(done_line.contains("complete"), "{done_line}");
    let ls = sb.run(&["exec", "ls", "--json"]);
    assert_eq!(ls.code, 0, "{ls:?}");
    let rows = ls.json_line();
    let ids: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["done-run", "my-session"]);
    assert_eq!(rows[1]["status"], "in_progress");
    assert_eq!(rows[1]["turns"], 2);
    assert_eq!(rows[1]["currentNodes"], json!(["displaySummary"]));

    // Show execution status.
    let status = sb.run(&["exec", "status", "my-session"]);
    assert_eq!(status.code, 0, "{status:?}");
    assert!(
        status.stdout.starts_with("Execution: my-session\n"),
        "{status:?}"
    );
    for field in [
        "  Machine: ./m.dy\n",
        "  Status: in_progress\n",
        "  Current Node: displaySummary\n",
        // Replayed: of the turns its three recordings give.
        "  Turns: 2/3\n",
        "  Steps: 2\n",
        "  Started: ",
        "  Last Updated: ",
        "  Mode: playback (",
    ] {
        assert!(status.stdout.contains(field), "{field:?} in {status:?}");
    }

    // Show: json, mermaid, dot (without advancing the execution).
    let before = sb.read("my-session", "state.json");
    let shown = sb.show_json("my-session");
    assert_eq!(shown["id"], "my-session");
    assert_eq!(shown["currentNode"], "displaySummary");
    assert_eq!(
        shown["visitedNodes"],
        json!(["start", "updateActivity", "displaySummary"])
    );
    assert_eq!(shown["contextState"]["SessionData"]["activityCount"], 1);
    let mermaid = sb.run(&["exec", "show", "my-session", "--format", "mermaid"]);
    assert_eq!(mermaid.code, 0, "{mermaid:?}");
    assert!(mermaid.stdout.starts_with("stateDiagram-v2"), "{mermaid:?}");
    assert!(
        mermaid.stdout.contains("class displaySummary dy_current"),
        "{mermaid:?}"
    );
    let dot = sb.run(&["exec", "show", "my-session", "--format", "dot"]);
    assert_eq!(dot.code, 0, "{dot:?}");
    assert!(dot.stdout.trim_start().starts_with("digraph"), "{dot:?}");
    assert!(dot.stdout.contains("displaySummary"), "{dot:?}");
    if graphviz_available() {
        let dot_file = sb.path().join("show.dot");
        std::fs::write(&dot_file, &dot.stdout).unwrap();
        let svg = std::process::Command::new("dot")
            .arg("-Tsvg")
            .arg(&dot_file)
            .output()
            .unwrap();
        assert!(
            svg.status.success(),
            "dot -Tsvg rejected the output: {}",
            String::from_utf8_lossy(&svg.stderr)
        );
        assert!(String::from_utf8_lossy(&svg.stdout).contains("<svg"));
    } else {
        eprintln!("note: Graphviz `dot` is not installed; the DOT output was not rendered");
    }
    let text = sb.run(&["exec", "show", "my-session"]);
    assert_eq!(text.code, 0, "{text:?}");
    assert!(
        text.stdout.contains("Runtime Snapshot: my-session"),
        "{text:?}"
    );
    assert_eq!(
        sb.read("my-session", "state.json"),
        before,
        "show changed the state"
    );

    // Clean up: only the complete one goes; the rest is reported.
    let clean = sb.run(&["exec", "clean"]);
    assert_eq!(clean.code, 0, "{clean:?}");
    assert!(clean.stdout.contains("Cleaned 1 execution"), "{clean:?}");
    assert!(clean.stdout.contains("1 in progress"), "{clean:?}");
    assert!(clean.stdout.contains("--all"), "{clean:?}");
    assert_eq!(sb.folders(), vec!["my-session".to_string()]);
    let clean = sb.run(&["exec", "clean"]);
    assert!(clean.stdout.contains("No executions to clean"), "{clean:?}");
    assert_eq!(sb.folders(), vec!["my-session".to_string()]);

    // Remove specific execution.
    let rm = sb.run(&["exec", "rm", "my-session"]);
    assert_eq!(rm.code, 0, "{rm:?}");
    assert_eq!(rm.stdout, "Removed execution: my-session\n");
    assert!(sb.folders().is_empty());
    let status = sb.run(&["exec", "status", "my-session"]);
    assert_eq!(status.code, 1, "{status:?}");
    assert!(status.stderr.contains("Execution not found"), "{status:?}");
    let rm = sb.run(&["exec", "rm", "my-session"]);
    assert_eq!(rm.code, 1, "{rm:?}");
    assert!(rm.stderr.contains("Execution not found"), "{rm:?}");

    // clean --all removes executions in progress and waiting too.
    assert_eq!(
        sb.run(&["e", "-i", "m.dy", "--id", "a", "--playback", &rec])
            .code,
        0
    );
    assert_eq!(sb.run(&["e", "-i", "m.dy", "--id", "b"]).code, 101);
    assert_eq!(sb.folders(), vec!["a".to_string(), "b".to_string()]);
    let clean = sb.run(&["exec", "clean", "--all"]);
    assert_eq!(clean.code, 0, "{clean:?}");
    assert!(clean.stdout.contains("Cleaned 2 execution"), "{clean:?}");
    assert!(sb.folders().is_empty());
    assert!(
        std::fs::symlink_metadata(sb.executions().join("last")).is_err(),
        "`last` points nowhere and should be gone"
    );
    let list = sb.run(&["exec", "list"]);
    assert_eq!(list.stdout, "No executions found\n", "{list:?}");
    let status = sb.run(&["exec", "status"]);
    assert_eq!(status.code, 1, "{status:?}");
    assert!(status.stderr.contains("No executions found"), "{status:?}");
}

#[test]
fn invalid_ids_are_usage_errors_and_create_nothing() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    for id in ["../x", "a/b", "/tmp/evil", "last", ".hidden", ""] {
        let out = sb.run(&[
            "e",
            "-i",
            "m.dy",
            "--id",
            id,
            "--playback",
            &context_recordings(),
        ]);
        assert_eq!(out.code, 64, "--id {id:?}: {out:?}");
        let expected = if id == "last" {
            "\"last\" is reserved"
        } else {
            "invalid execution id"
        };
        assert!(out.stderr.contains(expected), "{out:?}");
        assert!(
            !sb.path().join(".dygram").exists(),
            "--id {id:?} created .dygram"
        );
    }
    for args in [
        &["exec", "status", "../x"][..],
        &["exec", "show", "a/b"],
        &["exec", "rm", "../x"],
    ] {
        let out = sb.run(args);
        assert_eq!(out.code, 64, "{args:?}: {out:?}");
    }
    assert!(!sb.path().join(".dygram").exists());
}

// ---------------------------------------------------------------------------------------------
// §CLI Interface: Input via stdin (manual mode)
// ---------------------------------------------------------------------------------------------

#[test]
fn manual_mode_waits_and_takes_answers_in_three_formats() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();

    // No API key, no playback, no queue: the request is saved and printed, exit 3.
    let first = sb.run(&["e", "-i", "m.dy"]);
    assert_eq!(first.code, 101, "{first:?}");
    let id = first.started_id();
    let pending = sb.exec_dir(&id).join("pending-request.json");
    assert!(
        first
            .stdout
            .contains("⏸️  Waiting for LLM response at node start"),
        "{first:?}"
    );
    assert!(
        first
            .stdout
            .contains(&format!("LLM REQUEST saved to {}", pending.display()))
            || first.stdout.contains(&format!(
                "LLM REQUEST saved to {}",
                pending.canonicalize().unwrap().display()
            )),
        "{first:?}"
    );
    assert!(
        first.stdout.contains("transition_to_updateActivity"),
        "{first:?}"
    );
    let request: Value = serde_json::from_str(&std::fs::read_to_string(&pending).unwrap()).unwrap();
    assert_eq!(request["type"], "llm_request");
    assert_eq!(request["node"], "start");
    let tools: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"transition_to_updateActivity"), "{tools:?}");
    assert!(tools.contains(&"write_UserProfile"), "{tools:?}");
    let status = sb.status_json(&id);
    assert_eq!(status["waitingForAnswer"], true);
    assert_eq!(status["turns"], 0);
    assert_eq!(status["client"]["type"], "manual");

    // Calling again without an answer keeps waiting.
    let again = sb.run(&["e", "-i", "m.dy"]);
    assert_eq!(again.code, 101, "{again:?}");
    assert!(
        again.stderr.contains(&format!("Resuming execution: {id}")),
        "{again:?}"
    );

    // Invalid answers: exit 1, `Failed to parse response`, nothing changed.
    let state_before = sb.read(&id, "state.json");
    let meta_before = sb.read(&id, "metadata.json");
    for bad in [
        r#"{"tools": "x"}"#,
        r#"{"type":"other"}"#,
        r#"{"response": 5}"#,
        r#"{"tools": [{"input": {}}]}"#,
        r#"{"type":"llm_response","response":{"content":[{"type":"image"}]}}"#,
        r#"{"response": "unterminated"#,
        r#"{"action": "continue"}"#,
    ] {
        let out = sb.run_with_stdin(&["e", "-i", "m.dy"], bad);
        assert_eq!(out.code, 1, "{bad}: {out:?}");
        assert!(
            out.stderr.contains("Failed to parse response"),
            "{bad}: {out:?}"
        );
        assert_eq!(
            sb.read(&id, "state.json"),
            state_before,
            "{bad} changed state.json"
        );
        assert_eq!(
            sb.read(&id, "metadata.json"),
            meta_before,
            "{bad} changed metadata.json"
        );
        assert!(!sb.exec_dir(&id).join("history.jsonl").exists(), "{bad}");
    }

    // The design's format: {"response", "tools": [{"name", "input"}]}.
    let answer = r#"{"response": "Profile set.", "tools": [
        {"name": "write_UserProfile", "input": {"data": {"userId": "u-1", "name": "Ann"}}},
        {"name": "transition_to_updateActivity", "input": {"reason": "done"}}]}"#;
    let out = sb.run_with_stdin(&["e", "-i", "m.dy"], answer);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("Output: Profile set."), "{out:?}");
    assert!(
        out.stdout
            .contains("start --(agent_decision)--> updateActivity"),
        "{out:?}"
    );
    let shown = sb.show_json(&id);
    assert_eq!(shown["currentNode"], "updateActivity");
    assert_eq!(shown["contextState"]["UserProfile"]["userId"], "u-1");
    assert_eq!(shown["contextState"]["UserProfile"]["name"], "Ann");

    // The reference's format: {"type": "llm_response", "response": {"content": [...]}}.
    assert_eq!(sb.run(&["e", "-i", "m.dy"]).code, 101);
    let answer = json!({"type": "llm_response", "response": {"content": [
        {"type": "text", "text": "Counting."},
        {"type": "tool_use", "id": "t1", "name": "write_SessionData",
            "input": {"data": {"activityCount": 1, "lastAction": "profile_view"}}},
        {"type": "tool_use", "id": "t2", "name": "transition_to_displaySummary", "input": {}}
    ]}});
    let out = sb.run_with_stdin(&["e", "-i", "m.dy"], &answer.to_string());
    assert_eq!(out.code, 0, "{out:?}");
    let shown = sb.show_json(&id);
    assert_eq!(shown["currentNode"], "displaySummary");
    assert_eq!(shown["contextState"]["SessionData"]["activityCount"], 1);
    assert_eq!(
        shown["contextState"]["SessionData"]["lastAction"],
        "profile_view"
    );

    // Plain text: the turn is used (the model's text recorded), the node needs a transition, so the
    // machine stays and asks again.
    assert_eq!(sb.run(&["e", "-i", "m.dy"]).code, 101);
    let out = sb.run_with_stdin(&["e", "-i", "m.dy"], "All values displayed.\n");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("Output: All values displayed."),
        "{out:?}"
    );
    let status = sb.status_json(&id);
    assert_eq!(status["turns"], 3);
    assert_eq!(status["waitingForAnswer"], false);
    let history = sb.read(&id, "history.jsonl");
    assert!(
        history.contains(r#""output":"All values displayed.""#),
        "{history}"
    );

    // The design's multi-line example names tool arguments `params`.
    assert_eq!(sb.run(&["e", "-i", "m.dy"]).code, 101);
    let answer = "{\n  \"response\": \"Finishing\",\n  \"tools\": [\n    {\"name\": \"transition_to_end\", \"params\": {\"reason\": \"shown\"}}\n  ]\n}\n";
    let out = sb.run_with_stdin(&["e", "-i", "m.dy"], answer);
    assert_eq!(out.code, 0, "{out:?}");
    let done = sb.run(&["e", "-i", "m.dy"]);
    assert_eq!(done.code, 2, "{done:?}");
    let shown = sb.show_json(&id);
    assert_eq!(
        shown["visitedNodes"],
        json!(["start", "updateActivity", "displaySummary", "end"])
    );
    assert_eq!(sb.status_json(&id)["turns"], 4);
}

#[test]
fn answered_request_is_no_longer_pending() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    let first = sb.run(&["e", "-i", "m.dy"]);
    assert_eq!(first.code, 101, "{first:?}");
    let id = first.started_id();
    let answer = r#"{"tools": [{"name": "transition_to_updateActivity", "input": {}}]}"#;
    let out = sb.run_with_stdin(&["e", "-i", "m.dy"], answer);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(sb.status_json(&id)["waitingForAnswer"], false);
    // Not waiting any more, yet the file still holds the request for `start`.
    let pending = sb.exec_dir(&id).join("pending-request.json");
    assert!(
        !pending.exists(),
        "stale {}: {}",
        pending.display(),
        std::fs::read_to_string(&pending).unwrap_or_default()
    );
}

#[test]
fn json_format_gives_one_object_per_call() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    let call = |stdin: &str| {
        let out = sb.run_with_stdin(&["e", "-i", "m.dy", "--format", "json"], stdin);
        (out.code, out.json_line())
    };
    let (code, v) = call("");
    assert_eq!(code, 101);
    assert_eq!(v["status"], "waiting");
    assert_eq!(v["started"], true);
    assert_eq!(v["request"]["node"], "start");
    assert!(
        v["requestFile"]
            .as_str()
            .unwrap()
            .ends_with("pending-request.json")
    );
    let id = v["id"].as_str().unwrap().to_string();
    let (code, v) = call(r#"{"tools": [{"name": "transition_to_updateActivity", "input": {}}]}"#);
    assert_eq!(code, 0);
    assert_eq!(v["status"], "in_progress");
    assert_eq!(v["id"], id.as_str());
    assert_eq!(v["started"], false);
    assert_eq!(v["currentNodes"], json!(["updateActivity"]));
    assert!(
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "transition" && e["to"] == "updateActivity"),
        "{v}"
    );
    for (node, tool) in [
        ("updateActivity", "transition_to_displaySummary"),
        ("displaySummary", "transition_to_end"),
    ] {
        let (code, v) = call("");
        assert_eq!((code, &v["status"]), (101, &json!("waiting")));
        assert_eq!(v["request"]["node"], node);
        let answer = json!({"tools": [{"name": tool, "input": {}}]}).to_string();
        let (code, v) = call(&answer);
        assert_eq!((code, &v["status"]), (0, &json!("in_progress")), "{v}");
    }
    let (code, v) = call("");
    assert_eq!(code, 2);
    assert_eq!(v["status"], "complete");
    assert_eq!(v["turns"], 3);
    let (code, v) = call("");
    assert_eq!(code, 2);
    assert_eq!(v["status"], "complete");
    assert_eq!(v["alreadyFinished"], true);
}

#[test]
fn stdin_examples_of_the_design() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    std::fs::write(
        sb.path().join("response.json"),
        r#"{"response": "I will analyze the data", "tools": [{"name": "transition_to_updateActivity", "params": {"reason": "ok"}}]}"#,
    )
    .unwrap();
    // Input piped into the very first call answers the request that call reaches (it is never
    // dropped): the design's `{"action": "continue"}` is not an answer format, so the call fails
    // and creates nothing.
    let out = sb.bash(r#"echo '{"action": "continue"}' | dygram e -i ./m.dy"#);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("Failed to parse response"), "{out:?}");
    assert!(sb.folders().is_empty(), "{:?}", sb.folders());
    // Without input the request is shown first (exit 3).
    let out = sb.bash("dygram e -i ./m.dy");
    assert_eq!(out.code, 101, "{out:?}");
    // Pipe from file.
    let out = sb.bash("cat response.json | dygram e -i ./m.dy");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("I will analyze the data"), "{out:?}");
    // Multi-line input (a here-document, as in the design).
    assert_eq!(sb.bash("dygram e -i ./m.dy").code, 101);
    let out = sb.bash(
        r#"dygram e -i ./m.dy <<EOF
{
  "response": "I will analyze the data",
  "tools": [
    {"name": "write_SessionData", "params": {"data": {"activityCount": 7}}},
    {"name": "transition_to_displaySummary", "params": {"reason": "counted"}}
  ]
}
EOF"#,
    );
    assert_eq!(out.code, 0, "{out:?}");
    let status = sb.run(&["exec", "status", "--json"]).json_line();
    assert_eq!(status["currentNodes"], json!(["displaySummary"]));
    let id = status["id"].as_str().unwrap().to_string();
    assert_eq!(
        sb.show_json(&id)["contextState"]["SessionData"]["activityCount"],
        7
    );
}

#[test]
fn human_in_loop_example() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    // §Usage Examples, Human-in-Loop, as written (no API: each agent call waits for an answer).
    let out = sb.run(&[
        "execute",
        "--interactive",
        "./m.dy",
        "--record",
        "recordings/session1/",
    ]);
    assert_eq!(out.code, 101, "{out:?}");
    let out = sb.run(&["execute", "--interactive", "./m.dy"]);
    assert_eq!(out.code, 101, "{out:?}");
    let status = sb.run(&["exec", "status"]);
    assert_eq!(status.code, 0, "{status:?}");
    assert!(status.stdout.contains("Status: paused"), "{status:?}");
    assert!(status.stdout.contains("Waiting for:"), "{status:?}");
    assert!(
        status.stdout.contains("recording to recordings/session1/"),
        "{status:?}"
    );
    let out = sb.bash(r#"echo '{"response": "use different approach"}' | dygram e -i ./m.dy"#);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("use different approach"), "{out:?}");
    // The answer was recorded.
    let turn1: Value = serde_json::from_str(
        &std::fs::read_to_string(sb.path().join("recordings/session1/turn-1.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        turn1["response"]["response"]["content"][0]["text"],
        "use different approach"
    );
    let out = sb.run(&["execute", "--interactive", "./m.dy"]);
    assert_eq!(out.code, 101, "{out:?}");
}

// ---------------------------------------------------------------------------------------------
// §CLI Interface: Playback and Recording; §Usage Examples: Testing with Playback
// ---------------------------------------------------------------------------------------------

#[test]
fn playback_persists_across_calls() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    let rec = context_recordings();
    let first = sb.run(&["e", "-i", "./m.dy", "--playback", &rec]);
    assert_eq!(first.code, 0, "{first:?}");
    let id = first.started_id();
    let status = sb.status_json(&id);
    assert_eq!(status["mode"], "playback");
    assert_eq!(status["client"]["type"], "playback");
    assert_eq!(status["client"]["playbackDir"], rec.as_str());

    // Later calls without --playback still play back.
    let mut codes = Vec::new();
    loop {
        let out = sb.run(&["e", "-i", "./m.dy"]);
        assert!(
            out.stderr.contains(&format!("Resuming execution: {id}")),
            "{out:?}"
        );
        codes.push(out.code);
        if out.code != 0 {
            break;
        }
        let status = sb.status_json(&id);
        assert_eq!(status["client"]["type"], "playback");
    }
    assert_eq!(codes, vec![0, 0, 2]);
    let status = sb.status_json(&id);
    assert_eq!(status["status"], "complete");
    assert_eq!(status["client"]["type"], "playback");
    let shown = sb.show_json(&id);
    let (context, visited) = context_basic_final();
    assert_eq!(shown["contextState"], context);
    assert_eq!(shown["visitedNodes"], visited);
}

#[test]
fn meta_tools_machine_runs_turn_by_turn() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::with("meta-construct-tool.dy");
    let first = sb.run(&[
        "e",
        "-i",
        "m.dy",
        "--id",
        "meta",
        "--playback",
        &meta_recordings(),
    ]);
    assert_eq!(first.code, 0, "{first:?}");
    let machine_before = sb.read("meta", "machine.json");
    let (code, calls) = sb.drive("meta");
    assert_eq!((code, calls), (2, 7), "7 turns, then the end");
    let e = expected("meta-construct-tool");
    let shown = sb.show_json("meta");
    assert_eq!(shown["contextState"], e["contextState"]);
    assert_eq!(shown["visitedNodes"], e["visited"]);
    assert_eq!(sb.status_json("meta")["turns"], 7);
    // The tool built by the model is part of the saved machine.
    let machine_after = sb.read("meta", "machine.json");
    assert_ne!(machine_before, machine_after);
    assert!(
        machine_after.contains("calculate_fibonacci"),
        "no constructed tool"
    );
}

#[test]
fn recording_then_playback_reach_the_same_result() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    // Record golden execution (manual answers instead of an API).
    let out = sb.run(&[
        "e",
        "-i",
        "./m.dy",
        "--record",
        "recordings/golden/",
        "--id",
        "golden-test",
    ]);
    assert_eq!(out.code, 101, "{out:?}");
    let answers = [
        r#"{"response": "Setting up.", "tools": [
            {"name": "write_UserProfile", "input": {"data": {"userId": "user-1", "name": "Bo"}}},
            {"name": "write_SessionData", "input": {"data": {"loginTime": 42}}},
            {"name": "transition_to_updateActivity", "input": {"reason": "set"}}]}"#
            .to_string(),
        json!({"type": "llm_response", "response": {"content": [
            {"type": "text", "text": "Counting."},
            {"type": "tool_use", "id": "a", "name": "write_SessionData",
                "input": {"data": {"activityCount": 1, "lastAction": "profile_view"}}},
            {"type": "tool_use", "id": "b", "name": "transition_to_displaySummary",
                "input": {"reason": "counted"}}]}})
        .to_string(),
        "Here is the summary.".to_string(),
        r#"{"response": "Done.", "tools": [{"name": "transition_to_end", "input": {}}]}"#
            .to_string(),
    ];
    for (n, answer) in answers.iter().enumerate() {
        let out = sb.run_with_stdin(&["e", "-i", "./m.dy", "--id", "golden-test"], answer);
        assert_eq!(out.code, 0, "answer {n}: {out:?}");
        let out = sb.run(&["e", "-i", "./m.dy", "--id", "golden-test"]);
        let want = if n + 1 == answers.len() { 2 } else { 101 };
        assert_eq!(out.code, want, "after answer {n}: {out:?}");
    }
    // turn-1.json … in the recording format.
    let dir = sb.path().join("recordings/golden");
    let names: Vec<String> = files_in(&dir)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["turn-1.json", "turn-2.json", "turn-3.json", "turn-4.json"]
    );
    for (n, name) in names.iter().enumerate() {
        let rec: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap();
        assert_eq!(rec["request"]["type"], "llm_invocation_request", "{name}");
        assert!(rec["request"]["messages"].is_array(), "{name}");
        assert!(rec["request"]["tools"].is_array(), "{name}");
        assert_eq!(rec["response"]["type"], "llm_invocation_response", "{name}");
        assert!(rec["response"]["response"]["content"].is_array(), "{name}");
        if n == 0 {
            let content = &rec["response"]["response"]["content"];
            assert_eq!(content[0]["text"], "Setting up.");
            assert_eq!(content[1]["type"], "tool_use");
            assert_eq!(content[1]["name"], "write_UserProfile");
            assert_eq!(content[1]["input"]["data"]["userId"], "user-1");
        }
    }

    // Later: playback for testing, the design's loop as written.
    let out = sb.run(&[
        "e",
        "-i",
        "./m.dy",
        "--playback",
        "recordings/golden/",
        "--id",
        "test-run",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    let out = sb.bash("while dygram e -i ./m.dy --id test-run; do :; done");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("✅ Execution complete!"), "{out:?}");

    // Compare results.
    let golden = sb.run(&["exec", "status", "golden-test"]);
    let test = sb.run(&["exec", "status", "test-run"]);
    for out in [&golden, &test] {
        assert_eq!(out.code, 0, "{out:?}");
        assert!(out.stdout.contains("Status: complete"), "{out:?}");
        assert!(out.stdout.contains("Current Node: end"), "{out:?}");
        assert!(out.stdout.contains("Turns: 4"), "{out:?}");
    }
    assert!(
        golden.stdout.contains("recording to recordings/golden/"),
        "{golden:?}"
    );
    assert!(
        test.stdout.contains("Mode: playback (recordings/golden/)"),
        "{test:?}"
    );
    let (g, t) = (sb.show_json("golden-test"), sb.show_json("test-run"));
    assert_eq!(g["contextState"], t["contextState"]);
    assert_eq!(g["visitedNodes"], t["visitedNodes"]);
    assert_eq!(g["status"], t["status"]);
    let path = |v: &Value| -> Vec<(String, String)> {
        v["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h["from"].to_string(), h["to"].to_string()))
            .collect()
    };
    assert_eq!(path(&g), path(&t));
    assert_eq!(g["contextState"]["UserProfile"]["name"], "Bo");
    assert_eq!(g["contextState"]["SessionData"]["loginTime"], 42);
    // Playback did not write to the recordings.
    assert_eq!(files_in(&dir).len(), 4);
}

// ---------------------------------------------------------------------------------------------
// §Error Handling
// ---------------------------------------------------------------------------------------------

#[test]
fn machine_changed_is_refused_with_options() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    let rec = context_recordings();
    let first = sb.run(&["e", "-i", "./m.dy", "--playback", &rec]);
    assert_eq!(first.code, 0, "{first:?}");
    let id = first.started_id();
    let original = sb.read_json(&id, "state.json")["machineHash"]
        .as_str()
        .unwrap()
        .to_string();
    let state_before = sb.read(&id, "state.json");

    let source = std::fs::read_to_string(sb.path().join("m.dy")).unwrap();
    let edited = source.replace("Track user activity", "Track activity");
    assert_ne!(source, edited);
    std::fs::write(sb.path().join("m.dy"), edited).unwrap();

    let out = sb.run(&["e", "-i", "./m.dy"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains("Machine definition has changed since execution started"),
        "{out:?}"
    );
    let hash_after = |label: &str| -> String {
        let line = out
            .stderr
            .lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no {label} line: {out:?}"));
        line.trim_start()[label.len()..]
            .trim()
            .trim_end_matches('…')
            .to_string()
    };
    let shown_original = hash_after("Original hash:");
    let shown_current = hash_after("Current hash:");
    assert!(shown_original.len() >= 6, "{out:?}");
    assert!(
        original.starts_with(&shown_original),
        "{original} vs {out:?}"
    );
    assert_ne!(shown_original, shown_current);
    assert!(out.stderr.contains("--force"), "{out:?}");
    assert!(
        out.stderr
            .contains("restore the original machine definition"),
        "{out:?}"
    );
    assert!(out.stderr.contains("--id"), "{out:?}");
    assert_eq!(
        sb.read(&id, "state.json"),
        state_before,
        "the refused call changed the state"
    );

    // --force starts a new execution (the old one is kept).
    std::thread::sleep(Duration::from_millis(5));
    let forced = sb.run(&["e", "-i", "./m.dy", "--force", "--playback", &rec]);
    assert_eq!(forced.code, 0, "{forced:?}");
    let new_id = forced.started_id();
    assert_ne!(new_id, id);
    assert_eq!(
        std::fs::read_link(sb.executions().join("last")).unwrap(),
        Path::new(&new_id)
    );
    let new_hash = sb.read_json(&new_id, "state.json")["machineHash"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        new_hash.starts_with(&shown_current),
        "{new_hash} vs {out:?}"
    );
    assert!(sb.exec_dir(&id).join("state.json").is_file());
    // The default (last) is now the new one, so plain calls go on.
    assert_eq!(sb.run(&["e", "-i", "./m.dy"]).code, 0);

    // --id starts a parallel execution.
    let other = sb.run(&["e", "-i", "./m.dy", "--id", "other", "--playback", &rec]);
    assert_eq!(other.code, 0, "{other:?}");
    assert_eq!(other.started_id(), "other");
    assert_eq!(sb.folders().len(), 3, "{:?}", sb.folders());

    // --force with an existing --id moves it aside (not deleted).
    let replaced = sb.run(&[
        "e",
        "-i",
        "./m.dy",
        "--id",
        "other",
        "--force",
        "--playback",
        &rec,
    ]);
    assert_eq!(replaced.code, 0, "{replaced:?}");
    assert_eq!(replaced.started_id(), "other");
    let aside: Vec<String> = sb
        .folders()
        .into_iter()
        .filter(|f| f.starts_with("other.replaced-"))
        .collect();
    assert_eq!(aside.len(), 1, "{:?}", sb.folders());
    assert_eq!(sb.read_json(&aside[0], "metadata.json")["turnCount"], 1);
    assert_eq!(sb.status_json("other")["turns"], 1);

    // The old execution still refuses the edited machine.
    let out = sb.run(&["e", "-i", "./m.dy", "--id", &id]);
    assert_eq!(out.code, 1, "{out:?}");
}

#[test]
fn missing_playback_directory_lists_recordings_and_creates_nothing() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    for name in ["golden", "test-session"] {
        let dir = sb.path().join("recordings").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(
            Path::new(&context_recordings()).join("turn-1.json"),
            dir.join("turn-1.json"),
        )
        .unwrap();
    }
    let out = sb.run(&["e", "-i", "./m.dy", "--playback", "recordings/demo/"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains("Playback directory not found: recordings/demo/"),
        "{out:?}"
    );
    assert!(out.stderr.contains("Available recordings:"), "{out:?}");
    assert!(out.stderr.contains("recordings/golden/"), "{out:?}");
    assert!(out.stderr.contains("recordings/test-session/"), "{out:?}");
    assert!(
        !sb.path().join(".dygram").exists(),
        "an execution was created"
    );

    // With an existing execution: nothing changes either.
    let first = sb.run(&["e", "-i", "./m.dy", "--playback", "recordings/golden"]);
    assert_eq!(first.code, 0, "{first:?}");
    let id = first.started_id();
    let state = sb.read(&id, "state.json");
    let meta = sb.read(&id, "metadata.json");
    let out = sb.run(&["e", "-i", "./m.dy", "--playback", "recordings/demo/"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(sb.folders(), vec![id.clone()]);
    assert_eq!(sb.read(&id, "state.json"), state);
    assert_eq!(sb.read(&id, "metadata.json"), meta);
}

#[test]
fn corrupted_state_is_kept_aside_and_a_fresh_execution_starts() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    let first = sb.run(&["e", "-i", "./m.dy", "--playback", &context_recordings()]);
    assert_eq!(first.code, 0, "{first:?}");
    let id = first.started_id();
    std::fs::write(sb.exec_dir(&id).join("state.json"), "garbage{").unwrap();

    let out = sb.run(&["e", "-i", "./m.dy"]);
    assert!(
        out.stderr
            .contains("Warning: State file corrupted, starting fresh execution"),
        "{out:?}"
    );
    let new_id = out.started_id();
    // The fresh execution keeps the answer source of the corrupted one (its recordings).
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(sb.status_json(&new_id)["client"]["type"], "playback");
    let warning_at = out.stderr.find("State file corrupted").unwrap();
    let start_at = out.stderr.find("Starting interactive execution").unwrap();
    assert!(warning_at < start_at, "{out:?}");

    // The corrupted folder was renamed aside with its files, not deleted.
    let aside: Vec<String> = sb
        .folders()
        .into_iter()
        .filter(|f| f.starts_with(&format!("{id}.corrupted-")))
        .collect();
    assert_eq!(aside.len(), 1, "{:?}", sb.folders());
    assert_eq!(sb.read(&aside[0], "state.json"), "garbage{");
    assert!(sb.exec_dir(&aside[0]).join("history.jsonl").is_file());
    assert!(
        out.stderr.contains(&aside[0]),
        "the warning names the kept folder: {out:?}"
    );
    // The new execution is sound and `last` points at it.
    let state = sb.read_json(&new_id, "state.json");
    assert_eq!(state["executionState"]["currentNode"], "updateActivity");
    assert_eq!(
        std::fs::read_link(sb.executions().join("last")).unwrap(),
        Path::new(&new_id)
    );

    // The same with --id: the id is reused for the fresh execution.
    assert_eq!(
        sb.run(&[
            "e",
            "-i",
            "./m.dy",
            "--id",
            "named",
            "--playback",
            &context_recordings()
        ])
        .code,
        0
    );
    // A damaged metadata.json is not corruption: state.json, the commit point, carries the
    // metadata, and the next call rewrites the file from it.
    std::fs::write(sb.exec_dir("named").join("metadata.json"), "").unwrap();
    let out = sb.run(&["e", "-i", "./m.dy", "--id", "named"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!out.stderr.contains("State file corrupted"), "{out:?}");
    assert!(
        out.stderr.contains("metadata.json brought up to date"),
        "{out:?}"
    );
    assert_eq!(sb.status_json("named")["turns"], 2);
    std::fs::write(sb.exec_dir("named").join("state.json"), "").unwrap();
    let out = sb.run(&[
        "e",
        "-i",
        "./m.dy",
        "--id",
        "named",
        "--playback",
        &context_recordings(),
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("State file corrupted"), "{out:?}");
    assert_eq!(out.started_id(), "named");
    assert!(
        sb.folders()
            .iter()
            .any(|f| f.starts_with("named.corrupted-"))
    );
    assert_eq!(sb.status_json("named")["turns"], 1);
}

// ---------------------------------------------------------------------------------------------
// Concurrency and the file queue
// ---------------------------------------------------------------------------------------------

fn queue_dir(sb: &Sandbox) -> PathBuf {
    sb.path().join(".dygram/interactive-queue")
}

/// Waits for the one request file of the queue.
fn wait_for_request(sb: &Sandbox) -> PathBuf {
    assert!(
        wait_until(Duration::from_secs(10), || !requests(sb).is_empty()),
        "no request appeared in {}",
        queue_dir(sb).join("requests").display()
    );
    let files = requests(sb);
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

/// The request files of the queue (not the temporary files of an atomic write in progress).
fn requests(sb: &Sandbox) -> Vec<PathBuf> {
    files_in(&queue_dir(sb).join("requests"))
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.ends_with(".json") && !name.starts_with('.')
        })
        .collect()
}

/// Writes the answer for a request (to a temporary name, then renamed).
fn answer_request(sb: &Sandbox, request: &Path, answer: &str) {
    let name = request.file_name().unwrap();
    let responses = queue_dir(sb).join("responses");
    let tmp = responses.join(".writing");
    std::fs::write(&tmp, answer).unwrap();
    std::fs::rename(&tmp, responses.join(name)).unwrap();
}

#[test]
fn second_call_fails_fast_while_the_first_holds_the_lock_and_the_queue_answers() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    let first = sb.spawn(&[
        "e",
        "-i",
        "m.dy",
        "--id",
        "q",
        "--queue",
        "--queue-timeout",
        "5",
    ]);
    let request = wait_for_request(&sb);
    let body: Value = serde_json::from_str(&std::fs::read_to_string(&request).unwrap()).unwrap();
    assert_eq!(body["type"], "llm_request");
    assert_eq!(body["node"], "start");
    assert!(
        body["requestId"].as_str().unwrap().starts_with("q-"),
        "{body}"
    );
    assert!(
        wait_until(Duration::from_secs(3), || queue_dir(&sb)
            .join("heartbeat.lock")
            .is_file()),
        "no heartbeat.lock while waiting"
    );

    // A second call on the same execution fails at once.
    let started = Instant::now();
    let second = sb.run(&[
        "e",
        "-i",
        "m.dy",
        "--id",
        "q",
        "--playback",
        &context_recordings(),
    ]);
    let took = started.elapsed();
    assert_eq!(second.code, 75, "{second:?}");
    assert!(
        second.stderr.contains("in use by another dygram process"),
        "{second:?}"
    );
    assert!(took < Duration::from_secs(3), "took {took:?}");

    answer_request(
        &sb,
        &request,
        r#"{"response": "ok", "tools": [{"name": "transition_to_updateActivity", "input": {}}]}"#,
    );
    let out = wait_output(first, Duration::from_secs(10));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Output: ok"));
    assert!(requests(&sb).is_empty());
    assert!(files_in(&queue_dir(&sb).join("responses")).is_empty());
    assert!(!queue_dir(&sb).join("heartbeat.lock").exists());
    let status = sb.status_json("q");
    assert_eq!(status["turns"], 1);
    assert_eq!(status["client"]["type"], "queue");
    assert_eq!(status["currentNodes"], json!(["updateActivity"]));

    // The lock is free again, and the queue mode persists without --queue.
    let next = sb.spawn(&["e", "-i", "m.dy", "--id", "q", "--queue-timeout", "5"]);
    let request = wait_for_request(&sb);
    let body: Value = serde_json::from_str(&std::fs::read_to_string(&request).unwrap()).unwrap();
    assert_eq!(body["node"], "updateActivity");
    answer_request(&sb, &request, "Counting.");
    let out = wait_output(next, Duration::from_secs(10));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sb.status_json("q")["turns"], 2);
}

#[test]
fn queue_timeout() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    let started = Instant::now();
    let out = sb.run(&[
        "e",
        "-i",
        "m.dy",
        "--id",
        "t",
        "--queue",
        "--queue-timeout",
        "1",
    ]);
    let took = started.elapsed();
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("Timeout waiting for response"),
        "{out:?}"
    );
    assert!(took >= Duration::from_secs(1), "took {took:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(!queue_dir(&sb).join("heartbeat.lock").exists());
    // The request is withdrawn: the next call asks again.
    assert_eq!(requests(&sb).len(), 0);
    // The execution is still at its start and can go on.
    let status = sb.status_json("t");
    assert_eq!(status["turns"], 0);
    assert_eq!(status["currentNodes"], json!(["start"]));
    let out = sb.run(&[
        "e",
        "-i",
        "m.dy",
        "--id",
        "t",
        "--playback",
        &context_recordings(),
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(sb.drive("t"), (2, 3));
}

#[test]
fn force_does_not_take_an_execution_in_use() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    let first = sb.spawn(&[
        "e",
        "-i",
        "m.dy",
        "--id",
        "q",
        "--queue",
        "--queue-timeout",
        "5",
    ]);
    let request = wait_for_request(&sb);
    let forced = sb.run(&[
        "e",
        "-i",
        "m.dy",
        "--id",
        "q",
        "--force",
        "--playback",
        &context_recordings(),
    ]);
    // Expected: refused like any other call on an execution in use.
    let refused = forced.code == 75 && forced.stderr.contains("in use by another dygram process");
    answer_request(
        &sb,
        &request,
        r#"{"tools": [{"name": "transition_to_updateActivity", "input": {}}]}"#,
    );
    let _ = wait_output(first, Duration::from_secs(10));
    // Observed: the folder was moved aside and the new execution `q` got the first process's
    // metadata and a second history line numbered 1.
    let history =
        std::fs::read_to_string(sb.exec_dir("q").join("history.jsonl")).unwrap_or_default();
    let meta = sb.read_json("q", "metadata.json");
    assert!(
        refused,
        "--force took an execution in use: {forced:?}\nq/metadata.json client: {}\nq/history.jsonl:\n{history}",
        meta["clientConfig"]
    );
}

// ---------------------------------------------------------------------------------------------
// Ids
// ---------------------------------------------------------------------------------------------

#[test]
fn starts_in_the_same_second_get_different_ids() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    let rec = context_recordings();
    let a = sb.run(&["e", "-i", "m.dy", "--force", "--playback", &rec]);
    let b = sb.run(&["e", "-i", "m.dy", "--force", "--playback", &rec]);
    assert_eq!((a.code, b.code), (0, 0), "{a:?}\n{b:?}");
    let (ia, ib) = (a.started_id(), b.started_id());
    assert_ne!(ia, ib);
    assert!(is_generated_id(&ia) && is_generated_id(&ib), "{ia} {ib}");
    if ib.starts_with(&ia) {
        assert_eq!(ib, format!("{ia}-2"));
    }
    assert_eq!(sb.folders(), {
        let mut v = vec![ia.clone(), ib.clone()];
        v.sort();
        v
    });
    assert_eq!(
        std::fs::read_link(sb.executions().join("last")).unwrap(),
        Path::new(&ib)
    );

    // Two at once.
    let sb = Sandbox::new();
    let children: Vec<Child> = (0..2)
        .map(|_| sb.spawn(&["e", "-i", "m.dy", "--force", "--playback", &rec]))
        .collect();
    let mut ids = Vec::new();
    for child in children {
        let out = wait_output(child, Duration::from_secs(20));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        ids.push(
            Out {
                code: 0,
                stdout: String::new(),
                stderr,
            }
            .started_id(),
        );
    }
    assert_ne!(ids[0], ids[1]);
    assert_eq!(sb.folders().len(), 2, "{:?}", sb.folders());
}

#[test]
fn many_simultaneous_starts_get_different_ids() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    // Ten starts at once, twenty rounds (launched from bash so that they overlap closely).
    let out = sb.bash(
        r#"for r in $(seq 20); do
            rm -rf .dygram errors
            for i in 1 2 3 4 5 6 7 8 9 10; do dygram e -i m.dy --force -q >/dev/null 2>>errors & done
            wait
            n=$(ls .dygram/executions | grep -vc '^last$')
            if [ "$n" -ne 10 ]; then echo "round $r: $n executions"; cat errors; exit 1; fi
        done"#,
    );
    assert_eq!(out.code, 0, "{out:?}");
}

// ---------------------------------------------------------------------------------------------
// Kill safety
// ---------------------------------------------------------------------------------------------

/// What a killed call left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    /// The process ended before the kill.
    Finished,
    /// No folder yet.
    NoFolder,
    /// A folder without state or metadata (killed while creating the execution).
    FolderWithoutState,
    /// The previous state (killed before the new one was saved).
    OldState,
    /// The new state, not yet the metadata.
    StateWithoutMetadata,
    /// New state and metadata, history not yet written.
    SavedWithoutHistory,
    /// Everything written.
    Saved,
}

/// Classifies the folder of `id` after a kill; `turns_before` is the metadata's turn count before
/// the killed call (`None` for a new execution).
fn phase(sb: &Sandbox, id: &str, turns_before: Option<u64>, history_before: usize) -> Phase {
    let dir = sb.exec_dir(id);
    if !dir.is_dir() {
        return Phase::NoFolder;
    }
    let state: Option<Value> = std::fs::read_to_string(dir.join("state.json"))
        .ok()
        .map(|s| serde_json::from_str(&s).unwrap_or_else(|e| panic!("{id}: torn state.json: {e}")));
    let meta: Option<Value> = std::fs::read_to_string(dir.join("metadata.json"))
        .ok()
        .map(|s| {
            serde_json::from_str(&s).unwrap_or_else(|e| panic!("{id}: torn metadata.json: {e}"))
        });
    let history = std::fs::read_to_string(dir.join("history.jsonl"))
        .map(|h| h.lines().count())
        .unwrap_or(0);
    let (Some(state), Some(meta)) = (state, meta) else {
        return if turns_before.is_none() {
            Phase::FolderWithoutState
        } else {
            Phase::StateWithoutMetadata
        };
    };
    let expected_node = if turns_before.is_none() {
        "updateActivity"
    } else {
        "displaySummary"
    };
    let state_new = state["executionState"]["currentNode"] == expected_node;
    let meta_new = meta["turnCount"].as_u64() != turns_before;
    match (state_new, meta_new, history > history_before) {
        (false, false, _) => Phase::OldState,
        (true, false, _) => Phase::StateWithoutMetadata,
        (true, true, false) => Phase::SavedWithoutHistory,
        _ => Phase::Saved,
    }
}

/// Temporary files left in an execution's folder.
fn leftovers(sb: &Sandbox, id: &str) -> Vec<String> {
    files_in(&sb.exec_dir(id))
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

/// Drives `id` to the end after a kill: with `--playback` when no state was saved (the fresh
/// call starts over), else with plain calls. Returns the final shown execution.
fn recover(sb: &Sandbox, id: &str, phase: Phase) -> Value {
    let rec = context_recordings();
    if matches!(
        phase,
        Phase::NoFolder | Phase::FolderWithoutState | Phase::StateWithoutMetadata
    ) && !sb.exec_dir(id).join("metadata.json").is_file()
    {
        let out = sb.run(&["e", "-i", "m.dy", "--id", id, "--playback", &rec]);
        assert_eq!(out.code, 0, "{id} after {phase:?}: {out:?}");
        if phase != Phase::NoFolder {
            assert!(
                out.stderr.contains("State file corrupted"),
                "{id} after {phase:?}: {out:?}"
            );
        }
    }
    let (code, _) = sb.drive(id);
    assert_eq!(code, 2, "{id} after {phase:?}");
    let state = sb.read(id, "state.json");
    let state: Value = serde_json::from_str(&state).unwrap();
    assert_eq!(state["status"], "complete", "{id}");
    let history = sb.read(id, "history.jsonl");
    for line in history.lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{id}: {e}: {line}"));
    }
    sb.show_json(id)
}

#[test]
fn killed_while_waiting_for_a_queued_answer() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    let rec = context_recordings();
    let (context, visited) = context_basic_final();

    // A later turn: the state of the previous turn stays.
    assert_eq!(
        sb.run(&["e", "-i", "m.dy", "--id", "k", "--playback", &rec])
            .code,
        0
    );
    let state = sb.read("k", "state.json");
    let meta = sb.read("k", "metadata.json");
    let mut child = sb.spawn(&[
        "e",
        "-i",
        "m.dy",
        "--id",
        "k",
        "--queue",
        "--queue-timeout",
        "30",
    ]);
    let request = wait_for_request(&sb);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(sb.read("k", "state.json"), state);
    assert_eq!(sb.read("k", "metadata.json"), meta);
    // The request stays; the lock was released by the kill.
    assert!(request.is_file());
    let out = sb.run(&["e", "-i", "m.dy", "--id", "k", "--playback", &rec]);
    assert_eq!(out.code, 0, "{out:?}");
    let shown = recover(&sb, "k", Phase::Saved);
    assert_eq!(shown["contextState"], context);
    assert_eq!(shown["visitedNodes"], visited);

    // The first turn of a new execution: the execution was saved before the request, so the
    // next call simply resumes it.
    let mut child = sb.spawn(&[
        "e",
        "-i",
        "m.dy",
        "--id",
        "k0",
        "--queue",
        "--queue-timeout",
        "30",
    ]);
    let request2 = wait_for_request_other_than(&sb, &request);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(request2.is_file());
    assert!(sb.exec_dir("k0").join("state.json").exists());
    let out = sb.run(&["e", "-i", "m.dy", "--id", "k0", "--playback", &rec]);
    assert_eq!(out.code, 0, "{out:?}");
    let shown = recover(&sb, "k0", Phase::Saved);
    assert_eq!(shown["contextState"], context);
    assert!(!sb.folders().iter().any(|f| f.starts_with("k0.corrupted-")));
}

/// Waits for a request file other than `old`.
fn wait_for_request_other_than(sb: &Sandbox, old: &Path) -> PathBuf {
    let found = |files: Vec<PathBuf>| files.into_iter().find(|f| f != old);
    assert!(
        wait_until(Duration::from_secs(10), || found(requests(sb)).is_some()),
        "no new request"
    );
    found(requests(sb)).unwrap()
}

/// Kills `e -i` calls after each delay and checks that every execution still completes with the
/// reference result. `resumed`: kill the second turn (a saved state exists) instead of the first.
/// Prints what each kill left behind (visible with `--nocapture`).
fn kill_at_delays(delays_us: &[u64], resumed: bool) {
    let sb = Sandbox::new();
    let rec = context_recordings();
    // The uninterrupted run.
    let out = sb.run(&["e", "-i", "m.dy", "--id", "ref", "--playback", &rec]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(sb.drive("ref").0, 2);
    let reference = sb.show_json("ref");
    let (context, visited) = context_basic_final();
    assert_eq!(reference["contextState"], context);
    assert_eq!(reference["visitedNodes"], visited);

    let mut report = Vec::new();
    let mut counts = std::collections::BTreeMap::new();
    for (k, &delay) in delays_us.iter().enumerate() {
        let id = format!("k{k}");
        let (turns_before, history_before) = if resumed {
            let out = sb.run(&["e", "-i", "m.dy", "--id", &id, "--playback", &rec]);
            assert_eq!(out.code, 0, "{out:?}");
            (Some(1), 1)
        } else {
            (None, 0)
        };
        let mut args = vec!["e", "-i", "m.dy", "--id", &id];
        if !resumed {
            args.extend(["--playback", &rec]);
        }
        let mut child = sb
            .spawn_command(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(delay));
        let finished = child.try_wait().unwrap().is_some();
        let _ = child.kill();
        child.wait().unwrap();
        let p = if finished {
            Phase::Finished
        } else {
            phase(&sb, &id, turns_before, history_before)
        };
        let tmp = leftovers(&sb, &id);
        let shown = recover(&sb, &id, p);
        assert_eq!(
            shown["contextState"], reference["contextState"],
            "{id} after {p:?}"
        );
        assert_eq!(
            shown["visitedNodes"], reference["visitedNodes"],
            "{id} after {p:?}"
        );
        let turns = sb.status_json(&id)["turns"].clone();
        let history = sb.read(&id, "history.jsonl").lines().count();
        *counts.entry(p).or_insert(0) += 1;
        report.push(format!(
            "  {delay:>6} µs: {p:?}; then turns {turns}, {history} history lines{}",
            if tmp.is_empty() {
                String::new()
            } else {
                format!(", left {tmp:?}")
            }
        ));
    }
    eprintln!(
        "kills on the {} turn: {counts:?}\n{}",
        if resumed { "second" } else { "first" },
        report.join("\n")
    );
}

#[test]
fn killed_after_the_answer_resumes_to_the_same_result() {
    if !corpus_is_here() {
        return;
    }
    kill_at_delays(&[0, 1_000, 2_000, 5_000, 10_000, 20_000], false);
}

#[test]
fn killed_during_the_state_write_resumes_to_the_same_result() {
    if !corpus_is_here() {
        return;
    }
    // How long an uninterrupted second turn takes here (the median of three), so that the kills
    // spread over the whole call, most of them late in it where the state is written.
    let sb = Sandbox::new();
    let rec = context_recordings();
    let mut took: Vec<u64> = (0..3)
        .map(|n| {
            let id = format!("t{n}");
            let out = sb.run(&["e", "-i", "m.dy", "--id", &id, "--playback", &rec]);
            assert_eq!(out.code, 0, "{out:?}");
            let start = Instant::now();
            let out = sb.run(&["e", "-i", "m.dy", "--id", &id]);
            assert_eq!(out.code, 0, "{out:?}");
            start.elapsed().as_micros() as u64
        })
        .collect();
    took.sort_unstable();
    let call = took[1];
    eprintln!("an uninterrupted second turn takes about {call} µs");
    let delays: Vec<u64> = (0..40).map(|i| call * (20 + 2 * i) / 100).collect();
    kill_at_delays(&delays, true);
}

#[test]
fn turn_count_survives_a_kill_between_state_and_metadata() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    let rec = context_recordings();
    let out = sb.run(&["e", "-i", "m.dy", "--id", "s", "--playback", &rec]);
    assert_eq!(out.code, 0, "{out:?}");
    let meta_after_turn_1 = sb.read("s", "metadata.json");
    assert_eq!(sb.run(&["e", "-i", "m.dy", "--id", "s"]).code, 0);
    // What a kill after state.json was replaced and before metadata.json was leaves behind (seen
    // in `killed_during_the_state_write_resumes_to_the_same_result`).
    std::fs::write(sb.exec_dir("s").join("metadata.json"), meta_after_turn_1).unwrap();
    assert_eq!(sb.drive("s").0, 2);
    let (context, _) = context_basic_final();
    assert_eq!(sb.show_json("s")["contextState"], context);
    // Observed: 2 (3 LLM turns were taken).
    assert_eq!(sb.status_json("s")["turns"], 3);
}

#[test]
fn torn_history_line_does_not_stop_the_execution() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    let rec = context_recordings();
    assert_eq!(
        sb.run(&["e", "-i", "m.dy", "--id", "t", "--playback", &rec])
            .code,
        0
    );
    let history = sb.exec_dir("t").join("history.jsonl");
    let mut text = std::fs::read_to_string(&history).unwrap();
    text.push_str(r#"{"turn":2,"timest"#);
    std::fs::write(&history, text).unwrap();
    let out = sb.run(&["e", "-i", "m.dy", "--id", "t"]);
    // Observed: exit 1 `history.jsonl: the last line is incomplete`, though the state advanced.
    assert_eq!(out.code, 0, "{out:?}\nstatus: {}", sb.status_json("t"));
    assert_eq!(sb.drive("t").0, 2);
}

// ---------------------------------------------------------------------------------------------
// Aliases and units
// ---------------------------------------------------------------------------------------------

#[test]
fn exec_is_an_alias_of_execute() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    let out = sb.run(&["exec", "m.dy", "-i", "--playback", &context_recordings()]);
    assert_eq!(out.code, 0, "{out:?}");
    let id = out.started_id();
    let out = sb.run(&["exec", "-i", "m.dy"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains(&format!("Resuming execution: {id}")),
        "{out:?}"
    );
    let out = sb.run(&["exec", "m.dy", "--interactive", "--format", "json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json_line()["currentNodes"], json!(["end"]));
    let out = sb.run(&["exec", "./m.dy", "-i"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stdout.contains("Execution complete"), "{out:?}");
    // `exec`'s own actions still work.
    let list = sb.run(&["exec", "list", "--json"]);
    assert_eq!(list.code, 0, "{list:?}");
    assert_eq!(list.json_line()[0]["id"], id.as_str());
}

#[test]
fn step_units() {
    if !corpus_is_here() {
        return;
    }
    let sb = Sandbox::new();
    let rec = context_recordings();
    // --step-turn is -i.
    assert_eq!(
        sb.run(&["e", "--step-turn", "m.dy", "--id", "st", "--playback", &rec])
            .code,
        0
    );
    assert_eq!(sb.status_json("st")["turns"], 1);
    // --step: one step of every path per call (here one LLM conversation per step).
    let out = sb.run(&[
        "e",
        "--step",
        "m.dy",
        "--id",
        "s",
        "--playback",
        &rec,
        "--format",
        "json",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json_line()["unit"], "step");
    let mut codes = vec![0];
    for _ in 0..5 {
        let out = sb.run(&["e", "--step", "m.dy", "--id", "s"]);
        codes.push(out.code);
        if out.code != 0 {
            break;
        }
    }
    assert_eq!(codes.last(), Some(&2), "{codes:?}");
    let (context, visited) = context_basic_final();
    let shown = sb.show_json("s");
    assert_eq!(shown["contextState"], context);
    assert_eq!(shown["visitedNodes"], visited);
    // --step-path
    let out = sb.run(&[
        "e",
        "--step-path",
        "m.dy",
        "--id",
        "p",
        "--playback",
        &rec,
        "--format",
        "json",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json_line()["unit"], "path step");
}
