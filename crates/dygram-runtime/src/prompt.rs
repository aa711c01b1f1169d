//! The system prompt an agent node sends to the model, and `{{ … }}` templates.

use serde_json::{Map, Value};

use super::machine::{Edge, MachineIndex, Node};

/// How the system prompt names the node it is written for (one line: this, then the name).
const NODE_LINE: &str = "- **Node**: ";

/// The node a system prompt of the runtime names (also in recordings of its requests).
pub fn node_named_in(prompt: &str) -> Option<&str> {
    prompt
        .lines()
        .find_map(|l| l.strip_prefix(NODE_LINE))
        .map(str::trim_end)
}

/// Expands `{{ a.b.c }}` against `variables`; a reference that does not resolve stays as written.
pub fn expand_templates(text: &str, variables: &Map<String, Value>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else {
            break;
        };
        out.push_str(&rest[..start]);
        let inner = rest[start + 2..start + 2 + len].trim();
        match lookup(inner, variables) {
            Some(v) => out.push_str(&display(v)),
            None => out.push_str(&rest[start..start + 2 + len + 2]),
        }
        rest = &rest[start + 2 + len + 2..];
    }
    out.push_str(rest);
    out
}

/// A dotted path (`Ctx.items.0`) in a JSON object.
pub fn lookup<'v>(path: &str, variables: &'v Map<String, Value>) -> Option<&'v Value> {
    let mut parts = path.split('.');
    let first = parts.next()?.trim();
    let mut current = variables.get(first)?;
    for part in parts {
        let part = part.trim();
        current = match current {
            Value::Object(m) => m.get(part)?,
            Value::Array(a) => a.get(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

/// A value as it reads in text: strings bare, everything else as JSON.
pub fn display(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What the node may do with a context, from the labels of the edges between them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Permissions {
    /// May read.
    pub read: bool,
    /// May write.
    pub write: bool,
}

/// Inputs of the system prompt.
pub struct PromptInput<'a> {
    /// The machine.
    pub machine: &'a MachineIndex,
    /// The node.
    pub node: &'a Node,
    /// Contexts the node can use, with permissions and current values.
    pub contexts: Vec<(&'a Node, Permissions, Map<String, Value>)>,
    /// The node's transitions, each with whether it is open now (offered as a tool).
    pub transitions: Vec<(&'a Edge, bool)>,
    /// Distinct nodes visited so far on this path.
    pub visited: usize,
    /// Errors so far.
    pub error_count: u64,
    /// Whether meta tools are offered.
    pub meta: bool,
    /// Values for templates.
    pub variables: &'a Map<String, Value>,
}

/// Builds the system prompt (sent as the first user message).
pub fn system_prompt(input: &PromptInput<'_>) -> String {
    let node = input.node;
    let objective = node
        .prompt()
        .map(|p| expand_templates(&p, input.variables))
        .unwrap_or_default();
    let mut s = String::new();
    s.push_str("# Role\n");
    s.push_str(
        "You are one step of a state machine. You stand at the node described below: do what its \
         objective asks, using the tools you are given, then choose where the machine goes next.\n\n",
    );
    s.push_str("# Current Position\n");
    s.push_str(&format!("{NODE_LINE}{}\n", node.name));
    s.push_str(&format!(
        "- **Type**: {}\n",
        node.ty.as_deref().unwrap_or("unknown")
    ));
    if let Some(title) = node.attribute("title").map(super::prompt::display) {
        s.push_str(&format!(
            "- **Title**: {}\n",
            expand_templates(&title, input.variables)
        ));
    }
    s.push_str(&format!("- **Objective**: {objective}\n"));
    s.push_str(&format!("- **Visited Nodes**: {}\n", input.visited));
    s.push_str(&format!("- **Error Count**: {}\n\n", input.error_count));
    if !input.contexts.is_empty() {
        s.push_str("# Available Context\n");
        s.push_str("Context nodes hold the machine's data. You may use these:\n\n");
        for (ctx, perms, values) in &input.contexts {
            let mut p = Vec::new();
            if perms.read {
                p.push("read");
            }
            if perms.write {
                p.push("write");
            }
            s.push_str(&format!(
                "## {}\n- **Permissions**: {}\n",
                ctx.name,
                p.join(", ")
            ));
            if perms.read && !values.is_empty() {
                s.push_str(&format!(
                    "- **Current Values**: {}\n",
                    Value::Object(values.clone())
                ));
            }
            s.push('\n');
        }
    }
    let open = input.transitions.iter().filter(|(_, open)| *open).count();
    if !input.transitions.is_empty() {
        s.push_str("# Available Transitions\n");
        s.push_str("When the objective is met, call the transition tool of one of these:\n\n");
        for (edge, is_open) in &input.transitions {
            s.push_str(&format!("## {}\n", edge.target));
            if let Some(text) = edge.text() {
                s.push_str(&format!("- **Description**: {text}\n"));
            }
            if let Some(c) = edge.condition() {
                if *is_open {
                    s.push_str(&format!("- **Condition**: {c}\n"));
                } else {
                    s.push_str(&format!(
                        "- **Condition**: {c} (does not hold yet: its tool is offered once it does)\n"
                    ));
                }
            }
            if let Some(title) = input
                .machine
                .node(&edge.target)
                .and_then(|t| t.attribute("title"))
            {
                s.push_str(&format!("- **Target**: {}\n", display(title)));
            }
            s.push('\n');
        }
    }
    if input.meta {
        s.push_str("# Meta-Programming Capabilities\n");
        s.push_str(
            "You may inspect and change the machine itself, and build new tools, with the meta \
             tools (get_machine_definition, update_definition, construct_tool, …).\n\n",
        );
    }
    s.push_str("# Instructions\n");
    if !objective.is_empty() {
        s.push_str(&format!("Your objective:\n> {objective}\n\n"));
    }
    s.push_str(
        "1. Read and write context data with the context tools when the objective needs it.\n\
         2. Work out what the objective asks for.\n",
    );
    if input.transitions.is_empty() {
        s.push_str("3. This node has no transitions: answer without calling a tool when done.\n");
    } else if open == 0 {
        s.push_str(
            "3. No transition is open yet: write the data its condition needs, then call its \
             transition tool; the machine only moves on when you do.\n",
        );
    } else {
        s.push_str(
            "3. Finish by calling exactly one transition tool; the machine only moves on when you do.\n",
        );
    }
    s
}

/// The node a request is for, as the runtime's system prompt (its first message) names it; empty
/// when it names none.
pub fn node_of(request: &llm::ChatRequest) -> String {
    request
        .messages
        .first()
        .and_then(|m| node_named_in(&m.text()).map(str::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_is_read_from_the_system_prompt() {
        let request = |text: &str| llm::ChatRequest::new("m", vec![llm::Message::system(text)]);
        assert_eq!(node_of(&request("# Task\n- **Node**: review\n")), "review");
        assert_eq!(node_of(&request("no node here")), "");
    }
}
