//! Honest results: the final answer is the model's text, a run that ended without one says why, the
//! iteration count is one number everywhere, and the cost comes from the price table or is absent.

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer};

use crate::support::{ECHO_AND_WRITE, Sandbox, agent_yaml};

fn json_of(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn an_empty_answer_is_not_dressed_up_as_success() {
    let server = ScriptedServer::start([Reply::text(""), Reply::text("   ")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = sb.run(Some(&server), "q", &["--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result = json_of(&out.stdout);
    assert_eq!(result["status"], "COMPLETED");
    assert_eq!(result["result"], "");
    assert_eq!(result["reason"], "empty_answer");
    assert!(
        out.stderr.contains("the model's final answer was empty"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("completed successfully"),
        "{}",
        out.stderr
    );

    let out = sb.run(Some(&server), "q", &[]);
    assert!(
        out.stdout
            .contains("Final Response:\n(none: the model's final answer was empty)\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn the_iteration_limit_is_a_reason_not_an_answer() {
    let server = ScriptedServer::start((0..2).map(|i| {
        Reply::tool_call(&format!("c{i}"), "echo", json!({"message": "again"}))
            .with_text("Still working on it.")
    }));
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = sb.run(
        Some(&server),
        "loop",
        &["--max-iterations", "2", "--format", "json"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result = json_of(&out.stdout);
    assert_eq!(result["status"], "COMPLETED");
    assert_eq!(result["reason"], "max_iterations");
    assert_eq!(result["result"], "", "no final answer was given");
    assert_eq!(result["metrics"]["iterations"], 2);
    assert!(
        !out.stdout.contains("Task may be incomplete") && !out.stdout.contains("successfully"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr
            .contains("stopped at its iteration limit (2) before a final answer"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_real_answer_has_no_reason() {
    let server = ScriptedServer::start([Reply::text("42")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = sb.run(Some(&server), "q", &["--format", "json"]);
    let result = json_of(&out.stdout);
    assert_eq!(result["result"], "42");
    assert!(result.get("reason").is_none(), "{result}");
}

#[test]
fn iterations_are_counted_alike_in_the_banner_the_summary_and_metadata() {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "echo", json!({"message": "one"})),
        Reply::tool_call("c2", "echo", json!({"message": "two"})),
        Reply::text("done"),
        Reply::text("more"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = sb.run(Some(&server), "count", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let banners: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("[Iteration"))
        .collect();
    assert_eq!(
        banners,
        ["[Iteration 1/30]", "[Iteration 2/30]", "[Iteration 3/30]"]
    );
    assert!(out.stdout.contains("  • Iterations: 3\n"), "{}", out.stdout);
    assert_eq!(sb.metadata()["iterations_completed"], 3);

    // A continuation goes on counting the run's iterations; its budget is its own.
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws", "-m", "again", "--format", "json"]);
    let out = crate::support::output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("[Iteration 4 (1/30 in this call)]"),
        "{}",
        out.stderr
    );
    assert_eq!(json_of(&out.stdout)["metrics"]["iterations"], 4);
    assert_eq!(sb.metadata()["iterations_completed"], 4);
}

#[test]
fn the_cost_comes_from_the_price_table_or_is_absent() {
    // gpt-4o-mini: $0.15 per million input tokens, $0.60 per million output tokens.
    let server = ScriptedServer::start([
        Reply::text("hi").usage(1_000_000, 500_000),
        Reply::text("hi").usage(1_000_000, 500_000),
    ]);
    let sb = Sandbox::new(
        &agent_yaml(ECHO_AND_WRITE).replace("model: test-model", "model: gpt-4o-mini"),
    );
    let out = sb.run(Some(&server), "q", &["--format", "json"]);
    let usage = &json_of(&out.stdout)["metrics"]["usage"];
    assert_eq!(usage["total_cost_usd"], json!(0.45), "{usage}");
    assert_eq!(usage["model_usage"]["gpt-4o-mini"]["cost_usd"], json!(0.45));
    let out = sb.run(Some(&server), "q", &[]);
    assert!(out.stdout.contains("  • Cost: $0.4500\n"), "{}", out.stdout);

    // A model the table does not know has no cost at all (not 0).
    let server = ScriptedServer::start([Reply::text("hi").usage(1000, 500)]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = sb.run(Some(&server), "q", &["--format", "json"]);
    let usage = &json_of(&out.stdout)["metrics"]["usage"];
    assert!(usage.get("total_cost_usd").is_none(), "{usage}");
    assert_eq!(usage["input_tokens"], 1000);
}

#[test]
fn counts_survive_a_crash_the_journal_holds_every_answer_and_its_tokens() {
    // Five answers that each run a short tool, then a final one; the run is killed (SIGKILL) once
    // three answers are journaled, well within the second metadata.json may lag behind.
    let mut script: Vec<Reply> = (0..5)
        .map(|i| Reply::tool_call(&format!("c{i}"), "nap", json!({})).usage(100, 10))
        .collect();
    script.push(Reply::text("finished").usage(100, 10));
    let server = ScriptedServer::start(script);
    let sb = Sandbox::new(&agent_yaml("  - name: nap\n    exec: \"sleep 0.2\"\n"));
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let start = std::time::Instant::now();
    let journaled = |sb: &Sandbox| {
        if sb.ws().join(".delta/LATEST").exists() {
            sb.events("THOUGHT").len()
        } else {
            0
        }
    };
    while journaled(&sb) < 3 {
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws", "--format", "json"]);
    let out = crate::support::output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let thoughts = sb.events("THOUGHT").len() as u64;
    let metadata = sb.metadata();
    assert_eq!(metadata["iterations_completed"], thoughts, "{metadata}");
    assert_eq!(metadata["usage"]["llm_calls"], thoughts, "{metadata}");
    assert_eq!(
        metadata["usage"]["input_tokens"],
        100 * thoughts,
        "{metadata}"
    );
    assert_eq!(
        metadata["usage"]["output_tokens"],
        10 * thoughts,
        "{metadata}"
    );
    let result = json_of(&out.stdout);
    assert_eq!(result["metrics"]["iterations"], thoughts, "{result}");
}

#[test]
fn the_models_text_never_drives_the_terminal_and_playback_has_no_cost() {
    // An answer with escape sequences (clear screen, window title, bell) and a trailing line break.
    let hostile = "Done.\u{1b}[2J\u{1b}]0;pwned\u{7}\nSecond line\n";
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "echo", json!({"message": "x"}))
            .with_text("Look\u{1b}[31m red")
            .usage(1000, 100),
        Reply::text(hostile).usage(1000, 100),
        Reply::text(hostile),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE).replace("test-model", "gpt-4o-mini"));
    let text = sb.run(Some(&server), "go", &["--record", "rec"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    for (what, out) in [("stderr", &text.stderr), ("stdout", &text.stdout)] {
        assert!(
            !out.contains('\u{1b}') && !out.contains('\u{7}'),
            "{what}: {out:?}"
        );
    }
    assert!(text.stderr.contains("\\x1b[31m"), "{}", text.stderr);
    assert!(text.stdout.contains("Done.\\x1b[2J"), "{}", text.stdout);
    assert!(
        text.stdout.contains("Cost: $0.000") && !text.stdout.contains("Cost: $0.0000\n"),
        "a small cost keeps its digits: {}",
        text.stdout
    );
    // --format raw gives the answer exactly: it is the payload a script asked for.
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws", "-m", "again", "--format", "raw"]);
    let raw = crate::support::output(cmd);
    assert_eq!(raw.stdout, hostile);
    // Replayed answers cost nothing.
    let replay = Sandbox::new(&agent_yaml(ECHO_AND_WRITE).replace("test-model", "gpt-4o-mini"));
    let rec = sb.path("rec").display().to_string();
    let out = replay.run(None, "go", &["--playback", &rec, "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result = json_of(&out.stdout);
    assert!(result.get("total_cost_usd").is_none(), "{result}");
}

/// No text output for a person lets a model's or a tool's control bytes through: ESC (CSI, OSC),
/// BEL, and the C1 controls (U+009B is a CSI on its own in some terminals).
fn assert_inert(what: &str, out: &str) {
    for c in ['\u{1b}', '\u{7}', '\u{9b}', '\u{9d}', '\u{90}'] {
        assert!(!out.contains(c), "{what} lets {c:?} through: {out:?}");
    }
}

#[test]
fn show_list_runs_and_a_waiting_summary_never_pass_escapes_to_the_terminal() {
    // An OSC sequence (set the window title) that a cut at 100 characters would leave open, C1
    // controls, and a tool that prints escapes.
    let padding = "x".repeat(90);
    let hostile =
        format!("{padding}\u{1b}]0;pwned by a very long title\u{7} \u{9b}2J \u{9d}0;t\u{9c}");
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "echo", json!({"message": "\u{1b}[31mred\u{90}"}))
            .with_text(&hostile),
        Reply::tool_call(
            "q1",
            "ask_human",
            json!({"prompt": format!("Which? {hostile}")}),
        ),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let waiting = sb.run(Some(&server), &hostile, &[]);
    assert_eq!(waiting.code, 101, "{}", waiting.stderr);
    assert_inert("the summary of a waiting run", &waiting.stdout);
    assert_inert("the progress of a run", &waiting.stderr);
    assert!(waiting.stdout.contains("Which? "), "{}", waiting.stdout);
    for args in [vec!["show", "-w", "ws"], vec!["list-runs", "-w", "ws"]] {
        let mut cmd = sb.delta(None);
        cmd.args(&args);
        let out = crate::support::output(cmd);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        assert_inert(args[0], &out.stdout);
        assert_inert(args[0], &out.stderr);
        assert!(out.stdout.contains("\\x1b]0"), "{args:?}: {}", out.stdout);
    }
}
