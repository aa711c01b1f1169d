//! What a tool generates from its own command-line definition, for both tools: shell completions
//! (bash, zsh, fish; [`completions`]) and man pages ([`man_page`], [`man_pages`]), with the
//! arguments of the commands that print them ([`CompletionsArgs`], [`ManArgs`]).

use std::path::{Path, PathBuf};

/// A shell to complete in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    /// Bash.
    Bash,
    /// Zsh.
    Zsh,
    /// Fish.
    Fish,
}

/// `TOOL completions SHELL [-o FILE]`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh or fish.
    #[arg(value_enum)]
    pub shell: Shell,
    /// Write the script to FILE (its folder is made if needed; the path is printed) instead of
    /// stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `TOOL man [-d DIR]`.
#[derive(Debug, Clone, clap::Args)]
pub struct ManArgs {
    /// Write one page per command into this folder (TOOL.1, TOOL-COMMAND.1, …) instead of the
    /// tool's page on stdout.
    #[arg(short = 'd', long = "dir", value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// The completion script of `cmd` for `shell`.
pub fn completions(mut cmd: clap::Command, shell: Shell) -> Vec<u8> {
    let name = cmd.get_name().to_string();
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut out);
    out
}

/// What `TOOL completions` prints: the script of `cmd` for the shell, or, with `-o FILE`, the
/// script written there (its folder made first) and FILE's path.
pub fn completions_output<X: crate::ExitStatus>(
    cmd: clap::Command,
    args: &CompletionsArgs,
) -> Result<Vec<u8>, crate::CliError<X>> {
    let script = completions(cmd, args.shell);
    let Some(file) = &args.output else {
        return Ok(script);
    };
    let failed = |e| {
        crate::CliError::with_source(format!("cannot write {}", file.display()), e)
            .hint("choose a folder you can write to, e.g. under your home folder")
    };
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    std::fs::write(file, &script).map_err(failed)?;
    Ok(format!("{}\n", file.display()).into_bytes())
}

/// The man page of `cmd` (roff, section 1).
pub fn man_page(cmd: clap::Command) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    Ok(out)
}

/// Writes the man page of `cmd` and of each of its visible subcommands, at every depth, into
/// `dir` (created if needed); returns the files written, the tool's own page first.
pub fn man_pages(cmd: clap::Command, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    write_pages(cmd, dir, &mut written)?;
    Ok(written)
}

/// What `TOOL man` prints for `args`: the tool's page, or (with `-d DIR`) the paths of the pages
/// written there, one per line.
pub fn man_output<X: crate::ExitStatus>(
    cmd: clap::Command,
    args: &ManArgs,
) -> Result<String, crate::CliError<X>> {
    let Some(dir) = &args.dir else {
        let page = man_page(cmd)
            .map_err(|e| crate::CliError::with_source("cannot render the man page", e))?;
        return Ok(String::from_utf8_lossy(&page).into_owned());
    };
    let written = man_pages(cmd, dir).map_err(|e| {
        let what = format!("cannot write the man pages to {}", dir.display());
        crate::CliError::with_source(what, e)
    })?;
    Ok(written
        .iter()
        .map(|p| format!("{}\n", p.display()))
        .collect())
}

fn write_pages(cmd: clap::Command, dir: &Path, written: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let subcommands: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    written.push(clap_mangen::Man::new(cmd).generate_to(dir)?);
    for sub in subcommands {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}
