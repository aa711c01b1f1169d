//! The tools a run offers the model, by name: the agent's shell tools, the built-in session tools
//! (with `sessions: true`), the tools of its MCP servers (`<server>__<tool>`) and the built-in
//! `ask_human`.
//!
//! One registry answers both questions the engine asks about a tool name: what to offer the model
//! ([`ToolRegistry::definitions`]) and what a call of that name runs ([`ToolRegistry::get`]). Every
//! call goes through it, new or settled on resume, so an unknown name is handled in one place, and
//! the built-in is found the way the agent's tools are.

use llm::ToolDefinition;
use serde_json::{Value, json};

use super::InputType;
use crate::agent::Agent;
use crate::agent::tools::{ASK_HUMAN, SESSION_END, SESSION_EXEC, SESSION_START};
use crate::mcp_servers::McpTool;

/// What a call of a registered name runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    /// The agent's tool at this index of `Agent::tools`: a process.
    Shell(usize),
    /// A built-in shell-session tool.
    Session(SessionTool),
    /// A tool of an MCP server: this index of [`ToolRegistry::mcp_tool`].
    Mcp(usize),
    /// The built-in question to the human.
    AskHuman,
    /// The agent's tool at this index of `Agent::tools`, of kind `agent:`: a child run.
    Agent(usize),
    /// A tool of the program running the engine ([`super::HostTools`]).
    Host,
}

/// The built-in shell-session tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionTool {
    Start,
    Exec,
    End,
}

/// The tools of a run, by name.
#[derive(Debug, Clone)]
pub struct ToolRegistry {
    /// Names in the order they are offered, with their handlers.
    entries: Vec<(String, Handler)>,
    definitions: Vec<ToolDefinition>,
    mcp: Vec<McpTool>,
    /// MCP tools not offered because their name was taken already.
    skipped: Vec<String>,
}

impl ToolRegistry {
    /// The agent's tools, then `ask_human` (an agent cannot name a tool `ask_human`; were one there,
    /// the built-in would answer its calls).
    pub fn new(agent: &Agent) -> Self {
        Self::with_mcp(agent, Vec::new())
    }

    /// The agent's tools, the session tools, `mcp` (the tools of its MCP servers), then `ask_human`.
    /// A server's tool whose name is taken (by an agent's tool, or an earlier server's) is not
    /// offered: model APIs refuse two tools of one name ([`ToolRegistry::skipped_mcp`]).
    pub fn with_mcp(agent: &Agent, mcp: Vec<McpTool>) -> Self {
        let mut entries: Vec<(String, Handler)> = agent
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let handler = if t.syntax == crate::agent::tools::Syntax::Agent {
                    Handler::Agent(i)
                } else {
                    Handler::Shell(i)
                };
                (t.name.clone(), handler)
            })
            .collect();
        let sessions = if agent.sessions {
            session_definitions()
        } else {
            Vec::new()
        };
        entries.extend(
            sessions
                .iter()
                .map(|(tool, d)| (d.name.clone(), Handler::Session(*tool))),
        );
        let mut kept: Vec<McpTool> = Vec::new();
        let mut skipped = Vec::new();
        for tool in mcp {
            let taken = tool.model_name == ASK_HUMAN
                || entries.iter().any(|(n, _)| *n == tool.model_name)
                || kept.iter().any(|k| k.model_name == tool.model_name);
            if taken {
                skipped.push(tool.model_name);
            } else {
                kept.push(tool);
            }
        }
        let mcp = kept;
        entries.extend(
            mcp.iter()
                .enumerate()
                .map(|(i, t)| (t.model_name.clone(), Handler::Mcp(i))),
        );
        entries.push((ASK_HUMAN.into(), Handler::AskHuman));
        let mut definitions: Vec<ToolDefinition> = agent
            .tools
            .iter()
            .map(|t| ToolDefinition {
                name: t.name.clone(),
                description: t.llm_description(),
                parameters: t.schema(),
            })
            .collect();
        definitions.extend(sessions.into_iter().map(|(_, d)| d));
        definitions.extend(mcp.iter().map(|t| {
            ToolDefinition {
                name: t.model_name.clone(),
                description: t
                    .info
                    .description
                    .clone()
                    .or_else(|| t.info.title.clone())
                    .unwrap_or_default(),
                parameters: t.info.input_schema.clone(),
            }
        }));
        definitions.push(ask_human_definition());
        Self {
            entries,
            definitions,
            mcp,
            skipped,
        }
    }

    /// What a call of `name` runs; `None` for a name nobody registered.
    pub fn get(&self, name: &str) -> Option<Handler> {
        if name == ASK_HUMAN {
            return Some(Handler::AskHuman);
        }
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, handler)| *handler)
    }

    /// Offers the host's tools (before `ask_human`); the names already taken are left out and
    /// returned.
    pub fn add_host(&mut self, definitions: Vec<ToolDefinition>) -> Vec<String> {
        let mut taken = Vec::new();
        for definition in definitions {
            if definition.name == ASK_HUMAN
                || self.entries.iter().any(|(n, _)| *n == definition.name)
            {
                taken.push(definition.name);
                continue;
            }
            self.entries.push((definition.name.clone(), Handler::Host));
            let at = self.definitions.len().saturating_sub(1);
            self.definitions.insert(at, definition);
        }
        taken
    }

    /// The MCP tools left out because another tool (or an earlier MCP tool) has their name.
    pub fn skipped_mcp(&self) -> &[String] {
        &self.skipped
    }

    /// The MCP tool a [`Handler::Mcp`] names.
    pub fn mcp_tool(&self, index: usize) -> Option<&McpTool> {
        self.mcp.get(index)
    }

    /// The names offered, in order (for the "not found" result).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// The definitions sent to the model.
    pub fn definitions(&self) -> &[ToolDefinition] {
        &self.definitions
    }
}

/// The definition of the built-in `ask_human` tool.
pub fn ask_human_definition() -> ToolDefinition {
    ToolDefinition {
        name: ASK_HUMAN.into(),
        description: "Ask the human user for input or clarification".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "description": "The question or prompt to show the user"},
                "input_type": {
                    "type": "string",
                    "enum": ["text", "password", "confirmation"],
                    "description": "text (default), password (hidden input) or confirmation (yes/no)"
                },
                "sensitive": {"type": "boolean", "description": "Whether the answer is secret"}
            },
            "required": ["prompt"]
        }),
    }
}

/// The definitions of the built-in session tools.
fn session_definitions() -> Vec<(SessionTool, ToolDefinition)> {
    let id = json!({"type": "string", "description": "The session's name"});
    vec![
        (
            SessionTool::Start,
            ToolDefinition {
                name: SESSION_START.into(),
                description: "Start a persistent shell session (bash unless `command` names \
                              another shell; any other command, such as python3 or sqlite3, runs \
                              as an interactive program on a terminal). Returns its id."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "A name for the session (optional)"},
                        "command": {"type": "string", "description": "The shell or program (default bash)"}
                    }
                }),
            },
        ),
        (
            SessionTool::Exec,
            ToolDefinition {
                name: SESSION_EXEC.into(),
                description: "Run a command in a session. The working folder, exported variables \
                              and background jobs persist from one command to the next; for an \
                              interactive program the command is one line of its input."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "id": id,
                        "command": {"type": "string", "description": "The command to run"},
                        "timeout_seconds": {"type": "number", "description": "Give up after this many seconds"}
                    },
                    "required": ["id", "command"]
                }),
            },
        ),
        (
            SessionTool::End,
            ToolDefinition {
                name: SESSION_END.into(),
                description: "End a session: its shell or program stops.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"id": id},
                    "required": ["id"]
                }),
            },
        ),
    ]
}

/// The arguments of an `ask_human` call: read here only, wherever a call is asked or answered (a new
/// call, or one pending when a run is resumed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskHumanArgs {
    /// What to ask; `None` when the call has no text prompt.
    pub prompt: Option<String>,
    /// How to answer (`text` unless `password` or `confirmation`).
    pub input_type: InputType,
    /// Whether the answer is secret.
    pub sensitive: bool,
}

impl AskHumanArgs {
    /// Reads `args`. Values of the wrong type take the defaults; `sensitive` is a boolean, and the
    /// text `"true"` (in any case) counts as true too, since models often send booleans as strings.
    pub fn parse(args: &Value) -> Self {
        let input_type = match args.get("input_type").and_then(Value::as_str) {
            Some("password") => InputType::Password,
            Some("confirmation") => InputType::Confirmation,
            _ => InputType::Text,
        };
        let sensitive = match args.get("sensitive") {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
            _ => false,
        };
        Self {
            prompt: args
                .get("prompt")
                .and_then(Value::as_str)
                .map(str::to_string),
            input_type,
            sensitive,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ask_human_arguments_are_read_with_their_defaults() {
        let args = AskHumanArgs::parse(&json!({"prompt": "Key?", "input_type": "password"}));
        assert_eq!(args.prompt.as_deref(), Some("Key?"));
        assert_eq!(args.input_type, InputType::Password);
        assert!(!args.sensitive);

        let args = AskHumanArgs::parse(&json!({"input_type": 3, "sensitive": "TRUE"}));
        assert_eq!(args.prompt, None);
        assert_eq!(args.input_type, InputType::Text);
        assert!(args.sensitive, "the text \"true\" counts, in any case");

        for no in [json!("yes"), json!(1), json!(false), json!(null)] {
            assert!(!AskHumanArgs::parse(&json!({"sensitive": no})).sensitive);
        }
    }
}
