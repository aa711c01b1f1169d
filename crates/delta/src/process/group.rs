//! Process groups that delta started: who they are, whether they still run, and stopping them.
//!
//! A group is known by its leader's pid (which is the group id), the leader's start time and the
//! boot it ran in. Together these tell our group from a stranger that reused the number: a start
//! time that differs, or another boot, means the pid now belongs to someone else, and such a group is
//! never signalled.
//!
//! Linux keeps a pid number allocated as long as any process still uses it as its group id, so while
//! a member of our group lives, the leader's number cannot have gone to another process; a leader that
//! is gone with members left is recognised by the members' group id and start times (never earlier
//! than the leader's).
//!
//! Process states come from `/proc`. Without it (other systems) a group cannot be verified, and it is
//! then never signalled from a record ([`Liveness::Unknown`]).

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// How often the stopping loops look again.
const POLL: Duration = Duration::from_millis(5);
/// How long a group gets after SIGKILL to disappear (processes stuck in the kernel take a moment).
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Identifies a process group that delta started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupId {
    /// The group id: the leader's pid.
    pub pgid: i32,
    /// The leader's start time in clock ticks after boot (`/proc/<pid>/stat`, field 22); `None` where
    /// it cannot be read.
    pub start_ticks: Option<u64>,
    /// The boot the leader started in (`/proc/sys/kernel/random/boot_id`); `None` where it cannot be
    /// read.
    pub boot_id: Option<String>,
}

/// One line of `/proc/<pid>/stat`, the fields we use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    state: char,
    pgrp: i32,
    start_ticks: u64,
}

impl Stat {
    fn read(pid: i32) -> Option<Self> {
        use std::io::Read;
        // The line is a few hundred bytes; room for it up front saves the small probing reads a
        // file of reported size 0 gets.
        let mut text = String::with_capacity(1024);
        std::fs::File::open(format!("/proc/{pid}/stat"))
            .and_then(|mut f| f.read_to_string(&mut text))
            .ok()?;
        Self::parse(&text)
    }

    /// The command name (field 2) is in parentheses and may itself hold spaces and parentheses, so the
    /// fields are counted from the last `)`.
    fn parse(text: &str) -> Option<Self> {
        let rest = &text[text.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // fields[0] is field 3 (state), fields[2] field 5 (pgrp), fields[19] field 22 (starttime).
        Some(Self {
            state: fields.first()?.chars().next()?,
            pgrp: fields.get(2)?.parse().ok()?,
            start_ticks: fields.get(19)?.parse().ok()?,
        })
    }

    /// Dead processes: zombies (waiting to be collected, possibly by init) and the dying.
    fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// The current boot's id (`/proc/sys/kernel/random/boot_id`), where there is one; read once.
pub fn boot_id() -> Option<String> {
    static BOOT_ID: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    BOOT_ID
        .get_or_init(|| {
            std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        })
        .clone()
}

impl GroupId {
    /// The group led by `pid` (a process started with its own group), as it is now.
    pub fn of_leader(pid: i32) -> Self {
        Self {
            pgid: pid,
            start_ticks: Stat::read(pid).map(|s| s.start_ticks),
            boot_id: boot_id(),
        }
    }

    /// Whether the group can be told from a stranger that reused its number.
    pub fn verifiable(&self) -> bool {
        self.start_ticks.is_some() && self.boot_id.is_some()
    }
}

/// Whether a group still has live members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// These processes of the group are alive.
    Alive(Vec<i32>),
    /// No process of the group is alive (it ended, or the machine restarted since).
    Gone,
    /// It cannot be verified here (no `/proc`, or the record lacks the leader's start time).
    Unknown,
}

/// Whether `pgid` can be a group delta started: never 0 or 1 (`killpg` would reach this process's
/// own group, or every process), nor delta's own group. A record naming one is not ours, however it
/// came about, and is never acted on.
fn can_be_ours(pgid: i32) -> bool {
    pgid > 1 && pgid != nix::unistd::getpgrp().as_raw() && pgid != nix::unistd::getpid().as_raw()
}

/// Looks for the live members of `group`.
pub fn liveness(group: &GroupId) -> Liveness {
    if !can_be_ours(group.pgid) {
        return Liveness::Unknown;
    }
    let (Some(start), Some(boot)) = (group.start_ticks, group.boot_id.as_deref()) else {
        return Liveness::Unknown;
    };
    let Some(now_boot) = boot_id() else {
        return Liveness::Unknown;
    };
    if now_boot != boot {
        return Liveness::Gone;
    }
    // No process in the group at all: nothing to look up (the usual case, and the cheap one).
    if killpg(Pid::from_raw(group.pgid), None) == Err(nix::errno::Errno::ESRCH) {
        return Liveness::Gone;
    }
    if let Some(leader) = Stat::read(group.pgid)
        && leader.start_ticks != start
    {
        // The number belongs to another process now, so no process uses it as a group id of ours.
        return Liveness::Gone;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Liveness::Unknown;
    };
    let members: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            Stat::read(pid)
                .is_some_and(|s| s.pgrp == group.pgid && !s.is_dead() && s.start_ticks >= start)
        })
        .collect();
    if members.is_empty() {
        Liveness::Gone
    } else {
        Liveness::Alive(members)
    }
}

/// What stopping a group found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// Nothing of the group was running.
    NotRunning,
    /// It was running and ended after SIGTERM.
    Terminated,
    /// It was running and had to be killed (SIGKILL).
    Killed,
    /// It cannot be verified here, so it was left alone.
    Unverifiable,
}

impl Stopped {
    /// Whether the group was found running.
    pub fn was_running(self) -> bool {
        matches!(self, Self::Terminated | Self::Killed)
    }
}

fn signal(group: &GroupId, sig: Signal) {
    if !can_be_ours(group.pgid) {
        return;
    }
    // The group may have ended in the meantime; that is fine.
    let _ = killpg(Pid::from_raw(group.pgid), sig);
}

/// Waits up to `limit` until no member of `group` is alive.
fn wait_gone(group: &GroupId, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    loop {
        if !matches!(liveness(group), Liveness::Alive(_)) {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// Stops `group` if it still runs: SIGTERM, up to `grace` to end, then SIGKILL. Returns once it is
/// gone (or, for processes stuck in the kernel, after a few seconds more). A group that cannot be
/// verified is left alone.
pub fn stop(group: &GroupId, grace: Duration) -> Stopped {
    match liveness(group) {
        Liveness::Unknown => return Stopped::Unverifiable,
        Liveness::Gone => return Stopped::NotRunning,
        Liveness::Alive(_) => {}
    }
    signal(group, Signal::SIGTERM);
    if wait_gone(group, grace) {
        return Stopped::Terminated;
    }
    signal(group, Signal::SIGKILL);
    wait_gone(group, KILL_WAIT);
    Stopped::Killed
}

/// Kills child `pid`, which is being started (it may not lead its group yet), and its group, without
/// waiting: the process is about to exit.
pub fn kill_starting(pid: i32) {
    if !can_be_ours(pid) {
        return;
    }
    let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
    let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
}

/// Kills `group` (SIGKILL) and waits, a few seconds at most, until none of it is alive. For a group
/// this process started and is about to give up on (interrupt, deadline, exit).
pub fn kill(group: &GroupId) {
    signal(group, Signal::SIGKILL);
    if group.verifiable() {
        wait_gone(group, KILL_WAIT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    #[test]
    fn groups_that_cannot_be_ours_are_never_verified() {
        for pgid in [0, 1, -1, nix::unistd::getpgrp().as_raw()] {
            let mut group = GroupId::of_leader(std::process::id() as i32);
            group.pgid = pgid;
            if pgid == 1 {
                // The values any user can read for pid 1 pass the start-time check.
                group.start_ticks = Stat::read(1).map(|s| s.start_ticks);
            }
            assert_eq!(liveness(&group), Liveness::Unknown, "pgid {pgid}");
        }
    }

    #[test]
    fn stat_lines_are_read_from_the_last_parenthesis() {
        let line = "42 (a) b) (c) S 1 77 77 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 123456 0 0";
        assert_eq!(
            Stat::parse(line),
            Some(Stat {
                state: 'S',
                pgrp: 77,
                start_ticks: 123456
            })
        );
        assert_eq!(Stat::parse("42 (x) S 1"), None);
    }

    fn sleeper(script: &str) -> std::process::Child {
        Command::new("sh")
            .args(["-c", script])
            .process_group(0)
            .spawn()
            .unwrap()
    }

    #[test]
    fn a_running_group_is_stopped_with_everything_in_it() {
        let mut child = sleeper("sleep 30 & sleep 30; wait");
        let group = GroupId::of_leader(child.id() as i32);
        assert!(group.verifiable());
        std::thread::sleep(Duration::from_millis(100));
        match liveness(&group) {
            Liveness::Alive(members) => assert!(members.len() >= 2, "{members:?}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(stop(&group, Duration::from_secs(2)), Stopped::Terminated);
        let _ = child.wait();
        assert_eq!(liveness(&group), Liveness::Gone);
        assert_eq!(stop(&group, Duration::from_secs(2)), Stopped::NotRunning);
    }

    #[test]
    fn a_group_that_ignores_sigterm_is_killed_after_the_grace() {
        let mut child = sleeper("trap '' TERM; sleep 30 & wait; sleep 30");
        let group = GroupId::of_leader(child.id() as i32);
        std::thread::sleep(Duration::from_millis(100));
        let start = Instant::now();
        assert_eq!(stop(&group, Duration::from_millis(300)), Stopped::Killed);
        assert!(start.elapsed() < Duration::from_secs(3));
        let _ = child.wait();
        assert_eq!(liveness(&group), Liveness::Gone);
    }

    #[test]
    fn a_group_whose_leader_ended_is_found_by_its_members() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("bg.pid");
        let mut child = sleeper(&format!("sleep 30 & echo $! > {}", pid_file.display()));
        let group = GroupId::of_leader(child.id() as i32);
        let _ = child.wait();
        let start = Instant::now();
        while std::fs::read_to_string(&pid_file).map_or(true, |s| s.trim().is_empty()) {
            assert!(start.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(5));
        }
        let bg: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(liveness(&group), Liveness::Alive(vec![bg]));
        assert_eq!(stop(&group, Duration::from_secs(2)), Stopped::Terminated);
    }

    #[test]
    fn a_pid_that_now_belongs_to_another_process_is_never_signalled() {
        let mut child = sleeper("sleep 30");
        let real = GroupId::of_leader(child.id() as i32);
        let stranger = GroupId {
            start_ticks: real.start_ticks.map(|t| t.saturating_sub(1)),
            ..real.clone()
        };
        assert_eq!(liveness(&stranger), Liveness::Gone);
        assert_eq!(stop(&stranger, Duration::from_secs(1)), Stopped::NotRunning);
        let other_boot = GroupId {
            boot_id: Some("another-boot".into()),
            ..real.clone()
        };
        assert_eq!(
            stop(&other_boot, Duration::from_secs(1)),
            Stopped::NotRunning
        );
        let unknown = GroupId {
            start_ticks: None,
            ..real.clone()
        };
        assert_eq!(
            stop(&unknown, Duration::from_secs(1)),
            Stopped::Unverifiable
        );
        assert!(
            matches!(liveness(&real), Liveness::Alive(_)),
            "the process was left alone"
        );
        kill(&real);
        let _ = child.wait();
        assert_eq!(liveness(&real), Liveness::Gone);
    }
}
