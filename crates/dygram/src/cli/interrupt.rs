//! Ctrl-C (SIGINT) and SIGTERM while a machine runs: the call stops at once, with exit 130.
//!
//! A call is built to survive being killed at any point (its commit point is `state.json`, written
//! last and atomically; a call that did not commit is done again by the next one), so stopping it
//! here is stopping it as a kill would, minus the silence: the person is told, and a script that
//! asked for JSON still gets its object — `--format stream-json` its `run_finished` line.

use signal_hook::consts::{SIGINT, SIGTERM};

use cli_edge::ExitStatus;

use super::{CliError, Exit, eprint_line, print_out};

/// How the interrupted command reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reporting {
    /// A line on stderr.
    Text,
    /// The error object on stdout (and the line on stderr).
    Json,
    /// The stream's last line, `run_finished` with the error object (and the line on stderr).
    Stream,
}

/// The error an interrupted call reports.
pub fn interrupted() -> CliError {
    CliError::new("interrupted: nothing of the call in progress was saved")
        .hint("run the same command again to go on: the next call does the interrupted turn again")
        .kind("interrupted")
        .code(Exit::Interrupted)
}

/// Stops the process with exit 130 on SIGINT or SIGTERM, reporting as `reporting` says.
pub fn stop_on_signals(reporting: Reporting) -> Result<(), CliError> {
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .map_err(|e| CliError::new(format!("cannot install the signal handler: {e}")))?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            let error = interrupted();
            eprint_line(&format!("\n{}", error.message()));
            match reporting {
                Reporting::Text => {}
                Reporting::Json => print_out(&format!("{}\n", error.to_json())),
                Reporting::Stream => print_out(&format!(
                    "{}\n",
                    dygram_runtime::session::result::stream_finished(
                        error.exit().code(),
                        error.to_json()
                    )
                )),
            }
            std::process::exit(i32::from(Exit::Interrupted as u8));
        }
    });
    Ok(())
}
