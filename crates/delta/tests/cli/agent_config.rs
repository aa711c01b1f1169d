//! agent.yaml problems are reported in the user's terms: what was expected, where, under which key.

use crate::support::{Output, Sandbox};

/// `delta run` on an agent with this agent.yaml (answers from an empty recordings folder: loading the
/// agent is what is looked at).
fn run_with(yaml: &str) -> Output {
    let sb = Sandbox::new(yaml);
    std::fs::create_dir_all(sb.path("rec")).unwrap();
    sb.run(None, "hi", &["--playback", "rec"])
}

fn assert_error(yaml: &str, expected: &str) {
    let out = run_with(yaml);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains(expected),
        "expected {expected:?} in:\n{}",
        out.stderr
    );
    for jargon in [
        "floating point",
        "scalar",
        "sequence start",
        "mapping start",
        "u16",
        "u32",
        "u64",
        "__serde",
    ] {
        assert!(
            !out.stderr.contains(jargon),
            "internal term {jargon:?} in:\n{}",
            out.stderr
        );
    }
}

#[test]
fn type_errors_say_what_was_expected() {
    assert_error(
        "name: a\nmax_iterations: \"lots\"\ntools: []\n",
        "max_iterations: expected an integer (a whole number such as 30)",
    );
    assert_error(
        "name: a\nllm:\n  max_tokens: many\ntools: []\n",
        "llm.max_tokens: expected an integer",
    );
    assert_error(
        "name: a\nllm:\n  temperature: hot\ntools: []\n",
        "llm.temperature: expected a number",
    );
    assert_error(
        "name: a\ntools:\n  - name: t\n    exec: e\n    timeout_seconds: soon\n",
        "tools[0].timeout_seconds: expected a number",
    );
    assert_error(
        "name: a\ntools:\n  - name: t\n    exec: e\n    parameters: 4\n",
        "tools[0].parameters: expected a list",
    );
    assert_error("name: a\ntools: {}\n", "tools: expected a list");
    assert_error("name: [1]\ntools: []\n", "name: expected text");
    assert_error("name: a\nllm: 3\ntools: []\n", "llm: expected a mapping");
    assert_error("tools: []\n", "missing key `name`");
    assert_error(
        "name: a\ntools: []\nlifecycle_hooks:\n  on_error:\n    command: [x]\n    timeout_ms: -5\n",
        "lifecycle_hooks.on_error.timeout_ms: expected an integer",
    );
}

#[test]
fn unknown_keys_are_named_by_their_path_in_the_file() {
    let out = run_with(
        "name: a\nllm:\n  model: m\n  temprature: 1\ntools:\n  - name: t\n    exec: \"echo ${a}\"\n    bogus: 2\n    parameters:\n      - name: a\n        bogus: 1\nlifecycle_hooks:\n  on_error:\n    command: [\"true\"]\n    extra: 1\n",
    );
    let warnings: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(
        warnings,
        [
            "warning: agent.yaml: unknown key `llm.temprature` is ignored",
            "warning: agent.yaml: unknown key `tools[0].bogus` is ignored",
            "warning: agent.yaml: unknown key `tools[0].parameters[0].bogus` is ignored",
            "warning: agent.yaml: unknown key `lifecycle_hooks.on_error.extra` is ignored",
        ],
        "{}",
        out.stderr
    );
}

#[test]
fn llm_is_optional_with_the_documented_defaults() {
    let sb = Sandbox::new("name: a\ntools: []\n");
    let server = testkit::ScriptedServer::start([testkit::Reply::text("hello")]);
    let out = sb.run(Some(&server), "hi", &["--format", "raw"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "hello\n");
    let body = crate::support::bodies(&server)[0].clone();
    assert!(body.get("model").is_none(), "no model is sent: {body}");
    assert!(
        server.requests()[0].path.ends_with("/chat/completions"),
        "the OpenAI-compatible protocol is the default"
    );
    assert!(out.stderr.contains("(server default)"), "{}", out.stderr);
}

#[test]
fn huge_or_odd_time_limits_are_errors_not_crashes() {
    for yaml in [
        "name: a\ntimeout_seconds: 1e30\ntools: []\n",
        "name: a\ntools:\n  - name: t\n    exec: e\n    timeout_seconds: 1e30\n",
        "name: a\nllm:\n  idle_timeout_seconds: 1e300\ntools: []\n",
        "name: a\ntimeout_seconds: -1\ntools: []\n",
    ] {
        assert_error(
            yaml,
            "a number of seconds greater than 0 and at most 31536000",
        );
    }
    for value in ["1e300", "99999999999999999999", "NaN", "0", "soon"] {
        // Read when the connection to the server is set up, before any request.
        let sb = Sandbox::new("name: a\ntools: []\n");
        let mut cmd = sb.delta(None);
        cmd.env("DELTA_LLM_IDLE_TIMEOUT", value)
            .env("DELTA_BASE_URL", "http://127.0.0.1:9/v1")
            .args(["run", "--agent", "agent", "-w", "ws", "-m", "hi"]);
        let out = crate::support::output(cmd);
        assert_eq!(out.code, 1, "{value}: {}", out.stderr);
        assert!(
            out.stderr.contains("DELTA_LLM_IDLE_TIMEOUT")
                && out.stderr.contains("at most 31536000"),
            "{value}: {}",
            out.stderr
        );
    }
}

#[test]
fn a_key_given_twice_is_named_without_parser_jargon() {
    assert_error(
        "name: a\ntools:\n  - name: t\n    name: u\n    exec: e\n",
        "the key name is given twice in the same mapping; keep one",
    );
    let out = run_with("name: a\nname: b\ntools: []\n");
    assert!(!out.stderr.contains("DuplicateKeyPolicy"), "{}", out.stderr);
}

#[test]
fn session_and_mcp_settings_are_checked_where_they_are_written() {
    assert_error(
        "name: a\nsessions: true\ntools:\n  - name: session_exec\n    exec: \"true\"\n",
        "tool `session_exec` has the name of a built-in session tool",
    );
    assert_error(
        "name: a\ntools: []\nmcp_servers:\n  - name: a__b\n    command: x\n",
        "mcp_servers[0].name",
    );
    assert_error(
        "name: a\ntools: []\nmcp_servers:\n  - name: both\n    command: x\n    url: http://127.0.0.1:1/mcp\n",
        "give either `command` (a stdio server) or `url` (streamable HTTP)",
    );
    assert_error(
        "name: a\ntools: []\nmcp_servers:\n  - name: web\n    url: ftp://example.org\n",
        "is not an http:// or https:// URL",
    );
    assert_error(
        "name: a\ntools: []\nmcp_servers:\n  - name: x\n    command: a\n  - name: x\n    command: b\n",
        "server \"x\" is named twice",
    );
    assert_error(
        "name: a\ntools: []\nmcp_servers:\n  - name: x\n    command: a\n    timeout_seconds: -1\n",
        "mcp_servers[0].timeout_seconds",
    );
}
