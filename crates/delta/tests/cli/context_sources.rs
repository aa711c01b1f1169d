//! context.yaml: file, computed_file and journal sources, and the default recipe.

use std::path::Path;

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer};

use crate::support::{Sandbox, agent_yaml, bodies};

const ECHO: &str = "  - name: echo\n    exec: \"echo ${message}\"\n";

fn canonical(p: &Path) -> String {
    p.canonicalize().unwrap().display().to_string()
}

fn system(id: &str, content: &str) -> Value {
    json!({"role": "system", "content": format!("# Context Block: {id}\n\n{content}")})
}

fn user(content: &str) -> Value {
    json!({"role": "user", "content": content})
}

/// The messages of request `n`.
fn messages(server: &ScriptedServer, n: usize) -> Vec<Value> {
    bodies(server)[n]["messages"].as_array().unwrap().clone()
}

/// A scripted conversation: `n` echo calls (`c1`…), then "done".
fn echo_calls(n: usize) -> ScriptedServer {
    let mut script: Vec<Reply> = (1..=n)
        .map(|i| {
            Reply::tool_call(
                &format!("c{i}"),
                "echo",
                json!({"message": format!("m{i}")}),
            )
        })
        .collect();
    script.push(Reply::text("done"));
    ScriptedServer::start(script)
}

/// The assistant's tool-call ids and the tool results' ids, in order, as `a:<id>` / `t:<id>`.
fn turns(messages: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for m in messages {
        match m["role"].as_str().unwrap() {
            "assistant" => {
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    out.push(format!("a:{}", c["id"].as_str().unwrap()));
                }
            }
            "tool" => out.push(format!("t:{}", m["tool_call_id"].as_str().unwrap())),
            "user" => out.push(format!("u:{}", m["content"].as_str().unwrap())),
            _ => {}
        }
    }
    out
}

#[test]
fn file_sources_substitute_agent_home_and_cwd() {
    let sb = Sandbox::new(&agent_yaml(ECHO));
    sb.file("agent/persona.md", "I am the persona.");
    sb.file("ws/notes.md", "Notes of this workspace.");
    sb.file(
        "agent/context.yaml",
        "sources:\n  - type: file\n    id: persona\n    path: \"${AGENT_HOME}/persona.md\"\n  - type: file\n    path: \"${CWD}/notes.md\"\n  - type: journal\n    id: history\n",
    );
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "hi", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The system prompt is not used: context.yaml does not list it. A source without id is named
    // after its type.
    assert_eq!(
        messages(&server, 0),
        [
            system("persona", "I am the persona."),
            system("file", "Notes of this workspace."),
            user("hi"),
        ]
    );
}

#[test]
fn file_sources_are_read_again_on_every_iteration() {
    let sb = Sandbox::new(&agent_yaml(
        "  - name: note\n    exec: \"tee notes.md\"\n    stdin: text\n",
    ));
    sb.file("ws/notes.md", "first");
    sb.file(
        "agent/context.yaml",
        "sources:\n  - type: file\n    id: notes\n    path: \"${CWD}/notes.md\"\n  - type: journal\n",
    );
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "note", json!({"text": "second"})),
        Reply::text("done"),
    ]);
    let out = sb.run(Some(&server), "hi", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(messages(&server, 0)[0], system("notes", "first"));
    assert_eq!(messages(&server, 1)[0], system("notes", "second"));
}

#[test]
fn computed_file_runs_its_generator_every_iteration_with_the_run_variables() {
    let sb = Sandbox::new(&agent_yaml(ECHO));
    sb.script(
        "agent/gen.sh",
        r#"echo x >> "$DELTA_CWD/gen-count"
n=$(wc -l < "$DELTA_CWD/gen-count" | tr -d ' ')
{
  echo "call=$n arg=$2"
  echo "run=$DELTA_RUN_ID"
  echo "home=$DELTA_AGENT_HOME"
  echo "cwd=$DELTA_CWD"
  echo "pwd=$(pwd -P)"
} > "$1""#,
    );
    sb.file(
        "agent/context.yaml",
        "sources:\n  - type: computed_file\n    id: live\n    generator:\n      command: [\"${AGENT_HOME}/gen.sh\", \"${CWD}/generated.md\", \"two words\"]\n      timeout_ms: 5000\n    output_path: \"${CWD}/generated.md\"\n  - type: journal\n",
    );
    let server = echo_calls(1);
    let out = sb.run(Some(&server), "hi", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let run_id = sb.metadata()["run_id"].as_str().unwrap().to_string();
    let ws = canonical(&sb.ws());
    let block = |n: usize| {
        format!(
            "call={n} arg=two words\nrun={run_id}\nhome={}\ncwd={ws}\npwd={ws}\n",
            canonical(&sb.agent())
        )
    };
    assert_eq!(messages(&server, 0)[0], system("live", &block(1)));
    assert_eq!(messages(&server, 1)[0], system("live", &block(2)));
    assert_eq!(messages(&server, 1)[1], user("hi"));
}

#[test]
fn a_failing_generator_is_skipped_or_fails_the_run_per_on_missing() {
    for (on_missing, code) in [("skip", 0), ("error", 1)] {
        let sb = Sandbox::new(&agent_yaml(ECHO));
        sb.script("agent/gen.sh", "echo 'no data today' >&2\nexit 3");
        sb.file(
            "agent/context.yaml",
            &format!(
                "sources:\n  - type: computed_file\n    id: live\n    generator:\n      command: [\"${{AGENT_HOME}}/gen.sh\"]\n    output_path: \"${{CWD}}/out.md\"\n    on_missing: {on_missing}\n  - type: journal\n"
            ),
        );
        let server = ScriptedServer::start([Reply::text("done")]);
        let out = sb.run(Some(&server), "hi", &[]);
        assert_eq!(out.code, code, "{on_missing}: {}", out.stderr);
        let expected = "Generator failed for source 'live': exit code 3: no data today";
        if code == 0 {
            assert_eq!(messages(&server, 0), [user("hi")]);
            let log = std::fs::read_to_string(sb.run_dir().join("engine.log")).unwrap();
            assert!(
                log.contains(&format!("context source 'live' skipped: {expected}")),
                "{log}"
            );
        } else {
            assert_eq!(server.request_count(), 0);
            assert!(out.stderr.contains(expected), "{}", out.stderr);
            assert_eq!(sb.metadata()["status"], "FAILED");
        }
    }
}

#[test]
fn a_generator_that_writes_nothing_names_the_missing_output() {
    let sb = Sandbox::new(&agent_yaml(ECHO));
    sb.script("agent/gen.sh", "exit 0");
    sb.file(
        "agent/context.yaml",
        "sources:\n  - type: computed_file\n    id: live\n    generator:\n      command: [\"${AGENT_HOME}/gen.sh\"]\n    output_path: \"${CWD}/never.md\"\n  - type: journal\n",
    );
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "hi", &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let expected = format!(
        "Generator output file not found: {}/never.md (source: live)",
        canonical(&sb.ws())
    );
    assert!(out.stderr.contains(&expected), "{}", out.stderr);
}

#[test]
fn a_journal_window_keeps_the_task_and_the_last_iterations() {
    let sb = Sandbox::new(&agent_yaml(ECHO));
    sb.file(
        "agent/context.yaml",
        "sources:\n  - type: file\n    id: system_prompt\n    path: \"${AGENT_HOME}/system_prompt.md\"\n  - type: journal\n    id: recent\n    max_iterations: 1\n",
    );
    let server = echo_calls(3);
    let out = sb.run(Some(&server), "the task", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(server.request_count(), 4);
    let prompt = system("system_prompt", "You are a test agent.");
    // Request 2: one iteration so far, nothing to drop.
    let m = messages(&server, 1);
    assert_eq!(m[0], prompt);
    assert_eq!(turns(&m), ["u:the task", "a:c1", "t:c1"]);
    // Requests 3 and 4: only the last iteration, and still the task.
    let m = messages(&server, 2);
    assert_eq!(m[0], prompt);
    assert_eq!(turns(&m), ["u:the task", "a:c2", "t:c2"]);
    let m = messages(&server, 3);
    assert_eq!(turns(&m), ["u:the task", "a:c3", "t:c3"]);
    assert_eq!(m.len(), 4, "{m:?}");
    assert!(
        m[3]["content"]
            .as_str()
            .unwrap()
            .contains("=== STDOUT ===\nm3\n"),
        "{m:?}"
    );
    // The journal itself keeps everything.
    assert_eq!(sb.events("THOUGHT").len(), 4);
}

#[test]
fn a_wider_journal_window_keeps_more_iterations() {
    let sb = Sandbox::new(&agent_yaml(ECHO));
    sb.file(
        "agent/context.yaml",
        "sources:\n  - type: journal\n    max_iterations: 2\n",
    );
    let server = echo_calls(3);
    let out = sb.run(Some(&server), "the task", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        turns(&messages(&server, 3)),
        ["u:the task", "a:c2", "t:c2", "a:c3", "t:c3"]
    );
    // The journal source is not wrapped in a context block.
    assert_eq!(messages(&server, 0), [user("the task")]);
}

#[test]
fn a_missing_file_is_skipped_or_fails_the_run_per_on_missing() {
    // skip: left out, noted in engine.log, the run completes.
    let sb = Sandbox::new(&agent_yaml(ECHO));
    sb.file(
        "agent/context.yaml",
        "sources:\n  - type: file\n    id: guide\n    path: \"${CWD}/missing.md\"\n    on_missing: skip\n  - type: journal\n",
    );
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "hi", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(messages(&server, 0), [user("hi")]);
    let log = std::fs::read_to_string(sb.run_dir().join("engine.log")).unwrap();
    assert!(log.contains("context source 'guide' skipped"), "{log}");
    assert!(sb.events("SYSTEM_MESSAGE").is_empty());

    // error (the default): the run fails before asking the model, naming the file.
    let sb = Sandbox::new(&agent_yaml(ECHO));
    sb.file(
        "agent/context.yaml",
        "sources:\n  - type: file\n    id: guide\n    path: \"${CWD}/missing.md\"\n  - type: journal\n",
    );
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "hi", &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(server.request_count(), 0);
    let message = format!(
        "File not found: {}/missing.md (source: guide)",
        canonical(&sb.ws())
    );
    assert!(
        out.stderr
            .contains(&format!("error: the run failed: {message}")),
        "{}",
        out.stderr
    );
    assert_eq!(sb.metadata()["status"], "FAILED");
    let system = sb.events("SYSTEM_MESSAGE");
    assert_eq!(
        system[0]["payload"],
        json!({"level": "ERROR", "content": format!("Fatal error: {message}")})
    );
    assert_eq!(sb.events("RUN_END")[0]["payload"]["status"], "FAILED");
}

#[test]
fn without_context_yaml_the_prompt_and_the_workspace_guide_are_used() {
    let sb = Sandbox::new(&agent_yaml(ECHO));
    sb.file("ws/DELTA.md", "Workspace rules: be brief.");
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "hi", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        messages(&server, 0),
        [
            system("system_prompt", "You are a test agent."),
            system("workspace_guide", "Workspace rules: be brief."),
            user("hi"),
        ]
    );

    // Without DELTA.md, only the prompt.
    let sb = Sandbox::new(&agent_yaml(ECHO));
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "hi", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        messages(&server, 0),
        [system("system_prompt", "You are a test agent."), user("hi")]
    );
}

#[test]
fn an_agent_with_only_system_prompt_txt_works() {
    let sb = Sandbox::new(&agent_yaml(ECHO));
    std::fs::remove_file(sb.path("agent/system_prompt.md")).unwrap();
    sb.file("agent/system_prompt.txt", "Plain text instructions.");
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "hi", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        messages(&server, 0),
        [
            system("system_prompt", "Plain text instructions."),
            user("hi")
        ]
    );
}

#[test]
fn an_invalid_context_yaml_is_reported_with_its_location() {
    let sb = Sandbox::new(&agent_yaml(ECHO));
    sb.file(
        "agent/context.yaml",
        "sources:\n  - type: journal\n  - type: fiel\n    path: x\n  - type: computed_file\n    output_path: y\n",
    );
    let out = sb.run(None, "hi", &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let stderr = sb.scrub(&out.stderr);
    assert!(
        stderr
            .contains("[SANDBOX]/agent/context.yaml:3:5: sources[1]: unknown source type \"fiel\""),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: use file, computed_file or journal"),
        "{stderr}"
    );
    assert!(
        stderr.contains("context.yaml:5:5: sources[2]: a computed_file source needs generator"),
        "{stderr}"
    );
    assert!(!sb.ws().exists());
}

#[test]
fn a_generator_that_times_out_fails_the_run_quickly() {
    let sb = Sandbox::new(&agent_yaml(ECHO));
    sb.script("agent/gen.sh", "sleep 5");
    sb.file(
        "agent/context.yaml",
        "sources:\n  - type: computed_file\n    id: slow\n    generator:\n      command: [\"${AGENT_HOME}/gen.sh\"]\n      timeout_ms: 300\n    output_path: \"${CWD}/out.md\"\n  - type: journal\n",
    );
    let server = ScriptedServer::start([Reply::text("done")]);
    let started = std::time::Instant::now();
    let out = sb.run(Some(&server), "hi", &[]);
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("Generator failed for source 'slow': timed out after 300 ms"),
        "{}",
        out.stderr
    );
    assert_eq!(server.request_count(), 0);
}

/// The generator runs in the workspace, so a relative `output_path` is read from there too.
#[test]
fn a_relative_output_path_is_read_from_the_workspace_where_the_generator_wrote_it() {
    let sb = Sandbox::new(&agent_yaml(ECHO));
    sb.file(
        "agent/context.yaml",
        "sources:\n  - type: computed_file\n    id: live\n    generator:\n      command: [sh, -c, \"echo generated > out.md\"]\n    output_path: out.md\n  - type: journal\n",
    );
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "hi", &[]);
    // The generator did its part.
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("out.md")).unwrap(),
        "generated\n"
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(messages(&server, 0)[0], system("live", "generated\n"));
}

/// A relative `path` is relative to the workspace (as `${CWD}` is), never to delta's own current
/// folder (here the sandbox, which holds a `notes.md` of its own).
#[test]
fn a_relative_file_source_is_read_from_the_workspace_not_the_current_folder() {
    let sb = Sandbox::new(&agent_yaml(ECHO));
    sb.file("ws/notes.md", "Notes of the workspace.");
    sb.file("notes.md", "Notes of delta's current folder.");
    sb.file(
        "agent/context.yaml",
        "sources:\n  - type: file\n    id: notes\n    path: notes.md\n  - type: journal\n",
    );
    let server = ScriptedServer::start([Reply::text("done")]);
    let mut cmd = sb.delta(Some(&server));
    cmd.current_dir(sb.root.path())
        .args(["run", "--agent", "agent", "-w", "ws", "-m", "hi"]);
    let out = crate::support::output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        messages(&server, 0),
        [system("notes", "Notes of the workspace."), user("hi")]
    );
}
