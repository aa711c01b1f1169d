//! The fleet at its edges: a worker cut off from the database stops its tool before its lease can
//! pass to another; a run taken over waits for its workspace rather than moving to an empty copy;
//! a run left queued after it stopped leaves the queue quietly; an import is all or nothing; every
//! command that reads runs takes the store. Real PostgreSQL, real worker processes.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use super::fleet::{Fleet, assert_consistent};
use super::support::{group_members, output, pid_in};

/// An admin connection to the fleet's database.
fn admin(fleet: &Fleet) -> postgres::Client {
    postgres::Client::connect(&fleet.url, postgres::NoTls).unwrap()
}

/// Waits (at most 10 s) until `db` is the only client connected to its database.
fn wait_for_other_connections_to_end(db: &mut postgres::Client) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let others: i64 = db
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
                &[],
            )
            .unwrap()
            .get(0);
        if others == 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{others} other connections still open after 10 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `delta ARGS` in the fleet's folder `dir`.
fn delta(fleet: &Fleet, dir: &str, args: &[&str]) -> super::support::Output {
    let mut cmd = fleet.delta(dir);
    cmd.args(args);
    output(cmd)
}

/// Submits `task` as run `id`, to be worked in `workspace`.
fn submit_in(fleet: &Fleet, id: &str, task: &str, workspace: &Path) {
    let mut cmd = fleet.delta("submitter");
    cmd.args(["submit", "--agent"])
        .arg(fleet.sb.agent())
        .args(["--run-id", id, "-m", task, "-w"])
        .arg(workspace);
    let out = output(cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive(pid: i32) -> bool {
    kill(Pid::from_raw(pid), None).is_ok() && !group_members(pid).is_empty()
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_worker_cut_off_from_the_database_stops_its_tool_before_its_lease_can_pass() {
    let Some(mut fleet) = Fleet::start(Duration::ZERO) else {
        return;
    };
    if !fleet.pg().can_restart() {
        eprintln!("SKIPPED fleet_edges: needs a database the test can restart (not PG_TEST_URL)");
        return;
    }
    fleet.submit("submitter", "cut", "mark long-c");
    fleet.worker("wa", &["--lease", "3"]);
    let tool = pid_in(&fleet.sb.path("long-c.pid"));
    // The database goes down for longer than the lease: the worker cannot renew it.
    let down = Instant::now();
    let stopped_tool = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            while alive(tool) && down.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(20));
            }
            down.elapsed()
        });
        fleet.pg().restart(Duration::from_secs(6));
        watcher.join().unwrap()
    });
    assert!(
        stopped_tool < Duration::from_secs(3),
        "the cut-off worker's tool ran {stopped_tool:?} after the database went down (lease 3 s): {}",
        fleet.log("wa")
    );
    wait_until(
        "the worker says why it gave the run up",
        Duration::from_secs(10),
        || {
            fleet
                .log("wa")
                .contains("could not be reached to renew the lease")
        },
    );
    // A successor completes the run in the same working copy; the tool's effect happened once.
    fleet.worker("wb", &["--lease", "3"]);
    fleet.wait_all("COMPLETED", 1, Duration::from_secs(60));
    let (_, events) = fleet.export("cut");
    assert_consistent("cut", &events, 1);
    assert_eq!(fleet.effects("long-c"), 1);
    let settled: Vec<&str> = events
        .iter()
        .filter_map(|e| e["payload"]["observation_content"].as_str())
        .filter(|o| o.contains("INTERRUPTED"))
        .collect();
    assert_eq!(settled.len(), 1, "{events:#?}");
    assert!(
        !settled[0].contains("restarted"),
        "the machine did not restart: {}",
        settled[0]
    );
    fleet.stop_workers();
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_run_taken_from_a_paused_worker_waits_for_its_workspace() {
    let Some(mut fleet) = Fleet::start(Duration::ZERO) else {
        return;
    };
    let ws = fleet.sb.path("shared-ws");
    submit_in(&fleet, "held", "mark long-h", &ws);
    let paused = fleet.worker("wa", &["--lease", "1"]);
    let tool = pid_in(&fleet.sb.path("long-h.pid"));
    kill(fleet.pid(paused), Signal::SIGSTOP).unwrap();
    // The lease runs out; another worker claims the run and finds its workspace held.
    fleet.worker("wb", &["--lease", "1"]);
    wait_until("the run says it waits", Duration::from_secs(30), || {
        fleet.runs().iter().any(|r| {
            r["waiting"]
                .as_str()
                .is_some_and(|w| w.contains("waits for its workspace"))
        })
    });
    // (Between two claims of the waiting run, as a person sees it.)
    wait_until(
        "the listing says why it waits",
        Duration::from_secs(30),
        || {
            delta(&fleet, ".", &["list-runs"])
                .stdout
                .contains("Waiting:    waits for its workspace")
        },
    );
    assert!(
        alive(tool),
        "nobody stopped the tool while its worker was paused"
    );
    // The paused worker wakes, learns it lost the run, stops its tool and lets the workspace go;
    // the run is then completed there, not in a fresh copy.
    kill(fleet.pid(paused), Signal::SIGCONT).unwrap();
    let runs = fleet.wait_all("COMPLETED", 1, Duration::from_secs(60));
    assert!(!alive(tool));
    let workspace = runs[0]["workspace"].as_str().unwrap();
    assert_eq!(
        Path::new(workspace),
        ws.canonicalize().unwrap(),
        "the run moved out of its workspace"
    );
    assert!(runs[0]["waiting"].is_null(), "{runs:#?}");
    let (_, events) = fleet.export("held");
    assert_consistent("held", &events, 1);
    assert_eq!(fleet.effects("long-h"), 1);
    fleet.stop_workers();
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_stopped_run_left_in_the_queue_leaves_it_quietly() {
    let Some(mut fleet) = Fleet::start(Duration::ZERO) else {
        return;
    };
    fleet.submit("submitter", "done", "mark task-q");
    fleet.worker("wa", &["--exit-when-done"]);
    fleet.wait_all("COMPLETED", 1, Duration::from_secs(60));
    fleet.workers[0].wait().unwrap();
    let asked = fleet.server.request_count();
    // What a worker killed after the run's end, before it took the run out of the queue and
    // saved its metadata, leaves.
    let mut db = admin(&fleet);
    db.execute("UPDATE runs SET queued_at = now() WHERE run = 'done'", &[])
        .unwrap();
    let mut meta: Value = serde_json::from_slice(
        &db.query_one(
            "SELECT bytes FROM documents WHERE run = 'done' AND key = 'metadata.json'",
            &[],
        )
        .unwrap()
        .get::<_, Vec<u8>>(0),
    )
    .unwrap();
    meta["status"] = json!("RUNNING");
    db.execute(
        "UPDATE documents SET bytes = $1 WHERE run = 'done' AND key = 'metadata.json'",
        &[&serde_json::to_vec(&meta).unwrap()],
    )
    .unwrap();
    let copies_before = std::fs::read_dir(fleet.sb.path("wb/copies")).map_or(0, Iterator::count);
    fleet.worker("wb", &["--exit-when-done"]);
    wait_until("the worker leaves", Duration::from_secs(30), || {
        fleet.workers[1].try_wait().unwrap().is_some()
    });
    let runs = fleet.runs();
    assert_eq!(runs[0]["status"], "COMPLETED", "{runs:#?}");
    assert_eq!(runs[0]["queued"], false);
    assert!(
        runs[0]["error"].is_null(),
        "an error on a completed run: {runs:#?}"
    );
    assert!(
        fleet.log("wb").contains("had already stopped"),
        "{}",
        fleet.log("wb")
    );
    assert_eq!(
        fleet.server.request_count(),
        asked,
        "the model was asked again"
    );
    let copies_after = std::fs::read_dir(fleet.sb.path("wb/copies")).map_or(0, Iterator::count);
    assert_eq!(copies_before, copies_after, "a working copy was made");
    let (_, events) = fleet.export("done");
    assert_consistent("done", &events, 1);
    let meta: Value = serde_json::from_slice(
        &db.query_one(
            "SELECT bytes FROM documents WHERE run = 'done' AND key = 'metadata.json'",
            &[],
        )
        .unwrap()
        .get::<_, Vec<u8>>(0),
    )
    .unwrap();
    assert_eq!(meta["status"], "COMPLETED", "the store's metadata repaired");
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn the_store_listing_gives_a_failed_runs_error_and_survives_a_damaged_document() {
    let Some(mut fleet) = Fleet::start(Duration::ZERO) else {
        return;
    };
    // A model that refuses: the run fails, its error is in the journal.
    fleet.submit("submitter", "fails", "please fail now");
    fleet.submit("submitter", "fine", "mark task-f");
    let mut db = admin(&fleet);
    fleet.worker("w", &["--exit-when-done"]);
    wait_until("the worker leaves", Duration::from_secs(60), || {
        fleet.workers[0].try_wait().unwrap().is_some()
    });
    db.execute(
        "UPDATE documents SET bytes = 'not json' WHERE run = 'fine' AND key = 'metadata.json'",
        &[],
    )
    .unwrap();
    let runs = fleet.runs();
    let by_id = |id: &str| runs.iter().find(|r| r["run_id"] == id).unwrap().clone();
    let failed = by_id("fails");
    assert_eq!(failed["status"], "FAILED", "{runs:#?}");
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|e| e.contains("no such model here")),
        "{failed}"
    );
    let damaged = by_id("fine");
    assert_eq!(
        damaged["status"], "COMPLETED",
        "from the journal: {damaged}"
    );
    assert!(
        damaged["damaged"]
            .as_str()
            .is_some_and(|d| d.contains("metadata.json")),
        "{damaged}"
    );
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn show_and_rm_take_the_store() {
    let Some(mut fleet) = Fleet::start(Duration::ZERO) else {
        return;
    };
    fleet.submit("submitter", "shown", "mark task-s");
    fleet.worker("w", &["--exit-when-done"]);
    fleet.wait_all("COMPLETED", 1, Duration::from_secs(60));
    // The worker lets the lease go after the run is COMPLETED: until then rm is refused as busy.
    fleet.workers[0].wait().unwrap();
    let out = delta(
        &fleet,
        "elsewhere",
        &["show", "--run-id", "shown", "--format", "json"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let shown: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(shown["status"], "COMPLETED");
    assert_eq!(shown["final_answer"], "done");
    assert!(
        shown["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "tool"),
        "{shown}"
    );
    let out = delta(&fleet, "elsewhere", &["show", "--run-id", "nope"]);
    assert_ne!(out.code, 0);
    assert!(
        !out.stderr.contains("No .delta directory"),
        "{}",
        out.stderr
    );
    let out = delta(&fleet, "elsewhere", &["rm", "--run-id", "shown"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(fleet.runs().is_empty());
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn rm_removes_a_local_run_and_refuses_a_live_one() {
    let sb = super::support::Sandbox::new(&super::support::agent_yaml(
        "  - name: slow\n    shell: \"echo $$ > tool.pid; sleep 30\"\n",
    ));
    let server = testkit::ScriptedServer::start([
        testkit::Reply::text("one"),
        testkit::Reply::tool_call("c1", "slow", json!({})),
    ]);
    assert_eq!(sb.run(Some(&server), "first", &["--run-id", "a"]).code, 0);
    let mut cmd = sb.delta(Some(&server));
    cmd.args([
        "run", "--agent", "agent", "-w", "ws", "--run-id", "b", "-m", "second",
    ]);
    let mut child = cmd.spawn().unwrap();
    pid_in(&sb.ws().join("tool.pid"));
    let rm = |id: &str| {
        let mut cmd = sb.delta(None);
        cmd.args(["rm", "-w", "ws", "--run-id", id]);
        output(cmd)
    };
    let busy = rm("b");
    assert_eq!(busy.code, 75, "{}", busy.stderr);
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    child.wait().unwrap();
    let out = rm("b");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "b\n");
    assert!(!sb.ws().join(".delta/b").exists());
    assert_eq!(
        std::fs::read_to_string(sb.ws().join(".delta/LATEST")).unwrap(),
        "a",
        "LATEST names the newest run left"
    );
    assert_eq!(rm("b").code, 1, "a second removal finds nothing");
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_killed_import_leaves_nothing_or_is_finished_by_resume() {
    let Some(fleet) = Fleet::start(Duration::ZERO) else {
        return;
    };
    // A local run with a long journal (20 000 notes), copied into one workspace per trial.
    fleet.local_run("big", "mark task-i");
    let journal = fleet.sb.path("ws/.delta/big/journal.jsonl");
    let mut text = std::fs::read_to_string(&journal).unwrap();
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let end = lines.pop().unwrap();
    for _ in 0..20_000 {
        let seq = lines.len() as u64 + 1;
        lines.push(json!({"seq": seq, "timestamp": "2026-01-01T00:00:00.000Z", "type": "SYSTEM_MESSAGE", "payload": {"level": "INFO", "content": "padding"}}));
    }
    let mut end = end;
    end["seq"] = json!(lines.len() as u64 + 1);
    lines.push(end);
    text = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&journal, &text).unwrap();
    // The store's tables are made first: a kill that lands in the migration says nothing of imports.
    assert!(fleet.runs().is_empty());
    let mut outcomes = (0, 0);
    for trial in 0..6 {
        let id = format!("imp{trial}");
        let ws = format!("ws{trial}");
        let run = fleet.sb.path(&format!("{ws}/.delta/{id}"));
        std::fs::create_dir_all(&run).unwrap();
        for file in ["journal.jsonl", "metadata.json"] {
            let from = fleet.sb.path(&format!("ws/.delta/big/{file}"));
            let body = std::fs::read_to_string(from)
                .unwrap()
                .replace("\"big\"", &format!("\"{id}\""));
            std::fs::write(run.join(file), body).unwrap();
        }
        std::fs::write(fleet.sb.path(&format!("{ws}/.delta/LATEST")), &id).unwrap();
        let mut cmd = fleet.delta(".");
        cmd.args(["import", "-w", &ws]);
        let mut child = cmd
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(super::fleet::rand_ms(900)));
        let _ = child.kill();
        child.wait().unwrap();
        let mut db = admin(&fleet);
        // A commit the killed import sent may still be landing: the server finishes it before it
        // notices its client is gone. Read the store once that connection has ended.
        wait_for_other_connections_to_end(&mut db);
        let stored: i64 = db
            .query_one("SELECT count(*) FROM journal WHERE run = $1", &[&id])
            .unwrap()
            .get(0);
        let exists = db
            .query_opt("SELECT 1 FROM runs WHERE run = $1", &[&id])
            .unwrap()
            .is_some();
        assert!(
            stored == 0 && !exists || stored == lines.len() as i64,
            "trial {trial}: the store holds {stored} of {} lines",
            lines.len()
        );
        let marker = run.join("upstream.txt");
        if exists && !marker.exists() {
            let again = delta(&fleet, ".", &["import", "-w", &ws]);
            assert_eq!(again.code, 1, "{}", again.stderr);
            assert!(again.stderr.contains("--resume"), "{}", again.stderr);
            let resumed = delta(&fleet, ".", &["import", "-w", &ws, "--resume"]);
            assert_eq!(resumed.code, 0, "{}", resumed.stderr);
            assert!(marker.exists());
            outcomes.1 += 1;
        } else if !exists {
            let fresh = delta(&fleet, ".", &["import", "-w", &ws]);
            assert_eq!(fresh.code, 0, "{}", fresh.stderr);
            outcomes.0 += 1;
        }
        let (exported, _) = fleet.export(&id);
        assert_eq!(exported.lines().count(), lines.len(), "trial {trial}");
    }
    eprintln!(
        "import trials: {} killed before the commit, {} finished by --resume",
        outcomes.0, outcomes.1
    );
}

/// A small deterministic generator (xorshift64*), so that a failing series can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// What the chaos did, for the summary.
#[derive(Debug, Default)]
struct Chaos {
    kills: usize,
    pauses: usize,
    restarts: usize,
}

/// Chaos: three workers (two slots each, lease 2 s) on 24 runs (each thinks a second before its
/// tool call), 16 of which share two workspaces; workers are killed (and replaced) and paused at
/// random, and the database restarts once. Every run completes, in its own workspace (never a
/// fresh copy), with its tool's effect exactly once and a whole journal. `DELTA_CHAOS_SEED`
/// replays a series.
#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn chaos_every_run_completes_in_its_own_workspace_with_each_effect_once() {
    const RUNS: usize = 24;
    let Some(mut fleet) = Fleet::start(Duration::from_millis(1000)) else {
        return;
    };
    if !fleet.pg().can_restart() {
        eprintln!("SKIPPED fleet_edges: needs a database the test can restart (not PG_TEST_URL)");
        return;
    }
    let seed = std::env::var("DELTA_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| u64::from(super::fleet::rand_ms(1 << 30) as u32) | 1);
    let context = format!("series DELTA_CHAOS_SEED={seed}");
    let mut rng = Rng(seed);
    let shared = [fleet.sb.path("shared-a"), fleet.sb.path("shared-b")];
    let mut expected = Vec::new();
    for n in 0..RUNS {
        let id = format!("c{n:02}");
        let task = format!("slowly mark chaos-{n:02}");
        match n % 3 {
            0 => fleet.submit("submitter", &id, &task),
            k => submit_in(&fleet, &id, &task, &shared[k - 1]),
        }
        expected.push((id, (n % 3 != 0).then(|| shared[n % 3 - 1].clone())));
    }
    let mut live: Vec<usize> = (0..3)
        .map(|w| fleet.worker(&format!("w{w}"), &["--lease", "2", "--concurrency", "2"]))
        .collect();
    let mut chaos = Chaos::default();
    let restart_at = Duration::from_millis(1000 + rng.below(3000));
    let start = Instant::now();
    let all_done = |fleet: &Fleet| {
        let runs = fleet.runs();
        runs.len() == RUNS && runs.iter().all(|r| r["status"] == "COMPLETED")
    };
    while !all_done(&fleet) {
        assert!(
            start.elapsed() < Duration::from_secs(150),
            "{context}: not all runs completed: {chaos:?}\n{:#?}",
            fleet.runs()
        );
        std::thread::sleep(Duration::from_millis(200 + rng.below(500)));
        if chaos.restarts == 0 && start.elapsed() >= restart_at {
            fleet
                .pg()
                .restart(Duration::from_millis(500 + rng.below(1500)));
            chaos.restarts += 1;
            continue;
        }
        if start.elapsed() > Duration::from_secs(20) {
            continue; // the chaos ends; the fleet finishes
        }
        let pick = rng.below(live.len() as u64) as usize;
        let victim = live[pick];
        match rng.below(3) {
            0 => {
                kill(fleet.pid(victim), Signal::SIGKILL).unwrap();
                fleet.workers[victim].wait().unwrap();
                let dir = format!("w{}", fleet.workers.len());
                live[pick] = fleet.worker(&dir, &["--lease", "2", "--concurrency", "2"]);
                chaos.kills += 1;
            }
            1 => {
                kill(fleet.pid(victim), Signal::SIGSTOP).unwrap();
                std::thread::sleep(Duration::from_millis(500 + rng.below(3000)));
                kill(fleet.pid(victim), Signal::SIGCONT).unwrap();
                chaos.pauses += 1;
            }
            _ => {}
        }
    }
    let runs = fleet.runs();
    fleet.stop_workers();
    for (id, workspace) in &expected {
        let run = runs.iter().find(|r| r["run_id"] == id.as_str()).unwrap();
        let (_, events) = fleet.export(id);
        assert_consistent(id, &events, 1);
        let tag = format!("chaos-{}", &id[1..]);
        assert_eq!(
            fleet.effects(&tag),
            1,
            "{context}: {id}'s effect: {events:#?}"
        );
        let at = Path::new(run["workspace"].as_str().unwrap());
        match workspace {
            Some(ws) => assert_eq!(at, ws.canonicalize().unwrap(), "{context}: {id}"),
            None => assert!(
                at.ends_with(format!("copies/{id}")),
                "{context}: {id} moved to a fresh copy: {}",
                at.display()
            ),
        }
    }
    eprintln!(
        "chaos ({context}): {chaos:?}, {RUNS} runs completed in {:?}",
        start.elapsed()
    );
}

/// A worker killed at a chosen write: the flush of its working copy's `RUN_END` (the store has the
/// line: it goes there first), before the worker saved the metadata or took the run out of the
/// queue. Found by tracing a run of the same script, then injected (`strace`, SIGKILL at that
/// `fdatasync`). The next worker finds the run ended and lets it leave the queue quietly: no model
/// call, no second end, no error, the tool's effect once.
#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_worker_killed_after_the_end_leaves_a_run_that_leaves_the_queue_quietly() {
    let Some(strace) = testkit::needs::strace() else {
        return;
    };
    let worker = |fleet: &Fleet, dir: &str| {
        let mut cmd = fleet.delta(dir);
        cmd.args([
            "worker",
            "--dir",
            "copies",
            "--poll-ms",
            "50",
            "--lease",
            "2",
        ])
        .arg("--exit-when-done");
        cmd
    };
    // The dry run: which fdatasync of the slot's thread flushes RUN_END.
    let nth = {
        let Some(fleet) = Fleet::start(Duration::ZERO) else {
            return;
        };
        fleet.submit("submitter", "k", "mark task-k");
        let log = fleet.sb.path("strace.log");
        let trace = super::support::traced_writes(&worker(&fleet, "dry"), &strace, &log);
        super::support::flush_after_end(&trace)
            .unwrap_or_else(|| panic!("no flush of RUN_END in the trace:\n{trace}"))
    };
    let Some(mut fleet) = Fleet::start(Duration::ZERO) else {
        return;
    };
    fleet.submit("submitter", "k", "mark task-k");
    super::support::killed_at_fdatasync(&worker(&fleet, "killed"), &strace, nth);
    let (_, events) = fleet.export("k");
    assert_eq!(events.last().unwrap()["type"], "RUN_END", "{events:#?}");
    let runs = fleet.runs();
    assert_eq!(
        runs[0]["queued"], true,
        "the kill came before the run left the queue"
    );
    let asked = fleet.server.request_count();

    fleet.worker("next", &["--exit-when-done"]);
    wait_until("the next worker leaves", Duration::from_secs(30), || {
        fleet.workers[0].try_wait().unwrap().is_some()
    });
    assert!(
        fleet.log("next").contains("had already stopped"),
        "{}",
        fleet.log("next")
    );
    let runs = fleet.runs();
    assert_eq!(runs[0]["status"], "COMPLETED", "{runs:#?}");
    assert_eq!(runs[0]["queued"], false);
    assert!(runs[0]["error"].is_null(), "{runs:#?}");
    assert_eq!(
        fleet.server.request_count(),
        asked,
        "the model was asked again"
    );
    let (_, events) = fleet.export("k");
    assert_consistent("k", &events, 1);
    assert_eq!(fleet.effects("task-k"), 1);
}
