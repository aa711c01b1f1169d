//! Agent nodes (`@Agent("path")`): a task node that runs a delta agent, one model turn per
//! `dygram execute -i` call, its question answered on stdin, its answers recorded and replayed,
//! and kills at random moments never running its tool twice.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer};

use crate::support::{Dir, Out};

const MACHINE: &str = r#"machine "Ship a change"

Context notes { summary<string>: ""; verdict<string>: ""; }

Task build @Agent("agents/builder") { prompt: "Build the project and store a summary in notes."; }
Task review @Agent("agents/reviewer") { prompt: "Review this build: {{ notes.summary }}"; }
State done;

start -> build -> review -> done;
build -writes-> notes;
review -reads-> notes;
review -writes-> notes;
"#;

/// The agents, their shell tool appending a line to `runs.log` (then taking a moment, so that a
/// kill can land while it runs).
fn agents(dir: &Path) {
    let log = dir.join("runs.log");
    let builder = dir.join("agents/builder");
    std::fs::create_dir_all(&builder).unwrap();
    std::fs::write(
        builder.join("agent.yaml"),
        format!(
            "name: builder\nversion: 1.0.0\ndescription: Builds.\nllm:\n  model: scripted\ntools:\n  - name: build\n    description: Build the project.\n    exec: \"sh {}\"\nmax_iterations: 10\n",
            builder.join("build.sh").display()
        ),
    )
    .unwrap();
    std::fs::write(
        builder.join("build.sh"),
        format!(
            "echo build >> '{}'\nsleep 0.3\necho 'build ok'\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::write(builder.join("system_prompt.md"), "You build things.\n").unwrap();
    let reviewer = dir.join("agents/reviewer");
    std::fs::create_dir_all(&reviewer).unwrap();
    std::fs::write(
        reviewer.join("agent.yaml"),
        "name: reviewer\nversion: 1.0.0\ndescription: Reviews.\nllm:\n  model: scripted\ntools: []\nmax_iterations: 10\n",
    )
    .unwrap();
    std::fs::write(reviewer.join("system_prompt.md"), "You review builds.\n").unwrap();
}

/// The names of the tools the conversation so far called, in order.
fn called(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// The model: the builder builds, writes its summary and moves on; the reviewer asks whether to
/// ship, reads the notes and moves on with the answer as its verdict.
fn model() -> ScriptedServer {
    ScriptedServer::responding(|body| {
        let offered: Vec<&str> = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect();
        let done = called(body);
        let id = format!("call_{}", done.len());
        if offered.contains(&"build") {
            let onward = offered
                .iter()
                .find(|t| t.starts_with("transition_to_"))
                .unwrap_or(&"none");
            return match done.len() {
                0 => Reply::tool_call(&id, "build", json!({})),
                1 => Reply::tool_call(&id, "write_notes", json!({"data": {"summary": "built"}})),
                _ => Reply::tool_call(&id, onward, json!({"reason": "built"})),
            };
        }
        let answer = body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .rev()
            .find(|m| m["role"] == "tool")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_string();
        if body.to_string().contains("Ask twice") {
            return match done.len() {
                0 => Reply::tool_call(&id, "ask_human", json!({"prompt": "First?"})),
                1 => Reply::tool_call(&id, "ask_human", json!({"prompt": "Second?"})),
                _ => Reply::tool_call(&id, "transition_to_done", json!({"reason": answer})),
            };
        }
        match done.len() {
            0 => Reply::tool_call(&id, "ask_human", json!({"prompt": "Ship it?"})),
            1 => Reply::tool_call(&id, "write_notes", json!({"data": {"verdict": answer}})),
            _ => Reply::tool_call(&id, "transition_to_done", json!({"reason": "reviewed"})),
        }
    })
}

fn setup(server: &ScriptedServer) -> Dir {
    let mut dir = Dir::with_file("ship.dy", MACHINE);
    agents(dir.path());
    dir.env("DELTA_BASE_URL", &server.openai_base());
    dir.env("DELTA_API_KEY", "test-key");
    dir
}

fn tool_runs(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("runs.log"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Calls `dygram e -i` while it says there is more to do; the last call's output.
fn drive(dir: &Dir, args: &[&str]) -> Out {
    for _ in 0..40 {
        let out = dir.run(args);
        if out.code != 0 {
            return out;
        }
    }
    panic!("no end in 40 calls");
}

/// Answers the question the last call showed, then calls on while there is more to do.
fn answer_and_finish(dir: &Dir, args: &[&str], answer: &str) -> Out {
    let answered = dir.run_with_stdin(args, &format!("{answer}\n"));
    assert!(matches!(answered.code, 0 | 2), "{answered:?}");
    if answered.code == 2 {
        answered
    } else {
        drive(dir, args)
    }
}

#[test]
fn agent_nodes_run_turn_by_turn_wait_for_an_answer_and_replay_from_recordings() {
    let server = model();
    let dir = setup(&server);
    let args = ["e", "-i", "ship.dy", "--id", "live", "--record", "rec"];
    let waiting = drive(&dir, &args);
    assert_eq!(
        waiting.code, 101,
        "the reviewer's question waits: {waiting:?}"
    );
    assert!(waiting.stdout.contains("Ship it?"), "{waiting:?}");
    assert_eq!(tool_runs(dir.path()), 1, "the builder's tool ran once");

    // `exec status` shows the agent's run and its question.
    let status = dir.status_json("live");
    assert_eq!(status["waitingForAnswer"], true, "{status}");
    let agent = &status["agents"][0];
    assert_eq!(agent["node"], "review", "{status}");
    assert_eq!(agent["question"], "Ship it?", "{status}");
    assert!(
        Path::new(agent["runDir"].as_str().unwrap()).is_dir(),
        "{status}"
    );
    let text = dir.run(&["exec", "status", "live"]);
    assert!(
        text.stdout.contains("Agent at review: run review-1"),
        "{text:?}"
    );

    // Without an answer the call waits again, and nothing is asked of the model.
    let asked = server.request_count();
    let again = dir.run(&args);
    assert_eq!(again.code, 101, "{again:?}");
    assert_eq!(server.request_count(), asked);

    let end = answer_and_finish(&dir, &args, "yes, ship it");
    assert_eq!(end.code, 2, "complete: {end:?}");
    assert_eq!(tool_runs(dir.path()), 1);
    let state = dir.read_json("live", "state.json");
    let context = &state["executionState"]["contextValues"];
    assert_eq!(
        context["notes"],
        json!({"summary": "built", "verdict": "yes, ship it"}),
        "{state:#}"
    );
    assert_eq!(state["executionState"]["currentNode"], "done");

    // Each agent's run is an ordinary delta run in the execution's folder.
    let runs = dir.exec_dir("live").join("agents");
    for (node, run) in [("build", "build-1"), ("review", "review-1")] {
        let meta: Value = serde_json::from_str(
            &std::fs::read_to_string(
                runs.join(node)
                    .join(".delta")
                    .join(run)
                    .join("metadata.json"),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(meta["status"], "COMPLETED", "{node}: {meta}");
    }
    let status = dir.status_json("live");
    assert_eq!(status["status"], "complete", "{status}");
    assert_eq!(status["agents"], json!([]), "{status}");
    // What `delta show` prints of the builder's run: its tool, its output.
    let run = delta::workspace::RunDir::new(&runs.join("build"), "build-1");
    let shown =
        delta::transcript::text::render(&delta::transcript::Transcript::load(&run).unwrap());
    assert!(shown.contains("build ok"), "{shown}");
    assert!(shown.contains("write_notes"), "{shown}");

    // Offline: the recordings answer, the answer to the question is given again.
    drop(server);
    let mut offline = Dir::with_file("ship.dy", MACHINE);
    crate::support::copy_dir(&dir.path().join("rec"), &offline.path().join("rec"));
    agents(offline.path());
    offline.env("DELTA_BASE_URL", "http://127.0.0.1:9/v1");
    let replay = ["e", "-i", "ship.dy", "--id", "replay", "--playback", "rec"];
    let waiting = drive(&offline, &replay);
    assert_eq!(waiting.code, 101, "{waiting:?}");
    let end = answer_and_finish(&offline, &replay, "yes, ship it");
    assert_eq!(end.code, 2, "{end:?}");
    let replayed = offline.read_json("replay", "state.json");
    assert_eq!(&replayed["executionState"]["contextValues"], context);
    assert_eq!(replayed["executionState"]["currentNode"], "done");
    assert_eq!(
        replayed["executionState"]["visitedNodes"],
        state["executionState"]["visitedNodes"]
    );
    assert_eq!(tool_runs(offline.path()), 1);
}

#[test]
fn two_paths_at_one_agent_node_have_a_run_each() {
    let server = model();
    let dir = setup(&server);
    dir.write(
        "twice.dy",
        r#"machine "Twice"
Context notes { summary<string>: ""; }
State left @start;
State right @start;
Task build @Agent("agents/builder") { prompt: "Build."; }
State done;
left -> build;
right -> build;
build -> done;
build -writes-> notes;
"#,
    );
    let end = drive(&dir, &["e", "-i", "twice.dy", "--id", "t"]);
    assert_eq!(end.code, 2, "{end:?}");
    assert_eq!(tool_runs(dir.path()), 2, "one build per path");
    let runs = dir.exec_dir("t").join("agents/build/.delta");
    for run in ["build-1", "build-path_1-1"] {
        let meta = std::fs::read_to_string(runs.join(run).join("metadata.json")).unwrap();
        assert!(meta.contains("\"COMPLETED\""), "{run}: {meta}");
    }
}

/// A call that gave the answer and was stopped before it saved leaves the execution showing the
/// old question while the agent asks a new one: the same answer given again is refused, never
/// taken for the new question.
#[test]
fn an_answer_reaches_only_the_question_it_answers() {
    let server = model();
    let dir = setup(&server);
    dir.write(
        "ask.dy",
        r#"machine "Ask"
Task review @Agent("agents/reviewer") { prompt: "Ask twice."; }
State done;
start -> review -> done;
"#,
    );
    let args = ["e", "-i", "ask.dy", "--id", "a"];
    let first = drive(&dir, &args);
    assert_eq!(first.code, 101, "{first:?}");
    assert!(first.stdout.contains("First?"), "{first:?}");
    let state = dir.exec_dir("a").join("state.json");
    let before = std::fs::read(&state).unwrap();
    let second = dir.run_with_stdin(&args, "one\n");
    assert_eq!(second.code, 101, "{second:?}");
    assert!(second.stdout.contains("Second?"), "{second:?}");
    // As if that call had been killed before its commit.
    std::fs::write(&state, before).unwrap();
    let again = dir.run_with_stdin(&args, "one\n");
    assert_eq!(again.code, 1, "{again:?}");
    assert!(again.stderr.contains("Second?"), "{again:?}");
    let shown = dir.run(&args);
    assert_eq!(shown.code, 101, "{shown:?}");
    assert!(shown.stdout.contains("Second?"), "{shown:?}");
    let end = answer_and_finish(&dir, &args, "two");
    assert_eq!(end.code, 2, "{end:?}");
    // The run got each answer once, in order.
    let journal = std::fs::read_to_string(
        dir.exec_dir("a")
            .join("agents/review/.delta/review-1/journal.jsonl"),
    )
    .unwrap();
    let answers: Vec<&str> = journal
        .lines()
        .filter(|l| l.contains("\"ACTION_RESULT\""))
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let text = v["payload"]["observation_content"].as_str()?.to_string();
            ["one", "two"].into_iter().find(|a| text == *a)
        })
        .collect();
    assert_eq!(answers, ["one", "two"], "{journal}");
}

#[test]
fn an_agent_whose_tools_take_the_machine_tools_names_is_refused() {
    let server = model();
    let dir = setup(&server);
    let yaml = dir.path().join("agents/builder/agent.yaml");
    let text = std::fs::read_to_string(&yaml)
        .unwrap()
        .replace("name: build\n", "name: write_notes\n");
    std::fs::write(&yaml, text).unwrap();
    let first = dir.run(&["e", "-i", "ship.dy", "--id", "c"]);
    assert_eq!(first.code, 0, "start -> build: {first:?}");
    let out = dir.run(&["e", "-i", "ship.dy", "--id", "c"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("write_notes"), "{out:?}");
    assert!(out.stderr.contains("rename"), "{out:?}");
    assert_eq!(server.request_count(), 0);
}

#[test]
fn stepped_a_step_per_call_an_agent_node_runs_its_visit_to_the_end_or_its_question() {
    let server = model();
    let dir = setup(&server);
    let args = ["e", "--step", "ship.dy", "--id", "s"];
    let waiting = drive(&dir, &args);
    assert_eq!(waiting.code, 101, "{waiting:?}");
    assert!(waiting.stdout.contains("Ship it?"), "{waiting:?}");
    let end = answer_and_finish(&dir, &args, "yes");
    assert_eq!(end.code, 2, "{end:?}");
    assert_eq!(tool_runs(dir.path()), 1);
    let state = dir.read_json("s", "state.json");
    assert_eq!(
        state["executionState"]["contextValues"]["notes"],
        json!({"summary": "built", "verdict": "yes"})
    );
}

#[test]
fn a_run_to_the_end_in_one_call_stops_at_an_agent_node_and_says_how_to_step_it() {
    let server = model();
    let dir = setup(&server);
    let out = dir.run(&["e", "ship.dy"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("execute -i"), "{out:?}");
    assert_eq!(server.request_count(), 0);
}

#[test]
fn an_agent_node_without_its_folder_says_so_and_changes_nothing() {
    let server = model();
    let dir = setup(&server);
    std::fs::remove_dir_all(dir.path().join("agents/builder")).unwrap();
    let out = dir.run(&["e", "-i", "ship.dy", "--id", "x"]);
    let out = if out.code == 0 {
        dir.run(&["e", "-i", "ship.dy", "--id", "x"])
    } else {
        out
    };
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("agents/builder"), "{out:?}");
    assert_eq!(server.request_count(), 0);
}

#[test]
fn an_agent_annotation_on_a_state_or_without_a_prompt_is_an_error() {
    let dir = Dir::with_file(
        "bad.dy",
        "machine \"m\"\nState s @Agent(\"a\");\nTask t @Agent(\"a\");\nTask u @Agent { prompt: \"p\"; }\ns -> t -> u;\n",
    );
    let out = dir.run(&["pv", "bad.dy"]);
    assert_ne!(out.code, 0, "{out:?}");
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(all.contains("only be used on task nodes"), "{all}");
    assert!(all.contains("has no prompt"), "{all}");
    assert!(all.contains("needs the agent's folder"), "{all}");
}

/// Kills `dygram e -i` at random moments (bounded trials, seeded), each trial driving its own
/// execution to its end: the builder's tool never runs twice, and every execution completes.
#[test]
fn sigkill_at_random_moments_never_runs_an_agents_tool_twice() {
    let (seed, trials) = testkit::crash_series("DYGRAM", 6);
    eprintln!(
        "agent node kill trials: seed {seed}, {trials} trials (DYGRAM_CRASH_SEED, DYGRAM_CRASH_TRIALS)"
    );
    let mut rng = seed;
    let server = model();
    let limit = Instant::now() + Duration::from_secs(240);
    for trial in 0..trials {
        let dir = setup(&server);
        let args = ["e", "-i", "ship.dy", "--id", "k"];
        let mut last = 0;
        let mut calls = 0;
        loop {
            assert!(
                Instant::now() < limit,
                "trial {trial} (seed {seed}) ran out of time"
            );
            calls += 1;
            assert!(calls < 80, "trial {trial} (seed {seed}): no end");
            rng = next(rng);
            if rng % 3 == 0 {
                // Killed at a random moment of the call.
                let mut child = dir.spawn_command(&args).spawn().unwrap();
                std::thread::sleep(Duration::from_millis(rng % 700));
                let _ = child.kill();
                let _ = child.wait();
                continue;
            }
            // The question is answered by the call after the one that showed it.
            let stdin = if last == 101 { "yes\n" } else { "" };
            let out = dir.run_with_stdin(&args, stdin);
            last = out.code;
            match out.code {
                0 | 101 => {}
                2 => break,
                // A killed call that had saved its work took the answer already.
                1 if out.stderr.contains("it was not used") => {}
                _ => panic!("trial {trial} (seed {seed}): {out:?}"),
            }
        }
        assert!(
            tool_runs(dir.path()) <= 1,
            "trial {trial} (seed {seed}): the tool ran {} times",
            tool_runs(dir.path())
        );
        let state = dir.read_json("k", "state.json");
        assert_eq!(
            state["executionState"]["currentNode"], "done",
            "trial {trial} (seed {seed})"
        );
        // Nothing the agents wrote was lost, the answer included.
        assert_eq!(
            state["executionState"]["contextValues"]["notes"],
            json!({"summary": "built", "verdict": "yes"}),
            "trial {trial} (seed {seed})"
        );
    }
}

fn next(x: u64) -> u64 {
    x.wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
        >> 1
}

/// Over MCP (`dygram mcp`, as another agent reaches dygram): `execute` steps the agents, a
/// question is a waiting report, and `answer` gives it its answer.
#[test]
fn an_mcp_client_steps_agent_nodes_and_answers_their_question() {
    let server = model();
    let dir = setup(&server);
    let mut client = crate::mcp::client(&dir);
    let mut call = |tool: &str, arguments: Value| {
        let result = client
            .call_tool(tool, arguments.as_object().unwrap().clone(), None)
            .unwrap();
        assert!(!result.is_error, "{tool}: {:?}", result.raw);
        result.raw["structuredContent"]["report"].clone()
    };
    let step = json!({"file": "ship.dy", "id": "m"});
    let mut report = call("execute", step.clone());
    for _ in 0..20 {
        if report["status"] != "in_progress" {
            break;
        }
        report = call("execute", step.clone());
    }
    assert_eq!(report["status"], "waiting", "{report}");
    assert_eq!(report["request"]["type"], "agent_question", "{report}");
    assert_eq!(report["request"]["question"], "Ship it?", "{report}");
    let mut report = call(
        "answer",
        json!({"file": "ship.dy", "id": "m", "text": "yes"}),
    );
    for _ in 0..20 {
        if report["status"] != "in_progress" {
            break;
        }
        report = call("execute", step.clone());
    }
    assert_eq!(report["status"], "complete", "{report}");
    assert_eq!(
        report["contextState"]["notes"]["verdict"], "yes",
        "{report}"
    );
    assert_eq!(tool_runs(dir.path()), 1);
}
