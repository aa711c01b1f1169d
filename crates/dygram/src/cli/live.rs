//! Live feedback on stderr while a machine runs: each event's progress line as it happens, the
//! model's text as it streams in and a line counting the seconds while the model is thought to be
//! working (both on a terminal only), and each retry of a request announced.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cli_edge::Paint;
use dygram_runtime::executor::ExecutionEvent;
use llm::RetryNotice;

use super::execute::describe;

/// How often the waiting line is redrawn.
const TICK: Duration = Duration::from_millis(200);
/// How long a wait lasts before the waiting line shows.
const QUIET_WAIT: Duration = Duration::from_secs(1);

/// What the live display shows.
#[derive(Debug, Clone, Copy)]
pub struct Shows {
    /// Colours.
    pub paint: Paint,
    /// stderr is a terminal: streamed text and the waiting line.
    pub terminal: bool,
    /// A progress line for each event (a run to the end; `execute -i` reports after the call).
    pub lines: bool,
}

impl Shows {
    /// For this process's stderr, with progress lines or not.
    pub fn now(paint: Paint, lines: bool) -> Self {
        Self {
            paint,
            terminal: std::io::stderr().is_terminal(),
            lines,
        }
    }
}

/// The state of stderr's last line.
#[derive(Debug, Default)]
struct Screen {
    /// Asked the model (what, since when) and no answer yet.
    waiting: Option<(String, Instant)>,
    /// The seconds the waiting line shows (redrawn when they change).
    shown_secs: Option<u64>,
    /// The waiting line is on screen (no newline after it).
    ticking: bool,
    /// The model's text is being written on the last line.
    streaming: bool,
    /// The current answer's text was shown as it came.
    streamed: bool,
    /// The display has ended.
    done: bool,
}

/// The live display; its ticker thread stops with [`Live::finish`].
pub struct Live {
    shows: Shows,
    screen: Mutex<Screen>,
}

impl Live {
    /// Starts the display (and, on a terminal, the thread that redraws the waiting line).
    pub fn start(shows: Shows) -> Arc<Self> {
        let live = Arc::new(Self {
            shows,
            screen: Mutex::new(Screen::default()),
        });
        if shows.terminal {
            let ticker = Arc::clone(&live);
            std::thread::spawn(move || ticker.tick_until_done());
        }
        live
    }

    /// Whether the model's text can be shown as it arrives.
    pub fn streams(&self) -> bool {
        self.shows.terminal
    }

    fn screen(&self) -> MutexGuard<'_, Screen> {
        self.screen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Shows an event.
    pub fn event(&self, event: &ExecutionEvent) {
        let mut screen = self.screen();
        if screen.done {
            return;
        }
        match event {
            ExecutionEvent::TextDelta { path, text } if self.shows.terminal => {
                self.clear_ticker(&mut screen);
                screen.waiting = None;
                if !screen.streaming {
                    write_err(&self.shows.paint.dim(&format!("[{path}]   model: ")));
                    screen.streaming = true;
                    screen.streamed = true;
                }
                write_err(&llm::terminal_safe(&super::secrets().redact(text)));
                return;
            }
            ExecutionEvent::TextDelta { .. } => return,
            _ => {}
        }
        self.end_line(&mut screen);
        let streamed = std::mem::take(&mut screen.streamed);
        if let ExecutionEvent::LlmCall { node, model, .. } = event {
            screen.waiting = Some((format!("{model} at {node}"), Instant::now()));
        } else {
            screen.waiting = None;
        }
        let shown = matches!(event, ExecutionEvent::Output { .. }) && streamed;
        if let Some(line) = describe(event).filter(|_| self.shows.lines && !shown) {
            let paint = self.shows.paint;
            super::eprint_line(&match event {
                ExecutionEvent::Failed { .. } => paint.red(&line),
                ExecutionEvent::Completed { .. } => paint.green(&line),
                _ => line,
            });
        }
    }

    /// Announces a retry of a request.
    pub fn retry(&self, notice: &RetryNotice) {
        let mut screen = self.screen();
        self.end_line(&mut screen);
        screen.streamed = false;
        super::eprint_line(&self.shows.paint.yellow(&retry_line(notice)));
    }

    /// A hook for the HTTP layer that announces retries here.
    pub fn retry_hook(self: &Arc<Self>) -> llm::RetryHook {
        let live = Arc::clone(self);
        Arc::new(move |notice: &RetryNotice| live.retry(notice))
    }

    /// Ends the display: the last line is closed and the ticker stops.
    pub fn finish(&self) {
        let mut screen = self.screen();
        self.end_line(&mut screen);
        screen.done = true;
    }

    /// Closes what the last line holds (the waiting line is wiped, streamed text ended).
    fn end_line(&self, screen: &mut Screen) {
        self.clear_ticker(screen);
        if std::mem::take(&mut screen.streaming) {
            write_err("\n");
        }
    }

    fn clear_ticker(&self, screen: &mut Screen) {
        if std::mem::take(&mut screen.ticking) {
            write_err("\r\x1b[2K");
        }
    }

    fn tick_until_done(&self) {
        loop {
            std::thread::sleep(TICK);
            let mut screen = self.screen();
            if screen.done {
                return;
            }
            let Some((what, since)) = screen.waiting.clone() else {
                continue;
            };
            let waited = since.elapsed();
            if waited < QUIET_WAIT || screen.streaming {
                continue;
            }
            let secs = waited.as_secs();
            if screen.ticking && screen.shown_secs == Some(secs) {
                continue;
            }
            let line = format!("⏳ waiting for {what}: {secs}s");
            write_err(&format!("\r\x1b[2K{}", self.shows.paint.dim(&line)));
            screen.ticking = true;
            screen.shown_secs = Some(secs);
        }
    }
}

/// `↻ attempt 1 of 4 failed (…); retrying in 2.0s`.
pub fn retry_line(notice: &RetryNotice) -> String {
    format!(
        "↻ attempt {} of {} failed ({}); retrying in {:.1}s",
        notice.attempt,
        notice.max_attempts,
        notice.error,
        notice.delay.as_secs_f64()
    )
}

/// Writes on stderr without a newline (the secrets are scrubbed by the caller).
fn write_err(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
}
