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
//! A rule matches on the tool's name (a glob: `*` any text, `?` one character) and, when it has
//! `command`, on the call's resolved command line (a shell tool's command, `session_exec ID: …`, an
//! MCP tool's name and arguments as JSON).

use std::path::Path;

use serde::Deserialize;

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
    pub action: Action,
}

impl Rule {
    /// `tool: "delete_*", action: ask` as written.
    pub fn describe(&self) -> String {
        match &self.command {
            Some(command) => format!(
                "tool {:?}, command {:?}: {}",
                self.tool,
                command,
                self.action.as_str()
            ),
            None => format!("tool {:?}: {}", self.tool, self.action.as_str()),
        }
    }

    fn matches(&self, tool: &str, command: &str) -> bool {
        glob(&self.tool, tool) && self.command.as_deref().is_none_or(|c| glob(c, command))
    }
}

/// The permissions of an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permissions {
    pub default: Action,
    pub rules: Vec<Rule>,
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
    /// What happens to a call of `tool` whose resolved command line is `command`.
    pub fn decide(&self, tool: &str, command: &str) -> (Action, Decider) {
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.matches(tool, command) {
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
            action: action(&r.action, format!("permissions.rules[{i}].action"), diags),
        })
        .collect();
    Permissions { default, rules }
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
                    action: Action::Deny,
                },
                Rule {
                    tool: "run".into(),
                    command: None,
                    action: Action::Ask,
                },
            ],
        };
        assert_eq!(permissions.decide("run", "git push origin").0, Action::Deny);
        assert_eq!(permissions.decide("run", "ls").0, Action::Ask);
        let (action, by) = permissions.decide("other", "x");
        assert_eq!((action, by), (Action::Allow, Decider::Default));
    }
}
