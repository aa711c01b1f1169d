//! Watching a started program until it ends: its output, its exit, the deadline and the interrupt,
//! all on the calling thread.
//!
//! One `poll` waits for output on both pipes and for the program's end (a pidfd, where the system has
//! them; without one the exit is looked for at every wake-up, and at least every millisecond once
//! both pipes are closed). The interrupt flag and the deadline are looked at every [`POLL`].

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::group::{self, GroupId};
use super::{MAX_CAPTURE, RunError};

/// How long a group gets between SIGTERM and SIGKILL after a timeout.
pub(super) const GRACE: Duration = Duration::from_millis(1000);
/// How often the interrupt flag is looked at.
const POLL: Duration = Duration::from_millis(20);
/// How long output is still read once the program has ended: a background process that inherited
/// the pipes could keep them open forever, so what arrived by then is kept.
const DRAIN: Duration = Duration::from_millis(500);
/// How often the exit is looked for, without a pidfd, once both pipes are closed.
const EXIT_POLL: Duration = Duration::from_millis(1);

/// What watching found.
pub(super) struct Ended {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Bytes of each stream past [`MAX_CAPTURE`], read and dropped.
    pub dropped: [u64; 2],
    /// Exit code; `128 + signal` when killed by a signal.
    pub exit_code: i32,
    pub timed_out: bool,
    pub interrupted: bool,
}

/// One output pipe and what it delivered.
struct Output {
    pipe: Option<std::fs::File>,
    bytes: Vec<u8>,
    /// Bytes read past [`MAX_CAPTURE`] and not kept.
    dropped: u64,
}

impl Output {
    /// Reads what is there; a closed or failed pipe is done.
    fn read(&mut self, chunk: &mut [u8]) {
        let Some(pipe) = &mut self.pipe else { return };
        match pipe.read(chunk) {
            Ok(0) | Err(_) => self.pipe = None,
            Ok(n) => {
                let room = MAX_CAPTURE.saturating_sub(self.bytes.len());
                self.bytes.extend_from_slice(&chunk[..n.min(room)]);
                self.dropped += n.saturating_sub(room) as u64;
            }
        }
    }
}

/// The limits the program runs under.
pub(super) struct Limits<'a> {
    pub deadline: Instant,
    pub interrupt: &'a AtomicBool,
}

/// Where the program is in its ending.
#[derive(Default)]
struct Ending {
    timed_out: Option<Instant>,
    killed: bool,
    interrupted: bool,
}

impl Ending {
    /// Signals the group as the interrupt flag and the deadline say, at `now`.
    fn enforce(&mut self, group: &GroupId, limits: &Limits<'_>, now: Instant) {
        let signal = |s| {
            // The group may already be gone; that is fine.
            let _ = killpg(Pid::from_raw(group.pgid), s);
        };
        if limits.interrupt.load(Ordering::SeqCst) && !self.interrupted {
            self.interrupted = true;
            self.killed = true;
            signal(Signal::SIGKILL);
        } else if self.timed_out.is_none() && !self.interrupted && now >= limits.deadline {
            self.timed_out = Some(now);
            signal(Signal::SIGTERM);
        } else if let Some(at) = self.timed_out
            && !self.killed
            && now >= at + GRACE
        {
            self.killed = true;
            signal(Signal::SIGKILL);
        }
    }

    /// How long the next wait may last.
    fn next_wait(&self, limits: &Limits<'_>, now: Instant) -> Duration {
        match self.timed_out {
            Some(at) if !self.killed => (at + GRACE).saturating_duration_since(now).min(POLL),
            _ if self.interrupted || self.timed_out.is_some() => POLL,
            _ => limits.deadline.saturating_duration_since(now).min(POLL),
        }
    }
}

/// The exit of `pid`, if it has ended.
fn exited(pid: Pid) -> Result<Option<i32>, RunError> {
    match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::Exited(_, code)) => Ok(Some(code)),
        Ok(WaitStatus::Signaled(_, signal, _)) => Ok(Some(128 + signal as i32)),
        Ok(_) => Ok(None),
        Err(nix::errno::Errno::EINTR) => Ok(None),
        Err(e) => Err(RunError::Start(std::io::Error::from(e))),
    }
}

/// Watches child `pid` (leader of `group`) until it has ended and its output is read.
pub(super) fn watch(
    pid: i32,
    group: &GroupId,
    pipes: [std::fs::File; 2],
    exit_notice: Option<OwnedFd>,
    limits: &Limits<'_>,
) -> Result<Ended, RunError> {
    let pid = Pid::from_raw(pid);
    let [stdout, stderr] = pipes;
    let mut outputs = [stdout, stderr].map(|pipe| Output {
        pipe: Some(pipe),
        bytes: Vec::new(),
        dropped: 0,
    });
    let mut chunk = vec![0u8; 16 * 1024];
    let mut ending = Ending::default();
    let mut code = None;
    let mut drain_until = None;
    loop {
        let now = Instant::now();
        let open = outputs.iter().filter(|o| o.pipe.is_some()).count();
        let wait = match drain_until {
            Some(until) if open == 0 || now >= until => break,
            Some(until) => until - now,
            None if open == 0 && exit_notice.is_none() => EXIT_POLL,
            None => ending.next_wait(limits, now),
        };
        let (ready, ended) = wait_for(
            &outputs,
            exit_notice.as_ref().filter(|_| code.is_none()),
            wait,
        )?;
        for (output, ready) in outputs.iter_mut().zip(ready) {
            if ready {
                output.read(&mut chunk);
            }
        }
        if code.is_none() && (ended || exit_notice.is_none()) {
            code = exited(pid)?;
            if code.is_some() {
                if ending.interrupted || ending.timed_out.is_some() {
                    // Anything the program left running in its group goes too, before we go on.
                    group::kill(group);
                }
                drain_until = Some(Instant::now() + DRAIN);
            }
        }
        if code.is_none() {
            ending.enforce(group, limits, Instant::now());
        }
    }
    let dropped = [outputs[0].dropped, outputs[1].dropped];
    let [stdout, stderr] = outputs.map(|o| o.bytes);
    Ok(Ended {
        stdout,
        stderr,
        dropped,
        exit_code: code.unwrap_or(-1),
        timed_out: ending.timed_out.is_some(),
        interrupted: ending.interrupted,
    })
}

/// Waits up to `wait` for output on the open pipes or for the exit notice: which pipes are ready, and
/// whether the notice is.
fn wait_for(
    outputs: &[Output; 2],
    exit_notice: Option<&OwnedFd>,
    wait: Duration,
) -> Result<([bool; 2], bool), RunError> {
    let mut fds = Vec::with_capacity(3);
    let mut which = Vec::with_capacity(3);
    for (i, output) in outputs.iter().enumerate() {
        if let Some(pipe) = &output.pipe {
            fds.push(PollFd::new(pipe.as_fd(), PollFlags::POLLIN));
            which.push(i);
        }
    }
    if let Some(notice) = exit_notice {
        fds.push(PollFd::new(notice.as_fd(), PollFlags::POLLIN));
        which.push(2);
    }
    let timeout = PollTimeout::try_from(wait.as_millis().max(1)).unwrap_or(PollTimeout::MAX);
    let mut ready = [false; 3];
    match poll(&mut fds, timeout) {
        Ok(_) => {
            for (fd, i) in fds.iter().zip(which) {
                // Readable, closed (POLLHUP) or failed: a read tells which.
                ready[i] = fd.revents().is_none_or(|r| !r.is_empty());
            }
        }
        Err(nix::errno::Errno::EINTR) => {}
        Err(e) => return Err(RunError::Start(std::io::Error::from(e))),
    }
    Ok(([ready[0], ready[1]], ready[2]))
}
