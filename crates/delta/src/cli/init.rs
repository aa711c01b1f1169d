//! `delta init`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use clap::Args;

use super::templates::{self, TEMPLATES};
use super::{CliError, eprint_line, print_out, terminal};

/// Create an agent from a template.
///
/// Writes agent.yaml, system_prompt.md, context.yaml and README.md into NAME (created) or, without
/// NAME, into the current folder. The folder must be empty (dot-files such as .git are ignored).
/// Prints the agent folder on stdout.
///
/// Templates: minimal (default with -y), hello-world, file-ops, api-tester.
///
/// Examples:
///   delta init my-agent -t hello-world
///   delta init -y
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct InitArgs {
    /// Folder to create (default: the current folder).
    name: Option<PathBuf>,

    /// Template: minimal, hello-world, file-ops or api-tester.
    #[arg(short = 't', long, value_name = "NAME")]
    template: Option<String>,

    /// Do not ask: use the minimal template unless -t says otherwise.
    #[arg(short = 'y', long)]
    yes: bool,
}

fn is_empty(dir: &Path) -> Result<bool, CliError> {
    if !dir.exists() {
        return Ok(true);
    }
    if !dir.is_dir() {
        return Err(CliError::new(format!(
            "{} exists and is not a folder",
            dir.display()
        )));
    }
    let entries = std::fs::read_dir(dir)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", dir.display())))?;
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with('.') {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Sets the first `name:` line of an agent.yaml to `name`.
fn rename(agent_yaml: &str, name: &str) -> String {
    let quoted = serde_json::to_string(name).unwrap_or_else(|_| format!("\"{name}\""));
    let mut done = false;
    let mut out: Vec<String> = Vec::new();
    for line in agent_yaml.lines() {
        if !done && line.starts_with("name:") {
            out.push(format!("name: {quoted}"));
            done = true;
        } else {
            out.push(line.to_string());
        }
    }
    out.join("\n") + "\n"
}

pub fn cmd_init(args: InitArgs) -> Result<(), CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::new(format!("cannot read the current folder: {e}")))?;
    let target = match &args.name {
        Some(name) => cwd.join(name),
        None => cwd.clone(),
    };
    if !is_empty(&target)? {
        return Err(CliError::new(format!("directory is not empty: {}", target.display()))
            .hint("delta init only writes into a new or empty folder: give a new name, e.g. delta init my-agent"));
    }
    let names: Vec<&str> = TEMPLATES.iter().map(|t| t.name).collect();
    let chosen = match (&args.template, args.yes) {
        (Some(t), _) => t.clone(),
        (None, true) => "minimal".to_string(),
        (None, false) if std::io::stdin().is_terminal() => {
            for t in &TEMPLATES {
                eprint_line(&format!("  {:<12} {}", t.name, t.summary));
            }
            terminal::choose_template(&names, &AtomicBool::new(false))?
        }
        (None, false) => {
            return Err(CliError::usage(
                "choose a template with -t, or pass -y for the minimal one",
            )
            .hint(format!("templates: {}", names.join(", "))));
        }
    };
    let Some(template) = templates::find(&chosen) else {
        return Err(CliError::usage(format!("template '{chosen}' not found"))
            .hint(format!("templates: {}", names.join(", "))));
    };
    let agent_name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| template.name.to_string());
    std::fs::create_dir_all(&target)
        .map_err(|e| CliError::new(format!("cannot create {}: {e}", target.display())))?;
    for file in &template.files {
        let content = match file.name {
            "agent.yaml" => rename(file.content, &agent_name),
            "README.md" => file.content.replace("{{name}}", &agent_name),
            _ => file.content.to_string(),
        };
        let path = target.join(file.name);
        std::fs::write(&path, content)
            .map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))?;
    }
    eprint_line(&format!(
        "Created agent '{agent_name}' from the {} template.",
        template.name
    ));
    eprint_line("Next steps:");
    if let Some(name) = &args.name {
        eprint_line(&format!("  cd {}", name.display()));
    }
    eprint_line(
        "  export DELTA_API_KEY=...   # or DELTA_BASE_URL for another OpenAI-compatible server",
    );
    eprint_line("  delta run -m \"your task\" -y");
    print_out(&format!("{}\n", target.display()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_replaces_only_the_first_name_line() {
        let out = rename("name: x\nllm: {}\ntools:\n  - name: t\n", "my \"agent\"");
        assert_eq!(
            out,
            "name: \"my \\\"agent\\\"\"\nllm: {}\ntools:\n  - name: t\n"
        );
    }

    #[test]
    fn every_template_is_a_valid_agent() {
        for t in &TEMPLATES {
            let dir = tempfile::tempdir().unwrap();
            for f in &t.files {
                std::fs::write(dir.path().join(f.name), f.content).unwrap();
            }
            let agent =
                delta::agent::load(dir.path()).unwrap_or_else(|e| panic!("{}: {e}", t.name));
            assert!(!agent.tools.is_empty(), "{}", t.name);
            assert!(
                agent.warnings.is_empty(),
                "{}: {:?}",
                t.name,
                agent.warnings
            );
            assert!(agent.context.file.is_some());
        }
    }
}
