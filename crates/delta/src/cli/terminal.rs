//! Talking to a person at the terminal: `ask_human -i`, menus, and Ctrl-C.

use std::io::{BufRead, IsTerminal, Read, Write};
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use delta::engine::{HumanInput, InputType};
use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};

use super::{CliError, eprint_line};

/// The flag of [`install_signal_handlers`], once installed.
static INTERRUPT: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();

/// Makes SIGINT and SIGTERM raise a flag the engine watches (it stops at the next safe point and
/// kills a running tool). A second signal while the flag is raised ends the process at once
/// (exit 130), killing the running tool first; the run is then recovered by `delta continue`.
///
/// Installed once per process (later calls return the same flag), as early as `run` and `continue`
/// start: a signal that arrives while delta prepares a run is not lost, and never kills delta halfway
/// through writing a file.
pub fn install_signal_handlers() -> Result<Arc<AtomicBool>, CliError> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    if let Some(flag) = INTERRUPT.get() {
        return Ok(Arc::clone(flag));
    }
    let flag = Arc::clone(INTERRUPT.get_or_init(|| Arc::new(AtomicBool::new(false))));
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .map_err(|e| CliError::new(format!("cannot install the signal handler: {e}")))?;
    let raised = Arc::clone(&flag);
    std::thread::spawn(move || {
        for _ in signals.forever() {
            if raised.swap(true, Ordering::SeqCst) {
                delta::process::kill_running();
                eprint_line(
                    "\nInterrupted again: stopping now. `delta continue` will recover the run.",
                );
                std::process::exit(130);
            }
        }
    });
    Ok(flag)
}

fn prompt(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{text}");
    let _ = err.flush();
}

/// Reads one line from stdin on a helper thread, giving up when `interrupt` is raised.
/// `Ok(None)`: interrupted or end of input.
fn read_line(interrupt: &AtomicBool) -> std::io::Result<Option<String>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let result = std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map(|n| (n, line));
        let _ = tx.send(result);
    });
    loop {
        match rx.recv_timeout(Duration::from_millis(25)) {
            Ok(Ok((0, _))) => return Ok(None),
            Ok(Ok((_, line))) => return Ok(Some(line.trim_end_matches(['\n', '\r']).to_string())),
            Ok(Err(e)) => return Err(e),
            Err(mpsc::RecvTimeoutError::Timeout) if interrupt.load(Ordering::SeqCst) => {
                return Ok(None);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(None),
        }
    }
}

/// Reads a line without echo, showing `*` per character (terminal only).
fn read_masked(interrupt: &AtomicBool) -> std::io::Result<Option<String>> {
    let stdin = std::io::stdin();
    let original = tcgetattr(stdin.as_fd()).map_err(std::io::Error::from)?;
    let mut raw = original.clone();
    raw.local_flags
        .remove(LocalFlags::ECHO | LocalFlags::ICANON);
    tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw).map_err(std::io::Error::from)?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut secret = Vec::new();
        let mut byte = [0u8; 1];
        let mut input = std::io::stdin().lock();
        loop {
            match input.read(&mut byte) {
                Ok(0) | Err(_) => break,
                Ok(_) => match byte[0] {
                    b'\n' | b'\r' => break,
                    0x7f | 0x08 => {
                        if secret.pop().is_some() {
                            prompt("\u{8} \u{8}");
                        }
                    }
                    b => {
                        secret.push(b);
                        // Only the first byte of a multi-byte character gets a star.
                        if b & 0xC0 != 0x80 {
                            prompt("*");
                        }
                    }
                },
            }
        }
        let _ = tx.send(String::from_utf8_lossy(&secret).into_owned());
    });
    let result = loop {
        match rx.recv_timeout(Duration::from_millis(25)) {
            Ok(s) => break Some(s),
            Err(mpsc::RecvTimeoutError::Timeout) if interrupt.load(Ordering::SeqCst) => break None,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break None,
        }
    };
    let _ = tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &original);
    prompt("\n");
    Ok(result)
}

/// Answers `ask_human` on the terminal (or from piped stdin).
pub struct TerminalHuman {
    /// The run's interrupt flag.
    pub interrupt: Arc<AtomicBool>,
}

impl HumanInput for TerminalHuman {
    fn ask(
        &mut self,
        _question: &str,
        input_type: InputType,
        sensitive: bool,
    ) -> std::io::Result<Option<String>> {
        match input_type {
            InputType::Confirmation => {
                prompt("Please enter yes/no: ");
                let Some(line) = read_line(&self.interrupt)? else {
                    return Ok(None);
                };
                match line.trim().to_ascii_lowercase().as_str() {
                    "y" | "yes" => Ok(Some("yes".into())),
                    "n" | "no" => Ok(Some("no".into())),
                    _ => {
                        eprint_line("⚠️  Invalid response. Defaulting to \"no\".");
                        Ok(Some("no".into()))
                    }
                }
            }
            _ if (input_type == InputType::Password || sensitive)
                && std::io::stdin().is_terminal() =>
            {
                prompt("> ");
                read_masked(&self.interrupt)
            }
            _ => {
                prompt("> ");
                read_line(&self.interrupt)
            }
        }
    }
}

/// Lets the user pick a workspace under `root` (stdin must be a terminal).
pub fn choose_workspace(root: &Path, interrupt: &AtomicBool) -> Result<String, CliError> {
    let existing = delta::workspace::list(root);
    let next = delta::workspace::next_id(root);
    if existing.is_empty() {
        eprint_line("No existing workspaces found.");
        eprint_line(&format!("Creating new workspace: {next}"));
        return Ok(next);
    }
    let last = delta::workspace::last_used(root);
    eprint_line("Select a workspace for this run:");
    for (i, name) in existing.iter().enumerate() {
        let marker = if Some(name) == last.as_ref() {
            "▸"
        } else {
            " "
        };
        let note = if Some(name) == last.as_ref() {
            " (last used)"
        } else {
            ""
        };
        eprint_line(&format!("{marker} [{}] {name}{note}", i + 1));
    }
    eprint_line(&format!("  [n] new workspace ({next})"));
    let default = last.clone().unwrap_or_else(|| next.clone());
    prompt(&format!("Choice [Enter = {default}]: "));
    let Some(answer) =
        read_line(interrupt).map_err(|e| CliError::new(format!("cannot read your choice: {e}")))?
    else {
        return Err(CliError::new("no workspace chosen").code(super::Exit::Interrupted));
    };
    let answer = answer.trim();
    Ok(match answer {
        "" => default,
        "n" | "new" => next,
        _ => match answer.parse::<usize>() {
            Ok(k) if k >= 1 && k <= existing.len() => existing[k - 1].clone(),
            _ => {
                store::validate_id(answer).map_err(|e| {
                    CliError::usage(format!("{e}")).hint("a workspace name is a single folder name")
                })?;
                answer.to_string()
            }
        },
    })
}

/// Lets the user pick an init template.
pub fn choose_template(names: &[&str], interrupt: &AtomicBool) -> Result<String, CliError> {
    eprint_line("Choose a template:");
    for (i, name) in names.iter().enumerate() {
        eprint_line(&format!("  [{}] {name}", i + 1));
    }
    loop {
        prompt(&format!("Select a template (1-{}): ", names.len()));
        let Some(answer) = read_line(interrupt)
            .map_err(|e| CliError::new(format!("cannot read your choice: {e}")))?
        else {
            return Err(CliError::new("no template chosen").code(super::Exit::Interrupted));
        };
        if let Ok(k) = answer.trim().parse::<usize>()
            && k >= 1
            && k <= names.len()
        {
            return Ok(names[k - 1].to_string());
        }
        if names.contains(&answer.trim()) {
            return Ok(answer.trim().to_string());
        }
    }
}

/// Lets the user pick one of `runs` (newest first) to continue: a numbered list with each run's
/// start, status and task (stdin must be a terminal). Enter takes the newest.
pub fn choose_run(
    runs: &[delta::runs::RunSummary],
    interrupt: &AtomicBool,
) -> Result<String, CliError> {
    eprint_line("Multiple runs found. Which to continue?");
    for (i, run) in runs.iter().enumerate() {
        let m = &run.metadata;
        let start = m
            .start_time
            .get(..16)
            .unwrap_or(&m.start_time)
            .replace('T', " ");
        let task: String = m.task.split_whitespace().collect::<Vec<_>>().join(" ");
        let task = if task.chars().count() > 60 {
            format!("{}...", task.chars().take(57).collect::<String>())
        } else {
            task
        };
        eprint_line(&format!("{}. {start} ({}) - \"{task}\"", i + 1, run.status));
    }
    loop {
        prompt(&format!("Select [1-{}] (Enter = 1): ", runs.len()));
        let Some(answer) = read_line(interrupt)
            .map_err(|e| CliError::new(format!("cannot read your choice: {e}")))?
        else {
            return Err(CliError::new("no run chosen").code(super::Exit::Interrupted));
        };
        let answer = answer.trim();
        if answer.is_empty() {
            return Ok(runs[0].run.run_id.clone());
        }
        if let Ok(k) = answer.parse::<usize>()
            && (1..=runs.len()).contains(&k)
        {
            return Ok(runs[k - 1].run.run_id.clone());
        }
        if let Some(run) = runs.iter().find(|r| r.run.run_id == answer) {
            return Ok(run.run.run_id.clone());
        }
    }
}
