//! The policy in force for a run: its sandbox and its permissions as this process applies them,
//! after `--sandbox`, `--network`, `--approve`, `--permissions` and a parent's limits. Journaled
//! when a process starts working on the run, shown by `-v`, `delta show` and stream-json.

use serde_json::{Value, json};

use super::Agent;

/// The start of the journal line that says what is in force.
pub const JOURNAL_PREFIX: &str = "Policy in force: ";

/// One line for people: `sandbox workspace-write, network off; permissions default ask, 2 rules`.
pub fn describe(agent: &Agent) -> String {
    let sandbox = match &agent.sandbox {
        Some(policy) if policy.confines() => {
            let mut text = format!("sandbox {}", policy.describe());
            for (key, paths) in [
                ("writable", &policy.writable),
                ("readable", &policy.readable),
            ] {
                if !paths.is_empty() {
                    let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                    text += &format!(", {key} [{}]", list.join(", "));
                }
            }
            text
        }
        _ => "no sandbox (tools run with your rights)".to_string(),
    };
    let permissions = match &agent.permissions {
        Some(p) => {
            let mut text = format!(
                "permissions default {}, {} rule{}",
                p.default.as_str(),
                p.rules.len(),
                if p.rules.len() == 1 { "" } else { "s" }
            );
            if p.approve_all {
                text += ", questions answered yes (--approve all)";
            }
            text
        }
        None => "no permissions (every call runs)".to_string(),
    };
    format!("{sandbox}; {permissions}")
}

/// The same as JSON: `{"sandbox": {...} | null, "permissions": {...} | null}`.
pub fn to_json(agent: &Agent) -> Value {
    let sandbox = agent.sandbox.as_ref().filter(|p| p.confines()).map(|p| {
        json!({
            "filesystem": p.filesystem.as_str(),
            "network": p.network,
            "writable": p.writable,
            "readable": p.readable,
        })
    });
    let permissions = agent.permissions.as_ref().map(|p| {
        json!({
            "default": p.default.as_str(),
            "rules": p.rules.iter().map(|r| r.describe()).collect::<Vec<_>>(),
            "approve_all": p.approve_all,
        })
    });
    json!({"sandbox": sandbox, "permissions": permissions})
}

/// Whether there is anything to say: a sandbox or permissions.
pub fn any(agent: &Agent) -> bool {
    agent.sandbox.as_ref().is_some_and(|p| p.confines()) || agent.permissions.is_some()
}
