//! Append-only JSONL journals.
//!
//! Writing: each record is serialized to one line, the newline is appended, and the whole line goes to
//! the file in a single `write` on a file opened in append mode, followed by `fsync` (unless the journal
//! was opened with [`Durability::Buffered`], which exists for benchmarks).
//!
//! Reading: [`read`] returns every complete line. A process killed mid-write (or a power loss) can
//! leave the *last* line incomplete; that line is reported as a [`TornTail`] rather than failing the
//! read, and [`recover`] cuts it off. A line that cannot be parsed anywhere else is corruption and is an
//! error naming the file and the line.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::atomic::{parent_dir, sync_dir};
use crate::error::{StoreError, StoreResult};

/// When appended lines reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `fsync` after every append (the default, and the only safe choice for real runs).
    #[default]
    Fsync,
    /// Leave flushing to the operating system. Only for benchmarks and throwaway data.
    Buffered,
}

/// An open journal, ready for appends.
#[derive(Debug)]
pub struct Journal {
    file: File,
    path: PathBuf,
    durability: Durability,
    poisoned: bool,
    /// Lines written since the last fsync.
    dirty: bool,
}

impl Journal {
    /// Opens (creating if needed) the journal at `path` for appending, with `fsync` after every append.
    ///
    /// Fails with [`StoreError::TornTail`] if the file ends with an incomplete line: call [`recover`]
    /// first, so a new record is never glued onto a torn one.
    pub fn open(path: &Path) -> StoreResult<Self> {
        Self::open_with(path, Durability::Fsync)
    }

    /// Like [`Journal::open`] with an explicit durability mode.
    pub fn open_with(path: &Path, durability: Durability) -> StoreResult<Self> {
        let existed = path.exists();
        let mut file =
            crate::atomic::own_file(OpenOptions::new().read(true).append(true).create(true))
                .open(path)
                .map_err(|e| StoreError::io("open journal", path, e))?;
        if !existed {
            sync_dir(parent_dir(path))?;
        }
        let len = file
            .metadata()
            .map_err(|e| StoreError::io("inspect journal", path, e))?
            .len();
        if let Some((bytes, reason)) =
            torn_end(&mut file, len).map_err(|e| StoreError::io("read journal", path, e))?
        {
            return Err(StoreError::TornTail {
                path: path.to_path_buf(),
                bytes,
                reason,
            });
        }
        Ok(Self {
            file,
            path: path.to_path_buf(),
            durability,
            poisoned: false,
            dirty: false,
        })
    }

    /// The journal's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serializes `record` as one JSON line and appends it.
    pub fn append<T: Serialize + ?Sized>(&mut self, record: &T) -> StoreResult<()> {
        let mut line = serde_json::to_vec(record).map_err(|source| StoreError::Serialize {
            path: self.path.clone(),
            source,
        })?;
        line.push(b'\n');
        self.write_line(&line, true)
    }

    /// Serializes `record` as one JSON line and appends it without flushing it to disk yet.
    ///
    /// The line reaches the operating system at once (a crash of this process loses nothing); it reaches
    /// the disk with the next [`Journal::append`] or [`Journal::sync`]. Use it for a record that is
    /// immediately followed by a flushed one, and call `sync` before any side effect.
    pub fn append_unsynced<T: Serialize + ?Sized>(&mut self, record: &T) -> StoreResult<()> {
        let mut line = serde_json::to_vec(record).map_err(|source| StoreError::Serialize {
            path: self.path.clone(),
            source,
        })?;
        line.push(b'\n');
        self.write_line(&line, false)
    }

    /// Feeds the journal's first `len` bytes (all of them with `None`) to `take`, a block at a
    /// time, read through this open file (not its path, which another process may have replaced);
    /// returns how many bytes there were. Fewer than `len` when the file is shorter.
    pub fn read_prefix(&self, len: Option<u64>, mut take: impl FnMut(&[u8])) -> StoreResult<u64> {
        use std::os::unix::fs::FileExt;
        let io = |e| StoreError::io("read", &self.path, e);
        let size = self.file.metadata().map_err(io)?.len();
        let end = len.map_or(size, |len| len.min(size));
        let mut buffer = vec![0u8; 1 << 20];
        let mut at = 0u64;
        while at < end {
            let want = usize::try_from(end - at).map_or(buffer.len(), |n| n.min(buffer.len()));
            let Some(block) = buffer.get_mut(..want) else {
                break;
            };
            let n = self.file.read_at(block, at).map_err(io)?;
            if n == 0 {
                break;
            }
            take(block.get(..n).unwrap_or_default());
            at += n as u64;
        }
        Ok(at)
    }

    /// Whether lines were appended since the last flush.
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Appends an already-serialized JSON value. `json` must be one line (no newline inside).
    pub fn append_raw(&mut self, json: &str) -> StoreResult<()> {
        self.append_raw_lines(&[json])
    }

    /// Appends an already-serialized JSON value (one line) without flushing it yet, as
    /// [`Journal::append_unsynced`] does.
    pub fn append_raw_unsynced(&mut self, json: &str) -> StoreResult<()> {
        self.write_raw(&[json], false)
    }

    /// Appends already-serialized JSON values, one line each, in one write and one flush: after a
    /// crash the journal holds all of them or (its torn tail cut off) a prefix of them.
    pub fn append_raw_lines(&mut self, lines: &[&str]) -> StoreResult<()> {
        self.write_raw(lines, true)
    }

    fn write_raw(&mut self, lines: &[&str], flush: bool) -> StoreResult<()> {
        if lines.iter().any(|l| l.contains('\n')) {
            return Err(StoreError::io(
                "append to",
                &self.path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "a journal record must be a single line",
                ),
            ));
        }
        let mut buffer = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for line in lines {
            buffer.extend_from_slice(line.as_bytes());
            buffer.push(b'\n');
        }
        self.write_line(&buffer, flush)
    }

    /// Forces appended data to disk (useful after a burst of [`Durability::Buffered`] appends).
    pub fn sync(&mut self) -> StoreResult<()> {
        self.file
            .sync_data()
            .map_err(|e| StoreError::io("flush journal", &self.path, e))?;
        self.dirty = false;
        Ok(())
    }

    fn write_line(&mut self, line: &[u8], flush: bool) -> StoreResult<()> {
        if self.poisoned {
            return Err(StoreError::Poisoned {
                path: self.path.clone(),
            });
        }
        let before = self
            .file
            .metadata()
            .map_err(|e| StoreError::io("inspect journal", &self.path, e))?
            .len();
        // One write call for the whole line: with O_APPEND the kernel places it at the end in one piece.
        let written = self
            .file
            .write_all(line)
            .map_err(|e| StoreError::io("append to", &self.path, e))
            .and_then(|()| {
                self.dirty = true;
                match self.durability {
                    Durability::Fsync if flush => self.sync(),
                    _ => Ok(()),
                }
            });
        if written.is_err() {
            // Take back whatever part of the line reached the file, so the next append does not glue
            // onto it. If even that fails, refuse further appends.
            let rolled_back = self
                .file
                .set_len(before)
                .and_then(|()| self.file.sync_data());
            if rolled_back.is_err() {
                self.poisoned = true;
            }
        }
        written
    }
}

/// Checks the end of a journal: `Some((bytes, reason))` when its last line lacks a newline or is not
/// JSON.
fn torn_end(file: &mut File, len: u64) -> std::io::Result<Option<(u64, String)>> {
    if len == 0 {
        return Ok(None);
    }
    let tail = tail_after_last_newline(file, len)?;
    if tail > 0 {
        return Ok(Some((
            tail,
            format!("the last line is incomplete ({tail} bytes without a newline)"),
        )));
    }
    // The file ends with a newline; the line before it must still be a JSON value.
    let body_len = len - 1;
    let start = body_len - tail_after_last_newline(file, body_len)?;
    let mut last = vec![0u8; (body_len - start) as usize];
    file.seek(SeekFrom::Start(start))?;
    file.read_exact(&mut last)?;
    if last.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    Ok(serde_json::from_slice::<serde::de::IgnoredAny>(&last)
        .err()
        .map(|e| {
            (
                len - start,
                format!("the last line is not valid JSON ({e})"),
            )
        }))
}

/// Number of bytes after the last newline of a file of length `len` (0 when it ends with a newline).
fn tail_after_last_newline(file: &mut File, len: u64) -> std::io::Result<u64> {
    let mut pos = len;
    let mut buf = [0u8; 4096];
    while pos > 0 {
        let chunk = (buf.len() as u64).min(pos);
        pos -= chunk;
        file.seek(SeekFrom::Start(pos))?;
        let slice = &mut buf[..chunk as usize];
        file.read_exact(slice)?;
        if let Some(i) = slice.iter().rposition(|&b| b == b'\n') {
            return Ok(len - (pos + i as u64 + 1));
        }
    }
    Ok(len)
}

/// Why the last line of a journal was not returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TornReason {
    /// The line has no terminating newline: its write did not complete.
    MissingNewline,
    /// The line is terminated but is not a valid record.
    Unparseable(String),
}

/// The incomplete last line of a journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// 1-based line number.
    pub line: usize,
    /// Byte offset where the line starts; [`recover`] truncates the file to this length.
    pub offset: u64,
    /// Length of the torn data in bytes.
    pub len: u64,
    /// Why it was not returned.
    pub reason: TornReason,
    /// The first bytes of the line, for messages.
    pub preview: String,
}

impl std::fmt::Display for TornTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.reason {
            TornReason::MissingNewline => write!(
                f,
                "line {} is incomplete ({} bytes without a newline: {:?})",
                self.line, self.len, self.preview
            ),
            TornReason::Unparseable(why) => {
                write!(
                    f,
                    "line {} cannot be parsed ({why}): {:?}",
                    self.line, self.preview
                )
            }
        }
    }
}

/// What [`read`] found.
#[derive(Debug, Clone)]
pub struct JournalContents<T> {
    /// Every complete record, in order.
    pub records: Vec<T>,
    /// The torn last line, if there is one.
    pub torn_tail: Option<TornTail>,
    /// Length in bytes of the part of the file that holds complete records.
    pub complete_len: u64,
}

/// Reads every complete record of the journal at `path`.
///
/// A missing file is an IO error (`NotFound`); an empty file has no records. Blank lines are skipped.
pub fn read<T: DeserializeOwned + Send>(path: &Path) -> StoreResult<JournalContents<T>> {
    read_with(path, |line| serde_json::from_slice::<T>(line))
}

/// Like [`read`], with the caller parsing each line (`Err` = the line cannot be parsed).
pub fn read_with<T: Send, E: std::fmt::Display>(
    path: &Path,
    parse_line: impl Fn(&[u8]) -> Result<T, E> + Sync,
) -> StoreResult<JournalContents<T>> {
    let bytes = std::fs::read(path).map_err(|e| StoreError::io("read journal", path, e))?;
    parse_with(path, &bytes, parse_line)
}

/// How much of a journal [`read_in_blocks`] holds at a time.
pub const BLOCK: usize = 1 << 20;

/// Reads the journal at `path` a block of whole lines at a time, giving each block's records to
/// `each` in order: what the reader keeps is up to it, the file's bytes are held a block at a
/// time. `each` may stop the reading (`ControlFlow::Break`). Returns `true` when every record was
/// given; `false` when `each` stopped, or where the journal is not clean — a torn last line or a
/// line that does not parse — which [`read_with`] and [`recover_with`] report and repair.
pub fn read_in_blocks<T: Send, E: std::fmt::Display>(
    path: &Path,
    parse_line: impl Fn(&[u8]) -> Result<T, E> + Sync,
    each: impl FnMut(Vec<T>) -> ControlFlow<()>,
) -> StoreResult<bool> {
    read_in_blocks_of(BLOCK, path, parse_line, each)
}

fn read_in_blocks_of<T: Send, E: std::fmt::Display>(
    size: usize,
    path: &Path,
    parse_line: impl Fn(&[u8]) -> Result<T, E> + Sync,
    mut each: impl FnMut(Vec<T>) -> ControlFlow<()>,
) -> StoreResult<bool> {
    let io = |e| StoreError::io("read journal", path, e);
    let mut file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    // Room for a block, or the whole of a smaller journal, filled only as it is read.
    let mut block: Vec<u8> = Vec::with_capacity(size.min(usize::try_from(len).unwrap_or(size)) + 1);
    loop {
        let before = block.len();
        let read = (&mut file)
            .take(size as u64)
            .read_to_end(&mut block)
            .map_err(io)?;
        let end = if read == 0 {
            block.len()
        } else {
            // What was there before holds no line end (it is a line's beginning).
            match block[before..].iter().rposition(|b| *b == b'\n') {
                Some(newline) => before + newline + 1,
                // No line ends in this block yet: read on (a line longer than a block).
                None => continue,
            }
        };
        let contents = match parse_with(path, &block[..end], &parse_line) {
            Ok(contents) if contents.torn_tail.is_none() => contents,
            Ok(_) | Err(StoreError::CorruptLine { .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        if each(contents.records).is_break() {
            return Ok(false);
        }
        if read == 0 {
            return Ok(true);
        }
        block.drain(..end);
    }
}

/// Parses journal bytes; `path` is only used in errors. This is [`read`] without the IO.
pub fn parse<T: DeserializeOwned + Send>(
    path: &Path,
    bytes: &[u8],
) -> StoreResult<JournalContents<T>> {
    parse_with(path, bytes, |line| serde_json::from_slice::<T>(line))
}

/// Journals smaller than this are parsed on the calling thread.
const PARALLEL_THRESHOLD: usize = 512 * 1024;
/// Each extra parsing thread gets at least this much of the journal.
const MIN_CHUNK: usize = 256 * 1024;
/// At most this many parsing threads.
const MAX_THREADS: usize = 8;

/// Like [`parse`], with the caller parsing each line.
///
/// Large journals are cut at line boundaries and the pieces parsed on several threads; the result
/// (records, torn tail, errors and their line numbers) is the same as a single pass.
pub fn parse_with<T: Send, E: std::fmt::Display>(
    path: &Path,
    bytes: &[u8],
    parse_line: impl Fn(&[u8]) -> Result<T, E> + Sync,
) -> StoreResult<JournalContents<T>> {
    parse_pieces(path, bytes, &split_at_lines(bytes), parse_line)
}

/// Parses `bytes` cut into `chunks` (consecutive, each but the last ending after a newline).
fn parse_pieces<T: Send, E: std::fmt::Display>(
    path: &Path,
    bytes: &[u8],
    chunks: &[(usize, usize)],
    parse_line: impl Fn(&[u8]) -> Result<T, E> + Sync,
) -> StoreResult<JournalContents<T>> {
    let outcomes: Vec<Chunk<T>> = if chunks.len() == 1 {
        vec![parse_chunk(bytes, 0, &parse_line)]
    } else {
        std::thread::scope(|scope| {
            let parse_line = &parse_line;
            let (first, rest) = chunks.split_first().unwrap_or((&(0, 0), &[]));
            let handles: Vec<_> = rest
                .iter()
                .map(|&(start, end)| {
                    scope.spawn(move || parse_chunk(&bytes[start..end], start, parse_line))
                })
                .collect();
            let mut outcomes = vec![parse_chunk(&bytes[first.0..first.1], first.0, parse_line)];
            for handle in handles {
                outcomes.push(
                    handle
                        .join()
                        .unwrap_or_else(|p| std::panic::resume_unwind(p)),
                );
            }
            outcomes
        })
    };
    let mut records = Vec::with_capacity(outcomes.iter().map(|c| c.records.len()).sum());
    let mut lines_before = 0usize;
    for (i, chunk) in outcomes.into_iter().enumerate() {
        let Chunk {
            records: chunk_records,
            lines,
            bad,
            bad_is_last,
            missing_newline,
        } = chunk;
        if let Some(bad) = bad {
            let line = lines_before + bad.line;
            // A line that does not parse is a torn write only when nothing follows it.
            let rest = &bytes[chunks[i].1..];
            let only_blank_lines_follow = bad_is_last
                && (rest.is_empty()
                    || (rest.iter().all(u8::is_ascii_whitespace) && rest.ends_with(b"\n")));
            if !only_blank_lines_follow {
                return Err(StoreError::CorruptLine {
                    path: path.to_path_buf(),
                    line,
                    reason: bad.reason,
                });
            }
            records.extend(chunk_records);
            return Ok(JournalContents {
                records,
                torn_tail: Some(TornTail {
                    line,
                    offset: bad.start as u64,
                    len: bad.len as u64 + u64::from(!missing_newline),
                    preview: preview(&bytes[bad.start..bad.start + bad.len]),
                    reason: if missing_newline {
                        TornReason::MissingNewline
                    } else {
                        TornReason::Unparseable(bad.reason)
                    },
                }),
                complete_len: bad.start as u64,
            });
        }
        records.extend(chunk_records);
        lines_before += lines;
    }
    Ok(JournalContents {
        records,
        torn_tail: None,
        complete_len: bytes.len() as u64,
    })
}

/// Cuts `bytes` into `(start, end)` pieces that each end after a newline (except possibly the last).
fn split_at_lines(bytes: &[u8]) -> Vec<(usize, usize)> {
    if bytes.len() < PARALLEL_THRESHOLD {
        return vec![(0, bytes.len())];
    }
    let threads = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1)
        .min(MAX_THREADS)
        .min(bytes.len() / MIN_CHUNK)
        .max(1);
    let target = bytes.len() / threads;
    let mut pieces = Vec::with_capacity(threads);
    let mut start = 0;
    while start < bytes.len() {
        let want = (start + target).min(bytes.len());
        let end = if pieces.len() + 1 == threads || want >= bytes.len() {
            bytes.len()
        } else {
            match bytes[want..].iter().position(|&b| b == b'\n') {
                Some(i) => want + i + 1,
                None => bytes.len(),
            }
        };
        pieces.push((start, end));
        start = end;
    }
    if pieces.is_empty() {
        pieces.push((0, 0));
    }
    pieces
}

struct BadLine {
    /// 1-based, within the chunk.
    line: usize,
    /// Absolute offset of the line in the journal.
    start: usize,
    len: usize,
    reason: String,
}

struct Chunk<T> {
    records: Vec<T>,
    /// Lines seen (when there is no bad line).
    lines: usize,
    /// The first line that did not parse (or had no newline); parsing stopped there.
    bad: Option<BadLine>,
    /// Whether nothing but blank lines follows `bad` in this chunk.
    bad_is_last: bool,
    /// `bad` is a last line without its newline.
    missing_newline: bool,
}

fn parse_chunk<T, E: std::fmt::Display>(
    bytes: &[u8],
    base: usize,
    parse_line: &impl Fn(&[u8]) -> Result<T, E>,
) -> Chunk<T> {
    let mut records = Vec::new();
    let mut offset = 0usize;
    let mut line_no = 0usize;
    let mut bad: Option<BadLine> = None;
    while offset < bytes.len() {
        line_no += 1;
        let (line, next, has_newline) = match bytes[offset..].iter().position(|&b| b == b'\n') {
            Some(rel) => (&bytes[offset..offset + rel], offset + rel + 1, true),
            None => (&bytes[offset..], bytes.len(), false),
        };
        let start = offset;
        offset = next;
        if has_newline && line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if let Some(earlier) = bad {
            // Something follows the bad line: it was not the last one.
            return Chunk {
                records,
                lines: line_no,
                bad: Some(earlier),
                bad_is_last: false,
                missing_newline: false,
            };
        }
        if !has_newline {
            return Chunk {
                records,
                lines: line_no,
                bad: Some(BadLine {
                    line: line_no,
                    start: base + start,
                    len: line.len(),
                    reason: "no newline at the end".into(),
                }),
                bad_is_last: true,
                missing_newline: true,
            };
        }
        match parse_line(line) {
            Ok(record) => records.push(record),
            Err(reason) => {
                bad = Some(BadLine {
                    line: line_no,
                    start: base + start,
                    len: line.len(),
                    reason: reason.to_string(),
                })
            }
        }
    }
    Chunk {
        records,
        lines: line_no,
        bad_is_last: bad.is_some(),
        bad,
        missing_newline: false,
    }
}

fn preview(bytes: &[u8]) -> String {
    const MAX: usize = 80;
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX)]).into_owned();
    if bytes.len() > MAX {
        format!("{text}…")
    } else {
        text
    }
}

/// Cuts a torn last line off the journal at `path` (if there is one) and returns what was removed.
///
/// Records of type `T` decide what "parseable" means, exactly as in [`read`]. A corrupt line before the
/// last one is an error and nothing is changed.
pub fn recover<T: DeserializeOwned + Send>(path: &Path) -> StoreResult<Option<TornTail>> {
    recover_with(path, |line| serde_json::from_slice::<T>(line).map(|_| ()))
}

/// Like [`recover`], with the caller deciding what parses.
pub fn recover_with<T: Send, E: std::fmt::Display>(
    path: &Path,
    parse_line: impl Fn(&[u8]) -> Result<T, E> + Sync,
) -> StoreResult<Option<TornTail>> {
    let contents = read_with(path, parse_line)?;
    let Some(torn) = contents.torn_tail else {
        return Ok(None);
    };
    let file = crate::atomic::own_file(OpenOptions::new().write(true))
        .open(path)
        .map_err(|e| StoreError::io("open journal", path, e))?;
    file.set_len(contents.complete_len)
        .map_err(|e| StoreError::io("truncate journal", path, e))?;
    file.sync_all()
        .map_err(|e| StoreError::io("flush journal", path, e))?;
    Ok(Some(torn))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[cfg(unix)]
    #[test]
    fn a_journal_that_is_a_link_is_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("precious.txt");
        std::fs::write(&outside, "keep me").unwrap();
        let path = dir.path().join("journal.jsonl");
        std::os::unix::fs::symlink(&outside, &path).unwrap();
        assert!(Journal::open(&path).is_err());
        // Its target ends without a line end: a torn tail the recovery would cut off.
        assert!(recover::<Value>(&path).is_err());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
    }

    #[test]
    fn a_journal_read_in_blocks_gives_every_record_in_order_or_says_it_is_not_clean() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let mut text = String::new();
        for n in 0..200 {
            // Some lines longer than a block.
            let pad = "x".repeat(if n % 17 == 0 { 150 } else { n % 7 });
            text.push_str(&format!("{{\"n\":{n},\"pad\":\"{pad}\"}}\n"));
            if n % 50 == 0 {
                text.push('\n');
            }
        }
        std::fs::write(&path, &text).unwrap();
        let whole: Vec<Value> = read(&path).unwrap().records;
        assert_eq!(whole.len(), 200);
        for size in [1, 13, 64, 4096] {
            let mut blocks = Vec::new();
            let mut seen = Vec::new();
            let clean = read_in_blocks_of(
                size,
                &path,
                |l| serde_json::from_slice::<Value>(l),
                |records| {
                    blocks.push(records.len());
                    seen.extend(records);
                    ControlFlow::Continue(())
                },
            )
            .unwrap();
            assert!(clean);
            assert_eq!(seen, whole, "block of {size}");
            assert!(size == 4096 || blocks.len() > 10, "{size}: {blocks:?}");
        }
        // A torn last line, a bad line in the middle: not clean.
        for damaged in [
            format!("{text}{{\"n\":"),
            text.replacen("{\"n\":7,", "{\"n\"7,", 1),
        ] {
            std::fs::write(&path, &damaged).unwrap();
            let clean = read_in_blocks_of(
                64,
                &path,
                |l| serde_json::from_slice::<Value>(l),
                |_| ControlFlow::Continue(()),
            )
            .unwrap();
            assert!(!clean);
        }
        // Stopped by the reader: not whole, and nothing after the block that stopped it.
        std::fs::write(&path, &text).unwrap();
        let mut given = 0;
        let whole = read_in_blocks_of(
            64,
            &path,
            |l| serde_json::from_slice::<Value>(l),
            |records| {
                given += records.len();
                ControlFlow::Break(())
            },
        )
        .unwrap();
        assert!(!whole);
        assert!(given > 0 && given < 200, "{given}");
    }

    fn parse_values(bytes: &[u8]) -> StoreResult<JournalContents<Value>> {
        parse(Path::new("j.jsonl"), bytes)
    }

    /// Every way of cutting `bytes` into two or three pieces at line boundaries parses exactly like
    /// one piece.
    fn assert_pieces_agree(bytes: &[u8]) {
        let parse_line = |line: &[u8]| serde_json::from_slice::<Value>(line);
        let path = Path::new("j.jsonl");
        let whole = format!(
            "{:?}",
            parse_pieces(path, bytes, &[(0, bytes.len())], parse_line)
        );
        let cuts: Vec<usize> = (1..bytes.len())
            .filter(|&i| bytes[i - 1] == b'\n')
            .collect();
        for (n, &a) in cuts.iter().enumerate() {
            let two = [(0, a), (a, bytes.len())];
            let got = format!("{:?}", parse_pieces(path, bytes, &two, parse_line));
            assert_eq!(
                got,
                whole,
                "cut at {a} of {:?}",
                String::from_utf8_lossy(bytes)
            );
            for &b in &cuts[n + 1..] {
                let three = [(0, a), (a, b), (b, bytes.len())];
                let got = format!("{:?}", parse_pieces(path, bytes, &three, parse_line));
                assert_eq!(
                    got,
                    whole,
                    "cuts at {a},{b} of {:?}",
                    String::from_utf8_lossy(bytes)
                );
            }
        }
    }

    #[test]
    fn parsing_in_pieces_gives_the_same_answer_as_one_pass() {
        for input in [
            &b"{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n"[..],
            b"{\"a\":1}\n\n{\"a\":2}\n  \n{\"a\":3}",
            b"{\"a\":1}\n{\"a\":2}\n{\"a\n",
            b"{\"a\":1}\n{oops\n{\"a\":3}\n",
            b"{\"a\":1}\n{oops\n\n\n",
            b"{\"a\":1}\n{oops\n\n  ",
            b"{\"a\":1}\n{oops\n\n{\"a\":2}",
            b"\n\n{\"a\":1}\n\n",
            b"{\"a\":1}\n\n   ",
        ] {
            assert_pieces_agree(input);
        }
    }

    #[test]
    fn large_journals_are_split_on_line_boundaries() {
        let line = format!("{{\"pad\":\"{}\"}}\n", "x".repeat(1000));
        let bytes = line.repeat(2000).into_bytes();
        let pieces = split_at_lines(&bytes);
        assert_eq!(pieces.first().map(|p| p.0), Some(0));
        assert_eq!(pieces.last().map(|p| p.1), Some(bytes.len()));
        for w in pieces.windows(2) {
            assert_eq!(w[0].1, w[1].0);
            assert_eq!(bytes[w[0].1 - 1], b'\n');
        }
        let c = parse_values(&bytes).unwrap();
        assert_eq!(c.records.len(), 2000);
        assert_eq!(c.complete_len, bytes.len() as u64);
        // A corrupt line deep inside is reported with its own line number.
        let mut broken = bytes.clone();
        let at = line.len() * 1500;
        broken[at] = b'#';
        match parse_values(&broken) {
            Err(StoreError::CorruptLine { line, .. }) => assert_eq!(line, 1501),
            other => panic!("{:?}", other.map(|c| c.records.len())),
        }
    }

    #[test]
    fn complete_lines_are_returned_in_order() {
        let c = parse_values(b"{\"a\":1}\n{\"a\":2}\n").unwrap();
        assert_eq!(c.records, vec![json!({"a":1}), json!({"a":2})]);
        assert!(c.torn_tail.is_none());
        assert_eq!(c.complete_len, 16);
    }

    #[test]
    fn a_line_without_newline_is_torn_even_if_it_parses() {
        let c = parse_values(b"{\"a\":1}\n{\"a\":2}").unwrap();
        assert_eq!(c.records, vec![json!({"a":1})]);
        let torn = c.torn_tail.unwrap();
        assert_eq!((torn.line, torn.offset, torn.len), (2, 8, 7));
        assert_eq!(torn.reason, TornReason::MissingNewline);
        assert_eq!(c.complete_len, 8);
    }

    #[test]
    fn an_unparseable_last_line_is_torn() {
        let c = parse_values(b"{\"a\":1}\n{\"a\":\n").unwrap();
        assert_eq!(c.records.len(), 1);
        let torn = c.torn_tail.unwrap();
        assert_eq!(torn.line, 2);
        assert!(matches!(torn.reason, TornReason::Unparseable(_)));
        assert!(
            torn.to_string().contains("line 2 cannot be parsed"),
            "{torn}"
        );
    }

    #[test]
    fn a_bad_line_in_the_middle_is_an_error_naming_file_and_line() {
        let err = parse_values(b"{\"a\":1}\ngarbage\n{\"a\":3}\n").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("j.jsonl:2: corrupt journal line"),
            "{text}"
        );
        let err = parse_values(b"garbage\n{\"a\":").unwrap_err();
        assert!(err.to_string().starts_with("j.jsonl:1:"), "{err}");
    }

    #[test]
    fn blank_lines_are_skipped() {
        let c = parse_values(b"{\"a\":1}\n\n  \n{\"a\":2}\n").unwrap();
        assert_eq!(c.records.len(), 2);
        assert!(c.torn_tail.is_none());
    }

    #[test]
    fn typed_records_that_do_not_match_are_unparseable() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Rec {
            seq: u64,
        }
        let c = parse::<Rec>(Path::new("j"), b"{\"seq\":1}\n{\"other\":2}\n").unwrap();
        assert_eq!(c.records.len(), 1);
        assert!(c.torn_tail.is_some());
    }

    #[test]
    fn append_then_read_round_trips_and_open_refuses_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let mut j = Journal::open(&path).unwrap();
        j.append(&json!({"seq": 1, "text": "line\nbreak"})).unwrap();
        j.append_raw(r#"{"seq":2}"#).unwrap();
        assert!(j.append_raw("{\"a\":\n1}").is_err());
        drop(j);
        let c = read::<Value>(&path).unwrap();
        assert_eq!(
            c.records,
            vec![json!({"seq": 1, "text": "line\nbreak"}), json!({"seq": 2})]
        );

        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"seq\":3,\"te").unwrap();
        drop(f);
        let err = Journal::open(&path).unwrap_err();
        assert!(
            matches!(err, StoreError::TornTail { bytes: 12, .. }),
            "{err}"
        );

        let torn = recover::<Value>(&path).unwrap().unwrap();
        assert_eq!(torn.line, 3);
        assert!(recover::<Value>(&path).unwrap().is_none());
        let mut j = Journal::open(&path).unwrap();
        j.append(&json!({"seq": 3})).unwrap();
        let c = read::<Value>(&path).unwrap();
        assert_eq!(c.records.len(), 3);
        assert!(c.torn_tail.is_none());
    }

    #[test]
    fn open_refuses_an_unparseable_last_line_that_ends_with_a_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        std::fs::write(&path, "{\"a\":1}\n{\"a\":\n").unwrap();
        let err = Journal::open(&path).unwrap_err();
        assert!(
            err.to_string().contains("the last line is not valid JSON"),
            "{err}"
        );
        recover::<Value>(&path).unwrap();
        Journal::open(&path)
            .unwrap()
            .append(&json!({"a": 2}))
            .unwrap();
        assert_eq!(read::<Value>(&path).unwrap().records.len(), 2);
        // A single valid line, and trailing blank lines, are fine.
        std::fs::write(&path, "{\"a\":1}\n\n").unwrap();
        Journal::open(&path).unwrap();
        std::fs::write(&path, "{\"a\":1}\n").unwrap();
        Journal::open(&path).unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_failed_append_that_cannot_be_rolled_back_poisons_the_journal() {
        // /dev/full accepts opens, every write fails with ENOSPC, and it cannot be truncated.
        let mut j = Journal {
            file: OpenOptions::new().append(true).open("/dev/full").unwrap(),
            path: PathBuf::from("/dev/full"),
            durability: Durability::Buffered,
            poisoned: false,
            dirty: false,
        };
        let err = j.append(&json!({"a": 1})).unwrap_err();
        assert!(
            err.to_string().contains("cannot append to /dev/full"),
            "{err}"
        );
        let err = j.append(&json!({"a": 2})).unwrap_err();
        assert!(matches!(err, StoreError::Poisoned { .. }), "{err}");
        assert!(err.to_string().contains("reopen the journal"), "{err}");
    }

    #[test]
    fn unsynced_appends_are_visible_at_once_and_marked_dirty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let mut j = Journal::open(&path).unwrap();
        j.append_unsynced(&json!({"a": 1})).unwrap();
        assert!(j.is_dirty());
        assert_eq!(
            read::<Value>(&path).unwrap().records.len(),
            1,
            "readers see it before any fsync"
        );
        j.append(&json!({"a": 2})).unwrap();
        assert!(
            !j.is_dirty(),
            "a flushed append flushes the earlier line too"
        );
        j.append_unsynced(&json!({"a": 3})).unwrap();
        j.sync().unwrap();
        assert!(!j.is_dirty());
    }

    #[test]
    fn tail_scan_handles_long_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let long = "x".repeat(10_000);
        std::fs::write(&path, format!("{{\"a\":\"{long}\"}}\n{{\"b\":\"{long}")).unwrap();
        let err = Journal::open(&path).unwrap_err();
        assert!(
            matches!(err, StoreError::TornTail { bytes, .. } if bytes == 10_006),
            "{err}"
        );
    }

    #[test]
    fn missing_journal_is_an_error_naming_the_path() {
        let err = read::<Value>(Path::new("/nonexistent/dir/journal.jsonl")).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/dir/journal.jsonl"),
            "{err}"
        );
    }
}
