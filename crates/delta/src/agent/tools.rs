//! Tools: how a tool definition becomes an argument vector.
//!
//! Three syntaxes:
//!
//! * `exec: "cp ${src} ${dst}"` — run a program directly, no shell. The template is split into words
//!   (quotes and backslashes as in a shell); `${name}` placeholders become parameters, and each value
//!   lands exactly where its placeholder stands (`cp ${src} backup/` copies *src* into *backup/*).
//!   A word may mix text and placeholders (`--out=${file}`). Shell metacharacters outside quotes are
//!   refused: that is what `shell:` is for.
//! * `shell: "cat ${file} | wc -l"` — run `sh -c SCRIPT -- VALUES…`: every placeholder becomes a
//!   quoted positional parameter (`"$1"`), so values never reach the shell as code; `${name:raw}`
//!   becomes an unquoted `$1` for the rare case where word splitting is wanted.
//! * legacy `command: [prog, args…]` + `parameters:` with `inject_as: argument | option | stdin`.
//!
//! `stdin: name` sends a parameter's value on standard input. `${AGENT_HOME}` is replaced by the agent
//! folder (in `shell:` scripts it is left to the shell, which sees it in the environment).

use std::time::Duration;

use serde_json::{Map, Value, json};

/// Which syntax a tool was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// `exec:`.
    Exec,
    /// `shell:`.
    Shell,
    /// `command:` + `parameters:`.
    Legacy,
    /// `agent:`: another delta agent, run on the task the model gives.
    Agent,
}

impl Syntax {
    /// The name used in messages and `tool:expand`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exec => "exec",
            Self::Shell => "shell",
            Self::Legacy => "command",
            Self::Agent => "agent",
        }
    }
}

/// How a parameter's value reaches the program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inject {
    /// As (part of) an argument.
    Argument,
    /// On standard input.
    Stdin,
    /// As `option_name value` (legacy).
    Option(String),
}

impl Inject {
    /// The `inject_as` spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Argument => "argument",
            Self::Stdin => "stdin",
            Self::Option(_) => "option",
        }
    }
}

/// JSON type announced to the model. Values always reach the program as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    /// `string` (the default).
    String,
    /// `number`.
    Number,
    /// `integer`.
    Integer,
    /// `boolean`.
    Boolean,
}

impl ParamType {
    /// Parses a `type:` value.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "string" => Some(Self::String),
            "number" => Some(Self::Number),
            "integer" => Some(Self::Integer),
            "boolean" => Some(Self::Boolean),
            _ => None,
        }
    }

    /// The JSON Schema name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Number => "number",
            Self::Integer => "integer",
            Self::Boolean => "boolean",
        }
    }
}

/// A tool parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Name the model uses.
    pub name: String,
    /// Announced type.
    pub kind: ParamType,
    /// Description for the model.
    pub description: Option<String>,
    /// How the value is passed.
    pub inject: Inject,
}

/// A piece of an `exec:` word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Literal text.
    Text(String),
    /// The value of parameter `n`.
    Value(usize),
}

/// One element of the argument vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgSpec {
    /// Fixed text (`${AGENT_HOME}` substituted).
    Fixed(String),
    /// An `exec:` word: text and values concatenated.
    Word(Vec<Piece>),
    /// A parameter value on its own (shell positional, legacy argument).
    Value(usize),
    /// A legacy option: the flag, then the value; both omitted when the value is missing.
    Flag(String, usize),
}

/// A tool ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// Name the model calls it by.
    pub name: String,
    /// Description for the model.
    pub description: Option<String>,
    /// Parameters, in the order they were found.
    pub params: Vec<Param>,
    /// The argument vector.
    pub argv: Vec<ArgSpec>,
    /// The parameter sent on standard input.
    pub stdin: Option<usize>,
    /// The syntax it was written in.
    pub syntax: Syntax,
    /// The `exec:`/`shell:` template as written.
    pub template: Option<String>,
    /// Kill the tool's process group after this long.
    pub timeout: Duration,
}

/// What to run for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Standard input, if a parameter provides it (otherwise stdin is closed).
    pub stdin: Option<String>,
}

impl Invocation {
    /// The argument vector joined with spaces (for logs; not a shell command line).
    pub fn display(&self) -> String {
        self.argv.join(" ")
    }
}

/// Why a tool definition was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
}

impl ToolError {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            hint: None,
        }
    }

    fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// An explicitly declared parameter (from `parameters:`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeclaredParam {
    /// Name.
    pub name: String,
    /// `type:`.
    pub kind: Option<String>,
    /// `description:`.
    pub description: Option<String>,
    /// `inject_as:`.
    pub inject_as: Option<String>,
    /// `option_name:`.
    pub option_name: Option<String>,
}

/// The parts of a tool definition that decide how it runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolSource {
    /// `name:`.
    pub name: String,
    /// `description:`.
    pub description: Option<String>,
    /// `exec:`.
    pub exec: Option<String>,
    /// `shell:`.
    pub shell: Option<String>,
    /// `command:`.
    pub command: Option<Vec<String>>,
    /// `stdin:`.
    pub stdin: Option<String>,
    /// `agent:` (a folder, relative to the agent's).
    pub agent: Option<String>,
    /// `parameters:`.
    pub parameters: Option<Vec<DeclaredParam>>,
    /// Timeout.
    pub timeout: Duration,
}

/// Name of the built-in tool.
pub const ASK_HUMAN: &str = "ask_human";
/// The built-in shell-session tools an agent with `sessions: true` is offered.
pub const SESSION_START: &str = "session_start";
pub const SESSION_EXEC: &str = "session_exec";
pub const SESSION_END: &str = "session_end";
pub const SESSION_TOOLS: [&str; 3] = [SESSION_START, SESSION_EXEC, SESSION_END];

/// Checks a tool name: what the model APIs accept.
pub fn validate_tool_name(name: &str) -> Result<(), ToolError> {
    if name == ASK_HUMAN {
        return Err(
            ToolError::new("the name ask_human is reserved for the built-in tool")
                .hint("rename the tool; ask_human is always available to the model"),
        );
    }
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(ToolError::new(format!("invalid tool name {name:?}"))
            .hint("use 1 to 64 letters, digits, '_' or '-' (what model APIs accept)"))
    }
}

/// Expands a tool definition.
pub fn expand(source: &ToolSource) -> Result<Tool, ToolError> {
    validate_tool_name(&source.name)?;
    let modes = [
        source.exec.is_some(),
        source.shell.is_some(),
        source.command.is_some(),
        source.agent.is_some(),
    ];
    if modes.iter().filter(|m| **m).count() != 1 {
        return Err(ToolError::new("must have exactly one of: exec:, shell:, command: or agent: field")
            .hint("exec: runs a program directly, shell: runs a sh script, command: is the older list form, agent: runs another delta agent"));
    }
    if let Some(path) = &source.agent {
        return agent_tool(source, path);
    }
    let mut tool = if let Some(template) = &source.exec {
        expand_exec(template)?
    } else if let Some(template) = &source.shell {
        expand_shell(template)?
    } else {
        expand_legacy(
            source.command.as_deref().unwrap_or_default(),
            source.parameters.as_deref(),
        )?
    };
    tool.name = source.name.clone();
    tool.description = source.description.clone().filter(|d| !d.trim().is_empty());
    tool.timeout = source.timeout;
    if let Some(stdin) = &source.stdin {
        apply_stdin(&mut tool, stdin)?;
    }
    if tool.syntax != Syntax::Legacy
        && let Some(declared) = &source.parameters
    {
        merge_declared(&mut tool, declared)?;
    }
    if tool
        .params
        .iter()
        .filter(|p| p.inject == Inject::Stdin)
        .count()
        > 1
    {
        return Err(ToolError::new(
            "At most one parameter can have inject_as='stdin'",
        ));
    }
    Ok(tool)
}

/// An `agent:` tool: one parameter, `task`, given to the agent in folder `path` as its message.
fn agent_tool(source: &ToolSource, path: &str) -> Result<Tool, ToolError> {
    if path.trim().is_empty() {
        return Err(ToolError::new("agent: names no folder")
            .hint("give the agent's folder, relative to this agent's: agent: ./researcher"));
    }
    if source.stdin.is_some() || source.parameters.is_some() {
        return Err(
            ToolError::new("an agent: tool takes no stdin: or parameters:")
                .hint("the model gives it one string, `task`, which becomes the agent's message"),
        );
    }
    Ok(Tool {
        name: source.name.clone(),
        description: source.description.clone().filter(|d| !d.trim().is_empty()),
        params: vec![Param {
            name: "task".into(),
            kind: ParamType::String,
            description: Some(
                "What the agent should do: its task, with what it needs to know.".into(),
            ),
            inject: Inject::Argument,
        }],
        argv: Vec::new(),
        stdin: None,
        syntax: Syntax::Agent,
        template: Some(path.trim().to_string()),
        timeout: source.timeout,
    })
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A `${name}` or `${name:raw}` at the start of `s`: (name, raw, length).
fn placeholder_at(s: &str) -> Option<(&str, bool, usize)> {
    let rest = s.strip_prefix("${")?;
    let end = rest.find('}')?;
    let inner = &rest[..end];
    let (name, raw) = match inner.strip_suffix(":raw") {
        Some(n) => (n, true),
        None => (inner, false),
    };
    (!name.is_empty() && name.chars().all(is_name_char)).then_some((name, raw, end + 3))
}

fn param_index(params: &mut Vec<Param>, name: &str) -> usize {
    if let Some(i) = params.iter().position(|p| p.name == name) {
        return i;
    }
    params.push(Param {
        name: name.to_string(),
        kind: ParamType::String,
        description: None,
        inject: Inject::Argument,
    });
    params.len() - 1
}

const METACHARACTERS: [(&str, &str); 9] = [
    ("&&", "and-list"),
    ("||", "or-list"),
    ("$(", "command substitution"),
    ("|", "pipe"),
    (">", "redirection"),
    ("<", "redirection"),
    ("&", "background"),
    (";", "command separator"),
    ("`", "command substitution"),
];

fn expand_exec(template: &str) -> Result<Tool, ToolError> {
    let mut params = Vec::new();
    let mut words: Vec<Vec<Piece>> = Vec::new();
    let mut word: Option<Vec<Piece>> = None;
    let mut text = String::new();
    let mut quote: Option<char> = None;
    let flush_text = |word: &mut Option<Vec<Piece>>, text: &mut String| {
        if !text.is_empty() {
            word.get_or_insert_with(Vec::new)
                .push(Piece::Text(std::mem::take(text)));
        }
    };
    let mut i = 0;
    let bytes = template;
    while i < bytes.len() {
        let rest = &bytes[i..];
        let Some(c) = rest.chars().next() else { break };
        if rest.starts_with("${") {
            match placeholder_at(rest) {
                Some((_, true, _)) => {
                    return Err(ToolError::new(":raw modifier not allowed in exec: mode")
                        .hint("exec: never involves a shell; use shell: if the value must be word-split"));
                }
                Some(("AGENT_HOME", false, len)) => {
                    text.push_str("${AGENT_HOME}");
                    word.get_or_insert_with(Vec::new);
                    i += len;
                    continue;
                }
                Some((name, false, len)) => {
                    flush_text(&mut word, &mut text);
                    let index = param_index(&mut params, name);
                    word.get_or_insert_with(Vec::new).push(Piece::Value(index));
                    i += len;
                    continue;
                }
                None => {}
            }
        }
        match quote {
            Some(q) if c == q => {
                quote = None;
                word.get_or_insert_with(Vec::new);
            }
            Some('"') if c == '\\' => {
                let next = rest[1..].chars().next();
                match next {
                    Some(n @ ('"' | '\\' | '$' | '`')) => {
                        text.push(n);
                        i += 1 + n.len_utf8();
                        continue;
                    }
                    _ => text.push(c),
                }
            }
            Some(_) => text.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                word.get_or_insert_with(Vec::new);
            }
            None if c == '\\' => {
                if let Some(n) = rest[1..].chars().next() {
                    text.push(n);
                    word.get_or_insert_with(Vec::new);
                    i += 1 + n.len_utf8();
                    continue;
                }
            }
            None if c.is_whitespace() => {
                flush_text(&mut word, &mut text);
                if let Some(w) = word.take() {
                    words.push(w);
                }
            }
            None => {
                if let Some((meta, what)) = METACHARACTERS.iter().find(|(m, _)| rest.starts_with(m))
                {
                    return Err(ToolError::new(format!(
                        "Shell metacharacter '{meta}' ({what}) not allowed in exec: mode"
                    ))
                    .hint("use shell: for pipes, redirections and command chaining, or quote the character"));
                }
                text.push(c);
                word.get_or_insert_with(Vec::new);
            }
        }
        i += c.len_utf8();
    }
    if let Some(q) = quote {
        return Err(ToolError::new(format!(
            "unterminated {q} quote in exec: template"
        )));
    }
    flush_text(&mut word, &mut text);
    if let Some(w) = word.take() {
        words.push(w);
    }
    exec_tool(template, words, params)
}

/// The tool of an `exec:` template cut into `words`: the program must be a fixed word.
fn exec_tool(
    template: &str,
    words: Vec<Vec<Piece>>,
    params: Vec<Param>,
) -> Result<Tool, ToolError> {
    let Some(first) = words.first() else {
        return Err(ToolError::new("exec: template is empty"));
    };
    if first.iter().any(|p| matches!(p, Piece::Value(_))) {
        return Err(ToolError::new("the program to run cannot be a placeholder")
            .hint("start the template with a fixed program name, e.g. exec: \"ls ${dir}\""));
    }
    let argv = words
        .into_iter()
        .map(|pieces| match pieces.as_slice() {
            [Piece::Text(t)] => ArgSpec::Fixed(t.clone()),
            [] => ArgSpec::Fixed(String::new()),
            _ => ArgSpec::Word(pieces),
        })
        .collect();
    Ok(Tool {
        name: String::new(),
        description: None,
        params,
        argv,
        stdin: None,
        syntax: Syntax::Exec,
        template: Some(template.to_string()),
        timeout: Duration::ZERO,
    })
}

fn expand_shell(template: &str) -> Result<Tool, ToolError> {
    if template.trim().is_empty() {
        return Err(ToolError::new("shell: script is empty"));
    }
    let mut params = Vec::new();
    let mut script = String::new();
    let mut i = 0;
    while i < template.len() {
        let rest = &template[i..];
        if let Some((name, raw, len)) = placeholder_at(rest)
            && name != "AGENT_HOME"
        {
            let k = param_index(&mut params, name) + 1;
            let reference = if k < 10 {
                format!("${k}")
            } else {
                format!("${{{k}}}")
            };
            if raw {
                script.push_str(&reference);
            } else {
                script.push('"');
                script.push_str(&reference);
                script.push('"');
            }
            i += len;
            continue;
        }
        let Some(c) = rest.chars().next() else { break };
        script.push(c);
        i += c.len_utf8();
    }
    let mut argv = vec![
        ArgSpec::Fixed("sh".into()),
        ArgSpec::Fixed("-c".into()),
        ArgSpec::Fixed(script),
        ArgSpec::Fixed("--".into()),
    ];
    argv.extend((0..params.len()).map(ArgSpec::Value));
    Ok(Tool {
        name: String::new(),
        description: None,
        params,
        argv,
        stdin: None,
        syntax: Syntax::Shell,
        template: Some(template.to_string()),
        timeout: Duration::ZERO,
    })
}

fn parse_type(p: &DeclaredParam) -> Result<ParamType, ToolError> {
    match &p.kind {
        None => Ok(ParamType::String),
        Some(k) => ParamType::parse(k).ok_or_else(|| {
            ToolError::new(format!("parameter '{}': unknown type {k:?}", p.name)).hint(
                "use string, number, integer or boolean (values always reach the program as text)",
            )
        }),
    }
}

fn parse_inject(p: &DeclaredParam) -> Result<Option<Inject>, ToolError> {
    match p.inject_as.as_deref() {
        None => Ok(None),
        Some("argument") => Ok(Some(Inject::Argument)),
        Some("stdin") => Ok(Some(Inject::Stdin)),
        Some("option") => match p.option_name.as_deref().filter(|o| !o.is_empty()) {
            Some(flag) => Ok(Some(Inject::Option(flag.to_string()))),
            None => Err(
                ToolError::new("option_name is required when inject_as is 'option'").hint(format!(
                    "add e.g. option_name: --{} to parameter '{}'",
                    p.name, p.name
                )),
            ),
        },
        Some(other) => Err(ToolError::new(format!(
            "parameter '{}': inject_as must be argument, option or stdin, not {other:?}",
            p.name
        ))),
    }
}

fn expand_legacy(
    command: &[String],
    declared: Option<&[DeclaredParam]>,
) -> Result<Tool, ToolError> {
    if command.is_empty() || command[0].is_empty() {
        return Err(ToolError::new("command: must name a program").hint("e.g. command: [ls, -la]"));
    }
    let Some(declared) = declared else {
        return Err(ToolError::new("parameters: is required with command:")
            .hint("list the parameters (use parameters: [] for none), or switch to exec:"));
    };
    let mut tool = Tool {
        name: String::new(),
        description: None,
        params: Vec::new(),
        argv: command.iter().cloned().map(ArgSpec::Fixed).collect(),
        stdin: None,
        syntax: Syntax::Legacy,
        template: None,
        timeout: Duration::ZERO,
    };
    for p in declared {
        if tool.params.iter().any(|q| q.name == p.name) {
            return Err(ToolError::new(format!(
                "parameter '{}' is declared twice",
                p.name
            )));
        }
        let inject = parse_inject(p)?.unwrap_or(Inject::Argument);
        let index = tool.params.len();
        match &inject {
            Inject::Argument => tool.argv.push(ArgSpec::Value(index)),
            Inject::Option(flag) => tool.argv.push(ArgSpec::Flag(flag.clone(), index)),
            Inject::Stdin => {
                if tool.stdin.is_some() {
                    return Err(ToolError::new(
                        "At most one parameter can have inject_as='stdin'",
                    ));
                }
                tool.stdin = Some(index);
            }
        }
        tool.params.push(Param {
            name: p.name.clone(),
            kind: parse_type(p)?,
            description: p.description.clone(),
            inject,
        });
    }
    Ok(tool)
}

fn apply_stdin(tool: &mut Tool, name: &str) -> Result<(), ToolError> {
    if let Some(existing) = tool.stdin {
        if tool.params[existing].name == name {
            return Ok(());
        }
        return Err(ToolError::new(
            "At most one parameter can have inject_as='stdin'",
        ));
    }
    match tool.params.iter().position(|p| p.name == name) {
        Some(index) if tool.syntax == Syntax::Exec => {
            // The value goes to stdin instead of the argument list.
            let mut mixed = false;
            tool.argv.retain(|a| match a {
                ArgSpec::Word(pieces) if pieces.contains(&Piece::Value(index)) => {
                    if pieces.len() == 1 {
                        false
                    } else {
                        mixed = true;
                        true
                    }
                }
                _ => true,
            });
            if mixed {
                return Err(ToolError::new(format!(
                    "stdin parameter '{name}' is also part of an argument"
                ))
                .hint("a value goes either to standard input or into an argument"));
            }
            tool.params[index].inject = Inject::Stdin;
            tool.stdin = Some(index);
        }
        // In shell: scripts the value stays available as its positional parameter too.
        Some(index) => {
            tool.params[index].inject = Inject::Stdin;
            tool.stdin = Some(index);
        }
        None => {
            tool.params.push(Param {
                name: name.to_string(),
                kind: ParamType::String,
                description: None,
                inject: Inject::Stdin,
            });
            tool.stdin = Some(tool.params.len() - 1);
        }
    }
    Ok(())
}

fn merge_declared(tool: &mut Tool, declared: &[DeclaredParam]) -> Result<(), ToolError> {
    for d in declared {
        let Some(param) = tool.params.iter_mut().find(|p| p.name == d.name) else {
            let available: Vec<&str> = tool.params.iter().map(|p| p.name.as_str()).collect();
            return Err(ToolError::new(format!(
                "Parameter '{}' declared but not found in template",
                d.name
            ))
            .hint(format!(
                "Available parameters in template: {}",
                if available.is_empty() {
                    "(none)".to_string()
                } else {
                    available.join(", ")
                }
            )));
        };
        if let Some(inject) = parse_inject(d)?
            && inject.as_str() != param.inject.as_str()
        {
            return Err(ToolError::new(format!("Cannot override inject_as for parameter '{}'", d.name)).hint(
                format!(
                    "the template makes it {}; declared parameters may only add a description or a type",
                    param.inject.as_str()
                ),
            ));
        }
        param.kind = parse_type(d)?;
        if d.description.is_some() {
            param.description = d.description.clone();
        }
    }
    Ok(())
}

/// Turns a JSON value from the model into the text a program receives (`None` for null).
pub fn value_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        other => Some(other.to_string()),
    }
}

/// A call that leaves out parameters an `exec:`/`shell:` tool needs (every one is required).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("missing argument(s): {}", .0.join(", "))]
pub struct MissingArguments(pub Vec<String>);

impl Tool {
    /// Builds the argument vector and stdin for a call with `args`.
    ///
    /// Missing values are an error for `exec:`/`shell:` tools (every parameter is required) and are
    /// skipped for legacy tools (as they always were).
    pub fn resolve(
        &self,
        args: &Map<String, Value>,
        agent_home: &str,
    ) -> Result<Invocation, MissingArguments> {
        let home = |s: &str| s.replace("${AGENT_HOME}", agent_home);
        let values: Vec<Option<String>> = self
            .params
            .iter()
            .map(|p| args.get(&p.name).and_then(value_text).map(|v| home(&v)))
            .collect();
        if self.syntax != Syntax::Legacy {
            let missing: Vec<&str> = self
                .params
                .iter()
                .zip(&values)
                .filter(|(_, v)| v.is_none())
                .map(|(p, _)| p.name.as_str())
                .collect();
            if !missing.is_empty() {
                return Err(MissingArguments(
                    missing.into_iter().map(str::to_string).collect(),
                ));
            }
        }
        let value = |i: usize| values[i].clone().unwrap_or_default();
        let mut argv = Vec::with_capacity(self.argv.len());
        for (position, spec) in self.argv.iter().enumerate() {
            match spec {
                // A shell: script keeps ${AGENT_HOME} for the shell to expand from the environment.
                ArgSpec::Fixed(text) if self.syntax == Syntax::Shell && position == 2 => {
                    argv.push(text.clone())
                }
                ArgSpec::Fixed(text) => argv.push(home(text)),
                ArgSpec::Word(pieces) => argv.push(
                    pieces
                        .iter()
                        .map(|p| match p {
                            Piece::Text(t) => home(t),
                            Piece::Value(i) => value(*i),
                        })
                        .collect(),
                ),
                ArgSpec::Value(i) => match &values[*i] {
                    Some(v) => argv.push(v.clone()),
                    None if self.syntax == Syntax::Legacy => {}
                    None => argv.push(String::new()),
                },
                ArgSpec::Flag(flag, i) => {
                    if let Some(v) = &values[*i] {
                        argv.push(flag.clone());
                        argv.push(v.clone());
                    }
                }
            }
        }
        Ok(Invocation {
            argv,
            stdin: self.stdin.and_then(|i| values[i].clone()),
        })
    }

    /// The description the model sees.
    pub fn llm_description(&self) -> String {
        match (&self.description, self.syntax) {
            (Some(d), _) => d.trim().to_string(),
            (None, Syntax::Agent) => format!(
                "Runs the agent {} on a task and gives its final answer.",
                self.template.as_deref().unwrap_or_default()
            ),
            (None, _) => format!("Executes: {}", self.display_command()),
        }
    }

    /// The JSON Schema of the arguments.
    pub fn schema(&self) -> Value {
        let mut properties = Map::new();
        for p in &self.params {
            let mut prop = Map::new();
            prop.insert("type".into(), json!(p.kind.as_str()));
            if let Some(d) = &p.description {
                prop.insert("description".into(), json!(d));
            }
            properties.insert(p.name.clone(), Value::Object(prop));
        }
        let required: Vec<&str> = self.params.iter().map(|p| p.name.as_str()).collect();
        json!({"type": "object", "properties": properties, "required": required})
    }

    /// The tool as `delta tool:expand` shows it: its argument vector, parameters (type, how each is
    /// passed), timeout, and the syntax and template it was written in.
    pub fn expansion(&self) -> Value {
        let mut t = Map::new();
        t.insert("name".into(), json!(self.name));
        if let Some(d) = &self.description {
            t.insert("description".into(), json!(d));
        }
        t.insert("command".into(), json!(self.display_argv()));
        let params: Vec<Value> = self
            .params
            .iter()
            .map(|p| {
                let mut m = Map::new();
                m.insert("name".into(), json!(p.name));
                m.insert("type".into(), json!(p.kind.as_str()));
                m.insert("inject_as".into(), json!(p.inject.as_str()));
                if let Inject::Option(flag) = &p.inject {
                    m.insert("option_name".into(), json!(flag));
                }
                if let Some(d) = &p.description {
                    m.insert("description".into(), json!(d));
                }
                Value::Object(m)
            })
            .collect();
        t.insert("parameters".into(), Value::Array(params));
        t.insert("timeout_seconds".into(), json!(self.timeout.as_secs_f64()));
        let mut meta = Map::new();
        meta.insert("syntax".into(), json!(self.syntax.as_str()));
        if let Some(template) = &self.template {
            meta.insert("original_template".into(), json!(template));
        }
        t.insert("__meta".into(), Value::Object(meta));
        Value::Object(t)
    }

    /// The argument vector with placeholders shown as `${name}`.
    pub fn display_argv(&self) -> Vec<String> {
        let name = |i: usize| format!("${{{}}}", self.params[i].name);
        let mut out = Vec::new();
        for spec in &self.argv {
            match spec {
                ArgSpec::Fixed(t) => out.push(t.clone()),
                ArgSpec::Word(pieces) => out.push(
                    pieces
                        .iter()
                        .map(|p| match p {
                            Piece::Text(t) => t.clone(),
                            Piece::Value(i) => name(*i),
                        })
                        .collect(),
                ),
                ArgSpec::Value(i) => out.push(name(*i)),
                ArgSpec::Flag(flag, i) => {
                    out.push(flag.clone());
                    out.push(name(*i));
                }
            }
        }
        out
    }

    /// The command as written for humans.
    pub fn display_command(&self) -> String {
        match (&self.template, self.syntax) {
            (Some(t), Syntax::Agent) => format!("agent {t}"),
            (Some(t), _) => t.clone(),
            _ => self.display_argv().join(" "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(name: &str) -> ToolSource {
        ToolSource {
            name: name.into(),
            timeout: Duration::from_secs(60),
            ..ToolSource::default()
        }
    }

    fn exec(template: &str) -> Result<Tool, ToolError> {
        expand(&ToolSource {
            exec: Some(template.into()),
            ..src("t")
        })
    }

    fn args(pairs: &[(&str, Value)]) -> Map<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn exec_placeholders_stay_where_they_are() {
        let tool = exec("cp ${src} backup/").unwrap();
        let inv = tool
            .resolve(&args(&[("src", json!("a.txt"))]), "/agent")
            .unwrap();
        assert_eq!(inv.argv, vec!["cp", "a.txt", "backup/"]);
        let tool = exec("cp ${src} ${dst}").unwrap();
        let inv = tool
            .resolve(&args(&[("dst", json!("b")), ("src", json!("a"))]), "/agent")
            .unwrap();
        assert_eq!(inv.argv, vec!["cp", "a", "b"]);
        assert_eq!(inv.stdin, None);
    }

    #[test]
    fn exec_words_can_mix_text_quotes_and_values() {
        let tool = exec(r#"grep --color=never -e ${pattern} 'my dir/'${sub} "x y" a\ b"#).unwrap();
        let inv = tool
            .resolve(
                &args(&[("pattern", json!("a b; rm -rf /")), ("sub", json!(3))]),
                "/h",
            )
            .unwrap();
        assert_eq!(
            inv.argv,
            vec![
                "grep",
                "--color=never",
                "-e",
                "a b; rm -rf /",
                "my dir/3",
                "x y",
                "a b"
            ]
        );
        assert_eq!(tool.display_argv()[3], "${pattern}");
    }

    #[test]
    fn exec_refuses_shell_syntax_with_a_hint() {
        for (t, what) in [
            ("ls | wc", "'|' (pipe)"),
            ("ls > f", "'>' (redirection)"),
            ("a && b", "'&&' (and-list)"),
            ("echo $(id)", "'$(' (command substitution)"),
            ("a; b", "';' (command separator)"),
        ] {
            let err = exec(t).unwrap_err();
            assert!(err.message.contains(what), "{t}: {}", err.message);
            assert!(err.hint.unwrap().contains("shell:"));
        }
        assert!(
            exec("echo 'a|b'").is_ok(),
            "quoted metacharacters are literal text"
        );
        assert_eq!(
            exec("ls ${x:raw}").unwrap_err().message,
            ":raw modifier not allowed in exec: mode"
        );
        assert!(exec("${prog} -l").is_err());
        assert!(
            exec("echo 'open")
                .unwrap_err()
                .message
                .contains("unterminated")
        );
    }

    #[test]
    fn agent_home_is_substituted_in_commands_and_values() {
        let tool = exec("${AGENT_HOME}/bin/run.sh ${x}").unwrap();
        assert_eq!(tool.params.len(), 1);
        let inv = tool
            .resolve(&args(&[("x", json!("${AGENT_HOME}/y"))]), "/a")
            .unwrap();
        assert_eq!(inv.argv, vec!["/a/bin/run.sh", "/a/y"]);
    }

    #[test]
    fn shell_placeholders_become_quoted_positionals() {
        let tool = expand(&ToolSource {
            shell: Some("cat ${file} | wc -l; echo ${flags:raw} ${file} $AGENT_HOME".into()),
            ..src("t")
        })
        .unwrap();
        assert_eq!(tool.params.len(), 2);
        let inv = tool
            .resolve(
                &args(&[("file", json!("a b")), ("flags", json!("-n -e"))]),
                "/a",
            )
            .unwrap();
        assert_eq!(
            inv.argv,
            vec![
                "sh",
                "-c",
                r#"cat "$1" | wc -l; echo $2 "$1" $AGENT_HOME"#,
                "--",
                "a b",
                "-n -e"
            ]
        );
    }

    #[test]
    fn stdin_parameters() {
        let tool = expand(&ToolSource {
            exec: Some("tee ${filename}".into()),
            stdin: Some("content".into()),
            ..src("w")
        })
        .unwrap();
        let inv = tool
            .resolve(
                &args(&[("filename", json!("f.txt")), ("content", json!("hi"))]),
                "/a",
            )
            .unwrap();
        assert_eq!(inv.argv, vec!["tee", "f.txt"]);
        assert_eq!(inv.stdin.as_deref(), Some("hi"));
        // A placeholder named by stdin: leaves the argument list.
        let tool = expand(&ToolSource {
            exec: Some("python3 -c ${code}".into()),
            stdin: Some("code".into()),
            ..src("w")
        })
        .unwrap();
        assert_eq!(tool.display_argv(), vec!["python3", "-c"]);
        assert_eq!(tool.stdin, Some(0));
    }

    #[test]
    fn declared_parameters_enrich_inferred_ones() {
        let tool = expand(&ToolSource {
            exec: Some("ls ${dir}".into()),
            parameters: Some(vec![DeclaredParam {
                name: "dir".into(),
                description: Some("Folder to list".into()),
                ..DeclaredParam::default()
            }]),
            ..src("ls")
        })
        .unwrap();
        assert_eq!(
            tool.params[0].description.as_deref(),
            Some("Folder to list")
        );
        assert_eq!(
            tool.schema(),
            json!({"type": "object", "properties": {"dir": {"type": "string", "description": "Folder to list"}}, "required": ["dir"]})
        );
        let err = expand(&ToolSource {
            exec: Some("ls ${dir}".into()),
            parameters: Some(vec![DeclaredParam {
                name: "path".into(),
                ..DeclaredParam::default()
            }]),
            ..src("ls")
        })
        .unwrap_err();
        assert_eq!(
            err.message,
            "Parameter 'path' declared but not found in template"
        );
        assert_eq!(
            err.hint.as_deref(),
            Some("Available parameters in template: dir")
        );
        let err = expand(&ToolSource {
            exec: Some("ls ${dir}".into()),
            parameters: Some(vec![DeclaredParam {
                name: "dir".into(),
                inject_as: Some("stdin".into()),
                ..DeclaredParam::default()
            }]),
            ..src("ls")
        })
        .unwrap_err();
        assert_eq!(err.message, "Cannot override inject_as for parameter 'dir'");
    }

    #[test]
    fn legacy_tools_inject_arguments_options_and_stdin() {
        let p = |name: &str, inject: &str, option: Option<&str>| DeclaredParam {
            name: name.into(),
            inject_as: Some(inject.into()),
            option_name: option.map(str::to_string),
            ..DeclaredParam::default()
        };
        let tool = expand(&ToolSource {
            command: Some(vec!["curl".into(), "-s".into()]),
            parameters: Some(vec![
                p("data", "option", Some("-d")),
                p("url", "argument", None),
                p("body", "stdin", None),
            ]),
            ..src("post")
        })
        .unwrap();
        let inv = tool
            .resolve(
                &args(&[
                    ("url", json!("http://x")),
                    ("data", json!({"a": 1})),
                    ("body", json!("b")),
                ]),
                "/a",
            )
            .unwrap();
        assert_eq!(inv.argv, vec!["curl", "-s", "-d", r#"{"a":1}"#, "http://x"]);
        assert_eq!(inv.stdin.as_deref(), Some("b"));
        // Missing legacy values are skipped.
        let inv = tool.resolve(&args(&[("url", json!("u"))]), "/a").unwrap();
        assert_eq!(inv.argv, vec!["curl", "-s", "u"]);
        let err = expand(&ToolSource {
            command: Some(vec!["x".into()]),
            parameters: Some(vec![p("o", "option", None)]),
            ..src("t")
        })
        .unwrap_err();
        assert_eq!(
            err.message,
            "option_name is required when inject_as is 'option'"
        );
        let err = expand(&ToolSource {
            command: Some(vec!["x".into()]),
            parameters: Some(vec![p("a", "stdin", None), p("b", "stdin", None)]),
            ..src("t")
        })
        .unwrap_err();
        assert_eq!(
            err.message,
            "At most one parameter can have inject_as='stdin'"
        );
        assert!(
            expand(&ToolSource {
                command: Some(vec!["x".into()]),
                ..src("t")
            })
            .is_err()
        );
    }

    #[test]
    fn exactly_one_mode_and_valid_names() {
        let err = expand(&src("t")).unwrap_err();
        assert_eq!(
            err.message,
            "must have exactly one of: exec:, shell:, command: or agent: field"
        );
        let err = expand(&ToolSource {
            exec: Some("a".into()),
            shell: Some("b".into()),
            ..src("t")
        })
        .unwrap_err();
        assert!(err.message.starts_with("must have exactly one"));
        assert!(validate_tool_name("ask_human").is_err());
        assert!(validate_tool_name("bad name").is_err());
        assert!(validate_tool_name("good-name_1").is_ok());
    }

    #[test]
    fn exec_and_shell_require_every_value() {
        let tool = exec("cp ${a} ${b}").unwrap();
        let err = tool.resolve(&args(&[("a", json!("x"))]), "/h").unwrap_err();
        assert_eq!(err.to_string(), "missing argument(s): b");
        let tool = exec("echo ${n}").unwrap();
        let inv = tool.resolve(&args(&[("n", json!(true))]), "/h").unwrap();
        assert_eq!(inv.argv, vec!["echo", "true"]);
    }

    #[test]
    fn description_falls_back_to_the_command() {
        let tool = exec("ls -la ${dir}").unwrap();
        assert_eq!(tool.llm_description(), "Executes: ls -la ${dir}");
    }
}
