//! Starting a program that never runs before its parent's preparations hold.
//!
//! A parent that records a child after starting it leaves a window in which the program runs
//! unrecorded. Two ways close it here:
//!
//! - [`start`]: the child writes its own record before `exec`. The parent prepares the record's line
//!   with room for the pid and start time, which only the child knows before it runs; the child
//!   fills them in, writes the line at the start of the open record file (one write of at most a
//!   page), checks the parent's interrupt flag and only then calls `exec`. The calling thread waits
//!   in `clone` until then: a start costs one process creation and no exchange between threads.
//! - [`spawn`]: the child, before `exec`, writes its pid to one pipe and blocks reading a second one.
//!   The parent reads the pid, does what must come first (anything: a record too long for one
//!   write, say) and then writes one byte to let the child go. If the parent decides otherwise, or
//!   dies, the child reads end-of-file instead and exits without running the program. The child is
//!   created by a thread of its own, so that the calling thread is free to open the gate. Only
//!   records too long for one write take this way.
//!
//! The child is created the way `posix_spawn` creates one: with `clone(CLONE_VM | CLONE_VFORK)`, on a
//! stack of its own, sharing the parent's memory until `exec`. A `fork` copies the page tables of the
//! whole process and leaves every page copy-on-write, which made each tool start cost the engine
//! about as much again as the tool itself; sharing the memory costs nothing. The child leaves why it
//! stopped, if it did, in that shared memory, where the creating thread reads it once `clone`
//! returns.
//!
//! A program with a sandbox ([`Confine`]) enters it after its record and the gate, before `exec`:
//! `no_new_privs`, a Landlock ruleset, a seccomp program, all prepared by the parent (delta's
//! `sandbox` module).
//!
//! This crate holds the workspace's only `unsafe` blocks (the lint denies them everywhere else;
//! `dygram-wasm` allows it for the `no_mangle` attributes of its exports, with no block). The child
//! runs in the parent's memory while the parent's other threads go on, so between `clone` and `exec`
//! it makes only plain system calls on values prepared beforehand (module `child`). Signals are blocked
//! while it is created, and their handlers reset before they are unblocked, so no handler of the
//! parent ever runs in the child.
#![allow(unsafe_code)]

use std::ffi::{CString, c_char};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use nix::libc;

mod child;
pub mod harden;

use child::{GO, Plan, RecordPlan, Report, Stage, child_main};

/// One instruction of a seccomp program, in the kernel's layout (`struct sock_filter`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instruction {
    /// The operation.
    pub code: u16,
    /// Where to jump when true.
    pub jt: u8,
    /// Where to jump when false.
    pub jf: u8,
    /// The operand.
    pub k: u32,
}

/// The child's stack until `exec`: it makes a few system calls on small values.
const CHILD_STACK: usize = 64 * 1024;

/// Why a gated program did not start.
#[derive(Debug)]
pub enum GateError<E> {
    /// It could not be started (program not found, bad working folder, ...).
    Start(io::Error),
    /// The parent decided not to let it go: it never ran.
    Refused(E),
}

/// A program to start: prepared in the parent, since the child may not allocate.
pub struct Program {
    path: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
    cwd: CString,
    stdin: bool,
    confine: Option<Confine>,
}

/// A sandbox the child enters (delta's `sandbox` prepares it): first the namespaces, before it
/// changes to its working folder; after the gate, `no_new_privs`, the Landlock ruleset, then the
/// seccomp program.
#[derive(Debug, Clone)]
pub struct Confine {
    /// Namespaces to join, from [`harden::private_mounts`]'s holder: a user namespace (absent when
    /// the caller is root) and a mount namespace; the caller keeps them open until the spawn returns.
    pub namespaces: Option<(Option<RawFd>, RawFd)>,
    /// A Landlock ruleset's descriptor; the caller keeps it open until the spawn returns.
    pub ruleset: Option<RawFd>,
    /// A seccomp program.
    pub filter: Option<std::sync::Arc<[Instruction]>>,
}

impl Program {
    /// `argv[0]` run as `path` (found already), with exactly `env`, in `cwd`; standard input is a
    /// pipe when `stdin` is set, `/dev/null` otherwise.
    pub fn new(
        path: &str,
        argv: &[String],
        env: &[(String, String)],
        cwd: &Path,
        stdin: bool,
    ) -> io::Result<Self> {
        let text = |s: &[u8]| {
            CString::new(s).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the command")
            })
        };
        Ok(Self {
            path: text(path.as_bytes())?,
            argv: argv
                .iter()
                .map(|a| text(a.as_bytes()))
                .collect::<io::Result<_>>()?,
            env: env
                .iter()
                .map(|(k, v)| text(format!("{k}={v}").as_bytes()))
                .collect::<io::Result<_>>()?,
            cwd: text(cwd.as_os_str().as_bytes())?,
            stdin,
            confine: None,
        })
    }

    /// The program, confined by `confine` from before its `exec`.
    pub fn confined(mut self, confine: Option<Confine>) -> Self {
        self.confine = confine;
        self
    }
}

/// A started program (its `exec` succeeded). The caller waits for it ([`wait`]).
#[derive(Debug)]
pub struct Started {
    /// Its pid, which is also its process group.
    pub pid: i32,
    /// Its start time in clock ticks after boot, as the child read it before `exec` (`None` where it
    /// could not be read, and for a child started at the gate).
    pub start_ticks: Option<u64>,
    /// Its standard input, when it was given a pipe.
    pub stdin: Option<std::fs::File>,
    /// Its standard output.
    pub stdout: std::fs::File,
    /// Its standard error.
    pub stderr: std::fs::File,
}

/// The record a child writes for itself before `exec` ([`start`]): one line (at most a page, so that
/// a child killed during the write leaves it whole or not at all) written at the start of `file`,
/// which is then cut to it.
#[derive(Debug)]
pub struct SelfRecord {
    /// The open record file, a regular file.
    pub file: OwnedFd,
    /// The line. The child writes its pid right-aligned in `pid_at` (at least 10 bytes) and its start
    /// time in clock ticks after boot in `ticks_at` (at least 20 bytes; `null` when it cannot read
    /// it), spaces before them: JSON reads the number alone.
    pub line: Vec<u8>,
    /// Where the pid goes.
    pub pid_at: std::ops::Range<usize>,
    /// Where the start time goes.
    pub ticks_at: std::ops::Range<usize>,
}

/// The longest record a child writes: one write of at most a page is never cut short.
pub const SELF_RECORD_MAX: usize = 4096;

/// Why [`start`] did not start a program; it never ran.
#[derive(Debug)]
pub enum StartError {
    /// It could not be started (program not found, bad working folder, ...).
    Start(io::Error),
    /// Its record could not be written.
    Record(io::Error),
    /// The interrupt flag was raised before it would have run.
    Interrupted,
}

/// How [`start`] starts a program, beside the program itself.
#[derive(Debug, Default)]
pub struct Start<'a> {
    /// A record the child writes before its program runs; the program never runs unrecorded.
    pub record: Option<SelfRecord>,
    /// Checked by the child after its record is written: raised, the program never runs.
    pub interrupt: Option<&'a AtomicBool>,
    /// Where the child's pid is stored from the moment it exists (the kernel writes it as the child
    /// is created), so that another thread can kill it while this one waits for its `exec`.
    pub pid_to: Option<&'a AtomicI32>,
}

/// A pipe whose two ends are above the standard descriptors: the child's standard streams are set up
/// (with `dup2` onto 0, 1 and 2) first, and must not replace a descriptor it still needs.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (reader, writer) = io::pipe()?;
    Ok((above_std(reader.into())?, above_std(writer.into())?))
}

/// `fd`, moved to a number from 3 up (close-on-exec kept) if it is 0, 1 or 2.
fn above_std(fd: OwnedFd) -> io::Result<OwnedFd> {
    // `try_clone` duplicates to the lowest free descriptor from 3 up.
    if fd.as_raw_fd() < 3 {
        fd.try_clone()
    } else {
        Ok(fd)
    }
}

/// The child's standard streams and ours: standard input a pipe only with `stdin`, else `/dev/null`.
struct Stdio {
    child: [OwnedFd; 3],
    stdin: Option<OwnedFd>,
    stdout: OwnedFd,
    stderr: OwnedFd,
}

impl Stdio {
    fn new(stdin: bool) -> io::Result<Self> {
        let (stdin_read, stdin_write) = if stdin {
            let (r, w) = pipe()?;
            (r, Some(w))
        } else {
            (above_std(std::fs::File::open("/dev/null")?.into())?, None)
        };
        let (stdout_read, stdout_write) = pipe()?;
        let (stderr_read, stderr_write) = pipe()?;
        Ok(Self {
            child: [stdin_read, stdout_write, stderr_write],
            stdin: stdin_write,
            stdout: stdout_read,
            stderr: stderr_read,
        })
    }

    /// Ours, once the child has its own (after `clone` returned, its copies are closed by `exec` or
    /// its exit, and ours go now, so that the program's output ends when its own copies close).
    fn started(self, pid: i32, start_ticks: Option<u64>) -> Started {
        Started {
            pid,
            start_ticks,
            stdin: self.stdin.map(std::fs::File::from),
            stdout: self.stdout.into(),
            stderr: self.stderr.into(),
        }
    }
}

/// Null-terminated pointers to `strings`, valid while they live.
fn pointers<'a>(strings: impl Iterator<Item = &'a std::ffi::CStr>) -> Vec<*const c_char> {
    strings
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// What the child is given beside the program, by descriptor number and address.
struct Extras<'a> {
    close: [RawFd; 2],
    gate: Option<(RawFd, RawFd)>,
    record: Option<&'a mut SelfRecord>,
    interrupt: Option<&'a AtomicBool>,
    pid_to: Option<&'a AtomicI32>,
}

/// What `create` found: the child's pid and the report it left (see [`stopped`]), or why it could
/// not be created.
type Created = io::Result<(i32, Report)>;

/// Creates the child on this thread and waits until it has called `exec` or exited.
fn create(program: &Program, stdio: [RawFd; 3], extras: Extras<'_>) -> Created {
    let argv = pointers(program.argv.iter().map(CString::as_c_str));
    // A file that `exec` refuses as having no known format is run by the shell, as `execvp` does.
    let shell = c"/bin/sh";
    let shell_argv = pointers(
        [shell, program.path.as_c_str()]
            .into_iter()
            .chain(program.argv.iter().skip(1).map(CString::as_c_str)),
    );
    let envp = pointers(program.env.iter().map(CString::as_c_str));
    let instructions = program.confine.as_ref().and_then(|c| c.filter.as_ref());
    let fprog = instructions.map(|f| libc::sock_fprog {
        len: u16::try_from(f.len()).unwrap_or(u16::MAX),
        filter: f.as_ptr().cast_mut().cast(),
    });
    let record = extras.record.map(|r| RecordPlan {
        fd: r.file.as_raw_fd(),
        line: r.line.as_mut_ptr(),
        len: r.line.len(),
        pid_at: (r.pid_at.start, r.pid_at.end),
        ticks_at: (r.ticks_at.start, r.ticks_at.end),
    });
    let namespaces = program.confine.as_ref().and_then(|c| c.namespaces);
    let mut plan = Plan {
        confine: program.confine.is_some(),
        user_ns: namespaces.and_then(|(user, _)| user).unwrap_or(-1),
        mount_ns: namespaces.map_or(-1, |(_, mount)| mount),
        ruleset: program
            .confine
            .as_ref()
            .and_then(|c| c.ruleset)
            .unwrap_or(-1),
        filter: fprog.as_ref().map_or(std::ptr::null(), std::ptr::from_ref),
        path: program.path.as_ptr(),
        argv: argv.as_ptr(),
        shell_argv: shell_argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: program.cwd.as_ptr(),
        stdio,
        close: extras.close,
        gate: extras.gate,
        record,
        interrupt: extras
            .interrupt
            .map_or(std::ptr::null(), std::ptr::from_ref),
        report: Report {
            stage: Stage::None,
            errno: 0,
            exec_called: false,
            start_ticks: None,
        },
    };
    let pid = clone_child(&mut plan, extras.pid_to)?;
    Ok((pid, plan.report))
}

/// Creates the child that runs [`child_main`] with `plan`; returns once it has called `exec` or
/// exited (`CLONE_VFORK`). With `pid_to`, the kernel stores the child's pid there as it creates it.
fn clone_child(plan: &mut Plan, pid_to: Option<&AtomicI32>) -> io::Result<i32> {
    let mut stack = vec![0u8; CHILD_STACK];
    let mut flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
    let ptid = pid_to.map_or(std::ptr::null_mut(), AtomicI32::as_ptr);
    if !ptid.is_null() {
        flags |= libc::CLONE_PARENT_SETTID;
    }
    // SAFETY: the child runs `child_main` on `stack`, with `plan`, which outlive `clone`: with
    // CLONE_VFORK it returns only once the child has called `exec` or exited, and nothing else
    // touches the plan meanwhile. `ptid` is an atomic integer that outlives the call. Signals stay
    // blocked on this thread while the child is created (the child starts with this mask), and are
    // restored.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut before: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&raw mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const all, &raw mut before);
        let top = stack.as_mut_ptr().add(CHILD_STACK);
        let top = top.sub(top as usize % 16);
        let pid = libc::clone(
            child_main,
            top.cast(),
            flags,
            std::ptr::from_mut(plan).cast(),
            ptid,
        );
        let error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const before, std::ptr::null_mut());
        if pid < 0 { Err(error) } else { Ok(pid) }
    }
}

/// Waits for the exit of child `pid` (which has ended or is about to).
fn reap(pid: i32) {
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
}

/// Whether the child did not reach `exec`: it stopped (its report says where), or was killed.
fn stopped_early(report: &Report) -> bool {
    report.stage != Stage::None || !report.exec_called
}

/// The error a child reported, if it did not reach `exec` (reaped then). A child killed before it
/// could say is reported as [`Stage::None`].
fn stopped(pid: i32, report: &Report) -> Option<(Stage, io::Error)> {
    if !stopped_early(report) {
        return None;
    }
    reap(pid);
    let error = match report.stage {
        Stage::None => io::Error::other("the program was killed before it started"),
        _ => io::Error::from_raw_os_error(report.errno),
    };
    Some((report.stage, error))
}

/// Starts `program` in its own process group, on this thread (which waits only until the child has
/// called `exec`). With a record, the child writes it before its program runs; with an interrupt
/// flag, it checks the flag after that and does not run its program when the flag is raised.
pub fn start(program: &Program, how: Start<'_>) -> Result<Started, StartError> {
    let mut record = how.record;
    if let Some(r) = &record {
        let fits = |at: &std::ops::Range<usize>, least| at.end <= r.line.len() && at.len() >= least;
        if r.line.len() > SELF_RECORD_MAX || !fits(&r.pid_at, 10) || !fits(&r.ticks_at, 20) {
            return Err(StartError::Record(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a record longer than a page, or without room for the pid and start time",
            )));
        }
    }
    // The record's descriptor must not be one the child replaces with its standard streams
    // (`try_clone` duplicates to the lowest free descriptor from 3 up).
    if let Some(r) = record.as_mut().filter(|r| r.file.as_raw_fd() < 3) {
        r.file = r.file.try_clone().map_err(StartError::Record)?;
    }
    let stdio = Stdio::new(program.stdin).map_err(StartError::Start)?;
    let extras = Extras {
        close: [-1, -1],
        gate: None,
        record: record.as_mut(),
        interrupt: how.interrupt,
        pid_to: how.pid_to,
    };
    let child_ends = std::array::from_fn(|i| stdio.child[i].as_raw_fd());
    let (pid, report) = create(program, child_ends, extras).map_err(StartError::Start)?;
    if let (true, Some(pid_to)) = (stopped_early(&report), how.pid_to) {
        // Forgotten before it is reaped: its number may go to another process then.
        let _ = pid_to.compare_exchange(pid, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
    let interrupted = || how.interrupt.is_some_and(|i| i.load(Ordering::SeqCst));
    match stopped(pid, &report) {
        None => Ok(stdio.started(pid, report.start_ticks)),
        Some((Stage::Interrupted, _)) => Err(StartError::Interrupted),
        Some((Stage::None, _)) if interrupted() => Err(StartError::Interrupted),
        Some((Stage::Record, e)) => Err(StartError::Record(e)),
        Some((_, e)) => Err(StartError::Start(e)),
    }
}

/// The pid the child announces at the gate, or `None` when it ended before.
fn announced_pid(pid_read: OwnedFd) -> Option<i32> {
    let mut pid = [0u8; 4];
    std::fs::File::from(pid_read).read_exact(&mut pid).ok()?;
    Some(i32::from_ne_bytes(pid))
}

/// Starts `program` held at the gate (in its own process group, which exists while it waits), calls
/// `decide` with its pid, and lets the program run only if `decide` agrees.
pub fn spawn<E>(
    program: &Program,
    decide: impl FnOnce(i32) -> Result<(), E>,
) -> Result<Started, GateError<E>> {
    let stdio = Stdio::new(program.stdin).map_err(GateError::Start)?;
    let ((pid_read, pid_write), (go_read, go_write)) = pipe()
        .and_then(|announce| Ok((announce, pipe()?)))
        .map_err(GateError::Start)?;
    let child_ends: [RawFd; 3] = std::array::from_fn(|i| stdio.child[i].as_raw_fd());
    let gate = (pid_write.as_raw_fd(), go_read.as_raw_fd());
    let close = [pid_read.as_raw_fd(), go_write.as_raw_fd()];
    // The creating thread waits in `clone` until the child has passed the gate; this one opens it.
    std::thread::scope(|scope| {
        let creating = scope.spawn(move || {
            let extras = Extras {
                close,
                gate: Some(gate),
                record: None,
                interrupt: None,
                pid_to: None,
            };
            let created = create(program, child_ends, extras);
            // The child's ends go once it has called `exec` or exited.
            drop((pid_write, go_read));
            created
        });
        let created = move || {
            creating
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the creating thread panicked")))
        };
        let_the_child_go(stdio, pid_read, go_write, created, decide)
    })
}

/// The parent's side of the gate: reads the pid the child announces, has `decide` decide, and
/// lets the child go or refuses it; `created` waits for the creating thread's result.
fn let_the_child_go<E>(
    stdio: Stdio,
    pid_read: OwnedFd,
    go_write: OwnedFd,
    created: impl FnOnce() -> Created,
    decide: impl FnOnce(i32) -> Result<(), E>,
) -> Result<Started, GateError<E>> {
    // Why a child that did not run its program stopped: what it reported, else `otherwise`.
    let why_not = |created: Created, otherwise: &dyn Fn() -> io::Error| -> io::Error {
        match created {
            Err(e) => e,
            Ok((pid, report)) => match stopped(pid, &report) {
                Some((Stage::Gate, _)) => otherwise(),
                Some((_, e)) => e,
                None => {
                    reap(pid);
                    otherwise()
                }
            },
        }
    };
    let Some(pid) = announced_pid(pid_read) else {
        // The child ended before the gate (working folder, ...): it reported why.
        drop(go_write);
        let early = || io::Error::other("the program started without passing the gate");
        return Err(GateError::Start(why_not(created(), &early)));
    };
    if let Err(refusal) = decide(pid) {
        // End-of-file at the gate: the child exits without running the program.
        drop(go_write);
        why_not(created(), &|| io::Error::other("refused"));
        return Err(GateError::Refused(refusal));
    }
    // The write end closes with the file: the child has what it needs.
    let opened = std::fs::File::from(go_write).write_all(&[GO]);
    match (opened, created()) {
        (Ok(()), Ok((pid, report))) if !stopped_early(&report) => Ok(stdio.started(pid, None)),
        (opened, created) => {
            let stopped = || io::Error::other("the program stopped at the gate");
            let at_gate = opened.err();
            Err(GateError::Start(why_not(created, &|| {
                at_gate
                    .as_ref()
                    .map_or_else(stopped, |e| io::Error::new(e.kind(), e.to_string()))
            })))
        }
    }
}

/// A descriptor that becomes readable when child `pid` has ended (`pidfd_open`), where the system
/// has them (Linux 5.3 and later). `pid` must be a child not yet waited for, so that its number
/// cannot have been reused.
pub fn exit_notice(pid: i32) -> Option<OwnedFd> {
    // SAFETY: a system call with two integers; the result is a new descriptor we own, or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = RawFd::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: `fd` was just returned by the kernel and belongs to nobody else.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    fn shell(script: &str, cwd: &Path) -> Program {
        let argv = ["sh".to_string(), "-c".to_string(), script.to_string()];
        let env = [("PATH".to_string(), "/usr/bin:/bin".to_string())];
        Program::new("/bin/sh", &argv, &env, cwd, false).unwrap()
    }

    /// A record line with slots for the pid and start time.
    fn record(file: OwnedFd) -> SelfRecord {
        let line = br#"{"pgid":2147483647,"start_ticks":18446744073709551615}"#.to_vec();
        SelfRecord {
            file,
            line,
            pid_at: 8..18,
            ticks_at: 33..53,
        }
    }

    fn output(started: Started) -> (String, i32) {
        let mut text = String::new();
        let mut stdout = started.stdout;
        stdout.read_to_string(&mut text).unwrap();
        let status = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(started.pid), None);
        let code = match status.unwrap() {
            nix::sys::wait::WaitStatus::Exited(_, code) => code,
            other => panic!("{other:?}"),
        };
        (text, code)
    }

    #[test]
    fn a_child_writes_its_record_before_its_program_runs() {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("gate-record-{}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        // A longer earlier record is cut to the new one.
        file.write_all_at(&[b'x'; 200], 0).unwrap();
        let script = format!("cat {}; echo; echo $$", path.display());
        let pid = AtomicI32::new(0);
        let how = Start {
            record: Some(record(file.try_clone().unwrap().into())),
            interrupt: Some(&AtomicBool::new(false)),
            pid_to: Some(&pid),
        };
        let started = start(&shell(&script, &dir), how).unwrap();
        assert_eq!(pid.load(std::sync::atomic::Ordering::SeqCst), started.pid);
        let ticks = started.start_ticks.unwrap();
        let child = started.pid;
        let (text, code) = output(started);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(code, 0);
        let (line, shell_pid) = text.trim_end().rsplit_once('\n').unwrap();
        assert_eq!(shell_pid, child.to_string());
        let expected = format!(r#"{{"pgid":{child:>10},"start_ticks":{ticks:>20}}}"#);
        assert_eq!(line, expected);
    }

    #[test]
    fn a_record_that_cannot_be_written_keeps_the_program_from_running() {
        let dir = std::env::temp_dir();
        let marker = dir.join(format!("gate-ran-{}", std::process::id()));
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let how = Start {
            record: Some(record(full.try_clone().unwrap().into())),
            ..Start::default()
        };
        let script = format!("touch {}", marker.display());
        match start(&shell(&script, &dir), how) {
            Err(StartError::Record(e)) => assert_eq!(e.raw_os_error(), Some(libc::ENOSPC)),
            other => panic!("{other:?}"),
        }
        // Without room for its values, or longer than a page, a record is refused up front.
        let mut bad = record(full.into());
        bad.pid_at = 8..12;
        let how = Start {
            record: Some(bad),
            ..Start::default()
        };
        assert!(matches!(
            start(&shell(&script, &dir), how),
            Err(StartError::Record(_))
        ));
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!marker.exists(), "the program ran");
    }

    #[test]
    fn a_raised_interrupt_keeps_the_program_from_running() {
        let dir = std::env::temp_dir();
        let marker = dir.join(format!("gate-interrupted-{}", std::process::id()));
        let how = Start {
            interrupt: Some(&AtomicBool::new(true)),
            ..Start::default()
        };
        let script = format!("touch {}", marker.display());
        assert!(matches!(
            start(&shell(&script, &dir), how),
            Err(StartError::Interrupted)
        ));
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!marker.exists(), "the program ran");
    }
}
