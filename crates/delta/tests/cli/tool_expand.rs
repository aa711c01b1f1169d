//! `delta tool:expand`: the expanded tools as YAML on stdout, a summary on stderr.

use serde_json::{Value, json};

use crate::support::{Output, Sandbox, output};

/// Every syntax: exec (with declared parameters), shell (with `:raw`), legacy command (option,
/// argument, stdin) and an exec tool with `stdin:`.
const AGENT: &str = r#"name: expand-me
llm:
  model: test-model
timeout_seconds: 20
tools:
  - name: copy
    description: Copy a file into backup/.
    exec: "cp --preserve=mode ${src} backup/${dst}.bak"
    parameters:
      - name: src
        description: The file to copy.
    timeout_seconds: 5
  - name: count
    shell: "grep ${flags:raw} -c ${pattern} ${file} | head -n 1 # ${AGENT_HOME}"
  - name: post
    description: POST JSON.
    command: [curl, -sS, -X, POST]
    parameters:
      - name: data
        type: string
        inject_as: option
        option_name: -d
        description: The body.
      - name: url
        inject_as: argument
      - name: body
        inject_as: stdin
  - name: save
    exec: "tee ${AGENT_HOME}/out/${filename}"
    stdin: content
"#;

fn expand(sb: &Sandbox, path: &str) -> Output {
    let mut cmd = sb.delta(None);
    cmd.args(["tool:expand", path]);
    output(cmd)
}

fn parse(yaml: &str) -> Value {
    serde_saphyr::from_str(yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

#[test]
fn an_agent_folder_is_expanded_to_yaml() {
    let sb = Sandbox::new(AGENT);
    let out = expand(&sb, "agent");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        "# 4 tools (2 exec:, 1 shell:, 1 command:) from agent\n"
    );
    insta::assert_snapshot!(out.stdout);

    let doc = parse(&out.stdout);
    let tools = doc["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 4);
    // exec: values stay where their placeholders are; the declared description is merged.
    assert_eq!(
        tools[0]["command"],
        json!(["cp", "--preserve=mode", "${src}", "backup/${dst}.bak"])
    );
    assert_eq!(
        tools[0]["parameters"][0],
        json!({"name": "src", "type": "string", "inject_as": "argument", "description": "The file to copy."})
    );
    assert_eq!(tools[0]["timeout_seconds"], 5.0);
    assert_eq!(tools[0]["__meta"]["syntax"], "exec");
    // shell: placeholders become positionals, quoted except :raw; ${AGENT_HOME} is left to the shell.
    assert_eq!(
        tools[1]["command"],
        json!([
            "sh",
            "-c",
            "grep $1 -c \"$2\" \"$3\" | head -n 1 # ${AGENT_HOME}",
            "--",
            "${flags}",
            "${pattern}",
            "${file}"
        ])
    );
    assert_eq!(tools[1]["timeout_seconds"], 20.0);
    assert!(tools[1].get("description").is_none());
    // Legacy: the option's flag, the argument, and stdin (not in the argument vector).
    assert_eq!(
        tools[2]["command"],
        json!(["curl", "-sS", "-X", "POST", "-d", "${data}", "${url}"])
    );
    let injects: Vec<&str> = tools[2]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["inject_as"].as_str().unwrap())
        .collect();
    assert_eq!(injects, ["option", "argument", "stdin"]);
    assert_eq!(tools[2]["parameters"][0]["option_name"], "-d");
    assert_eq!(tools[2]["__meta"], json!({"syntax": "command"}));
    // stdin: takes the parameter off the command line; ${AGENT_HOME} is substituted when run.
    assert_eq!(
        tools[3]["command"],
        json!(["tee", "${AGENT_HOME}/out/${filename}"])
    );
    assert_eq!(
        tools[3]["parameters"][1],
        json!({"name": "content", "type": "string", "inject_as": "stdin"})
    );
}

/// Given the agent.yaml file instead of its folder, tool:expand shows the agent's tools with the
/// agent's own settings (its `timeout_seconds: 20`, not the 60 s default).
#[test]
fn the_agent_yaml_file_gives_the_same_expansion_as_its_folder() {
    let sb = Sandbox::new(AGENT);
    let from_dir = expand(&sb, "agent");
    let from_file = expand(&sb, "agent/agent.yaml");
    assert_eq!(from_file.code, 0, "{}", from_file.stderr);
    let dir = parse(&from_dir.stdout);
    let file = parse(&from_file.stdout);
    for (a, b) in dir["tools"]
        .as_array()
        .unwrap()
        .iter()
        .zip(file["tools"].as_array().unwrap())
    {
        assert_eq!(a["command"], b["command"]);
        assert_eq!(a["parameters"], b["parameters"]);
    }
    assert_eq!(dir["tools"][1]["timeout_seconds"], 20.0);
    assert_eq!(from_file.stdout, from_dir.stdout);
}

#[test]
fn a_module_file_with_imports_is_expanded() {
    let sb = Sandbox::new("name: a\nllm: {}\ntools: []\n");
    sb.file(
        "agent/modules/net.yaml",
        "imports: [common/base.yaml]\ntools:\n  - name: fetch\n    exec: \"curl -sS ${url}\"\n  - name: ping\n    exec: \"ping -c 1 ${host}\"\n",
    );
    sb.file(
        "agent/modules/common/base.yaml",
        "tools:\n  - name: ping\n    exec: \"echo overridden\"\n  - name: now\n    exec: date\n",
    );
    let out = expand(&sb, "agent/modules/net.yaml");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        "# 3 tools (3 exec:, 0 shell:, 0 command:) from agent/modules/net.yaml\n"
    );
    let doc = parse(&out.stdout);
    let summary: Vec<(String, Value)> = doc["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["command"].clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("ping".to_string(), json!(["ping", "-c", "1", "${host}"])),
            ("now".to_string(), json!(["date"])),
            ("fetch".to_string(), json!(["curl", "-sS", "${url}"])),
        ]
    );
    // Imports of a module given directly stay inside its folder.
    sb.file("agent/modules/escape.yaml", "imports: [../tools.yaml]\n");
    sb.file("agent/tools.yaml", "tools: []\n");
    let out = expand(&sb, "agent/modules/escape.yaml");
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("Invalid import path: ../tools.yaml"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_missing_path_is_an_error_with_a_hint() {
    let sb = Sandbox::new("name: a\nllm: {}\ntools: []\n");
    let out = expand(&sb, "nowhere/agent.yaml");
    assert_eq!(out.code, 1);
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        "error: not found: nowhere/agent.yaml\n  hint: give an agent folder or a YAML file with tools:\n"
    );
}

#[test]
fn an_invalid_tool_is_reported_with_its_location() {
    let sb = Sandbox::new(
        "name: a\nllm: {}\ntools:\n  - name: ok\n    exec: \"ls ${dir}\"\n  - name: piped\n    exec: \"cat ${file} | wc -l\"\n  - name: raw\n    exec: \"ls ${flags:raw}\"\n",
    );
    let out = expand(&sb, "agent");
    assert_eq!(out.code, 1);
    assert_eq!(out.stdout, "");
    insta::assert_snapshot!(sb.scrub(&out.stderr));
    // The same file given directly gives the same diagnostics.
    let direct = expand(&sb, "agent/agent.yaml");
    assert_eq!(direct.code, 1);
    assert_eq!(sb.scrub(&direct.stderr), sb.scrub(&out.stderr));
}

#[test]
fn an_invalid_module_is_reported_with_its_location() {
    let sb = Sandbox::new("name: a\nllm: {}\ntools: []\n");
    sb.file(
        "agent/modules/bad.yaml",
        "tools:\n  - name: both\n    exec: \"ls\"\n    shell: \"ls\"\n  - name: opt\n    command: [x]\n    parameters:\n      - name: o\n        inject_as: option\n",
    );
    let out = expand(&sb, "agent/modules/bad.yaml");
    assert_eq!(out.code, 1);
    let stderr = sb.scrub(&out.stderr);
    assert!(
        stderr.contains("[SANDBOX]/agent/modules/bad.yaml:2:5: tools[0]: tool 'both': must have exactly one of: exec:, shell:, command: or agent: field"),
        "{stderr}"
    );
    assert!(
        stderr.contains("[SANDBOX]/agent/modules/bad.yaml:5:5: tools[1]: tool 'opt': option_name is required when inject_as is 'option'"),
        "{stderr}"
    );
    // Broken YAML is located too.
    sb.file("agent/modules/broken.yaml", "tools: [\n");
    let out = expand(&sb, "agent/modules/broken.yaml");
    assert_eq!(out.code, 1);
    assert!(
        sb.scrub(&out.stderr)
            .contains("[SANDBOX]/agent/modules/broken.yaml:"),
        "{}",
        out.stderr
    );
}

#[test]
fn format_json_prints_the_same_document() {
    let sb = Sandbox::new(AGENT);
    let yaml = expand(&sb, "agent");
    let mut cmd = sb.delta(None);
    cmd.args(["tool:expand", "agent", "--format", "json"]);
    let json_out = output(cmd);
    assert_eq!(json_out.code, 0, "{}", json_out.stderr);
    let from_json: Value = serde_json::from_str(&json_out.stdout).unwrap();
    assert_eq!(from_json, parse(&yaml.stdout));
    assert_eq!(from_json["tools"].as_array().unwrap().len(), 4);
}
