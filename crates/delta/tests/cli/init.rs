//! `delta init`: templates, the empty-folder rule, usage errors, and a created agent that runs.

use std::path::{Path, PathBuf};

use serde_json::json;
use testkit::{Reply, ScriptedServer};

use crate::support::{Output, Sandbox, bodies, output};

const TEMPLATES: [&str; 4] = ["minimal", "hello-world", "file-ops", "api-tester"];

/// A sandbox whose agent is not used: `delta init` runs in its root.
fn sandbox() -> Sandbox {
    Sandbox::new("name: unused\nllm: {}\ntools: []\n")
}

fn init(sb: &Sandbox, cwd: &Path, args: &[&str]) -> Output {
    let mut cmd = sb.delta(None);
    cmd.current_dir(cwd).arg("init").args(args);
    output(cmd)
}

/// The names in a folder, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The template's own file, as shipped.
fn shipped(template: &str, file: &str) -> String {
    read(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("templates")
            .join(template)
            .join(file),
    )
}

fn root(sb: &Sandbox) -> PathBuf {
    sb.root.path().canonicalize().unwrap()
}

#[test]
fn every_template_creates_the_four_files_named_after_the_folder() {
    let sb = sandbox();
    for template in TEMPLATES {
        let name = format!("my-{template}");
        let out = init(&sb, &root(&sb), &[&name, "-t", template]);
        assert_eq!(out.code, 0, "{template}: {}", out.stderr);
        let dir = root(&sb).join(&name);
        assert_eq!(out.stdout, format!("{}\n", dir.display()), "{template}");
        assert_eq!(
            listing(&dir),
            [
                "README.md",
                "agent.yaml",
                "context.yaml",
                "system_prompt.md"
            ],
            "{template}"
        );
        // The first name: line is the folder's name; the rest is the template's.
        let agent = read(&dir.join("agent.yaml"));
        let mut lines = agent.lines();
        assert_eq!(lines.next(), Some(format!("name: \"{name}\"").as_str()));
        let rest: Vec<&str> = lines.collect();
        let original = shipped(template, "agent.yaml");
        assert_eq!(
            rest,
            original.lines().skip(1).collect::<Vec<_>>(),
            "{template}"
        );
        assert!(original.starts_with("name: "));
        assert_eq!(
            read(&dir.join("system_prompt.md")),
            shipped(template, "system_prompt.md")
        );
        assert_eq!(
            read(&dir.join("context.yaml")),
            shipped(template, "context.yaml")
        );
        let readme = read(&dir.join("README.md"));
        assert!(readme.starts_with(&format!("# {name}\n")), "{readme}");
        assert!(!readme.contains("{{name}}"));
        assert!(
            out.stderr.contains(&format!(
                "Created agent '{name}' from the {template} template."
            )),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr.contains(&format!("  cd {name}\n")),
            "{}",
            out.stderr
        );

        // The created agent is valid: tool:expand loads it.
        let mut cmd = sb.delta(None);
        cmd.args(["tool:expand"]).arg(&dir);
        let expanded = output(cmd);
        assert_eq!(expanded.code, 0, "{template}: {}", expanded.stderr);
    }
}

#[test]
fn without_a_name_the_current_folder_is_used_and_y_picks_minimal() {
    let sb = sandbox();
    let dir = root(&sb).join("research-bot");
    std::fs::create_dir_all(dir.join(".git")).unwrap();
    std::fs::write(dir.join(".env"), "KEEP=me\n").unwrap();
    let out = init(&sb, &dir, &["-y"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, format!("{}\n", dir.display()));
    // Dot-files do not make the folder non-empty, and are left alone.
    assert_eq!(
        listing(&dir),
        [
            ".env",
            ".git",
            "README.md",
            "agent.yaml",
            "context.yaml",
            "system_prompt.md"
        ]
    );
    assert_eq!(read(&dir.join(".env")), "KEEP=me\n");
    assert_eq!(
        read(&dir.join("agent.yaml")).lines().next(),
        Some("name: \"research-bot\"")
    );
    assert_eq!(
        read(&dir.join("system_prompt.md")),
        shipped("minimal", "system_prompt.md")
    );
    assert!(
        out.stderr.contains("from the minimal template."),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("  cd "), "{}", out.stderr);
}

#[test]
fn a_nested_name_creates_the_folders_and_uses_the_last_part() {
    let sb = sandbox();
    let out = init(&sb, &root(&sb), &["agents/team/writer", "-t", "file-ops"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let dir = root(&sb).join("agents/team/writer");
    assert_eq!(
        read(&dir.join("agent.yaml")).lines().next(),
        Some("name: \"writer\"")
    );
}

#[test]
fn a_non_empty_folder_is_refused_and_left_unchanged() {
    let sb = sandbox();
    let dir = root(&sb).join("busy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    std::fs::write(dir.join(".hidden"), "also mine").unwrap();
    for args in [vec!["busy", "-t", "minimal"], vec!["busy", "-y"]] {
        let out = init(&sb, &root(&sb), &args);
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert_eq!(out.stdout, "");
        assert_eq!(
            sb.scrub(&out.stderr),
            "error: directory is not empty: [SANDBOX]/busy\n  hint: delta init only writes into a new or empty folder: give a new name, e.g. delta init my-agent\n"
        );
        assert_eq!(listing(&dir), [".hidden", "notes.txt"]);
        assert_eq!(read(&dir.join("notes.txt")), "mine");
    }
    // The current folder too.
    let out = init(&sb, &dir, &["-y"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(listing(&dir), [".hidden", "notes.txt"]);
}

#[test]
fn a_file_in_the_way_is_refused() {
    let sb = sandbox();
    std::fs::write(root(&sb).join("taken"), "a file").unwrap();
    let out = init(&sb, &root(&sb), &["taken", "-y"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("exists and is not a folder"),
        "{}",
        out.stderr
    );
    assert_eq!(read(&root(&sb).join("taken")), "a file");
}

#[test]
fn an_unknown_template_is_a_usage_error_and_creates_nothing() {
    let sb = sandbox();
    let out = init(&sb, &root(&sb), &["new-agent", "-t", "hello_world"]);
    assert_eq!(out.code, 64, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        "error: template 'hello_world' not found\n  hint: templates: minimal, hello-world, file-ops, api-tester\n"
    );
    assert_eq!(out.stdout, "");
    assert!(!root(&sb).join("new-agent").exists());
}

#[test]
fn without_a_template_and_a_terminal_init_asks_for_t_or_y() {
    let sb = sandbox();
    let out = init(&sb, &root(&sb), &["new-agent"]);
    assert_eq!(out.code, 64, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        "error: choose a template with -t, or pass -y for the minimal one\n  hint: templates: minimal, hello-world, file-ops, api-tester\n"
    );
    assert!(!root(&sb).join("new-agent").exists());
}

#[test]
fn the_hello_world_agent_runs_and_creates_a_file() {
    // New agents are sandboxed: running one needs the kernel's Landlock.
    if testkit::needs::landlock().is_none() {
        return;
    }
    let sb = sandbox();
    let out = init(&sb, &root(&sb), &["greeter", "-t", "hello-world"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let server = ScriptedServer::start([
        Reply::tool_call(
            "c1",
            "create_file",
            json!({"filename": "hello.txt", "content": "Hello, delta!\n"}),
        ),
        Reply::tool_call("c2", "list_files", json!({})),
        Reply::text("Created hello.txt."),
    ]);
    let mut cmd = sb.delta(Some(&server));
    cmd.args([
        "run",
        "--agent",
        "greeter",
        "-w",
        "ws",
        "-m",
        "Create hello.txt",
    ]);
    let run = output(cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("Final Response:\nCreated hello.txt.\n"),
        "{}",
        run.stdout
    );
    assert_eq!(read(&sb.ws().join("hello.txt")), "Hello, delta!\n");

    // The template's settings and tools reach the model.
    let first = &bodies(&server)[0];
    assert_eq!(first["model"], "gpt-4o-mini");
    assert_eq!(first["temperature"], 0.7);
    assert_eq!(first["max_tokens"], 1000);
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "print_message",
            "create_file",
            "list_files",
            "show_date",
            "ask_human"
        ]
    );
    assert_eq!(
        first["messages"][0]["content"],
        format!(
            "# Context Block: system_prompt\n\n{}",
            shipped("hello-world", "system_prompt.md")
        )
    );
    let listing = bodies(&server)[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(listing.contains("hello.txt"), "{listing}");
    let metadata = sb.metadata();
    assert_eq!(metadata["status"], "COMPLETED");
    assert_eq!(
        metadata["agent_ref"],
        root(&sb).join("greeter").display().to_string()
    );
}

#[test]
fn the_minimal_agent_created_with_y_runs() {
    // New agents are sandboxed: running one needs the kernel's Landlock.
    if testkit::needs::landlock().is_none() {
        return;
    }
    let sb = sandbox();
    let dir = root(&sb).join("mini");
    std::fs::create_dir_all(&dir).unwrap();
    assert_eq!(init(&sb, &dir, &["-y"]).code, 0);
    let server = ScriptedServer::start([
        Reply::tool_call(
            "c1",
            "write_to_file",
            json!({"filename": "out.txt", "content": "written"}),
        ),
        Reply::text("done"),
    ]);
    let mut cmd = sb.delta(Some(&server));
    cmd.current_dir(&dir)
        .args(["run", "-m", "write it", "-w", "../ws"]);
    let run = output(cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(read(&sb.ws().join("out.txt")), "written");
}

#[test]
fn a_name_with_yaml_special_characters_is_quoted() {
    // New agents are sandboxed: running one needs the kernel's Landlock.
    if testkit::needs::landlock().is_none() {
        return;
    }
    let sb = sandbox();
    let name = "team: \"alpha\" #1";
    let out = init(&sb, &root(&sb), &[name, "-t", "minimal"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let dir = root(&sb).join(name);
    assert_eq!(
        read(&dir.join("agent.yaml")).lines().next(),
        Some(r#"name: "team: \"alpha\" #1""#)
    );
    // It is still a valid agent, with that name.
    let server = ScriptedServer::start([Reply::text("done")]);
    let mut cmd = sb.delta(Some(&server));
    cmd.args([
        "run", "--agent", name, "-w", "ws", "-m", "hi", "--format", "json",
    ]);
    let run = output(cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let result: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(result["metadata"]["agent_name"], name);
}

#[test]
fn format_json_names_the_folder_and_its_files() {
    let sb = Sandbox::new("name: unused\n");
    let out = init(
        &sb,
        sb.root.path(),
        &["json-agent", "-t", "file-ops", "--format", "json"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let made: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(made["name"], "json-agent");
    assert_eq!(made["template"], "file-ops");
    let dir = std::path::PathBuf::from(made["agent_dir"].as_str().unwrap());
    for file in made["files"].as_array().unwrap() {
        assert!(dir.join(file.as_str().unwrap()).is_file(), "{file}");
    }
}
