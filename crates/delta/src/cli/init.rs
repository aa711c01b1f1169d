//! `delta init`.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use clap::Args;

use super::{CliError, eprint_line, print_out, terminal};
use delta::templates::{self, ScaffoldError, TEMPLATES};

/// Create an agent from a template.
///
/// Writes agent.yaml, system_prompt.md, context.yaml and README.md into NAME (created) or, without
/// NAME, into the current folder. The folder must be empty (dot-files such as .git are ignored).
/// Prints the agent folder on stdout (--format json: an object).
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

    /// text: the agent folder; json: {"agent_dir", "name", "template", "files"}.
    #[arg(long, value_enum, default_value = "text")]
    format: TextOrJson,
}

/// `--format` of commands with one result: text or one JSON object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TextOrJson {
    /// For reading.
    Text,
    /// One JSON object.
    Json,
}

pub fn cmd_init(args: InitArgs) -> Result<(), CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::new(format!("cannot read the current folder: {e}")))?;
    let target = match &args.name {
        Some(name) => cwd.join(name),
        None => cwd.clone(),
    };
    templates::check_target(&target).map_err(|e| {
        let error = CliError::new(e.to_string());
        match e {
            ScaffoldError::NotEmpty(_) => error.hint("delta init only writes into a new or empty folder: give a new name, e.g. delta init my-agent"),
            _ => error,
        }
    })?;
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
    templates::write(template, &target, &agent_name).map_err(|e| CliError::new(e.to_string()))?;
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
    match args.format {
        TextOrJson::Text => print_out(&format!("{}\n", target.display())),
        TextOrJson::Json => print_out(&format!(
            "{}\n",
            serde_json::json!({
                "agent_dir": target,
                "name": agent_name,
                "template": template.name,
                "files": template.files.iter().map(|f| f.name).collect::<Vec<_>>(),
            })
        )),
    }
    Ok(())
}
