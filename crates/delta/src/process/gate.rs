//! Starting a program that waits, between `fork` and `exec`, until the parent lets it go.
//!
//! `Command::spawn` returns only once the child has called `exec`, so a parent that records the child
//! after `spawn` leaves a window in which the program runs unrecorded. Here the child, before `exec`,
//! writes its pid to one pipe and blocks reading a second one. The parent (on this thread, while
//! another thread sits in `spawn`) reads the pid, does what must come first (record the group, check
//! for an interrupt) and then writes one byte to let the child go. If the parent decides otherwise, or
//! dies, the child reads end-of-file instead and exits without running the program: it either runs
//! after the parent's preparations or not at all.
//!
//! This is the only place in delta with `unsafe` code: `pre_exec` is unsafe because the closure runs
//! in the forked child of a multi-threaded process, where only async-signal-safe calls are allowed.
//! The closure below makes only `close`, `getpid`, `write` and `read` calls on numbers it was given,
//! and allocates nothing.
#![allow(unsafe_code)]

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::mpsc;

use nix::libc;

/// The byte that lets the child go.
const GO: u8 = b'g';

/// Why a gated program did not start.
#[derive(Debug)]
pub enum GateError<E> {
    /// It could not be started (program not found, bad working folder, ...).
    Start(io::Error),
    /// The parent decided not to let it go: it never ran.
    Refused(E),
}

/// A pipe whose two ends are above the standard descriptors: the child's standard streams are set up
/// (with `dup2` onto 0, 1 and 2) before the gate runs, and must not replace a gate descriptor.
fn pipe() -> io::Result<(io::PipeReader, io::PipeWriter)> {
    let (mut reader, mut writer) = io::pipe()?;
    // `try_clone` duplicates to the lowest free descriptor from 3 up (close-on-exec kept).
    if reader.as_raw_fd() < 3 {
        reader = reader.try_clone()?;
    }
    if writer.as_raw_fd() < 3 {
        writer = writer.try_clone()?;
    }
    Ok((reader, writer))
}

/// The child's side, between `fork` and `exec`: announce the pid, then wait for the go.
///
/// # Safety
/// Runs in the forked child: only async-signal-safe calls, no allocation. The descriptors are the
/// child's copies of the parent's pipes (close-on-exec, so the program never sees them).
unsafe fn child_side(
    pid_read: RawFd,
    pid_write: RawFd,
    go_read: RawFd,
    go_write: RawFd,
) -> io::Result<()> {
    // SAFETY: plain system calls on descriptor numbers and a local buffer.
    unsafe {
        // Without its own copy of the write end, the child sees end-of-file once the parent's copy is
        // closed: when the parent refuses, and when it dies.
        libc::close(go_write);
        libc::close(pid_read);
        let pid = libc::getpid().to_ne_bytes();
        let written = libc::write(pid_write, pid.as_ptr().cast(), pid.len());
        if usize::try_from(written).ok() != Some(pid.len()) {
            return Err(io::Error::last_os_error());
        }
        libc::close(pid_write);
        let mut byte = 0u8;
        loop {
            let n = libc::read(go_read, (&raw mut byte).cast(), 1);
            if n == 1 && byte == GO {
                break;
            }
            if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(io::Error::from_raw_os_error(libc::ECANCELED));
        }
        libc::close(go_read);
    }
    Ok(())
}

/// Work for the spawning thread.
type SpawnJob = Box<dyn FnOnce() + Send>;

/// Runs `job` on the thread that calls `spawn` (which blocks until the child has passed the gate).
/// One thread, started on first use, serves every start: a thread per tool cost more than the rest of
/// the gate. Should it be gone, a thread of its own runs the job.
fn on_spawner(job: SpawnJob) {
    static SPAWNER: std::sync::OnceLock<std::sync::Mutex<mpsc::Sender<SpawnJob>>> =
        std::sync::OnceLock::new();
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        std::thread::spawn(move || {
            for job in rx {
                job();
            }
        });
        std::sync::Mutex::new(tx)
    });
    let sent = sender.lock().unwrap_or_else(|p| p.into_inner()).send(job);
    if let Err(mpsc::SendError(job)) = sent {
        std::thread::spawn(job);
    }
}

/// Spawns `command` held at the gate, calls `decide` with the child's pid, and lets the program run
/// only if `decide` agrees. `command` should start its own process group, so that the group exists
/// (and can be signalled) while the child waits.
pub fn spawn<E>(
    mut command: Command,
    decide: impl FnOnce(i32) -> Result<(), E>,
) -> Result<Child, GateError<E>> {
    let (mut pid_read, pid_write) = pipe().map_err(GateError::Start)?;
    let (go_read, go_write) = pipe().map_err(GateError::Start)?;
    let fds = (
        pid_read.as_raw_fd(),
        pid_write.as_raw_fd(),
        go_read.as_raw_fd(),
        go_write.as_raw_fd(),
    );
    // SAFETY: `child_side` is async-signal-safe (see there).
    unsafe {
        command.pre_exec(move || child_side(fds.0, fds.1, fds.2, fds.3));
    }
    let (tx, rx) = mpsc::channel();
    on_spawner(Box::new(move || {
        let result = command.spawn();
        // The child has its own copies (or is gone); closing ours lets the parent see end-of-file on
        // the pid pipe when the child never reached the gate.
        drop(pid_write);
        drop(go_read);
        let _ = tx.send(result);
    }));
    let spawned = || {
        rx.recv()
            .unwrap_or_else(|_| Err(io::Error::other("the spawning thread ended")))
    };
    let mut pid = [0u8; 4];
    if pid_read.read_exact(&mut pid).is_err() {
        // The child failed before the gate (working folder, ...): `spawn` reports why.
        drop(go_write);
        return match spawned() {
            Ok(mut child) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(GateError::Start(io::Error::other(
                    "the program started without passing the gate",
                )))
            }
            Err(e) => Err(GateError::Start(e)),
        };
    }
    let pid = i32::from_ne_bytes(pid);
    if let Err(refusal) = decide(pid) {
        // End-of-file at the gate: the child exits without running the program.
        drop(go_write);
        if let Ok(mut child) = spawned() {
            let _ = child.kill();
            let _ = child.wait();
        }
        return Err(GateError::Refused(refusal));
    }
    let mut go = go_write;
    if let Err(e) = go.write_all(&[GO]) {
        drop(go);
        let _ = spawned();
        return Err(GateError::Start(e));
    }
    drop(go);
    spawned().map_err(GateError::Start)
}
