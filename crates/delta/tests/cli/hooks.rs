//! Lifecycle hooks: where each one runs, what it is given, what its outputs change.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use crate::support::{KEY, Output, Sandbox, bodies, read_json};

/// Every hook, in the order a tool-using run meets them.
const HOOKS: [&str; 6] = [
    "pre_llm_req",
    "post_llm_resp",
    "pre_tool_exec",
    "post_tool_exec",
    "on_error",
    "on_run_end",
];

/// Two tools: one that works, one whose program does not exist (a spawn failure → on_error).
const TOOLS: &str = "tools:\n  - name: echo\n    exec: \"echo ${message}\"\n  - name: broken\n    exec: \"/nonexistent/delta-test/program\"\n  - name: touch_it\n    exec: \"touch ${name}\"\n";

fn agent_with(extra: &str) -> String {
    format!("name: test-agent\nllm:\n  model: test-model\n{TOOLS}{extra}")
}

/// A YAML mapping of every hook to `log.sh <hook>`, each key prefixed with `indent`.
fn every_hook(indent: &str) -> String {
    HOOKS
        .iter()
        .map(|h| {
            format!(
                "{indent}{h}:\n{indent}  command: [\"${{AGENT_HOME}}/hooks/log.sh\", \"{h}\"]\n"
            )
        })
        .collect()
}

/// `log.sh NAME` appends NAME to `hook-calls.log` in its working folder (the workspace).
fn log_script(sb: &Sandbox) {
    sb.script("agent/hooks/log.sh", r#"echo "$1" >> hook-calls.log"#);
}

fn hook_calls(sb: &Sandbox) -> Vec<String> {
    std::fs::read_to_string(sb.ws().join("hook-calls.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The folder names under `io/hooks/`, sorted.
fn hook_dirs(sb: &Sandbox) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(sb.run_dir().join("io/hooks"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn hook_io(sb: &Sandbox, folder: &str) -> PathBuf {
    sb.run_dir().join("io/hooks").join(folder)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// (hook_name, status, io_path_ref) of every HOOK_EXECUTION_AUDIT event.
fn audits(sb: &Sandbox) -> Vec<(String, String, String)> {
    sb.events("HOOK_EXECUTION_AUDIT")
        .iter()
        .map(|e| {
            let p = &e["payload"];
            (
                p["hook_name"].as_str().unwrap().to_string(),
                p["status"].as_str().unwrap().to_string(),
                p["io_path_ref"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn system_messages(sb: &Sandbox) -> Vec<(String, String)> {
    sb.events("SYSTEM_MESSAGE")
        .iter()
        .map(|e| {
            (
                e["payload"]["level"].as_str().unwrap().to_string(),
                e["payload"]["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// One iteration calling `echo` and `broken`, then a final answer.
fn run_every_hook(sb: &Sandbox) -> (ScriptedServer, Output) {
    log_script(sb);
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new("c1", "echo", json!({"message": "hi"})),
            ToolCallSpec::new("c2", "broken", json!({})),
        ]),
        Reply::text("done"),
    ]);
    let out = sb.run(Some(&server), "go", &[]);
    (server, out)
}

fn assert_every_hook_ran(sb: &Sandbox, out: &Output) {
    assert_eq!(out.code, 0, "{}", out.stderr);
    let order = [
        "pre_llm_req",
        "post_llm_resp",
        "pre_tool_exec",
        "post_tool_exec",
        "pre_tool_exec",
        "on_error",
        "pre_llm_req",
        "post_llm_resp",
        "on_run_end",
    ];
    assert_eq!(hook_calls(sb), order);
    let folders: Vec<String> = order
        .iter()
        .enumerate()
        .map(|(i, h)| format!("{:03}_{h}", i + 1))
        .collect();
    assert_eq!(hook_dirs(sb), folders);
    let expected: Vec<(String, String, String)> = order
        .iter()
        .zip(&folders)
        .map(|(h, f)| (h.to_string(), "SUCCESS".into(), format!("io/hooks/{f}/")))
        .collect();
    assert_eq!(audits(sb), expected);

    let run_id = sb.metadata()["run_id"].as_str().unwrap().to_string();
    // Every folder has the protocol's layout.
    for folder in &folders {
        let io = hook_io(sb, folder);
        let ctx = read_json(&io.join("input/context.json"));
        assert_eq!(ctx["hook_name"], folder[4..], "{folder}");
        assert_eq!(ctx["run_id"], run_id.as_str());
        assert_eq!(ctx["timestamp"], "2026-01-02T03:04:05.000Z");
        for meta in [
            "command.txt",
            "stdout.log",
            "stderr.log",
            "exit_code.txt",
            "duration_ms.txt",
        ] {
            assert!(
                io.join("execution_meta").join(meta).is_file(),
                "{folder}/{meta}"
            );
        }
        assert_eq!(read(&io.join("execution_meta/exit_code.txt")), "0");
        let payload_file = if folder.ends_with("pre_llm_req") {
            "proposed_payload.json"
        } else {
            "payload.json"
        };
        assert!(io.join("input").join(payload_file).is_file(), "{folder}");
        assert_eq!(
            std::fs::read_dir(io.join("input")).unwrap().count(),
            2,
            "{folder}: only context.json and the payload"
        );
    }
    let step = |folder: &str| {
        read_json(&hook_io(sb, folder).join("input/context.json"))["step_index"].clone()
    };
    assert_eq!(step("001_pre_llm_req"), 1);
    assert_eq!(step("007_pre_llm_req"), 2);

    // What each hook was given.
    let proposed = read_json(&hook_io(sb, "001_pre_llm_req").join("input/proposed_payload.json"));
    assert_eq!(proposed["model"], "test-model");
    assert_eq!(proposed["tool_choice"], "auto");
    assert!(proposed.get("temperature").is_none(), "{proposed}");
    assert!(proposed.get("max_tokens").is_none(), "{proposed}");
    assert_eq!(
        proposed["messages"][0],
        json!({"role": "system", "content": "# Context Block: system_prompt\n\nYou are a test agent."})
    );
    assert_eq!(
        proposed["messages"][1],
        json!({"role": "user", "content": "go"})
    );
    let names: Vec<&str> = proposed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["echo", "broken", "touch_it", "ask_human"]);
    assert!(proposed["tools"][0]["function"]["parameters"]["properties"]["message"].is_object());

    let payload = |folder: &str| read_json(&hook_io(sb, folder).join("input/payload.json"));
    let response = payload("002_post_llm_resp");
    assert_eq!(response["object"], "chat.completion", "{response}");
    assert_eq!(response["choices"][0]["finish_reason"], "tool_calls");
    let calls: Vec<&str> = response["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(calls, ["echo", "broken"], "{response}");
    assert_eq!(
        response["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        r#"{"message":"hi"}"#
    );
    assert_eq!(
        payload("003_pre_tool_exec"),
        json!({"tool_name": "echo", "tool_args": {"message": "hi"}, "resolved_command": "echo hi"})
    );
    assert_eq!(
        payload("004_post_tool_exec"),
        json!({"tool_name": "echo", "exit_code": 0, "stdout": "hi\n", "stderr": ""})
    );
    assert_eq!(payload("005_pre_tool_exec")["tool_name"], "broken");
    let on_error = payload("006_on_error");
    assert_eq!(on_error["error_type"], "TOOL_EXECUTION_ERROR");
    assert_eq!(
        on_error["context"],
        json!({"tool_name": "broken", "tool_args": {}})
    );
    assert!(
        on_error["message"]
            .as_str()
            .unwrap()
            .starts_with("cannot start /nonexistent/delta-test/program"),
        "{on_error}"
    );
    assert_eq!(
        payload("009_on_run_end"),
        json!({"status": "COMPLETED", "final_response": "done", "iterations_completed": 2})
    );
    // The failed spawn is an ERROR result; the hooks changed nothing else.
    let results = sb.events("ACTION_RESULT");
    assert_eq!(results[0]["payload"]["status"], "SUCCESS");
    assert_eq!(results[1]["payload"]["status"], "ERROR");
}

#[test]
fn every_hook_runs_from_lifecycle_hooks() {
    let sb = Sandbox::new(&agent_with(&format!(
        "lifecycle_hooks:\n{}",
        every_hook("  ")
    )));
    let (_server, out) = run_every_hook(&sb);
    assert_every_hook_ran(&sb, &out);
    assert!(!out.stderr.contains("warning:"), "{}", out.stderr);
}

#[test]
fn every_hook_runs_from_hooks_yaml() {
    let sb = Sandbox::new(&agent_with(""));
    sb.file("agent/hooks.yaml", &every_hook(""));
    let (_server, out) = run_every_hook(&sb);
    assert_every_hook_ran(&sb, &out);
    assert!(!out.stderr.contains("warning:"), "{}", out.stderr);
}

#[test]
fn on_error_and_on_run_end_see_a_fatal_error() {
    let sb = Sandbox::new(&agent_with(&format!(
        "lifecycle_hooks:\n{}",
        every_hook("  ")
    )));
    log_script(&sb);
    let server = ScriptedServer::start([Reply::error(400, "the model refuses")]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(hook_calls(&sb), ["pre_llm_req", "on_error", "on_run_end"]);
    let on_error = read_json(&hook_io(&sb, "002_on_error").join("input/payload.json"));
    assert_eq!(on_error["error_type"], "FATAL_ERROR");
    assert!(
        on_error["message"]
            .as_str()
            .unwrap()
            .contains("the model refuses"),
        "{on_error}"
    );
    assert_eq!(on_error["context"]["iteration"], 1);
    assert_eq!(on_error["context"]["run_id"], sb.metadata()["run_id"]);
    let end = read_json(&hook_io(&sb, "003_on_run_end").join("input/payload.json"));
    assert_eq!(end["status"], "FAILED");
    assert_eq!(end["error"], on_error["message"]);
    assert_eq!(sb.metadata()["status"], "FAILED");
}

#[test]
fn on_run_end_runs_when_the_run_waits_for_input_and_ask_human_runs_no_tool_hooks() {
    let sb = Sandbox::new(&agent_with(&format!(
        "lifecycle_hooks:\n{}",
        every_hook("  ")
    )));
    log_script(&sb);
    let server = ScriptedServer::start([Reply::tool_call(
        "q1",
        "ask_human",
        json!({"prompt": "Which file?"}),
    )]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 101, "{}", out.stderr);
    assert_eq!(
        hook_calls(&sb),
        ["pre_llm_req", "post_llm_resp", "on_run_end"]
    );
    let end = read_json(&hook_io(&sb, "003_on_run_end").join("input/payload.json"));
    assert_eq!(
        end,
        json!({"status": "WAITING_FOR_INPUT", "prompt": "Which file?", "iterations_completed": 1})
    );
}

#[test]
fn pre_llm_req_can_rewrite_the_request() {
    let sb = Sandbox::new(&agent_with(
        "lifecycle_hooks:\n  pre_llm_req:\n    command: [\"${AGENT_HOME}/hooks/rewrite.sh\"]\n",
    ));
    // Keeps everything but the model.
    sb.script(
        "agent/hooks/rewrite.sh",
        r#"sed 's/"test-model"/"rewritten-model"/' "$DELTA_HOOK_IO_PATH/input/proposed_payload.json" > "$DELTA_HOOK_IO_PATH/output/final_payload.json""#,
    );
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "echo", json!({"message": "hi"})),
        Reply::text("done"),
    ]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let bodies = bodies(&server);
    assert_eq!(bodies.len(), 2);
    for body in &bodies {
        assert_eq!(body["model"], "rewritten-model");
        assert_eq!(
            body["messages"][0]["content"],
            "# Context Block: system_prompt\n\nYou are a test agent."
        );
        assert_eq!(body["tools"].as_array().unwrap().len(), 4);
    }
    // The second request still carries the conversation (the hook saw it and kept it).
    assert_eq!(bodies[1]["messages"][3]["role"], "tool");
    // The saved request is the one that was sent.
    for thought in sb.events("THOUGHT") {
        let id = thought["payload"]["llm_invocation_ref"].as_str().unwrap();
        let saved = crate::support::invocation(&sb.run_dir(), id)["request"].clone();
        assert_eq!(saved["model"], "rewritten-model");
    }
    assert!(
        read(&sb.run_dir().join("engine.log"))
            .contains("pre_llm_req hook succeeded, using modified payload")
    );
    assert!(sb.events("SYSTEM_MESSAGE").is_empty());
}

#[test]
fn pre_llm_req_can_replace_the_request_with_plain_string_messages() {
    let sb = Sandbox::new(&agent_with(
        "lifecycle_hooks:\n  pre_llm_req:\n    command: [\"${AGENT_HOME}/hooks/replace.sh\"]\n",
    ));
    sb.script(
        "agent/hooks/replace.sh",
        r#"cat > "$DELTA_HOOK_IO_PATH/output/final_payload.json" <<'EOF'
{"model": "hooked-model",
 "messages": [
   {"role": "system", "content": "Replaced system prompt."},
   {"role": "user", "content": [{"type": "text", "text": "go"}]},
   {"role": "user", "content": "Added by the hook."}
 ],
 "tools": [],
 "tool_choice": "auto",
 "temperature": 0.25,
 "max_tokens": 77}
EOF"#,
    );
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let body = &bodies(&server)[0];
    assert_eq!(body["model"], "hooked-model");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "Replaced system prompt."},
            {"role": "user", "content": "go"},
            {"role": "user", "content": "Added by the hook."}
        ])
    );
    assert!(body.get("tools").is_none(), "{body}");
    assert_eq!(body["temperature"], 0.25);
    assert_eq!(body["max_tokens"], 77);
    let id = sb.events("THOUGHT")[0]["payload"]["llm_invocation_ref"]
        .as_str()
        .unwrap()
        .to_string();
    let saved = crate::support::invocation(&sb.run_dir(), &id)["request"].clone();
    assert_eq!(saved["model"], "hooked-model");
    assert_eq!(saved["messages"], body["messages"]);
    // The journal is not rewritten: the task is still the user's.
    assert_eq!(sb.events("USER_MESSAGE")[0]["payload"]["content"], "go");
}

#[test]
fn a_failing_post_llm_resp_hook_warns_and_the_run_goes_on() {
    let sb = Sandbox::new(&agent_with(
        "lifecycle_hooks:\n  post_llm_resp:\n    command: [\"${AGENT_HOME}/hooks/fail.sh\"]\n",
    ));
    sb.script(
        "agent/hooks/fail.sh",
        r#"grep -q '"content": "done"' "$DELTA_HOOK_IO_PATH/input/payload.json" || exit 9
echo nope >&2
exit 4"#,
    );
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        system_messages(&sb),
        [(
            "WARN".to_string(),
            "post_llm_resp hook failed: exit code 4: nope".to_string()
        )]
    );
    assert_eq!(audits(&sb)[0].1, "FAILED");
    assert_eq!(sb.metadata()["status"], "COMPLETED");
}

#[test]
fn a_failing_pre_llm_req_hook_warns_and_the_baseline_request_is_used() {
    let sb = Sandbox::new(&agent_with(
        "lifecycle_hooks:\n  pre_llm_req:\n    command: [\"${AGENT_HOME}/hooks/fail.sh\"]\n",
    ));
    // Writes an output, then fails: the output must be ignored.
    sb.script(
        "agent/hooks/fail.sh",
        r#"echo '{"model": "must-not-be-used", "messages": []}' > "$DELTA_HOOK_IO_PATH/output/final_payload.json"
echo boom >&2
exit 3"#,
    );
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let body = &bodies(&server)[0];
    assert_eq!(body["model"], "test-model");
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": "go"})
    );
    assert_eq!(
        system_messages(&sb),
        [(
            "WARN".to_string(),
            "pre_llm_req hook failed: exit code 3: boom".to_string()
        )]
    );
    assert_eq!(
        audits(&sb),
        [(
            "pre_llm_req".to_string(),
            "FAILED".to_string(),
            "io/hooks/001_pre_llm_req/".to_string()
        )]
    );
    let io = hook_io(&sb, "001_pre_llm_req");
    assert_eq!(read(&io.join("execution_meta/exit_code.txt")), "3");
    assert_eq!(read(&io.join("execution_meta/stderr.log")), "boom\n");
    assert_eq!(sb.metadata()["status"], "COMPLETED");
}

#[test]
fn a_pre_llm_req_hook_that_cannot_start_warns_and_the_run_goes_on() {
    let sb = Sandbox::new(&agent_with(
        "lifecycle_hooks:\n  pre_llm_req:\n    command: [\"${AGENT_HOME}/hooks/missing.sh\"]\n",
    ));
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(bodies(&server)[0]["model"], "test-model");
    let messages = system_messages(&sb);
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].0, "WARN");
    assert!(
        messages[0]
            .1
            .starts_with("pre_llm_req hook failed: cannot start "),
        "{messages:?}"
    );
    assert_eq!(audits(&sb)[0].1, "FAILED");
}

#[test]
fn a_final_payload_of_the_wrong_shape_is_ignored_with_a_warning() {
    let sb = Sandbox::new(&agent_with(
        "lifecycle_hooks:\n  pre_llm_req:\n    command: [\"${AGENT_HOME}/hooks/bad.sh\"]\n",
    ));
    sb.script(
        "agent/hooks/bad.sh",
        r#"echo '{"model": "x", "messages": "not a list"}' > "$DELTA_HOOK_IO_PATH/output/final_payload.json""#,
    );
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(bodies(&server)[0]["model"], "test-model");
    let messages = system_messages(&sb);
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0].0, "WARN");
    assert!(
        messages[0]
            .1
            .starts_with("pre_llm_req hook output ignored: "),
        "{messages:?}"
    );
    // The hook itself succeeded.
    assert_eq!(audits(&sb)[0].1, "SUCCESS");
}

#[test]
fn pre_tool_exec_can_skip_a_tool() {
    let sb = Sandbox::new(&agent_with(
        "lifecycle_hooks:\n  pre_tool_exec:\n    command: [\"${AGENT_HOME}/hooks/skip.sh\"]\n  post_tool_exec:\n    command: [\"${AGENT_HOME}/hooks/log.sh\", \"post_tool_exec\"]\n",
    ));
    log_script(&sb);
    sb.script(
        "agent/hooks/skip.sh",
        r#"echo '{"skip": true}' > "$DELTA_HOOK_IO_PATH/output/control.json""#,
    );
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "touch_it", json!({"name": "created.txt"})),
        Reply::text("done"),
    ]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!sb.ws().join("created.txt").exists(), "the tool ran");
    assert_eq!(hook_calls(&sb), Vec::<String>::new(), "post_tool_exec ran");

    let request = &sb.events("ACTION_REQUEST")[0]["payload"];
    assert_eq!(request["resolved_command"], "touch created.txt");
    let result = &sb.events("ACTION_RESULT")[0]["payload"];
    assert_eq!(result["status"], "SUCCESS");
    assert_eq!(
        result["observation_content"],
        "=== STDOUT ===\nTool execution skipped by pre_tool_exec hook\n=== EXIT CODE: 0 ==="
    );
    let exec =
        crate::support::tool_record(&sb.run_dir(), result["execution_ref"].as_str().unwrap());
    assert_eq!(
        exec["stdout"],
        "Tool execution skipped by pre_tool_exec hook"
    );
    assert_eq!(exec["exit_code"], 0);
    assert_eq!(exec["command"], "touch created.txt");
    // The model is told.
    let tool_message = &bodies(&server)[1]["messages"][3];
    assert_eq!(tool_message["role"], "tool");
    assert!(
        tool_message["content"]
            .as_str()
            .unwrap()
            .contains("Tool execution skipped by pre_tool_exec hook")
    );
}

#[test]
fn a_failing_pre_tool_exec_hook_cannot_skip_and_the_tool_runs() {
    let sb = Sandbox::new(&agent_with(
        "lifecycle_hooks:\n  pre_tool_exec:\n    command: [\"${AGENT_HOME}/hooks/skip.sh\"]\n",
    ));
    sb.script(
        "agent/hooks/skip.sh",
        r#"echo '{"skip": true}' > "$DELTA_HOOK_IO_PATH/output/control.json"
exit 1"#,
    );
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "touch_it", json!({"name": "created.txt"})),
        Reply::text("done"),
    ]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(sb.ws().join("created.txt").exists());
    assert_eq!(audits(&sb)[0].1, "FAILED");
    assert_eq!(
        sb.events("ACTION_RESULT")[0]["payload"]["observation_content"],
        "=== EXIT CODE: 0 ===\n(Command executed with no output)"
    );
}

#[test]
fn a_hook_that_times_out_is_killed_and_recorded_as_minus_one() {
    let sb = Sandbox::new(&agent_with(
        "lifecycle_hooks:\n  post_llm_resp:\n    command: [\"${AGENT_HOME}/hooks/slow.sh\"]\n    timeout_ms: 300\n",
    ));
    sb.script("agent/hooks/slow.sh", "sleep 5");
    let server = ScriptedServer::start([Reply::text("done")]);
    let started = Instant::now();
    let out = sb.run(Some(&server), "go", &[]);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the hook was not killed: {:?}",
        started.elapsed()
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let io = hook_io(&sb, "001_post_llm_resp");
    assert_eq!(read(&io.join("execution_meta/exit_code.txt")), "-1");
    assert_eq!(
        audits(&sb),
        [(
            "post_llm_resp".to_string(),
            "FAILED".to_string(),
            "io/hooks/001_post_llm_resp/".to_string()
        )]
    );
    assert!(
        read(&sb.run_dir().join("engine.log"))
            .contains("post_llm_resp hook: timed out after 300 ms")
    );
    assert_eq!(sb.metadata()["status"], "COMPLETED");
}

#[test]
fn hooks_run_in_the_workspace_with_the_run_id_and_io_path() {
    let sb = Sandbox::new(&agent_with(
        "lifecycle_hooks:\n  pre_llm_req:\n    command: [\"${AGENT_HOME}/hooks/env.sh\", \"an arg\"]\n",
    ));
    sb.script(
        "agent/hooks/env.sh",
        r#"echo "arg=$1"
echo "run_id=$DELTA_RUN_ID"
echo "io=$DELTA_HOOK_IO_PATH"
echo "pwd=$(pwd -P)"
echo "home=$AGENT_HOME"
env | grep -c '_API_KEY=' || true"#,
    );
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let io = hook_io(&sb, "001_pre_llm_req");
    let stdout = read(&io.join("execution_meta/stdout.log"));
    let lines: Vec<&str> = stdout.lines().collect();
    let run_id = sb.metadata()["run_id"].as_str().unwrap().to_string();
    let canonical = |p: &Path| p.canonicalize().unwrap().display().to_string();
    assert_eq!(
        lines,
        [
            "arg=an arg".to_string(),
            format!("run_id={run_id}"),
            format!("io={}", canonical(&io)),
            format!("pwd={}", canonical(&sb.ws())),
            format!("home={}", canonical(&sb.agent())),
            "0".to_string(),
        ]
    );
    assert_eq!(
        read(&io.join("execution_meta/command.txt")),
        format!("{}/hooks/env.sh an arg", canonical(&sb.agent()))
    );
    sb.assert_nowhere(KEY);
}

#[test]
fn hooks_yaml_wins_over_lifecycle_hooks_for_the_same_name() {
    let sb = Sandbox::new(&agent_with(
        "lifecycle_hooks:\n  pre_llm_req:\n    command: [\"${AGENT_HOME}/hooks/log.sh\", \"pre_llm_req from agent.yaml\"]\n  on_run_end:\n    command: [\"${AGENT_HOME}/hooks/log.sh\", \"on_run_end from agent.yaml\"]\n",
    ));
    sb.file(
        "agent/hooks.yaml",
        "pre_llm_req:\n  command: [\"${AGENT_HOME}/hooks/log.sh\", \"pre_llm_req from hooks.yaml\"]\n",
    );
    log_script(&sb);
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "warning: hook pre_llm_req is defined in both hooks.yaml and lifecycle_hooks; using hooks.yaml"
        ),
        "{}",
        out.stderr
    );
    assert_eq!(
        hook_calls(&sb),
        ["pre_llm_req from hooks.yaml", "on_run_end from agent.yaml"]
    );
}

#[test]
fn an_unknown_hook_name_is_reported_with_its_location() {
    let sb = Sandbox::new(&agent_with(""));
    sb.file("agent/hooks.yaml", "pre_llm_request:\n  command: [x]\n");
    let out = sb.run(None, "go", &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let stderr = sb.scrub(&out.stderr);
    // Located in hooks.yaml (the location is that of the hook's definition, under its name).
    assert!(
        stderr.contains(
            "[SANDBOX]/agent/hooks.yaml:2:3: pre_llm_request: unknown hook 'pre_llm_request'"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: hooks are pre_llm_req, post_llm_resp"),
        "{stderr}"
    );
    assert!(!sb.ws().exists());
}

#[test]
fn an_unparseable_final_payload_is_ignored_and_the_console_says_so() {
    let sb = Sandbox::new(&agent_with(
        "lifecycle_hooks:\n  pre_llm_req:\n    command: [\"${AGENT_HOME}/hooks/garbled.sh\"]\n",
    ));
    sb.script(
        "agent/hooks/garbled.sh",
        r#"echo '{"model": "x",' > "$DELTA_HOOK_IO_PATH/output/final_payload.json""#,
    );
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(bodies(&server)[0]["model"], "test-model");
    let stderr = sb.scrub(&out.stderr);
    assert!(
        stderr.contains("hook pre_llm_req succeeded with warnings: ignored [SANDBOX]/ws/.delta/"),
        "{stderr}"
    );
    assert!(
        stderr.contains("/io/hooks/001_pre_llm_req/output/final_payload.json: not valid JSON"),
        "{stderr}"
    );
    assert_eq!(audits(&sb)[0].1, "SUCCESS");
}

#[test]
fn a_relative_hook_command_is_found_in_the_workspace() {
    let sb = Sandbox::new(&agent_with(
        "lifecycle_hooks:\n  on_run_end:\n    command: [\"./ws-hook.sh\", \"from the workspace\"]\n",
    ));
    sb.script("ws/ws-hook.sh", r#"echo "$1" > hook-ran.txt"#);
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(read(&sb.ws().join("hook-ran.txt")), "from the workspace\n");
    assert_eq!(audits(&sb)[0].1, "SUCCESS");
}

/// The engine does not run on_run_end for an interrupted run (only COMPLETED, FAILED and
/// WAITING_FOR_INPUT); the hooks before the interruption ran, post_tool_exec did not.
#[test]
fn an_interrupted_run_stops_without_post_tool_exec_or_on_run_end() {
    let sb = Sandbox::new(&format!(
        "name: test-agent\nllm:\n  model: test-model\ntools:\n  - name: slow\n    shell: \"touch started && sleep 5\"\nlifecycle_hooks:\n{}",
        every_hook("  ")
    ));
    log_script(&sb);
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "slow", json!({})),
        Reply::text("done"),
    ]);
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let started = Instant::now();
    let child = cmd.spawn().unwrap();
    while !sb.ws().join("started").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the tool never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        hook_calls(&sb),
        ["pre_llm_req", "post_llm_resp", "pre_tool_exec"]
    );
    assert_eq!(sb.metadata()["status"], "INTERRUPTED");
}

#[test]
fn on_run_end_runs_when_the_iteration_limit_stops_the_run() {
    let sb = Sandbox::new(&format!(
        "name: test-agent\nllm:\n  model: test-model\n  temperature: 0.3\n  max_tokens: 50\n{TOOLS}max_iterations: 1\nlifecycle_hooks:\n{}",
        every_hook("  ")
    ));
    log_script(&sb);
    let server = ScriptedServer::start([Reply::tool_call("c1", "echo", json!({"message": "hi"}))]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        hook_calls(&sb),
        [
            "pre_llm_req",
            "post_llm_resp",
            "pre_tool_exec",
            "post_tool_exec",
            "on_run_end"
        ]
    );
    let end = read_json(&hook_io(&sb, "005_on_run_end").join("input/payload.json"));
    assert_eq!(
        end,
        json!({"status": "COMPLETED", "final_response": "", "reason": "max_iterations", "iterations_completed": 1})
    );
    // The optional settings are in the proposed request when the agent sets them.
    let proposed = read_json(&hook_io(&sb, "001_pre_llm_req").join("input/proposed_payload.json"));
    assert_eq!(proposed["temperature"], 0.3);
    assert_eq!(proposed["max_tokens"], 50);
}

/// A final_payload may carry a conversation of its own, tool calls included: the request sent holds
/// the assistant's calls (name, arguments as a JSON string) followed by one `tool` message per call.
#[test]
fn pre_llm_req_final_payload_with_tool_calls_and_results_is_sent_in_the_same_shape() {
    let sb = Sandbox::new(&agent_with(
        "lifecycle_hooks:\n  pre_llm_req:\n    command: [\"${AGENT_HOME}/hooks/replace.sh\"]\n",
    ));
    sb.script(
        "agent/hooks/replace.sh",
        r#"cat > "$DELTA_HOOK_IO_PATH/output/final_payload.json" <<'EOF'
{"model": "test-model",
 "messages": [
   {"role": "system", "content": "Replaced system prompt."},
   {"role": "user", "content": "go"},
   {"role": "assistant", "content": null, "tool_calls": [
     {"id": "h1", "type": "function", "function": {"name": "echo", "arguments": "{\"message\": \"one\"}"}},
     {"id": "h2", "type": "function", "function": {"name": "touch_it", "arguments": "{\"name\": \"x.txt\"}"}}
   ]},
   {"role": "tool", "tool_call_id": "h1", "content": "one"},
   {"role": "tool", "tool_call_id": "h2", "content": "(no output)"},
   {"role": "user", "content": "Now finish."}
 ]}
EOF"#,
    );
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        system_messages(&sb)
            .iter()
            .all(|(level, _)| level != "WARN"),
        "{:?}",
        system_messages(&sb)
    );
    let body = &bodies(&server)[0];
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "tool", "user"],
        "{body}"
    );
    let assistant = &messages[2];
    assert!(
        assistant["content"].as_str().unwrap_or("").is_empty(),
        "{assistant}"
    );
    let calls = assistant["tool_calls"].as_array().unwrap();
    let expected = [
        ("h1", "echo", json!({"message": "one"})),
        ("h2", "touch_it", json!({"name": "x.txt"})),
    ];
    assert_eq!(calls.len(), expected.len(), "{assistant}");
    for (call, (id, name, args)) in calls.iter().zip(expected) {
        assert_eq!(call["id"], id, "{call}");
        assert_eq!(call["type"], "function", "{call}");
        assert_eq!(call["function"]["name"], name, "{call}");
        let arguments = call["function"]["arguments"]
            .as_str()
            .unwrap_or_else(|| panic!("arguments are not a string: {call}"));
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(arguments).unwrap(),
            args
        );
    }
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "h1", "content": "one"})
    );
    assert_eq!(
        messages[4],
        json!({"role": "tool", "tool_call_id": "h2", "content": "(no output)"})
    );
    assert_eq!(
        messages[5],
        json!({"role": "user", "content": "Now finish."})
    );
    // The hook's conversation is sent, not journaled: no tool ran.
    assert!(sb.events("ACTION_REQUEST").is_empty());
    assert!(!sb.ws().join("x.txt").exists());
}
