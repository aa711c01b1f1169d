//! `delta continue --last`: it says which workspace it picked, and where that record lives.

use testkit::{Reply, ScriptedServer};

use crate::support::{ECHO_AND_WRITE, Sandbox, agent_yaml, output};

#[test]
fn continue_last_says_which_workspace_it_chose() {
    let server = ScriptedServer::start([Reply::text("one"), Reply::text("two")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "first", &[]).code, 0);
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "--last", "-m", "again", "--format", "raw"]);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "two\n");
    let ws = sb.ws().canonicalize().unwrap();
    let record = sb.root.path().join(".delta/LAST_WORKSPACE");
    assert!(
        out.stderr.lines().any(|l| l
            == format!(
                "Using the last workspace: {} (recorded in {})",
                ws.display(),
                record.display()
            )),
        "{}",
        out.stderr
    );
}

#[test]
fn help_says_the_record_is_per_user() {
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let mut cmd = sb.delta(None);
    cmd.args(["continue", "--help"]);
    let out = output(cmd);
    // The help is wrapped to the terminal's width: compare words.
    let words = out.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("The record is per user: ~/.delta/LAST_WORKSPACE in your home folder"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_last_workspace_removed_since_is_named_as_gone() {
    let server = ScriptedServer::start([Reply::text("one")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "first", &[]).code, 0);
    let ws = sb.ws().canonicalize().unwrap();
    std::fs::remove_dir_all(&ws).unwrap();
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "--last", "-m", "again"]);
    let out = output(cmd);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "the workspace used last, {}, no longer exists",
            ws.display()
        )),
        "{}",
        out.stderr
    );
}
