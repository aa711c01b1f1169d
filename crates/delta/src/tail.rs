//! Reading only the end of a run's journal.
//!
//! When the model's context window is known, what a resumed run sends is bounded: the task, the
//! latest `COMPACTION`'s summary and what came after the iterations it replaced. So a resume reads
//! the journal backwards from its end, in blocks, until it has the latest `COMPACTION` and every
//! line after the last one that compaction replaced, then the task from the journal's head. A
//! journal without a compaction is read whole (it is small: a run with a budget compacts before its
//! conversation outgrows it).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use store::StoreError;

use crate::events::{EndStatus, Event, parse_journal_line};

/// How much is read at a time, from the end.
const BLOCK: u64 = 64 * 1024;

/// The end of a journal.
#[derive(Debug, Default)]
pub struct Tail {
    /// The run's start and its task (the first user message) when they lie before the lines read,
    /// then the events of the lines read, in order (lines of unknown types left out).
    pub events: Vec<Event>,
    /// The `seq` of each of `events`.
    pub seqs: Vec<u64>,
    /// How many model answers come before the lines read (the latest compaction's count; 0 when
    /// the whole journal was read).
    pub thoughts_before: u64,
    /// The `seq` of the last line, plus one.
    pub next_seq: u64,
}

/// A parsed line.
struct Line {
    seq: u64,
    event: Option<Event>,
}

/// The end of the journal at `path`, or `None` when its last line is torn (the caller opens it
/// whole, which repairs it).
pub fn read_tail(path: &Path) -> Result<Option<Tail>, StoreError> {
    read_tail_in_blocks(path, BLOCK)
}

fn read_tail_in_blocks(path: &Path, block: u64) -> Result<Option<Tail>, StoreError> {
    let mut file = std::fs::File::open(path).map_err(|e| StoreError::io("open", path, e))?;
    let len = file
        .metadata()
        .map_err(|e| StoreError::io("read", path, e))?
        .len();
    if len == 0 {
        return Ok(Some(Tail {
            next_seq: 1,
            ..Tail::default()
        }));
    }
    let mut last = [0u8; 1];
    read_at(&mut file, path, len - 1, &mut last)?;
    if last[0] != b'\n' {
        return Ok(None);
    }
    let Backwards {
        mut lines,
        reached_start,
        compaction,
    } = read_backwards(&mut file, path, len, block)?;
    lines.reverse();
    let next_seq = lines.last().map_or(1, |l| l.seq + 1);
    let mut tail = Tail {
        next_seq,
        ..Tail::default()
    };
    if !reached_start {
        tail.thoughts_before = compaction.map_or(0, |(iterations, _)| iterations);
        for (seq, event) in head(path)? {
            tail.seqs.push(seq);
            tail.events.push(event);
        }
    }
    for line in lines {
        if let Some(event) = line.event {
            tail.seqs.push(line.seq);
            tail.events.push(event);
        }
    }
    Ok(Some(tail))
}

/// What reading backwards found.
struct Backwards {
    /// The lines after the latest compaction's last replaced line, newest first.
    lines: Vec<Line>,
    /// The start of the file was reached.
    reached_start: bool,
    /// The latest compaction's (iterations, to_seq).
    compaction: Option<(u64, u64)>,
}

/// The complete lines of a journal, from its last to its first, read in blocks from the end. What
/// follows the last line break (a torn write) is not a line.
struct LinesFromEnd<'a> {
    file: &'a mut std::fs::File,
    path: &'a Path,
    block_size: u64,
    /// Where the part not read yet ends.
    pos: u64,
    /// No line break was met yet: the bytes read so far are a torn last line.
    in_torn_tail: bool,
    /// The end of a line whose start lies in the part not read yet.
    carry: Vec<u8>,
    /// Lines of the block read last, in file order (taken from the end).
    ready: Vec<Vec<u8>>,
}

impl<'a> LinesFromEnd<'a> {
    fn new(file: &'a mut std::fs::File, path: &'a Path, len: u64, block_size: u64) -> Self {
        Self {
            file,
            path,
            block_size,
            pos: len,
            in_torn_tail: true,
            carry: Vec::new(),
            ready: Vec::new(),
        }
    }

    fn next_line(&mut self) -> Result<Option<Vec<u8>>, StoreError> {
        loop {
            if let Some(line) = self.ready.pop() {
                return Ok(Some(line));
            }
            if self.pos == 0 {
                let first = std::mem::take(&mut self.carry);
                return Ok((!first.is_empty()).then_some(first));
            }
            let start = self.pos.saturating_sub(self.block_size);
            let mut block = vec![0u8; usize::try_from(self.pos - start).unwrap_or(0)];
            read_at(self.file, self.path, start, &mut block)?;
            self.pos = start;
            let mut pieces: Vec<Vec<u8>> =
                block.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
            if self.in_torn_tail {
                if pieces.len() == 1 {
                    continue;
                }
                self.in_torn_tail = false;
                pieces.pop();
            } else if let Some(last) = pieces.last_mut() {
                last.append(&mut self.carry);
            }
            // The first piece may be the end of a line that starts in the block before.
            self.carry = if self.pos > 0 {
                pieces.remove(0)
            } else {
                Vec::new()
            };
            self.ready = pieces.into_iter().filter(|p| !p.is_empty()).collect();
        }
    }
}

/// Reads the journal from its end until it holds the latest compaction and every line after the
/// last one that compaction replaced.
fn read_backwards(
    file: &mut std::fs::File,
    path: &Path,
    len: u64,
    block_size: u64,
) -> Result<Backwards, StoreError> {
    let mut lines = Vec::new();
    let mut compaction: Option<(u64, u64)> = None;
    let mut from_end = LinesFromEnd::new(file, path, len, block_size);
    while let Some(bytes) = from_end.next_line()? {
        let line = parse(path, &bytes)?;
        if let Some((_, to_seq)) = compaction
            && line.seq <= to_seq
        {
            return Ok(Backwards {
                lines,
                reached_start: false,
                compaction,
            });
        }
        if compaction.is_none()
            && let Some(Event::Compaction {
                iterations, to_seq, ..
            }) = &line.event
        {
            compaction = Some((*iterations, *to_seq));
        }
        lines.push(line);
    }
    Ok(Backwards {
        lines,
        reached_start: true,
        compaction,
    })
}

/// How a finished run's journal ends: the status of its `RUN_END` and when it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    /// Completed or failed.
    pub status: EndStatus,
    /// The `RUN_END` line's timestamp.
    pub timestamp: String,
}

/// Whether the run of the journal at `path` has ended: its last `RUN_END` is followed by nothing
/// that goes on with the run (only notes, hook audits, compactions and lines of unknown types).
/// Then the run is finished, whatever `metadata.json` says: a process killed between journaling the
/// end and saving the metadata leaves exactly that. A missing or empty journal has not ended; a
/// line that cannot be read means "not known to have ended".
pub fn ending(path: &Path) -> Result<Option<Ending>, StoreError> {
    read_from_end(path, |lines| ending_of(lines))
}

/// Why the run of the journal at `path` failed: the fatal error journaled after its last answer, if
/// any.
pub fn failure(path: &Path) -> Result<Option<String>, StoreError> {
    read_from_end(path, |lines| failure_of(lines))
}

/// `read` over the complete lines of the journal at `path`, last first; `None` without a journal.
/// A read that fails stops the lines and is the error.
fn read_from_end<T>(
    path: &Path,
    read: impl FnOnce(&mut dyn Iterator<Item = Vec<u8>>) -> Option<T>,
) -> Result<Option<T>, StoreError> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("open", path, e)),
    };
    let len = file
        .metadata()
        .map_err(|e| StoreError::io("read", path, e))?
        .len();
    let mut from_end = LinesFromEnd::new(&mut file, path, len, BLOCK);
    let mut failed = None;
    let mut lines = std::iter::from_fn(|| match from_end.next_line() {
        Ok(line) => line,
        Err(e) => {
            failed = Some(e);
            None
        }
    });
    let found = read(&mut lines);
    match failed {
        Some(e) => Err(e),
        None => Ok(found),
    }
}

/// [`failure`] of a journal given as its complete lines, last first: the text of the last
/// `ERROR` note after the last answer or message.
pub fn failure_of<L: AsRef<[u8]>>(lines_from_end: impl IntoIterator<Item = L>) -> Option<String> {
    for line in lines_from_end {
        match parse_journal_line(line.as_ref()) {
            Ok((
                _,
                Some(Event::SystemMessage {
                    level: crate::events::Level::Error,
                    content,
                }),
            )) => {
                return Some(
                    content
                        .strip_prefix(crate::engine::FATAL_PREFIX)
                        .map_or(content.clone(), str::to_string),
                );
            }
            Ok((_, Some(Event::Thought { .. } | Event::UserMessage { .. }))) | Err(_) => {
                return None;
            }
            Ok(_) => {}
        }
    }
    None
}

/// [`ending`] of a journal given as its complete lines, last first (a file's, or a store's).
pub fn ending_of<L: AsRef<[u8]>>(lines_from_end: impl IntoIterator<Item = L>) -> Option<Ending> {
    for line in lines_from_end {
        let bytes = line.as_ref();
        let Ok((_, event)) = parse_journal_line(bytes) else {
            return None;
        };
        match event {
            Some(Event::RunEnd { status }) => {
                let timestamp = serde_json::from_slice::<crate::events::Envelope>(bytes)
                    .map(|e| e.timestamp)
                    .unwrap_or_default();
                return Some(Ending { status, timestamp });
            }
            None
            | Some(
                Event::SystemMessage { .. }
                | Event::HookExecutionAudit { .. }
                | Event::Compaction { .. },
            ) => {}
            Some(_) => return None,
        }
    }
    None
}

fn parse(path: &Path, bytes: &[u8]) -> Result<Line, StoreError> {
    let (seq, event) = parse_journal_line(bytes).map_err(|source| StoreError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Line { seq, event })
}

/// The run's start and its first user message (the task), read from the journal's head.
fn head(path: &Path) -> Result<Vec<(u64, Event)>, StoreError> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).map_err(|e| StoreError::io("open", path, e))?;
    let mut reader = std::io::BufReader::new(file);
    let mut line = Vec::new();
    let mut found = Vec::new();
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| StoreError::io("read", path, e))?;
        if n == 0 {
            return Ok(found);
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if text.is_empty() {
            continue;
        }
        let parsed = parse(path, text)?;
        match parsed.event {
            Some(event @ Event::RunStart { .. }) => found.push((parsed.seq, event)),
            Some(event @ Event::UserMessage { .. }) => {
                found.push((parsed.seq, event));
                return Ok(found);
            }
            Some(Event::Thought { .. }) => return Ok(found),
            _ => {}
        }
    }
}

fn read_at(
    file: &mut std::fs::File,
    path: &Path,
    at: u64,
    buf: &mut [u8],
) -> Result<(), StoreError> {
    file.seek(SeekFrom::Start(at))
        .and_then(|_| file.read_exact(buf))
        .map_err(|e| StoreError::io("read", path, e))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::context::{conversation, conversation_after};

    /// What one step of a generated journal is.
    #[derive(Debug, Clone)]
    enum Step {
        /// A model answer with this many calls, of which this many got a result.
        Answer { calls: u8, results: u8 },
        /// A user message.
        User,
        /// A line of a type this version does not know.
        Unknown,
        /// A compaction keeping this many recent answers.
        Compact { keep: u8 },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => (0u8..3, 0u8..3).prop_map(|(calls, results)| Step::Answer { calls, results: results.min(calls) }),
            1 => Just(Step::User),
            1 => Just(Step::Unknown),
            2 => (1u8..4).prop_map(|keep| Step::Compact { keep }),
        ]
    }

    /// The journal lines of `steps`, as the engine would write them.
    fn journal(steps: &[Step]) -> Vec<serde_json::Value> {
        let mut lines = Vec::new();
        let push = |lines: &mut Vec<serde_json::Value>, kind: &str, payload: serde_json::Value| {
            let seq = lines.len() as u64 + 1;
            lines.push(json!({"seq": seq, "timestamp": "t", "type": kind, "payload": payload}));
        };
        push(
            &mut lines,
            "RUN_START",
            json!({"run_id": "r", "task": "the task", "agent_ref": "/a"}),
        );
        push(&mut lines, "USER_MESSAGE", json!({"content": "the task"}));
        // The seq of each answer's line, and the latest compaction's count.
        let mut answers: Vec<u64> = Vec::new();
        let mut compacted = 0usize;
        for (n, step) in steps.iter().enumerate() {
            match step {
                Step::Answer { calls, results } => {
                    answers.push(lines.len() as u64 + 1);
                    let ids: Vec<String> = (0..*calls).map(|c| format!("c{n}-{c}")).collect();
                    let tool_calls: Vec<_> = ids.iter().map(|id| json!({"id": id, "type": "function", "function": {"name": "t", "arguments": "{}"}})).collect();
                    let mut payload =
                        json!({"content": format!("answer {n}"), "llm_invocation_ref": "i"});
                    if !tool_calls.is_empty() {
                        payload["tool_calls"] = json!(tool_calls);
                    }
                    push(&mut lines, "THOUGHT", payload);
                    for id in ids.iter().take(*results as usize) {
                        push(
                            &mut lines,
                            "ACTION_REQUEST",
                            json!({"action_id": id, "tool_name": "t", "tool_args": {}, "resolved_command": "t"}),
                        );
                        push(
                            &mut lines,
                            "ACTION_RESULT",
                            json!({"action_id": id, "status": "SUCCESS", "observation_content": format!("result of {id}"), "execution_ref": id}),
                        );
                    }
                }
                Step::User => push(
                    &mut lines,
                    "USER_MESSAGE",
                    json!({"content": format!("more {n}")}),
                ),
                Step::Unknown => push(&mut lines, "SOMETHING_NEW", json!({"x": n})),
                Step::Compact { keep } => {
                    let replace = answers.len().saturating_sub(*keep as usize);
                    if replace == 0 || replace <= compacted {
                        continue;
                    }
                    compacted = replace;
                    let to_seq = answers[replace] - 1;
                    push(
                        &mut lines,
                        "COMPACTION",
                        json!({"strategy": "summarize", "iterations": replace, "from_seq": answers[0], "to_seq": to_seq, "summary": format!("summary of {replace}"), "tokens_before": 1, "tokens_after": 1, "window": 2048}),
                    );
                }
            }
        }
        lines
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Reading the end of a journal gives the model the same conversation as reading it whole.
        #[test]
        fn the_tail_builds_the_same_conversation_as_a_full_replay(
            steps in proptest::collection::vec(step(), 0..60),
            max_iterations in proptest::option::of(1u32..6),
            block in 16u64..400,
        ) {
            let lines = journal(&steps);
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("journal.jsonl");
            let mut file = std::fs::File::create(&path).unwrap();
            for line in &lines {
                writeln!(file, "{line}").unwrap();
            }
            drop(file);
            let (events, _) = crate::events::read(&path).unwrap();
            let full = conversation(&crate::context::typed(&events), max_iterations);
            let tail = read_tail_in_blocks(&path, block).unwrap().unwrap();
            let from_tail = conversation_after(&tail.events, tail.thoughts_before, max_iterations);
            prop_assert_eq!(&from_tail, &full);
            prop_assert_eq!(tail.next_seq, lines.len() as u64 + 1);
            let answers = lines.iter().filter(|l| l["type"] == "THOUGHT").count() as u64;
            let in_tail = tail.events.iter().filter(|e| matches!(e, Event::Thought { .. })).count() as u64;
            prop_assert_eq!(tail.thoughts_before + in_tail, answers);
        }
    }

    proptest! {
        /// Lines read from the end are the file's complete lines, last first, whatever the block
        /// size; bytes after the last line break are no line.
        #[test]
        fn lines_from_the_end_are_the_complete_lines_reversed(
            lines in proptest::collection::vec("[a-z{}]{0,30}", 0..20),
            torn in proptest::option::of("[a-z]{1,50}"),
            block in 1u64..64,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("journal.jsonl");
            let mut text = String::new();
            for line in &lines {
                text.push_str(line);
                text.push('\n');
            }
            text.push_str(torn.as_deref().unwrap_or(""));
            std::fs::write(&path, &text).unwrap();
            let mut file = std::fs::File::open(&path).unwrap();
            let mut from_end = LinesFromEnd::new(&mut file, &path, text.len() as u64, block);
            let mut read = Vec::new();
            while let Some(line) = from_end.next_line().unwrap() {
                read.push(String::from_utf8(line).unwrap());
            }
            let expected: Vec<String> =
                lines.iter().rev().filter(|l| !l.is_empty()).cloned().collect();
            prop_assert_eq!(read, expected);
        }
    }

    fn line(seq: u64, kind: &str, payload: serde_json::Value) -> String {
        json!({"seq": seq, "timestamp": format!("2026-01-01T00:00:{seq:02}.000Z"), "type": kind, "payload": payload}).to_string()
    }

    #[test]
    fn a_journal_has_ended_when_nothing_after_its_run_end_goes_on_with_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let end = line(3, "RUN_END", json!({"status": "COMPLETED"}));
        let note = line(
            4,
            "SYSTEM_MESSAGE",
            json!({"level": "INFO", "content": "x"}),
        );
        let hook = line(
            5,
            "HOOK_EXECUTION_AUDIT",
            json!({"hook_name": "on_run_end", "status": "SUCCESS", "io_path_ref": "h"}),
        );
        let unknown = line(6, "SOMETHING_NEW", json!({}));
        let user = line(7, "USER_MESSAGE", json!({"content": "more"}));
        let start = line(1, "USER_MESSAGE", json!({"content": "task"}));
        let thought = line(
            2,
            "THOUGHT",
            json!({"content": "done", "llm_invocation_ref": "i"}),
        );
        let ended = Some(Ending {
            status: EndStatus::Completed,
            timestamp: "2026-01-01T00:00:03.000Z".into(),
        });
        for (lines, torn, expected) in [
            (vec![&start, &thought, &end], "", ended.clone()),
            (
                vec![&start, &thought, &end, &note, &hook, &unknown],
                "",
                ended.clone(),
            ),
            (
                vec![&start, &thought, &end],
                "{\"seq\":4,\"ty",
                ended.clone(),
            ),
            (vec![&start, &thought, &end, &user], "", None),
            (vec![&start, &thought], "", None),
            (vec![], "", None),
        ] {
            let mut text: String = lines.iter().map(|l| format!("{l}\n")).collect();
            text.push_str(torn);
            std::fs::write(&path, &text).unwrap();
            assert_eq!(ending(&path).unwrap(), expected, "{text}");
        }
        let failed = line(3, "RUN_END", json!({"status": "FAILED"}));
        std::fs::write(&path, format!("{start}\n{failed}\n")).unwrap();
        assert_eq!(ending(&path).unwrap().unwrap().status, EndStatus::Failed);
        assert_eq!(ending(&dir.path().join("missing.jsonl")).unwrap(), None);
    }

    #[test]
    fn a_torn_last_line_is_left_to_the_full_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        std::fs::write(&path, "{\"seq\":1,\"timestamp\":\"t\",\"type\":\"USER_MESSAGE\",\"payload\":{\"content\":\"x\"}}\n{\"seq\":2,").unwrap();
        assert!(read_tail(&path).unwrap().is_none());
    }
}
