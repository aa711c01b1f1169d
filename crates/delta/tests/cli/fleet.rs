//! Runs kept in PostgreSQL and worked on by `delta worker`s: a real throwaway cluster (or
//! `PG_TEST_URL`), real worker processes killed and paused, a model that answers by what it is asked.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use testkit::postgres::Postgres;
use testkit::{Reply, ScriptedServer};

use super::support::{Sandbox, output};

/// The tool of the fleet's agent: writes its tag to the effects file (the side effect counted),
/// then takes a moment.
pub(crate) const MARK: &str = "#!/bin/sh\necho \"$1\" >> \"$EFFECTS\"\ncase \"$1\" in long-*) echo $$ > \"$(dirname \"$EFFECTS\")/$1.pid\"; exec sleep 60;; esac\nsleep 0.2\n";

/// A store, a model, an agent whose tool leaves a trace, and the processes started on them.
pub(crate) struct Fleet {
    /// The database, for a fleet on PostgreSQL (`None`: on a folder).
    pub(crate) pg: Option<Postgres>,
    pub(crate) url: String,
    pub(crate) server: ScriptedServer,
    pub(crate) sb: Sandbox,
    pub(crate) effects: PathBuf,
    pub(crate) workers: Vec<Child>,
    /// The store's folder, for a fleet on one.
    pub(crate) folder: Option<tempfile::TempDir>,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for w in &mut self.workers {
            let _ = kill(Pid::from_raw(w.id() as i32), Signal::SIGCONT);
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// The model: calls `mark` with the task's tag, then answers "done". Told that a call was
/// interrupted and may or may not have taken effect, it checks (the effects file) before calling
/// again, as the result asks; told that it did not run, it calls again. A task starting with
/// `slow` gets its first answer after `slow` has passed; one starting with `please fail` is refused
/// (HTTP 400).
pub(crate) fn model(
    effects: PathBuf,
    slow: Duration,
) -> impl Fn(&Value) -> Reply + Send + Sync + 'static {
    let answered = std::sync::Mutex::new(HashMap::<String, usize>::new());
    move |body: &Value| {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let task = messages
            .iter()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_string();
        let tag = task.split_whitespace().last().unwrap_or("none").to_string();
        let turn = messages.iter().filter(|m| m["role"] == "assistant").count();
        let first = {
            let mut answered = answered.lock().unwrap();
            let n = answered.entry(tag.clone()).or_default();
            *n += 1;
            *n == 1
        };
        if task.starts_with("please fail") {
            return Reply::error(400, "no such model here");
        }
        let call = || Reply::tool_call(&format!("call-{turn}"), "mark", json!({"tag": tag}));
        let reply = match messages.last() {
            Some(m) if m["role"] == "tool" => {
                let result = m["content"].as_str().unwrap_or_default();
                let done = std::fs::read_to_string(&effects)
                    .unwrap_or_default()
                    .lines()
                    .any(|l| l == tag);
                if result.contains("did not run") || (result.contains("INTERRUPTED") && !done) {
                    call()
                } else {
                    Reply::text("done")
                }
            }
            Some(m) if m["role"] == "user" && turn > 0 => Reply::text("more done"),
            _ => call(),
        };
        if first && task.starts_with("slow") {
            reply.delay(slow)
        } else {
            reply
        }
    }
}

impl Fleet {
    /// A fleet on PostgreSQL; `None` (with a SKIPPED line) where there is none.
    pub(crate) fn start(slow: Duration) -> Option<Self> {
        let pg = Postgres::start()?;
        let url = pg.store_url();
        Some(Self::on(url, Some(pg), slow))
    }

    /// A fleet whose store is a folder of the sandbox (`file:///…`): no database at all.
    pub(crate) fn on_folder(slow: Duration) -> Self {
        let sb_store = tempfile::tempdir().unwrap();
        let url = format!("file://{}", sb_store.path().display());
        let mut fleet = Self::on(url, None, slow);
        fleet.folder = Some(sb_store);
        fleet
    }

    fn on(url: String, pg: Option<Postgres>, slow: Duration) -> Self {
        let sb = Sandbox::new(
            "name: fleet-agent\nllm:\n  model: test-model\ntools:\n  - name: mark\n    exec: \"${AGENT_HOME}/mark.sh ${tag}\"\n",
        );
        sb.script("agent/mark.sh", MARK.trim_start_matches("#!/bin/sh\n"));
        let effects = sb.path("effects.log");
        let server = ScriptedServer::responding(model(effects.clone(), slow));
        Self {
            url,
            pg,
            server,
            sb,
            effects,
            workers: Vec::new(),
            folder: None,
        }
    }

    /// The database (a fleet on PostgreSQL).
    pub(crate) fn pg(&self) -> &Postgres {
        self.pg.as_ref().expect("a fleet on PostgreSQL")
    }

    /// `delta` in `dir` (relative to the sandbox, created), talking to the model.
    pub(crate) fn delta(&self, dir: &str) -> Command {
        let mut cmd = self.sb.delta(Some(&self.server));
        let dir = self.sb.path(dir);
        std::fs::create_dir_all(&dir).unwrap();
        cmd.current_dir(dir)
            .env("DELTA_STORE", &self.url)
            .env("EFFECTS", &self.effects)
            .env_remove("DELTA_TEST_NOW");
        cmd
    }

    /// Runs `task` as run `id` in the local workspace `ws` (the sandbox's folder), without the store.
    pub(crate) fn local_run(&self, id: &str, task: &str) {
        let out = output({
            let mut cmd = self.delta(".");
            cmd.env_remove("DELTA_STORE").args([
                "run", "--agent", "agent", "-w", "ws", "--run-id", id, "-m", task,
            ]);
            cmd
        });
        assert_eq!(out.code, 0, "{}", out.stderr);
    }

    pub(crate) fn submit(&self, dir: &str, id: &str, task: &str) {
        let out = output({
            let mut cmd = self.delta(dir);
            cmd.args(["submit", "--agent"])
                .arg(self.sb.agent())
                .args(["--run-id", id, "-m", task]);
            cmd
        });
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(out.stdout.lines().last(), Some(id));
    }

    /// Starts a worker in `dir`; its log goes to `dir/worker.log`.
    pub(crate) fn worker(&mut self, dir: &str, args: &[&str]) -> usize {
        let mut cmd = self.delta(dir);
        let log = std::fs::File::create(self.sb.path(dir).join("worker.log")).unwrap();
        cmd.args(["worker", "--dir", "copies", "--poll-ms", "50"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(log);
        self.workers.push(cmd.spawn().unwrap());
        self.workers.len() - 1
    }

    pub(crate) fn pid(&self, worker: usize) -> Pid {
        Pid::from_raw(self.workers[worker].id() as i32)
    }

    pub(crate) fn log(&self, dir: &str) -> String {
        std::fs::read_to_string(self.sb.path(dir).join("worker.log")).unwrap_or_default()
    }

    pub(crate) fn runs(&self) -> Vec<Value> {
        let out = output({
            let mut cmd = self.delta(".");
            cmd.args(["list-runs", "--format", "json"]);
            cmd
        });
        assert_eq!(out.code, 0, "{}", out.stderr);
        serde_json::from_str::<Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    /// Waits until every run of the store has `status` (at most `limit`).
    pub(crate) fn wait_all(&self, status: &str, count: usize, limit: Duration) -> Vec<Value> {
        let start = Instant::now();
        loop {
            let runs = self.runs();
            if runs.len() == count && runs.iter().all(|r| r["status"] == status) {
                return runs;
            }
            assert!(
                start.elapsed() < limit,
                "not all {count} runs {status} after {limit:?}: {runs:#?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub(crate) fn export(&self, id: &str) -> (String, Vec<Value>) {
        let out = output({
            let mut cmd = self.delta(".");
            cmd.args(["export", "--run-id", id]);
            cmd
        });
        assert_eq!(out.code, 0, "{}", out.stderr);
        let events = out
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (out.stdout, events)
    }

    pub(crate) fn effects(&self, tag: &str) -> usize {
        std::fs::read_to_string(&self.effects)
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == tag)
            .count()
    }

    pub(crate) fn stop_workers(&mut self) {
        for w in &mut self.workers {
            let _ = kill(Pid::from_raw(w.id() as i32), Signal::SIGCONT);
            let _ = kill(Pid::from_raw(w.id() as i32), Signal::SIGTERM);
        }
        for w in &mut self.workers {
            let deadline = Instant::now() + Duration::from_secs(20);
            while w.try_wait().unwrap().is_none() {
                assert!(
                    Instant::now() < deadline,
                    "a worker did not stop on SIGTERM"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// A run's journal as the store holds it is whole: sequence numbers 1..n, every action with exactly
/// one result, `ends` RUN_END events.
pub(crate) fn assert_consistent(id: &str, events: &[Value], ends: usize) {
    for (n, e) in events.iter().enumerate() {
        assert_eq!(
            e["seq"],
            json!(n + 1),
            "{id}: seq not contiguous: {events:#?}"
        );
    }
    let mut results: HashMap<String, usize> = HashMap::new();
    for e in events.iter().filter(|e| e["type"] == "ACTION_RESULT") {
        *results
            .entry(e["payload"]["action_id"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    let requests: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "ACTION_REQUEST")
        .map(|e| e["payload"]["action_id"].as_str().unwrap())
        .collect();
    for r in &requests {
        assert_eq!(results.get(*r), Some(&1), "{id}: action {r}: {events:#?}");
    }
    assert_eq!(
        results.len(),
        requests.len(),
        "{id}: results without requests"
    );
    let run_ends = events.iter().filter(|e| e["type"] == "RUN_END").count();
    assert_eq!(run_ends, ends, "{id}: RUN_END events: {events:#?}");
}

#[test]
fn three_workers_finish_thirty_runs_on_a_folder_store_when_one_is_killed() {
    // No database: the store is a folder, its leases OS locks that a killed worker lets go of.
    kill_one_of_three(Fleet::on_folder(Duration::ZERO), 2);
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn three_workers_finish_thirty_runs_when_one_is_killed() {
    // Trials: the worker is killed after its first, second or third claim, a random moment later.
    for claims in 1..=3 {
        let Some(fleet) = Fleet::start(Duration::ZERO) else {
            return;
        };
        kill_one_of_three(fleet, claims);
    }
}

fn kill_one_of_three(mut fleet: Fleet, claims: usize) {
    for n in 0..30 {
        fleet.submit(
            "submitter",
            &format!("r{n:02}"),
            &format!("mark task-{n:02}"),
        );
    }
    for w in ["w0", "w1", "w2"] {
        fleet.worker(w, &["--concurrency", "2", "--lease", "2"]);
    }
    let start = Instant::now();
    while fleet.log("w0").matches("claimed").count() < claims {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "w0 never worked: {}",
            fleet.log("w0")
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // Then while it holds a run (its tool takes 0.2 s), a random moment later.
    let holding = format!("pid {} ", fleet.pid(0));
    while !fleet.runs().iter().any(|r| {
        r["holder"]
            .as_str()
            .is_some_and(|h| h.starts_with(&holding))
    }) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "w0 never held a run"
        );
    }
    std::thread::sleep(Duration::from_millis(rand_ms(60)));
    kill(fleet.pid(0), Signal::SIGKILL).unwrap();
    let runs = fleet.wait_all("COMPLETED", 30, Duration::from_secs(120));
    fleet.stop_workers();
    let mut settled = 0;
    for run in &runs {
        let id = run["run_id"].as_str().unwrap();
        let (_, events) = fleet.export(id);
        assert_consistent(id, &events, 1);
        let tag = format!("task-{}", &id[1..]);
        assert_eq!(
            fleet.effects(&tag),
            1,
            "{id}: the tool's effect: {events:#?}"
        );
        settled += events
            .iter()
            .filter(|e| {
                e["payload"]["observation_content"]
                    .as_str()
                    .is_some_and(|o| o.contains("INTERRUPTED"))
            })
            .count();
    }
    let taken_over = ["w1", "w2"]
        .iter()
        .map(|w| fleet.log(w).matches("taken over from").count())
        .sum::<usize>();
    eprintln!(
        "fleet: killed after {claims} claim(s): {taken_over} run(s) taken over, {settled} interrupted call(s) settled"
    );
    assert!(
        taken_over >= 1,
        "no run was taken over from the killed worker"
    );
}

/// A number of milliseconds below `limit`, different from run to run.
pub(crate) fn rand_ms(limit: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    u64::from(nanos) % limit
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_paused_worker_is_fenced_and_its_successor_completes_the_run() {
    let Some(mut fleet) = Fleet::start(Duration::from_secs(3)) else {
        return;
    };
    fleet.submit("submitter", "slow-run", "slow task-s");
    let paused = fleet.worker("wa", &["--lease", "1"]);
    // The worker asked the model (whose answer takes 3 s): pause it past its lease.
    let start = Instant::now();
    while fleet.server.request_count() == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no request: {}",
            fleet.log("wa")
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    kill(fleet.pid(paused), Signal::SIGSTOP).unwrap();
    // Another worker takes the run over (its lease ran out), and waits for the workspace the
    // paused one holds.
    fleet.worker("wb", &["--lease", "1"]);
    let start = Instant::now();
    while !fleet.log("wb").contains("waits for its workspace") {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the successor did not wait: {}",
            fleet.log("wb")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (before, _) = fleet.export("slow-run");
    // The paused worker wakes up with its answer in hand: it may not journal it.
    kill(fleet.pid(paused), Signal::SIGCONT).unwrap();
    let start = Instant::now();
    while !fleet.log("wa").contains("given up") {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the paused worker did not give the run up: {}",
            fleet.log("wa")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    fleet.wait_all("COMPLETED", 1, Duration::from_secs(60));
    let (after, events) = fleet.export("slow-run");
    assert!(after.starts_with(&before), "the journal was rewritten");
    assert_consistent("slow-run", &events, 1);
    assert_eq!(fleet.effects("task-s"), 1);
    assert!(
        fleet.log("wb").contains("taken over from"),
        "{}",
        fleet.log("wb")
    );
    // It went back to claiming, and stops cleanly.
    assert!(fleet.workers[paused].try_wait().unwrap().is_none());
    fleet.stop_workers();
    assert_eq!(fleet.workers[paused].wait().unwrap().code(), Some(0));
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_run_submitted_here_is_continued_from_elsewhere() {
    let Some(mut fleet) = Fleet::start(Duration::ZERO) else {
        return;
    };
    fleet.submit("here", "r1", "mark task-c");
    fleet.worker("worker", &["--exit-when-done"]);
    fleet.wait_all("COMPLETED", 1, Duration::from_secs(60));
    let deadline = Instant::now() + Duration::from_secs(20);
    while fleet.workers[0].try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "--exit-when-done did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = output({
        let mut cmd = fleet.delta("elsewhere");
        cmd.args([
            "continue",
            "--run-id",
            "r1",
            "-m",
            "once more",
            "--format",
            "json",
        ]);
        cmd
    });
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["status"], "COMPLETED", "{result}");
    let (_, events) = fleet.export("r1");
    assert_consistent("r1", &events, 2);
    let runs = fleet.runs();
    assert_eq!(runs[0]["run_id"], "r1");
    assert_eq!(runs[0]["status"], "COMPLETED");
    assert_eq!(runs[0]["queued"], false);
    assert!(runs[0]["workspace"].as_str().unwrap().contains("copies"));
    // The store's record is the working copy's journal, line for line.
    let copy = PathBuf::from(runs[0]["workspace"].as_str().unwrap());
    let local = std::fs::read_to_string(copy.join(".delta/r1/journal.jsonl")).unwrap();
    assert_eq!(fleet.export("r1").0, local);
    assert_eq!(fleet.effects("task-c"), 1);
    // The working copy is not a workspace of its own: a local continue would fork the record.
    let local = output({
        let mut cmd = fleet.delta("elsewhere");
        cmd.env_remove("DELTA_STORE")
            .args(["continue", "--run-id", "r1", "-m", "locally", "-w"])
            .arg(&copy);
        cmd
    });
    assert_eq!(local.code, 1, "{}", local.stderr);
    assert!(local.stderr.contains("kept in a store"), "{}", local.stderr);
    assert!(
        local.stderr.contains("--store URL --run-id r1"),
        "{}",
        local.stderr
    );
    assert_eq!(
        fleet.export("r1").0,
        std::fs::read_to_string(copy.join(".delta/r1/journal.jsonl")).unwrap()
    );
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_local_run_is_imported_and_exported_unchanged() {
    let Some(fleet) = Fleet::start(Duration::ZERO) else {
        return;
    };
    fleet.local_run("local", "mark task-l");
    let out = output({
        let mut cmd = fleet.delta(".");
        cmd.args(["import", "-w", "ws"]);
        cmd
    });
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "local");
    let journal = std::fs::read_to_string(fleet.sb.path("ws/.delta/local/journal.jsonl")).unwrap();
    assert_eq!(fleet.export("local").0, journal);
    // A second import of the same run is refused.
    let again = output({
        let mut cmd = fleet.delta(".");
        cmd.args(["import", "-w", "ws"]);
        cmd
    });
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(again.stderr.contains("exists"), "{}", again.stderr);
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_store_that_is_not_postgresql_is_a_usage_error() {
    let sb = Sandbox::new("name: a\n");
    let out = output({
        let mut cmd = sb.delta(None);
        cmd.args(["list-runs", "--store", "mysql://db/x"]);
        cmd
    });
    assert_eq!(out.code, 64, "{}", out.stderr);
    assert!(out.stderr.contains("PostgreSQL URL"), "{}", out.stderr);
    assert!(out.stderr.contains("hint:"), "{}", out.stderr);
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_stopping_worker_puts_its_run_back_for_another() {
    let Some(mut fleet) = Fleet::start(Duration::from_secs(5)) else {
        return;
    };
    fleet.submit("submitter", "stopped", "slow task-t");
    let first = fleet.worker("w1", &[]);
    let start = Instant::now();
    while fleet.server.request_count() == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no request: {}",
            fleet.log("w1")
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    kill(fleet.pid(first), Signal::SIGTERM).unwrap();
    let stopped = fleet.workers[first].wait().unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "the worker waited for the model instead of stopping"
    );
    assert_eq!(stopped.code(), Some(0), "{}", fleet.log("w1"));
    assert!(
        fleet.log("w1").contains("back in the queue"),
        "{}",
        fleet.log("w1")
    );
    let runs = fleet.runs();
    assert_eq!(runs[0]["status"], "INTERRUPTED");
    assert_eq!(runs[0]["queued"], true);
    fleet.worker("w2", &["--exit-when-done"]);
    fleet.wait_all("COMPLETED", 1, Duration::from_secs(60));
    let (_, events) = fleet.export("stopped");
    assert_consistent("stopped", &events, 1);
    assert_eq!(fleet.effects("task-t"), 1);
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_worker_fenced_while_its_tool_runs_stops_the_tool() {
    let Some(mut fleet) = Fleet::start(Duration::ZERO) else {
        return;
    };
    fleet.submit("submitter", "long-run", "mark long-f");
    let paused = fleet.worker("wa", &["--lease", "1"]);
    // The tool of a `long` tag writes its pid, then runs for a minute.
    let pid_file = fleet.sb.path("long-f.pid");
    let tool = super::support::pid_in(&pid_file);
    kill(fleet.pid(paused), Signal::SIGSTOP).unwrap();
    fleet.worker("wb", &["--lease", "1"]);
    // The successor takes the run over (fencing the paused worker) and waits for the working copy
    // the paused one holds: it never starts the run beside a tool that may still run.
    let start = Instant::now();
    while !fleet.log("wb").contains("waits for its workspace") {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{}",
            fleet.log("wb")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        kill(Pid::from_raw(tool), None).is_ok(),
        "the tool is still running"
    );
    kill(fleet.pid(paused), Signal::SIGCONT).unwrap();
    let start = Instant::now();
    while kill(Pid::from_raw(tool), None).is_ok() && !super::support::group_members(tool).is_empty()
    {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the fenced worker left its tool running: {}",
            fleet.log("wa")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let start = Instant::now();
    while !fleet.log("wa").contains("given up") {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "{}",
            fleet.log("wa")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let runs = fleet.wait_all("COMPLETED", 1, Duration::from_secs(60));
    let (_, events) = fleet.export("long-run");
    assert_consistent("long-run", &events, 1);
    assert_eq!(fleet.effects("long-f"), 1);
    assert!(
        runs[0]["workspace"]
            .as_str()
            .is_some_and(|w| w.ends_with("copies/long-run")),
        "the run moved to a fresh copy: {runs:#?}"
    );
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_worker_whose_connection_broke_reconnects() {
    let Some(mut fleet) = Fleet::start(Duration::ZERO) else {
        return;
    };
    fleet.worker("w", &[]);
    std::thread::sleep(Duration::from_millis(300));
    // The database drops every connection (a restart, a network cut).
    let mut admin = postgres::Client::connect(&fleet.url, postgres::NoTls).unwrap();
    let dropped: i64 = admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(dropped >= 1, "the worker held no connection");
    fleet.submit("submitter", "after", "mark task-a");
    fleet.wait_all("COMPLETED", 1, Duration::from_secs(30));
    assert_eq!(fleet.effects("task-a"), 1);
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_run_whose_agent_is_gone_leaves_the_queue_with_the_reason() {
    let Some(mut fleet) = Fleet::start(Duration::ZERO) else {
        return;
    };
    fleet.sb.file(
        "gone/agent.yaml",
        "name: gone\nllm:\n  model: m\ntools: []\n",
    );
    fleet.sb.file("gone/system_prompt.md", "p");
    let out = output({
        let mut cmd = fleet.delta("submitter");
        cmd.args([
            "submit",
            "--run-id",
            "orphan",
            "-m",
            "mark task-o",
            "--agent",
        ])
        .arg(fleet.sb.path("gone"));
        cmd
    });
    assert_eq!(out.code, 0, "{}", out.stderr);
    std::fs::remove_dir_all(fleet.sb.path("gone")).unwrap();
    fleet.worker("w", &["--exit-when-done"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while fleet.workers[0].try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "the worker kept retrying: {}",
            fleet.log("w")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let runs = fleet.runs();
    assert_eq!(runs[0]["status"], "NOT_STARTED", "{runs:#?}");
    assert_eq!(runs[0]["queued"], false);
    assert!(
        runs[0]["error"].as_str().unwrap().contains("gone"),
        "{runs:#?}"
    );
    assert!(fleet.log("w").contains("orphan"), "{}", fleet.log("w"));
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn the_model_named_at_submit_is_the_one_the_worker_asks() {
    let Some(mut fleet) = Fleet::start(Duration::ZERO) else {
        return;
    };
    let out = output({
        let mut cmd = fleet.delta("here");
        cmd.args(["submit", "--agent"]).arg(fleet.sb.agent()).args([
            "--run-id",
            "m1",
            "-m",
            "mark task-m",
            "--model",
            "fleet-model",
        ]);
        cmd
    });
    assert_eq!(out.code, 0, "{}", out.stderr);
    fleet.worker("worker", &["--exit-when-done"]);
    fleet.wait_all("COMPLETED", 1, Duration::from_secs(60));
    let asked: Vec<String> = fleet
        .server
        .requests()
        .iter()
        .map(|r| r.json()["model"].as_str().unwrap().to_string())
        .collect();
    assert!(!asked.is_empty());
    assert!(asked.iter().all(|m| m == "fleet-model"), "{asked:?}");
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_worker_starts_the_agents_mcp_servers_and_leaves_none_running() {
    let Some(python) = testkit::needs::python3() else {
        return;
    };
    let Some(mut fleet) = Fleet::start(Duration::ZERO) else {
        return;
    };
    let notes = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/mcp-notes/notes_server.py");
    fleet.sb.file(
        "agent/agent.yaml",
        &format!(
            "name: fleet-agent\nllm:\n  model: test-model\ntools:\n  - name: mark\n    exec: \"${{AGENT_HOME}}/mark.sh ${{tag}}\"\nmcp_servers:\n  - name: notes\n    command: {}\n    args: [\"{}\"]\n",
            python.display(),
            notes.display()
        ),
    );
    fleet.submit("client", "n1", "mark task-n");
    fleet.worker("worker", &["--exit-when-done"]);
    fleet.wait_all("COMPLETED", 1, Duration::from_secs(60));
    let offered: Vec<String> = fleet.server.requests()[0].json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        offered.contains(&"notes__list_notes".to_string()),
        "{offered:?}"
    );
    fleet.stop_workers();
    crate::support::assert_no_process_under(&fleet.sb.path("worker"));
}

#[test]
#[cfg_attr(not(feature = "postgres"), ignore = "needs the postgres feature")]
fn a_run_waiting_for_approval_is_listed_and_answered_through_the_store() {
    let Some(mut fleet) = Fleet::start(Duration::ZERO) else {
        return;
    };
    fleet.sb.file(
        "agent/agent.yaml",
        "name: fleet-agent\nllm:\n  model: test-model\ntools:\n  - name: mark\n    exec: \"${AGENT_HOME}/mark.sh ${tag}\"\npermissions:\n  default: allow\n  rules:\n    - {tool: mark, action: ask}\n",
    );
    fleet.submit("client", "p1", "mark task-p");
    fleet.worker("worker", &["--exit-when-done"]);
    let runs = fleet.wait_all("WAITING_FOR_INPUT", 1, Duration::from_secs(60));
    let question = runs[0]["pending_question"].as_str().unwrap_or_default();
    assert!(question.starts_with("Allow mark to run?"), "{:#?}", runs[0]);
    assert_eq!(fleet.effects("task-p"), 0, "nothing ran before the answer");
    let out = output({
        let mut cmd = fleet.delta("client");
        cmd.args([
            "continue", "--run-id", "p1", "-m", "yes", "--format", "json",
        ]);
        cmd
    });
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["status"], "COMPLETED", "{result}");
    assert_eq!(fleet.effects("task-p"), 1);
}
