//! The engine as a library: `delta::runner` drives whole runs in this process (no `delta` binary).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use delta::agent::Agent;
use delta::connect::{self, ConnectError, Connection, LlmMode};
use delta::engine::{Observer, Progress};
use delta::env::Env;
use delta::metadata::RunStatus;
use delta::runner::{
    Continue, Finished, Host, NewRun, Notice, Options, Request, Runner, RunnerError, WorkspaceRef,
};
use serde_json::json;
use store::{Clock, IdSource};
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use crate::support::{ECHO_AND_WRITE, KEY, NOW, Sandbox, agent_yaml, assert_well_formed, bodies};

/// Connects to the scripted server and keeps what the runner says.
#[derive(Default)]
struct Recorder {
    notices: Vec<String>,
}

impl Host for Recorder {
    fn notice(&mut self, notice: Notice<'_>) {
        let line = match notice {
            Notice::Launching(l) => format!("launching {} resuming={:?}", l.run_id, l.resuming),
            Notice::Continuing { decision, .. } => format!("continuing {decision:?}"),
            other => format!("{other:?}"),
        };
        self.notices.push(line);
    }

    fn connect(
        &mut self,
        agent: &Agent,
        env: &Env,
        ids: IdSource,
    ) -> Result<Connection, ConnectError> {
        connect::connect(&agent.llm, env, &LlmMode::Live, None, clock(), ids)
    }
}

/// Keeps the engine's progress.
#[derive(Default)]
struct Steps(Vec<Progress>);

impl Observer for Steps {
    fn progress(&mut self, event: Progress) {
        self.0.push(event);
    }
}

fn clock() -> Clock {
    Clock::Fixed(NOW.parse().unwrap())
}

/// A process environment of exactly what a run needs: the server, its key, and `PATH` for the tools.
fn options(sb: &Sandbox, server: &ScriptedServer) -> Options {
    options_for(&server.openai_base(), sb.root.path())
}

/// The options of a runner whose model is the server at `base`, working from `root`.
fn options_for(base: &str, root: &Path) -> Options {
    let env = Env::from_pairs([
        ("DELTA_API_KEY".to_string(), KEY.to_string()),
        ("DELTA_BASE_URL".to_string(), base.to_string()),
        ("PATH".to_string(), std::env::var("PATH").unwrap()),
    ]);
    Options {
        max_iterations: None,
        pause_after: None,
        model: None,
        stream_text: false,
        sandbox: None,
        network: None,
        approvals: Default::default(),
        interactive: false,
        env,
        cwd: root.to_path_buf(),
        clock: clock(),
        ids: IdSource::seeded(7),
        interrupt: Arc::new(AtomicBool::new(false)),
        last_workspace_record: Some(root.join("home/.delta/LAST_WORKSPACE")),
        process_ends: false,
        upstream: None,
        depth: 0,
        confine_as: None,
        adopt: false,
    }
}

fn run(
    sb: &Sandbox,
    server: &ScriptedServer,
    request: Request,
) -> (Result<Finished, RunnerError>, Recorder, Steps) {
    let mut host = Recorder::default();
    let mut steps = Steps::default();
    let runner = Runner {
        options: options(sb, server),
        observer: &mut steps,
        human: None,
        host: &mut host,
        tools: None,
    };
    let result = runner.run(request);
    (result, host, steps)
}

fn new_run(sb: &Sandbox, message: &str) -> Request {
    Request::Run(Box::new(NewRun {
        agent: delta::agent::load(&sb.agent()).unwrap(),
        workspace: sb.ws(),
        workspace_name: None,
        next_workspace: false,
        auto_resume: true,
        message: message.into(),
        run_id: None,
    }))
}

fn answer(sb: &Sandbox, message: &str) -> Request {
    Request::Continue(Continue {
        workspace: WorkspaceRef::Dir(sb.ws()),
        run_id: None,
        message: Some(message.into()),
        with_file: None,
        fork_at: None,
    })
}

fn file(ws: &Path, name: &str) -> String {
    std::fs::read_to_string(ws.join(name)).unwrap()
}

#[test]
fn a_whole_run_is_driven_through_the_library() {
    let server = ScriptedServer::start([
        Reply::tool_call(
            "c1",
            "write_to_file",
            json!({"filename": "hello.txt", "content": "hi there"}),
        ),
        Reply::text("Wrote hello.txt."),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let (result, host, steps) = run(&sb, &server, new_run(&sb, "Create hello.txt"));
    let finished = result.unwrap();

    assert_eq!(finished.outcome.status, RunStatus::Completed);
    assert_eq!(
        finished.outcome.final_response.as_deref(),
        Some("Wrote hello.txt.")
    );
    assert_eq!(file(&sb.ws(), "hello.txt"), "hi there");
    assert_eq!(sb.metadata()["status"], "COMPLETED");
    assert_eq!(bodies(&server).len(), 2);
    assert_well_formed(&server);
    // A new run: the folder was made, then the loop started on a run that was not resumed.
    assert!(
        host.notices[0].starts_with("WorkspaceCreated"),
        "{:?}",
        host.notices
    );
    assert!(
        host.notices[1].ends_with("resuming=None"),
        "{:?}",
        host.notices
    );
    assert!(
        steps
            .0
            .iter()
            .any(|p| matches!(p, Progress::ToolDone { success: true, .. })),
        "{:?}",
        steps.0
    );
    // The run was recorded as the last workspace used, in the file the options name.
    assert_eq!(
        file(&sb.path("home/.delta"), "LAST_WORKSPACE"),
        finished.workspace.display().to_string()
    );
}

#[test]
fn a_paused_run_is_answered_and_resumed_through_the_library() {
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new("c1", "ask_human", json!({"prompt": "Which colour?"})),
            ToolCallSpec::new("c2", "echo", json!({"message": "after"})),
        ]),
        Reply::text("Blue it is."),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let (result, _, _) = run(&sb, &server, new_run(&sb, "Ask me"));
    let paused = result.unwrap();
    assert_eq!(paused.outcome.status, RunStatus::WaitingForInput);
    assert_eq!(
        paused
            .outcome
            .interaction
            .as_ref()
            .map(|i| i.prompt.as_str()),
        Some("Which colour?")
    );
    let run_id = paused.run.run_id.clone();
    // The locks of the first run are given back before another runner works in the workspace.
    drop(paused);

    let (result, host, _) = run(&sb, &server, answer(&sb, "Blue"));
    let resumed = result.unwrap();
    assert_eq!(resumed.run.run_id, run_id, "the same run goes on");
    assert_eq!(resumed.outcome.status, RunStatus::Completed);
    assert_eq!(
        resumed.outcome.final_response.as_deref(),
        Some("Blue it is.")
    );
    assert!(
        host.notices
            .iter()
            .any(|n| n == "continuing Answer(\"Blue\")"),
        "{:?}",
        host.notices
    );
    assert!(
        host.notices
            .iter()
            .any(|n| n.ends_with("resuming=Some(WaitingForInput)")),
        "{:?}",
        host.notices
    );
    // The answer is the question's result, and the call after it ran on resume.
    let results: Vec<String> = sb
        .events("ACTION_RESULT")
        .iter()
        .map(|e| {
            e["payload"]["observation_content"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(results[0], "Blue");
    assert!(results[1].contains("after"), "{results:?}");
    assert_well_formed(&server);
}

#[test]
fn a_finished_run_without_a_message_is_refused_with_a_typed_error() {
    let server = ScriptedServer::start([Reply::text("Done.")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let (result, _, _) = run(&sb, &server, new_run(&sb, "Finish"));
    drop(result.unwrap());
    let request = Request::Continue(Continue {
        workspace: WorkspaceRef::Dir(sb.ws()),
        run_id: None,
        message: None,
        with_file: None,
        fork_at: None,
    });
    let (result, _, _) = run(&sb, &server, request);
    let Err(err) = result else {
        panic!("a COMPLETED run was continued without a message")
    };
    assert!(matches!(err, RunnerError::Refused { .. }), "{err:?}");
    assert_eq!(
        err.message(),
        "Run is COMPLETED. To continue, provide a message using -m/--message"
    );
    assert!(!err.is_busy());
    assert_eq!(
        bodies(&server).len(),
        1,
        "nothing more was asked of the model"
    );
}

#[test]
fn a_run_id_that_is_not_a_safe_name_never_reaches_the_filesystem() {
    let server = ScriptedServer::start([Reply::text("never asked")]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let Request::Run(mut new) = new_run(&sb, "Go") else {
        unreachable!()
    };
    new.run_id = Some("../escape".into());
    let (result, host, _) = run(&sb, &server, Request::Run(new));
    let Err(err) = result else {
        panic!("a run id with a path in it was accepted")
    };
    assert!(err.is_usage(), "{err:?}");
    assert!(host.notices.is_empty(), "{:?}", host.notices);
    assert!(!sb.ws().exists(), "nothing was created");
    assert!(!sb.path("escape").exists());
    assert!(bodies(&server).is_empty());
}

/// A runner that pauses after one iteration: how the run stopped (its locks let go).
fn one_turn(sb: &Sandbox, server: &ScriptedServer, request: Request) -> delta::engine::RunOutcome {
    let mut host = Recorder::default();
    let mut steps = Steps::default();
    let mut options = options(sb, server);
    options.pause_after = Some(1);
    let runner = Runner {
        options,
        observer: &mut steps,
        human: None,
        host: &mut host,
        tools: None,
    };
    runner.run(request).unwrap().outcome
}

fn go_on(sb: &Sandbox) -> Request {
    Request::Continue(Continue {
        workspace: WorkspaceRef::Dir(sb.ws()),
        run_id: None,
        message: None,
        with_file: None,
        fork_at: None,
    })
}

#[test]
fn a_run_is_stepped_one_model_turn_per_call_and_its_budget_counts_over_the_calls() {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "echo", json!({"message": "one"})),
        Reply::tool_call("c2", "echo", json!({"message": "two"})),
        Reply::text("Done in three turns."),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let first = one_turn(&sb, &server, new_run(&sb, "Echo twice"));
    assert_eq!(first.status, RunStatus::Interrupted);
    assert_eq!(bodies(&server).len(), 1, "one model turn");
    assert_eq!(sb.events("ACTION_RESULT").len(), 1);
    // A pause is no interruption the model hears about: nothing is journaled for it.
    let kinds: Vec<String> = sb
        .journal()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds.last().unwrap(), "ACTION_RESULT", "{kinds:?}");
    assert_eq!(sb.metadata()["status"], "INTERRUPTED");

    let second = one_turn(&sb, &server, go_on(&sb));
    assert_eq!(second.status, RunStatus::Interrupted);
    assert_eq!(bodies(&server).len(), 2);
    let third = one_turn(&sb, &server, go_on(&sb));
    assert_eq!(third.status, RunStatus::Completed);
    assert_eq!(
        third.final_response.as_deref(),
        Some("Done in three turns.")
    );
    assert_eq!(sb.metadata()["iterations_completed"], 3);
    assert_well_formed(&server);

    // The agent's budget counts over the calls: with max_iterations 2 the second call ends it.
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "echo", json!({"message": "one"})),
        Reply::tool_call("c2", "echo", json!({"message": "two"})),
        Reply::tool_call("c3", "echo", json!({"message": "three"})),
    ]);
    let sb = Sandbox::new(&format!(
        "max_iterations: 2\n{}",
        agent_yaml(ECHO_AND_WRITE)
    ));
    assert_eq!(
        one_turn(&sb, &server, new_run(&sb, "Echo")).status,
        RunStatus::Interrupted
    );
    let last = one_turn(&sb, &server, go_on(&sb));
    assert_eq!(last.status, RunStatus::Completed, "the budget wins");
    assert_eq!(bodies(&server).len(), 2);
}

/// A program's tool: `transition_to_done`, whose calls it keeps (and, with `crash`, dies in).
struct Machine {
    calls: Vec<serde_json::Value>,
    crash: bool,
}

impl delta::engine::HostTools for Machine {
    fn definitions(&self) -> Vec<llm::ToolDefinition> {
        vec![llm::ToolDefinition {
            name: "transition_to_done".into(),
            description: "Move the machine to done.".into(),
            parameters: json!({"type": "object", "properties": {"reason": {"type": "string"}}}),
        }]
    }

    fn call(
        &mut self,
        _name: &str,
        args: &serde_json::Map<String, serde_json::Value>,
    ) -> delta::engine::HostResult {
        if self.crash {
            // The process dies with the call journaled as asked and not answered.
            std::process::abort();
        }
        self.calls.push(serde_json::Value::Object(args.clone()));
        delta::engine::HostResult::ok("moved to done")
    }
}

fn with_machine(
    sb: &Sandbox,
    server: &ScriptedServer,
    machine: &mut Machine,
    request: Request,
) -> delta::engine::RunOutcome {
    let mut host = Recorder::default();
    let mut steps = Steps::default();
    let runner = Runner {
        options: options(sb, server),
        observer: &mut steps,
        human: None,
        host: &mut host,
        tools: Some(machine),
    };
    runner.run(request).unwrap().outcome
}

/// A program's tool that hands the work back (a state machine's transition).
struct HandBack;

impl delta::engine::HostTools for HandBack {
    fn definitions(&self) -> Vec<llm::ToolDefinition> {
        vec![llm::ToolDefinition {
            name: "transition_to_done".into(),
            description: "Move on.".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }]
    }

    fn call(
        &mut self,
        _name: &str,
        _args: &serde_json::Map<String, serde_json::Value>,
    ) -> delta::engine::HostResult {
        delta::engine::HostResult {
            ends_run: true,
            ..delta::engine::HostResult::ok("moved to done")
        }
    }
}

#[test]
fn a_programs_tool_that_hands_the_work_back_ends_the_run_completed() {
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new("c1", "transition_to_done", json!({})),
            ToolCallSpec::new("c2", "echo", json!({"message": "never"})),
        ]),
        Reply::text("never asked"),
    ]);
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let mut host = Recorder::default();
    let mut steps = Steps::default();
    let mut tools = HandBack;
    let runner = Runner {
        options: options(&sb, &server),
        observer: &mut steps,
        human: None,
        host: &mut host,
        tools: Some(&mut tools),
    };
    let outcome = runner.run(new_run(&sb, "Move on")).unwrap().outcome;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.reason, Some(delta::engine::EndReason::Handoff));
    assert_eq!(outcome.final_response.as_deref(), Some("moved to done"));
    assert_eq!(bodies(&server).len(), 1, "the model is not asked again");
    // The call after the hand-back never ran.
    assert_eq!(sb.events("ACTION_RESULT").len(), 1);
    assert_eq!(sb.metadata()["status"], "COMPLETED");
}

const CRASH_VAR: &str = "DELTA_TEST_HOST_TOOL_CRASH_IN";

#[test]
fn a_programs_tools_are_offered_journaled_and_made_again_after_a_crash() {
    let script = || {
        [
            Reply::tool_calls([
                ToolCallSpec::new("c1", "echo", json!({"message": "first"})),
                ToolCallSpec::new("c2", "transition_to_done", json!({"reason": "finished"})),
            ]),
            Reply::text("Moved on."),
        ]
    };
    // The crashing half runs in a process of its own (this test, started again): it dies in the
    // program's tool, after the call was journaled as asked.
    if let (Ok(root), Ok(base)) = (std::env::var(CRASH_VAR), std::env::var("DELTA_BASE_URL")) {
        let root = std::path::PathBuf::from(root);
        let mut options = Options {
            cwd: root.clone(),
            last_workspace_record: None,
            ..options_for(&base, &root)
        };
        options.pause_after = None;
        let mut host = Recorder::default();
        let mut steps = Steps::default();
        let mut machine = Machine {
            calls: Vec::new(),
            crash: true,
        };
        let runner = Runner {
            options,
            observer: &mut steps,
            human: None,
            host: &mut host,
            tools: Some(&mut machine),
        };
        let request = Request::Run(Box::new(NewRun {
            agent: delta::agent::load(&root.join("agent")).unwrap(),
            workspace: root.join("ws"),
            workspace_name: None,
            next_workspace: false,
            auto_resume: true,
            message: "Move on".into(),
            run_id: None,
        }));
        let _ = runner.run(request);
        unreachable!("the program's tool ends this process");
    }
    let server = ScriptedServer::start(script());
    let sb = Sandbox::new(&agent_yaml(ECHO_AND_WRITE));
    let crashed = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "library::a_programs_tools_are_offered_journaled_and_made_again_after_a_crash",
            "--exact",
            "--nocapture",
        ])
        .env(CRASH_VAR, sb.root.path())
        .env("DELTA_BASE_URL", server.openai_base())
        .output()
        .unwrap();
    assert!(!crashed.status.success(), "the first process died");
    assert_eq!(sb.events("ACTION_REQUEST").len(), 2);
    assert_eq!(sb.events("ACTION_RESULT").len(), 1, "the echo's only");

    // Resumed: the echo is not run again, the program's call is made again, once.
    let mut machine = Machine {
        calls: Vec::new(),
        crash: false,
    };
    let outcome = with_machine(&sb, &server, &mut machine, go_on(&sb));
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(machine.calls, [json!({"reason": "finished"})]);
    let offered: Vec<String> = bodies(&server)[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        offered.contains(&"transition_to_done".to_string()),
        "{offered:?}"
    );
    let result = &sb.events("ACTION_RESULT")[1]["payload"];
    assert_eq!(result["observation_content"], "moved to done");
    assert_eq!(result["status"], "SUCCESS");
    assert_well_formed(&server);
}

#[test]
fn a_run_stepped_one_turn_per_call_keeps_its_shell_sessions_between_the_calls() {
    // Sessions are hosted by a delta binary (DELTA_SESSION_HOST, read from the process's
    // environment): the scenario runs in this test started again with it set.
    if std::env::var_os("DELTA_SESSION_HOST").is_none() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "library::a_run_stepped_one_turn_per_call_keeps_its_shell_sessions_between_the_calls",
                "--exact",
                "--nocapture",
            ])
            .env("DELTA_SESSION_HOST", env!("CARGO_BIN_EXE_delta"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("1 passed"), "{text}");
        return;
    }
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "session_start", json!({"id": "work"})),
        Reply::tool_call(
            "c2",
            "session_exec",
            json!({"id": "work", "command": "export X=kept"}),
        ),
        Reply::tool_call(
            "c3",
            "session_exec",
            json!({"id": "work", "command": "echo \"X=$X\""}),
        ),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(&format!("sessions: true\n{}", agent_yaml(ECHO_AND_WRITE)));
    let mut status = one_turn(&sb, &server, new_run(&sb, "Use a session")).status;
    for _ in 0..3 {
        assert_eq!(status, RunStatus::Interrupted);
        status = one_turn(&sb, &server, go_on(&sb)).status;
    }
    assert_eq!(status, RunStatus::Completed);
    let results = sb.events("ACTION_RESULT");
    let last = results[2]["payload"]["observation_content"]
        .as_str()
        .unwrap();
    assert!(
        last.contains("X=kept"),
        "the shell lived through the pauses: {last}"
    );
    // Once the run has ended, its sessions are stopped.
    assert!(sb.metadata()["paused_between_turns"].is_null());
}
