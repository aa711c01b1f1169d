//! `imports:`: modules of tools, diamonds, overrides, cycles and paths that leave the agent.

use serde_json::json;
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use crate::support::{Output, Sandbox, bodies};

fn agent(imports: &str, tools: &str) -> String {
    format!("name: test-agent\nllm:\n  model: test-model\nimports: {imports}\ntools:{tools}")
}

/// The tool names offered in request `n`.
fn offered(server: &ScriptedServer, n: usize) -> Vec<String> {
    bodies(server)[n]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn stdout_of(sb: &Sandbox, call: &str) -> String {
    crate::support::tool_record(&sb.run_dir(), call)["stdout"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Runs an agent that must not load, and checks nothing was started.
fn refused(sb: &Sandbox) -> String {
    let out: Output = sb.run(None, "go", &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .starts_with("error: invalid agent configuration:"),
        "{}",
        out.stderr
    );
    assert!(!sb.ws().exists(), "a refused agent created its workspace");
    sb.scrub(&out.stderr)
}

#[test]
fn a_diamond_is_loaded_once_and_runs() {
    let sb = Sandbox::new(&agent(
        "[modules/left.yaml, modules/right.yaml]",
        "\n  - name: own\n    exec: \"echo own\"\n",
    ));
    sb.file(
        "agent/modules/left.yaml",
        "imports: [base.yaml]\ntools:\n  - name: left\n    exec: \"echo left ${x}\"\n",
    );
    sb.file(
        "agent/modules/right.yaml",
        "name: ignored\nllm: {model: ignored}\nimports: [base.yaml]\ntools:\n  - name: right\n    exec: \"echo right\"\n",
    );
    sb.file(
        "agent/modules/base.yaml",
        "tools:\n  - name: base\n    exec: \"echo base\"\n",
    );
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new("c1", "base", json!({})),
            ToolCallSpec::new("c2", "left", json!({"x": "1"})),
            ToolCallSpec::new("c3", "right", json!({})),
            ToolCallSpec::new("c4", "own", json!({})),
        ]),
        Reply::text("done"),
    ]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Imports first, depth-first, each file once; then the agent's own tools.
    assert_eq!(
        offered(&server, 0),
        ["base", "left", "right", "own", "ask_human"]
    );
    assert_eq!(stdout_of(&sb, "c1"), "base\n");
    assert_eq!(stdout_of(&sb, "c2"), "left 1\n");
    assert_eq!(stdout_of(&sb, "c3"), "right\n");
    assert_eq!(stdout_of(&sb, "c4"), "own\n");
    // A module's other keys are ignored: the agent's model is used.
    assert_eq!(bodies(&server)[0]["model"], "test-model");
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
}

#[test]
fn a_local_tool_overrides_an_imported_one() {
    let sb = Sandbox::new(&agent(
        "[modules/base.yaml]",
        "\n  - name: greet\n    description: The agent's own greeting.\n    exec: \"echo local ${who}\"\n  - name: extra\n    exec: \"echo extra\"\n",
    ));
    sb.file(
        "agent/modules/base.yaml",
        "tools:\n  - name: greet\n    description: The module's greeting.\n    exec: \"echo imported\"\n  - name: other\n    exec: \"echo other\"\n",
    );
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "greet", json!({"who": "you"})),
        Reply::text("done"),
    ]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The override keeps the imported tool's place; the model sees the local definition only.
    assert_eq!(
        offered(&server, 0),
        ["greet", "other", "extra", "ask_human"]
    );
    let greet = &bodies(&server)[0]["tools"][0]["function"];
    assert_eq!(greet["description"], "The agent's own greeting.");
    assert_eq!(greet["parameters"]["required"], json!(["who"]));
    assert_eq!(
        sb.events("ACTION_REQUEST")[0]["payload"]["resolved_command"],
        "echo local you"
    );
    assert_eq!(stdout_of(&sb, "c1"), "local you\n");
}

#[test]
fn a_later_import_overrides_an_earlier_one() {
    let sb = Sandbox::new(&agent("[first.yaml, second.yaml]", " []\n"));
    sb.file(
        "agent/first.yaml",
        "tools:\n  - name: which\n    exec: \"echo first\"\n",
    );
    sb.file(
        "agent/second.yaml",
        "tools:\n  - name: which\n    exec: \"echo second\"\n",
    );
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "which", json!({})),
        Reply::text("done"),
    ]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(offered(&server, 0), ["which", "ask_human"]);
    assert_eq!(stdout_of(&sb, "c1"), "second\n");
}

#[test]
fn a_cycle_is_reported_with_its_chain() {
    let sb = Sandbox::new(&agent("[modules/a.yaml]", " []\n"));
    sb.file(
        "agent/modules/a.yaml",
        "imports: [b.yaml]\ntools:\n  - name: a\n    exec: \"echo a\"\n",
    );
    sb.file(
        "agent/modules/b.yaml",
        "tools:\n  - name: b\n    exec: \"echo b\"\nimports:\n  - a.yaml\n",
    );
    let stderr = refused(&sb);
    insta::assert_snapshot!(stderr);
    assert!(
        stderr.contains(
            "Circular import detected: modules/a.yaml -> modules/b.yaml -> modules/a.yaml"
        ),
        "{stderr}"
    );
}

#[test]
fn a_module_importing_the_agent_is_a_cycle() {
    let sb = Sandbox::new(&agent("[modules/a.yaml]", " []\n"));
    sb.file("agent/modules/a.yaml", "imports: [../agent.yaml]\n");
    // `..` is refused before the cycle is even seen.
    assert!(refused(&sb).contains("Invalid import path: ../agent.yaml"));

    let sb = Sandbox::new(&agent("[a.yaml]", " []\n"));
    sb.file("agent/a.yaml", "imports: [agent.yaml]\n");
    let stderr = refused(&sb);
    assert!(
        stderr.contains("Circular import detected: agent.yaml -> a.yaml -> agent.yaml"),
        "{stderr}"
    );

    let sb = Sandbox::new(&agent("[self.yaml]", " []\n"));
    sb.file("agent/self.yaml", "imports: [self.yaml]\n");
    let stderr = refused(&sb);
    assert!(
        stderr.contains("Circular import detected: self.yaml -> self.yaml"),
        "{stderr}"
    );
}

#[test]
fn an_import_escaping_the_agent_folder_is_refused() {
    let sb = Sandbox::new(&agent(
        "[../outside.yaml, /etc/hosts, modules/../../outside.yaml]",
        " []\n",
    ));
    sb.file(
        "outside.yaml",
        "tools:\n  - name: stolen\n    exec: \"echo stolen\"\n",
    );
    let stderr = refused(&sb);
    insta::assert_snapshot!(stderr);
    for path in [
        "../outside.yaml",
        "/etc/hosts",
        "modules/../../outside.yaml",
    ] {
        assert!(
            stderr.contains(&format!(
                "imports: Invalid import path: {path} (imports must stay inside the agent folder)"
            )),
            "{path}: {stderr}"
        );
    }
}

#[test]
fn a_symlink_leading_out_of_the_agent_folder_is_refused() {
    let sb = Sandbox::new(&agent("[modules/link.yaml]", " []\n"));
    sb.file(
        "outside.yaml",
        "tools:\n  - name: stolen\n    exec: \"echo stolen\"\n",
    );
    std::fs::create_dir_all(sb.path("agent/modules")).unwrap();
    std::os::unix::fs::symlink(sb.path("outside.yaml"), sb.path("agent/modules/link.yaml"))
        .unwrap();
    let stderr = refused(&sb);
    assert!(
        stderr.contains(
            "[SANDBOX]/agent/agent.yaml:4:11: imports: Invalid import path: modules/link.yaml resolves outside the agent folder"
        ),
        "{stderr}"
    );
}

#[test]
fn a_missing_import_and_a_bad_tool_in_a_module_are_located() {
    let sb = Sandbox::new(&agent("[modules/net.yaml, nope.yaml]", " []\n"));
    sb.file(
        "agent/modules/net.yaml",
        "tools:\n  - name: fine\n    exec: \"echo ok\"\n  - name: piped\n    exec: \"curl ${url} | jq .\"\n",
    );
    let stderr = refused(&sb);
    assert!(
        stderr.contains("[SANDBOX]/agent/modules/net.yaml:4:5: tools[1]: tool 'piped': Shell metacharacter '|' (pipe) not allowed in exec: mode"),
        "{stderr}"
    );
    assert!(
        stderr
            .contains("[SANDBOX]/agent/agent.yaml:4:29: imports: Import file not found: nope.yaml"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: resolved to [SANDBOX]/agent/nope.yaml"),
        "{stderr}"
    );
}
