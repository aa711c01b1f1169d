//! Agent folders: loading and validating everything a run needs from one.

mod raw;
pub mod tools;
pub mod yaml;

use std::collections::{BTreeMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use llm::Provider;
use serde_saphyr::Spanned;

use crate::diag::Diagnostic;
use raw::{RawAgent, RawContext, RawHook, RawModule, RawTool};
pub use tools::{Tool, ToolSource};

/// Default iteration budget.
pub const DEFAULT_MAX_ITERATIONS: u32 = 30;
/// Default tool timeout.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);
/// Default hook and generator timeout.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest time limit accepted anywhere (a year), so that no setting can overflow a clock.
pub const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// A time limit given in seconds: greater than 0 and at most [`MAX_SECONDS`].
pub fn seconds(value: f64) -> Option<Duration> {
    (value > 0.0 && value <= MAX_SECONDS)
        .then(|| Duration::try_from_secs_f64(value).ok())
        .flatten()
}

/// What [`seconds`] accepts, for messages.
pub const SECONDS_EXPECTED: &str =
    "a number of seconds greater than 0 and at most 31536000 (a year)";

/// The `llm:` section.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmSettings {
    /// `llm.provider`: which wire protocol the model speaks (`openai`, the default, or
    /// `anthropic`).
    pub provider: Provider,
    /// Model name; omitted from requests when unset.
    pub model: Option<String>,
    /// Temperature; omitted when unset.
    pub temperature: Option<f64>,
    /// Output limit; omitted when unset.
    pub max_tokens: Option<u32>,
    /// `idle_timeout_seconds`: how long the server may send nothing before the request fails
    /// (default: the LLM layer's, 120 s).
    pub idle_timeout: Option<Duration>,
}

/// Lifecycle hook names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookName {
    /// Before every LLM request (may replace the request).
    PreLlmReq,
    /// After every LLM response.
    PostLlmResp,
    /// Before every tool (may skip it).
    PreToolExec,
    /// After every tool.
    PostToolExec,
    /// On tool-execution exceptions and fatal errors.
    OnError,
    /// When a run stops: completed, failed, or paused for a human answer. (Not on interruption: the
    /// user asked to stop now.)
    OnRunEnd,
}

impl HookName {
    /// Every hook.
    pub const ALL: [HookName; 6] = [
        Self::PreLlmReq,
        Self::PostLlmResp,
        Self::PreToolExec,
        Self::PostToolExec,
        Self::OnError,
        Self::OnRunEnd,
    ];

    /// The configuration key.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PreLlmReq => "pre_llm_req",
            Self::PostLlmResp => "post_llm_resp",
            Self::PreToolExec => "pre_tool_exec",
            Self::PostToolExec => "post_tool_exec",
            Self::OnError => "on_error",
            Self::OnRunEnd => "on_run_end",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.as_str() == s)
    }
}

/// One hook.
#[derive(Debug, Clone, PartialEq)]
pub struct HookSpec {
    /// Program and arguments (`${AGENT_HOME}` substituted).
    pub command: Vec<String>,
    /// Kill it after this long.
    pub timeout: Duration,
    /// What it is for.
    pub description: Option<String>,
}

/// What to do when a context source is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMissing {
    /// Fail the run.
    Error,
    /// Leave the source out.
    Skip,
}

/// A source of the model's context, in `context.yaml` order.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A file's content as a system message.
    File {
        /// Label shown in the context block header.
        id: String,
        /// Path (`${AGENT_HOME}`, `${CWD}` substituted when read).
        path: String,
        /// When missing.
        on_missing: OnMissing,
    },
    /// A file produced by a generator command each iteration.
    ComputedFile {
        /// Label.
        id: String,
        /// Generator program and arguments.
        command: Vec<String>,
        /// Generator timeout.
        timeout: Duration,
        /// Where the generator writes its output.
        output_path: String,
        /// When missing or failing.
        on_missing: OnMissing,
    },
    /// The conversation from the journal.
    Journal {
        /// Label.
        id: String,
        /// Keep only the last N iterations (the first user message is always kept).
        max_iterations: Option<u32>,
    },
}

/// The context recipe.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextManifest {
    /// Sources in order.
    pub sources: Vec<Source>,
    /// `context.yaml`, or `None` for the built-in default recipe.
    pub file: Option<PathBuf>,
}

/// A loaded, validated agent.
#[derive(Debug, Clone)]
pub struct Agent {
    /// Absolute agent folder.
    pub dir: PathBuf,
    /// `agent.yaml` or `config.yaml`.
    pub config_file: PathBuf,
    /// `name:`.
    pub name: String,
    /// `version:` (default `1.0.0`).
    pub version: String,
    /// `description:`.
    pub description: Option<String>,
    /// `llm:`.
    pub llm: LlmSettings,
    /// Tools (imported ones first, local ones overriding them).
    pub tools: Vec<Tool>,
    /// Hooks (from `hooks.yaml` and `lifecycle_hooks:`).
    pub hooks: BTreeMap<HookName, HookSpec>,
    /// Iteration budget.
    pub max_iterations: u32,
    /// Context recipe.
    pub context: ContextManifest,
    /// `system_prompt.md` or `system_prompt.txt`.
    pub system_prompt: PathBuf,
    /// Warnings to show (deprecations, unknown keys, shadowed hooks).
    pub warnings: Vec<String>,
}

impl Agent {
    /// The tool called `name`.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// Why an agent folder could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The folder does not exist.
    #[error("agent path does not exist: {0}")]
    NotFound(PathBuf),
    /// The path is not a folder.
    #[error("agent path is not a directory: {0}")]
    NotADirectory(PathBuf),
    /// No `agent.yaml` / `config.yaml`.
    #[error(
        "no agent configuration found in {dir}: expected agent.yaml (or the older config.yaml)"
    )]
    NoConfig {
        /// The folder.
        dir: PathBuf,
        /// Whether it is the current folder (changes the hint).
        is_cwd: bool,
    },
    /// No system prompt.
    #[error("system_prompt.md or system_prompt.txt not found in {0}")]
    NoPrompt(PathBuf),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// One or more problems in the files.
    #[error("{}", render(.0))]
    Invalid(Vec<Diagnostic>),
}

impl AgentError {
    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::NoConfig { is_cwd: true, .. } => Some(
                "run `delta init` to create an agent here, or point to one with --agent <path>"
                    .into(),
            ),
            Self::NoConfig { .. } => {
                Some("check the --agent path, or create an agent with `delta init <name>`".into())
            }
            Self::NotFound(_) => Some("check the --agent path".into()),
            Self::NoPrompt(_) => Some("write the agent's instructions in system_prompt.md".into()),
            _ => None,
        }
    }
}

fn render(diags: &[Diagnostic]) -> String {
    let mut out = String::from("invalid agent configuration:");
    for d in diags {
        out.push_str("\n\n");
        out.push_str(&d.to_string());
    }
    out
}

fn read(path: &Path) -> Result<String, AgentError> {
    std::fs::read_to_string(path).map_err(|source| AgentError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Loads the agent in `dir` (relative paths resolve against the current folder).
pub fn load(dir: &Path) -> Result<Agent, AgentError> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let abs = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        cwd.join(dir)
    };
    if !abs.exists() {
        return Err(AgentError::NotFound(abs));
    }
    if !abs.is_dir() {
        return Err(AgentError::NotADirectory(abs));
    }
    let abs = abs.canonicalize().unwrap_or(abs);
    let mut warnings = Vec::new();
    let agent_yaml = abs.join("agent.yaml");
    let config_yaml = abs.join("config.yaml");
    let config_file = match (agent_yaml.is_file(), config_yaml.is_file()) {
        (true, true) => {
            warnings.push(
                "both agent.yaml and config.yaml found; using agent.yaml (remove config.yaml)"
                    .into(),
            );
            agent_yaml
        }
        (true, false) => agent_yaml,
        (false, true) => {
            warnings.push("config.yaml is deprecated; rename it: mv config.yaml agent.yaml".into());
            config_yaml
        }
        (false, false) => {
            let is_cwd = cwd.canonicalize().map(|c| c == abs).unwrap_or(false);
            return Err(AgentError::NoConfig { dir: abs, is_cwd });
        }
    };
    let source = read(&config_file)?;
    let parsed =
        yaml::parse::<RawAgent>(&config_file, &source).map_err(|d| AgentError::Invalid(vec![d]))?;
    for key in &parsed.unknown_keys {
        warnings.push(format!(
            "{}: unknown key `{key}` is ignored",
            file_name(&config_file)
        ));
    }
    let raw = parsed.value;
    let mut diags = Vec::new();
    let at = |span: &serde_saphyr::Location, message: String| {
        Diagnostic::new(&config_file, message).at(
            &source,
            span.line() as usize,
            span.column() as usize,
        )
    };

    let llm = validate_llm(&raw.llm, &at, &mut diags);
    let max_iterations = match &raw.max_iterations {
        None => DEFAULT_MAX_ITERATIONS,
        Some(s) => match positive_int(s.value) {
            Some(n) => n,
            None => {
                diags.push(
                    at(
                        &s.referenced,
                        "must be a whole number greater than 0".into(),
                    )
                    .field("max_iterations"),
                );
                DEFAULT_MAX_ITERATIONS
            }
        },
    };
    let default_timeout = match &raw.timeout_seconds {
        None => DEFAULT_TOOL_TIMEOUT,
        Some(s) => seconds(s.value).unwrap_or_else(|| {
            diags.push(
                at(&s.referenced, format!("must be {SECONDS_EXPECTED}")).field("timeout_seconds"),
            );
            DEFAULT_TOOL_TIMEOUT
        }),
    };

    // Tools: imports first (depth-first), then the agent's own, later definitions winning by name.
    let mut loader = ModuleLoader {
        root: abs.clone(),
        stack: vec![config_file.clone()],
        loaded: HashSet::new(),
        tools: Vec::new(),
        diags: Vec::new(),
        default_timeout,
    };
    for import in raw.imports.iter().flatten() {
        loader.import(&config_file, &source, import);
    }
    let local = expand_tools(
        &config_file,
        &source,
        &raw.tools,
        default_timeout,
        &mut diags,
    );
    let mut tools = loader.tools;
    diags.append(&mut loader.diags);
    for tool in local {
        match tools.iter().position(|t| t.name == tool.name) {
            Some(i) => tools[i] = tool,
            None => tools.push(tool),
        }
    }

    let hooks = load_hooks(
        &abs,
        &config_file,
        &source,
        raw.lifecycle_hooks.as_ref(),
        &mut warnings,
        &mut diags,
    );
    let system_prompt = find_prompt(&abs)?;
    let context = load_context(&abs, &system_prompt, &mut warnings, &mut diags);

    if !diags.is_empty() {
        return Err(AgentError::Invalid(diags));
    }
    Ok(Agent {
        dir: abs,
        config_file,
        name: raw.name,
        version: raw.version.unwrap_or_else(|| "1.0.0".into()),
        description: raw.description.filter(|d| !d.trim().is_empty()),
        llm,
        tools,
        hooks,
        max_iterations,
        context,
        system_prompt,
        warnings,
    })
}

/// Loads only the tools of one YAML file (an agent configuration or an imported module), following its
/// imports. Imports are confined to the file's folder.
pub fn load_tools(file: &Path) -> Result<Vec<Tool>, AgentError> {
    let file = file.canonicalize().map_err(|source| AgentError::Io {
        path: file.to_path_buf(),
        source,
    })?;
    let source = read(&file)?;
    let module = yaml::parse::<RawModule>(&file, &source)
        .map_err(|d| AgentError::Invalid(vec![d]))?
        .value;
    let root = file.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut loader = ModuleLoader {
        root,
        stack: vec![file.clone()],
        loaded: HashSet::new(),
        tools: Vec::new(),
        diags: Vec::new(),
        default_timeout: DEFAULT_TOOL_TIMEOUT,
    };
    for import in module.imports.iter().flatten() {
        loader.import(&file, &source, import);
    }
    let mut diags = std::mem::take(&mut loader.diags);
    let local = expand_tools(
        &file,
        &source,
        &module.tools,
        DEFAULT_TOOL_TIMEOUT,
        &mut diags,
    );
    if !diags.is_empty() {
        return Err(AgentError::Invalid(diags));
    }
    let mut tools = loader.tools;
    for tool in local {
        match tools.iter().position(|t| t.name == tool.name) {
            Some(i) => tools[i] = tool,
            None => tools.push(tool),
        }
    }
    Ok(tools)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn positive_int(v: f64) -> Option<u32> {
    (v.is_finite() && v >= 1.0 && v.fract() == 0.0 && v <= f64::from(u32::MAX)).then_some(v as u32)
}

type At<'a> = dyn Fn(&serde_saphyr::Location, String) -> Diagnostic + 'a;

fn validate_llm(raw: &raw::RawLlm, at: &At<'_>, diags: &mut Vec<Diagnostic>) -> LlmSettings {
    let mut range = |value: &Option<Spanned<f64>>, field: &str, lo: f64, hi: f64| -> Option<f64> {
        let s = value.as_ref()?;
        if s.value.is_finite() && s.value >= lo && s.value <= hi {
            Some(s.value)
        } else {
            diags.push(
                at(&s.referenced, format!("must be between {lo} and {hi}"))
                    .field(format!("llm.{field}")),
            );
            None
        }
    };
    let temperature = range(&raw.temperature, "temperature", 0.0, 2.0);
    range(&raw.top_p, "top_p", 0.0, 1.0);
    range(&raw.frequency_penalty, "frequency_penalty", -2.0, 2.0);
    range(&raw.presence_penalty, "presence_penalty", -2.0, 2.0);
    let max_tokens = raw
        .max_tokens
        .as_ref()
        .and_then(|s| match positive_int(s.value) {
            Some(n) => Some(n),
            None => {
                diags.push(
                    at(
                        &s.referenced,
                        "must be a whole number greater than 0".into(),
                    )
                    .field("llm.max_tokens"),
                );
                None
            }
        });
    let idle_timeout = raw.idle_timeout_seconds.as_ref().and_then(|s| {
        let limit = seconds(s.value);
        if limit.is_none() {
            diags.push(
                at(&s.referenced, format!("must be {SECONDS_EXPECTED}"))
                    .field("llm.idle_timeout_seconds"),
            );
        }
        limit
    });
    let provider = match &raw.provider {
        None => Provider::OpenAi,
        Some(span) => span
            .value
            .parse()
            .unwrap_or_else(|e: llm::UnknownProvider| {
                diags.push(
                    at(&span.referenced, e.to_string())
                        .field("llm.provider")
                        .hint("use openai (any OpenAI-compatible endpoint) or anthropic"),
                );
                Provider::OpenAi
            }),
    };
    LlmSettings {
        provider,
        model: raw.model.clone().filter(|m| !m.trim().is_empty()),
        temperature,
        max_tokens,
        idle_timeout,
    }
}

fn expand_tools(
    file: &Path,
    source: &str,
    raw: &[Spanned<RawTool>],
    default_timeout: Duration,
    diags: &mut Vec<Diagnostic>,
) -> Vec<Tool> {
    let mut out: Vec<Tool> = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (i, spanned) in raw.iter().enumerate() {
        let t = &spanned.value;
        let loc = &spanned.referenced;
        let located = |message: String| {
            Diagnostic::new(file, message)
                .at(source, loc.line() as usize, loc.column() as usize)
                .field(format!("tools[{i}]"))
        };
        if let Some(first) = seen.insert(t.name.clone(), i) {
            diags.push(located(format!(
                "duplicate tool name '{}' (also tools[{first}])",
                t.name
            )));
            continue;
        }
        let timeout = match t.timeout_seconds.map(seconds) {
            None => default_timeout,
            Some(Some(limit)) => limit,
            Some(None) => {
                diags.push(located(format!(
                    "timeout_seconds must be {SECONDS_EXPECTED}"
                )));
                continue;
            }
        };
        let spec = ToolSource {
            name: t.name.clone(),
            description: t.description.clone(),
            exec: t.exec.clone(),
            shell: t.shell.clone(),
            command: t.command.clone(),
            stdin: t.stdin.clone(),
            parameters: t.parameters.as_ref().map(|ps| {
                ps.iter()
                    .map(|p| tools::DeclaredParam {
                        name: p.name.clone(),
                        kind: p.kind.clone(),
                        description: p.description.clone(),
                        inject_as: p.inject_as.clone(),
                        option_name: p.option_name.clone(),
                    })
                    .collect()
            }),
            timeout,
        };
        match tools::expand(&spec) {
            Ok(tool) => out.push(tool),
            Err(e) => {
                let mut d = located(format!("tool '{}': {}", t.name, e.message));
                if let Some(h) = e.hint {
                    d = d.hint(h);
                }
                diags.push(d);
            }
        }
    }
    out
}

struct ModuleLoader {
    root: PathBuf,
    /// Files being loaded, outermost first: a file already on the stack is a cycle.
    stack: Vec<PathBuf>,
    /// Files fully loaded: importing one again (a diamond) adds nothing.
    loaded: HashSet<PathBuf>,
    tools: Vec<Tool>,
    diags: Vec<Diagnostic>,
    default_timeout: Duration,
}

impl ModuleLoader {
    fn import(&mut self, from: &Path, from_source: &str, spec: &Spanned<String>) {
        let loc = &spec.referenced;
        let fail = |message: String, hint: Option<String>| {
            let mut d = Diagnostic::new(from, message)
                .at(from_source, loc.line() as usize, loc.column() as usize)
                .field("imports");
            if let Some(h) = hint {
                d = d.hint(h);
            }
            d
        };
        let rel = Path::new(&spec.value);
        if rel.is_absolute() || rel.components().any(|c| matches!(c, Component::ParentDir)) {
            self.diags.push(fail(
                format!(
                    "Invalid import path: {} (imports must stay inside the agent folder)",
                    spec.value
                ),
                Some(
                    "use a path relative to the agent folder, e.g. modules/file-tools.yaml".into(),
                ),
            ));
            return;
        }
        let base = from.parent().unwrap_or(&self.root);
        let target = base.join(rel);
        let Ok(canonical) = target.canonicalize() else {
            self.diags.push(fail(
                format!("Import file not found: {}", spec.value),
                Some(format!("resolved to {}", target.display())),
            ));
            return;
        };
        if !canonical.starts_with(&self.root) {
            self.diags.push(fail(
                format!(
                    "Invalid import path: {} resolves outside the agent folder",
                    spec.value
                ),
                None,
            ));
            return;
        }
        if let Some(pos) = self.stack.iter().position(|p| *p == canonical) {
            let mut chain: Vec<String> =
                self.stack[pos..].iter().map(|p| self.relative(p)).collect();
            chain.push(self.relative(&canonical));
            self.diags.push(fail(
                format!("Circular import detected: {}", chain.join(" -> ")),
                None,
            ));
            return;
        }
        if self.loaded.contains(&canonical) {
            return;
        }
        let source = match std::fs::read_to_string(&canonical) {
            Ok(s) => s,
            Err(e) => {
                self.diags
                    .push(Diagnostic::new(&canonical, format!("cannot read: {e}")));
                return;
            }
        };
        let module = match yaml::parse::<RawModule>(&canonical, &source) {
            Ok(parsed) => parsed.value,
            Err(d) => {
                self.diags.push(d);
                return;
            }
        };
        self.stack.push(canonical.clone());
        for nested in module.imports.iter().flatten() {
            self.import(&canonical, &source, nested);
        }
        let tools = expand_tools(
            &canonical,
            &source,
            &module.tools,
            self.default_timeout,
            &mut self.diags,
        );
        for tool in tools {
            match self.tools.iter().position(|t| t.name == tool.name) {
                Some(i) => self.tools[i] = tool,
                None => self.tools.push(tool),
            }
        }
        self.stack.pop();
        self.loaded.insert(canonical);
    }

    fn relative(&self, p: &Path) -> String {
        p.strip_prefix(&self.root)
            .unwrap_or(p)
            .display()
            .to_string()
    }
}

fn load_hooks(
    dir: &Path,
    config_file: &Path,
    config_source: &str,
    lifecycle: Option<&BTreeMap<String, Spanned<RawHook>>>,
    warnings: &mut Vec<String>,
    diags: &mut Vec<Diagnostic>,
) -> BTreeMap<HookName, HookSpec> {
    let mut hooks = BTreeMap::new();
    let add = |file: &Path,
               source: &str,
               map: &BTreeMap<String, Spanned<RawHook>>,
               prefix: &str,
               diags: &mut Vec<Diagnostic>| {
        let mut added = Vec::new();
        for (name, spanned) in map {
            let loc = &spanned.referenced;
            let located = |message: String| {
                Diagnostic::new(file, message)
                    .at(source, loc.line() as usize, loc.column() as usize)
                    .field(format!("{prefix}{name}"))
            };
            let Some(hook) = HookName::parse(name) else {
                diags.push(located(format!("unknown hook '{name}'")).hint(format!(
                    "hooks are {}",
                    HookName::ALL.map(HookName::as_str).join(", ")
                )));
                continue;
            };
            let raw = &spanned.value;
            if raw.command.is_empty() || raw.command[0].is_empty() {
                diags.push(
                    located("command must name a program".into())
                        .hint("e.g. command: [\"${AGENT_HOME}/hooks/check.sh\"]"),
                );
                continue;
            }
            let home = dir.display().to_string();
            added.push((
                hook,
                HookSpec {
                    command: raw
                        .command
                        .iter()
                        .map(|c| c.replace("${AGENT_HOME}", &home))
                        .collect(),
                    timeout: raw
                        .timeout_ms
                        .map_or(DEFAULT_HOOK_TIMEOUT, Duration::from_millis),
                    description: raw.description.clone(),
                },
            ));
        }
        added
    };
    let hooks_file = dir.join("hooks.yaml");
    let mut from_file = Vec::new();
    if hooks_file.is_file() {
        match std::fs::read_to_string(&hooks_file) {
            Ok(source) => {
                match yaml::parse::<BTreeMap<String, Spanned<RawHook>>>(&hooks_file, &source) {
                    Ok(parsed) => from_file = add(&hooks_file, &source, &parsed.value, "", diags),
                    Err(d) => diags.push(d),
                }
            }
            Err(e) => diags.push(Diagnostic::new(&hooks_file, format!("cannot read: {e}"))),
        }
    }
    let from_config = lifecycle
        .map(|m| add(config_file, config_source, m, "lifecycle_hooks.", diags))
        .unwrap_or_default();
    for (hook, spec) in from_config {
        hooks.insert(hook, spec);
    }
    for (hook, spec) in from_file {
        if hooks.insert(hook, spec).is_some() {
            warnings.push(format!(
                "hook {} is defined in both hooks.yaml and lifecycle_hooks; using hooks.yaml",
                hook.as_str()
            ));
        }
    }
    hooks
}

fn find_prompt(dir: &Path) -> Result<PathBuf, AgentError> {
    for name in ["system_prompt.md", "system_prompt.txt"] {
        let path = dir.join(name);
        if path.is_file() {
            let text = read(&path)?;
            if text.trim().is_empty() {
                return Err(AgentError::Invalid(vec![
                    Diagnostic::new(&path, "the system prompt is empty")
                        .hint("write the agent's instructions in it"),
                ]));
            }
            return Ok(path);
        }
    }
    Err(AgentError::NoPrompt(dir.to_path_buf()))
}

/// The recipe used when the agent has no `context.yaml`: system prompt, the workspace's `DELTA.md` if
/// present, then the whole conversation.
pub fn default_context(system_prompt: &Path) -> Vec<Source> {
    let prompt_name = system_prompt
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    vec![
        Source::File {
            id: "system_prompt".into(),
            path: format!("${{AGENT_HOME}}/{prompt_name}"),
            on_missing: OnMissing::Error,
        },
        Source::File {
            id: "workspace_guide".into(),
            path: "${CWD}/DELTA.md".into(),
            on_missing: OnMissing::Skip,
        },
        Source::Journal {
            id: "conversation_history".into(),
            max_iterations: None,
        },
    ]
}

fn load_context(
    dir: &Path,
    system_prompt: &Path,
    warnings: &mut Vec<String>,
    diags: &mut Vec<Diagnostic>,
) -> ContextManifest {
    let file = dir.join("context.yaml");
    if !file.is_file() {
        return ContextManifest {
            sources: default_context(system_prompt),
            file: None,
        };
    }
    let source = match std::fs::read_to_string(&file) {
        Ok(s) => s,
        Err(e) => {
            diags.push(Diagnostic::new(&file, format!("cannot read: {e}")));
            return ContextManifest {
                sources: Vec::new(),
                file: Some(file),
            };
        }
    };
    let parsed = match yaml::parse::<RawContext>(&file, &source) {
        Ok(p) => p,
        Err(d) => {
            diags.push(d);
            return ContextManifest {
                sources: Vec::new(),
                file: Some(file),
            };
        }
    };
    for key in &parsed.unknown_keys {
        warnings.push(format!("context.yaml: unknown key `{key}` is ignored"));
    }
    if parsed.value.sources.is_empty() {
        diags.push(
            Diagnostic::new(&file, "Context manifest must have at least one source")
                .field("sources"),
        );
    }
    let mut sources = Vec::new();
    for (i, spanned) in parsed.value.sources.iter().enumerate() {
        let s = &spanned.value;
        let loc = &spanned.referenced;
        let located = |message: String| {
            Diagnostic::new(&file, message)
                .at(&source, loc.line() as usize, loc.column() as usize)
                .field(format!("sources[{i}]"))
        };
        let on_missing = match s.on_missing.as_deref() {
            None | Some("error") => OnMissing::Error,
            Some("skip") => OnMissing::Skip,
            Some(other) => {
                diags.push(located(format!(
                    "on_missing must be error or skip, not {other:?}"
                )));
                continue;
            }
        };
        let id = s.id.clone().unwrap_or_else(|| s.kind.clone());
        match s.kind.as_str() {
            "file" => match &s.path {
                Some(path) => sources.push(Source::File {
                    id,
                    path: path.clone(),
                    on_missing,
                }),
                None => diags.push(located("a file source needs path:".into())),
            },
            "computed_file" => {
                let Some(generator) = &s.generator else {
                    diags.push(located(
                        "a computed_file source needs generator: {command: [...]}".into(),
                    ));
                    continue;
                };
                let Some(output_path) = &s.output_path else {
                    diags.push(located("a computed_file source needs output_path:".into()));
                    continue;
                };
                if generator.command.is_empty() {
                    diags.push(located("generator.command must name a program".into()));
                    continue;
                }
                sources.push(Source::ComputedFile {
                    id,
                    command: generator.command.clone(),
                    timeout: generator
                        .timeout_ms
                        .map_or(DEFAULT_HOOK_TIMEOUT, Duration::from_millis),
                    output_path: output_path.clone(),
                    on_missing,
                });
            }
            "journal" => {
                let max_iterations = match s.max_iterations {
                    None => None,
                    Some(v) => match positive_int(v) {
                        Some(n) => Some(n),
                        None => {
                            diags.push(located(
                                "max_iterations must be a whole number greater than 0".into(),
                            ));
                            continue;
                        }
                    },
                };
                sources.push(Source::Journal { id, max_iterations });
            }
            other => diags.push(
                located(format!("unknown source type {other:?}"))
                    .hint("use file, computed_file or journal"),
            ),
        }
    }
    ContextManifest {
        sources,
        file: Some(file),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        dir
    }

    const PROMPT: (&str, &str) = ("system_prompt.md", "You help.");

    #[test]
    fn the_time_limit_message_names_the_limit() {
        assert!(SECONDS_EXPECTED.contains(&format!("at most {} ", MAX_SECONDS as u64)));
        assert_eq!(
            seconds(MAX_SECONDS),
            Some(Duration::from_secs(MAX_SECONDS as u64))
        );
        assert_eq!(seconds(MAX_SECONDS + 1.0), None);
        assert_eq!(seconds(f64::NAN), None);
    }

    #[test]
    fn loads_a_minimal_agent_with_defaults() {
        let dir = agent_dir(&[("agent.yaml", "name: a\nllm: {}\ntools: []\n"), PROMPT]);
        let agent = load(dir.path()).unwrap();
        assert_eq!(agent.name, "a");
        assert_eq!(agent.version, "1.0.0");
        assert_eq!(agent.max_iterations, 30);
        assert_eq!(
            agent.llm,
            LlmSettings {
                provider: Provider::OpenAi,
                model: None,
                temperature: None,
                max_tokens: None,
                idle_timeout: None,
            }
        );
        assert!(agent.context.file.is_none());
        assert_eq!(agent.context.sources.len(), 3);
        assert!(agent.warnings.is_empty(), "{:?}", agent.warnings);
    }

    #[test]
    fn config_yaml_is_accepted_with_a_warning_and_agent_yaml_wins() {
        let dir = agent_dir(&[("config.yaml", "name: old\nllm: {}\ntools: []\n"), PROMPT]);
        let agent = load(dir.path()).unwrap();
        assert_eq!(agent.name, "old");
        assert!(agent.warnings[0].contains("config.yaml is deprecated"));
        std::fs::write(
            dir.path().join("agent.yaml"),
            "name: new\nllm: {}\ntools: []\n",
        )
        .unwrap();
        let agent = load(dir.path()).unwrap();
        assert_eq!(agent.name, "new");
        assert!(agent.warnings[0].contains("both agent.yaml and config.yaml"));
    }

    #[test]
    fn system_prompt_txt_works_in_the_default_recipe() {
        let dir = agent_dir(&[
            ("agent.yaml", "name: a\nllm: {}\ntools: []\n"),
            ("system_prompt.txt", "Hi."),
        ]);
        let agent = load(dir.path()).unwrap();
        assert!(agent.system_prompt.ends_with("system_prompt.txt"));
        assert!(
            matches!(&agent.context.sources[0], Source::File { path, .. } if path.ends_with("system_prompt.txt"))
        );
    }

    #[test]
    fn semantic_errors_are_collected_with_locations_and_paths() {
        let dir = agent_dir(&[
            (
                "agent.yaml",
                "name: a\nllm:\n  temperature: 3\n  provider: gemini\ntools:\n  - name: ok\n    exec: ls\n  - name: bad\n    exec: \"ls | wc\"\n  - name: none\nmax_iterations: 0\n",
            ),
            PROMPT,
        ]);
        let err = load(dir.path()).unwrap_err();
        let AgentError::Invalid(diags) = &err else {
            panic!("{err}")
        };
        let text = err.to_string();
        assert_eq!(diags.len(), 5, "{text}");
        assert!(
            text.contains("agent.yaml:3:16: llm.temperature: must be between 0 and 2"),
            "{text}"
        );
        assert!(
            text.contains("llm.provider: unknown provider \"gemini\""),
            "{text}"
        );
        assert!(
            text.contains(
                "tools[1]: tool 'bad': Shell metacharacter '|' (pipe) not allowed in exec: mode"
            ),
            "{text}"
        );
        assert!(
            text.contains("tools[2]: tool 'none': must have exactly one of"),
            "{text}"
        );
        assert!(
            text.contains("max_iterations: must be a whole number greater than 0"),
            "{text}"
        );
    }

    #[test]
    fn yaml_errors_have_line_and_column() {
        let dir = agent_dir(&[("agent.yaml", "name: a\nllm: {\ntools: []\n"), PROMPT]);
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("agent.yaml:2:"), "{err}");
    }

    #[test]
    fn unknown_keys_warn() {
        let dir = agent_dir(&[
            ("agent.yaml", "name: a\nllm:\n  temprature: 1\ntools: []\n"),
            PROMPT,
        ]);
        let agent = load(dir.path()).unwrap();
        assert_eq!(
            agent.warnings,
            vec!["agent.yaml: unknown key `llm.temprature` is ignored"]
        );
    }

    #[test]
    fn imports_allow_diamonds_reject_cycles_and_local_tools_win() {
        let dir = agent_dir(&[
            (
                "agent.yaml",
                "name: a\nllm: {}\nimports: [modules/left.yaml, modules/right.yaml]\ntools:\n  - name: shared\n    exec: echo local\n",
            ),
            (
                "modules/left.yaml",
                "imports: [base.yaml]\ntools:\n  - name: left\n    exec: echo left\n",
            ),
            (
                "modules/right.yaml",
                "imports: [base.yaml]\ntools:\n  - name: right\n    exec: echo right\n",
            ),
            (
                "modules/base.yaml",
                "tools:\n  - name: shared\n    exec: echo base\n  - name: base\n    exec: echo b\n",
            ),
            PROMPT,
        ]);
        let agent = load(dir.path()).unwrap();
        let names: Vec<&str> = agent.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["shared", "base", "left", "right"]);
        assert_eq!(
            agent.tool("shared").unwrap().template.as_deref(),
            Some("echo local")
        );

        std::fs::write(
            dir.path().join("modules/base.yaml"),
            "imports: [left.yaml]\ntools: []\n",
        )
        .unwrap();
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("Circular import detected: modules/left.yaml -> modules/base.yaml -> modules/left.yaml"),
            "{err}"
        );
    }

    #[test]
    fn imports_must_stay_inside_the_agent() {
        let dir = agent_dir(&[
            (
                "agent.yaml",
                "name: a\nllm: {}\nimports: [../x.yaml, /etc/passwd, nope.yaml]\ntools: []\n",
            ),
            PROMPT,
        ]);
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("Invalid import path: ../x.yaml"), "{err}");
        assert!(err.contains("Invalid import path: /etc/passwd"), "{err}");
        assert!(err.contains("Import file not found: nope.yaml"), "{err}");
    }

    #[test]
    fn hooks_from_both_places_with_hooks_yaml_winning() {
        let dir = agent_dir(&[
            (
                "agent.yaml",
                "name: a\nllm: {}\ntools: []\nlifecycle_hooks:\n  pre_llm_req:\n    command: [a]\n  on_error:\n    command: [\"${AGENT_HOME}/e.sh\"]\n    timeout_ms: 500\n",
            ),
            (
                "hooks.yaml",
                "pre_llm_req:\n  command: [b]\non_run_end:\n  command: [c]\n",
            ),
            PROMPT,
        ]);
        let agent = load(dir.path()).unwrap();
        assert_eq!(agent.hooks[&HookName::PreLlmReq].command, vec!["b"]);
        assert_eq!(agent.hooks[&HookName::OnRunEnd].command, vec!["c"]);
        let on_error = &agent.hooks[&HookName::OnError];
        assert_eq!(on_error.timeout, Duration::from_millis(500));
        assert!(
            on_error.command[0].ends_with("/e.sh") && !on_error.command[0].contains("AGENT_HOME")
        );
        assert_eq!(
            agent.hooks[&HookName::PreLlmReq].timeout,
            DEFAULT_HOOK_TIMEOUT
        );
        assert_eq!(
            agent.warnings,
            vec![
                "hook pre_llm_req is defined in both hooks.yaml and lifecycle_hooks; using hooks.yaml"
            ]
        );
    }

    #[test]
    fn context_yaml_sources_are_validated() {
        let dir = agent_dir(&[
            ("agent.yaml", "name: a\nllm: {}\ntools: []\n"),
            PROMPT,
            (
                "context.yaml",
                "sources:\n  - type: file\n    path: x\n  - type: computed_file\n    generator:\n      command: [gen]\n    output_path: out.md\n    on_missing: skip\n  - type: journal\n    max_iterations: 2\n  - type: fiel\n",
            ),
        ]);
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("sources[3]: unknown source type \"fiel\""),
            "{err}"
        );
        std::fs::write(
            dir.path().join("context.yaml"),
            "sources:\n  - type: file\n    path: x\n  - type: journal\n    id: recent\n    max_iterations: 2\n",
        )
        .unwrap();
        let agent = load(dir.path()).unwrap();
        assert_eq!(
            agent.context.sources[1],
            Source::Journal {
                id: "recent".into(),
                max_iterations: Some(2)
            }
        );
        assert_eq!(
            agent.context.sources[0],
            Source::File {
                id: "file".into(),
                path: "x".into(),
                on_missing: OnMissing::Error
            }
        );
    }

    #[test]
    fn missing_pieces_are_named() {
        let dir = agent_dir(&[]);
        assert!(matches!(
            load(dir.path()).unwrap_err(),
            AgentError::NoConfig { .. }
        ));
        std::fs::write(
            dir.path().join("agent.yaml"),
            "name: a\nllm: {}\ntools: []\n",
        )
        .unwrap();
        assert!(matches!(
            load(dir.path()).unwrap_err(),
            AgentError::NoPrompt(_)
        ));
        std::fs::write(dir.path().join("system_prompt.md"), "  \n").unwrap();
        assert!(
            load(dir.path())
                .unwrap_err()
                .to_string()
                .contains("the system prompt is empty")
        );
        assert!(matches!(
            load(&dir.path().join("nope")).unwrap_err(),
            AgentError::NotFound(_)
        ));
    }
}
