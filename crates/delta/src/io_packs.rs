//! Packs: the records of `io/invocations/` and `io/tool_executions/` kept many to a file.
//!
//! A record used to be a file of its own, two files per tool iteration. Creating a file is what a
//! record costs most: on ext4 without a journal, every file created looks past the inodes deleted in
//! the last minute, so right after other runs' folders were removed a record cost ten times its
//! writing. A process that works on a run now appends its records to a pack of its own,
//! `pack-<uuid>-<n>.jsonl` (a time-ordered id of the process's work on the run, then a number
//! counting its packs), one record per line (`{"id":…,` then the record's fields; its line
//! breaks, whitespace between JSON tokens, become spaces), and beside it `pack-<uuid>-<n>.index`,
//! one line per
//! record: its id, where its line starts, its length and its head (the fields a reader wants
//! without reading the record: an invocation's `metadata`, a tool's `exit_code`, `duration_ms`
//! and `command`). A pack is closed before it passes [`PACK_MAX`] (a store document holds it) and
//! the next one is started; a record that would not fit one is a file of its own, as before.
//!
//! Packs are appended only, by the process holding the run's lock, which starts packs of its own
//! rather than appending to an earlier process's: a pack's name is never used twice, even by a
//! working copy that does not have the earlier packs (the fleet keeps each name once). A record is visible once its index line is whole: a
//! process killed while appending leaves a line or an index line cut short, which readers skip. A
//! record that cannot be written (a full disk) is cut off again and reported, like a record file
//! that is removed. Packs are created without following a link (see [`Folders`]).
//!
//! `jq -cR 'fromjson? | select(.id == "c1")' io/tool_executions/pack-*.jsonl` prints a record (a
//! line cut short is passed over; so is, by delta, a whole line whose index line was cut). Readers
//! go through the packs in the order of their names, which is the order they were written in (the
//! time of the process's start on this host's clock, then the pack's number).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::io_files::Folders;

/// The largest pack, and the largest index: the store's largest `io/` document.
pub const PACK_MAX: u64 = crate::fleet::copy::MAX_IO_DOCUMENT;

/// Tries at most this many pack names taken by something else before giving up.
const NUMBER_TRIES: u32 = 1000;

/// One line of an index.
#[derive(Debug, Serialize, Deserialize)]
struct IndexLine {
    id: String,
    at: u64,
    len: u64,
    head: Value,
}

fn pack_name(stem: &str) -> String {
    format!("pack-{stem}.jsonl")
}

fn index_name(stem: &str) -> String {
    format!("pack-{stem}.index")
}

/// The stem of an index's file name.
fn stem_of_index(name: &str) -> Option<String> {
    let stem = name.strip_prefix("pack-")?.strip_suffix(".index")?;
    Some(stem.to_string())
}

/// The fields on the first line of a record (the record's head, see `records::object_parts`);
/// `None` when it is not such a record.
pub(crate) fn head_of(line: &str) -> Option<Value> {
    let line = line.trim_end();
    let head = match line.strip_suffix(',') {
        Some(open) => serde_json::from_str(&format!("{open}}}")),
        None => serde_json::from_str(line),
    };
    head.ok().filter(Value::is_object)
}

/// `record` (one JSON object) as a pack line: `{"id":…,` and its fields, its line breaks made
/// spaces (in JSON they can only be whitespace between tokens), ending with one line break.
fn pack_line(id: &str, record: &[u8]) -> Vec<u8> {
    let body = record.trim_ascii();
    let fields = body.strip_prefix(b"{").unwrap_or(body);
    let mut line = Vec::with_capacity(body.len() + id.len() + 16);
    line.extend_from_slice(&line_start(id));
    if !fields.trim_ascii_start().starts_with(b"}") {
        line.push(b',');
    }
    line.extend(fields.iter().map(|b| if *b == b'\n' { b' ' } else { *b }));
    line.push(b'\n');
    line
}

/// How the line of record `id` starts: `{"id":` and the id as a JSON string (its closing quote
/// tells it from an id it is the start of).
fn line_start(id: &str) -> Vec<u8> {
    format!("{{\"id\":{}", Value::from(id)).into_bytes()
}

/// Whether a record of `len` bytes goes in a pack rather than a file of its own.
pub(crate) fn fits(id: &str, len: usize) -> bool {
    (len + id.len() + 16) as u64 <= PACK_MAX
}

/// The pack being appended to.
struct Open {
    data: File,
    index: File,
    /// Bytes in `data` (its records are appended at this offset).
    len: u64,
    index_len: u64,
}

/// Appends one process's records of one folder to its packs.
pub(crate) struct PackWriter {
    /// The folder (`io/invocations` or `io/tool_executions` of the run folder).
    pub(crate) dir: PathBuf,
    /// The id of this process's packs (a UUID v7: names in the order of their writing).
    id: String,
    /// Packs started so far.
    started: u32,
    open: Option<Open>,
}

impl PackWriter {
    /// A writer for the records of `dir`, its packs named after `id` (unique, time-ordered); its
    /// first pack is started with its first record.
    pub(crate) fn new(dir: PathBuf, id: String) -> Self {
        Self {
            dir,
            id,
            started: 0,
            open: None,
        }
    }

    /// Appends `record` (one JSON object, at most [`fits`]) as the record `id`. On failure nothing
    /// of it stays.
    pub(crate) fn append(
        &mut self,
        folders: &mut Folders,
        id: &str,
        record: &[u8],
    ) -> io::Result<()> {
        let line = pack_line(id, record);
        let first = record.split(|b| *b == b'\n').next().unwrap_or_default();
        let encode = |entry: &IndexLine| -> io::Result<Vec<u8>> {
            let mut bytes = serde_json::to_vec(entry)?;
            bytes.push(b'\n');
            Ok(bytes)
        };
        let mut entry = IndexLine {
            id: id.to_string(),
            at: self.open.as_ref().map_or(0, |o| o.len),
            len: line.len() as u64,
            head: head_of(&String::from_utf8_lossy(first)).unwrap_or(Value::Null),
        };
        let mut index_line = encode(&entry)?;
        // The pack and its index each stay within one store document.
        if let Some(o) = &self.open
            && (o.len + entry.len > PACK_MAX || o.index_len + index_line.len() as u64 > PACK_MAX)
        {
            self.open = None;
        }
        let open = match &mut self.open {
            Some(open) => open,
            None => {
                let open = self.start(folders)?;
                self.open.insert(open)
            }
        };
        if entry.at != open.len {
            // A new pack: the record starts at its beginning.
            entry.at = open.len;
            index_line = encode(&entry)?;
        }
        let written = open
            .data
            .write_all(&line)
            .and_then(|()| open.index.write_all(&index_line));
        if let Err(e) = written {
            // Cut back to where the record began; should that fail too, the pack is left.
            let cut = open
                .data
                .set_len(open.len)
                .and_then(|()| open.index.set_len(open.index_len));
            if cut.is_err() {
                self.open = None;
            }
            return Err(e);
        }
        open.len += entry.len;
        open.index_len += index_line.len() as u64;
        Ok(())
    }

    /// Starts the next pack: the next number whose two names are free.
    fn start(&mut self, folders: &mut Folders) -> io::Result<Open> {
        for _ in 0..NUMBER_TRIES {
            self.started += 1;
            let stem = format!("{}-{:06}", self.id, self.started);
            let Some(data) = folders.create_appending(&self.dir.join(pack_name(&stem)))? else {
                continue;
            };
            let Some(index) = folders.create_appending(&self.dir.join(index_name(&stem)))? else {
                continue;
            };
            return Ok(Open {
                data,
                index,
                len: 0,
                index_len: 0,
            });
        }
        Err(io::Error::other(format!(
            "no free pack name in {}",
            self.dir.display()
        )))
    }
}

/// `path` opened to be read when it is a regular file of delta's: not through a link, and not
/// waiting on a pipe (a tool may put either in the run folder).
pub(crate) fn plain_file(path: &Path) -> Option<File> {
    store::atomic::open_own(path, File::options().read(true))
        .ok()
        .flatten()
}

/// Whether `name` is that of a pack or of its index (a record's own file may start with `pack-`
/// too: ids are the model's).
pub(crate) fn is_pack_file(name: &str) -> bool {
    name.starts_with("pack-") && (name.ends_with(".jsonl") || name.ends_with(".index"))
}

/// A record found in a pack.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Packed {
    /// Its id.
    pub(crate) id: String,
    /// The pack.
    pub(crate) pack: PathBuf,
    /// Where its line starts, and its length.
    pub(crate) at: u64,
    pub(crate) len: u64,
    /// Its head (see the module documentation).
    pub(crate) head: Value,
}

/// The records of a folder's packs, by id, read from their indexes (a record written twice, by a
/// process that did not know of the first: the later one).
#[derive(Debug, Default)]
pub(crate) struct Packs {
    records: HashMap<String, Packed>,
}

impl Packs {
    /// The packed records of `dir`; none when it has no packs. Index lines cut short, or naming
    /// bytes their pack does not hold, are skipped.
    pub(crate) fn load(dir: &Path) -> Self {
        let mut stems: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| stem_of_index(&e.file_name().to_string_lossy()))
                    .collect()
            })
            .unwrap_or_default();
        stems.sort_unstable();
        let mut records = HashMap::new();
        for stem in stems {
            let pack = dir.join(pack_name(&stem));
            let Some(size) = plain_file(&pack)
                .and_then(|f| f.metadata().ok())
                .map(|m| m.len())
            else {
                continue;
            };
            let Some(index) = plain_file(&dir.join(index_name(&stem))) else {
                continue;
            };
            // An index is never larger than a pack; a larger file is not one delta wrote.
            for line in io::BufReader::new(io::Read::take(index, PACK_MAX)).lines() {
                let Ok(line) = line else { break };
                let Ok(entry) = serde_json::from_str::<IndexLine>(&line) else {
                    continue;
                };
                if entry.at.saturating_add(entry.len) > size {
                    continue;
                }
                let packed = Packed {
                    id: entry.id.clone(),
                    pack: pack.clone(),
                    at: entry.at,
                    len: entry.len,
                    head: entry.head,
                };
                records.insert(entry.id, packed);
            }
        }
        Self { records }
    }

    /// Record `id`.
    pub(crate) fn get(&self, id: &str) -> Option<&Packed> {
        self.records.get(id)
    }

    /// Every record, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &Packed)> {
        self.records.iter().map(|(id, p)| (id.as_str(), p))
    }
}

impl Packed {
    /// The record's line (a JSON object, its id first). A line of another record (an index that
    /// is not its pack's) is an error: a record is never shown for another.
    pub(crate) fn read(&self) -> io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let pack =
            plain_file(&self.pack).ok_or_else(|| io::Error::other("not a pack of delta's"))?;
        let mut bytes = vec![0; usize::try_from(self.len.min(PACK_MAX)).unwrap_or(0)];
        pack.read_exact_at(&mut bytes, self.at)?;
        if !bytes.starts_with(&line_start(&self.id)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "its index puts record {} at byte {}, where another record's line is",
                    self.id, self.at
                ),
            ));
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ID: &str = "0190a000-0000-7000-8000-000000000001";
    const LATER: &str = "0190a000-0000-7000-8000-000000000002";

    /// The pack record `id` of `io` is in.
    fn pack_of(io: &Path, id: &str) -> PathBuf {
        Packs::load(io).get(id).unwrap().pack.clone()
    }

    fn record(head: &Value, rest: &str) -> Vec<u8> {
        let head = serde_json::to_string(head).unwrap();
        format!("{},\n{rest}}}\n", head.strip_suffix('}').unwrap()).into_bytes()
    }

    #[test]
    fn records_are_appended_as_lines_and_found_by_their_index() {
        let dir = tempfile::tempdir().unwrap();
        let io = dir.path().join("io/tool_executions");
        let mut folders = Folders::new(dir.path().to_path_buf());
        let mut writer = PackWriter::new(io.clone(), ID.into());
        let one = record(
            &json!({"exit_code": 0, "duration_ms": 3}),
            "\"stdout\":\"a\\nb\"",
        );
        // A response a server pretty-printed: its line breaks are whitespace.
        let two = record(
            &json!({"exit_code": 1}),
            "\"response\":{\n  \"x\": [1,\n 2]\n}",
        );
        writer.append(&mut folders, "c1", &one).unwrap();
        writer.append(&mut folders, "c2", &two).unwrap();
        let pack = pack_of(&io, "c1");
        assert_eq!(pack_of(&io, "c2"), pack);
        assert_eq!(pack, io.join(format!("pack-{ID}-000001.jsonl")));
        let text = std::fs::read_to_string(&pack).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines,
            [
                json!({"id": "c1", "exit_code": 0, "duration_ms": 3, "stdout": "a\nb"}),
                json!({"id": "c2", "exit_code": 1, "response": {"x": [1, 2]}}),
            ]
        );
        let packs = Packs::load(&io);
        let found = packs.get("c2").unwrap();
        assert_eq!(found.head, json!({"exit_code": 1}));
        let line: Value = serde_json::from_slice(&found.read().unwrap()).unwrap();
        assert_eq!(line["response"]["x"], json!([1, 2]));
        assert_eq!(packs.iter().count(), 2);
        // A later process starts a pack of its own; a record written again is the later one.
        let mut later = PackWriter::new(io.clone(), LATER.into());
        later.append(&mut folders, "c3", &one).unwrap();
        later.append(&mut folders, "c1", &two).unwrap();
        assert_eq!(
            pack_of(&io, "c3"),
            io.join(format!("pack-{LATER}-000001.jsonl"))
        );
        let packs = Packs::load(&io);
        assert_eq!(packs.iter().count(), 3);
        assert_eq!(packs.get("c1").unwrap().head, json!({"exit_code": 1}));
    }

    #[test]
    fn a_pack_is_closed_before_it_passes_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let io = dir.path().join("io/invocations");
        let mut folders = Folders::new(dir.path().to_path_buf());
        let mut writer = PackWriter::new(io.clone(), ID.into());
        let big = record(
            &json!({"metadata": {}}),
            &format!("\"request\":\"{}\"", "x".repeat(400_000)),
        );
        for i in 0..5 {
            writer.append(&mut folders, &format!("r{i}"), &big).unwrap();
        }
        let packs: Vec<PathBuf> = (0..5).map(|i| pack_of(&io, &format!("r{i}"))).collect();
        assert_eq!(packs[0], packs[1]);
        assert_ne!(packs[1], packs[2], "a third would pass the size");
        for pack in &packs {
            assert!(std::fs::metadata(pack).unwrap().len() <= PACK_MAX);
        }
        assert!(fits("r", 1000) && !fits("r", PACK_MAX as usize));
        assert_eq!(Packs::load(&io).iter().count(), 5);
    }

    #[test]
    fn an_index_is_closed_before_it_passes_the_size_too() {
        let dir = tempfile::tempdir().unwrap();
        let io = dir.path().join("io/tool_executions");
        let mut folders = Folders::new(dir.path().to_path_buf());
        let mut writer = PackWriter::new(io.clone(), ID.into());
        // A head as long as the record: its index line is the longer.
        let small = br#"{"exit_code":0,"duration_ms":1,"command":"true"}"#;
        for i in 0..12_000 {
            writer
                .append(&mut folders, &format!("c{i}"), small)
                .unwrap();
        }
        let packs: std::collections::BTreeSet<PathBuf> = Packs::load(&io)
            .iter()
            .map(|(_, p)| p.pack.clone())
            .collect();
        assert!(packs.len() >= 2, "{packs:?}");
        for entry in std::fs::read_dir(&io).unwrap() {
            let path = entry.unwrap().path();
            assert!(
                std::fs::metadata(&path).unwrap().len() <= PACK_MAX,
                "{}",
                path.display()
            );
        }
        assert_eq!(Packs::load(&io).iter().count(), 12_000);
    }

    #[test]
    fn a_pipe_or_a_link_at_an_index_name_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let io = dir.path().join("io/tool_executions");
        std::fs::create_dir_all(&io).unwrap();
        let fifo = io.join("pack-a-000001.index");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        std::fs::write(io.join("pack-a-000001.jsonl"), "").unwrap();
        let elsewhere = dir.path().join("elsewhere.index");
        std::fs::write(
            &elsewhere,
            "{\"id\":\"x\",\"at\":0,\"len\":0,\"head\":null}\n",
        )
        .unwrap();
        std::os::unix::fs::symlink(&elsewhere, io.join("pack-b-000001.index")).unwrap();
        std::fs::write(io.join("pack-b-000001.jsonl"), "").unwrap();
        // Returns (a pipe nobody writes would block a plain open), and finds nothing.
        assert_eq!(Packs::load(&io).iter().count(), 0);
        assert!(is_pack_file("pack-b-000001.index") && !is_pack_file("pack-1.json"));
    }

    #[test]
    fn records_cut_short_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let io = dir.path().join("io/tool_executions");
        let mut folders = Folders::new(dir.path().to_path_buf());
        let mut writer = PackWriter::new(io.clone(), ID.into());
        let one = record(&json!({"exit_code": 0}), "\"stdout\":\"x\"");
        writer.append(&mut folders, "c1", &one).unwrap();
        writer.append(&mut folders, "c2", &one).unwrap();
        drop(writer);
        // As a process killed while appending leaves them: the last line cut, an index line cut.
        let pack = io.join(format!("pack-{ID}-000001.jsonl"));
        let len = std::fs::metadata(&pack).unwrap().len();
        File::options()
            .write(true)
            .open(&pack)
            .unwrap()
            .set_len(len - 5)
            .unwrap();
        let mut index = File::options()
            .append(true)
            .open(io.join(format!("pack-{ID}-000001.index")))
            .unwrap();
        index.write_all(b"{\"id\":\"c3\",\"at\":").unwrap();
        let packs = Packs::load(&io);
        assert!(packs.get("c1").is_some());
        assert!(packs.get("c2").is_none(), "its bytes are not all there");
        assert!(packs.get("c3").is_none());
    }

    #[test]
    fn a_link_at_a_packs_name_is_passed_over_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let io = dir.path().join("io/tool_executions");
        std::fs::create_dir_all(&io).unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "mine").unwrap();
        std::os::unix::fs::symlink(&outside, io.join(format!("pack-{ID}-000001.jsonl"))).unwrap();
        let mut folders = Folders::new(dir.path().to_path_buf());
        let mut writer = PackWriter::new(io.clone(), ID.into());
        let one = record(&json!({"exit_code": 0}), "\"stdout\":\"x\"");
        writer.append(&mut folders, "c1", &one).unwrap();
        assert_eq!(
            pack_of(&io, "c1"),
            io.join(format!("pack-{ID}-000002.jsonl"))
        );
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "mine");
    }

    #[test]
    fn names_and_heads() {
        assert_eq!(
            stem_of_index("pack-a-000001.index"),
            Some("a-000001".into())
        );
        assert_eq!(stem_of_index("pack-a-000001.jsonl"), None);
        assert_eq!(stem_of_index("c1.json"), None);
        assert_eq!(
            head_of("{\"metadata\":{\"a\":1},"),
            Some(json!({"metadata": {"a": 1}}))
        );
        assert_eq!(head_of("{\"a\":1}"), Some(json!({"a": 1})));
        assert_eq!(head_of("not json"), None);
        assert_eq!(pack_line("x", b"{}\n"), b"{\"id\":\"x\"}\n".to_vec());
    }
}
