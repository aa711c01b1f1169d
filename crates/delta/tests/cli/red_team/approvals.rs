//! Approvals: one call each, only from a person, kept where tools cannot write; rules that hold,
//! for sub-agents too.

use super::*;

#[test]
fn an_approval_is_for_one_call_never_for_another_whose_id_it_starts_with_or_shares() {
    for ids in [["B of z", "B"], ["c1", "c1"]] {
        let server = ScriptedServer::start([
            Reply::tool_calls([write_call(ids[0], "a.txt"), write_call(ids[1], "b.txt")]),
            Reply::text("done"),
        ]);
        let sb = Sandbox::new(APPROVING);
        assert_eq!(sb.run(Some(&server), "go", &[]).code, 101);
        let out = continue_with(&sb, &server, &["-m", "yes"]);
        assert_eq!(
            out.code, 101,
            "{ids:?}: the second call is asked about: {out:?}"
        );
        assert!(sb.ws().join("a.txt").is_file(), "{ids:?}");
        assert!(!sb.ws().join("b.txt").exists(), "{ids:?}: ran unasked");
        let request = crate::support::read_json(&sb.run_dir().join("interaction/request.json"));
        assert!(
            request["prompt"].as_str().unwrap().contains("touch b.txt"),
            "{request}"
        );
    }
}

#[test]
fn always_and_approve_all_never_lift_a_deny() {
    let server = ScriptedServer::start([
        Reply::tool_calls([write_call("c1", "a.txt")]),
        Reply::tool_calls([write_call("c2", "secret.txt")]),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(APPROVING);
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 101);
    let out = continue_with(&sb, &server, &["-m", "always"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(sb.ws().join("a.txt").is_file());
    assert!(
        !sb.ws().join("secret.txt").exists(),
        "always lifted the deny"
    );

    let server = ScriptedServer::start([
        Reply::tool_calls([write_call("c1", "a.txt"), write_call("c2", "secret.txt")]),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(APPROVING);
    let out = sb.run(Some(&server), "go", &["--approve", "all"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(sb.ws().join("a.txt").is_file());
    assert!(
        !sb.ws().join("secret.txt").exists(),
        "--approve all lifted the deny"
    );
    let decisions: Vec<String> = sb
        .events("SYSTEM_MESSAGE")
        .iter()
        .filter_map(|e| e["payload"]["content"].as_str().map(str::to_string))
        .filter(|c| c.starts_with("Approval: "))
        .collect();
    assert!(
        decisions[0].starts_with("Approval: call c1 of write approved by --approve all"),
        "{decisions:?}"
    );
    assert!(
        decisions[1].starts_with("Approval: write denied by rule 1"),
        "{decisions:?}"
    );
}

#[test]
fn only_a_person_answers_an_approval() {
    // A response a program of the run left on disk is no answer.
    let server = ScriptedServer::start([
        Reply::tool_calls([write_call("c1", "a.txt")]),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(APPROVING);
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 101);
    std::fs::write(sb.run_dir().join("interaction/response.txt"), "yes").unwrap();
    let out = continue_with(&sb, &server, &[]);
    assert_eq!(out.code, 101, "{out:?}");
    assert!(!sb.ws().join("a.txt").exists(), "a file approved the call");

    // A question rewritten after it was asked: the person's yes answers what they were shown,
    // which is not this call.
    let request_path = sb.run_dir().join("interaction/request.json");
    let mut request = crate::support::read_json(&request_path);
    request["prompt"] = json!(
        "Allow write to run? touch harmless.txt (answer yes, no, or always for the rest of the run)"
    );
    std::fs::write(&request_path, request.to_string()).unwrap();
    let out = continue_with(&sb, &server, &["-m", "yes"]);
    assert_eq!(out.code, 101, "{out:?}");
    assert!(
        !sb.ws().join("a.txt").exists(),
        "a rewritten question was approved"
    );
    let warned = sb.events("SYSTEM_MESSAGE").iter().any(|e| {
        e["payload"]["content"]
            .as_str()
            .is_some_and(|c| c.contains("the question on file is not the one this call raises"))
    });
    assert!(warned);
    // Asked again, truly: now the yes holds.
    let out = continue_with(&sb, &server, &["-m", "yes"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(sb.ws().join("a.txt").is_file());
}

#[test]
fn what_a_person_decided_is_kept_where_the_runs_tools_cannot_write() {
    // "always" written into metadata.json by a program of the run is nobody's approval: the
    // person's "no" stands.
    let server = ScriptedServer::start([
        Reply::tool_calls([write_call("c1", "a.txt")]),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(APPROVING);
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 101);
    let path = sb.run_dir().join("metadata.json");
    let mut metadata = crate::support::read_json(&path);
    metadata["approved_always"] = json!(["write"]);
    std::fs::write(&path, metadata.to_string()).unwrap();
    let out = continue_with(&sb, &server, &["-m", "no"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        !sb.ws().join("a.txt").exists(),
        "the person's no was overruled"
    );
    // The seal lies outside the workspace.
    let seals = sb.path(".local/state/delta/seals");
    assert_eq!(std::fs::read_dir(&seals).unwrap().count(), 1);
}

#[test]
fn a_journal_rewritten_between_question_and_answer_is_refused() {
    let server = ScriptedServer::start([
        Reply::tool_calls([write_call("c1", "a.txt")]),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(APPROVING);
    assert_eq!(sb.run(Some(&server), "go", &[]).code, 101);
    // The call asked about becomes another, in the journal and in the question alike.
    for file in ["journal.jsonl", "interaction/request.json"] {
        let path = sb.run_dir().join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("a.txt", "b.txt")).unwrap();
    }
    let out = continue_with(&sb, &server, &["-m", "yes"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("changed since delta last wrote it"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("hint:"), "{}", out.stderr);
    assert!(!sb.ws().join("a.txt").exists() && !sb.ws().join("b.txt").exists());
}

#[test]
fn a_sub_agent_is_held_to_its_parents_rules_and_sandbox() {
    if testkit::needs::landlock().is_none() {
        return;
    }
    // The parent denies `rm` and may write only its workspace; its child asks for no sandbox at
    // all and for a writable folder outside.
    let sb = Sandbox::new(
        "name: parent\nllm:\n  model: m\nsandbox: {filesystem: workspace-write, network: false}\npermissions:\n  default: allow\n  rules:\n    - {tool: \"*\", command: \"rm *\", action: deny}\ntools:\n  - name: helper\n    description: Ask the helper.\n    agent: ./helper\n",
    );
    let outside = sb.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    sb.file(
        "agent/helper/agent.yaml",
        &format!(
            "name: helper\nllm:\n  model: m\nsandbox: {{filesystem: off, network: true, writable: [{}]}}\ntools:\n  - name: sh\n    exec: \"bash -c ${{script}}\"\n",
            outside.display()
        ),
    );
    sb.file("agent/helper/system_prompt.md", "You help.");
    std::fs::write(outside.join("keep.txt"), "keep").unwrap();
    let server = ScriptedServer::start([
        Reply::tool_call("p1", "helper", json!({"task": "clean up"})),
        Reply::tool_call(
            "h1",
            "sh",
            json!({"script": format!("touch {}/escaped.txt && echo WROTE || echo REFUSED", outside.display())}),
        ),
        Reply::tool_call(
            "h2",
            "sh",
            json!({"script": format!("rm {}/keep.txt", outside.display())}),
        ),
        Reply::text("helper done"),
        Reply::text("parent done"),
    ]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        !outside.join("escaped.txt").exists(),
        "the child wrote outside its parent's sandbox"
    );
    assert!(
        outside.join("keep.txt").exists(),
        "the parent's deny did not hold for its child"
    );
    let child_journal = std::fs::read_dir(sb.run_dir().join("agents"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = walk_text(&child_journal.join(".delta"));
    assert!(text.contains("REFUSED"), "{text}");
    assert!(text.contains("the agent's permissions deny it"), "{text}");
}

/// Every journal's text under `dir`.
fn walk_text(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            text += &walk_text(&path);
        } else if path.file_name().is_some_and(|n| n == "journal.jsonl") {
            text += &std::fs::read_to_string(&path).unwrap();
        }
    }
    text
}

#[test]
fn a_deny_rule_holds_however_the_model_spells_the_command() {
    // The docs' example: a general shell tool, and a rule against pushing.
    let sb = Sandbox::new(
        "name: pushy\nllm:\n  model: m\npermissions:\n  default: allow\n  rules:\n    - {tool: \"run\", command: \"git push*\", action: deny}\n    - {tool: \"save\", args: {path: \"/etc/*\"}, action: deny}\ntools:\n  - name: run\n    exec: \"bash -c ${script}\"\n  - name: save\n    stdin: content\n    exec: \"tee ${path}\"\n",
    );
    let server = ScriptedServer::start([
        Reply::tool_call("c0", "run", json!({"script": "git push origin main"})),
        Reply::tool_call("c1", "run", json!({"script": "git   push\torigin"})),
        Reply::tool_call("c2", "save", json!({"path": "/etc/evil", "content": "x"})),
        Reply::tool_call("c3", "run", json!({"script": "echo harmless"})),
        Reply::text("done"),
    ]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let seen = observations(&sb);
    for (i, text) in seen.iter().take(3).enumerate() {
        assert!(
            text.contains("the agent's permissions deny it"),
            "call {i}: {text}"
        );
    }
    assert!(seen[3].contains("harmless"), "{}", seen[3]);
    assert!(!Path::new("/etc/evil").exists());
    model_was_told(&server, 0, "the agent's permissions deny it");
}

#[test]
fn a_sub_agents_folder_never_follows_a_link_out_of_its_run() {
    if testkit::needs::landlock().is_none() {
        return;
    }
    let sb = Sandbox::new(
        "name: parent\nllm:\n  model: m\nsandbox: {filesystem: workspace-write, network: false}\ntools:\n  - name: sh\n    exec: \"bash -c ${script}\"\n  - name: helper\n    description: Ask the helper.\n    agent: ./helper\n",
    );
    sb.file(
        "agent/helper/agent.yaml",
        "name: helper\nllm:\n  model: m\ntools: []\n",
    );
    sb.file("agent/helper/system_prompt.md", "You help.");
    let outside = sb.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let server = ScriptedServer::start([
        Reply::tool_call(
            "c0",
            "sh",
            json!({"script": format!("ln -s {} .delta/$DELTA_RUN_ID/agents && echo LINKED", outside.display())}),
        ),
        Reply::tool_call("c1", "helper", json!({"task": "anything"})),
        Reply::text("helper done"),
        Reply::text("parent done"),
    ]);
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let seen = observations(&sb);
    assert!(seen[0].contains("LINKED"), "{}", seen[0]);
    assert!(seen[1].contains("outside its run's folder"), "{}", seen[1]);
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "the child ran outside"
    );
}
