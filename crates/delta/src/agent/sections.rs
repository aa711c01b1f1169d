//! The parts of an agent folder beside its tools: lifecycle hooks, the system prompt and the context
//! manifest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_saphyr::Spanned;

use super::raw::{RawCompaction, RawContext, RawHook, RawSource};
use super::{
    AgentError, Compaction, CompactionStrategy, ContextManifest, DEFAULT_HOOK_TIMEOUT, HookName,
    HookSpec, OnMissing, Source, positive_int, read, yaml,
};
use crate::diag::Diagnostic;

pub(super) fn load_hooks(
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

pub(super) fn find_prompt(dir: &Path) -> Result<PathBuf, AgentError> {
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

pub(super) fn load_context(
    dir: &Path,
    system_prompt: &Path,
    warnings: &mut Vec<String>,
    diags: &mut Vec<Diagnostic>,
) -> ContextManifest {
    let file = dir.join("context.yaml");
    let empty = |file: Option<PathBuf>, sources| ContextManifest {
        sources,
        compaction: Compaction::default(),
        file,
    };
    if !file.is_file() {
        return empty(None, default_context(system_prompt));
    }
    let source = match std::fs::read_to_string(&file) {
        Ok(s) => s,
        Err(e) => {
            diags.push(Diagnostic::new(&file, format!("cannot read: {e}")));
            return empty(Some(file), Vec::new());
        }
    };
    let parsed = match yaml::parse::<RawContext>(&file, &source) {
        Ok(p) => p,
        Err(d) => {
            diags.push(d);
            return empty(Some(file), Vec::new());
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
        let loc = &spanned.referenced;
        let located = |message: String| {
            Diagnostic::new(&file, message)
                .at(&source, loc.line() as usize, loc.column() as usize)
                .field(format!("sources[{i}]"))
        };
        match parse_source(&spanned.value) {
            Ok(parsed) => sources.push(parsed),
            Err(e @ SourceProblem::UnknownType(_)) => {
                diags.push(located(e.to_string()).hint("use file, computed_file or journal"))
            }
            Err(e) => diags.push(located(e.to_string())),
        }
    }
    let compaction = match &parsed.value.compaction {
        None => Compaction::default(),
        Some(spanned) => parse_compaction(&spanned.value).unwrap_or_else(|problem| {
            let loc = &spanned.referenced;
            diags.push(
                Diagnostic::new(&file, problem.to_string())
                    .at(&source, loc.line() as usize, loc.column() as usize)
                    .field("compaction"),
            );
            Compaction::default()
        }),
    };
    ContextManifest {
        sources,
        compaction,
        file: Some(file),
    }
}

/// What is wrong with an entry of `sources:` or with `compaction:`.
#[derive(Debug, thiserror::Error)]
enum SourceProblem {
    #[error("on_missing must be error or skip, not {0:?}")]
    OnMissing(String),
    #[error("a file source needs path:")]
    NoPath,
    #[error("a computed_file source needs generator: {{command: [...]}}")]
    NoGenerator,
    #[error("a computed_file source needs output_path:")]
    NoOutputPath,
    #[error("generator.command must name a program")]
    NoProgram,
    #[error("max_iterations must be a whole number greater than 0")]
    MaxIterations,
    #[error("unknown source type {0:?}")]
    UnknownType(String),
    #[error("compaction.strategy must be summarize, truncate or off, not {0:?}")]
    Strategy(String),
    #[error("compaction.keep_recent must be a whole number greater than 0")]
    KeepRecent,
}

/// `compaction: {strategy: summarize | truncate | off, keep_recent: N}`.
fn parse_compaction(raw: &RawCompaction) -> Result<Compaction, SourceProblem> {
    let strategy = match raw.strategy.as_deref() {
        None | Some("summarize") => CompactionStrategy::Summarize,
        Some("truncate") => CompactionStrategy::Truncate,
        Some("off") => CompactionStrategy::Off,
        Some(other) => return Err(SourceProblem::Strategy(other.to_string())),
    };
    let keep_recent = match raw.keep_recent {
        None => Compaction::default().keep_recent,
        Some(v) => positive_int(v).ok_or(SourceProblem::KeepRecent)?,
    };
    Ok(Compaction {
        strategy,
        keep_recent,
    })
}

/// One entry of `sources:`.
fn parse_source(s: &RawSource) -> Result<Source, SourceProblem> {
    let on_missing = match s.on_missing.as_deref() {
        None | Some("error") => OnMissing::Error,
        Some("skip") => OnMissing::Skip,
        Some(other) => return Err(SourceProblem::OnMissing(other.to_string())),
    };
    let id = s.id.clone().unwrap_or_else(|| s.kind.clone());
    match s.kind.as_str() {
        "file" => match &s.path {
            Some(path) => Ok(Source::File {
                id,
                path: path.clone(),
                on_missing,
            }),
            None => Err(SourceProblem::NoPath),
        },
        "computed_file" => {
            let generator = s.generator.as_ref().ok_or(SourceProblem::NoGenerator)?;
            let output_path = s.output_path.as_ref().ok_or(SourceProblem::NoOutputPath)?;
            if generator.command.is_empty() {
                return Err(SourceProblem::NoProgram);
            }
            Ok(Source::ComputedFile {
                id,
                command: generator.command.clone(),
                timeout: generator
                    .timeout_ms
                    .map_or(DEFAULT_HOOK_TIMEOUT, Duration::from_millis),
                output_path: output_path.clone(),
                on_missing,
            })
        }
        "journal" => {
            let max_iterations = match s.max_iterations {
                None => None,
                Some(v) => Some(positive_int(v).ok_or(SourceProblem::MaxIterations)?),
            };
            Ok(Source::Journal { id, max_iterations })
        }
        other => Err(SourceProblem::UnknownType(other.to_string())),
    }
}
