//! Agent folders: loading and validating everything a run needs from one.

pub mod mcp;
mod modules;
pub mod permissions;
pub mod policy;
mod raw;
mod sections;
pub mod tools;
pub mod yaml;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use llm::Provider;
use serde_saphyr::Spanned;

use crate::diag::Diagnostic;
use modules::agent_tools;
pub use modules::{load_tools, tools_at};
use raw::RawAgent;
pub use sections::default_context;
use sections::{find_prompt, load_context, load_hooks};
use tools::SESSION_TOOLS;
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
    /// `context_window`: the model's context in tokens. Unset, it is learned when a server refuses
    /// a request for its length.
    pub context_window: Option<u32>,
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
    /// What is done when the conversation would not fit the model's context window.
    pub compaction: Compaction,
    /// `context.yaml`, or `None` for the built-in default recipe.
    pub file: Option<PathBuf>,
}

/// `compaction:` of context.yaml.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compaction {
    /// How.
    pub strategy: CompactionStrategy,
    /// The most recent iterations always kept as they are (at least 1).
    pub keep_recent: u32,
}

impl Default for Compaction {
    fn default() -> Self {
        Self {
            strategy: CompactionStrategy::Summarize,
            keep_recent: 3,
        }
    }
}

/// How a conversation is made to fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionStrategy {
    /// The oldest iterations are replaced by a summary the model writes (one call, no tools).
    Summarize,
    /// The oldest iterations are dropped, with a note; no model call.
    Truncate,
    /// Nothing: a request that does not fit fails.
    Off,
}

impl CompactionStrategy {
    /// The spelling in context.yaml and in the journal.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Summarize => "summarize",
            Self::Truncate => "truncate",
            Self::Off => "off",
        }
    }
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
    /// `timeout_seconds:`: how long a tool may run unless it says otherwise.
    pub tool_timeout: Duration,
    /// `sessions: true`: the built-in shell-session tools are offered.
    pub sessions: bool,
    /// `mcp_servers:`: MCP servers whose tools are offered.
    pub mcp_servers: Vec<mcp::McpServerSpec>,
    /// `sandbox:` (or `--sandbox`/`--network`): `None` runs the agent's processes unconfined.
    pub sandbox: Option<crate::sandbox::SandboxPolicy>,
    /// `permissions:` (and `--permissions FILE`): `None` allows every call.
    pub permissions: Option<permissions::Permissions>,
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

    let tools = agent_tools(
        &abs,
        &config_file,
        &source,
        &raw,
        default_timeout,
        &mut diags,
    );

    let hooks = load_hooks(
        &abs,
        &config_file,
        &source,
        raw.lifecycle_hooks.as_ref(),
        &mut warnings,
        &mut diags,
    );
    let reach = load_reach(
        &raw,
        &tools,
        &ConfigText {
            file: &config_file,
            source: &source,
        },
        default_timeout,
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
        tool_timeout: default_timeout,
        sessions: raw.sessions,
        mcp_servers: reach.mcp_servers,
        sandbox: reach.sandbox,
        permissions: reach.permissions,
        context,
        system_prompt,
        warnings,
    })
}

/// Where agent.yaml is, and its text (for located diagnostics).
struct ConfigText<'a> {
    file: &'a Path,
    source: &'a str,
}

/// What reaches beyond the agent's own tools, and its limits: sessions, MCP servers, the sandbox,
/// the permissions.
struct Reach {
    mcp_servers: Vec<mcp::McpServerSpec>,
    sandbox: Option<crate::sandbox::SandboxPolicy>,
    permissions: Option<permissions::Permissions>,
}

/// Checks `sessions:`, `mcp_servers:`, `sandbox:` and `permissions:`.
fn load_reach(
    raw: &RawAgent,
    tools: &[Tool],
    at: &ConfigText<'_>,
    default_timeout: Duration,
    diags: &mut Vec<Diagnostic>,
) -> Reach {
    if raw.sessions {
        reserve_session_names(tools, at.file, diags);
    }
    Reach {
        mcp_servers: mcp::load(&raw.mcp_servers, at.file, at.source, default_timeout, diags),
        sandbox: raw
            .sandbox
            .as_ref()
            .and_then(|s| sandbox_policy(s, at.file, at.source, diags)),
        permissions: raw
            .permissions
            .as_ref()
            .map(|p| permissions::load(p, at.file, diags)),
    }
}

/// `sandbox:`, checked: an unknown filesystem mode is an error where it is written.
fn sandbox_policy(
    raw: &Spanned<raw::RawSandbox>,
    config_file: &Path,
    source: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<crate::sandbox::SandboxPolicy> {
    use crate::sandbox::{FsMode, SandboxPolicy};
    let filesystem = match raw.value.filesystem.as_deref() {
        None => FsMode::WorkspaceWrite,
        Some(text) => match FsMode::parse(text) {
            Some(mode) => mode,
            None => {
                diags.push(
                    Diagnostic::new(config_file, format!("unknown filesystem mode {text:?}"))
                        .at(
                            source,
                            raw.referenced.line() as usize,
                            raw.referenced.column() as usize,
                        )
                        .field("sandbox.filesystem")
                        .hint("use read-only, workspace-write or off"),
                );
                return None;
            }
        },
    };
    Some(SandboxPolicy {
        filesystem,
        network: raw.value.network.unwrap_or(false),
        writable: raw.value.writable.iter().map(|p| home_path(p)).collect(),
        readable: raw.value.readable.iter().map(|p| home_path(p)).collect(),
    })
}

/// `~` and `~/…` as the user's home folder (`HOME`); any other path as written.
fn home_path(text: &str) -> PathBuf {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
    match (text.strip_prefix('~'), home) {
        (Some(""), Some(home)) => PathBuf::from(home),
        (Some(rest), Some(home)) if rest.starts_with('/') => {
            PathBuf::from(home).join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(text),
    }
}

/// With `sessions: true`, no tool of the agent may have the name of a built-in session tool.
fn reserve_session_names(tools: &[Tool], config_file: &Path, diags: &mut Vec<Diagnostic>) {
    for tool in tools
        .iter()
        .filter(|t| SESSION_TOOLS.contains(&t.name.as_str()))
    {
        diags.push(
            Diagnostic::new(
                config_file,
                format!(
                    "tool `{}` has the name of a built-in session tool, which `sessions: true` offers",
                    tool.name
                ),
            )
            .field("tools"),
        );
    }
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
    let context_window = raw.context_window.as_ref().and_then(|s| {
        let window = positive_int(s.value).filter(|n| *n >= MIN_CONTEXT_WINDOW);
        if window.is_none() {
            diags.push(
                at(
                    &s.referenced,
                    format!("must be a whole number of tokens, at least {MIN_CONTEXT_WINDOW}"),
                )
                .field("llm.context_window"),
            );
        }
        window
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
        context_window,
        idle_timeout,
    }
}

/// The smallest context window worth working in.
pub const MIN_CONTEXT_WINDOW: u32 = 256;

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
                context_window: None,
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
