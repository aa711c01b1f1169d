//! Help, version, usage errors, missing pieces.

use crate::support::{Sandbox, output};

#[test]
fn help_lists_commands_and_exit_codes() {
    let sb = Sandbox::new("name: a\nllm: {}\ntools: []\n");
    let mut cmd = sb.delta(None);
    cmd.arg("--help");
    let out = output(cmd);
    assert_eq!(out.code, 0);
    insta::assert_snapshot!(out.stdout);
}

#[test]
fn run_help_explains_the_flags() {
    let sb = Sandbox::new("name: a\nllm: {}\ntools: []\n");
    let mut cmd = sb.delta(None);
    cmd.args(["run", "--help"]);
    let out = output(cmd);
    assert_eq!(out.code, 0);
    insta::assert_snapshot!(out.stdout);
}

#[test]
fn version_is_printed() {
    let sb = Sandbox::new("name: a\nllm: {}\ntools: []\n");
    let mut cmd = sb.delta(None);
    cmd.arg("--version");
    let out = output(cmd);
    assert_eq!(out.stdout, format!("delta {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn the_old_task_flag_names_its_replacement() {
    let sb = Sandbox::new("name: a\nllm: {}\ntools: []\n");
    let mut cmd = sb.delta(None);
    cmd.args(["run", "--agent", "agent", "--task", "x"]);
    let out = output(cmd);
    assert_eq!(out.code, 64);
    assert!(
        out.stderr.contains("--task was replaced by -m/--message"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_missing_api_key_is_explained_and_nothing_is_created() {
    let sb = Sandbox::new("name: a\nllm: {}\ntools: []\n");
    let out = sb.run(None, "hi", &[]);
    assert_eq!(out.code, 1);
    insta::assert_snapshot!(sb.scrub(&out.stderr));
    assert!(!sb.ws().join(".delta/LATEST").exists());
}

#[test]
fn a_key_in_a_dotenv_file_is_accepted() {
    // The original checked the key before reading .env files; we read them first.
    let server = testkit::ScriptedServer::start([testkit::Reply::text("done")]);
    let sb = Sandbox::new("name: a\nllm: {}\ntools: []\n");
    sb.file(
        "agent/.env",
        &format!(
            "DELTA_API_KEY=from-dotenv-123\nDELTA_BASE_URL={}\n",
            server.openai_base()
        ),
    );
    let out = sb.run(None, "hi", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some("Bearer from-dotenv-123")
    );
}

#[test]
fn a_broken_agent_is_reported_with_its_location() {
    let sb = Sandbox::new("name: a\nllm:\n  temperature: hot\ntools: []\n");
    let out = sb.run(None, "hi", &[]);
    assert_eq!(out.code, 1);
    insta::assert_snapshot!(sb.scrub(&out.stderr));
}

#[test]
fn no_agent_here_suggests_init() {
    let sb = Sandbox::new("name: a\nllm: {}\ntools: []\n");
    let mut cmd = sb.delta(None);
    cmd.args(["run", "-m", "x", "-w", "ws"]);
    let out = output(cmd);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("no agent configuration found"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("hint: run `delta init`"),
        "{}",
        out.stderr
    );
}

#[test]
fn without_a_workspace_and_a_terminal_the_run_asks_for_w_or_y() {
    let sb = Sandbox::new("name: a\nllm: {}\ntools: []\n");
    let mut cmd = sb.delta(None);
    cmd.args(["run", "--agent", "agent", "-m", "x"]);
    let out = output(cmd);
    assert_eq!(out.code, 64);
    assert!(out.stderr.contains("pass -w PATH"), "{}", out.stderr);
}
