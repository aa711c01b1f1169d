//! A stopped run's result, as `delta run` and `delta continue` print it on stdout: a text block,
//! one JSON object (RunResult 2.0), or the final response alone.
//!
//! The final response is the model's own text. A COMPLETED run that ended without one (its iteration
//! limit, an empty answer) says so in `reason` and prints an empty result. `total_cost_usd` comes from
//! the price table (`crate::pricing`) and is left out for models it does not know.

use crate::engine::RunOutcome;
use crate::metadata::RunStatus;
use serde_json::{Value, json};

/// Context the outcome does not carry.
pub struct ResultContext<'a> {
    /// Agent name.
    pub agent_name: &'a str,
    /// Model name, when known.
    pub model: Option<&'a str>,
    /// Workspace.
    pub workspace: &'a str,
    /// `response.txt` of a waiting run.
    pub response_file: &'a str,
    /// Whether the tokens cost money (not with answers replayed from recordings).
    pub priced: bool,
}

/// What the run's tokens cost, when the model is in the price table.
fn cost(outcome: &RunOutcome, ctx: &ResultContext<'_>) -> Option<f64> {
    let usage = outcome.metadata.usage;
    if !ctx.priced {
        return None;
    }
    crate::pricing::cost_usd(ctx.model?, usage.input_tokens, usage.output_tokens)
}

/// The RunResult JSON object.
pub fn json_result(outcome: &RunOutcome, ctx: &ResultContext<'_>) -> Value {
    let m = &outcome.metadata;
    let usage = m.usage;
    let cost = cost(outcome, ctx);
    let mut model_usage = serde_json::Map::new();
    if let Some(model) = ctx.model {
        let mut entry =
            json!({"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens});
        if let Some(c) = cost {
            entry["cost_usd"] = json!(c);
        }
        model_usage.insert(model.to_string(), entry);
    }
    let mut result = json!({
        "schema_version": "2.0",
        "run_id": m.run_id,
        "status": m.status.as_str(),
        "is_error": m.status == RunStatus::Failed,
        "metrics": {
            "iterations": m.iterations_completed,
            "duration_ms": outcome.duration.as_millis() as u64,
            "start_time": m.start_time,
            "end_time": m.end_time,
            "usage": {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "llm_calls": usage.llm_calls,
                "model_usage": model_usage,
            },
        },
        "metadata": {"agent_name": ctx.agent_name, "workspace_path": ctx.workspace},
    });
    if let Some(c) = cost {
        // First in `usage`, where the contract puts it.
        let usage = &mut result["metrics"]["usage"];
        let mut with_cost = serde_json::Map::new();
        with_cost.insert("total_cost_usd".into(), json!(c));
        if let Value::Object(rest) = usage.take() {
            with_cost.extend(rest);
        }
        *usage = Value::Object(with_cost);
    }
    match m.status {
        RunStatus::Completed => {
            result["result"] = json!(outcome.final_response.clone().unwrap_or_default());
            if let Some(reason) = outcome.reason {
                result["reason"] = json!(reason.as_str());
            }
        }
        RunStatus::Failed => {
            result["error"] = json!({"type": "ExecutionError", "message": outcome.error.clone().unwrap_or_default()});
        }
        RunStatus::WaitingForInput => {
            if let Some(i) = &outcome.interaction {
                result["interaction"] = json!({
                    "request_id": i.request_id,
                    "prompt": i.prompt,
                    "input_type": i.input_type,
                    "sensitive": i.sensitive,
                    "response_file": ctx.response_file,
                    "continue_with": format!("delta continue -w {} -m \"<answer>\"", ctx.workspace),
                });
            }
        }
        RunStatus::Interrupted => {
            result["interrupted"] = json!({
                "message": "the run was stopped by a signal",
                "continue_with": format!("delta continue -w {}", ctx.workspace),
            });
        }
        RunStatus::Running => {}
    }
    result
}

/// The text block, as the model and the tools wrote it: a terminal gets it through a printer that
/// escapes control characters (the CLI's `print_text`).
pub fn text_result(outcome: &RunOutcome, ctx: &ResultContext<'_>) -> String {
    let m = &outcome.metadata;
    let rule = "-".repeat(80);
    let mut out = format!(
        "{rule}\nRun ID: {}\nStatus: {}\nExecution Summary:\n  • Iterations: {}\n  • Duration: {:.2}s\n  • Start Time: {}\n  • End Time: {}\n  • Tokens: {} in, {} out\n",
        m.run_id,
        m.status,
        m.iterations_completed,
        outcome.duration.as_secs_f64(),
        m.start_time,
        m.end_time.as_deref().unwrap_or("-"),
        m.usage.input_tokens,
        m.usage.output_tokens,
    );
    if let Some(c) = cost(outcome, ctx) {
        // Small costs keep their significant digits ($0.000045, not $0.0000).
        let digits = if c > 0.0 && c < 0.01 { 6 } else { 4 };
        out.push_str(&format!("  • Cost: ${c:.digits$}\n"));
    }
    match m.status {
        RunStatus::Completed => {
            out.push_str("Final Response:\n");
            match outcome.reason {
                Some(reason) => out.push_str(&format!("(none: {})", reason.describe())),
                None => out.push_str(outcome.final_response.as_deref().unwrap_or_default()),
            }
            out.push('\n');
        }
        RunStatus::Failed => {
            out.push_str(&format!(
                "Error:\n{}\n",
                outcome.error.as_deref().unwrap_or_default()
            ));
        }
        RunStatus::WaitingForInput => {
            if let Some(i) = &outcome.interaction {
                out.push_str(&format!(
                    "Waiting for input:\n{}\nAnswer with: delta continue -w {} -m \"<answer>\"\n",
                    i.prompt, ctx.workspace
                ));
            }
        }
        RunStatus::Interrupted => {
            out.push_str(&format!(
                "Interrupted. Resume with: delta continue -w {}\n",
                ctx.workspace
            ));
        }
        RunStatus::Running => {}
    }
    out.push_str(&rule);
    out.push('\n');
    out
}

/// The final response only, ending with one line break (added only when it has none); nothing unless
/// the run completed with an answer.
pub fn raw_result(outcome: &RunOutcome) -> String {
    match (&outcome.metadata.status, &outcome.final_response) {
        (RunStatus::Completed, Some(text)) if text.ends_with('\n') => text.clone(),
        (RunStatus::Completed, Some(text)) if !text.is_empty() => format!("{text}\n"),
        _ => String::new(),
    }
}
