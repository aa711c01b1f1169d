//! Long runs against a model with a small context window: the conversation is compacted so that
//! every request fits, and the run completes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer};

use super::support::{Sandbox, agent_yaml, output};

/// The window the scripted server enforces, in its own count of tokens.
const WINDOW: usize = 2048;
const STEPS: usize = 20;

/// The server's count: a token per four characters of what the model reads.
fn tokens(body: &Value) -> usize {
    let messages: usize = body["messages"]
        .as_array()
        .map(|m| m.iter().map(|m| m.to_string().len() + 8).sum())
        .unwrap_or(0);
    let tools = body.get("tools").map_or(0, |t| t.to_string().len());
    (messages + tools) / 4
}

/// A model with a 2 048-token window: a request that does not fit is refused as llama.cpp's
/// OpenAI-compatible server does; a request without tools is a summary; otherwise the next step is
/// called (the steps done are the lines of `effects`), then the answer.
fn model(
    effects: std::path::PathBuf,
    refused: Arc<AtomicUsize>,
    summaries: Arc<AtomicUsize>,
) -> impl Fn(&Value) -> Reply + Send + Sync + 'static {
    move |body: &Value| {
        let asked = tokens(body);
        let completion = body["max_tokens"].as_u64().unwrap_or(0) as usize;
        if asked + completion > WINDOW {
            refused.fetch_add(1, Ordering::SeqCst);
            return Reply::context_length_exceeded(WINDOW, asked, completion);
        }
        let usage = |r: Reply| r.usage(asked as u64, 20);
        if body
            .get("tools")
            .is_none_or(|t| t.as_array().is_none_or(Vec::is_empty))
        {
            summaries.fetch_add(1, Ordering::SeqCst);
            return usage(Reply::text(
                "So far: the blob tool ran for the first steps; each printed a long block of x. Go on with the next step.",
            ));
        }
        let done = std::fs::read_to_string(&effects)
            .unwrap_or_default()
            .lines()
            .count();
        if done < STEPS {
            usage(Reply::tool_call(
                &format!("call-{}", done + 1),
                "blob",
                json!({"step": done + 1}),
            ))
        } else {
            usage(Reply::text("All 20 steps are done."))
        }
    }
}

#[test]
fn a_long_run_is_compacted_to_fit_a_small_window_and_completes() {
    let sb = Sandbox::new(&agent_yaml(
        "  - name: blob\n    exec: \"${AGENT_HOME}/blob.sh ${step}\"\n",
    ));
    let effects = sb.path("effects.log");
    sb.script(
        "agent/blob.sh",
        &format!(
            "echo \"$1\" >> '{}'\nhead -c 1500 /dev/zero | tr '\\000' x",
            effects.display()
        ),
    );
    let refused = Arc::new(AtomicUsize::new(0));
    let summaries = Arc::new(AtomicUsize::new(0));
    let server = ScriptedServer::responding(model(
        effects.clone(),
        Arc::clone(&refused),
        Arc::clone(&summaries),
    ));
    let out = output({
        let mut cmd = sb.delta(Some(&server));
        cmd.args([
            "run",
            "--agent",
            "agent",
            "-w",
            "ws",
            "-m",
            "Run the blob tool for steps 1 to 20, one at a time.",
            "--max-iterations",
            "40",
        ]);
        cmd
    });
    assert_eq!(out.code, 0, "{}", out.stderr);
    let steps: Vec<String> = std::fs::read_to_string(&effects)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let expected: Vec<String> = (1..=STEPS).map(|n| n.to_string()).collect();
    assert_eq!(steps, expected, "each step ran once, in order");
    let compactions = sb.events("COMPACTION");
    assert!(!compactions.is_empty(), "no COMPACTION event");
    for c in &compactions {
        let p = &c["payload"];
        assert_eq!(p["strategy"], "summarize");
        assert_eq!(p["window"], 2048, "{c}");
        assert!(
            p["tokens_after"].as_u64() < p["tokens_before"].as_u64(),
            "{c}"
        );
        assert!(p["from_seq"].as_u64() <= p["to_seq"].as_u64(), "{c}");
    }
    assert!(
        refused.load(Ordering::SeqCst) <= 1,
        "{} requests refused",
        refused.load(Ordering::SeqCst)
    );
    assert_eq!(summaries.load(Ordering::SeqCst), compactions.len());
    super::support::assert_well_formed(&server);
    // Picked up again (the run learned its window: only the journal's end is read), the model
    // sees the task with the latest summary.
    let more = output({
        let mut cmd = sb.delta(Some(&server));
        cmd.args(["continue", "-w", "ws", "-m", "Say that you are done."]);
        cmd
    });
    assert_eq!(more.code, 0, "{}", more.stderr);
    let last = super::support::bodies(&server).pop().unwrap();
    let first = last["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(first.contains("--- Earlier work ("), "{last}");
    assert_eq!(sb.metadata()["context_window"], 2048);
    eprintln!(
        "context window: {} compaction(s), {} request(s) refused, {} requests in all",
        compactions.len(),
        refused.load(Ordering::SeqCst),
        server.request_count()
    );
}

#[test]
fn delta_compact_compacts_on_demand_and_says_when_there_is_nothing_to_do() {
    let sb = Sandbox::new(&agent_yaml(
        "  - name: step\n    exec: \"${AGENT_HOME}/step.sh ${n}\"\n",
    ));
    let effects = sb.path("steps.log");
    sb.script(
        "agent/step.sh",
        &format!("echo \"$1\" >> '{}'\necho ok", effects.display()),
    );
    let summaries = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&summaries);
    let steps = effects.clone();
    let server = ScriptedServer::responding(move |body: &Value| {
        if body
            .get("tools")
            .is_none_or(|t| t.as_array().is_none_or(Vec::is_empty))
        {
            counted.fetch_add(1, Ordering::SeqCst);
            return Reply::text("Steps 1 to 3 ran.");
        }
        let done = std::fs::read_to_string(&steps)
            .unwrap_or_default()
            .lines()
            .count();
        if done < 6 {
            Reply::tool_call(&format!("c{}", done + 1), "step", json!({"n": done + 1}))
        } else {
            Reply::text("done")
        }
    });
    let compact = |extra: &[&str]| {
        output({
            let mut cmd = sb.delta(Some(&server));
            cmd.args(["compact", "-w", "ws", "--format", "json"])
                .args(extra);
            cmd
        })
    };
    let run = output({
        let mut cmd = sb.delta(Some(&server));
        cmd.args([
            "run",
            "--agent",
            "agent",
            "-w",
            "ws",
            "-m",
            "Run six steps.",
        ]);
        cmd
    });
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = compact(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    // Seven answers (six steps and the final one): all but the three most recent.
    assert_eq!(result["compacted"], true, "{result}");
    assert_eq!(result["iterations"], 4, "{result}");
    assert_eq!(result["strategy"], "summarize");
    assert_eq!(summaries.load(Ordering::SeqCst), 1);
    let compactions = sb.events("COMPACTION");
    assert_eq!(compactions.len(), 1);
    assert_eq!(compactions[0]["payload"]["summary"], "Steps 1 to 3 ran.");
    // The window is not known: the event says 0, and nothing is learned from it.
    assert_eq!(compactions[0]["payload"]["window"], 0);
    assert_eq!(sb.metadata()["status"], "COMPLETED");
    // Again: only the kept iterations are left beyond the compaction.
    let again = compact(&[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let result: Value = serde_json::from_str(&again.stdout).unwrap();
    assert_eq!(result["compacted"], false, "{result}");
    assert!(
        result["reason"]
            .as_str()
            .unwrap()
            .contains("nothing to compact")
    );
    // A later continue sends the summary with the task.
    let more = output({
        let mut cmd = sb.delta(Some(&server));
        cmd.args(["continue", "-w", "ws", "-m", "And now?"]);
        cmd
    });
    assert_eq!(more.code, 0, "{}", more.stderr);
    let last = super::support::bodies(&server).pop().unwrap();
    assert!(last.to_string().contains("Steps 1 to 3 ran."), "{last}");
}
