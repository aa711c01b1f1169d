//! What scripts rely on: `--model` / `DELTA_MODEL`, `-m -` (the message from standard input).

use testkit::{Reply, ScriptedServer};

use crate::support::{ECHO_AND_WRITE, Sandbox, agent_yaml, bodies, output, output_with_stdin};

fn models(server: &ScriptedServer) -> Vec<String> {
    bodies(server)
        .iter()
        .map(|b| b["model"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_model_flag_and_variable_replace_the_agents_model_for_run_and_continue() {
    let server = ScriptedServer::start([
        Reply::text("one"),
        Reply::text("two"),
        Reply::text("three"),
        Reply::text("four"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(
        sb.run(Some(&server), "a", &["--model", "flag-model"]).code,
        0
    );
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws2", "-m", "b"])
        .env("DELTA_MODEL", "env-model");
    assert_eq!(output(cmd).code, 0);
    // The flag wins over the variable.
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws2", "-m", "c", "--model", "flag-again"])
        .env("DELTA_MODEL", "env-model");
    assert_eq!(output(cmd).code, 0);
    // Without either, a continued run asks the agent's model again.
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws2", "-m", "d"]);
    assert_eq!(output(cmd).code, 0);
    assert_eq!(
        models(&server),
        ["flag-model", "env-model", "flag-again", "test-model"]
    );
}

#[test]
fn a_dash_message_is_read_from_standard_input() {
    let server = ScriptedServer::start([Reply::text("ok"), Reply::text("again")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "-"]);
    let task = "Summarise this:\nline one\nline \"two\"\n";
    let out = output_with_stdin(cmd, task);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(sb.metadata()["task"], task.trim_end_matches('\n'));
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws", "-m", "-"]);
    assert_eq!(output_with_stdin(cmd, "and more\n").code, 0);
    let users: Vec<String> = sb
        .events("USER_MESSAGE")
        .iter()
        .map(|e| e["payload"]["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(users, [task.trim_end_matches('\n'), "and more"]);
    // An empty standard input is no task.
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws3", "-m", "-"]);
    let out = output_with_stdin(cmd, "");
    assert_eq!(out.code, 64, "{}", out.stderr);
}

#[test]
fn format_json_prints_a_result_object_also_when_the_run_cannot_start() {
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    // No API key.
    let out = sb.run(None, "hello", &["--format", "json"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["is_error"], true);
    assert_eq!(result["error"]["type"], "SetupError");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("API key")
    );
    assert_eq!(result["exit_code"], 1);
    assert!(
        out.stderr.contains("API key"),
        "the message stays on stderr"
    );
    // An empty message is a usage error.
    let out = sb.run(None, " ", &["--format", "json"]);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        (out.code, &result["error"]["type"]),
        (64, &serde_json::json!("UsageError"))
    );
    assert_eq!(result["exit_code"], 64);
    // continue without a workspace to continue.
    let mut cmd = sb.delta(None);
    cmd.args(["continue", "-w", "nowhere", "--format", "json"]);
    let out = output(cmd);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["is_error"], true, "{}", out.stderr);
    assert_eq!(result["exit_code"], out.code);
    // A run that starts says whether it failed.
    let server = ScriptedServer::start([Reply::text("fine")]);
    let out = sb.run(Some(&server), "hello", &["--format", "json"]);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        (result["status"].as_str(), &result["is_error"]),
        (Some("COMPLETED"), &serde_json::json!(false))
    );
}

/// The documented fields of each `stream-json` line type, with their JSON kinds (`?`: or null).
const STREAM_SCHEMA: &[(&str, &[(&str, &str)])] = &[
    (
        "run_started",
        &[
            ("run_id", "string"),
            ("workspace", "string"),
            ("agent", "string"),
            ("model", "string?"),
            ("resuming", "string?"),
            ("max_iterations", "number"),
            ("policy", "object"),
        ],
    ),
    (
        "iteration",
        &[
            ("n", "number"),
            ("max", "number"),
            ("run_iteration", "number"),
        ],
    ),
    ("model_request", &[]),
    ("model_text", &[("text", "string")]),
    (
        "tool_started",
        &[
            ("id", "string"),
            ("name", "string"),
            ("arguments", "object"),
        ],
    ),
    (
        "tool_finished",
        &[
            ("id", "string"),
            ("name", "string"),
            ("exit_code", "number"),
            ("success", "bool"),
            ("stopped", "string?"),
            ("duration_ms", "number"),
            ("output_chars", "number"),
            ("preview", "string?"),
        ],
    ),
    ("tool_not_found", &[("name", "string")]),
    ("tool_error", &[("message", "string")]),
    (
        "hook",
        &[
            ("name", "string"),
            ("status", "string"),
            ("problems", "array"),
        ],
    ),
    (
        "question_asked",
        &[("prompt", "string"), ("waiting", "bool")],
    ),
    (
        "compaction",
        &[
            ("strategy", "string"),
            ("iterations", "number"),
            ("tokens_before", "number"),
            ("tokens_after", "number"),
        ],
    ),
    ("note", &[("text", "string")]),
    ("run_finished", &[("result", "object")]),
];

/// Parses every line of `stdout` and checks it against [`STREAM_SCHEMA`]: the lines.
fn stream_lines(stdout: &str) -> Vec<serde_json::Value> {
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for line in &lines {
        let kind = line["type"]
            .as_str()
            .unwrap_or_else(|| panic!("no type: {line}"));
        let (_, fields) = STREAM_SCHEMA
            .iter()
            .find(|(t, _)| *t == kind)
            .unwrap_or_else(|| panic!("undocumented type {kind}: {line}"));
        let object = line.as_object().unwrap();
        assert_eq!(object.len(), fields.len() + 1, "fields of {line}");
        for (field, expected) in *fields {
            let value = &line[*field];
            let ok = match expected.trim_end_matches('?') {
                "string" => value.is_string(),
                "number" => value.is_number(),
                "bool" => value.is_boolean(),
                "object" => value.is_object(),
                "array" => value.is_array(),
                other => panic!("schema kind {other}"),
            } || (expected.ends_with('?') && value.is_null());
            assert!(ok, "{kind}.{field} should be {expected}: {line}");
        }
    }
    lines
}

fn types(lines: &[serde_json::Value]) -> Vec<&str> {
    lines.iter().map(|l| l["type"].as_str().unwrap()).collect()
}

#[test]
fn stream_json_lines_follow_the_schema_through_tools_a_question_and_a_failure() {
    use serde_json::json;
    use testkit::ToolCallSpec;
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new("c1", "echo", json!({"message": "hi"})),
            ToolCallSpec::new("c2", "nope", json!({})),
        ])
        .with_text("Working on it."),
        Reply::tool_call("c3", "ask_human", json!({"prompt": "Go on?"})),
        Reply::error(400, "the model gave up"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = sb.run(Some(&server), "stream it", &["--format", "stream-json"]);
    assert_eq!(out.code, 101, "{}", out.stderr);
    let lines = stream_lines(&out.stdout);
    assert_eq!(
        types(&lines),
        [
            "run_started",
            "iteration",
            "model_request",
            "model_text",
            "tool_started",
            "tool_finished",
            "tool_started",
            "tool_not_found",
            "iteration",
            "model_request",
            "tool_started",
            "question_asked",
            "run_finished"
        ]
    );
    assert_eq!(lines[5]["name"], "echo");
    assert_eq!(lines[5]["id"], "c1");
    assert_eq!(lines[11]["prompt"], "Go on?");
    assert_eq!(lines[11]["waiting"], true);
    let result = &lines[12]["result"];
    assert_eq!(result["status"], "WAITING_FOR_INPUT");
    assert_eq!(result["interaction"]["prompt"], "Go on?");
    // The answer goes to a model that fails: the run ends FAILED, said in its last line.
    let mut cmd = sb.delta(Some(&server));
    cmd.args([
        "continue",
        "-w",
        "ws",
        "-m",
        "yes",
        "--format",
        "stream-json",
    ]);
    let out = output(cmd);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let lines = stream_lines(&out.stdout);
    assert_eq!(lines[0]["resuming"], "WAITING_FOR_INPUT");
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "run_finished");
    assert_eq!(last["result"]["status"], "FAILED");
    assert_eq!(last["result"]["is_error"], true);
    assert!(
        last["result"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the model gave up")
    );
    // A run that cannot start has one line: its result.
    let out = sb.run(None, "no key", &["--format", "stream-json"]);
    let lines = stream_lines(&out.stdout);
    assert_eq!(types(&lines), ["run_finished"]);
    assert_eq!(lines[0]["result"]["is_error"], true);
    assert_eq!(lines[0]["result"]["exit_code"], out.code);
}

/// A workspace with two completed runs, `older` then `newer` (an hour later).
fn two_runs(server: &ScriptedServer) -> Sandbox {
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    for (id, now) in [
        ("older", "2026-01-02T03:04:05Z"),
        ("newer", "2026-01-02T04:04:05Z"),
    ] {
        let mut cmd = sb.delta(Some(server));
        cmd.args([
            "run",
            "--agent",
            "agent",
            "-w",
            "ws",
            "-m",
            &format!("task {id}"),
        ])
        .args(["--run-id", id])
        .env("DELTA_TEST_NOW", now);
        let out = output(cmd);
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    sb
}

fn user_messages(sb: &Sandbox, run: &str) -> Vec<String> {
    crate::support::read_jsonl(&sb.ws().join(".delta").join(run).join("journal.jsonl"))
        .iter()
        .filter(|e| e["type"] == "USER_MESSAGE")
        .map(|e| e["payload"]["content"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn without_a_terminal_continue_says_which_of_several_runs_it_took() {
    let server = ScriptedServer::start((0..3).map(|i| Reply::text(&format!("answer {i}"))));
    let sb = two_runs(&server);
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws", "-m", "more"]);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("Continuing run newer (the latest of 2 runs in ws; --run-id picks another"),
        "{}",
        out.stderr
    );
    assert_eq!(user_messages(&sb, "newer"), ["task newer", "more"]);
}

#[test]
fn on_a_terminal_continue_offers_the_runs_to_choose_from() {
    let Some(script_program) = testkit::needs::pseudo_terminal() else {
        return;
    };
    let server = ScriptedServer::start((0..3).map(|i| Reply::text(&format!("answer {i}"))));
    let sb = two_runs(&server);
    // `script` gives delta a pseudo-terminal; the choice (2: the older run) is typed into it.
    let delta = sb.delta(Some(&server));
    let mut script = std::process::Command::new(script_program);
    script
        .current_dir(sb.root.path())
        .args([
            "-qec",
            &format!("{} continue -w ws -m again", env!("CARGO_BIN_EXE_delta")),
        ])
        .arg("/dev/null")
        .envs(delta.get_envs().filter_map(|(k, v)| Some((k, v?))));
    let out = output_with_stdin(script, "2\n");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("Multiple runs found. Which to continue?"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("1. 2026-01-02 04:04 (COMPLETED) - \"task newer\""),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("2. 2026-01-02 03:04 (COMPLETED) - \"task older\""),
        "{}",
        out.stdout
    );
    assert_eq!(user_messages(&sb, "older"), ["task older", "again"]);
    assert_eq!(user_messages(&sb, "newer"), ["task newer"]);
}

/// `delta ARGS` in the sandbox on a pseudo-terminal (`script`): what the terminal showed, or `None`
/// (after a SKIPPED line) without util-linux's `script`.
fn on_terminal(
    sb: &Sandbox,
    server: &ScriptedServer,
    args: &str,
) -> Option<crate::support::Output> {
    on_terminal_with(sb, server, args, &[])
}

/// [`on_terminal`] with more variables in the environment.
fn on_terminal_with(
    sb: &Sandbox,
    server: &ScriptedServer,
    args: &str,
    vars: &[(&str, &str)],
) -> Option<crate::support::Output> {
    let program = testkit::needs::pseudo_terminal()?;
    let delta = sb.delta(Some(server));
    let mut script = std::process::Command::new(program);
    script
        .current_dir(sb.root.path())
        .args(["-qec", &format!("{} {args}", env!("CARGO_BIN_EXE_delta"))])
        .arg("/dev/null")
        .envs(delta.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env_remove("NO_COLOR")
        .envs(vars.iter().copied());
    Some(output(script))
}

#[test]
fn on_a_terminal_the_models_text_streams_and_a_server_that_cannot_stream_is_asked_again() {
    let server = ScriptedServer::start([
        Reply::text("The answer comes in small pieces.").fragment(3),
        // Extending the run: this server closes streamed requests without a word.
        Reply::empty_ok(),
        Reply::text("Asked plainly, it answers."),
        Reply::text("And plainly again."),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let Some(out) = on_terminal(&sb, &server, "run --agent agent -w ws -m go") else {
        return;
    };
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stdout.contains("💭 The answer comes in small pieces."),
        "{}",
        out.stdout
    );
    assert_eq!(
        out.stdout.matches("small pieces").count(),
        2,
        "shown once, then in the result: {}",
        out.stdout
    );
    let out = on_terminal(&sb, &server, "continue -w ws -m more").unwrap();
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stdout.contains("Asked plainly, it answers."),
        "{}",
        out.stdout
    );
    let streamed: Vec<bool> = bodies(&server)
        .iter()
        .map(|b| b["stream"].as_bool().unwrap_or(false))
        .collect();
    assert_eq!(streamed, [true, true, false]);
    // Without a terminal nothing is streamed.
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws", "-m", "again"]);
    assert_eq!(output(cmd).code, 0);
    assert_eq!(bodies(&server)[3]["stream"].as_bool(), None);
}

#[test]
fn on_a_terminal_a_long_wait_for_the_model_is_counted() {
    let server = ScriptedServer::start([
        Reply::text("finally").delay(std::time::Duration::from_millis(2300))
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let Some(out) = on_terminal(&sb, &server, "run --agent agent -w ws -m go") else {
        return;
    };
    assert_eq!(out.code, 0, "{}", out.stdout);
    for second in ["1 s", "2 s"] {
        assert!(
            out.stdout
                .contains(&format!("Waiting for the model... {second}")),
            "{}",
            out.stdout
        );
    }
}

#[test]
fn quiet_leaves_only_the_result() {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "echo", serde_json::json!({"message": "hi"})),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = sb.run(Some(&server), "go", &["-q", "--format", "raw"]);
    assert_eq!(out.code, 0);
    assert_eq!(out.stderr, "");
    assert_eq!(out.stdout, "done\n");
    // Errors are still said.
    let out = sb.run(None, "go", &["-q"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("API key"), "{}", out.stderr);
}

#[test]
fn completions_and_man_pages_come_from_the_command_line_definition() {
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let run = |args: &[&str]| {
        let mut cmd = sb.delta(None);
        cmd.args(args);
        let out = output(cmd);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        out.stdout
    };
    let bash = run(&["completions", "bash"]);
    assert!(
        bash.contains("_delta()") && bash.contains("list-runs") && bash.contains("--format"),
        "{bash}"
    );
    assert!(run(&["completions", "zsh"]).starts_with("#compdef delta"));
    assert!(run(&["completions", "fish"]).contains("complete -c delta"));
    let page = run(&["man"]);
    assert!(
        page.contains(".TH delta 1") && page.contains("show"),
        "{page}"
    );
    let dir = sb.path("man");
    let listed = run(&["man", "-d", dir.to_str().unwrap()]);
    for name in ["delta.1", "delta-run.1", "delta-continue.1", "delta-show.1"] {
        assert!(dir.join(name).is_file(), "{name}: {listed}");
    }
}

#[test]
fn colours_follow_the_color_flag_and_no_color() {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "echo", serde_json::json!({"message": "hi"})),
        Reply::text("done"),
        Reply::tool_call("c2", "echo", serde_json::json!({"message": "hi"})),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let out = sb.run(Some(&server), "go", &["--color", "always"]);
    assert!(out.stderr.contains("\x1b[32m  ✓ Output"), "{}", out.stderr);
    let out = sb.run(Some(&server), "go", &["--color", "never", "-w", "ws2"]);
    assert!(!out.stderr.contains('\x1b'), "{}", out.stderr);
    // On a terminal: colours, unless NO_COLOR is set.
    let server = ScriptedServer::start([Reply::text("one"), Reply::text("two")]);
    let Some(out) = on_terminal(&sb, &server, "run --agent agent -w ws3 -m go") else {
        return;
    };
    assert!(out.stdout.contains("\x1b[1m"), "{}", out.stdout);
    let out = on_terminal_with(
        &sb,
        &server,
        "run --agent agent -w ws4 -m go",
        &[("NO_COLOR", "1")],
    )
    .unwrap();
    assert!(!out.stdout.contains("\x1b[1m"), "{}", out.stdout);
}

#[test]
fn a_command_line_delta_cannot_read_still_gets_a_json_object_when_json_is_asked_for() {
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let mut cmd = sb.delta(None);
    cmd.args(["run", "-m", "x", "--format", "json", "--no-such-flag"]);
    let out = output(cmd);
    assert_eq!(out.code, 64);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["error"]["type"], "UsageError");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--no-such-flag"),
        "{result}"
    );
    assert!(out.stderr.contains("--no-such-flag"));
}

/// `-q` leaves errors only on stderr: no agent warning, no note of the connection, no retry, no
/// "Continuing run …" line, no summary note; an error is still said.
#[test]
fn quiet_leaves_only_errors_on_stderr() {
    let server = ScriptedServer::start([
        Reply::text("first"),
        Reply::error(503, "busy"),
        Reply::text("second"),
        Reply::text("third"),
    ]);
    // config.yaml (deprecated) draws a warning.
    let sb = Sandbox::new("name: test-agent\n");
    std::fs::remove_file(sb.path("agent/agent.yaml")).unwrap();
    sb.file(
        "agent/config.yaml",
        "name: test-agent\nllm:\n  model: test-model\ntools: []\n",
    );
    let quiet = |out: &crate::support::Output, what: &str| {
        assert_eq!(out.code, 0, "{what}: {}", out.stderr);
        assert_eq!(out.stderr, "", "{what} printed on stderr with -q");
    };
    quiet(&sb.run(Some(&server), "one", &["-q"]), "run");
    // A retried request, and a workspace of two runs continued without --run-id.
    quiet(
        &sb.run(Some(&server), "two", &["-q", "--run-id", "r2"]),
        "a retried run",
    );
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws", "-m", "more", "-q"]);
    quiet(&crate::support::output(cmd), "continue");
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws", "-q"]);
    let refused = crate::support::output(cmd);
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.starts_with("error: Run is COMPLETED"),
        "{}",
        refused.stderr
    );
}

/// `--format json` leaves one JSON object on stdout for every error, whatever the command, and a
/// missing argument's message names the argument.
#[test]
fn every_command_asked_for_json_prints_an_object_on_error() {
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    for (args, code, says) in [
        (
            vec!["list-runs", "-w", "nowhere", "--format", "json"],
            1,
            "No .delta directory",
        ),
        (
            vec!["show", "-w", "nowhere", "--format", "json"],
            1,
            "No .delta directory",
        ),
        (vec!["rm", "--format", "json"], 64, "--run-id <ID>"),
        (
            vec!["list-runs", "--status", "SOMETIMES", "--format", "json"],
            64,
            "unknown status",
        ),
    ] {
        let mut cmd = sb.delta(None);
        cmd.args(&args);
        let out = crate::support::output(cmd);
        assert_eq!(out.code, code, "{args:?}: {}", out.stderr);
        let object: serde_json::Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not one JSON object ({e}): {:?}", out.stdout));
        assert_eq!(object["is_error"], true, "{args:?}: {object}");
        assert_eq!(object["exit_code"], code, "{args:?}: {object}");
        assert!(
            object["message"].as_str().unwrap().contains(says),
            "{args:?}: {object}"
        );
    }
}
