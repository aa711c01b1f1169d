//! Run locks held by another process.

use store::{LockHolder, LockState, RunLock, StoreError};

use crate::child::{spawn, wait_for};

#[test]
fn a_live_holder_makes_us_busy_and_a_killed_one_leaves_a_stale_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.lock");
    let mut child = spawn("lock_holder", "hold", &path);
    wait_for("the child to take the lock", || {
        path.with_extension("ready").exists()
    });
    let child_pid = child.id();

    let me = LockHolder::current(jiff::Timestamp::now(), Some("test"));
    match RunLock::acquire(&path, &me) {
        Err(StoreError::Busy {
            holder: Some(h), ..
        }) => assert_eq!(h.pid, child_pid),
        other => panic!("expected busy, got {other:?}"),
    }
    assert!(
        matches!(RunLock::probe(&path).unwrap(), LockState::Held(Some(h)) if h.pid == child_pid)
    );

    child.kill().unwrap();
    child.wait().unwrap();

    match RunLock::probe(&path).unwrap() {
        LockState::Stale(h) => assert_eq!(h.pid, child_pid),
        other => panic!("expected stale, got {other:?}"),
    }
    let acquired = RunLock::acquire(&path, &me).unwrap();
    assert_eq!(acquired.stale.map(|h| h.pid), Some(child_pid));
    assert!(
        matches!(RunLock::probe(&path).unwrap(), LockState::Held(Some(h)) if h.pid == std::process::id())
    );
    drop(acquired.lock);
    assert_eq!(RunLock::probe(&path).unwrap(), LockState::Free);
}
