//! Servers do send one answer whose tool calls share an id. delta gives the second call another id
//! (`dup_2`) as it journals the answer, so that no approval, request or result can be taken for
//! another call's; journals written before that are settled by position. Killed while one of them
//! runs, the resumed run gives each call exactly one result, runs the ones that never started, and
//! sends the model a well-formed conversation.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use crate::support::{Sandbox, agent_yaml, assert_well_formed, output, pid_in, wait_for};

/// Call `n` appends `start n` and `end n` to `calls.log`; the call named by `hold` writes its
/// shell's pid to `held.pid` and sleeps in between, so that the test can kill delta there.
const STEP: &str = "  - name: step\n    shell: \"echo start ${n} >> calls.log; if [ ${n} = ${hold} ]; then echo $$ > held.pid; sleep 30; fi; echo end ${n} >> calls.log\"\n";

fn calls(sb: &Sandbox) -> Vec<String> {
    std::fs::read_to_string(sb.ws().join("calls.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A run whose first answer asks for two `step` calls, both with id `dup`, killed (SIGKILL) while
/// call `held` runs; then `delta continue`.
fn killed_during(held: u32) -> (Sandbox, ScriptedServer) {
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new("dup", "step", json!({"n": "1", "hold": held.to_string()})),
            ToolCallSpec::new("dup", "step", json!({"n": "2", "hold": held.to_string()})),
        ]),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(&agent_yaml(STEP));
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"]);
    let mut child = cmd.spawn().unwrap();
    wait_for(&sb.ws().join("held.pid"));
    pid_in(&sb.ws().join("held.pid"));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    std::fs::remove_file(sb.ws().join("held.pid")).unwrap();

    let mut cmd = sb.delta(Some(&server));
    cmd.args(["continue", "-w", "ws"]);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    (sb, server)
}

/// The results, in order; the second call's id was made unique when the answer was journaled.
fn results(sb: &Sandbox) -> Vec<String> {
    sb.events("ACTION_RESULT")
        .iter()
        .zip(["dup", "dup_2"])
        .map(|(e, id)| {
            assert_eq!(e["payload"]["action_id"], id);
            e["payload"]["observation_content"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn killed_during_the_second_of_two_calls_with_one_id_each_gets_its_result() {
    let (sb, server) = killed_during(2);
    let results = results(&sb);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].contains("EXIT CODE: 0"), "{}", results[0]);
    assert!(results[1].contains("INTERRUPTED"), "{}", results[1]);
    assert_eq!(
        calls(&sb),
        vec!["start 1", "end 1", "start 2"],
        "nothing ran twice"
    );
    assert_eq!(server.request_count(), 2);
    assert_well_formed(&server);
    assert_eq!(sb.metadata()["status"], "COMPLETED");
}

#[test]
fn killed_during_the_first_of_two_calls_with_one_id_the_second_still_runs() {
    let (sb, server) = killed_during(1);
    let results = results(&sb);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].contains("INTERRUPTED"), "{}", results[0]);
    assert!(
        results[1].contains("EXIT CODE: 0") && !results[1].contains("did not run"),
        "the second call never started, so the resume runs it: {}",
        results[1]
    );
    assert_eq!(calls(&sb), vec!["start 1", "start 2", "end 2"]);
    assert_well_formed(&server);
    assert_eq!(sb.metadata()["status"], "COMPLETED");
}
