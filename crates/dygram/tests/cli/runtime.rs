//! Unit-level tests of the runtime (`dygram_runtime`): step rules, limits, start nodes, the tools
//! offered to the model and what they do, the turn API and saved states, barriers, fan-outs,
//! dynamic tools, templates and model selection.
//!
//! Machines are compiled from `.dy` text; the model is the scripted HTTP server of `testkit`, whose
//! received request bodies are inspected.

use serde_json::{Value, json};

use dygram_runtime::executor::{ExecutionEvent, Executor, Options, RuntimeError, TurnOutcome};
use dygram_runtime::state::{ExecutionState, Limits, Path, PathStatus, Status};
use dygram_syntax::source::SourceFile;
use llm::openai::{OpenAiClient, OpenAiConfig};
use llm::{ContentBlock, LlmClient};
use testkit::{Reply, ScriptedServer};

// ---- helpers -------------------------------------------------------------------------------

const NOW: i64 = 1_700_000_000_000;

fn clock() -> i64 {
    NOW
}

fn options() -> Options {
    Options {
        clock,
        ..Options::default()
    }
}

fn compile(text: &str) -> Value {
    let compiled = dygram_core::compile(SourceFile::new("t.dy", text));
    assert!(!compiled.has_errors(), "{:#?}", compiled.diagnostics);
    compiled.json(Default::default())
}

fn client(server: &ScriptedServer) -> OpenAiClient {
    OpenAiClient::new(OpenAiConfig::new(server.openai_base(), None))
}

/// An execution without a model.
fn offline(text: &str) -> Executor<'static> {
    Executor::start(compile(text), None, options()).unwrap()
}

fn start<'c>(text: &str, client: &'c dyn LlmClient, options: Options) -> Executor<'c> {
    Executor::start(compile(text), Some(client), options).unwrap()
}

fn path<'a>(ex: &'a Executor<'_>, id: &str) -> &'a Path {
    ex.state()
        .path(id)
        .unwrap_or_else(|| panic!("no path {id}"))
}

/// `(from, to, transition)` of each transition of a path.
fn history(p: &Path) -> Vec<(String, String, String)> {
    p.history
        .iter()
        .map(|t| (t.from.clone(), t.to.clone(), t.transition.clone()))
        .collect()
}

fn h(from: &str, to: &str, why: &str) -> (String, String, String) {
    (from.to_string(), to.to_string(), why.to_string())
}

fn statuses(ex: &Executor<'_>) -> Vec<(String, String, PathStatus)> {
    ex.state()
        .paths
        .iter()
        .map(|p| (p.id.clone(), p.current_node.clone(), p.status))
        .collect()
}

fn st(id: &str, node: &str, status: PathStatus) -> (String, String, PathStatus) {
    (id.to_string(), node.to_string(), status)
}

/// Tool names offered in a request body.
fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The JSON schema of a tool offered in a request body.
fn schema(body: &Value, name: &str) -> Value {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == name)
        .unwrap_or_else(|| panic!("tool {name} not offered"))["function"]["parameters"]
        .clone()
}

/// `(name, is_error, result)` of every tool call event.
fn tool_events(events: &[ExecutionEvent]) -> Vec<(String, bool, Value)> {
    events
        .iter()
        .filter_map(|e| match e {
            ExecutionEvent::ToolCall {
                name,
                is_error,
                result,
                ..
            } => Some((
                name.clone(),
                *is_error,
                serde_json::from_str(result).unwrap(),
            )),
            _ => None,
        })
        .collect()
}

fn failures(events: &[ExecutionEvent]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            ExecutionEvent::Failed { path, error, .. } => Some((path.clone(), error.clone())),
            _ => None,
        })
        .collect()
}

/// The `tool` messages of a request body: `(tool_call_id, content)`.
fn tool_messages(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn first_message(body: &Value) -> String {
    let m = &body["messages"][0];
    assert_eq!(m["role"], "user", "{body}");
    m["content"].as_str().unwrap().to_string()
}

// ---- 1. step rules -------------------------------------------------------------------------

#[test]
fn single_edges_from_init_state_and_task_without_prompt_are_taken() {
    let mut ex = offline(
        "init a;
         state b;
         task c;
         state d;
         a -> b;
         b -> c;
         c -> d;",
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let p = path(&ex, "path_0");
    assert_eq!(
        history(p),
        [
            h("a", "b", "Single edge from init node"),
            h("b", "c", "Single edge from state node"),
            h("c", "d", "Single edge from task node without prompt"),
        ]
    );
    assert!(
        p.history
            .iter()
            .all(|t| t.timestamp == NOW && t.output.is_none())
    );
    assert_eq!(p.status, PathStatus::Completed);
    assert_eq!(p.current_node, "d");
    // Entries into states are recorded (loop detection), with the injected clock.
    let states: Vec<(&str, i64)> = p
        .state_transitions
        .iter()
        .map(|s| (s.state.as_str(), s.timestamp))
        .collect();
    assert_eq!(states, [("b", NOW), ("d", NOW)]);
    let events = ex.take_events();
    assert_eq!(
        events.last(),
        Some(&ExecutionEvent::Completed {
            path: "path_0".into(),
            node: "d".into()
        })
    );
    assert_eq!(
        events[0],
        ExecutionEvent::Transition {
            path: "path_0".into(),
            from: "a".into(),
            to: "b".into(),
            reason: "Single edge from init node".into()
        }
    );
}

#[test]
fn auto_edge_is_chosen_among_several() {
    let mut ex = offline(
        "state a;
         state b;
         state c;
         a -> b;
         a -@auto-> c;",
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    assert_eq!(
        history(path(&ex, "path_0")),
        [h("a", "c", "@auto annotation")]
    );
}

#[test]
fn auto_edge_with_a_false_condition_is_skipped() {
    let mut ex = offline(
        "context Flags { on: false }
         state a;
         state b;
         state c;
         a -@auto when: \"Flags.on\"-> b;
         a -@auto-> c;",
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    assert_eq!(
        history(path(&ex, "path_0")),
        [h("a", "c", "@auto annotation")]
    );
}

/// Reference §1.5 and §4.2 step 4(b): an `@auto` edge is taken automatically whatever the node's
/// type, before any agent decision.
#[test]
fn auto_edge_from_a_task_with_prompt_is_taken_without_the_model() {
    let server = ScriptedServer::start([]);
    let llm = client(&server);
    let mut ex = start(
        "task t { prompt: \"think\"; }
         state manual;
         state automatic;
         t -> manual;
         t -@auto-> automatic;",
        &llm,
        options(),
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    assert_eq!(
        history(path(&ex, "path_0")),
        [h("t", "automatic", "@auto annotation")]
    );
    assert_eq!(server.request_count(), 0);
}

#[test]
fn first_simple_condition_that_holds_is_taken() {
    let mut ex = offline(
        "context Ctx { mode: \"fast\" }
         state a;
         state slow;
         state fast;
         a -when: \"Ctx.mode == 'slow'\"-> slow;
         a -when: \"Ctx.mode == 'fast'\"-> fast;",
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    assert_eq!(
        history(path(&ex, "path_0")),
        [h("a", "fast", "Simple deterministic condition")]
    );
}

#[test]
fn lone_conditional_edge_that_is_false_fails_the_only_path() {
    let mut ex = offline(
        "context Ctx { go: false }
         state a;
         state b;
         a -when: \"Ctx.go\"-> b;",
    );
    assert_eq!(ex.run(10).unwrap(), Status::Error);
    let p = path(&ex, "path_0");
    assert_eq!(p.status, PathStatus::Failed);
    assert_eq!(p.current_node, "a");
    assert!(p.history.is_empty());
    let error = p.error.clone().unwrap();
    assert_eq!(
        error,
        "No transition available for node: a (every condition is false: b (Ctx.go))"
    );
    assert_eq!(failures(&ex.take_events()), [("path_0".to_string(), error)]);
    assert_eq!(ex.state().metadata.error_count, 1);
}

#[test]
fn condition_with_an_unknown_name_fails_the_path_naming_the_edge() {
    let mut ex = offline(
        "state a;
         state b;
         state c;
         a -when: \"nosuch > 1\"-> b;
         a -> c;",
    );
    assert_eq!(ex.run(10).unwrap(), Status::Error);
    let p = path(&ex, "path_0");
    assert_eq!(p.status, PathStatus::Failed);
    let error = p.error.as_deref().unwrap();
    assert!(
        error.starts_with("Condition of edge a -> b cannot be evaluated: "),
        "{error}"
    );
    assert!(error.contains("nosuch > 1"), "{error}");
    assert!(p.history.is_empty());
}

#[test]
fn condition_with_a_type_error_fails_the_path_naming_the_edge() {
    let mut ex = offline(
        "context Ctx { name: \"Ada\" }
         state a;
         state b;
         a -when: \"Ctx.name > 1\"-> b;",
    );
    assert_eq!(ex.run(10).unwrap(), Status::Error);
    let p = path(&ex, "path_0");
    assert_eq!(p.status, PathStatus::Failed);
    let error = p.error.as_deref().unwrap();
    assert!(
        error.starts_with("Condition of edge a -> b cannot be evaluated: "),
        "{error}"
    );
    assert!(error.contains("Ctx.name > 1"), "{error}");
}

#[test]
fn unless_negates_its_condition() {
    for (go, expected) in [("false", "stay"), ("true", "leave")] {
        let mut ex = offline(&format!(
            "context Ctx {{ go: {go} }}
             state a;
             state stay;
             state leave;
             a -unless: \"Ctx.go\"-> stay;
             a -when: \"Ctx.go\"-> leave;"
        ));
        assert_eq!(ex.run(10).unwrap(), Status::Complete);
        assert_eq!(
            history(path(&ex, "path_0")),
            [h("a", expected, "Simple deterministic condition")],
            "go = {go}"
        );
    }
}

#[test]
fn machine_attributes_are_visible_to_conditions() {
    let mut ex = offline(
        "machine \"M\" { threshold: 3 }
         state a;
         state low;
         state high;
         a -when: \"threshold <= 2\"-> low;
         a -when: \"threshold > 2\"-> high;",
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    assert_eq!(
        history(path(&ex, "path_0")),
        [h("a", "high", "Simple deterministic condition")]
    );
}

#[test]
fn task_with_prompt_and_one_edge_moves_without_the_model() {
    let server = ScriptedServer::start([Reply::text("never asked")]);
    let llm = client(&server);
    let mut ex = start(
        "task t { prompt: \"Say hello\"; }
         state done;
         t -> done;",
        &llm,
        options(),
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    assert_eq!(history(path(&ex, "path_0")), [h("t", "done", "default")]);
    assert_eq!(server.request_count(), 0);
    assert!(
        !ex.take_events()
            .iter()
            .any(|e| matches!(e, ExecutionEvent::LlmCall { .. }))
    );
}

#[test]
fn terminal_node_completes_the_path() {
    let mut ex = offline("state only;");
    assert!(!ex.step().unwrap());
    assert_eq!(statuses(&ex), [st("path_0", "only", PathStatus::Completed)]);
    assert_eq!(ex.status(), Status::Complete);
    assert_eq!(
        ex.take_events(),
        [ExecutionEvent::Completed {
            path: "path_0".into(),
            node: "only".into()
        }]
    );
    assert_eq!(path(&ex, "path_0").node_invocation_counts["only"], 1);
}

#[test]
fn state_with_two_unconditioned_edges_fails_clearly() {
    let mut ex = offline(
        "state a;
         state b;
         state c;
         a -> b;
         a -> c;",
    );
    assert_eq!(ex.run(10).unwrap(), Status::Error);
    let p = path(&ex, "path_0");
    assert_eq!(p.status, PathStatus::Failed);
    let error = p.error.as_deref().unwrap();
    assert!(
        error.starts_with("No transition available for node: a (2 outgoing edges"),
        "{error}"
    );
    assert!(p.history.is_empty());
    // One step: the path fails instead of spinning on the node until a limit.
    assert_eq!(ex.state().metadata.step_count, 1);
}

#[test]
fn module_is_entered_at_its_first_child_and_left_by_its_own_edges() {
    let mut ex = offline(
        "state s;
         state m {
             state m1;
             state m2;
         }
         state out;
         s -> m;
         m -> out;",
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let p = path(&ex, "path_0");
    assert_eq!(
        history(p),
        [
            h(
                "s",
                "m1",
                "Single edge from state node (module entry: m -> m1)"
            ),
            h("m1", "out", "Single edge from state node"),
        ]
    );
    assert_eq!(p.current_node, "out");
}

#[test]
fn module_entry_prefers_a_task_child() {
    let mut ex = offline(
        "state s;
         state m {
             state first;
             task work;
         }
         s -> m;",
    );
    ex.step().unwrap();
    assert_eq!(
        history(path(&ex, "path_0")),
        [h(
            "s",
            "work",
            "Single edge from state node (module entry: m -> work)"
        )]
    );
}

#[test]
fn false_conditions_wait_while_other_paths_run_then_fail() {
    let mut ex = offline(
        "context Flag { open: false }
         state gate;
         state done;
         init w;
         state rest;
         gate -when: \"Flag.open\"-> done;
         w -> rest;",
    );
    assert!(ex.step().unwrap());
    let events = ex.take_events();
    assert_eq!(
        events[0],
        ExecutionEvent::Waiting {
            path: "path_0".into(),
            node: "gate".into(),
            reason: "every outgoing edge of gate has a false condition; waiting for other paths"
                .into()
        }
    );
    assert_eq!(path(&ex, "path_0").status, PathStatus::Active);
    assert_eq!(ex.run(10).unwrap(), Status::Error);
    assert_eq!(
        statuses(&ex),
        [
            st("path_0", "gate", PathStatus::Failed),
            st("path_1", "rest", PathStatus::Completed)
        ]
    );
    assert_eq!(
        path(&ex, "path_0").error.as_deref(),
        Some("No transition available for node: gate (every condition is false: done (Flag.open))")
    );
}

/// A path waiting for a condition that another path makes true re-enters its node at every step,
/// so a `state` waiting four steps is taken for an infinite loop (and any node for a runaway one
/// after `maxNodeInvocations` steps) before the other path gets there.
#[test]
fn waiting_state_goes_on_when_another_path_makes_its_condition_true() {
    let server = ScriptedServer::start([
        Reply::tool_call("w1", "write_Flag", json!({"data": {"open": true}})),
        Reply::tool_call("t1", "transition_to_finish", json!({})),
    ]);
    let llm = client(&server);
    let mut ex = start(
        "context Flag { open: false }
         state gate;
         state done;
         init w;
         task s1;
         task s2;
         task s3;
         task s4;
         task setter { prompt: \"open the gate\"; }
         state finish;
         gate -when: \"Flag.open\"-> done;
         w -> s1;
         s1 -> s2;
         s2 -> s3;
         s3 -> s4;
         s4 -> setter;
         setter -writes-> Flag;
         setter -> finish;",
        &llm,
        options(),
    );
    let status = ex.run(20).unwrap();
    assert_eq!(path(&ex, "path_0").error, None);
    assert_eq!(status, Status::Complete);
    assert_eq!(
        statuses(&ex),
        [
            st("path_0", "done", PathStatus::Completed),
            st("path_1", "finish", PathStatus::Completed)
        ]
    );
}

// ---- 2. limits -----------------------------------------------------------------------------

#[test]
fn machine_max_steps_attribute_fails_the_path() {
    let mut ex = offline(
        "machine \"Loop\" { maxSteps: 3 }
         task a;
         task b;
         a -@auto-> b;
         b -@auto-> a;",
    );
    assert_eq!(ex.state().limits.max_steps, 3);
    assert_eq!(ex.run(100).unwrap(), Status::Error);
    let p = path(&ex, "path_0");
    assert_eq!(p.status, PathStatus::Failed);
    assert_eq!(
        p.error.as_deref(),
        Some("Execution exceeded maximum steps (3)")
    );
    assert_eq!(
        history(p),
        [
            // Rule (a) comes before `@auto`.
            h("a", "b", "Single edge from task node without prompt"),
            h("b", "a", "Single edge from task node without prompt"),
            h("a", "b", "Single edge from task node without prompt"),
        ]
    );
    assert_eq!(ex.state().metadata.step_count, 3);
}

#[test]
fn node_invocation_limit_fails_a_task_loop() {
    let mut ex = Executor::start(
        compile(
            "task a;
             task b;
             a -@auto-> b;
             b -@auto-> a;",
        ),
        None,
        Options {
            limits: Limits {
                max_node_invocations: 4,
                ..Limits::default()
            },
            ..options()
        },
    )
    .unwrap();
    assert_eq!(ex.run(1000).unwrap(), Status::Error);
    let p = path(&ex, "path_0");
    assert_eq!(p.status, PathStatus::Failed);
    assert_eq!(
        p.error.as_deref(),
        Some("Node 'a' exceeded maximum invocation limit (4)")
    );
    assert_eq!(p.node_invocation_counts["a"], 4);
    assert_eq!(p.node_invocation_counts["b"], 4);
    assert_eq!(p.history.len(), 8);
}

#[test]
fn default_invocation_limit_ends_run_of_a_task_loop() {
    let mut ex = offline(
        "task a;
         task b;
         a -@auto-> b;
         b -@auto-> a;",
    );
    assert_eq!(ex.run(10_000).unwrap(), Status::Error);
    assert_eq!(
        path(&ex, "path_0").error.as_deref(),
        Some("Node 'a' exceeded maximum invocation limit (100)")
    );
    assert!(!ex.state().has_active());
}

#[test]
fn state_loop_is_detected() {
    let mut ex = offline(
        "state a;
         state b;
         a -> b;
         b -> a;",
    );
    assert_eq!(ex.run(100).unwrap(), Status::Error);
    let p = path(&ex, "path_0");
    assert_eq!(p.status, PathStatus::Failed);
    assert_eq!(
        p.error.as_deref(),
        Some("Infinite loop detected: a -> b -> a")
    );
    assert_eq!(p.history.len(), 3);
    assert_eq!(ex.state().metadata.step_count, 4);
    let events = ex.take_events();
    assert_eq!(
        failures(&events),
        [(
            "path_0".to_string(),
            "Infinite loop detected: a -> b -> a".to_string()
        )]
    );
}

// ---- 3. start nodes ------------------------------------------------------------------------

#[test]
fn node_named_start_is_the_start() {
    let ex = offline(
        "state a;
         state Start;
         state b;
         a -> b;
         Start -> b;",
    );
    assert_eq!(statuses(&ex), [st("path_0", "Start", PathStatus::Active)]);
}

#[test]
fn start_annotation_marks_the_start() {
    let ex = offline(
        "state a;
         state b @start;
         a -> b;",
    );
    assert_eq!(statuses(&ex), [st("path_0", "b", PathStatus::Active)]);
}

#[test]
fn every_node_without_incoming_edges_starts_a_path() {
    let mut ex = offline(
        "context C { x: 1 }
         init i1;
         init i2;
         state j;
         i1 -> j;
         i2 -> j;",
    );
    assert_eq!(
        statuses(&ex),
        [
            st("path_0", "i1", PathStatus::Active),
            st("path_1", "i2", PathStatus::Active)
        ]
    );
    assert_eq!(ex.state().metadata.next_path, 2);
    assert!(ex.state().paths.iter().all(|p| p.start_time == NOW));
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    assert_eq!(
        statuses(&ex),
        [
            st("path_0", "j", PathStatus::Completed),
            st("path_1", "j", PathStatus::Completed)
        ]
    );
}

#[test]
fn machine_without_nodes_cannot_start() {
    for text in ["machine \"Empty\"", "context C { x: 1 }"] {
        match Executor::start(compile(text), None, options()) {
            Err(e @ RuntimeError::NoStartNodes) => {
                assert_eq!(e.to_string(), "Machine has no start nodes")
            }
            Err(e) => panic!("{text}: unexpected error {e}"),
            Ok(_) => panic!("{text}: started"),
        }
    }
}

// ---- 4. tools offered ----------------------------------------------------------------------

#[test]
fn agent_node_is_offered_transitions_then_context_tools_with_exact_schemas() {
    let server = ScriptedServer::start([Reply::tool_call(
        "c1",
        "transition_to_a",
        json!({"reason": "fine"}),
    )]);
    let llm = client(&server);
    let mut ex = start(
        "context Input { q: \"hi\" }
         context Output { r: \"none\" }
         task t { prompt: \"do it\"; }
         state a;
         state b;
         t -> a;
         t -> b;
         t -writes-> Output;
         t -reads-> Input;
         t -reads-> Output;",
        &llm,
        options(),
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let body = requests[0].json();
    assert_eq!(
        tool_names(&body),
        [
            "transition_to_a",
            "transition_to_b",
            "read_Input",
            "read_Output",
            "write_Output"
        ]
    );
    assert_eq!(
        schema(&body, "transition_to_a"),
        json!({"type":"object","properties":{"reason":{"type":"string","description":"Brief explanation of why this transition was chosen"}}})
    );
    assert_eq!(
        schema(&body, "read_Input"),
        json!({"type":"object","properties":{"fields":{"type":"array","items":{"type":"string"},"description":"Specific fields to read (optional)"}}})
    );
    assert_eq!(
        schema(&body, "write_Output"),
        json!({"type":"object","properties":{"data":{"type":"object","description":"Data to write"}},"required":["data"]})
    );
    let descriptions: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["description"].as_str().unwrap())
        .collect();
    assert_eq!(
        descriptions,
        [
            "Transition to a",
            "Transition to b",
            "Read data from Input context",
            "Read data from Output context",
            "Write data to Output context"
        ]
    );
    // The LlmCall event reports the same tool list.
    let events = ex.take_events();
    let offered = events.iter().find_map(|e| match e {
        ExecutionEvent::LlmCall {
            tools, messages, ..
        } => Some((tools.clone(), *messages)),
        _ => None,
    });
    assert_eq!(offered, Some((tool_names(&body), 1)));
    assert_eq!(
        history(path(&ex, "path_0")),
        [h("t", "a", "agent_decision")]
    );
}

#[test]
fn meta_machine_offers_the_seven_meta_tools_in_order() {
    let server = ScriptedServer::start([Reply::tool_call("c1", "transition_to_a", json!({}))]);
    let llm = client(&server);
    let mut ex = start(
        "machine \"Meta\" @meta
         task t { prompt: \"improve\"; }
         state a;
         t -> a;",
        &llm,
        options(),
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let body = server.requests()[0].json();
    assert_eq!(
        tool_names(&body),
        [
            "transition_to_a",
            "get_machine_definition",
            "update_definition",
            "construct_tool",
            "list_available_tools",
            "propose_tool_improvement",
            "get_tool_nodes",
            "build_tool_from_node"
        ]
    );
    let required = |name: &str| schema(&body, name).get("required").cloned();
    assert_eq!(required("get_machine_definition"), None);
    assert_eq!(
        required("update_definition"),
        Some(json!(["machine", "reason"]))
    );
    assert_eq!(
        required("construct_tool"),
        Some(json!([
            "name",
            "description",
            "input_schema",
            "implementation_strategy",
            "implementation_details"
        ]))
    );
    assert_eq!(required("list_available_tools"), None);
    assert_eq!(
        required("propose_tool_improvement"),
        Some(json!(["tool_name", "rationale", "proposed_changes"]))
    );
    assert_eq!(required("get_tool_nodes"), None);
    assert_eq!(
        required("build_tool_from_node"),
        Some(json!(["tool_name", "strategy"]))
    );
    assert_eq!(
        schema(&body, "construct_tool")["properties"]["implementation_strategy"]["enum"],
        json!(["agent_backed", "code_generation", "composition"])
    );
}

#[test]
fn meta_disabled_on_the_machine_offers_no_meta_tools() {
    // `@meta(false)` would not do: a single-value argument of a machine annotation is dropped by
    // the canonical JSON (as in the reference), leaving a plain `@meta`.
    let server = ScriptedServer::start([Reply::tool_call("c1", "transition_to_a", json!({}))]);
    let llm = client(&server);
    let mut ex = start(
        "machine \"Meta\" @meta(enabled: false)
         context Ctx { x: 1 }
         task t { prompt: \"improve\"; }
         state a;
         t -> a;
         t -reads-> Ctx;",
        &llm,
        options(),
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    assert_eq!(
        tool_names(&server.requests()[0].json()),
        ["transition_to_a", "read_Ctx"]
    );
}

#[test]
fn async_and_map_edges_are_offered_as_spawn_tools() {
    let server = ScriptedServer::start([Reply::tool_call("c1", "transition_to_a", json!({}))]);
    let llm = client(&server);
    let mut ex = start(
        "context Data { items: [1, 2] }
         task t { prompt: \"fan out\"; }
         state a;
         state side;
         state each;
         t -> a;
         t -@async-> side;
         t -@map(Data.items)-> each;",
        &llm,
        options(),
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let body = server.requests()[0].json();
    assert_eq!(
        tool_names(&body),
        [
            "transition_to_a",
            "spawn_async_to_side",
            "map_spawn_to_each"
        ]
    );
    assert_eq!(
        schema(&body, "spawn_async_to_side")["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["reason", "await_result"]
    );
    assert_eq!(
        schema(&body, "map_spawn_to_each")["properties"]["source"]["type"],
        "string"
    );
    // Neither was called: no other path exists.
    assert_eq!(ex.state().paths.len(), 1);
}

// ---- 5. tool behaviour ---------------------------------------------------------------------

#[test]
fn context_tools_unknown_tools_and_the_transition_in_a_conversation() {
    let server = ScriptedServer::start([
        Reply::tool_call("w1", "write_Notes", json!({"data": {"count": 2}})),
        Reply::tool_calls([
            testkit::ToolCallSpec::new("r1", "read_Notes", json!({"fields": ["topic"]})),
            testkit::ToolCallSpec::new("x1", "bogus_tool", json!({})),
        ]),
        Reply::tool_call("t1", "transition_to_done", json!({"reason": "finished"}))
            .with_text("All done"),
    ]);
    let llm = client(&server);
    let mut ex = start(
        "context Notes { topic: \"cats\"; count: 1 }
         task t { prompt: \"work\"; }
         state done;
         state other;
         t -> done;
         t -> other;
         t -writes-> Notes;
         t -reads-> Notes;",
        &llm,
        options(),
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    assert_eq!(server.request_count(), 3);
    // Shallow merge into the context.
    assert_eq!(
        ex.state().context_state["Notes"],
        json!({"topic": "cats", "count": 2})
    );
    let events = ex.take_events();
    let calls = tool_events(&events);
    assert_eq!(calls.len(), 4, "{calls:?}");
    assert_eq!(
        calls[0],
        (
            "write_Notes".to_string(),
            false,
            json!({"success": true, "action": "context_write", "context": "Notes",
                "written": ["count"], "values": {"count": 2}})
        )
    );
    assert_eq!(
        calls[1],
        (
            "read_Notes".to_string(),
            false,
            json!({"success": true, "context": "Notes", "data": {"topic": "cats"}})
        )
    );
    assert_eq!(
        calls[2],
        (
            "bogus_tool".to_string(),
            true,
            json!({"error": "Unknown tool: bogus_tool"})
        )
    );
    assert_eq!(calls[3].0, "transition_to_done");
    assert!(!calls[3].1);
    assert_eq!(calls[3].2["reason"], "finished");
    // The results reach the model in the next request.
    let requests: Vec<Value> = server.requests().iter().map(|r| r.json()).collect();
    assert_eq!(tool_messages(&requests[0]), []);
    let second = tool_messages(&requests[1]);
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].0, "w1");
    assert!(second[0].1.contains("\"context_write\""), "{}", second[0].1);
    let third = tool_messages(&requests[2]);
    assert_eq!(third.len(), 3, "{third:?}");
    assert_eq!(third[1].0, "r1");
    assert_eq!(third[2].0, "x1");
    assert!(
        third[2].1.contains("Unknown tool: bogus_tool"),
        "{}",
        third[2].1
    );
    // The transition ends the turn, with the model's text as output.
    let p = path(&ex, "path_0");
    assert_eq!(history(p), [h("t", "done", "agent_decision")]);
    assert_eq!(p.history[0].output.as_deref(), Some("All done"));
    assert!(events.contains(&ExecutionEvent::Output {
        path: "path_0".into(),
        text: "All done".into()
    }));
    assert!(ex.state().turn_state.is_none());
}

#[test]
fn unknown_tool_result_is_marked_as_an_error_in_the_conversation() {
    let server = ScriptedServer::start([
        Reply::tool_call("x1", "nope", json!({})),
        Reply::tool_call("t1", "transition_to_a", json!({})),
    ]);
    let llm = client(&server);
    let mut ex = start(
        "task t { prompt: \"work\"; }
         state a;
         state b;
         t -> a;
         t -> b;",
        &llm,
        options(),
    );
    assert_eq!(ex.step_turn().unwrap(), TurnOutcome::TurnContinues);
    let turn = ex.state().turn_state.clone().unwrap();
    assert_eq!(
        turn.messages.last().unwrap().content,
        [ContentBlock::tool_result(
            "x1",
            json!({"error": "Unknown tool: nope"}).to_string(),
            true
        )]
    );
    assert_eq!(ex.step_turn().unwrap(), TurnOutcome::TurnEnded);
    assert!(
        tool_messages(&server.requests()[1].json())[0]
            .1
            .contains("Unknown tool: nope")
    );
}

#[test]
fn answer_without_tool_calls_ends_the_turn_without_moving() {
    let server = ScriptedServer::start([Reply::text("Let me think.")]);
    let llm = client(&server);
    let mut ex = start(
        "task t { prompt: \"work\"; }
         state a;
         state b;
         t -> a;
         t -> b;",
        &llm,
        options(),
    );
    assert_eq!(ex.step_turn().unwrap(), TurnOutcome::TurnEnded);
    assert_eq!(server.request_count(), 1);
    let p = path(&ex, "path_0");
    assert_eq!(p.status, PathStatus::Active);
    assert_eq!(p.current_node, "t");
    assert!(p.history.is_empty());
    assert!(ex.state().turn_state.is_none());
    assert_eq!(ex.status(), Status::InProgress);
    let events = ex.take_events();
    assert!(events.contains(&ExecutionEvent::Output {
        path: "path_0".into(),
        text: "Let me think.".into()
    }));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ExecutionEvent::Transition { .. }))
    );
}

#[test]
fn answer_without_tool_calls_at_a_node_without_transitions_completes_it() {
    let server = ScriptedServer::start([Reply::text("Done.")]);
    let llm = client(&server);
    let mut ex = start(
        "context Ctx { x: 1 }
         task t { prompt: \"report\"; }
         t -reads-> Ctx;",
        &llm,
        options(),
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    assert_eq!(tool_names(&server.requests()[0].json()), ["read_Ctx"]);
    assert_eq!(statuses(&ex), [st("path_0", "t", PathStatus::Completed)]);
}

/// The README's order flow: `charge` may only move on once `order.total > 0`.
const ORDER_FLOW: &str = "machine \"Order flow\"
     Context order { total<number>: 0; }
     Task charge \"Charge the card\" { prompt: \"Charge {{ order.total }}\"; }
     State shipped;
     start -> charge -when: 'order.total > 0'-> shipped;
     charge -writes-> order;";

#[test]
fn a_transition_whose_condition_a_write_made_true_is_offered_in_the_same_conversation() {
    let server = ScriptedServer::start([
        Reply::tool_call("w1", "write_order", json!({"data": {"total": 42}})),
        Reply::tool_call("t1", "transition_to_shipped", json!({"reason": "charged"})),
    ]);
    let llm = client(&server);
    let mut ex = start(ORDER_FLOW, &llm, options());
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    // Closed at first (the condition is false), open once the write made it true.
    assert_eq!(tool_names(&requests[0].json()), ["write_order"]);
    assert_eq!(
        tool_names(&requests[1].json()),
        ["transition_to_shipped", "write_order"]
    );
    // The closed transition is named in the prompt with its condition.
    let prompt = first_message(&requests[0].json());
    assert!(prompt.contains("## shipped"), "{prompt}");
    assert!(prompt.contains("order.total > 0"), "{prompt}");
    assert!(!prompt.contains("has no transitions"), "{prompt}");
    assert_eq!(
        statuses(&ex),
        [st("path_0", "shipped", PathStatus::Completed)]
    );
    assert_eq!(ex.state().context_state["order"], json!({"total": 42}));
}

#[test]
fn an_answer_without_tools_at_a_node_whose_transitions_are_closed_does_not_complete_it() {
    let server = ScriptedServer::start([Reply::text("I cannot charge yet.")]);
    let llm = client(&server);
    let mut ex = start(ORDER_FLOW, &llm, options());
    // As the step rules do for a lone path whose edges are all false: it fails, naming them
    // (it is not "completed" as if the node had no transitions).
    assert_eq!(ex.run(10).unwrap(), Status::Error);
    let p = path(&ex, "path_0");
    assert_eq!(p.status, PathStatus::Failed);
    assert_eq!(
        p.error.as_deref(),
        Some(
            "No transition available for node: charge (every condition is false: shipped (order.total > 0))"
        )
    );
}

#[test]
fn a_transition_called_after_a_write_that_closed_it_is_refused() {
    let server = ScriptedServer::start([
        Reply::tool_call("w1", "write_order", json!({"data": {"total": 5}})),
        Reply::tool_calls([
            testkit::ToolCallSpec::new("w2", "write_order", json!({"data": {"total": 0}})),
            testkit::ToolCallSpec::new("t1", "transition_to_shipped", json!({})),
        ]),
        Reply::tool_calls([
            testkit::ToolCallSpec::new("w3", "write_order", json!({"data": {"total": 7}})),
            testkit::ToolCallSpec::new("t2", "transition_to_shipped", json!({})),
        ]),
    ]);
    let llm = client(&server);
    let mut ex = start(ORDER_FLOW, &llm, options());
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let third = server.requests()[2].json();
    let messages = tool_messages(&third);
    let refused = messages.iter().find(|(id, _)| id == "t1").unwrap();
    assert!(refused.1.contains("is not open"), "{}", refused.1);
    assert!(refused.1.contains("order.total > 0"), "{}", refused.1);
    assert_eq!(ex.state().context_state["order"], json!({"total": 7}));
    assert_eq!(
        statuses(&ex),
        [st("path_0", "shipped", PathStatus::Completed)]
    );
}

#[test]
fn writes_to_a_context_are_checked_against_its_declared_attributes() {
    let server = ScriptedServer::start([
        Reply::tool_call("w1", "write_order", json!({"data": {"totl": 5}})),
        Reply::tool_call("w2", "write_order", json!({"data": {"total": "five"}})),
        Reply::tool_call(
            "w3",
            "write_order",
            json!({"data": {"total": 9, "note": "x"}}),
        ),
        Reply::tool_call("w4", "write_order", json!({"data": {"total": 5}})),
        Reply::tool_call("t1", "transition_to_shipped", json!({})),
    ]);
    let llm = client(&server);
    let mut ex = start(ORDER_FLOW, &llm, options());
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let calls = tool_events(&ex.take_events());
    let errors: Vec<(bool, String)> = calls
        .iter()
        .map(|(_, is_error, result)| (*is_error, result.to_string()))
        .collect();
    assert!(errors[0].0, "{errors:?}");
    assert!(
        errors[0].1.contains("totl") && errors[0].1.contains("total"),
        "{errors:?}"
    );
    assert!(errors[1].0, "{errors:?}");
    assert!(errors[1].1.contains("expected number"), "{errors:?}");
    // A write with one undeclared field writes nothing.
    assert!(errors[2].0, "{errors:?}");
    assert!(errors[2].1.contains("note"), "{errors:?}");
    assert!(!errors[3].0, "{errors:?}");
    assert_eq!(ex.state().context_state["order"], json!({"total": 5}));
}

#[test]
fn declared_types_of_context_attributes_are_checked_and_untyped_ones_take_anything() {
    let machine = "context P { n<Integer>: 1; flag<boolean>: false; tags<Array<string>>: [\"a\"]; at<Date?>; free: 1; }
         context Loose;
         task t { prompt: \"work\"; }
         state done;
         t -> done;
         t -writes-> P;
         t -writes-> Loose;";
    let bad = [
        json!({"n": 2.5}),
        json!({"flag": "yes"}),
        json!({"tags": ["a", 1]}),
        json!({"at": "yesterday"}),
        json!({"n": null}),
    ];
    let good = [
        json!({"n": 3, "flag": true, "tags": ["b", "c"]}),
        json!({"at": "2026-01-02T03:04:05Z"}),
        json!({"at": null}),
        json!({"free": {"any": ["shape"]}}),
    ];
    let mut script: Vec<Reply> = bad
        .iter()
        .chain(&good)
        .enumerate()
        .map(|(i, data)| Reply::tool_call(&format!("p{i}"), "write_P", json!({"data": data})))
        .collect();
    script.push(Reply::tool_call(
        "l1",
        "write_Loose",
        json!({"data": {"whatever": 1}}),
    ));
    script.push(Reply::tool_call("t1", "transition_to_done", json!({})));
    let server = ScriptedServer::start(script);
    let llm = client(&server);
    let mut ex = start(machine, &llm, options());
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let calls = tool_events(&ex.take_events());
    let failed: Vec<bool> = calls.iter().map(|(_, e, _)| *e).collect();
    assert_eq!(
        failed,
        [
            true, true, true, true, true, false, false, false, false, false, false
        ],
        "{calls:?}"
    );
    assert_eq!(
        ex.state().context_state["P"],
        json!({"n": 3, "flag": true, "tags": ["b", "c"], "at": null, "free": {"any": ["shape"]}})
    );
    assert_eq!(ex.state().context_state["Loose"], json!({"whatever": 1}));
}

#[test]
fn turn_limit_fails_the_path() {
    let server = ScriptedServer::start([
        Reply::tool_call("r1", "read_Ctx", json!({})),
        Reply::tool_call("r2", "read_Ctx", json!({})),
        Reply::tool_call("t1", "transition_to_a", json!({})),
    ]);
    let llm = client(&server);
    let mut ex = start(
        "context Ctx { x: 1 }
         task t { prompt: \"work\"; }
         state a;
         state b;
         t -> a;
         t -> b;
         t -reads-> Ctx;",
        &llm,
        Options {
            limits: Limits {
                max_turns: 2,
                ..Limits::default()
            },
            ..options()
        },
    );
    assert_eq!(ex.run(10).unwrap(), Status::Error);
    assert_eq!(server.request_count(), 2);
    let p = path(&ex, "path_0");
    assert_eq!(p.status, PathStatus::Failed);
    assert_eq!(p.error.as_deref(), Some("Turn limit reached (2 turns)"));
    assert!(ex.state().turn_state.is_none());
}

// ---- 6. the turn API and saved states ------------------------------------------------------

const TURN_MACHINE: &str = "context Ctx { x: 1 }
     init begin;
     task t { prompt: \"work\"; }
     state a;
     state b;
     begin -> t;
     t -> a;
     t -> b;
     t -reads-> Ctx;";

fn turn_script() -> [Reply; 3] {
    [
        Reply::tool_call("r1", "read_Ctx", json!({})),
        Reply::tool_call("r2", "read_Ctx", json!({"fields": ["x"]})).with_text("x is 1"),
        Reply::tool_call("t1", "transition_to_b", json!({"reason": "ok"})),
    ]
}

#[test]
fn step_turn_makes_one_request_per_call() {
    let server = ScriptedServer::start(turn_script());
    let llm = client(&server);
    let mut ex = start(TURN_MACHINE, &llm, options());
    // The init node needs no model.
    assert_eq!(ex.step_turn().unwrap(), TurnOutcome::Stepped);
    assert_eq!(server.request_count(), 0);
    assert_eq!(path(&ex, "path_0").current_node, "t");
    let mut counts = Vec::new();
    let mut outcomes = Vec::new();
    let mut messages = Vec::new();
    for _ in 0..3 {
        outcomes.push(ex.step_turn().unwrap());
        counts.push(server.request_count());
        messages.push(ex.state().turn_state.as_ref().map(|t| t.messages.len()));
    }
    assert_eq!(
        outcomes,
        [
            TurnOutcome::TurnContinues,
            TurnOutcome::TurnContinues,
            TurnOutcome::TurnEnded
        ]
    );
    assert_eq!(counts, [1, 2, 3]);
    assert_eq!(messages, [Some(3), Some(5), None]);
    assert_eq!(path(&ex, "path_0").current_node, "b");
    // `b` is terminal: one step without the model, then nothing left.
    assert_eq!(ex.step_turn().unwrap(), TurnOutcome::Stepped);
    assert_eq!(ex.step_turn().unwrap(), TurnOutcome::Idle);
    assert_eq!(server.request_count(), 3);
    assert_eq!(ex.status(), Status::Complete);
}

#[test]
fn saved_state_resumes_the_open_conversation_identically() {
    // Straight through.
    let straight = ScriptedServer::start(turn_script());
    let straight_llm = client(&straight);
    let mut ex = start(TURN_MACHINE, &straight_llm, options());
    while ex.step_turn().unwrap() != TurnOutcome::Idle {}
    let straight_state = ex.into_state();

    // Saved to JSON and resumed after every turn.
    let saved = ScriptedServer::start(turn_script());
    let saved_llm = client(&saved);
    let mut state: ExecutionState = start(TURN_MACHINE, &saved_llm, options()).into_state();
    let mut outcomes = Vec::new();
    let mut open = Vec::new();
    loop {
        let text = serde_json::to_string(&state).unwrap();
        open.push(text.contains("\"turnState\""));
        let back: ExecutionState = serde_json::from_str(&text).unwrap();
        assert_eq!(back, state);
        let mut ex = Executor::resume(back, Some(&saved_llm), options());
        let outcome = ex.step_turn().unwrap();
        outcomes.push(outcome);
        state = ex.into_state();
        if outcome == TurnOutcome::Idle {
            break;
        }
    }
    assert_eq!(
        outcomes,
        [
            TurnOutcome::Stepped,
            TurnOutcome::TurnContinues,
            TurnOutcome::TurnContinues,
            TurnOutcome::TurnEnded,
            TurnOutcome::Stepped,
            TurnOutcome::Idle
        ]
    );
    // The conversation was open (saved in the file) before the second and third round trips.
    assert_eq!(open, [false, false, true, true, false, false]);
    let bodies = |s: &ScriptedServer| s.requests().iter().map(|r| r.json()).collect::<Vec<_>>();
    let resumed = bodies(&saved);
    assert_eq!(resumed.len(), 3);
    assert_eq!(resumed, bodies(&straight));
    let lengths: Vec<usize> = resumed
        .iter()
        .map(|b| b["messages"].as_array().unwrap().len())
        .collect();
    assert_eq!(lengths, [1, 3, 5]);
    // Same end state, elapsed time aside.
    let mut a = straight_state;
    let mut b = state;
    a.metadata.elapsed_time = 0;
    b.metadata.elapsed_time = 0;
    assert_eq!(a, b);
    assert_eq!(
        history(&b.paths[0]),
        [
            h("begin", "t", "Single edge from init node"),
            h("t", "b", "agent_decision")
        ]
    );
    assert_eq!(b.paths[0].history[1].output.as_deref(), Some("x is 1"));
}

#[test]
fn saved_state_json_uses_the_reference_field_names() {
    let server = ScriptedServer::start(turn_script());
    let llm = client(&server);
    let mut ex = start(TURN_MACHINE, &llm, options());
    ex.step_turn().unwrap();
    ex.step_turn().unwrap();
    let v = serde_json::to_value(ex.state()).unwrap();
    assert_eq!(v["version"], "2.0.0");
    assert_eq!(v["turnState"]["pathId"], "path_0");
    assert_eq!(v["turnState"]["nodeName"], "t");
    assert_eq!(v["turnState"]["turnCount"], 1);
    assert_eq!(v["paths"][0]["currentNode"], "t");
    assert_eq!(v["paths"][0]["status"], "active");
    assert_eq!(
        v["paths"][0]["nodeInvocationCounts"],
        json!({"begin": 1, "t": 1})
    );
    assert_eq!(v["contextState"], json!({"Ctx": {"x": 1}}));
    assert_eq!(v["metadata"]["startTime"], NOW);
    assert_eq!(ex.status(), Status::Paused);
}

// ---- 7. barriers ---------------------------------------------------------------------------

const BARRIER_MACHINE: &str = "init a;
     init b;
     state meet;
     state after;
     a -ANN-> meet;
     b -ANN-> meet;
     meet -> after;";

#[test]
fn barrier_holds_the_first_arrival_and_releases_both() {
    let mut ex = offline(&BARRIER_MACHINE.replace("ANN", "@barrier(\"sync\")"));
    assert!(ex.step().unwrap());
    assert_eq!(
        statuses(&ex),
        [
            st("path_0", "a", PathStatus::Active),
            st("path_1", "meet", PathStatus::Active)
        ]
    );
    let events = ex.take_events();
    assert_eq!(
        events[0],
        ExecutionEvent::Waiting {
            path: "path_0".into(),
            node: "a".into(),
            reason: "at barrier sync".into()
        }
    );
    let barrier = &ex.state().barriers["sync"];
    assert_eq!(barrier.required_paths, ["path_0", "path_1"]);
    assert_eq!(barrier.waiting_paths, ["path_0", "path_1"]);
    assert!(barrier.is_released);
    assert!(!barrier.merge);
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    assert_eq!(
        statuses(&ex),
        [
            st("path_0", "after", PathStatus::Completed),
            st("path_1", "after", PathStatus::Completed)
        ]
    );
    assert_eq!(
        history(path(&ex, "path_0"))[0],
        h("a", "meet", "Single edge from init node")
    );
}

/// A transition the model chose into a barrier is held; once the barrier opens, the turn API
/// makes it without asking the model again.
#[test]
fn a_choice_held_at_a_barrier_is_made_once_it_opens_without_a_second_conversation() {
    let server = ScriptedServer::start([Reply::tool_call("t1", "transition_to_meet", json!({}))]);
    let llm = client(&server);
    let mut ex = start(
        "task a { prompt: \"go\"; }
         init b;
         state c;
         state meet;
         state after;
         state other;
         a -@barrier(\"sync\")-> meet;
         a -> other;
         b -> c;
         c -@barrier(\"sync\")-> meet;
         meet -> after;",
        &llm,
        options(),
    );
    while ex.step_turn().unwrap() != TurnOutcome::Idle {}
    assert_eq!(ex.status(), Status::Complete);
    assert_eq!(server.requests().len(), 1, "one conversation");
    assert_eq!(path(&ex, "path_0").current_node, "after");
}

#[test]
fn barrier_first_arrival_waits_when_stepping_path_by_path() {
    let mut ex = offline(&BARRIER_MACHINE.replace("ANN", "@barrier(\"sync\")"));
    assert!(ex.step_path().unwrap());
    assert_eq!(
        statuses(&ex),
        [
            st("path_0", "a", PathStatus::Waiting),
            st("path_1", "b", PathStatus::Active)
        ]
    );
    assert_eq!(
        ex.take_events(),
        [ExecutionEvent::Waiting {
            path: "path_0".into(),
            node: "a".into(),
            reason: "at barrier sync".into()
        }]
    );
    assert_eq!(ex.status(), Status::InProgress);
    assert!(!ex.state().barriers["sync"].is_released);
    assert!(ex.step_path().unwrap());
    assert_eq!(
        statuses(&ex),
        [
            st("path_0", "a", PathStatus::Active),
            st("path_1", "meet", PathStatus::Active)
        ]
    );
    assert_eq!(ex.run(20).unwrap(), Status::Complete);
    assert_eq!(path(&ex, "path_0").current_node, "after");
    assert_eq!(path(&ex, "path_1").current_node, "after");
}

#[test]
fn merge_barrier_lets_only_the_last_arrival_go_on() {
    for ann in [
        "@merge(\"sync\")",
        "@join(\"sync\")",
        "@barrier(id: sync; merge: true)",
    ] {
        let mut ex = offline(&BARRIER_MACHINE.replace("ANN", ann));
        assert_eq!(ex.run(10).unwrap(), Status::Complete, "{ann}");
        assert_eq!(
            statuses(&ex),
            [
                st("path_0", "a", PathStatus::Completed),
                st("path_1", "after", PathStatus::Completed)
            ],
            "{ann}"
        );
        assert!(path(&ex, "path_0").history.is_empty(), "{ann}");
        assert!(ex.state().barriers["sync"].merge, "{ann}");
    }
}

/// A model's transition that waits at a barrier is the decision of that visit: once released, the
/// path takes it without asking the model again.
#[test]
fn agent_decision_held_at_a_barrier_is_not_asked_again() {
    let server = ScriptedServer::start([Reply::tool_call("t1", "transition_to_meet", json!({}))]);
    let llm = client(&server);
    let mut ex = start(
        "task t { prompt: \"choose\"; }
         init a;
         state x;
         state meet;
         state after;
         t -@barrier(\"sync\")-> meet;
         t -> x;
         a -@barrier(\"sync\")-> meet;
         meet -> after;",
        &llm,
        options(),
    );
    let status = ex.run(10).map_err(|e| e.to_string());
    assert_eq!(status, Ok(Status::Complete));
    assert_eq!(server.request_count(), 1);
    assert_eq!(
        history(path(&ex, "path_0"))[0],
        h("t", "meet", "agent_decision")
    );
}

// ---- 8. @map fan-out -----------------------------------------------------------------------

#[test]
fn map_edge_fans_out_one_path_per_item() {
    let mut ex = offline(
        "context Data { items: [\"a\", \"b\", \"c\"] }
         state fan;
         state work;
         fan -@map(Data.items)-> work;",
    );
    assert!(ex.step().unwrap());
    assert_eq!(
        statuses(&ex),
        [
            st("path_0", "fan", PathStatus::Completed),
            st("path_1", "work", PathStatus::Active),
            st("path_2", "work", PathStatus::Active),
            st("path_3", "work", PathStatus::Active)
        ]
    );
    for (i, item) in ["a", "b", "c"].iter().enumerate() {
        let m = path(&ex, &format!("path_{}", i + 1))
            .map_context
            .clone()
            .unwrap();
        assert_eq!(m.item, json!(item));
        assert_eq!(m.index, i);
        assert_eq!(m.group_id, "Data_items");
        assert_eq!(m.map_source, "Data.items");
        assert_eq!(m.source_path_id, "path_0");
    }
    let spawned: Vec<ExecutionEvent> = ex
        .take_events()
        .into_iter()
        .filter(|e| matches!(e, ExecutionEvent::Spawned { .. }))
        .collect();
    assert_eq!(
        spawned,
        (1..=3)
            .map(|i| ExecutionEvent::Spawned {
                path: format!("path_{i}"),
                node: "work".into(),
                parent: "path_0".into()
            })
            .collect::<Vec<_>>()
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
}

#[test]
fn map_group_argument_names_the_group() {
    let mut ex = offline(
        "context Data { items: [1, 2] }
         state fan;
         state work;
         fan -@map(items: \"Data.items\"; group: batch)-> work;",
    );
    ex.step().unwrap();
    let groups: Vec<String> = ex
        .state()
        .paths
        .iter()
        .filter_map(|p| p.map_context.as_ref().map(|m| m.group_id.clone()))
        .collect();
    assert_eq!(groups, ["batch", "batch"]);
}

#[test]
fn map_paths_see_their_item_in_conditions() {
    let mut ex = offline(
        "context Data { items: [\"a\", \"b\", \"c\"] }
         state fan;
         state work;
         state special;
         state normal;
         fan -@map(Data.items)-> work;
         work -when: \"_mapItem == 'b' && _mapIndex == 1\"-> special;
         work -unless: \"_mapItem == 'b'\"-> normal;",
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    assert_eq!(
        statuses(&ex),
        [
            st("path_0", "fan", PathStatus::Completed),
            st("path_1", "normal", PathStatus::Completed),
            st("path_2", "special", PathStatus::Completed),
            st("path_3", "normal", PathStatus::Completed)
        ]
    );
}

#[test]
fn map_source_that_is_not_an_array_fails_the_path() {
    let mut ex = offline(
        "context Data { items: \"nope\" }
         state fan;
         state work;
         fan -@map(Data.items)-> work;",
    );
    assert_eq!(ex.run(10).unwrap(), Status::Error);
    let p = path(&ex, "path_0");
    assert_eq!(
        p.error.as_deref(),
        Some("Source \"Data.items\" is not an array (got string)")
    );
    assert_eq!(p.status, PathStatus::Failed);
    assert_eq!(ex.state().paths.len(), 1);
}

/// What happens today: the error is recorded (event, path error, error count), but not the status.
#[test]
fn map_source_that_is_not_an_array_is_reported() {
    let mut ex = offline(
        "context Data { items: \"nope\" }
         state fan;
         state work;
         fan -@map(Data.items)-> work;",
    );
    ex.run(10).unwrap();
    let p = path(&ex, "path_0");
    assert_eq!(
        p.error.as_deref(),
        Some("Source \"Data.items\" is not an array (got string)")
    );
    assert_eq!(ex.state().paths.len(), 1);
    assert_eq!(ex.state().metadata.error_count, 1);
    assert_eq!(
        failures(&ex.take_events()),
        [(
            "path_0".to_string(),
            "Source \"Data.items\" is not an array (got string)".to_string()
        )]
    );
}

#[test]
fn map_spawn_tool_fans_out_through_the_model() {
    let server = ScriptedServer::start([
        Reply::tool_call("m1", "map_spawn_to_each", json!({"reason": "all of them"})),
        Reply::tool_call("m2", "map_spawn_to_each", json!({"source": "Data.nothing"})),
        Reply::tool_call("t1", "transition_to_done", json!({})),
    ]);
    let llm = client(&server);
    let mut ex = start(
        "context Data { items: [10, 20, 30]; nothing: 5 }
         task t { prompt: \"fan out\"; }
         state done;
         state each;
         t -> done;
         t -@map(Data.items)-> each;",
        &llm,
        options(),
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let calls = tool_events(&ex.take_events());
    assert_eq!(
        calls[0],
        (
            "map_spawn_to_each".to_string(),
            false,
            json!({"success": true, "action": "map_spawn", "target": "each",
                "groupId": "Data_items", "count": 3,
                "pathIds": ["path_1", "path_2", "path_3"]})
        )
    );
    assert_eq!(
        calls[1],
        (
            "map_spawn_to_each".to_string(),
            true,
            json!({"error": "Source \"Data.nothing\" is not an array (got number)"})
        )
    );
    let items: Vec<Value> = ex
        .state()
        .paths
        .iter()
        .filter_map(|p| p.map_context.as_ref().map(|m| m.item.clone()))
        .collect();
    assert_eq!(items, [json!(10), json!(20), json!(30)]);
    assert_eq!(
        statuses(&ex),
        [
            st("path_0", "done", PathStatus::Completed),
            st("path_1", "each", PathStatus::Completed),
            st("path_2", "each", PathStatus::Completed),
            st("path_3", "each", PathStatus::Completed)
        ]
    );
}

// ---- 9. async ------------------------------------------------------------------------------

#[test]
fn all_async_edges_fork_one_path_per_target() {
    let mut ex = offline(
        "state fork;
         state x;
         state y;
         fork -@async-> x;
         fork -@async-> y;",
    );
    assert!(ex.step().unwrap());
    assert_eq!(
        statuses(&ex),
        [
            st("path_0", "fork", PathStatus::Completed),
            st("path_1", "x", PathStatus::Active),
            st("path_2", "y", PathStatus::Active)
        ]
    );
    let events = ex.take_events();
    assert_eq!(
        events,
        [
            ExecutionEvent::Spawned {
                path: "path_1".into(),
                node: "x".into(),
                parent: "path_0".into()
            },
            ExecutionEvent::Spawned {
                path: "path_2".into(),
                node: "y".into(),
                parent: "path_0".into()
            },
            ExecutionEvent::Completed {
                path: "path_0".into(),
                node: "fork".into()
            }
        ]
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
}

#[test]
fn async_edge_with_a_false_condition_spawns_nothing() {
    let mut ex = offline(
        "context Ctx { go: false }
         state fork;
         state x;
         state y;
         fork -@async when: \"Ctx.go\"-> x;
         fork -@async-> y;",
    );
    ex.step().unwrap();
    assert_eq!(
        statuses(&ex),
        [
            st("path_0", "fork", PathStatus::Completed),
            st("path_1", "y", PathStatus::Active)
        ]
    );
}

#[test]
fn spawn_tool_starts_a_path_and_the_caller_goes_on() {
    let server = ScriptedServer::start([
        Reply::tool_call("s1", "spawn_async_to_side", json!({"reason": "background"})),
        Reply::tool_call("t1", "transition_to_a", json!({})),
    ]);
    let llm = client(&server);
    let mut ex = start(
        "task t { prompt: \"go\"; }
         state a;
         state side;
         t -> a;
         t -@async-> side;",
        &llm,
        options(),
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let calls = tool_events(&ex.take_events());
    assert_eq!(
        calls[0].2,
        json!({"success": true, "action": "spawn_async", "pathId": "path_1",
            "target": "side", "status": "spawned", "reason": "background"})
    );
    assert_eq!(
        statuses(&ex),
        [
            st("path_0", "a", PathStatus::Completed),
            st("path_1", "side", PathStatus::Completed)
        ]
    );
}

// ---- 10. dynamic tools ---------------------------------------------------------------------

const META_MACHINE: &str = "machine \"Builder\" @meta
     task t { prompt: \"build\"; }
     state done;
     t -> done;";

fn construct(name: &str, code: &str) -> Reply {
    Reply::tool_call(
        "c1",
        "construct_tool",
        json!({
            "name": name,
            "description": "A tool",
            "input_schema": {"type": "object", "properties": {"n": {"type": "number"}}},
            "implementation_strategy": "code_generation",
            "implementation_details": code,
        }),
    )
}

#[test]
fn updated_definition_takes_effect_at_once() {
    let updated = compile(
        "machine \"Builder\" @meta
         task t { prompt: \"build\"; }
         state done;
         state extra;
         t -> done;
         done -> extra;",
    );
    let server = ScriptedServer::start([
        Reply::tool_call(
            "u1",
            "update_definition",
            json!({"machine": updated, "reason": "one more step"}),
        ),
        Reply::tool_call("t1", "transition_to_done", json!({})),
    ]);
    let llm = client(&server);
    let mut ex = start(META_MACHINE, &llm, options());
    assert!(!ex.machine_changed());
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    assert!(
        ex.machine_changed(),
        "a saved execution must write machine.json again"
    );
    assert!(ex.machine().node("extra").is_some());
    // The new edge out of `done` is followed: the runtime uses the new machine, not the old one.
    assert_eq!(
        history(path(&ex, "path_0")),
        [
            h("t", "done", "agent_decision"),
            h("done", "extra", "Single edge from state node")
        ]
    );
}

#[test]
fn constructed_tool_is_offered_next_and_runs() {
    let server = ScriptedServer::start([
        construct("double", "return n * 2;"),
        Reply::tool_call("d1", "double", json!({"n": 21})),
        Reply::tool_call("t1", "transition_to_done", json!({})),
    ]);
    let llm = client(&server);
    let mut ex = start(META_MACHINE, &llm, options());
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let bodies: Vec<Value> = server.requests().iter().map(|r| r.json()).collect();
    assert_eq!(bodies.len(), 3);
    assert!(!tool_names(&bodies[0]).contains(&"double".to_string()));
    let second = tool_names(&bodies[1]);
    assert_eq!(second.last().map(String::as_str), Some("double"));
    assert_eq!(second.len(), 9);
    assert_eq!(
        schema(&bodies[1], "double"),
        json!({"type": "object", "properties": {"n": {"type": "number"}}})
    );
    let calls = tool_events(&ex.take_events());
    assert_eq!(calls[0].0, "construct_tool");
    assert!(!calls[0].1, "{:?}", calls[0]);
    assert_eq!(calls[0].2["success"], true);
    assert_eq!(
        calls[1],
        (
            "double".to_string(),
            false,
            json!({"success": true, "result": 42})
        )
    );
    let tools = &ex.state().dynamic_tools;
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "double");
    assert_eq!(tools[0].strategy, "code_generation");
    assert_eq!(tools[0].implementation, "return n * 2;");
    // The tool is kept in the machine as a `tool` node.
    let node = ex.state().machine_snapshot["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "double")
        .cloned()
        .unwrap();
    assert_eq!(node["type"], "tool");
    assert_eq!(
        history(path(&ex, "path_0")),
        [h("t", "done", "agent_decision")]
    );
}

#[test]
fn constructed_tool_that_never_ends_returns_an_error_and_the_execution_goes_on() {
    let server = ScriptedServer::start([
        construct("spin", "while (true) {}"),
        Reply::tool_call("s1", "spin", json!({"n": 1})),
        Reply::tool_call("t1", "transition_to_done", json!({})),
    ]);
    let llm = client(&server);
    let mut ex = start(
        META_MACHINE,
        &llm,
        Options {
            js_limits: dygram_runtime::js::Limits {
                time: std::time::Duration::from_millis(200),
                ..Default::default()
            },
            ..options()
        },
    );
    let started = std::time::Instant::now();
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let calls = tool_events(&ex.take_events());
    assert_eq!(calls[1].0, "spin");
    assert!(calls[1].1, "{:?}", calls[1]);
    let error = calls[1].2["error"].as_str().unwrap();
    assert!(error.starts_with("Tool spin failed: "), "{error}");
    assert!(error.contains("did not finish"), "{error}");
    // The error reached the model, which went on.
    assert!(
        tool_messages(&server.requests()[2].json())
            .iter()
            .any(|(id, content)| id == "s1" && content.contains("Tool spin failed"))
    );
    assert_eq!(path(&ex, "path_0").current_node, "done");
}

#[test]
fn constructed_tool_cannot_require_modules() {
    let server = ScriptedServer::start([
        construct(
            "peek",
            "return require('fs').readFileSync('/etc/passwd', 'utf8');",
        ),
        Reply::tool_call("p1", "peek", json!({})),
        Reply::tool_call("t1", "transition_to_done", json!({})),
    ]);
    let llm = client(&server);
    let mut ex = start(META_MACHINE, &llm, options());
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let calls = tool_events(&ex.take_events());
    assert_eq!(calls[1].0, "peek");
    assert!(calls[1].1, "{:?}", calls[1]);
    let error = calls[1].2["error"].as_str().unwrap();
    assert!(
        error.starts_with("Tool peek failed: the code threw: "),
        "{error}"
    );
    assert!(error.contains("require"), "{error}");
    assert!(!error.contains("root:"), "{error}");
}

#[test]
fn construct_tool_refuses_reserved_names() {
    let server = ScriptedServer::start([
        construct("transition_to_x", "return 1;"),
        Reply::tool_call("t1", "transition_to_done", json!({})),
    ]);
    let llm = client(&server);
    let mut ex = start(META_MACHINE, &llm, options());
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let calls = tool_events(&ex.take_events());
    assert_eq!(
        calls[0],
        (
            "construct_tool".to_string(),
            true,
            json!({"error": "Tool name \"transition_to_x\" is reserved"})
        )
    );
    assert!(ex.state().dynamic_tools.is_empty());
}

// ---- 11. templates -------------------------------------------------------------------------

#[test]
fn prompt_templates_are_expanded_in_the_first_message() {
    let server = ScriptedServer::start([Reply::tool_call("t1", "transition_to_done", json!({}))]);
    let llm = client(&server);
    let mut ex = start(
        "context Doc { title: \"Rust\"; pages: 3 }
         task t { prompt: \"Summarise {{ Doc.title }} ({{Doc.pages}} pages), not {{ Doc.missing }}\"; }
         state done;
         t -> done;
         t -reads-> Doc;",
        &llm,
        options(),
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let first = first_message(&server.requests()[0].json());
    assert!(
        first.contains("- **Objective**: Summarise Rust (3 pages), not {{ Doc.missing }}\n"),
        "{first}"
    );
    assert!(!first.contains("{{ Doc.title }}"), "{first}");
}

#[test]
fn prompt_templates_see_values_written_during_the_execution() {
    let server = ScriptedServer::start([
        Reply::tool_call("w1", "write_Doc", json!({"data": {"title": "Go"}})),
        Reply::tool_call("t1", "transition_to_next", json!({})),
        Reply::tool_call("t2", "transition_to_done", json!({})),
    ]);
    let llm = client(&server);
    let mut ex = start(
        "context Doc { title: \"Rust\" }
         task first { prompt: \"Rename {{ Doc.title }}\"; }
         task next { prompt: \"Now {{ Doc.title }}\"; }
         state done;
         first -> next;
         first -writes-> Doc;
         next -> done;
         next -reads-> Doc;",
        &llm,
        options(),
    );
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let bodies: Vec<Value> = server.requests().iter().map(|r| r.json()).collect();
    assert!(first_message(&bodies[0]).contains("- **Objective**: Rename Rust\n"));
    assert!(first_message(&bodies[2]).contains("- **Objective**: Now Go\n"));
}

// ---- 12. models ----------------------------------------------------------------------------

const MODEL_MACHINE: &str = "task t { prompt: \"pick\"; modelId: \"node-model\"; }
     state a;
     state b;
     t -> a;
     t -> b;";

fn model_sent(text: &str, options: Options) -> String {
    let server = ScriptedServer::start([Reply::tool_call("t1", "transition_to_a", json!({}))]);
    let llm = client(&server);
    let mut ex = start(text, &llm, options);
    assert_eq!(ex.run(10).unwrap(), Status::Complete);
    let model = server.requests()[0].json()["model"]
        .as_str()
        .unwrap()
        .to_string();
    let event_model = ex.take_events().into_iter().find_map(|e| match e {
        ExecutionEvent::LlmCall { model, .. } => Some(model),
        _ => None,
    });
    assert_eq!(event_model.as_deref(), Some(model.as_str()));
    model
}

#[test]
fn node_model_id_is_used() {
    assert_eq!(model_sent(MODEL_MACHINE, options()), "node-model");
}

#[test]
fn command_line_model_wins_over_the_node_model_id() {
    assert_eq!(
        model_sent(
            MODEL_MACHINE,
            Options {
                model: Some("cli-model".into()),
                ..options()
            }
        ),
        "cli-model"
    );
}

#[test]
fn machine_model_id_and_the_default_model_apply_otherwise() {
    let plain = "task t { prompt: \"pick\"; }
         state a;
         state b;
         t -> a;
         t -> b;";
    assert_eq!(
        model_sent(
            &format!("machine \"M\" {{ modelId: \"machine-model\" }}\n{plain}"),
            options()
        ),
        "machine-model"
    );
    assert_eq!(
        model_sent(
            &format!("machine \"M\" {{ modelId: \"machine-model\" }}\n{MODEL_MACHINE}"),
            options()
        ),
        "node-model"
    );
    assert_eq!(model_sent(plain, options()), "claude-3-5-haiku-20241022");
    assert_eq!(
        model_sent(
            plain,
            Options {
                default_model: "fallback".into(),
                ..options()
            }
        ),
        "fallback"
    );
}
