//! `permissions:` in agent.yaml: which tool calls run, which are refused, and which wait for a
//! person's approval.
//!
//! ```yaml
//! permissions:
//!   default: allow                               # allow | ask | deny
//!   rules:                                       # the first that matches decides
//!     - {tool: "delete_*", action: ask}
//!     - {tool: "run", command: "git push*", action: deny}
//! ```
//!
//! A rule matches on the tool's name (a glob: `*` any text, `?` one character); when it has
//! `command`, on the call's resolved command line (a shell tool's command, `session_exec ID: …`, an
//! MCP tool's name and arguments as JSON) or on any one of the call's argument values (so that
//! `git push*` matches the script a `bash -c ${script}` tool is given, and a value sent on standard
//! input is seen too); when it has `args`, on the named arguments' values. Runs of whitespace count
//! as one space on both sides. A glob over a shell command is a speed bump, not a wall: a shell can
//! spell the same command in endless ways (`git -C . push`, `g=git; $g push`, a script).

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::diag::Diagnostic;

/// What a rule (or the default) does with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Allow,
    Ask,
    Deny,
}

impl Action {
    fn parse(text: &str) -> Option<Self> {
        match text {
            "allow" => Some(Self::Allow),
            "ask" => Some(Self::Ask),
            "deny" => Some(Self::Deny),
            _ => None,
        }
    }

    /// The stricter of two actions (deny, then ask, then allow).
    pub fn stricter(self, other: Self) -> Self {
        let rank = |a: Self| match a {
            Self::Allow => 0,
            Self::Ask => 1,
            Self::Deny => 2,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub tool: String,
    pub command: Option<String>,
    /// Globs on named arguments' values: every one must match.
    pub args: Vec<(String, String)>,
    pub action: Action,
}

impl Rule {
    /// `tool: "delete_*", action: ask` as written.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!("tool {:?}", self.tool)];
        if let Some(command) = &self.command {
            parts.push(format!("command {command:?}"));
        }
        for (name, pattern) in &self.args {
            parts.push(format!("{name} {pattern:?}"));
        }
        format!("{}: {}", parts.join(", "), self.action.as_str())
    }

    fn matches(&self, call: &CallView<'_>) -> bool {
        let value = |name: &str| {
            call.args
                .get(name)
                .and_then(crate::agent::tools::value_text)
        };
        glob(&self.tool, call.tool)
            && self.command.as_deref().is_none_or(|pattern| {
                let pattern = spaced(pattern);
                glob(&pattern, &spaced(call.resolved))
                    || call
                        .args
                        .values()
                        .filter_map(crate::agent::tools::value_text)
                        .any(|v| glob(&pattern, &spaced(&v)))
            })
            && self.args.iter().all(|(name, pattern)| {
                value(name).is_some_and(|v| glob(&spaced(pattern), &spaced(&v)))
            })
    }
}

/// A call as the rules see it.
#[derive(Debug, Clone, Copy)]
pub struct CallView<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// Its arguments.
    pub args: &'a Map<String, Value>,
    /// Its resolved command line.
    pub resolved: &'a str,
}

/// `text` with each run of whitespace made one space, and none at either end.
fn spaced(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The permissions of an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permissions {
    pub default: Action,
    pub rules: Vec<Rule>,
    /// `--approve all` for this invocation: the questions (`ask`) are answered yes, each decision
    /// journaled; a `deny` still refuses.
    pub approve_all: bool,
}

/// What decided a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decider {
    /// The default (no rule matched).
    Default,
    /// This rule (its number from 1, and the rule).
    Rule(usize, Rule),
}

impl Decider {
    pub fn describe(&self) -> String {
        match self {
            Self::Default => "the default".into(),
            Self::Rule(n, rule) => format!("rule {n} ({})", rule.describe()),
        }
    }
}

impl Permissions {
    /// What happens to `call`.
    pub fn decide(&self, call: &CallView<'_>) -> (Action, Decider) {
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.matches(call) {
                return (rule.action, Decider::Rule(i + 1, rule.clone()));
            }
        }
        (self.default, Decider::Default)
    }
}

/// `permissions:` as written.
#[derive(Debug, Deserialize)]
pub struct RawPermissions {
    pub default: Option<String>,
    #[serde(default)]
    pub rules: Vec<RawRule>,
}

/// One rule as written.
#[derive(Debug, Deserialize)]
pub struct RawRule {
    pub tool: String,
    pub command: Option<String>,
    /// Globs on named arguments' values.
    #[serde(default)]
    pub args: std::collections::BTreeMap<String, String>,
    pub action: String,
}

/// Checks `raw` (from `file`); each problem becomes a diagnostic.
pub fn load(raw: &RawPermissions, file: &Path, diags: &mut Vec<Diagnostic>) -> Permissions {
    let action = |text: &str, field: String, diags: &mut Vec<Diagnostic>| {
        Action::parse(text).unwrap_or_else(|| {
            diags.push(
                Diagnostic::new(file, format!("unknown action {text:?}"))
                    .field(field)
                    .hint("use allow, ask or deny"),
            );
            Action::Allow
        })
    };
    let default = match &raw.default {
        Some(text) => action(text, "permissions.default".into(), diags),
        None => Action::Allow,
    };
    let rules = raw
        .rules
        .iter()
        .enumerate()
        .map(|(i, r)| Rule {
            tool: r.tool.clone(),
            command: r.command.clone(),
            args: r.args.clone().into_iter().collect(),
            action: action(&r.action, format!("permissions.rules[{i}].action"), diags),
        })
        .collect();
    Permissions {
        default,
        rules,
        approve_all: false,
    }
}

/// Why a `--permissions` file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RulesFileError {
    #[error("{path}: {source}")]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

/// The rules of a `--permissions` file (`rules:` at its top, or under `permissions:`).
pub fn read_rules(path: &Path) -> Result<Vec<Rule>, RulesFileError> {
    #[derive(Deserialize)]
    struct File {
        permissions: Option<RawPermissions>,
        #[serde(default)]
        rules: Vec<RawRule>,
    }
    let text = std::fs::read_to_string(path).map_err(|source| RulesFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let parsed = crate::agent::yaml::parse::<File>(path, &text)
        .map_err(|d| RulesFileError::Invalid(d.to_string()))?
        .value;
    let raw = RawPermissions {
        default: None,
        rules: parsed
            .permissions
            .map(|p| p.rules)
            .unwrap_or_default()
            .into_iter()
            .chain(parsed.rules)
            .collect(),
    };
    let mut diags = Vec::new();
    let permissions = load(&raw, path, &mut diags);
    match diags.first() {
        Some(d) => Err(RulesFileError::Invalid(d.to_string())),
        None => Ok(permissions.rules),
    }
}

/// Whether `text` matches `pattern` (`*`: any run of characters, `?`: one character).
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_a_shell() {
        assert!(glob("delete_*", "delete_file"));
        assert!(glob("git push*", "git push origin main"));
        assert!(!glob("git push*", "git pull"));
        assert!(glob("a?c", "abc") && !glob("a?c", "ac"));
        assert!(glob("*", "") && glob("*x*", "axb") && !glob("x", "xx"));
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let permissions = Permissions {
            default: Action::Allow,
            rules: vec![
                Rule {
                    tool: "run".into(),
                    command: Some("git push*".into()),
                    args: Vec::new(),
                    action: Action::Deny,
                },
                Rule {
                    tool: "write".into(),
                    command: None,
                    args: vec![("path".into(), "/etc/*".into())],
                    action: Action::Deny,
                },
                Rule {
                    tool: "run".into(),
                    command: None,
                    args: Vec::new(),
                    action: Action::Ask,
                },
            ],
            approve_all: false,
        };
        let none = Map::new();
        let call = |tool, resolved, args| CallView {
            tool,
            args,
            resolved,
        };
        let decide = |c: CallView<'_>| permissions.decide(&c).0;
        assert_eq!(decide(call("run", "git push origin", &none)), Action::Deny);
        // Whitespace is one space; the script a shell tool is given counts, and so does stdin's value.
        assert_eq!(
            decide(call("run", "git   push  origin", &none)),
            Action::Deny
        );
        let script: Map<String, Value> =
            [("script".to_string(), Value::from(" git\tpush --force"))]
                .into_iter()
                .collect();
        assert_eq!(
            decide(call("run", "bash -c git push", &script)),
            Action::Deny
        );
        assert_eq!(
            decide(call("run", "sh -c \"$1\" -- x", &script)),
            Action::Deny
        );
        assert_eq!(decide(call("run", "ls", &none)), Action::Ask);
        // A rule on an argument's value.
        let path = |p: &str| -> Map<String, Value> {
            [("path".to_string(), Value::from(p))].into_iter().collect()
        };
        let (etc, notes) = (path("/etc/passwd"), path("notes.txt"));
        assert_eq!(decide(call("write", "tee", &etc)), Action::Deny);
        assert_eq!(decide(call("write", "tee", &notes)), Action::Allow);
        assert_eq!(decide(call("write", "tee", &none)), Action::Allow);
        let (action, by) = permissions.decide(&call("other", "x", &none));
        assert_eq!((action, by), (Action::Allow, Decider::Default));
    }
}
