//! Who listens at a session's socket. The socket and `host.json`, which names it, lie in the
//! session's folder, which the session's own (confined) programs can write: a program could put
//! another socket there, or point `host.json` at one, such as a host a person started by hand
//! without a sandbox. A confined session is therefore driven only through a host that this binary
//! would have started for it.

use std::os::unix::net::UnixStream;

/// Whether the process listening at the other end of `stream` is a host started for the session
/// with exactly `args` (after the program's name): a process of this user, not confined itself (a
/// confined program can only start confined processes, whose filter the kernel shows), whose
/// command line is `args`, with or without `--rebuild` after the folder.
pub(super) fn is_host_for(stream: &UnixStream, args: &[String]) -> bool {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let Ok(peer) = getsockopt(stream, PeerCredentials) else {
        return false;
    };
    if peer.uid() != nix::unistd::geteuid().as_raw() {
        return false;
    }
    let pid = peer.pid();
    unconfined(pid) && command_line(pid).is_some_and(|line| same_host_args(&line, args))
}

/// Whether the process at the other end of `stream` may drive this host: a process of this user,
/// and, when this host is not confined itself (a person started it, or a run's engine did), not a
/// confined one either: a confined program must not run commands outside its sandbox through it.
pub(super) fn may_drive(stream: &UnixStream) -> bool {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let Ok(peer) = getsockopt(stream, PeerCredentials) else {
        return false;
    };
    if peer.uid() != nix::unistd::geteuid().as_raw() {
        return false;
    }
    !unconfined(std::process::id() as i32) || unconfined(peer.pid())
}

/// Whether process `pid` is a session host serving `dir` (`… sessions __host DIR …`): what
/// `host.json` names is stopped only then.
pub(super) fn is_host_of(pid: i32, dir: &std::path::Path) -> bool {
    let dir = dir.display().to_string();
    command_line(pid).is_some_and(|line| {
        line.get(..3).is_some_and(|head| {
            head.first().is_some_and(|w| w == "sessions")
                && head.get(1).is_some_and(|w| w == "__host")
                && head.get(2) == Some(&dir)
        })
    })
}

/// The session (field 6 of `/proc/<pid>/stat`) of process `pid`.
pub(super) fn session_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    // After the name: state, ppid, pgrp, session.
    rest.split_whitespace().nth(3)?.parse().ok()
}

/// Whether process `pid` has no seccomp filter (every confined process of delta's has one).
fn unconfined(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|status| {
        status.lines().any(|l| {
            l.split_once(':')
                .is_some_and(|(k, v)| k == "Seccomp" && v.trim() == "0")
        })
    })
}

/// Process `pid`'s arguments after its program's name.
fn command_line(pid: i32) -> Option<Vec<String>> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let mut words: Vec<String> = bytes
        .split(|b| *b == 0)
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    if words.last().is_some_and(String::is_empty) {
        words.pop();
    }
    words.get(1..).map(<[String]>::to_vec)
}

/// `line` is `expected` with, perhaps, `--rebuild` after the first three words.
fn same_host_args(line: &[String], expected: &[String]) -> bool {
    let without: Vec<&String> = line.iter().filter(|w| *w != "--rebuild").collect();
    without.len() == expected.len() && without.iter().zip(expected).all(|(a, b)| *a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_known_by_its_exact_arguments() {
        let expected: Vec<String> = ["sessions", "__host", "/w/.sessions/s", "--sandbox", "{}"]
            .map(String::from)
            .to_vec();
        let with_rebuild: Vec<String> = [
            "sessions",
            "__host",
            "/w/.sessions/s",
            "--rebuild",
            "--sandbox",
            "{}",
        ]
        .map(String::from)
        .to_vec();
        assert!(same_host_args(&expected, &expected));
        assert!(same_host_args(&with_rebuild, &expected));
        assert!(!same_host_args(&expected[..3], &expected));
        let other: Vec<String> = [
            "sessions",
            "__host",
            "/w/.sessions/s",
            "--sandbox",
            "{\"a\":1}",
        ]
        .map(String::from)
        .to_vec();
        assert!(!same_host_args(&other, &expected));
        // This test process has no filter.
        assert!(unconfined(std::process::id() as i32));
        assert_eq!(
            command_line(std::process::id() as i32).map(|w| w.is_empty()),
            Some(std::env::args().count() <= 1)
        );
    }
}
