//! Writes the run's `io/` records (invocations, tool executions) on a background thread.
//!
//! These records are for people inspecting a run; the journal is what the engine relies on. The
//! records of `io/invocations/` and `io/tool_executions/` go in packs, many to a file (see the
//! `io_packs` module), or in a file of their own when larger than a pack: creating files is what a
//! record costs most on many disks. The loop hands records to this writer, which writes them in
//! batches: at most [`BATCH_DELAY`] after the first pending record, sooner when [`BATCH_BYTES`]
//! are pending, and always on `flush` (the engine flushes when a run stops). The writer is woken
//! once per batch, not per record.
//!
//! A record that cannot be written (a full disk) leaves nothing (a file is removed rather than left
//! empty or cut short, a pack is cut back to where the record began), and is reported:
//! [`IoWriter::failures`] gives each one with its path (a pack's record: its folder) and error,
//! for the engine to say in the journal which records are missing.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use crate::io_files::Folders;
use crate::io_packs::{PackWriter, fits};
use std::path::Path;
use std::time::{Duration, Instant};

/// Longest a record waits before it is written.
pub const BATCH_DELAY: Duration = Duration::from_millis(250);
/// Pending size that triggers a write at once.
pub const BATCH_BYTES: usize = 1024 * 1024;

/// Produces a file's content on the writer thread (for contents that are costly to serialize).
pub type Render = Box<dyn FnOnce() -> Vec<u8> + Send>;

/// A file's content: ready, or produced later on the writer thread.
pub enum Content {
    /// The bytes.
    Now(Vec<u8>),
    /// Bytes shared with someone else (no copy is made).
    Shared(std::sync::Arc<Vec<u8>>),
    /// A function producing them, at least as many bytes as given (a tool's output, say: whether
    /// the record fits a pack is known before it is produced; 0 when not known).
    Later(usize, Render),
    /// Bytes shared with someone else, scrubbed of the run's secrets as they are written: copied
    /// only where a secret was found (a request can be megabytes).
    Scrubbed(llm::Redactor, std::sync::Arc<Vec<u8>>),
}

impl From<Vec<u8>> for Content {
    fn from(bytes: Vec<u8>) -> Self {
        Self::Now(bytes)
    }
}

impl Content {
    fn len(&self) -> usize {
        match self {
            Self::Now(b) => b.len(),
            Self::Shared(b) | Self::Scrubbed(_, b) => b.len(),
            Self::Later(len, _) => *len,
        }
    }

    /// The bytes, written to `out` (produced now for a later content).
    pub(super) fn write_to(self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        match self {
            Self::Now(b) => out.write_all(&b),
            Self::Shared(b) => out.write_all(b.as_slice()),
            Self::Later(_, render) => out.write_all(&render()),
            Self::Scrubbed(redactor, b) => out.write_all(&redactor.redact_bytes(&b)),
        }
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Self {
        Self::Now(text.as_bytes().to_vec())
    }
}

/// A record: its parts, written one after the other into one file.
pub(super) type Parts = Vec<Content>;

/// What the engine has handed over and the writer has not written yet.
#[derive(Default)]
struct Queue {
    records: Vec<(PathBuf, Parts)>,
    /// Their known size.
    bytes: usize,
    /// When the oldest of them was queued.
    since: Option<Instant>,
    /// Flushes asked for, and done (each flush waits for the writes queued before it).
    flushes_asked: u64,
    flushes_done: u64,
    /// The engine is done with the writer: write what is left and stop.
    closing: bool,
}

impl Queue {
    /// Whether the writer should write now rather than wait.
    fn due(&self) -> bool {
        self.closing
            || self.flushes_asked > self.flushes_done
            || self.bytes >= BATCH_BYTES
            || self.since.is_some_and(|t| t.elapsed() >= BATCH_DELAY)
    }
}

/// The queue and the writer's two signals: work for it, and flushes done.
#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    work: Condvar,
    flushed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A record that could not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// The file it was meant for (removed if a part of it was written), or the folder of a pack's
    /// record (its error names the record).
    pub path: PathBuf,
    /// Why.
    pub error: String,
}

/// Records that could not be written, until someone takes them.
type Failures = Arc<Mutex<Vec<Failed>>>;

/// The writer.
pub struct IoWriter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    failures: Failures,
}

impl IoWriter {
    /// Starts the writer thread for the records of the run folder `root` (every record's path is
    /// below it); the records of `io/invocations/` and `io/tool_executions/` go in packs named after
    /// `packs` (a UUID v7; see the `io_packs` module).
    pub fn start(root: PathBuf, packs: String) -> Self {
        let shared = Arc::new(Shared::default());
        let failures = Failures::default();
        let thread = {
            let shared = Arc::clone(&shared);
            let failures = Arc::clone(&failures);
            let mut out = Out {
                packs: Packers::new(&root, &packs),
                folders: Folders::new(root),
            };
            std::thread::spawn(move || write_batches(&shared, &mut out, &failures))
        };
        Self {
            shared,
            thread: Some(thread),
            failures,
        }
    }

    /// The records that could not be written since the last call (the writes queued before it that
    /// have been done: [`IoWriter::flush`] first to have them all).
    pub fn failures(&self) -> Vec<Failed> {
        self.failures
            .lock()
            .map(|mut f| std::mem::take(&mut *f))
            .unwrap_or_default()
    }

    /// Queues the record `path`, its `parts` one after the other (its folder is created if
    /// needed). The writer is woken only by the first record of a batch (to start its delay) and by
    /// one that makes the batch large enough: waking a thread costs more than queuing a record.
    pub fn write(&self, path: PathBuf, parts: Parts) {
        let mut queue = self.shared.lock();
        let first = queue.records.is_empty();
        queue.bytes += parts.iter().map(Content::len).sum::<usize>();
        queue.records.push((path, parts));
        queue.since.get_or_insert_with(Instant::now);
        let wake = first || queue.bytes >= BATCH_BYTES;
        drop(queue);
        if wake {
            self.shared.work.notify_one();
        }
    }

    /// Waits until every queued write is done.
    pub fn flush(&self) {
        let mut queue = self.shared.lock();
        queue.flushes_asked += 1;
        let ticket = queue.flushes_asked;
        self.shared.work.notify_one();
        while queue.flushes_done < ticket && self.thread.as_ref().is_some_and(|t| !t.is_finished())
        {
            queue = self
                .shared
                .flushed
                .wait_timeout(queue, Duration::from_millis(100))
                .map_or_else(|p| p.into_inner().0, |(q, _)| q);
        }
    }
}

/// The writer thread: waits for a batch to be due, writes it outside the lock, until the engine is
/// done with it.
fn write_batches(shared: &Shared, out: &mut Out, failures: &Mutex<Vec<Failed>>) {
    loop {
        let mut queue = shared.lock();
        while !queue.due() {
            queue = match queue.since {
                None => shared
                    .work
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(since) => {
                    let left = BATCH_DELAY.saturating_sub(since.elapsed());
                    shared
                        .work
                        .wait_timeout(queue, left)
                        .map_or_else(|p| p.into_inner().0, |(q, _)| q)
                }
            };
        }
        let mut batch = std::mem::take(&mut queue.records);
        queue.bytes = 0;
        queue.since = None;
        let ticket = queue.flushes_asked;
        let closing = queue.closing;
        drop(queue);
        write_all(&mut batch, out, failures);
        shared.lock().flushes_done = ticket;
        shared.flushed.notify_all();
        if closing {
            return;
        }
    }
}

/// Where records go: the packs of the folders that keep them so, and files below the run folder.
struct Out {
    packs: Packers,
    folders: Folders,
}

/// The pack writers of `io/invocations` and `io/tool_executions`.
struct Packers([PackWriter; 2]);

impl Packers {
    fn new(root: &Path, id: &str) -> Self {
        let writer = |dir: &str| PackWriter::new(root.join(dir), id.to_string());
        Self([writer("io/invocations"), writer("io/tool_executions")])
    }

    /// The writer of the pack a record `<id>.json` at `path` goes in, and its id; `None` for records
    /// kept as files of their own.
    fn of<'p>(&mut self, path: &'p Path) -> Option<(&mut PackWriter, &'p str)> {
        let id = path.file_name()?.to_str()?.strip_suffix(".json")?;
        let dir = path.parent()?;
        let writer = self.0.iter_mut().find(|w| w.dir == dir)?;
        Some((writer, id))
    }
}

/// Writes the pending records. A missing record must not stop a run: one that fails leaves nothing
/// of it (not a file left empty or cut short, not part of a pack line) and is kept in `failures`.
fn write_all(pending: &mut Vec<(PathBuf, Parts)>, out: &mut Out, failures: &Mutex<Vec<Failed>>) {
    let mut failed = Vec::new();
    for (path, parts) in pending.drain(..) {
        if let Err(failure) = write_record(out, path, parts) {
            failed.push(failure);
        }
    }
    if !failed.is_empty()
        && let Ok(mut list) = failures.lock()
    {
        list.append(&mut failed);
    }
}

/// A record's parts, one after the other. A part produced here that panics costs its record, not
/// the writer.
fn render(parts: Parts, out: &mut impl std::io::Write) -> std::io::Result<()> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for part in parts {
            part.write_to(out)?;
        }
        out.flush()
    }))
    .unwrap_or_else(|_| Err(std::io::Error::other("producing the record failed")))
}

/// Writes one record: into its folder's pack when it fits one, else as a new file below the run
/// folder (see [`Folders`]), removed if the writing fails.
fn write_record(out: &mut Out, path: PathBuf, parts: Parts) -> Result<(), Failed> {
    let failed = |path: PathBuf, error: String| Failed { path, error };
    let known: usize = parts.iter().map(Content::len).sum();
    if let Some((packs, id)) = out.packs.of(&path).filter(|(_, id)| fits(id, known)) {
        let id = id.to_string();
        // Named by its folder: no file of its name is left, and no line of it in a pack.
        let folder = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let in_pack = |e: std::io::Error| failed(folder.clone(), format!("record {id}: {e}"));
        let mut bytes = Vec::with_capacity(known + 64);
        render(parts, &mut bytes).map_err(in_pack)?;
        if fits(&id, bytes.len()) {
            return packs.append(&mut out.folders, &id, &bytes).map_err(in_pack);
        }
        let written = out.folders.write(&path, &bytes);
        return written.map_err(|e| failed(path, e.to_string()));
    }
    let written = out.folders.write_with(&path, |file| {
        render(
            parts,
            &mut std::io::BufWriter::with_capacity(64 * 1024, file),
        )
    });
    written.map_err(|e| failed(path, e.to_string()))
}

impl Drop for IoWriter {
    fn drop(&mut self) {
        self.shared.lock().closing = true;
        self.shared.work.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_in_order_and_flush_waits() {
        let dir = tempfile::tempdir().unwrap();
        let w = IoWriter::start(dir.path().to_path_buf(), "p".into());
        for i in 0..20 {
            w.write(
                dir.path().join(format!("d/{i}.txt")),
                vec![format!("{i}").into_bytes().into(), "-".into()],
            );
        }
        w.flush();
        for i in 0..20 {
            assert_eq!(
                std::fs::read_to_string(dir.path().join(format!("d/{i}.txt"))).unwrap(),
                format!("{i}-")
            );
        }
        w.write(
            dir.path().join("last.txt"),
            vec![Content::Later(0, Box::new(|| b"x".to_vec()))],
        );
        drop(w);
        assert!(
            dir.path().join("last.txt").is_file(),
            "dropping the writer finishes its queue"
        );
    }

    #[test]
    fn tool_and_model_records_go_in_packs_unless_larger_than_one() {
        let dir = tempfile::tempdir().unwrap();
        let tools = dir.path().join("io/tool_executions");
        let w = IoWriter::start(dir.path().to_path_buf(), "p".into());
        for i in 0..3 {
            let record = format!("{{\"exit_code\":{i},\n\"stdout\":\"x\"}}\n");
            w.write(
                tools.join(format!("c{i}.json")),
                vec![record.as_str().into()],
            );
        }
        let big = format!(
            "{{\"exit_code\":0,\n\"stdout\":\"{}\"}}\n",
            "y".repeat(1 << 20)
        );
        w.write(tools.join("big.json"), vec![big.as_str().into()]);
        // Not a pack's folder: a file of its own.
        w.write(dir.path().join("io/other/c9.json"), vec!["{}".into()]);
        w.write(
            tools.join("c3.json"),
            vec![Content::Later(0, Box::new(|| panic!("a bug")))],
        );
        w.flush();
        assert!(tools.join("big.json").is_file());
        assert!(dir.path().join("io/other/c9.json").is_file());
        let packs = crate::io_packs::Packs::load(&tools);
        let mut ids: Vec<&str> = packs.iter().map(|(id, _)| id).collect();
        ids.sort_unstable();
        assert_eq!(ids, ["c0", "c1", "c2"]);
        assert_eq!(packs.get("c2").unwrap().head["exit_code"], 2);
        let failed = w.failures();
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert_eq!(failed[0].path, tools);
        assert!(failed[0].error.contains("record c3"), "{failed:?}");
    }

    #[test]
    fn a_link_at_a_records_name_is_replaced_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("precious.txt");
        std::fs::write(&outside, "keep me").unwrap();
        std::fs::create_dir_all(dir.path().join("io")).unwrap();
        let record = dir.path().join("io/c1.json");
        std::os::unix::fs::symlink(&outside, &record).unwrap();
        let w = IoWriter::start(dir.path().to_path_buf(), "p".into());
        w.write(record.clone(), vec!["{}".into()]);
        w.write(
            dir.path().join("io/c2.json"),
            vec![Content::Later(0, Box::new(|| panic!("a bug")))],
        );
        w.write(dir.path().join("io/c3.json"), vec!["{}".into()]);
        w.flush();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
        assert!(!record.is_symlink());
        assert_eq!(std::fs::read_to_string(&record).unwrap(), "{}");
        let failed: Vec<PathBuf> = w.failures().into_iter().map(|f| f.path).collect();
        assert_eq!(failed, vec![dir.path().join("io/c2.json")]);
        assert!(
            dir.path().join("io/c3.json").is_file(),
            "the writer goes on after a record that failed to be produced"
        );
    }

    #[test]
    fn a_record_that_cannot_be_written_is_reported_not_left_empty() {
        let dir = tempfile::tempdir().unwrap();
        // A file where a folder should be: the first record's folder cannot be made; and a record
        // named after an existing folder cannot be written.
        std::fs::write(dir.path().join("blocked"), "").unwrap();
        std::fs::create_dir_all(dir.path().join("ok/sub")).unwrap();
        let w = IoWriter::start(dir.path().to_path_buf(), "p".into());
        w.write(dir.path().join("blocked/d/a.txt"), vec!["x".into()]);
        w.write(dir.path().join("ok/sub"), vec!["y".into()]);
        w.write(dir.path().join("ok/b.txt"), vec!["z".into()]);
        w.flush();
        let failed: Vec<PathBuf> = w.failures().into_iter().map(|f| f.path).collect();
        assert_eq!(
            failed,
            vec![
                dir.path().join("blocked/d/a.txt"),
                dir.path().join("ok/sub")
            ]
        );
        assert!(dir.path().join("ok/b.txt").is_file());
        assert!(w.failures().is_empty(), "each failure is told once");
    }
}
