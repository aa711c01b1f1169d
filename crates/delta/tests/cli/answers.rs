//! `interaction/response.txt` answers one question, once: the question pending when it is read. It is
//! consumed when it becomes that call's result, and a response left over from before a question was
//! asked never answers it.

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer};

use crate::support::{ECHO_AND_WRITE, Output, Sandbox, agent_yaml, assert_well_formed, output};

fn continue_(sb: &Sandbox, server: &ScriptedServer, args: &[&str]) -> Output {
    let mut cmd = sb.delta(Some(server));
    cmd.args(["continue", "-w", "ws"]).args(args);
    output(cmd)
}

fn results(sb: &Sandbox) -> Vec<(String, String)> {
    sb.events("ACTION_RESULT")
        .iter()
        .map(|e| {
            (
                e["payload"]["action_id"].as_str().unwrap().to_string(),
                e["payload"]["observation_content"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect()
}

#[test]
fn a_response_written_before_the_question_is_never_its_answer() {
    let server = ScriptedServer::start([
        Reply::text("done"),
        Reply::tool_call("q1", "ask_human", json!({"prompt": "Which colour?"})),
        Reply::text("unused"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "start", &[]).code, 0);
    // Left there while no question was pending.
    let interaction = sb.run_dir().join("interaction");
    std::fs::create_dir_all(&interaction).unwrap();
    std::fs::write(interaction.join("response.txt"), "stale\n").unwrap();

    let out = continue_(&sb, &server, &["-m", "now ask me"]);
    assert_eq!(out.code, 101, "{}", out.stderr);
    assert!(
        !interaction.join("response.txt").exists(),
        "the stale response was cleared when the question was asked"
    );
    let out = continue_(&sb, &server, &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("Please provide a response using -m/--message. The question: Which colour?"),
        "{}",
        out.stderr
    );
    assert!(results(&sb).is_empty(), "{:?}", results(&sb));
    assert_eq!(sb.metadata()["status"], "WAITING_FOR_INPUT");
    assert_eq!(server.request_count(), 2);
}

#[test]
fn an_answer_is_consumed_when_it_becomes_the_result() {
    let server = ScriptedServer::start([
        Reply::tool_call("q1", "ask_human", json!({"prompt": "First?"})),
        Reply::tool_call("q2", "ask_human", json!({"prompt": "Second?"})),
        Reply::text("both answered"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "start", &[]).code, 101);
    let interaction = sb.run_dir().join("interaction");
    let request: Value =
        serde_json::from_str(&std::fs::read_to_string(interaction.join("request.json")).unwrap())
            .unwrap();
    assert_eq!(request["action_id"], "q1", "the request names its call");

    let out = continue_(&sb, &server, &["-m", "one"]);
    assert_eq!(out.code, 101, "{}", out.stderr);
    assert_eq!(results(&sb), [("q1".to_string(), "one".to_string())]);
    assert!(
        !interaction.join("response.txt").exists(),
        "the answer was consumed"
    );
    // The second question is not answered by the first answer.
    let out = continue_(&sb, &server, &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("Second?"), "{}", out.stderr);
    let out = continue_(&sb, &server, &["-m", "two", "--format", "raw"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "both answered\n");
    assert_eq!(
        results(&sb),
        [
            ("q1".to_string(), "one".to_string()),
            ("q2".to_string(), "two".to_string())
        ]
    );
    assert!(!interaction.join("response.txt").exists());
    assert!(!interaction.join("request.json").exists());
    assert_well_formed(&server);
}

#[test]
fn after_a_crash_before_the_pause_an_earlier_questions_answer_is_not_used() {
    let server = ScriptedServer::start([
        Reply::tool_call("q1", "ask_human", json!({"prompt": "First?"})),
        Reply::tool_call("q2", "ask_human", json!({"prompt": "Second?"})),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    assert_eq!(sb.run(Some(&server), "start", &[]).code, 101);
    let interaction = sb.run_dir().join("interaction");
    let first_request = std::fs::read(interaction.join("request.json")).unwrap();
    assert_eq!(continue_(&sb, &server, &["-m", "one"]).code, 101);

    // What a process killed after journaling the second question, but before pausing for it, leaves
    // behind if the first answer's files were still there: the journal ends with the request, the run
    // is RUNNING, and interaction/ holds the first question and its answer.
    let journal = sb.run_dir().join("journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cut = lines
        .iter()
        .rposition(|l| l.contains("\"ACTION_REQUEST\"") && l.contains("\"q2\""))
        .unwrap();
    std::fs::write(&journal, format!("{}\n", lines[..=cut].join("\n"))).unwrap();
    // Made by hand, this state is no journal delta sealed: taken as found with --adopt, as a run
    // from before seals is.
    sb.forget_seals();
    std::fs::write(interaction.join("request.json"), first_request).unwrap();
    std::fs::write(interaction.join("response.txt"), "one").unwrap();
    let metadata = sb.run_dir().join("metadata.json");
    let mut meta: Value =
        serde_json::from_str(&std::fs::read_to_string(&metadata).unwrap()).unwrap();
    meta["status"] = json!("RUNNING");
    std::fs::write(&metadata, serde_json::to_string_pretty(&meta).unwrap()).unwrap();

    let server2 = ScriptedServer::start([Reply::text("unused")]);
    let out = continue_(&sb, &server2, &["--adopt"]);
    assert_eq!(
        out.code, 101,
        "the run waits for the second answer: {}",
        out.stderr
    );
    assert_eq!(results(&sb), [("q1".to_string(), "one".to_string())]);
    assert_eq!(sb.metadata()["status"], "WAITING_FOR_INPUT");
    let request: Value =
        serde_json::from_str(&std::fs::read_to_string(interaction.join("request.json")).unwrap())
            .unwrap();
    assert_eq!(request["prompt"], "Second?");
    assert_eq!(request["action_id"], "q2");
    assert!(!interaction.join("response.txt").exists());
    assert_eq!(server2.request_count(), 0);
}
