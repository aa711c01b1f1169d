//! The tools offered to the model at an agent node: names and JSON schemas.
//!
//! Names and schema shapes are the reference implementation's, so recorded conversations replay
//! (playback matches on the set of tool names and the number of messages).

use serde_json::{Map, Value, json};

use llm::ToolDefinition;

use super::machine::Node;
use super::state::DynamicTool;

/// Prefix of transition tools.
pub const TRANSITION: &str = "transition_to_";
/// Prefix of context read tools.
pub const READ: &str = "read_";
/// Prefix of context write tools.
pub const WRITE: &str = "write_";
/// Prefix of spawn tools.
pub const SPAWN: &str = "spawn_async_to_";
/// Prefix of map fan-out tools.
pub const MAP: &str = "map_spawn_to_";

fn tool(name: String, description: String, schema: Value) -> ToolDefinition {
    ToolDefinition {
        name,
        description,
        parameters: schema,
    }
}

/// `transition_to_<target>`.
pub fn transition(target: &str) -> ToolDefinition {
    tool(
        format!("{TRANSITION}{target}"),
        format!("Transition to {target}"),
        json!({"type": "object", "properties": {"reason": {"type": "string",
            "description": "Brief explanation of why this transition was chosen"}}}),
    )
}

/// `read_<context>`.
pub fn read(context: &str) -> ToolDefinition {
    tool(
        format!("{READ}{context}"),
        format!("Read data from {context} context"),
        json!({"type": "object", "properties": {"fields": {"type": "array",
            "items": {"type": "string"}, "description": "Specific fields to read (optional)"}}}),
    )
}

/// `write_<context>`.
pub fn write(context: &str) -> ToolDefinition {
    tool(
        format!("{WRITE}{context}"),
        format!("Write data to {context} context"),
        json!({"type": "object", "properties": {"data": {"type": "object",
            "description": "Data to write"}}, "required": ["data"]}),
    )
}

/// `spawn_async_to_<target>`.
pub fn spawn(target: &str) -> ToolDefinition {
    tool(
        format!("{SPAWN}{target}"),
        format!("Start a parallel path at {target}; this path continues here"),
        json!({"type": "object", "properties": {
            "reason": {"type": "string", "description": "Why the parallel path is started"},
            "await_result": {"type": "boolean", "description": "Whether to wait for its result (not supported: the path always runs on its own)"}}}),
    )
}

/// `map_spawn_to_<target>`.
pub fn map_spawn(target: &str, source: &str) -> ToolDefinition {
    tool(
        format!("{MAP}{target}"),
        format!("Start one path at {target} for each item of {source}"),
        json!({"type": "object", "properties": {
            "source": {"type": "string", "description": "The list to fan out over, as Context.field"},
            "reason": {"type": "string", "description": "Why the fan-out is started"}}}),
    )
}

/// Names of the meta tools, in the order they are offered.
pub const META_TOOLS: [&str; 7] = [
    "get_machine_definition",
    "update_definition",
    "construct_tool",
    "list_available_tools",
    "propose_tool_improvement",
    "get_tool_nodes",
    "build_tool_from_node",
];

const STRATEGIES: [&str; 3] = ["agent_backed", "code_generation", "composition"];

/// A meta tool's description.
pub fn meta_description(name: &str) -> &'static str {
    match name {
        "get_machine_definition" => {
            "Return the machine being executed, as JSON, as DyGram source, or both. Read it before changing it."
        }
        "update_definition" => {
            "Replace the machine with a new definition given as JSON (title, nodes, edges). The change applies from the next step."
        }
        "construct_tool" => {
            "Create a new tool when none of the existing ones can do what is needed. It is offered from the next model call on."
        }
        "list_available_tools" => {
            "List the tools that exist: the meta tools and those built at run time."
        }
        "propose_tool_improvement" => {
            "Record a proposal to improve a tool. Proposals are kept with the execution for review."
        }
        "get_tool_nodes" => {
            "List the tool nodes declared in the machine, and whether each is already built."
        }
        "build_tool_from_node" => {
            "Build and register a tool from a tool node of the machine, completing what the node leaves out."
        }
        _ => "",
    }
}

/// The seven meta tools.
pub fn meta() -> Vec<ToolDefinition> {
    let d = |n: &str| meta_description(n).to_string();
    vec![
        tool(
            "get_machine_definition".into(),
            d("get_machine_definition"),
            json!({"type": "object", "properties": {"format": {"type": "string",
                "enum": ["json", "dsl", "both"], "description": "json, dsl (DyGram source) or both"}}}),
        ),
        tool(
            "update_definition".into(),
            d("update_definition"),
            json!({"type": "object", "properties": {
                "machine": {"type": "object", "description": "The whole machine as JSON: title, nodes and edges"},
                "reason": {"type": "string", "description": "Why the machine changes"}},
                "required": ["machine", "reason"]}),
        ),
        tool(
            "construct_tool".into(),
            d("construct_tool"),
            json!({"type": "object", "properties": {
                "name": {"type": "string", "description": "Tool name, snake_case"},
                "description": {"type": "string", "description": "What the tool does"},
                "input_schema": {"type": "object", "description": "JSON Schema of the tool's input"},
                "implementation_strategy": {"type": "string", "enum": STRATEGIES,
                    "description": "code_generation: JavaScript run in a sandbox; agent_backed: the model carries it out; composition: a chain of existing tools"},
                "implementation_details": {"type": "string",
                    "description": "The JavaScript function body or function (code_generation), instructions (agent_backed) or the chain as JSON (composition)"}},
                "required": ["name", "description", "input_schema", "implementation_strategy", "implementation_details"]}),
        ),
        tool(
            "list_available_tools".into(),
            d("list_available_tools"),
            json!({"type": "object", "properties": {
                "include_source": {"type": "boolean", "description": "Include each built tool's implementation"},
                "filter_type": {"type": "string", "enum": ["all", "core", "dynamic", "meta"],
                    "description": "Which tools to list"}}}),
        ),
        tool(
            "propose_tool_improvement".into(),
            d("propose_tool_improvement"),
            json!({"type": "object", "properties": {
                "tool_name": {"type": "string", "description": "The tool to improve"},
                "rationale": {"type": "string", "description": "Why it should change"},
                "proposed_changes": {"type": "string", "description": "What should change"}},
                "required": ["tool_name", "rationale", "proposed_changes"]}),
        ),
        tool(
            "get_tool_nodes".into(),
            d("get_tool_nodes"),
            json!({"type": "object", "properties": {"include_registered": {"type": "boolean",
                "description": "Say for each tool node whether it is already built"}}}),
        ),
        tool(
            "build_tool_from_node".into(),
            d("build_tool_from_node"),
            json!({"type": "object", "properties": {
                "tool_name": {"type": "string", "description": "The tool node to build"},
                "strategy": {"type": "string", "enum": STRATEGIES, "description": "How the tool is implemented"},
                "input_schema": {"type": "object", "description": "JSON Schema of the input, when the node has none"},
                "output_schema": {"type": "object", "description": "JSON Schema of the output, when the node has none"},
                "implementation_details": {"type": "string", "description": "Code, instructions or chain"}},
                "required": ["tool_name", "strategy"]}),
        ),
    ]
}

/// A tool built at run time, as offered to the model.
pub fn dynamic(t: &DynamicTool) -> ToolDefinition {
    let schema = if t.input_schema.is_object() {
        t.input_schema.clone()
    } else {
        json!({"type": "object", "properties": {}})
    };
    tool(t.name.clone(), t.description.clone(), schema)
}

/// Whether a name can be a tool name (providers accept `[A-Za-z0-9_-]{1,64}`).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Checks a write to a context against the attributes it declares, as validation checks the values
/// written in the source: a context that declares attributes takes only those, each with a value of
/// its declared type (`null` only for an optional one, `name<T?>`); an attribute without a type
/// takes any value, and a context that declares nothing takes any field. The message says what is
/// wrong and what is declared; nothing is written when one field is refused.
pub fn check_context_write(context: &Node, data: &Map<String, Value>) -> Result<(), WriteRefused> {
    if context.attributes.is_empty() {
        return Ok(());
    }
    let declared: Vec<&str> = context.attributes.iter().map(|(n, _)| n.as_str()).collect();
    let mut problems = Vec::new();
    for (field, value) in data {
        if !declared.contains(&field.as_str()) {
            problems.push(format!("`{field}` is not an attribute of {}", context.name));
            continue;
        }
        let Some((_, ty)) = context.types.iter().find(|(n, _)| n == field) else {
            continue;
        };
        if let Err(e) = check_type(ty, value) {
            problems.push(format!("`{field}`: {e}"));
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(WriteRefused {
        context: context.name.clone(),
        problems,
        declared: context
            .attributes
            .iter()
            .map(|(n, _)| match context.types.iter().find(|(t, _)| t == n) {
                Some((_, ty)) => format!("{n}<{ty}>"),
                None => n.clone(),
            })
            .collect(),
    })
}

/// A write to a context that does not fit its declared attributes (the tool error the model gets).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "Nothing was written to {context}: {}. Declared attributes: {}",
    problems.join("; "),
    declared.join(", ")
)]
pub struct WriteRefused {
    /// The context.
    pub context: String,
    /// What does not fit, one entry per field.
    pub problems: Vec<String>,
    /// The declared attributes, with their types.
    pub declared: Vec<String>,
}

/// How a value does not fit its declared type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TypeMismatch {
    /// A value of another JSON type.
    #[error("expected {ty}, got {got}")]
    Expected {
        /// The declared type.
        ty: String,
        /// The JSON type given.
        got: &'static str,
    },
    /// `null` for a type that is not optional.
    #[error("expected {ty}, got null (the type is not optional)")]
    Null {
        /// The declared type.
        ty: String,
    },
    /// A string that is not of the format the type names.
    #[error("expected {ty}, got \"{text}\" ({what})")]
    Format {
        /// The declared type.
        ty: String,
        /// The string given.
        text: String,
        /// What it is not.
        what: &'static str,
    },
    /// A number with a fraction for an integer type.
    #[error("expected {ty}, got a number with a fraction")]
    Fraction {
        /// The declared type.
        ty: String,
    },
    /// An item of a list.
    #[error("item {index}: {inner}")]
    Item {
        /// Its position.
        index: usize,
        /// How it does not fit.
        inner: Box<TypeMismatch>,
    },
}

/// Whether a JSON value fits a declared type (the type names validation knows; other names, such
/// as user-defined types, take any value).
fn check_type(ty: &str, value: &Value) -> Result<(), TypeMismatch> {
    let (ty, optional) = match ty.trim().strip_suffix('?') {
        Some(t) => (t.trim(), true),
        None => (ty.trim(), false),
    };
    let (name, element) = match ty.split_once('<') {
        Some((name, rest)) => (name.trim(), rest.strip_suffix('>').map(str::trim)),
        None => (ty, None),
    };
    let got = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let mismatch = || TypeMismatch::Expected {
        ty: ty.to_string(),
        got,
    };
    if value.is_null() {
        return if optional || matches!(name, "any" | "Any" | "unknown") {
            Ok(())
        } else {
            Err(TypeMismatch::Null { ty: ty.to_string() })
        };
    }
    let formatted = |check: fn(&str) -> bool, what: &'static str| match value {
        Value::String(s) if check(s) => Ok(()),
        Value::String(s) => Err(TypeMismatch::Format {
            ty: ty.to_string(),
            text: s.clone(),
            what,
        }),
        _ => Err(mismatch()),
    };
    match name {
        "string" | "String" => value.is_string().then_some(()).ok_or_else(mismatch),
        "number" | "Number" | "Float" | "float" | "double" | "decimal" => {
            value.is_number().then_some(()).ok_or_else(mismatch)
        }
        "Integer" | "integer" | "int" => match value.as_f64() {
            Some(n) if n.fract() == 0.0 => Ok(()),
            Some(_) => Err(TypeMismatch::Fraction { ty: ty.to_string() }),
            None => Err(mismatch()),
        },
        "boolean" | "Boolean" | "bool" => value.is_boolean().then_some(()).ok_or_else(mismatch),
        "Date" | "DateTime" => formatted(
            dygram_core::validate::is_iso_datetime,
            "not an ISO 8601 date-time",
        ),
        "Duration" => formatted(dygram_core::validate::is_duration, "not a duration"),
        "UUID" => formatted(dygram_core::validate::is_uuid, "not a UUID"),
        "URL" | "Url" => formatted(dygram_core::validate::is_url, "not a URL"),
        "Array" | "List" | "array" | "Set" => {
            let Value::Array(items) = value else {
                return Err(mismatch());
            };
            if let Some(element) = element {
                for (index, item) in items.iter().enumerate() {
                    check_type(element, item).map_err(|inner| TypeMismatch::Item {
                        index,
                        inner: Box::new(inner),
                    })?;
                }
            }
            Ok(())
        }
        "Map" | "Record" | "object" | "Object" => {
            value.is_object().then_some(()).ok_or_else(mismatch)
        }
        _ => Ok(()),
    }
}
