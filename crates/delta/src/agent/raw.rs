//! The YAML schemas as written by users (before validation).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_saphyr::Spanned;

/// `agent.yaml` / `config.yaml`.
#[derive(Debug, Deserialize)]
pub struct RawAgent {
    pub name: String,
    pub version: Option<String>,
    pub description: Option<String>,
    /// Optional: provider `openai`, no model (the server's default), nothing else sent.
    #[serde(default)]
    pub llm: RawLlm,
    pub tools: Vec<Spanned<RawTool>>,
    pub lifecycle_hooks: Option<BTreeMap<String, Spanned<RawHook>>>,
    pub max_iterations: Option<Spanned<f64>>,
    pub timeout_seconds: Option<Spanned<f64>>,
    pub imports: Option<Vec<Spanned<String>>>,
    /// Offer the built-in shell-session tools.
    #[serde(default)]
    pub sessions: bool,
    /// Which calls run, are refused, or wait for approval.
    pub permissions: Option<super::permissions::RawPermissions>,
    /// The sandbox of the agent's processes.
    pub sandbox: Option<Spanned<RawSandbox>>,
    /// MCP servers whose tools are offered.
    #[serde(default)]
    pub mcp_servers: Vec<Spanned<super::mcp::RawMcpServer>>,
}

/// `llm:`.
#[derive(Debug, Deserialize, Default)]
pub struct RawLlm {
    pub provider: Option<Spanned<String>>,
    pub model: Option<String>,
    pub temperature: Option<Spanned<f64>>,
    pub max_tokens: Option<Spanned<f64>>,
    pub context_window: Option<Spanned<f64>>,
    pub top_p: Option<Spanned<f64>>,
    pub frequency_penalty: Option<Spanned<f64>>,
    pub presence_penalty: Option<Spanned<f64>>,
    pub idle_timeout_seconds: Option<Spanned<f64>>,
}

/// One entry of `tools:`.
#[derive(Debug, Deserialize)]
pub struct RawTool {
    pub name: String,
    pub description: Option<String>,
    pub exec: Option<String>,
    pub shell: Option<String>,
    pub command: Option<Vec<String>>,
    pub stdin: Option<String>,
    pub parameters: Option<Vec<RawParam>>,
    pub timeout_seconds: Option<f64>,
    /// `agent: ./path`: the tool runs that delta agent on the task the model gives.
    pub agent: Option<String>,
}

/// One entry of a tool's `parameters:`.
#[derive(Debug, Deserialize)]
pub struct RawParam {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub description: Option<String>,
    pub inject_as: Option<String>,
    pub option_name: Option<String>,
}

/// A hook (in `lifecycle_hooks:` or `hooks.yaml`).
#[derive(Debug, Deserialize)]
pub struct RawHook {
    pub command: Vec<String>,
    pub timeout_ms: Option<u64>,
    pub description: Option<String>,
}

/// An imported module: only its tools and imports are used.
#[derive(Debug, Deserialize)]
pub struct RawModule {
    #[serde(default)]
    pub tools: Vec<Spanned<RawTool>>,
    pub imports: Option<Vec<Spanned<String>>>,
    // Modules may carry other keys (name, llm, …); they are ignored.
}

/// `context.yaml`.
#[derive(Debug, Deserialize)]
pub struct RawContext {
    pub sources: Vec<Spanned<RawSource>>,
    pub compaction: Option<Spanned<RawCompaction>>,
}

/// `compaction:` of context.yaml.
#[derive(Debug, Deserialize)]
pub struct RawCompaction {
    pub strategy: Option<String>,
    pub keep_recent: Option<f64>,
}

/// One context source (validated by type afterwards, for clearer messages).
#[derive(Debug, Deserialize)]
pub struct RawSource {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: Option<String>,
    pub path: Option<String>,
    pub on_missing: Option<String>,
    pub generator: Option<RawGenerator>,
    pub output_path: Option<String>,
    pub max_iterations: Option<f64>,
}

/// `generator:` of a `computed_file` source.
#[derive(Debug, Deserialize)]
pub struct RawGenerator {
    pub command: Vec<String>,
    pub timeout_ms: Option<u64>,
}

/// `sandbox:`.
#[derive(Debug, Deserialize)]
pub struct RawSandbox {
    pub filesystem: Option<String>,
    pub network: Option<bool>,
    #[serde(default)]
    pub writable: Vec<String>,
    #[serde(default)]
    pub readable: Vec<String>,
}
