//! Tools as real processes: observations, placeholders, injection safety, timeouts, stdin.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer};

use crate::support::{Sandbox, agent_yaml};

fn one_call(tool: &str, args: Value) -> ScriptedServer {
    ScriptedServer::start([Reply::tool_call("c1", tool, args), Reply::text("done")])
}

fn observation(sb: &Sandbox) -> String {
    sb.events("ACTION_RESULT")[0]["payload"]["observation_content"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn long_output_is_truncated_for_the_model_but_kept_in_full() {
    let server = one_call("spew", json!({}));
    let sb = Sandbox::new(&agent_yaml(
        "  - name: spew\n    shell: \"head -c 6001 /dev/zero | tr '\\\\0' a; echo err >&2; exit 3\"\n",
    ));
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 0);
    let obs = observation(&sb);
    assert!(
        obs.starts_with(&format!(
            "=== STDOUT ===\n{}\n\n[Output truncated - 6001 total characters]\n",
            "a".repeat(5000)
        )),
        "{obs}"
    );
    assert!(
        obs.ends_with("=== STDERR ===\nerr\n\n=== EXIT CODE: 3 ==="),
        "{obs}"
    );
    let result = &sb.events("ACTION_RESULT")[0]["payload"];
    assert_eq!(result["status"], "FAILED");
    let record = crate::support::tool_record(&sb.run_dir(), "c1");
    assert_eq!(record["stdout"].as_str().unwrap().len(), 6001);
    assert_eq!(record["exit_code"], 3);
}

#[test]
fn silent_tools_say_so() {
    let server = one_call("quiet", json!({}));
    let sb = Sandbox::new(&agent_yaml("  - name: quiet\n    exec: \"true\"\n"));
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 0);
    assert_eq!(
        observation(&sb),
        "=== EXIT CODE: 0 ===\n(Command executed with no output)"
    );
}

#[test]
fn exec_placeholders_stay_in_position() {
    let server = one_call("copy", json!({"src": "a.txt", "dst": "b.txt"}));
    let sb = Sandbox::new(&agent_yaml(
        "  - name: copy\n    exec: \"cp ${src} ${dst}\"\n",
    ));
    sb.file("ws/a.txt", "content of a");
    assert_eq!(sb.run(Some(&server), "copy", &[]).code, 0);
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("b.txt")).unwrap(),
        "content of a"
    );
    assert_eq!(
        sb.events("ACTION_REQUEST")[0]["payload"]["resolved_command"],
        "cp a.txt b.txt"
    );

    // A placeholder before fixed text: `cp ${src} backup/` copies into backup/ (the original reversed it).
    let server = one_call("backup", json!({"src": "a.txt"}));
    let sb = Sandbox::new(&agent_yaml(
        "  - name: backup\n    exec: \"cp ${src} backup/\"\n",
    ));
    sb.file("ws/a.txt", "A");
    std::fs::create_dir_all(sb.ws().join("backup")).unwrap();
    assert_eq!(sb.run(Some(&server), "backup", &[]).code, 0);
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("backup/a.txt")).unwrap(),
        "A"
    );
}

#[test]
fn injection_through_arguments_runs_nothing() {
    let attacks = [
        "; rm -f marker",
        "$(rm -f marker)",
        "`rm -f marker`",
        "x && rm -f marker",
        "x | rm -f marker",
        "' ; rm -f marker ; '",
        "\" ; rm -f marker ; \"",
    ];
    for attack in attacks {
        for (tool, yaml) in [
            ("say", "  - name: say\n    exec: \"echo ${message}\"\n"),
            (
                "count",
                "  - name: count\n    shell: \"printf '%s' ${message} | wc -c\"\n",
            ),
            (
                "legacy",
                "  - name: legacy\n    command: [echo]\n    parameters:\n      - name: message\n        inject_as: argument\n",
            ),
        ] {
            let server = one_call(tool, json!({"message": attack}));
            let sb = Sandbox::new(&agent_yaml(yaml));
            let marker = sb.file("ws/marker", "keep me");
            assert_eq!(sb.run(Some(&server), "go", &[]).code, 0);
            assert!(marker.exists(), "{tool} with {attack:?} removed the marker");
            let obs = observation(&sb);
            if tool == "count" {
                assert!(
                    obs.contains(&attack.len().to_string()),
                    "{tool} {attack:?}: {obs}"
                );
            } else {
                assert!(
                    obs.contains(attack),
                    "{tool} {attack:?}: the value should be echoed literally: {obs}"
                );
            }
        }
    }
}

#[test]
fn non_string_arguments_are_stringified() {
    let server = one_call("say", json!({"n": 42, "flag": true, "obj": {"a": [1, 2]}}));
    let sb = Sandbox::new(&agent_yaml(
        "  - name: say\n    exec: \"echo ${n} ${flag} ${obj}\"\n",
    ));
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 0);
    assert_eq!(
        observation(&sb),
        "=== STDOUT ===\n42 true {\"a\":[1,2]}\n\n=== EXIT CODE: 0 ==="
    );
}

#[test]
fn stdin_is_closed_unless_a_parameter_feeds_it() {
    // `cat` with no stdin parameter must not wait for input.
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "cat_nothing", json!({})),
        Reply::tool_call("c2", "cat_this", json!({"text": "piped in"})),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(&agent_yaml(
        "  - name: cat_nothing\n    exec: cat\n    timeout_seconds: 5\n  - name: cat_this\n    exec: cat\n    stdin: text\n",
    ));
    let start = Instant::now();
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 0);
    assert!(start.elapsed() < Duration::from_secs(4));
    let results = sb.events("ACTION_RESULT");
    assert_eq!(
        results[0]["payload"]["observation_content"],
        "=== EXIT CODE: 0 ===\n(Command executed with no output)"
    );
    assert_eq!(
        results[1]["payload"]["observation_content"],
        "=== STDOUT ===\npiped in\n=== EXIT CODE: 0 ==="
    );
}

#[test]
fn tools_run_in_the_workspace_with_agent_home() {
    let server = one_call("where", json!({}));
    let sb = Sandbox::new(&agent_yaml(
        "  - name: where\n    shell: \"pwd; echo $AGENT_HOME\"\n",
    ));
    sb.script("agent/bin/hello.sh", "echo hello from $0");
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 0);
    let obs = sb.scrub(&observation(&sb));
    assert_eq!(
        obs,
        "=== STDOUT ===\n[SANDBOX]/ws\n[SANDBOX]/agent\n\n=== EXIT CODE: 0 ==="
    );

    let server = one_call("hello", json!({}));
    let sb2 = Sandbox::new(&agent_yaml(
        "  - name: hello\n    exec: \"${AGENT_HOME}/bin/hello.sh\"\n",
    ));
    sb2.script("agent/bin/hello.sh", "echo hello");
    assert_eq!(sb2.run(Some(&server), "go", &[]).code, 0);
    assert_eq!(
        observation(&sb2),
        "=== STDOUT ===\nhello\n\n=== EXIT CODE: 0 ==="
    );
}

#[test]
fn a_timeout_kills_the_whole_process_group() {
    let server = one_call("slow", json!({}));
    let sb = Sandbox::new(&agent_yaml(
        "  - name: slow\n    shell: \"(sleep 2; touch late) & echo started; sleep 30\"\n    timeout_seconds: 0.5\n",
    ));
    let start = Instant::now();
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    let obs = observation(&sb);
    assert!(obs.starts_with("=== STDOUT ===\nstarted\n"), "{obs}");
    assert!(obs.contains("TIMED OUT after 0.5 s"), "{obs}");
    assert_eq!(sb.events("ACTION_RESULT")[0]["payload"]["status"], "FAILED");
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        !sb.ws().join("late").exists(),
        "a process of the tool's group survived the timeout"
    );
}

#[test]
fn a_program_that_does_not_exist_is_an_error_result() {
    let server = one_call("ghost", json!({}));
    let sb = Sandbox::new(&agent_yaml(
        "  - name: ghost\n    exec: \"no-such-program-xyz --flag\"\n",
    ));
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 0);
    let result = &sb.events("ACTION_RESULT")[0]["payload"];
    assert_eq!(result["status"], "ERROR");
    assert!(
        result["observation_content"]
            .as_str()
            .unwrap()
            .starts_with("Error executing tool: cannot start no-such-program-xyz")
    );
    let sys = sb.events("SYSTEM_MESSAGE");
    assert!(
        sys[0]["payload"]["content"]
            .as_str()
            .unwrap()
            .starts_with("Tool execution error:")
    );
}

#[test]
fn model_chosen_call_ids_cannot_escape_the_run_folder() {
    let server = ScriptedServer::start([
        Reply::tool_call("../../../escape", "say", json!({"message": "x"})),
        Reply::text("ok"),
    ]);
    let sb = Sandbox::new(&agent_yaml(
        "  - name: say\n    exec: \"echo ${message}\"\n",
    ));
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 0);
    assert!(!sb.path("escape").exists() && !sb.ws().join("escape").exists());
    let exec_ref = sb.events("ACTION_RESULT")[0]["payload"]["execution_ref"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(exec_ref, "_________escape");
    let recorded = crate::support::io_record_ids(&sb.run_dir().join("io/tool_executions"));
    assert_eq!(recorded, [exec_ref]);
}
