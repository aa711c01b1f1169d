//! Randomised crash test: `delta run` is killed with SIGKILL at a random moment (before, during or
//! between its tool calls), then `delta continue` picks the run up. After every trial: no process of a
//! tool's group is alive once `continue` has returned, the journal's `seq` numbers are contiguous, every
//! tool call has exactly one result, and no call ran twice.
//!
//! `DELTA_CRASH_SEED` replays a failing series (the seed is printed with every failure);
//! `DELTA_CRASH_TRIALS` changes the number of trials (default 50).

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use crate::support::{Sandbox, agent_yaml, group_members, output, read_jsonl};

/// Each call appends `start <id> <pgid>` when it begins and `end <id>` when it finishes; a background
/// child of the same group appends `child <id>` in between.
const WORK: &str = "  - name: work\n    shell: \"echo start ${id} $$ >> calls.log; (sleep 0.05; echo child ${id} >> calls.log) & sleep 0.1; wait; echo end ${id} >> calls.log\"\n";

/// A small deterministic generator (xorshift64*), so that a failing series can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What a trial saw, for the summary.
#[derive(Debug, Default)]
struct Tally {
    trials: usize,
    finished_before_the_kill: usize,
    ended_before_the_metadata: usize,
    tool_running_at_the_kill: usize,
    stopped_by_continue: usize,
    ended_before_continue: usize,
    never_started: usize,
}

fn spawn_run(sb: &Sandbox, server: &ScriptedServer) -> Child {
    let mut cmd = sb.delta(Some(server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd.spawn().unwrap()
}

/// The `(id, pgid)` of every `start` line of `calls.log`, and the ids of its `end` lines.
fn calls_log(sb: &Sandbox) -> (Vec<(String, i32)>, Vec<String>) {
    let text = std::fs::read_to_string(sb.ws().join("calls.log")).unwrap_or_default();
    let mut starts = Vec::new();
    let mut ends = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["start", id, pgid] => starts.push((id.to_string(), pgid.parse().unwrap())),
            ["end", id] => ends.push(id.to_string()),
            _ => {}
        }
    }
    (starts, ends)
}

fn trial(seed: u64, n: usize, rng: &mut Rng, tally: &mut Tally) {
    let context = format!("trial {n} of series DELTA_CRASH_SEED={seed}");
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new("c1", "work", json!({"id": "c1"})),
            ToolCallSpec::new("c2", "work", json!({"id": "c2"})),
        ]),
        Reply::tool_call("c3", "work", json!({"id": "c3"})),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(&agent_yaml(WORK));
    let mut child = spawn_run(&sb, &server);
    // A whole run takes about 0.4 s here; most kills land while it works.
    std::thread::sleep(Duration::from_millis(rng.below(450)));
    let finished = child.try_wait().unwrap().is_some();
    if !finished {
        kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
        child.wait().unwrap();
    }
    tally.trials += 1;
    if finished {
        tally.finished_before_the_kill += 1;
        return;
    }
    let (started, _) = calls_log(&sb);
    let running: Vec<i32> = started
        .iter()
        .map(|(_, pgid)| *pgid)
        .filter(|pgid| !group_members(*pgid).is_empty())
        .collect();
    if !running.is_empty() {
        tally.tool_running_at_the_kill += 1;
    }
    if !sb.ws().join(".delta/LATEST").exists() {
        // Killed before the run existed: nothing ran, nothing to recover.
        assert!(
            started.is_empty(),
            "{context}: a tool ran for an unlisted run"
        );
        return;
    }
    // Killed after the run had completed but before the process ended: nothing to continue.
    let completed = sb.metadata()["status"] == "COMPLETED";
    if completed {
        tally.finished_before_the_kill += 1;
    }
    let server2 = ScriptedServer::start([Reply::text("done"), Reply::text("done")]);
    // Killed between journaling the run's end and saving its metadata: the run is finished all
    // the same; continue refuses to go on without a message and asks the model nothing.
    let ended = sb.journal().last().is_some_and(|e| e["type"] == "RUN_END");
    if ended && !completed {
        tally.ended_before_the_metadata += 1;
        let mut cmd = sb.delta(Some(&server2));
        cmd.args(["continue", "-w", "ws"]);
        let out = output(cmd);
        assert_eq!(out.code, 1, "{context}: {}", out.stderr);
        assert!(
            out.stderr.contains("Run is COMPLETED"),
            "{context}: {}",
            out.stderr
        );
        assert_eq!(
            server2.request_count(),
            0,
            "{context}: the model was asked again"
        );
        assert_eq!(sb.metadata()["status"], "COMPLETED", "{context}");
    }
    if !completed && !ended {
        let mut cmd = sb.delta(Some(&server2));
        cmd.args(["continue", "-w", "ws", "--format", "raw"]);
        let out = output(cmd);
        // No process of any tool group may be left once `continue` has returned.
        for (id, pgid) in &started {
            let left = group_members(*pgid);
            assert!(
                left.is_empty(),
                "{context}: {id}'s group {pgid} still has {left:?} after continue"
            );
        }
        assert_eq!(out.code, 0, "{context}: {}", out.stderr);
        assert_eq!(out.stdout, "done\n", "{context}");
    }

    let journal = read_jsonl(&sb.run_dir().join("journal.jsonl"));
    let seqs: Vec<u64> = journal.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "{context}: seq numbers"
    );
    let of = |kind: &str| -> Vec<&Value> {
        journal
            .iter()
            .filter(|e| e["type"] == kind)
            .map(|e| &e["payload"])
            .collect()
    };
    let mut calls = BTreeSet::new();
    for thought in of("THOUGHT") {
        for call in thought["tool_calls"].as_array().into_iter().flatten() {
            assert!(
                calls.insert(call["id"].as_str().unwrap().to_string()),
                "{context}: a call id repeats"
            );
        }
    }
    let mut results: BTreeMap<String, usize> = BTreeMap::new();
    for result in of("ACTION_RESULT") {
        *results
            .entry(result["action_id"].as_str().unwrap().to_string())
            .or_default() += 1;
        let text = result["observation_content"].as_str().unwrap();
        if text.contains("was still running") {
            tally.stopped_by_continue += 1;
        } else if text.contains("was no longer running") {
            tally.ended_before_continue += 1;
        } else if text.contains("did not run") {
            tally.never_started += 1;
        }
    }
    for id in &calls {
        assert_eq!(
            results.get(id),
            Some(&1),
            "{context}: call {id} needs exactly one result: {results:?}"
        );
    }
    assert_eq!(
        results.len(),
        calls.len(),
        "{context}: results for unknown calls: {results:?}"
    );
    let requests: Vec<String> = of("ACTION_REQUEST")
        .iter()
        .map(|r| r["action_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        requests.iter().collect::<BTreeSet<_>>().len(),
        requests.len(),
        "{context}: a call was requested twice: {requests:?}"
    );
    let (started, _) = calls_log(&sb);
    let mut ran = BTreeSet::new();
    for (id, _) in &started {
        assert!(ran.insert(id.clone()), "{context}: {id} ran twice");
        assert!(
            requests.contains(id),
            "{context}: {id} ran without a journaled request"
        );
    }
    // The file may be left empty (no record) by a kill after the run's last child ended and before
    // the run removed it: the next delta in the workspace removes it.
    let record = std::fs::read(sb.run_dir().join("process.json")).unwrap_or_default();
    assert!(
        record.is_empty(),
        "{context}: a process record was left: {}",
        String::from_utf8_lossy(&record)
    );
    assert_eq!(sb.metadata()["status"], "COMPLETED", "{context}");
    // Whatever the trial left behind (nothing, if all went well) is stopped before the next one.
    for (_, pgid) in started {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
}

#[test]
fn sigkill_at_random_moments_then_continue_leaves_no_process_and_a_consistent_journal() {
    let (seed, trials) = crate::support::crash_series(50);
    let mut rng = Rng(seed);
    let mut tally = Tally::default();
    let start = Instant::now();
    for n in 1..=trials {
        trial(seed, n, &mut rng, &mut tally);
    }
    let took = start.elapsed();
    eprintln!("crash test, series DELTA_CRASH_SEED={seed}: {tally:?} in {took:?}");
    assert_eq!(tally.trials, trials);
    assert!(
        took < Duration::from_secs(90),
        "{trials} trials took {took:?} (series {seed})"
    );
    // The kills must exercise what the test is about, not just land before or after the run.
    assert!(
        tally.tool_running_at_the_kill >= trials / 5,
        "too few kills hit a running tool: {tally:?} (series {seed})"
    );
}
