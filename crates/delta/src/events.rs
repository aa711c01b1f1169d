//! Journal events: the single source of truth of a run.
//!
//! Each line of `journal.jsonl` is `{"seq", "timestamp", "type", "payload"}`. `seq` starts at 1 and
//! continues across processes; `timestamp` is UTC with milliseconds. Lines of unknown types are kept
//! when reading (and ignored by the engine).

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use store::{Clock, Journal, StoreError, TornTail, journal};

/// A journal line as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// Sequence number, from 1.
    pub seq: u64,
    /// When it was written (`2025-10-13T11:00:24.476Z`).
    pub timestamp: String,
    /// Event type (`THOUGHT`, …).
    #[serde(rename = "type")]
    pub kind: String,
    /// Type-specific content.
    pub payload: Value,
}

impl Envelope {
    /// The typed event, or `None` for an unknown type or a malformed payload.
    pub fn event(&self) -> Option<Event> {
        serde_json::from_value(serde_json::json!({"type": self.kind, "payload": self.payload})).ok()
    }
}

/// A tool call as journaled (the OpenAI shape, arguments as a JSON string).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// Call id.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Name and arguments.
    pub function: FunctionRecord,
}

/// Name and arguments of a journaled tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionRecord {
    /// Tool name.
    pub name: String,
    /// Arguments, as the JSON text the model produced.
    pub arguments: String,
}

/// Outcome of an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ActionStatus {
    /// Exit code 0 (or an answered question).
    Success,
    /// Non-zero exit, timeout, interruption.
    Failed,
    /// The call could not be run (unknown tool, bad arguments, spawn failure).
    Error,
}

/// Severity of a system message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Level {
    /// Information.
    Info,
    /// Something to look at.
    Warn,
    /// A failure.
    Error,
}

/// Status in a `RUN_END` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EndStatus {
    /// Finished.
    Completed,
    /// Failed.
    Failed,
}

impl From<EndStatus> for crate::metadata::RunStatus {
    fn from(status: EndStatus) -> Self {
        match status {
            EndStatus::Completed => Self::Completed,
            EndStatus::Failed => Self::Failed,
        }
    }
}

/// Hook outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum HookStatus {
    /// Exit 0.
    Success,
    /// Non-zero exit, timeout or spawn failure.
    Failed,
}

/// The journal's event types and their payloads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "payload", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Event {
    /// The run began.
    RunStart {
        /// Run id.
        run_id: String,
        /// The first message.
        task: String,
        /// Absolute agent folder.
        agent_ref: String,
    },
    /// A message from the user.
    UserMessage {
        /// The text.
        content: String,
    },
    /// An answer from the model.
    Thought {
        /// Its text (`""` if none).
        content: String,
        /// The id of its record in `io/invocations/`.
        llm_invocation_ref: String,
        /// Tool calls, when there are any.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "exact_calls"
        )]
        tool_calls: Option<Vec<ToolCallRecord>>,
        /// The tokens this answer cost, so that the run's totals can be rebuilt from the journal after
        /// a crash (absent in journals written before it was recorded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<llm::Usage>,
    },
    /// A tool is about to run.
    ActionRequest {
        /// The call id.
        action_id: String,
        /// Tool name.
        tool_name: String,
        /// Parsed arguments.
        #[serde(deserialize_with = "exact_value")]
        tool_args: Value,
        /// The argument vector joined with spaces.
        resolved_command: String,
    },
    /// A tool's result.
    ActionResult {
        /// The call id.
        action_id: String,
        /// Outcome.
        status: ActionStatus,
        /// What the model sees.
        observation_content: String,
        /// The id of its record in `io/tool_executions/` (`""` when nothing ran).
        execution_ref: String,
    },
    /// A note from the engine.
    SystemMessage {
        /// Severity.
        level: Level,
        /// Text.
        content: String,
    },
    /// A hook ran.
    HookExecutionAudit {
        /// Hook name.
        hook_name: String,
        /// Outcome.
        status: HookStatus,
        /// `io/hooks/NNN_name/`.
        io_path_ref: String,
    },
    /// The oldest part of the conversation was replaced to fit the model's context window: from
    /// now on the model sees the task, the summary and what came after the replaced iterations.
    Compaction {
        /// `summarize` (the model wrote the summary) or `truncate` (a note, no model call).
        strategy: String,
        /// How many of the run's model answers, counted from its start, the summary replaces (with
        /// their results and the messages between them).
        iterations: u64,
        /// The first journal line replaced.
        from_seq: u64,
        /// The last journal line replaced.
        to_seq: u64,
        /// What stands in their place.
        summary: String,
        /// Estimated tokens of the request before.
        tokens_before: u64,
        /// Estimated tokens of the request after.
        tokens_after: u64,
        /// The context window in force, in tokens (configured, or learned from a refusal).
        window: u64,
        /// The id of the summarizing call's record in `io/invocations/` (`summarize` only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        llm_invocation_ref: Option<String>,
    },
    /// The run stopped (completed or failed).
    RunEnd {
        /// How.
        status: EndStatus,
    },
}

// A run that keeps its events (a journal read from its end, a recipe that keeps the last iterations,
// a compacted run) can hold many thousands of them, and the rest keep the conversation built from
// them: lists and maps read from a journal are kept at their exact size (a list grown by pushes keeps
// room for four, a map for three).

fn exact_calls<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<ToolCallRecord>>, D::Error> {
    let mut calls = Option::<Vec<ToolCallRecord>>::deserialize(d)?;
    if let Some(calls) = &mut calls {
        calls.shrink_to_fit();
    }
    Ok(calls)
}

fn exact_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    Value::deserialize(d).map(exact)
}

/// `value` with its top-level object or array at exact capacity.
pub(crate) fn exact(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut exact = serde_json::Map::with_capacity(map.len());
            exact.extend(map);
            Value::Object(exact)
        }
        Value::Array(mut items) => {
            items.shrink_to_fit();
            Value::Array(items)
        }
        other => other,
    }
}

/// Formats an instant as journal timestamps do: UTC, milliseconds, `Z`.
pub fn timestamp(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Where a run lives when its files are a working copy: a shared store (PostgreSQL) whose journal is
/// the run's record. Every journal line goes there *before* the local file, under the run's lease, so
/// a writer that lost its lease is refused ([`StoreError::Fenced`]) before anything acts on the
/// line; documents (`metadata.json`) follow the local writes.
pub trait Upstream: Send + Sync + std::fmt::Debug {
    /// The store and the run, for people: written to the working copy's [`UPSTREAM_MARKER`].
    fn describe(&self) -> String;
    /// Appends complete journal lines in one durable step; `first` is the `seq` of the first.
    fn append(&self, first: u64, lines: &[&str]) -> Result<(), StoreError>;
    /// Replaces the document `key` (`metadata.json`).
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError>;
}

/// The file in a working copy's run folder that says the run's record is in a store: a local
/// `delta continue` refuses such a run (it would go on beside the store's record).
pub const UPSTREAM_MARKER: &str = "upstream.txt";

/// A run's journal, open for appending.
pub struct RunJournal {
    journal: Journal,
    next_seq: u64,
    clock: Clock,
    upstream: Option<std::sync::Arc<dyn Upstream>>,
    /// Lines written locally without a flush, not yet sent upstream (with the `seq` of the first).
    unsent: Option<(u64, Vec<String>)>,
    /// The file's bytes hashed as they are written, from [`RunJournal::track`] on (the run's seal).
    tracked: Option<Tracked>,
}

/// A running SHA-256 of a journal: what it held when tracking began, then every line appended.
#[derive(Clone)]
struct Tracked {
    hasher: sha2::Sha256,
    bytes: u64,
}

impl std::fmt::Debug for RunJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunJournal")
            .field("journal", &self.journal)
            .field("next_seq", &self.next_seq)
            .field("upstream", &self.upstream.is_some())
            .finish_non_exhaustive()
    }
}

/// What opening a journal found.
#[derive(Debug)]
pub struct Opened {
    /// The journal.
    pub journal: RunJournal,
    /// Every event of a known type so far, in order.
    pub events: Vec<Event>,
    /// The `seq` of each of `events`.
    pub seqs: Vec<u64>,
    /// Model answers journaled before `events` (a journal read from its tail; 0 when read whole).
    pub thoughts_before: u64,
    /// A torn last line that was cut off (crash during a write).
    pub recovered: Option<TornTail>,
}

/// One parsed journal line: its sequence number and, for a known type, the event.
struct Line {
    seq: u64,
    event: Option<Event>,
}

/// The `seq` of a line: read straight off our own `{"seq":N,` prefix, else parsed.
fn line_seq(line: &[u8]) -> Option<u64> {
    if let Some(rest) = line.strip_prefix(b"{\"seq\":") {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits > 0
            && let Ok(n) = std::str::from_utf8(&rest[..digits]).unwrap_or("").parse()
        {
            return Some(n);
        }
    }
    #[derive(serde::Deserialize)]
    struct Seq {
        seq: u64,
    }
    serde_json::from_slice::<Seq>(line).ok().map(|e| e.seq)
}

/// A journal line's `seq` and, for a type this version knows, its event.
pub(crate) fn parse_journal_line(line: &[u8]) -> Result<(u64, Option<Event>), serde_json::Error> {
    parse_line(line).map(|l| (l.seq, l.event))
}

/// Parses a line straight into its typed event (no intermediate JSON tree); lines of types this
/// version does not know are kept as valid but uninterpreted.
fn parse_line(line: &[u8]) -> Result<Line, serde_json::Error> {
    match serde_json::from_slice::<Event>(line) {
        Ok(event) => Ok(Line {
            seq: line_seq(line).unwrap_or(0),
            event: Some(event),
        }),
        Err(typed_error) => {
            /// Any JSON object with a `type`: a line this version does not interpret.
            #[derive(serde::Deserialize)]
            struct Other {
                #[serde(default)]
                seq: u64,
                #[serde(rename = "type")]
                _kind: String,
            }
            match serde_json::from_slice::<Other>(line) {
                Ok(other) => Ok(Line {
                    seq: other.seq,
                    event: None,
                }),
                Err(_) => Err(typed_error),
            }
        }
    }
}

impl RunJournal {
    /// The journal at `path` open for appending, its next line numbered `next_seq`.
    fn at(path: &Path, next_seq: u64, clock: Clock) -> Result<Self, StoreError> {
        Ok(Self {
            journal: Journal::open(path)?,
            next_seq,
            clock,
            upstream: None,
            unsent: None,
            tracked: None,
        })
    }

    /// Hashes the journal as it is now (through this open file) and every line appended from now
    /// on, for [`RunJournal::digest`]. Returns the length and SHA-256 (hex) of its first
    /// `checkpoint` bytes, where it is that long, for checking a seal.
    pub fn track(&mut self, checkpoint: u64) -> Result<Option<(u64, String)>, StoreError> {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        let mut at = 0u64;
        let mut at_checkpoint = (checkpoint == 0).then(|| (0, hex(hasher.clone())));
        let bytes = self.journal.read_prefix(None, |block| {
            let len = block.len() as u64;
            if at_checkpoint.is_none() && at + len >= checkpoint {
                let (head, tail) = block.split_at(usize::try_from(checkpoint - at).unwrap_or(0));
                hasher.update(head);
                at_checkpoint = Some((checkpoint, hex(hasher.clone())));
                hasher.update(tail);
            } else {
                hasher.update(block);
            }
            at += len;
        })?;
        self.tracked = Some(Tracked { hasher, bytes });
        Ok(at_checkpoint)
    }

    /// The length and SHA-256 (hex) of everything this journal holds, when it is tracked: what it
    /// held when [`RunJournal::track`] was called, and what was appended since.
    pub fn digest(&self) -> Option<(u64, String)> {
        self.tracked
            .as_ref()
            .map(|t| (t.bytes, hex(t.hasher.clone())))
    }

    /// Opens (creating) the journal at `path`, cutting off a torn last line if a crash left one.
    pub fn open(path: &Path, clock: Clock) -> Result<Opened, StoreError> {
        let (lines, recovered) = if path.exists() {
            let contents = journal::read_with(path, parse_line)?;
            let recovered = match contents.torn_tail {
                Some(_) => journal::recover_with(path, parse_line)?,
                None => None,
            };
            (contents.records, recovered)
        } else {
            (Vec::new(), None)
        };
        let next_seq = lines.iter().map(|l| l.seq).max().unwrap_or(0) + 1;
        Ok(Opened {
            journal: RunJournal::at(path, next_seq, clock)?,
            seqs: lines
                .iter()
                .filter(|l| l.event.is_some())
                .map(|l| l.seq)
                .collect(),
            events: lines.into_iter().filter_map(|l| l.event).collect(),
            thoughts_before: 0,
            recovered,
        })
    }

    /// Opens the journal at `path` giving each event (with its `seq`) to `each` as it is read, a
    /// block of the file at a time: what is kept is up to the caller, who may stop the reading
    /// (`ControlFlow::Break`). `None` (after some events, perhaps) where it was stopped, or the
    /// journal is missing or not clean (a torn last line, a damaged line): the caller opens it with
    /// [`RunJournal::open`] instead, which repairs or reports it.
    pub fn open_streamed(
        path: &Path,
        clock: Clock,
        mut each: impl FnMut(u64, Event) -> std::ops::ControlFlow<()>,
    ) -> Result<Option<RunJournal>, StoreError> {
        if !path.exists() {
            return Ok(None);
        }
        let mut last_seq = 0;
        let clean = journal::read_in_blocks(path, parse_line, |lines| {
            for line in lines {
                last_seq = last_seq.max(line.seq);
                if let Some(event) = line.event {
                    each(line.seq, event)?;
                }
            }
            std::ops::ControlFlow::Continue(())
        })?;
        if !clean {
            return Ok(None);
        }
        RunJournal::at(path, last_seq + 1, clock).map(Some)
    }

    /// Opens the journal at `path` reading only its end ([`crate::tail`]): the task, the latest
    /// compaction and what follows it. A journal whose last line is torn is opened whole (and
    /// repaired).
    pub fn open_tail(path: &Path, clock: Clock) -> Result<Opened, StoreError> {
        if !path.exists() {
            return Self::open(path, clock);
        }
        let Some(tail) = crate::tail::read_tail(path)? else {
            return Self::open(path, clock);
        };
        Ok(Opened {
            journal: RunJournal::at(path, tail.next_seq, clock)?,
            events: tail.events,
            seqs: tail.seqs,
            thoughts_before: tail.thoughts_before,
            recovered: None,
        })
    }

    /// The `seq` the next event gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Appends an event (one line, flushed to disk with everything before it) and returns it as stored.
    pub fn append(&mut self, event: &Event) -> Result<Envelope, StoreError> {
        self.write(event, true)
    }

    /// Appends an event without flushing it yet: the next [`RunJournal::append`] or
    /// [`RunJournal::sync`] does. Callers sync before any side effect.
    pub fn append_deferred(&mut self, event: &Event) -> Result<Envelope, StoreError> {
        self.write(event, false)
    }

    /// Sends every line from now on to `upstream` before writing it here.
    pub fn with_upstream(mut self, upstream: Option<std::sync::Arc<dyn Upstream>>) -> Self {
        self.upstream = upstream;
        self
    }

    /// The journal's first `len` bytes (all with `None`), a block at a time, read through this open
    /// file; returns how many there were.
    pub fn read_prefix(
        &self,
        len: Option<u64>,
        take: impl FnMut(&[u8]),
    ) -> Result<u64, StoreError> {
        self.journal.read_prefix(len, take)
    }

    /// Flushes deferred events, if any.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.send(None)?;
        if self.journal.is_dirty() {
            self.journal.sync()?;
        }
        Ok(())
    }

    /// Sends the lines not yet sent upstream, and `line` (with `seq`) after them.
    fn send(&mut self, line: Option<(u64, &str)>) -> Result<(), StoreError> {
        let Some(upstream) = &self.upstream else {
            return Ok(());
        };
        let unsent = self.unsent.take();
        let (first, mut lines): (u64, Vec<&str>) = match &unsent {
            Some((first, lines)) => (*first, lines.iter().map(String::as_str).collect()),
            None => (line.map_or(0, |(seq, _)| seq), Vec::new()),
        };
        lines.extend(line.map(|(_, text)| text));
        if lines.is_empty() {
            return Ok(());
        }
        upstream.append(first, &lines)
    }

    fn write(&mut self, event: &Event, flush: bool) -> Result<Envelope, StoreError> {
        let tagged = serde_json::to_value(event).map_err(|source| StoreError::Serialize {
            path: self.journal.path().to_path_buf(),
            source,
        })?;
        let envelope = Envelope {
            seq: self.next_seq,
            timestamp: timestamp(self.clock.now()),
            kind: tagged["type"].as_str().unwrap_or_default().to_string(),
            payload: tagged.get("payload").cloned().unwrap_or(Value::Null),
        };
        let line = serde_json::to_string(&envelope).map_err(|source| StoreError::Serialize {
            path: self.journal.path().to_path_buf(),
            source,
        })?;
        if self.upstream.is_some() {
            // The store first: a line it refuses (a lost lease) is never written or acted on here.
            if flush {
                self.send(Some((envelope.seq, &line)))?;
                self.journal.append_raw(&line)?;
            } else {
                self.journal.append_raw_unsynced(&line)?;
            }
        } else if flush {
            self.journal.append_raw(&line)?;
        } else {
            self.journal.append_raw_unsynced(&line)?;
        }
        if let Some(tracked) = &mut self.tracked {
            use sha2::Digest;
            tracked.hasher.update(line.as_bytes());
            tracked.hasher.update(b"\n");
            tracked.bytes += line.len() as u64 + 1;
        }
        if self.upstream.is_some() && !flush {
            self.unsent
                .get_or_insert_with(|| (envelope.seq, Vec::new()))
                .1
                .push(line);
        }
        self.next_seq += 1;
        Ok(envelope)
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        self.journal.path()
    }
}

/// A finished SHA-256 as hex.
fn hex(hasher: sha2::Sha256) -> String {
    use sha2::Digest;
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Why a journal cannot be resumed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalState {
    /// The file does not exist.
    Missing,
    /// The file holds no complete line.
    Empty,
}

impl std::fmt::Display for JournalState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Missing => "missing",
            Self::Empty => "empty",
        })
    }
}

/// `None` when the journal at `path` holds at least one complete line; otherwise whether it is missing
/// or empty. Reads only up to the first complete line that is not blank.
pub fn journal_state(path: &Path) -> Result<Option<JournalState>, StoreError> {
    use std::io::BufRead;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Some(JournalState::Missing));
        }
        Err(e) => {
            return Err(StoreError::Io {
                action: "open",
                path: path.to_path_buf(),
                source: e,
            });
        }
    };
    let mut reader = std::io::BufReader::new(file);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| StoreError::Io {
                action: "read",
                path: path.to_path_buf(),
                source: e,
            })?;
        // End of file, or a last line without its newline (a torn write): no complete line.
        if n == 0 || line.last() != Some(&b'\n') {
            return Ok(Some(JournalState::Empty));
        }
        if !line.trim_ascii().is_empty() {
            return Ok(None);
        }
    }
}

/// Reads a journal without opening it for writing.
pub fn read(path: &Path) -> Result<(Vec<Envelope>, Option<TornTail>), StoreError> {
    let contents = journal::read::<Envelope>(path)?;
    Ok((contents.records, contents.torn_tail))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lists_read_from_the_journal_are_at_their_exact_size() {
        let line = br#"{"seq":3,"timestamp":"t","type":"THOUGHT","payload":{"content":"","llm_invocation_ref":"i","tool_calls":[{"id":"c","type":"function","function":{"name":"ls","arguments":"{}"}}]}}"#;
        let (_, event) = parse_journal_line(line).unwrap();
        let Some(Event::Thought {
            tool_calls: Some(calls),
            ..
        }) = event
        else {
            panic!("{event:?}")
        };
        assert_eq!((calls.len(), calls.capacity()), (1, 1));
        // A map's capacity cannot be read through serde_json: what is checked here is that the
        // rebuilt object keeps its entries and their order, and a list its items at exact size.
        let value = json!({"b": 1, "a": [1, 2]});
        assert_eq!(exact(value.clone()).to_string(), value.to_string());
        let mut items = Vec::with_capacity(8);
        items.extend([json!(1), json!(2)]);
        let Value::Array(items) = exact(Value::Array(items)) else {
            panic!()
        };
        assert_eq!(items.capacity(), 2);
    }

    #[test]
    fn envelopes_keep_the_documented_key_order_and_seq_continues() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let clock = Clock::Fixed("2025-10-13T11:00:24.476Z".parse().unwrap());
        let mut opened = RunJournal::open(&path, clock).unwrap();
        opened
            .journal
            .append(&Event::UserMessage {
                content: "hi".into(),
            })
            .unwrap();
        opened
            .journal
            .append(&Event::Thought {
                content: String::new(),
                llm_invocation_ref: "inv".into(),
                tool_calls: None,
                usage: None,
            })
            .unwrap();
        drop(opened);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text.lines().next().unwrap(),
            r#"{"seq":1,"timestamp":"2025-10-13T11:00:24.476Z","type":"USER_MESSAGE","payload":{"content":"hi"}}"#
        );
        assert!(
            !text.contains("tool_calls"),
            "absent tool calls are omitted: {text}"
        );
        let mut again = RunJournal::open(&path, clock).unwrap();
        assert_eq!(again.events.len(), 2);
        assert_eq!(
            again.events[0],
            Event::UserMessage {
                content: "hi".into()
            }
        );
        let e = again
            .journal
            .append(&Event::RunEnd {
                status: EndStatus::Completed,
            })
            .unwrap();
        assert_eq!(e.seq, 3);
        assert_eq!(
            e.event(),
            Some(Event::RunEnd {
                status: EndStatus::Completed
            })
        );
    }

    #[test]
    fn unknown_types_are_kept_but_not_interpreted() {
        let e = Envelope {
            seq: 1,
            timestamp: "t".into(),
            kind: "task_start".into(),
            payload: json!({}),
        };
        assert_eq!(e.event(), None);
    }

    #[test]
    fn lines_of_unknown_types_are_kept_out_but_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        std::fs::write(
            &path,
            "{\"seq\":1,\"type\":\"task_start\",\"payload\":{}}\n{\"timestamp\":\"t\",\"seq\":7,\"type\":\"USER_MESSAGE\",\"payload\":{\"content\":\"a\"}}\n",
        )
        .unwrap();
        let opened = RunJournal::open(&path, Clock::System).unwrap();
        assert_eq!(
            opened.events,
            vec![Event::UserMessage {
                content: "a".into()
            }]
        );
        assert_eq!(opened.journal.next_seq, 8);
        std::fs::write(
            &path,
            "not json\n{\"seq\":2,\"type\":\"X\",\"payload\":{}}\n",
        )
        .unwrap();
        assert!(
            RunJournal::open(&path, Clock::System).is_err(),
            "a bad line in the middle is corruption"
        );
    }

    #[test]
    fn a_torn_last_line_is_cut_off_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        std::fs::write(
            &path,
            "{\"seq\":1,\"timestamp\":\"t\",\"type\":\"USER_MESSAGE\",\"payload\":{\"content\":\"a\"}}\n{\"seq\":2,\"ti",
        )
        .unwrap();
        let opened = RunJournal::open(&path, Clock::System).unwrap();
        assert_eq!(opened.events.len(), 1);
        assert_eq!(opened.recovered.unwrap().line, 2);
        assert_eq!(opened.journal.next_seq, 2);
    }
}
