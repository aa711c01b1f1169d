use super::*;
use crate::contract::jsons;
use crate::runs::RunStore;

const LAYOUT: FileLayout = FileLayout {
    journal: "journal.jsonl",
    lock: "run.lock",
};

fn store() -> (tempfile::TempDir, FileStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("runs"), LAYOUT);
    (dir, store)
}

fn holder() -> LockHolder {
    crate::contract::holder("test")
}

#[test]
fn the_file_store_keeps_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let store_for =
        |case: &str| -> Box<dyn RunStore> { Box::new(FileStore::new(root.join(case), LAYOUT)) };
    crate::contract::all(&store_for);
    crate::contract::race(&store_for, 8, 25);
}

#[test]
fn a_writer_whose_lock_was_replaced_under_it_is_fenced() {
    let (_dir, store) = store();
    let mut first = store.create("r", &holder()).unwrap();
    store.append(&mut first, &["1"]).unwrap();
    // The lock file removed by hand: a second writer can take a lock on a new file.
    std::fs::remove_file(store.root().join("r/run.lock")).unwrap();
    let mut second = store.lease("r", &holder()).unwrap();
    assert_eq!(second.epoch(), 2);
    let fenced = store.append(&mut first, &["2"]).unwrap_err();
    assert!(
        matches!(
            fenced,
            StoreError::Fenced {
                held: 1,
                current: 2,
                ..
            }
        ),
        "{fenced}"
    );
    let fenced = store
        .put(&mut first, "state.json", b"{}", Flush::Lazy)
        .unwrap_err();
    assert!(matches!(fenced, StoreError::Fenced { .. }), "{fenced}");
    assert_eq!(store.append(&mut second, &["3"]).unwrap(), Seq(2));
    assert_eq!(
        jsons(&store.read_journal("r", Seq(0)).unwrap()),
        [(1, "1"), (2, "3")]
    );
}

#[test]
fn a_lease_from_another_store_or_run_is_refused() {
    let (_dir, a) = store();
    let other = tempfile::tempdir().unwrap();
    let b = FileStore::new(other.path(), LAYOUT);
    let mut lease = a.create("r", &holder()).unwrap();
    let err = b.append(&mut lease, &["1"]).unwrap_err();
    assert!(matches!(err, StoreError::ForeignLease { .. }), "{err}");
}

#[test]
fn a_torn_last_record_is_reported_by_reads_and_cut_off_by_the_next_lease() {
    let (_dir, store) = store();
    let mut lease = store.create("r", &holder()).unwrap();
    store.append(&mut lease, &["1", "2"]).unwrap();
    drop(lease);
    // A writer killed in the middle of its line.
    let path = store.root().join("r/journal.jsonl");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"half":"#);
    std::fs::write(&path, bytes).unwrap();

    let read = store.read_journal("r", Seq(0)).unwrap();
    assert_eq!(jsons(&read), [(1, "1"), (2, "2")]);
    assert_eq!(read.torn.as_ref().map(|t| t.line), Some(3));

    let mut lease = store.lease("r", &holder()).unwrap();
    assert_eq!(lease.recovered().map(|t| t.line), Some(3));
    assert_eq!(store.append(&mut lease, &["3"]).unwrap(), Seq(3));
    let read = store.read_journal("r", Seq(0)).unwrap();
    assert_eq!(jsons(&read), [(1, "1"), (2, "2"), (3, "3")]);
    assert!(read.torn.is_none());
}

#[test]
fn a_holder_that_died_is_reported_as_stale_to_the_next_lease() {
    let (_dir, store) = store();
    drop(store.create("r", &holder()).unwrap());
    // A holder that died leaves its record in the lock file (a clean release empties it).
    let died = LockHolder::current(jiff::Timestamp::UNIX_EPOCH, Some("died"));
    std::fs::write(
        store.root().join("r/run.lock"),
        serde_json::to_vec(&died).unwrap(),
    )
    .unwrap();
    assert!(matches!(
        store.lease_state("r").unwrap(),
        LeaseState::Stale(_)
    ));
    let lease = store.lease("r", &holder()).unwrap();
    assert_eq!(lease.stale(), Some(&died));
}

#[test]
fn the_journal_the_lock_and_the_epoch_are_never_documents() {
    let (_dir, store) = store();
    let mut lease = store.create("r", &holder()).unwrap();
    store.append(&mut lease, &["1"]).unwrap();
    for reserved in ["journal.jsonl", "run.lock"] {
        let err = store
            .put(&mut lease, reserved, b"{}", Flush::Lazy)
            .unwrap_err();
        assert!(matches!(err, StoreError::ReservedKey { .. }), "{err}");
    }
    let err = store
        .put(&mut lease, ".epoch", b"{}", Flush::Lazy)
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidId { .. }), "{err}");
    store
        .put(&mut lease, "metadata.json", b"{}", Flush::Lazy)
        .unwrap();
    assert_eq!(store.keys("r", "").unwrap(), ["metadata.json"]);
}

#[test]
fn a_removal_cut_short_is_finished_by_the_next_listing() {
    let (_dir, store) = store();
    drop(store.create("kept", &holder()).unwrap());
    // A removal killed after its rename.
    std::fs::create_dir_all(store.root().join(".rm-x-1/io")).unwrap();
    assert_eq!(store.list().unwrap(), ["kept"]);
    assert!(!store.root().join(".rm-x-1").exists());
}
