//! Tools from YAML files: an agent's own and those of the modules it imports (recursively, confined
//! to the agent's folder), expanded and validated.

use std::collections::{BTreeMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde_saphyr::Spanned;

use super::raw::{RawAgent, RawModule, RawTool};
use super::{
    AgentError, DEFAULT_TOOL_TIMEOUT, SECONDS_EXPECTED, Tool, ToolSource, read, seconds, tools,
    yaml,
};
use crate::diag::Diagnostic;

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
            agent: t.agent.clone(),
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

/// The tools of the agent configuration `config_file` (its text `source`, parsed as `raw`): imports
/// first (depth-first), then the agent's own, later definitions winning by name. Problems go to
/// `diags`: those of the agent's own tools, then those of its imports.
pub(super) fn agent_tools(
    abs: &Path,
    config_file: &Path,
    source: &str,
    raw: &RawAgent,
    default_timeout: Duration,
    diags: &mut Vec<Diagnostic>,
) -> Vec<Tool> {
    let mut loader = ModuleLoader {
        root: abs.to_path_buf(),
        stack: vec![config_file.to_path_buf()],
        loaded: HashSet::new(),
        tools: Vec::new(),
        diags: Vec::new(),
        default_timeout,
    };
    for import in raw.imports.iter().flatten() {
        loader.import(config_file, source, import);
    }
    let local = expand_tools(config_file, source, &raw.tools, default_timeout, diags);
    let mut tools = loader.tools;
    diags.append(&mut loader.diags);
    for tool in local {
        match tools.iter().position(|t| t.name == tool.name) {
            Some(i) => tools[i] = tool,
            None => tools.push(tool),
        }
    }
    tools
}

/// The tools at `path`: an agent folder, an agent's own configuration (`agent.yaml`, `config.yaml`:
/// the whole agent is loaded, so agent-wide settings apply), or any YAML file with `tools:`.
pub fn tools_at(path: &Path) -> Result<Vec<Tool>, AgentError> {
    let is_agent_file = path
        .file_name()
        .is_some_and(|n| n == "agent.yaml" || n == "config.yaml");
    if path.is_dir() {
        Ok(super::load(path)?.tools)
    } else if is_agent_file {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Ok(super::load(dir)?.tools)
    } else {
        load_tools(path)
    }
}
