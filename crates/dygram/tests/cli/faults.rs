//! `execute -i` under faults: calls killed at random moments (SIGKILL), executions created and
//! replaced in quick succession, corrupted state. After any kill the next calls go on from a
//! consistent execution: `history.jsonl` has exactly one line per call that advanced it, state and
//! metadata agree, nothing is reported corrupted, and the execution ends as an uninterrupted one.
//!
//! The machine is the shipped `examples/dygram/review.dy` with its recordings (eight calls, four
//! of them answered by the model), so every trial is offline and fast.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::{Dir, Out, copy_dir, repo_root};

fn example(name: &str) -> String {
    std::fs::read_to_string(repo_root().join("examples/dygram").join(name)).unwrap()
}

fn recordings(name: &str) -> String {
    repo_root()
        .join("examples/dygram/recordings")
        .join(name)
        .display()
        .to_string()
}

/// A small deterministic PRNG (xorshift64*).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The seed: `DYGRAM_FAULT_SEED` to repeat a run, else the clock (printed either way).
fn seed() -> u64 {
    std::env::var("DYGRAM_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

/// One `execute -i` call on `id` of `review.dy`, with the recordings to play back and a folder
/// `rec-<id>` to record the answers into when the execution does not exist yet (later calls take
/// both from the execution, as a user's would).
fn call_args(d: &Dir, id: &str) -> Vec<String> {
    let mut args: Vec<String> = ["e", "-i", "review.dy", "--id", id]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if !d.exec_dir(id).is_dir() {
        args.extend(["--playback".to_string(), recordings("review")]);
        args.extend(["--record".to_string(), format!("rec-{id}")]);
    }
    args
}

fn call(d: &Dir, id: &str) -> Out {
    let args = call_args(d, id);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    d.run(&args)
}

/// What an execution ended as.
#[derive(Debug, PartialEq)]
struct Final {
    nodes: Vec<Value>,
    context: Value,
    visited: Value,
    turns: Value,
}

/// Checks that an ended execution's files agree, and returns what it ended as.
fn check_consistent(d: &Dir, id: &str) -> Final {
    let state = d.read_json(id, "state.json");
    let meta = d.read_json(id, "metadata.json");
    let history = d.history(id);
    let turns: Vec<u64> = history
        .iter()
        .map(|h| h["turn"].as_u64().unwrap())
        .collect();
    let expected: Vec<u64> = (1..=turns.len() as u64).collect();
    assert_eq!(
        turns, expected,
        "{id}: history turns are not 1..=n: {history:?}"
    );
    assert_eq!(
        meta["stepCount"].as_u64(),
        Some(history.len() as u64),
        "{id}: metadata counts {} calls, history has {} lines",
        meta["stepCount"],
        history.len()
    );
    assert_eq!(
        state["callCount"], meta["stepCount"],
        "{id}: state vs metadata"
    );
    assert_eq!(
        state["turnCount"], meta["turnCount"],
        "{id}: state vs metadata"
    );
    assert_eq!(state["status"], meta["status"], "{id}: state vs metadata");
    assert_eq!(state["status"], "complete", "{id}");
    let last = history.last().unwrap();
    assert_eq!(last["status"], "complete", "{id}: {last}");
    let leftovers: Vec<String> = std::fs::read_dir(d.exec_dir(id))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp") || n == "pending-request.json")
        .collect();
    assert!(leftovers.is_empty(), "{id}: left {leftovers:?}");
    let shown = d.show_json(id);
    Final {
        nodes: history.iter().map(|h| h["node"].clone()).collect(),
        context: shown["contextState"].clone(),
        visited: shown["visitedNodes"].clone(),
        turns: meta["turnCount"].clone(),
    }
}

/// Calls until the execution is complete (exit 2); every call must succeed and none may report
/// corruption. Returns the time each call took.
fn drive(d: &Dir, id: &str, limit: usize) -> Vec<Duration> {
    let mut took = Vec::new();
    for _ in 0..limit {
        let start = Instant::now();
        let out = call(d, id);
        took.push(start.elapsed());
        assert!(!out.stderr.contains("corrupted"), "{id}: {out:?}");
        match out.code {
            0 => continue,
            2 => return took,
            _ => panic!("{id}: {out:?}"),
        }
    }
    panic!("{id} did not complete within {limit} calls");
}

/// Names in `.dygram/executions/` that belong to `id` but are not its folder (set aside, being
/// created, temporary).
fn strays(d: &Dir, id: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(d.path().join(".dygram/executions")) else {
        return Vec::new();
    };
    entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{id}.")) || n.starts_with('.'))
        .collect()
}

/// The durations of the latest calls.
struct Recent(std::collections::VecDeque<Duration>);

impl Recent {
    const KEPT: usize = 24;

    fn push(&mut self, took: Duration) {
        if self.0.len() == Self::KEPT {
            self.0.pop_front();
        }
        self.0.push_back(took);
    }

    /// Their median, in microseconds.
    fn median(&self) -> u64 {
        let mut sorted: Vec<Duration> = self.0.iter().copied().collect();
        sorted.sort();
        sorted[sorted.len() / 2].as_micros() as u64
    }
}

/// Calls killed before they ended, at least.
const KILLS: usize = 50;
/// Trials at most (a kill may come after its call already ended; such a trial still checks the
/// execution, but does not count as a kill).
const MAX_TRIALS: usize = 150;

#[test]
fn random_kills_never_lose_or_double_history_and_leave_state_and_metadata_agreeing() {
    let started = Instant::now();
    let d = Dir::with_file("review.dy", &example("review.dy"));
    // The uninterrupted execution, and how long its calls take. The kills are timed from the
    // median of the latest calls, so that they keep landing within calls when the machine's load
    // changes during the test.
    let mut recent = Recent(drive(&d, "ref", 20).into());
    let reference = check_consistent(&d, "ref");
    assert_eq!(reference.nodes.len(), 8, "{reference:?}");
    assert_eq!(reference.context["draft"]["score"], 8, "{reference:?}");

    let seed = seed();
    let mut rng = Rng::new(seed);
    let mut finished_before_kill = 0;
    let mut kills = 0;
    let mut trials = 0;
    let mut after_commit = 0;
    let mut repaired = 0;
    let mut killed_on_call = std::collections::BTreeMap::<u64, usize>::new();
    let mut replayed = 0;
    for trial in 0..MAX_TRIALS {
        if kills >= KILLS {
            break;
        }
        trials += 1;
        let id = format!("t{trial}");
        // Which call dies (any of the eight, the creating one included), and when: half of the
        // kills anywhere in the call, half late in it, where its files are written.
        let victim = rng.below(reference.nodes.len() as u64);
        for n in 0..victim {
            let start = Instant::now();
            let out = call(&d, &id);
            recent.push(start.elapsed());
            assert_eq!(out.code, 0, "{id} call {n}: {out:?}");
        }
        let median = recent.median();
        let delay = if trial % 2 == 0 {
            rng.below(median + 1)
        } else {
            median / 2 + rng.below(median * 9 / 20 + 1)
        };
        let args = call_args(&d, &id);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut child = d
            .spawn_command(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(delay));
        if child.try_wait().unwrap().is_some() {
            finished_before_kill += 1;
        } else {
            kills += 1;
            *killed_on_call.entry(victim + 1).or_default() += 1;
        }
        let _ = child.kill();
        child.wait().unwrap();
        // Where the kill landed: before the commit (the call is redone), or after it (the next
        // call repairs what the killed one did not finish writing).
        let committed = std::fs::read_to_string(d.exec_dir(&id).join("state.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .is_some_and(|st| st["callCount"].as_u64() == Some(victim + 1));
        if committed {
            after_commit += 1;
        }
        let out = call(&d, &id);
        assert!(matches!(out.code, 0 | 2), "{id}: {out:?}");
        assert!(!out.stderr.contains("corrupted"), "{id}: {out:?}");
        if out.stderr.contains("brought up to date") {
            repaired += 1;
        }
        if out.code == 0 {
            for took in drive(&d, &id, 20) {
                recent.push(took);
            }
        }
        let got = check_consistent(&d, &id);
        assert_eq!(
            got,
            reference,
            "{id}: killed call {} after {delay} µs (seed {seed})",
            victim + 1
        );
        assert!(strays(&d, &id).is_empty(), "{id}: {:?}", strays(&d, &id));
        // Every execution recorded the answers it got into a folder of its own: one recording per
        // answer, and they play back to the same execution.
        let rec = format!("rec-{id}");
        let turns = reference.turns.as_u64().unwrap() as usize;
        let expected: Vec<String> = (1..=turns).map(|n| format!("turn-{n}.json")).collect();
        assert_eq!(
            recorded(&d.path().join(&rec)),
            expected,
            "{id}: killed call {} after {delay} µs (seed {seed})",
            victim + 1
        );
        assert_eq!(
            replay(&d, &format!("{id}-replayed"), &rec),
            reference,
            "{id}: replayed {rec} (seed {seed})"
        );
        replayed += 1;
    }
    let elapsed = started.elapsed();
    eprintln!(
        "{kills} calls killed by SIGKILL in {trials} trials (seed {seed}, median call at the end {} µs; \
         {finished_before_kill} calls had ended before their kill); killed call number -> kills \
         {killed_on_call:?}; {after_commit} trials found the call committed, {repaired} had files \
         repaired by the next call; every execution consistent and equal to the uninterrupted one; \
         {replayed} recordings folders held one recording per answer and replayed to the same \
         execution; {elapsed:?}",
        recent.median()
    );
    assert!(
        kills >= KILLS,
        "only {kills} kills landed within their call in {trials} trials"
    );
    assert!(elapsed < Duration::from_secs(150), "took {elapsed:?}");
}

#[test]
fn a_kill_during_the_first_call_never_leaves_a_corrupted_execution() {
    let d = Dir::with_file("review.dy", &example("review.dy"));
    let start = Instant::now();
    assert_eq!(call(&d, "ref").code, 0);
    let first_call = start.elapsed().as_micros() as u64;
    let seed = seed();
    let mut rng = Rng::new(seed);
    let mut created = 0;
    for trial in 0..30 {
        let id = format!("f{trial}");
        let args = call_args(&d, &id);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut child = d
            .spawn_command(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(rng.below(first_call + 1)));
        let _ = child.kill();
        child.wait().unwrap();
        // Either no execution, or a complete one; never a folder without its files.
        let dir = d.exec_dir(&id);
        if dir.exists() {
            created += 1;
            for file in ["state.json", "metadata.json", "machine.json"] {
                assert!(dir.join(file).is_file(), "{id}: no {file} (seed {seed})");
            }
        }
        let out = call(&d, &id);
        assert_eq!(out.code, 0, "{id} (seed {seed}): {out:?}");
        assert!(!out.stderr.contains("corrupted"), "{id}: {out:?}");
        assert!(strays(&d, &id).is_empty(), "{id}: {:?}", strays(&d, &id));
    }
    eprintln!("30 kills of a first call (seed {seed}): {created} had created the execution");
    // A later call cleans up what killed creations left.
    let out = d.run(&["exec", "list", "--json"]);
    assert_eq!(out.json().as_array().unwrap().len(), 31, "{out:?}");
    let hidden: Vec<PathBuf> = std::fs::read_dir(d.path().join(".dygram/executions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    assert!(hidden.is_empty(), "{hidden:?}");
}

#[test]
fn force_three_times_in_one_second_keeps_every_previous_execution() {
    let d = Dir::with_file("order.dy", &example("order.dy"));
    for _ in 0..4 {
        let out = d.run(&["e", "-i", "order.dy", "--id", "x", "--force"]);
        assert_eq!(out.code, 0, "{out:?}");
    }
    let folders = d.folders();
    assert_eq!(folders.len(), 4, "{folders:?}");
    assert_eq!(folders[0], "x");
    let aside: Vec<&String> = folders
        .iter()
        .filter(|f| f.starts_with("x.replaced-"))
        .collect();
    assert_eq!(aside.len(), 3, "{folders:?}");
    for f in aside {
        assert!(d.exec_dir(f).join("state.json").is_file(), "{f}");
    }
}

/// Sets aside a corrupted execution `c` (started with the order recordings) and a replaced one.
fn with_set_aside_folders() -> (Dir, String, String) {
    let d = Dir::with_file("order.dy", &example("order.dy"));
    let rec = recordings("order");
    assert_eq!(
        d.run(&["e", "-i", "order.dy", "--id", "c", "--playback", &rec])
            .code,
        0
    );
    std::fs::write(d.exec_dir("c").join("state.json"), "{ torn").unwrap();
    let out = d.run(&["e", "-i", "order.dy", "--id", "c"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("State file corrupted"), "{out:?}");
    assert_eq!(
        d.run(&["e", "-i", "order.dy", "--id", "c", "--force"]).code,
        0
    );
    let folders = d.folders();
    let corrupted = folders
        .iter()
        .find(|f| f.starts_with("c.corrupted-"))
        .unwrap_or_else(|| panic!("{folders:?}"))
        .clone();
    let replaced = folders
        .iter()
        .find(|f| f.starts_with("c.replaced-"))
        .unwrap_or_else(|| panic!("{folders:?}"))
        .clone();
    (d, corrupted, replaced)
}

#[test]
fn set_aside_folders_are_listed_and_removable() {
    let (d, corrupted, replaced) = with_set_aside_folders();
    let out = d.run(&["exec", "list"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains(&corrupted), "{out:?}");
    assert!(out.stdout.contains(&replaced), "{out:?}");
    let rows = d.run(&["exec", "list", "--json"]).json();
    let row = |name: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == name)
            .unwrap_or_else(|| panic!("{name} not in {rows}"))
            .clone()
    };
    assert_eq!(row(&corrupted)["setAside"], "corrupted");
    assert_eq!(row(&replaced)["setAside"], "replaced");
    assert_eq!(row("c")["setAside"], Value::Null);

    let out = d.run(&["exec", "rm", &corrupted]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!d.exec_dir(&corrupted).exists());
    // Not a way out of the folder.
    assert_eq!(d.run(&["exec", "rm", "c.replaced-../../x"]).code, 64);

    // `clean` keeps them (they are not complete executions); `clean --all` removes them.
    assert_eq!(d.run(&["exec", "clean"]).code, 0);
    assert!(d.exec_dir(&replaced).exists());
    let out = d.run(&["exec", "clean", "--all"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(d.folders(), Vec::<String>::new());
}

#[test]
fn a_restart_after_corrupted_state_keeps_the_answer_source() {
    let d = Dir::with_file("order.dy", &example("order.dy"));
    let rec = recordings("order");
    assert_eq!(
        d.run(&["e", "-i", "order.dy", "--id", "o", "--playback", &rec])
            .code,
        0
    );
    std::fs::write(d.exec_dir("o").join("state.json"), "not json").unwrap();
    let out = d.run(&["e", "-i", "order.dy", "--id", "o"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("State file corrupted"), "{out:?}");
    let status = d.status_json("o");
    assert_eq!(status["client"]["type"], "playback", "{status}");
    assert_eq!(status["client"]["playbackDir"], json!(rec));
    // It goes on with the recordings, to the end, without asking anyone.
    for _ in 0..10 {
        let out = d.run(&["e", "-i", "order.dy", "--id", "o"]);
        match out.code {
            0 => continue,
            2 => return,
            _ => panic!("{out:?}"),
        }
    }
    panic!("did not complete");
}

#[test]
fn repeating_the_same_playback_folder_on_every_call_goes_on_where_it_was() {
    let d = Dir::with_file("review.dy", &example("review.dy"));
    let rec = recordings("review");
    for n in 0..12 {
        let out = d.run(&["e", "-i", "review.dy", "--id", "p", "--playback", &rec]);
        match out.code {
            0 => continue,
            2 => {
                assert_eq!(n + 1, 8, "{out:?}");
                let shown = d.show_json("p");
                assert_eq!(shown["contextState"]["draft"]["score"], 8);
                return;
            }
            _ => panic!("{out:?}"),
        }
    }
    panic!("the recordings started over at every call");
}

/// The `turn-<n>.json` files of a recordings folder, in order.
fn recorded(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("turn-") && n.ends_with(".json"))
                .collect()
        })
        .unwrap_or_default();
    names.sort_by_key(|n| {
        n.trim_start_matches("turn-")
            .trim_end_matches(".json")
            .parse::<u64>()
            .unwrap()
    });
    names
}

/// Plays the recordings in `rec` back on a new execution `id` to its end and returns what it
/// ended as.
fn replay(d: &Dir, id: &str, rec: &str) -> Final {
    let out = d.run(&["e", "-i", "review.dy", "--id", id, "--playback", rec]);
    assert_eq!(out.code, 0, "{id}: {out:?}");
    drive(d, id, 20);
    check_consistent(d, id)
}

#[test]
fn a_call_redone_after_a_kill_replaces_its_recording_instead_of_adding_one() {
    let d = Dir::with_file("review.dy", &example("review.dy"));
    drive(&d, "ref", 20);
    let reference = check_consistent(&d, "ref");
    let rec = d.path().join("rec");
    let first = d.run(&[
        "e",
        "-i",
        "review.dy",
        "--id",
        "r",
        "--playback",
        &recordings("review"),
        "--record",
        "rec",
    ]);
    assert_eq!(first.code, 0, "{first:?}");
    // Every call that records is killed once after its recording is written and before its
    // commit: the execution folder is put back as it was before the call, and the call is redone.
    let snapshot = d.path().join("snapshot");
    let mut redone = 0;
    for _ in 0..20 {
        let _ = std::fs::remove_dir_all(&snapshot);
        copy_dir(&d.exec_dir("r"), &snapshot);
        let files = recorded(&rec).len();
        let out = call(&d, "r");
        assert!(matches!(out.code, 0 | 2), "{out:?}");
        if recorded(&rec).len() > files {
            std::fs::remove_dir_all(d.exec_dir("r")).unwrap();
            copy_dir(&snapshot, &d.exec_dir("r"));
            redone += 1;
            let again = call(&d, "r");
            assert_eq!(again.code, out.code, "{again:?}");
        }
        if out.code == 2 {
            break;
        }
    }
    assert_eq!(check_consistent(&d, "r"), reference);
    assert!(redone >= 3, "only {redone} calls recorded");
    // One recording per answer, numbered from 1, and they replay to the same execution.
    let turns = reference.turns.as_u64().unwrap() as usize;
    let expected: Vec<String> = (1..=turns).map(|n| format!("turn-{n}.json")).collect();
    assert_eq!(recorded(&rec), expected);
    assert_eq!(replay(&d, "replayed", "rec"), reference);
}

#[test]
fn an_answer_source_lost_with_the_state_is_announced_with_the_way_to_give_it_again() {
    let d = Dir::with_file("order.dy", &example("order.dy"));
    let rec = recordings("order");
    assert_eq!(
        d.run(&["e", "-i", "order.dy", "--id", "o", "--playback", &rec])
            .code,
        0
    );
    std::fs::write(d.exec_dir("o").join("state.json"), "garbage").unwrap();
    std::fs::write(d.exec_dir("o").join("metadata.json"), "garbage").unwrap();
    let out = d.run(&["e", "-i", "order.dy", "--id", "o"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("State file corrupted"), "{out:?}");
    assert!(
        out.stderr
            .contains("where the answers of o came from is lost"),
        "{out:?}"
    );
    assert!(out.stderr.contains("manual mode"), "{out:?}");
    assert!(out.stderr.contains("--playback DIR"), "{out:?}");
    let status = d.status_json("o");
    assert_eq!(status["client"]["type"], "manual", "{status}");

    // Given again on the call that starts over, the source is kept and nothing is said about it.
    std::fs::write(d.exec_dir("o").join("state.json"), "garbage").unwrap();
    std::fs::write(d.exec_dir("o").join("metadata.json"), "garbage").unwrap();
    let out = d.run(&["e", "-i", "order.dy", "--id", "o", "--playback", &rec]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("State file corrupted"), "{out:?}");
    assert!(!out.stderr.contains("is lost"), "{out:?}");
    let status = d.status_json("o");
    assert_eq!(status["client"]["type"], "playback", "{status}");
}

/// Concurrent calls per trial on one corrupted execution.
const RACERS: usize = 4;
/// Trials per variant (with and without `--id`).
const RACE_TRIALS: usize = 12;

/// A `state.json` that cannot be read.
const CORRUPTED_STATE: &str = "{\"version\": \"1.0\", \"exec";

/// Makes execution `id` corrupted: its `state.json` cannot be read, while its `metadata.json`
/// still can, and is large (so a call that finds the state unreadable and reads the answer source
/// from the metadata takes a while: the calls racing for the execution overlap).
fn corrupt_with_large_metadata(d: &Dir, id: &str) {
    let mut meta = d.read_json(id, "metadata.json");
    meta["padding"] = json!("x".repeat(4 * 1024 * 1024));
    std::fs::write(
        d.exec_dir(id).join("metadata.json"),
        serde_json::to_vec(&meta).unwrap(),
    )
    .unwrap();
    std::fs::write(d.exec_dir(id).join("state.json"), CORRUPTED_STATE).unwrap();
}

/// Calls racing to restart a corrupted execution: exactly the corrupted folder is set aside (never
/// the healthy execution one of them has just built), the id ends up naming a healthy execution,
/// and a call that loses the race says that the execution is in use or was created by another
/// call, never an I/O error.
#[test]
fn calls_racing_to_restart_a_corrupted_execution_set_aside_only_the_corrupted_one() {
    let started = Instant::now();
    let seed = seed();
    eprintln!("seed {seed} (DYGRAM_FAULT_SEED repeats it)");
    let mut rng = Rng::new(seed);
    for trial in 0..2 * RACE_TRIALS {
        let with_id = trial % 2 == 0;
        let d = Dir::with_file("order.dy", &example("order.dy"));
        assert_eq!(d.run(&["e", "-i", "order.dy", "--id", "x"]).code, 0);
        corrupt_with_large_metadata(&d, "x");
        let args: &[&str] = if with_id {
            &["e", "-i", "order.dy", "--id", "x"]
        } else {
            &["e", "-i", "order.dy"]
        };
        let children: Vec<_> = (0..RACERS)
            .map(|_| {
                std::thread::sleep(Duration::from_micros(rng.below(3000)));
                d.spawn_command(args)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outs: Vec<Out> = children
            .into_iter()
            .map(|c| {
                let o = super::support::wait_output(c, Duration::from_secs(30));
                Out {
                    code: o.status.code().unwrap_or(-1),
                    stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
                    stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
                }
            })
            .collect();
        let context = format!("trial {trial} (seed {seed}, --id: {with_id}): {outs:#?}");
        for out in &outs {
            let lost = out.stderr.contains("in use by another dygram process")
                || out.stderr.contains("already exists");
            // 0: a step ran; 101: a call that found the fresh execution waits for an answer; 75: busy.
            assert!(
                matches!(out.code, 0 | 101) || (out.code == 75 && lost) || (out.code == 1 && lost),
                "{context}"
            );
        }
        let restarted = outs
            .iter()
            .filter(|o| o.stderr.contains("State file corrupted"))
            .count();
        assert_eq!(restarted, 1, "{context}");
        let aside: Vec<String> = d
            .folders()
            .into_iter()
            .filter(|n| n.starts_with("x."))
            .collect();
        assert_eq!(aside.len(), 1, "{aside:?} {context}");
        let kept = std::fs::read_to_string(d.exec_dir(&aside[0]).join("state.json")).unwrap();
        assert_eq!(kept, CORRUPTED_STATE, "{context}");
        // The executions left are healthy.
        for name in d.folders().iter().filter(|n| !n.contains('.')) {
            let out = d.run(&["exec", "status", name, "--json"]);
            assert_eq!(out.code, 0, "{name}: {out:?} {context}");
        }
        if with_id {
            assert!(d.exec_dir("x").join("state.json").is_file(), "{context}");
        }
    }
    assert!(started.elapsed() < Duration::from_secs(240));
}

/// A file derived from the commit point that cannot be written once `state.json` is (here
/// `metadata.json`, turned into a folder while the call waits for its answer) is a warning: the
/// call happened, so it reports what it did and exits as the committed state says; the next call
/// repairs the file.
#[test]
fn a_derived_file_that_cannot_be_written_after_the_commit_is_a_warning() {
    use super::answers::{at_charge, ended, respond, spawn_queue_call, wait_for_request};
    let d = at_charge();
    let call = spawn_queue_call(&d, "30");
    let request = wait_for_request(&d);
    let meta = d.exec_dir("q").join("metadata.json");
    std::fs::remove_file(&meta).unwrap();
    std::fs::create_dir(&meta).unwrap();
    std::fs::write(meta.join("in-the-way"), "x").unwrap();
    let answer = json!({"response": "Charged.", "tools": [
        {"name": "write_order", "input": {"data": {"total": 5}}}
    ]});
    respond(&d, &request, &answer.to_string());
    let out = ended(super::support::wait_output(call, Duration::from_secs(20)));
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("Tools: write_order"), "{out:?}");
    assert!(out.stderr.contains("Warning"), "{out:?}");
    assert!(out.stderr.contains("metadata.json"), "{out:?}");
    let state = d.read_json("q", "state.json");
    assert_eq!(state["turnCount"], 1, "{state}");
    assert_eq!(
        state["executionState"]["contextValues"]["order"]["total"],
        5
    );
    // Out of the way again, the file is repaired by the next call from the commit point.
    std::fs::remove_dir_all(&meta).unwrap();
    let call = spawn_queue_call(&d, "30");
    let request = wait_for_request(&d);
    assert_eq!(d.read_json("q", "metadata.json")["turnCount"], 1);
    let answer = json!({"tools": [{"name": "transition_to_shipped", "input": {}}]});
    respond(&d, &request, &answer.to_string());
    let out = ended(super::support::wait_output(call, Duration::from_secs(20)));
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr
            .contains("interrupted after it was saved; metadata.json"),
        "{out:?}"
    );
    assert_eq!(d.read_json("q", "metadata.json")["turnCount"], 2);
}
