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
            return match done.len() {
                0 => Reply::tool_call(&id, "build", json!({})),
                1 => Reply::tool_call(&id, "write_notes", json!({"data": {"summary": "built"}})),
                _ => Reply::tool_call(&id, "transition_to_review", json!({"reason": "built"})),
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

    let answered = dir.run_with_stdin(&args, "yes, ship it\n");
    assert!(matches!(answered.code, 0 | 2), "{answered:?}");
    let end = if answered.code == 2 {
        answered
    } else {
        drive(&dir, &args)
    };
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
    let answered = offline.run_with_stdin(&replay, "yes, ship it\n");
    let end = if answered.code == 2 {
        answered
    } else {
        drive(&offline, &replay)
    };
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
    }
}

fn next(x: u64) -> u64 {
    x.wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
        >> 1
}
