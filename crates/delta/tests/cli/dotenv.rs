//! `.env` files: precedence, the project root, and API keys kept away from tools.

use std::path::Path;

use serde_json::json;
use testkit::{Reply, ScriptedServer};

use crate::support::{KEY, Output, Sandbox, agent_yaml, bodies, output};

/// `printenv` of the four test variables, and `env`.
const TOOLS: &str = "  - name: show\n    exec: \"printenv DT_A DT_B DT_C DT_D\"\n  - name: env\n    exec: \"env\"\n  - name: key\n    exec: \"printenv DELTA_API_KEY\"\n";

/// `delta run` with extra process variables, from `cwd` (absolute agent and workspace paths).
fn run_from(
    sb: &Sandbox,
    server: Option<&ScriptedServer>,
    cwd: &Path,
    vars: &[(&str, &str)],
) -> Output {
    let mut cmd = sb.delta(server);
    cmd.current_dir(cwd);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.args(["run", "--agent"])
        .arg(sb.agent())
        .arg("-w")
        .arg(sb.ws())
        .args(["-m", "go"]);
    output(cmd)
}

fn stdout_of(sb: &Sandbox, call: &str) -> String {
    crate::support::tool_record(&sb.run_dir(), call)["stdout"]
        .as_str()
        .unwrap()
        .to_string()
}

fn exit_code_of(sb: &Sandbox, call: &str) -> String {
    crate::support::tool_record(&sb.run_dir(), call)["exit_code"].to_string()
}

/// One call of `tool`, then "done".
fn one_call(tool: &str) -> ScriptedServer {
    ScriptedServer::start([Reply::tool_call("c1", tool, json!({})), Reply::text("done")])
}

/// Every file under `dir`, as text, must not contain `needle`.
fn assert_not_under(dir: &Path, needle: &str) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            assert_not_under(&path, needle);
        } else if let Ok(bytes) = std::fs::read(&path) {
            assert!(
                !String::from_utf8_lossy(&bytes).contains(needle),
                "{needle:?} was written to {}",
                path.display()
            );
        }
    }
}

#[test]
fn process_env_beats_workspace_env_beats_agent_env_beats_project_env() {
    let sb = Sandbox::new(&format!(
        "{}lifecycle_hooks:\n  on_run_end:\n    command: [printenv, DT_B]\n",
        agent_yaml(TOOLS)
    ));
    sb.file(".git/HEAD", "ref: refs/heads/main\n");
    sb.file(
        ".env",
        "DT_A=project\nDT_B=project\nDT_C=project\nDT_D=project\n",
    );
    sb.file("agent/.env", "DT_A=agent\nDT_B=agent\nDT_C=agent\n");
    sb.file(
        "ws/.env",
        "# the workspace's\nDT_A=workspace\nDT_B=\"workspace\"\n",
    );
    let server = one_call("show");
    let out = run_from(&sb, Some(&server), sb.root.path(), &[("DT_A", "process")]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(stdout_of(&sb, "c1"), "process\nworkspace\nagent\nproject\n");
    // Hooks see the same environment.
    let hook = sb
        .run_dir()
        .join("io/hooks/001_on_run_end/execution_meta/stdout.log");
    assert_eq!(std::fs::read_to_string(hook).unwrap(), "workspace\n");
    // The files that contributed are listed, highest precedence first.
    let stderr = sb.scrub(&out.stderr);
    let listed: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("  Environment:    "))
        .collect();
    assert_eq!(
        listed,
        [
            "[SANDBOX]/ws/.env",
            "[SANDBOX]/agent/.env",
            "[SANDBOX]/.env"
        ],
        "{stderr}"
    );
}

#[test]
fn without_a_git_folder_the_env_of_the_current_folder_is_not_read() {
    let sb = Sandbox::new(&agent_yaml(TOOLS));
    sb.file(".env", "DT_D=project\n");
    let server = one_call("show");
    let out = run_from(&sb, Some(&server), sb.root.path(), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(stdout_of(&sb, "c1"), "");
    assert_eq!(exit_code_of(&sb, "c1"), "1");
    assert!(!out.stderr.contains("Environment:"), "{}", out.stderr);
}

#[test]
fn the_project_root_is_the_nearest_folder_above_the_current_one_with_git() {
    let sb = Sandbox::new(&agent_yaml(TOOLS));
    sb.file(".git/HEAD", "ref: refs/heads/main\n");
    sb.file(".env", "DT_C=outer\nDT_D=outer\n");
    // A worktree or submodule has a .git file, not a folder.
    sb.file("project/.git", "gitdir: ../.git/worktrees/project\n");
    sb.file("project/.env", "DT_D=inner\n");
    std::fs::create_dir_all(sb.path("project/src/deep")).unwrap();
    let server = one_call("show");
    let out = run_from(&sb, Some(&server), &sb.path("project/src/deep"), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Only the nearest project's .env: DT_C of the outer one is not read.
    assert_eq!(stdout_of(&sb, "c1"), "inner\n");
    assert_eq!(exit_code_of(&sb, "c1"), "1");
    assert!(
        sb.scrub(&out.stderr)
            .contains("  Environment:    [SANDBOX]/project/.env"),
        "{}",
        out.stderr
    );
}

#[test]
fn the_api_keys_are_never_visible_to_tools_hooks_or_generators() {
    let other_openai = "sk-openai-other-value-4444";
    let other_anthropic = "sk-ant-other-value-5555";
    let sb = Sandbox::new(&format!(
        "{}lifecycle_hooks:\n  post_tool_exec:\n    command: [env]\n",
        agent_yaml(TOOLS)
    ));
    sb.script("agent/gen.sh", "env > \"$DELTA_CWD/generated-env.txt\"");
    sb.file(
        "agent/context.yaml",
        "sources:\n  - type: computed_file\n    id: environment\n    generator:\n      command: [\"${AGENT_HOME}/gen.sh\"]\n    output_path: \"${CWD}/generated-env.txt\"\n  - type: journal\n",
    );
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "env", json!({})),
        Reply::tool_call("c2", "key", json!({})),
        Reply::text("done"),
    ]);
    let out = run_from(
        &sb,
        Some(&server),
        sb.root.path(),
        &[
            ("OPENAI_API_KEY", other_openai),
            ("ANTHROPIC_API_KEY", other_anthropic),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The key was used.
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    // The tool's environment is real (PATH, the base URL) but has no key variable at all: it is
    // removed, not merely redacted.
    let env = stdout_of(&sb, "c1");
    assert!(env.contains("PATH="), "{env}");
    assert!(env.contains("DELTA_BASE_URL="), "{env}");
    assert!(!env.contains("API_KEY="), "{env}");
    assert!(!env.contains("[REDACTED]"), "{env}");
    assert_eq!(exit_code_of(&sb, "c2"), "1");
    let hook = std::fs::read_to_string(
        sb.run_dir()
            .join("io/hooks/001_post_tool_exec/execution_meta/stdout.log"),
    )
    .unwrap();
    assert!(hook.contains("DELTA_RUN_ID="), "{hook}");
    assert!(!hook.contains("API_KEY="), "{hook}");
    // The generator's output reached the model, without keys.
    let body = bodies(&server)[0].to_string();
    assert!(body.contains("DELTA_AGENT_HOME="), "{body}");
    assert!(!body.contains("API_KEY="), "{body}");
    for needle in [KEY, other_openai, other_anthropic] {
        sb.assert_nowhere(needle);
        assert!(!out.stdout.contains(needle) && !out.stderr.contains(needle));
    }
}

#[test]
fn a_key_only_in_the_agent_env_works_and_stays_out_of_the_workspace() {
    let agent_key = "sk-agent-only-key-9876543";
    let server = one_call("env");
    let sb = Sandbox::new(&agent_yaml(TOOLS));
    sb.file(
        "agent/.env",
        &format!(
            "DELTA_API_KEY={agent_key}\nDELTA_BASE_URL={}\n",
            server.openai_base()
        ),
    );
    let out = sb.run(None, "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some(format!("Bearer {agent_key}").as_str())
    );
    assert_eq!(server.request_count(), 2);
    assert!(!stdout_of(&sb, "c1").contains("DELTA_API_KEY="));
    assert_not_under(&sb.ws(), agent_key);
    assert!(!out.stdout.contains(agent_key) && !out.stderr.contains(agent_key));
}

#[test]
fn the_key_follows_the_same_precedence() {
    let server =
        ScriptedServer::start([Reply::text("one"), Reply::text("two"), Reply::text("three")]);
    let sb = Sandbox::new(&agent_yaml(TOOLS));
    sb.file(
        "agent/.env",
        &format!(
            "DELTA_API_KEY=sk-from-agent-2222\nDELTA_BASE_URL={}\n",
            server.openai_base()
        ),
    );
    sb.file("ws/.env", "DELTA_API_KEY=sk-from-workspace-1111\n");
    // Not from the workspace: the run's tools can write that file.
    let out = sb.run(None, "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        sb.scrub(&out.stderr).contains(
            "warning: ignored DELTA_API_KEY from [SANDBOX]/ws/.env: the run's tools can write a \
             file inside the workspace"
        ),
        "{}",
        out.stderr
    );
    // Process over both.
    let out2 = sb.run(Some(&server), "go", &[]);
    assert_eq!(out2.code, 0, "{}", out2.stderr);
    // Only the agent's .env once the workspace's is gone.
    std::fs::remove_file(sb.ws().join(".env")).unwrap();
    let out3 = sb.run(None, "go", &[]);
    assert_eq!(out3.code, 0, "{}", out3.stderr);
    let auth: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.header("authorization").unwrap().to_string())
        .collect();
    assert_eq!(
        auth,
        [
            "Bearer sk-from-agent-2222".to_string(),
            format!("Bearer {KEY}"),
            "Bearer sk-from-agent-2222".to_string(),
        ]
    );
}

#[test]
fn a_malformed_env_file_is_named_and_nothing_is_created() {
    let sb = Sandbox::new(&agent_yaml(TOOLS));
    sb.file("agent/.env", "GOOD=1\nTHIS IS NOT A VARIABLE\n");
    let server = ScriptedServer::start([Reply::text("done")]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        sb.scrub(&out.stderr)
            .starts_with("error: cannot load [SANDBOX]/agent/.env: "),
        "{}",
        out.stderr
    );
    assert_eq!(server.request_count(), 0);
    assert!(!sb.ws().exists());
}

#[test]
fn a_key_a_tool_reads_from_a_file_is_redacted_before_it_is_written_or_sent() {
    let ws_key = "sk-workspace-key-13579";
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "read_env", json!({})),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(&agent_yaml("  - name: read_env\n    exec: \"cat .env\"\n"));
    // The key in the workspace's .env is not used (a tool could have put it there), but it is a
    // key all the same: scrubbed wherever it would leave.
    sb.file(
        "agent/.env",
        &format!(
            "DELTA_API_KEY=sk-agent-key-24680\nDELTA_BASE_URL={}\n",
            server.openai_base()
        ),
    );
    sb.file("ws/.env", &format!("DELTA_API_KEY={ws_key}\n"));
    let out = sb.run(None, "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some("Bearer sk-agent-key-24680")
    );
    assert!(
        stdout_of(&sb, "c1").starts_with("DELTA_API_KEY=[REDACTED]\n"),
        "{}",
        stdout_of(&sb, "c1")
    );
    let tool_message = &bodies(&server)[1]["messages"][3];
    assert_eq!(tool_message["role"], "tool");
    assert!(
        tool_message["content"]
            .as_str()
            .unwrap()
            .contains("DELTA_API_KEY=[REDACTED]"),
        "{tool_message}"
    );
    for request in server.requests() {
        assert!(!String::from_utf8_lossy(&request.body).contains(ws_key));
    }
    assert_not_under(&sb.ws().join(".delta"), ws_key);
}
