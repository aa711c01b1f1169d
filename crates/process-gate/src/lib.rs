//! Starting a program that waits, before it runs, until the parent lets it go.
//!
//! A parent that records a child after starting it leaves a window in which the program runs
//! unrecorded. Here the child, before `exec`, writes its pid to one pipe and blocks reading a second
//! one. The parent (on the calling thread) reads the pid, does what must come first (record the
//! group, check for an interrupt) and then writes one byte to let the child go. If the parent decides
//! otherwise, or dies, the child reads end-of-file instead and exits without running the program: it
//! either runs after the parent's preparations or not at all.
//!
//! The child is created the way `posix_spawn` creates one: with `clone(CLONE_VM | CLONE_VFORK)`, on a
//! stack of its own, sharing the parent's memory until `exec`. A `fork` copies the page tables of the
//! whole process and leaves every page copy-on-write, which made each tool start cost the engine
//! about as much again as the tool itself; sharing the memory costs nothing. Only the thread that
//! calls `clone` waits (until the child has called `exec` or exited); it is a thread kept for this
//! ([`on_spawner`]), so the calling thread is free to open the gate.
//!
//! A program with a sandbox ([`Confine`]) enters it after the gate, before `exec`: `no_new_privs`, a
//! Landlock ruleset, a seccomp program, all prepared by the parent (delta's `sandbox` module).
//!
//! This crate holds the workspace's only `unsafe` blocks (the lint denies them everywhere else;
//! `dygram-wasm` allows it for the `no_mangle` attributes of its exports, with no block). The child runs in the parent's memory while
//! the parent's other threads go on, so between `clone` and `exec` it makes only plain system calls on
//! values prepared beforehand: it allocates nothing, takes no lock and calls no Rust code that could
//! panic. Signals are blocked while it is created, and their handlers reset before they are
//! unblocked, so no handler of the parent ever runs in the child.
#![allow(unsafe_code)]

use std::ffi::{CString, c_char, c_int, c_void};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::mpsc;

use nix::libc;

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

/// The byte that lets the child go.
const GO: u8 = b'g';
/// The child's stack until `exec`: it makes a few system calls on small values.
const CHILD_STACK: usize = 64 * 1024;
/// Where the child stopped, when it did not reach `exec`.
const STAGE_GROUP: u8 = 1;
const STAGE_STDIO: u8 = 2;
const STAGE_FOLDER: u8 = 3;
const STAGE_GATE: u8 = 4;
const STAGE_EXEC: u8 = 5;
const STAGE_SANDBOX: u8 = 6;

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

/// A sandbox the child enters after the gate, before `exec` (delta's `sandbox` prepares it):
/// `no_new_privs`, then the Landlock ruleset, then the seccomp program.
#[derive(Debug, Clone)]
pub struct Confine {
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
    /// Its standard input, when it was given a pipe.
    pub stdin: Option<std::fs::File>,
    /// Its standard output.
    pub stdout: std::fs::File,
    /// Its standard error.
    pub stderr: std::fs::File,
}

/// A pipe whose two ends are above the standard descriptors: the child's standard streams are set up
/// (with `dup2` onto 0, 1 and 2) before the gate, and must not replace a descriptor it still needs.
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

/// The child's ends and the descriptors it closes, by number.
struct ChildFds {
    stdin: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
    pid_write: OwnedFd,
    go_read: OwnedFd,
    report: OwnedFd,
    /// The parent's ends of the gate, which the child must not keep.
    pid_read: RawFd,
    go_write: RawFd,
}

/// Everything the child reads, by address: it lives on the creating thread until `clone` returns,
/// which is after the child's `exec` (or exit).
struct Plan {
    /// Enter a sandbox: `no_new_privs`, then `ruleset` (when not -1) and `filter` (when not null).
    confine: bool,
    ruleset: c_int,
    filter: *const libc::sock_fprog,
    path: *const c_char,
    argv: *const *const c_char,
    shell_argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    stdio: [RawFd; 3],
    pid_write: RawFd,
    pid_read: RawFd,
    go_read: RawFd,
    go_write: RawFd,
    report: RawFd,
}

/// Null-terminated pointers to `strings`, valid while they live.
fn pointers<'a>(strings: impl Iterator<Item = &'a std::ffi::CStr>) -> Vec<*const c_char> {
    strings
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Work for the spawning thread.
type SpawnJob = Box<dyn FnOnce() + Send>;

/// Runs `job` on the thread that creates children (it waits in `clone` until a child has passed the
/// gate). One thread, started on first use, serves every start: a thread per tool cost more than the
/// rest of the gate. Should it be gone, a thread of its own runs the job.
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

/// Why the child ended before `exec`, as it reported.
enum Failure {
    /// It read end-of-file at the gate.
    Refused,
    /// A step failed with this error.
    Os(io::Error),
}

/// What the creating thread found: the child's pid, or why it did not run (with its pid, if it
/// existed).
type Created = Result<i32, (Option<i32>, Failure)>;

/// Creates the child on this thread and waits until it has called `exec` or exited: the pid, or why
/// it did not run.
fn create(program: &Program, fds: ChildFds, report: OwnedFd) -> Created {
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
    let plan = Plan {
        confine: program.confine.is_some(),
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
        stdio: [
            fds.stdin.as_raw_fd(),
            fds.stdout.as_raw_fd(),
            fds.stderr.as_raw_fd(),
        ],
        pid_write: fds.pid_write.as_raw_fd(),
        pid_read: fds.pid_read,
        go_read: fds.go_read.as_raw_fd(),
        go_write: fds.go_write,
        report: fds.report.as_raw_fd(),
    };
    let pid = clone_held(&plan).map_err(|e| (None, Failure::Os(e)))?;
    // The child's copies of its ends were closed by `exec` (close-on-exec) or by its exit; ours go
    // now, so that the program's output and the report below end when the child's do.
    drop(fds);
    match child_report(report) {
        None => Ok(pid),
        Some(failure) => Err((Some(pid), failure)),
    }
}

/// Creates the child that runs [`child_main`] with `plan`; returns once it has called `exec` or
/// exited (`CLONE_VFORK`).
fn clone_held(plan: &Plan) -> io::Result<i32> {
    let mut stack = vec![0u8; CHILD_STACK];
    // SAFETY: the child runs `child_main` on `stack`, reading `plan`, which outlive `clone`: with
    // CLONE_VFORK it returns only once the child has called `exec` or exited. Signals stay blocked on
    // this thread while the child is created (the child starts with this mask), and are restored.
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
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            std::ptr::from_ref(plan).cast_mut().cast(),
        );
        let error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const before, std::ptr::null_mut());
        if pid < 0 { Err(error) } else { Ok(pid) }
    }
}

/// What a child that ended before `exec` wrote on `report`; `None` when it wrote nothing (its
/// `exec` closed the pipe).
fn child_report(report: OwnedFd) -> Option<Failure> {
    let mut bytes = Vec::with_capacity(5);
    let _ = std::fs::File::from(report).read_to_end(&mut bytes);
    match bytes.as_slice() {
        [] => None,
        [STAGE_GATE, ..] => Some(Failure::Refused),
        [_, errno @ ..] => {
            let errno = <[u8; 4]>::try_from(errno).map_or(libc::EIO, c_int::from_ne_bytes);
            Some(Failure::Os(io::Error::from_raw_os_error(errno)))
        }
    }
}

/// The child, from `clone` to `exec`. Returns only by `exec` or `_exit`.
///
/// # Safety
/// `arg` points to a [`Plan`] that outlives the call. Runs in the parent's memory while its other
/// threads go on: only plain system calls on the plan's values, no allocation, no lock, no panic.
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: see the function's documentation; every call below is a system call wrapper on
    // descriptor numbers, the plan's strings, or locals.
    unsafe {
        let plan = &*(arg.cast_const().cast::<Plan>());
        let fail = |stage: u8| -> ! {
            let errno = *libc::__errno_location();
            let mut message = [stage, 0, 0, 0, 0];
            message[1..].copy_from_slice(&errno.to_ne_bytes());
            libc::write(plan.report, message.as_ptr().cast(), message.len());
            libc::_exit(127)
        };
        // The parent's handlers must not run here: every caught signal gets its default action (as
        // `exec` would give it), SIGPIPE too (a Rust parent ignores it), and only then are signals
        // unblocked.
        for signal in 1..65 {
            let mut action: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &raw mut action) == 0
                && action.sa_sigaction != libc::SIG_DFL
                && (action.sa_sigaction != libc::SIG_IGN || signal == libc::SIGPIPE)
            {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &raw const default, std::ptr::null_mut());
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const none, std::ptr::null_mut());
        if libc::setpgid(0, 0) != 0 {
            fail(STAGE_GROUP);
        }
        for (target, fd) in plan.stdio.iter().enumerate() {
            if libc::dup2(*fd, target as c_int) < 0 {
                fail(STAGE_STDIO);
            }
        }
        if libc::chdir(plan.cwd) != 0 {
            fail(STAGE_FOLDER);
        }
        // Without its own copy of the gate's write end, the child sees end-of-file once the parent's
        // copy is closed: when the parent refuses, and when it dies.
        libc::close(plan.go_write);
        libc::close(plan.pid_read);
        let pid = libc::getpid().to_ne_bytes();
        if libc::write(plan.pid_write, pid.as_ptr().cast(), pid.len()) != pid.len() as isize {
            fail(STAGE_GATE);
        }
        libc::close(plan.pid_write);
        let mut byte = 0u8;
        loop {
            let n = libc::read(plan.go_read, (&raw mut byte).cast(), 1);
            if n == 1 && byte == GO {
                break;
            }
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            fail(STAGE_GATE);
        }
        libc::close(plan.go_read);
        if plan.confine {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                fail(STAGE_SANDBOX);
            }
            if plan.ruleset >= 0
                && libc::syscall(libc::SYS_landlock_restrict_self, plan.ruleset, 0) != 0
            {
                fail(STAGE_SANDBOX);
            }
            if !plan.filter.is_null()
                && libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    plan.filter,
                ) != 0
            {
                fail(STAGE_SANDBOX);
            }
        }
        libc::execve(plan.path, plan.argv, plan.envp);
        if *libc::__errno_location() == libc::ENOEXEC {
            libc::execve(*plan.shell_argv, plan.shell_argv, plan.envp);
        }
        fail(STAGE_EXEC)
    }
}

/// Waits for the exit of child `pid` (which has ended or is about to).
fn reap(pid: i32) {
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
}

/// The parent's ends of a gated child's pipes.
struct ParentEnds {
    stdin: Option<OwnedFd>,
    stdout: OwnedFd,
    stderr: OwnedFd,
    pid_read: OwnedFd,
    go_write: OwnedFd,
    report: OwnedFd,
}

/// Every pipe a gated child needs (standard input a pipe only with `stdin`, else `/dev/null`): the
/// child's ends and ours.
fn pipes(stdin: bool) -> io::Result<(ChildFds, ParentEnds)> {
    let (stdin_read, stdin_write) = if stdin {
        let (r, w) = pipe()?;
        (r, Some(w))
    } else {
        (above_std(std::fs::File::open("/dev/null")?.into())?, None)
    };
    let (stdout_read, stdout_write) = pipe()?;
    let (stderr_read, stderr_write) = pipe()?;
    let (pid_read, pid_write) = pipe()?;
    let (go_read, go_write) = pipe()?;
    let (report_read, report_write) = pipe()?;
    let child = ChildFds {
        stdin: stdin_read,
        stdout: stdout_write,
        stderr: stderr_write,
        pid_write,
        go_read,
        report: report_write,
        pid_read: pid_read.as_raw_fd(),
        go_write: go_write.as_raw_fd(),
    };
    let ours = ParentEnds {
        stdin: stdin_write,
        stdout: stdout_read,
        stderr: stderr_read,
        pid_read,
        go_write,
        report: report_read,
    };
    Ok((child, ours))
}

/// The pid the child announces at the gate, or `None` when it ended before.
fn announced_pid(pid_read: OwnedFd) -> Option<i32> {
    let mut pid = [0u8; 4];
    std::fs::File::from(pid_read).read_exact(&mut pid).ok()?;
    Some(i32::from_ne_bytes(pid))
}

/// Reaps a child that did not run its program, and says why: what it reported, else `otherwise`.
fn why_not(created: Created, otherwise: impl FnOnce() -> io::Error) -> io::Error {
    match created {
        Ok(pid) => {
            reap(pid);
            otherwise()
        }
        Err((child, failure)) => {
            if let Some(child) = child {
                reap(child);
            }
            match failure {
                Failure::Os(e) => e,
                Failure::Refused => otherwise(),
            }
        }
    }
}

/// Starts `program` held at the gate (in its own process group, which exists while it waits), calls
/// `decide` with its pid, and lets the program run only if `decide` agrees.
pub fn spawn<E>(
    program: Program,
    decide: impl FnOnce(i32) -> Result<(), E>,
) -> Result<Started, GateError<E>> {
    let (fds, ours) = pipes(program.stdin).map_err(GateError::Start)?;
    let (tx, rx) = mpsc::channel();
    let report = ours.report;
    on_spawner(Box::new(move || {
        let _ = tx.send(create(&program, fds, report));
    }));
    let created = move || {
        rx.recv().unwrap_or_else(|_| {
            let gone = io::Error::other("the spawning thread ended");
            Err((None, Failure::Os(gone)))
        })
    };
    let Some(pid) = announced_pid(ours.pid_read) else {
        // The child ended before the gate (working folder, ...): it reported why.
        drop(ours.go_write);
        let early = || io::Error::other("the program started without passing the gate");
        return Err(GateError::Start(why_not(created(), early)));
    };
    if let Err(refusal) = decide(pid) {
        // End-of-file at the gate: the child exits without running the program.
        drop(ours.go_write);
        why_not(created(), || io::Error::other("refused"));
        return Err(GateError::Refused(refusal));
    }
    // The write end closes with the file: the child has what it needs.
    let opened = std::fs::File::from(ours.go_write).write_all(&[GO]);
    match (opened, created()) {
        (Ok(()), Ok(pid)) => Ok(Started {
            pid,
            stdin: ours.stdin.map(std::fs::File::from),
            stdout: ours.stdout.into(),
            stderr: ours.stderr.into(),
        }),
        (opened, created) => {
            let at_gate = || {
                let stopped = || io::Error::other("the program stopped at the gate");
                opened.err().unwrap_or_else(stopped)
            };
            Err(GateError::Start(why_not(created, at_gate)))
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
