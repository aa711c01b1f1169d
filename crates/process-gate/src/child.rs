//! The child, from `clone` to `exec`, and what it is given and reports back.
//!
//! It runs in the parent's memory while the parent's other threads go on: it makes only plain system
//! calls on values prepared beforehand, allocates nothing, takes no lock and calls no Rust code that
//! could panic (no indexing, no unchecked arithmetic).

use std::ffi::{c_char, c_int, c_void};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::libc;

/// The byte that lets a held child go.
pub(crate) const GO: u8 = b'g';

/// Where the child stopped, when it did not reach `exec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Stage {
    /// It has not stopped: it called `exec` (see [`Report::exec_called`]), or was killed before.
    None = 0,
    Group,
    Stdio,
    Folder,
    /// It read end-of-file at the gate: the parent refused it, or died.
    Gate,
    Record,
    Interrupted,
    Sandbox,
    Exec,
    /// Joining the sandbox's namespaces.
    Namespace,
}

/// What the child leaves for the parent, which reads it once `clone` has returned (the child has
/// called `exec` or exited by then).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Report {
    pub stage: Stage,
    pub errno: c_int,
    /// Set just before `exec`: without it and without a stage, the child was killed before.
    pub exec_called: bool,
    /// Its start time in clock ticks after boot (`None` where it could not be read).
    pub start_ticks: Option<u64>,
}

/// The record the child writes: `len` bytes at `line`, into which it writes its pid right-aligned in
/// `pid_at` and its start time in `ticks_at` (or `null` when unknown); written at the start of `fd`,
/// which is then cut to that length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecordPlan {
    pub fd: RawFd,
    pub line: *mut u8,
    pub len: usize,
    pub pid_at: (usize, usize),
    pub ticks_at: (usize, usize),
}

/// Everything the child reads, by address, and its report: it lives on the creating thread until
/// `clone` returns, which is after the child's `exec` (or exit).
pub(crate) struct Plan {
    /// Enter a sandbox: `no_new_privs`, then `ruleset` (when not -1) and `filter` (when not null).
    pub confine: bool,
    /// Namespaces joined before anything else reads a path (when not -1): a user namespace, then a
    /// mount namespace.
    pub user_ns: c_int,
    pub mount_ns: c_int,
    pub ruleset: c_int,
    pub filter: *const libc::sock_fprog,
    pub path: *const c_char,
    pub argv: *const *const c_char,
    pub shell_argv: *const *const c_char,
    pub envp: *const *const c_char,
    pub cwd: *const c_char,
    pub stdio: [RawFd; 3],
    /// Descriptors the child closes before anything else (the parent's ends of its pipes); -1 for
    /// none.
    pub close: [RawFd; 2],
    /// Held at the gate: announce the pid on `gate_pid`, wait for [`GO`] on `gate_go`.
    pub gate: Option<(RawFd, RawFd)>,
    pub record: Option<RecordPlan>,
    /// Checked (when not null) after the record is written: raised, the program never runs.
    pub interrupt: *const AtomicBool,
    pub report: Report,
}

/// Ends the child before `exec`, leaving `stage` and the current `errno` in its report.
///
/// # Safety
/// Called by the child only, on its plan.
unsafe fn fail(plan: &mut Plan, stage: Stage) -> ! {
    // SAFETY: reading errno and exiting are plain calls.
    unsafe {
        plan.report.stage = stage;
        plan.report.errno = *libc::__errno_location();
        libc::_exit(127)
    }
}

/// The child, from `clone` to `exec`. Returns only by `exec` or `_exit`.
///
/// # Safety
/// `arg` points to a [`Plan`] that outlives the call and that nothing else touches until `clone`
/// returns in the parent. Runs in the parent's memory while its other threads go on: only plain
/// system calls on the plan's values, no allocation, no lock, no panic.
pub(crate) extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: see the function's documentation; every call below is a system call wrapper on
    // descriptor numbers, the plan's strings and buffers, or locals.
    unsafe {
        let plan = &mut *(arg.cast::<Plan>());
        default_signals();
        for fd in plan.close {
            if fd >= 0 {
                libc::close(fd);
            }
        }
        // A session of its own: a group of its own (its pid), and no controlling terminal, so that
        // the program can neither open `/dev/tty` nor queue keystrokes into it.
        if libc::setsid() < 0 {
            fail(plan, Stage::Group);
        }
        for (target, fd) in (0..).zip(plan.stdio) {
            if libc::dup2(fd, target) < 0 {
                fail(plan, Stage::Stdio);
            }
        }
        // Joining a mount namespace moves the root and the working folder to its own: first.
        if plan.user_ns >= 0 && libc::setns(plan.user_ns, libc::CLONE_NEWUSER) != 0 {
            fail(plan, Stage::Namespace);
        }
        if plan.mount_ns >= 0 && libc::setns(plan.mount_ns, libc::CLONE_NEWNS) != 0 {
            fail(plan, Stage::Namespace);
        }
        if libc::chdir(plan.cwd) != 0 {
            fail(plan, Stage::Folder);
        }
        if let Some((announce, go)) = plan.gate {
            hold(plan, announce, go);
        }
        // Read here, where it costs no lookup by pid, for the parent too.
        let start_ticks = own_start_ticks();
        plan.report.start_ticks = start_ticks;
        if let Some(record) = plan.record
            && !write_record(&record, start_ticks)
        {
            fail(plan, Stage::Record);
        }
        if !plan.interrupt.is_null() && (*plan.interrupt).load(Ordering::SeqCst) {
            *libc::__errno_location() = libc::EINTR;
            fail(plan, Stage::Interrupted);
        }
        if plan.confine {
            confine(plan);
        }
        plan.report.exec_called = true;
        libc::execve(plan.path, plan.argv, plan.envp);
        if *libc::__errno_location() == libc::ENOEXEC {
            libc::execve(*plan.shell_argv, plan.shell_argv, plan.envp);
        }
        fail(plan, Stage::Exec)
    }
}

/// The parent's handlers must not run in the child: every caught signal gets its default action (as
/// `exec` would give it), SIGPIPE too (a Rust parent ignores it), and only then are signals (blocked
/// while the child was created) unblocked.
///
/// # Safety
/// Called by the child only.
unsafe fn default_signals() {
    // SAFETY: plain system calls on locals.
    unsafe {
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
    }
}

/// Announces the pid on `announce` and waits for [`GO`] on `go`. Without its own copy of the gate's
/// write end, the child sees end-of-file once the parent's copy is closed: when the parent refuses,
/// and when it dies.
///
/// # Safety
/// Called by the child only, on its plan.
unsafe fn hold(plan: &mut Plan, announce: RawFd, go: RawFd) {
    // SAFETY: plain system calls on descriptor numbers and locals.
    unsafe {
        let pid = libc::getpid().to_ne_bytes();
        if libc::write(announce, pid.as_ptr().cast(), pid.len()) != pid.len() as isize {
            fail(plan, Stage::Gate);
        }
        libc::close(announce);
        let mut byte = 0u8;
        loop {
            let n = libc::read(go, (&raw mut byte).cast(), 1);
            if n == 1 && byte == GO {
                break;
            }
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            *libc::__errno_location() = 0;
            fail(plan, Stage::Gate);
        }
        libc::close(go);
    }
}

/// Enters the sandbox: `no_new_privs`, the Landlock ruleset, the seccomp program.
///
/// # Safety
/// Called by the child only, on its plan.
unsafe fn confine(plan: &mut Plan) {
    // SAFETY: plain system calls on the plan's values.
    unsafe {
        if !crate::harden::drop_root_capabilities() {
            fail(plan, Stage::Sandbox);
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            fail(plan, Stage::Sandbox);
        }
        if plan.ruleset >= 0
            && libc::syscall(libc::SYS_landlock_restrict_self, plan.ruleset, 0) != 0
        {
            fail(plan, Stage::Sandbox);
        }
        if !plan.filter.is_null()
            && libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0,
                plan.filter,
            ) != 0
        {
            fail(plan, Stage::Sandbox);
        }
    }
}

/// Fills the record's slots and writes it at the start of its file, in one write, then cuts the file
/// to it. False when a write failed (`errno` says why).
///
/// # Safety
/// `record.line` points to `record.len` writable bytes that nothing else touches meanwhile.
unsafe fn write_record(record: &RecordPlan, start_ticks: Option<u64>) -> bool {
    // SAFETY: the slice is the plan's line (see above); the rest are system calls on it.
    unsafe {
        let line = std::slice::from_raw_parts_mut(record.line, record.len);
        let pid = u64::try_from(libc::getpid()).unwrap_or(0);
        fill(line, record.pid_at, Some(pid));
        fill(line, record.ticks_at, start_ticks);
        let written = libc::pwrite(record.fd, record.line.cast(), record.len, 0);
        if usize::try_from(written).ok() != Some(record.len) {
            if written >= 0 {
                *libc::__errno_location() = libc::EIO;
            }
            return false;
        }
        let len = libc::off_t::try_from(record.len).unwrap_or(libc::off_t::MAX);
        libc::ftruncate(record.fd, len) == 0
    }
}

/// Writes `value` right-aligned into `line[at.0..at.1]`, spaces before it (`null` for no value),
/// which JSON reads as the number alone. A slot too small is left as it is.
pub(crate) fn fill(line: &mut [u8], at: (usize, usize), value: Option<u64>) {
    let Some(slot) = line.get_mut(at.0..at.1) else {
        return;
    };
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    match value {
        None => {
            start -= 4;
            for (d, b) in digits.iter_mut().skip(start).zip(b"null") {
                *d = *b;
            }
        }
        Some(mut v) => loop {
            start -= 1;
            if let Some(d) = digits.get_mut(start) {
                // `v % 10` is below 10.
                *d = b'0' + (v % 10) as u8;
            }
            v /= 10;
            if v == 0 || start == 0 {
                break;
            }
        },
    }
    let text = digits.get(start..).unwrap_or_default();
    let Some(pad) = slot.len().checked_sub(text.len()) else {
        return;
    };
    for (i, b) in slot.iter_mut().enumerate() {
        *b = match i.checked_sub(pad) {
            Some(k) => text.get(k).copied().unwrap_or(b' '),
            None => b' ',
        };
    }
}

/// This process's start time in clock ticks after boot (`/proc/self/stat`, field 22), read without
/// allocating.
///
/// # Safety
/// Plain system calls on locals; callable anywhere.
unsafe fn own_start_ticks() -> Option<u64> {
    // SAFETY: plain system calls on locals.
    unsafe {
        let fd = libc::open(
            c"/proc/self/stat".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return None;
        }
        let mut buf = [0u8; 1024];
        let mut filled = 0usize;
        while let Some(rest) = buf.get_mut(filled..).filter(|r| !r.is_empty()) {
            let n = libc::read(fd, rest.as_mut_ptr().cast(), rest.len());
            match usize::try_from(n) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(_) if *libc::__errno_location() == libc::EINTR => {}
                Err(_) => break,
            }
        }
        libc::close(fd);
        start_ticks(buf.get(..filled)?)
    }
}

/// Field 22 of a `/proc/<pid>/stat` line. The command name (field 2) is in parentheses and may hold
/// spaces and parentheses itself, so the fields are counted from the last `)`.
pub(crate) fn start_ticks(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = stat.get(close + 1..)?;
    // The first field after the name is field 3.
    let field = rest
        .split(|b| *b == b' ')
        .filter(|f| !f.is_empty())
        .nth(22 - 3)?;
    let mut value = 0u64;
    for b in field.iter().take_while(|b| b.is_ascii_digit()) {
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    field.first().filter(|b| b.is_ascii_digit()).map(|_| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_take_the_value_right_aligned_or_null() {
        let mut line = *b"{\"pid\":2147483647,\"t\":18446744073709551615}";
        fill(&mut line, (7, 17), Some(42));
        fill(&mut line, (22, 42), None);
        assert_eq!(
            std::str::from_utf8(&line).unwrap(),
            "{\"pid\":        42,\"t\":                null}"
        );
        fill(&mut line, (22, 42), Some(u64::MAX));
        assert!(
            std::str::from_utf8(&line)
                .unwrap()
                .contains(":18446744073709551615}")
        );
        // Too small a slot is left alone; so is one outside the line.
        fill(&mut line, (7, 9), Some(123_456));
        fill(&mut line, (40, 99), Some(1));
        assert!(
            std::str::from_utf8(&line)
                .unwrap()
                .starts_with("{\"pid\":        42")
        );
    }

    #[test]
    fn the_start_time_is_counted_from_the_last_parenthesis() {
        let stat =
            b"123 (a) b) (c) S 1 123 123 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 \
                     200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        assert_eq!(start_ticks(stat), Some(98765));
        assert_eq!(start_ticks(b"1 (x) S 1 2"), None);
        assert_eq!(start_ticks(b"no parenthesis"), None);
        // SAFETY: reads this process's own stat file.
        let own = unsafe { own_start_ticks() };
        let text = std::fs::read("/proc/self/stat").unwrap();
        assert_eq!(own, start_ticks(&text));
        assert!(own.is_some());
    }
}
