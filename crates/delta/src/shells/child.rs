//! The process a session keeps (a shell, or a program on a pseudo-terminal), in a group of its own so
//! that stopping it stops whatever it started.

use std::process::Child;
use std::time::{Duration, Instant};

use crate::process::group::{self, GroupId};

/// How long a stopped process gets to end after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A session's process and its group.
pub struct SessionChild {
    child: Child,
    group: GroupId,
    ended: bool,
}

impl SessionChild {
    /// `child`, which was started as the leader of a new process group.
    pub fn new(child: Child) -> Self {
        let group = GroupId::of_leader(child.id() as i32);
        Self {
            child,
            group,
            ended: false,
        }
    }

    pub fn group(&self) -> &GroupId {
        &self.group
    }

    /// The process is known to be gone (its output ended, a write to it failed).
    pub fn mark_ended(&mut self) {
        self.ended = true;
    }

    /// Whether it still runs.
    pub fn alive(&mut self) -> bool {
        !self.ended && matches!(self.child.try_wait(), Ok(None))
    }

    /// Its exit code (`128 + signal` when a signal ended it), waiting up to `wait` for it to end; 1
    /// when it is not known.
    pub fn exit_code(&mut self, wait: Duration) -> i32 {
        use std::os::unix::process::ExitStatusExt;
        let deadline = Instant::now() + wait;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    return status.code().unwrap_or(128 + status.signal().unwrap_or(0));
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                _ => return 1,
            }
        }
    }

    /// Stops it and everything in its group.
    pub fn stop(&mut self) {
        group::stop(&self.group, STOP_GRACE);
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.ended = true;
    }
}

impl Drop for SessionChild {
    fn drop(&mut self) {
        if !self.ended {
            self.stop();
        }
    }
}
