//! What a run did, for people: its transcript, built from the journal (the run's record) with the
//! details the `io/` records add (exit codes, durations, failed model requests).
//!
//! [`Transcript::load`] reads a run folder; [`text`] and [`html`] render it, and the transcript itself
//! serializes as the JSON `delta show --format json` prints. Nothing here writes to the run: a
//! transcript can be taken while another process works on it (what that process has not journaled
//! yet is simply not there).

pub mod html;
pub mod text;

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use store::StoreError;

use crate::engine::InteractionRequest;
use crate::engine::IoRecords;
pub use crate::engine::is_record_id;
use crate::events::{self, ActionStatus, Envelope, Event, Level};
use crate::metadata::{RunStatus, TokenTotals};
use crate::runs;
use crate::workspace::RunDir;

/// Why a transcript cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// The run's metadata or journal could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A run, from its task to where it stands.
#[derive(Debug, Clone, Serialize)]
pub struct Transcript {
    /// Run id.
    pub run_id: String,
    /// Its run folder.
    pub run_dir: PathBuf,
    /// The agent folder.
    pub agent_ref: String,
    /// Where it stands (a RUNNING run whose process died is INTERRUPTED).
    pub status: RunStatus,
    /// Whether its process died while it was RUNNING.
    pub crashed: bool,
    /// The first message.
    pub task: String,
    /// When it started.
    pub start_time: String,
    /// When it last stopped.
    pub end_time: Option<String>,
    /// The model, as its answers named it.
    pub model: Option<String>,
    /// Tool iterations, over all processes.
    pub iterations: u64,
    /// Token totals.
    pub usage: TokenTotals,
    /// The model's final answer (COMPLETED).
    pub final_answer: Option<String>,
    /// The question the run waits on (WAITING_FOR_INPUT).
    pub pending_question: Option<String>,
    /// What happened, in order.
    pub entries: Vec<Entry>,
    /// Whether the journal ended in a torn line (a write cut short), which is left out.
    pub torn_tail: bool,
    /// Why `metadata.json` could not be used (missing or unreadable): the facts above were then
    /// read from the journal.
    pub damaged: Option<String>,
}

/// One thing that happened.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    /// A message from the user (the task, an answer, a follow-up).
    User {
        /// When.
        time: String,
        /// The text.
        text: String,
    },
    /// An answer of the model.
    Model(ModelEntry),
    /// A tool call and its result.
    Tool(ToolEntry),
    /// A model request that failed (from `io/invocations/`).
    FailedRequest {
        /// When.
        time: String,
        /// The kind of failure (`http`, `timeout`, …).
        error_kind: String,
        /// The error.
        message: String,
        /// The server's HTTP status, if it answered.
        http_status: Option<u64>,
        /// The file holding its record (a pack of `io/invocations/`, `<id>.json`, or the folder of a
        /// run made before).
        record: PathBuf,
        /// The record's id (the invocation's).
        record_id: String,
    },
    /// The oldest part of the conversation was replaced to fit the context window.
    Compaction(CompactionEntry),
    /// A note from the engine.
    Note {
        /// When.
        time: String,
        /// How serious.
        level: Level,
        /// The text.
        text: String,
    },
    /// A lifecycle hook that failed.
    HookFailed {
        /// When.
        time: String,
        /// Hook name.
        name: String,
    },
    /// The run stopped (COMPLETED or FAILED).
    End {
        /// When.
        time: String,
        /// How.
        status: String,
    },
}

/// An answer of the model.
#[derive(Debug, Clone, Serialize)]
pub struct ModelEntry {
    /// When.
    pub time: String,
    /// The run's model answers so far, this one included.
    pub call: u64,
    /// Its text (empty when it only called tools).
    pub text: String,
    /// Tools it called.
    pub tool_calls: usize,
    /// Tokens of this call.
    pub usage: Option<llm::Usage>,
    /// How long the call took.
    pub duration_ms: Option<u64>,
}

impl ModelEntry {
    /// Its tokens, time and calls, for people (`120 in / 30 out tokens`, `12 ms`, `2 tool call(s)`).
    pub fn facts(&self) -> Vec<String> {
        let mut facts = Vec::new();
        if let Some(u) = self.usage {
            facts.push(format!(
                "{} in / {} out tokens",
                u.input_tokens, u.output_tokens
            ));
        }
        if let Some(ms) = self.duration_ms {
            facts.push(format!("{ms} ms"));
        }
        if self.tool_calls > 0 {
            facts.push(format!("{} tool call(s)", self.tool_calls));
        }
        facts
    }
}

/// A compaction of the conversation.
#[derive(Debug, Clone, Serialize)]
pub struct CompactionEntry {
    /// When.
    pub time: String,
    /// `summarize` or `truncate`.
    pub strategy: String,
    /// Model answers replaced.
    pub iterations: u64,
    /// What stands in their place.
    pub summary: String,
    /// Estimated tokens before.
    pub tokens_before: u64,
    /// Estimated tokens after.
    pub tokens_after: u64,
}

impl CompactionEntry {
    /// What it did, in a line.
    pub fn headline(&self) -> String {
        format!(
            "compaction ({}): {} model answers replaced, ~{} -> ~{} tokens",
            self.strategy, self.iterations, self.tokens_before, self.tokens_after
        )
    }
}

/// A tool call and its result.
#[derive(Debug, Clone, Serialize)]
pub struct ToolEntry {
    /// When it was asked for.
    pub time: String,
    /// The call id.
    pub action_id: String,
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub arguments: Value,
    /// The command it ran.
    pub command: String,
    /// Its outcome; `None` while (or if) it never finished.
    pub status: Option<ActionStatus>,
    /// Exit code, where a program ran.
    pub exit_code: Option<i32>,
    /// How long it ran.
    pub duration_ms: Option<u64>,
    /// What the model saw of it.
    pub output: String,
    /// The file holding the record with its full output (a pack of `io/tool_executions/`, or
    /// `<ref>.json`; a folder with `stdout.log` and `stderr.log` in runs made before), where one
    /// was written.
    pub record: Option<PathBuf>,
    /// The record's id in that file (a pack holds many).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record_id: Option<String>,
    /// The child run of an agent tool's call (in `agents/<call>-<line>/` of the run's folder).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_run: Option<Box<Transcript>>,
    /// The journal line of the call's `ACTION_REQUEST` (which names its child's folder).
    #[serde(skip)]
    pub request_seq: u64,
}

impl ToolEntry {
    /// A call asked for, without its result yet.
    fn requested(
        time: String,
        action_id: String,
        name: String,
        arguments: Value,
        command: String,
    ) -> Self {
        Self {
            time,
            action_id,
            name,
            arguments,
            command,
            status: None,
            exit_code: None,
            duration_ms: None,
            output: String::new(),
            record: None,
            record_id: None,
            sub_run: None,
            request_seq: 0,
        }
    }

    /// Its outcome, exit code and duration, for people (`failed`, `exit 3`, `12 ms`).
    pub fn facts(&self) -> Vec<String> {
        let mut facts = vec![
            match self.status {
                Some(ActionStatus::Success) => "succeeded",
                Some(ActionStatus::Failed) => "failed",
                Some(ActionStatus::Error) => "could not run",
                None if self.name == "ask_human" => "waiting for an answer",
                None => "no result (the run stopped while it ran)",
            }
            .to_string(),
        ];
        if let Some(code) = self.exit_code {
            facts.push(format!("exit {code}"));
        }
        if let Some(ms) = self.duration_ms {
            facts.push(format!("{ms} ms"));
        }
        facts
    }
}

impl Transcript {
    /// The transcript of the run in `run`.
    pub fn load(run: &RunDir) -> Result<Self, TranscriptError> {
        let (metadata, damaged) = runs::metadata_or_journal(run)?;
        let lock = store::RunLock::probe(&run.lock()).unwrap_or(store::LockState::Free);
        let (status, crashed) = runs::status_of(run, &metadata, &lock);
        let (lines, torn) = events::read(&run.journal())?;
        let mut builder = Builder::new(run);
        for line in &lines {
            builder.add(line);
        }
        builder.add_failed_requests();
        let model = builder.model.clone();
        let mut entries = builder.finish();
        for entry in &mut entries {
            if let Entry::Tool(tool) = entry {
                tool.sub_run = sub_run(run, tool);
            }
        }
        let final_answer = (status == RunStatus::Completed)
            .then(|| final_answer(&entries))
            .flatten();
        let pending_question = (status == RunStatus::WaitingForInput)
            .then(|| pending_question(run))
            .flatten();
        Ok(Self {
            run_id: metadata.run_id.clone(),
            run_dir: run.root.clone(),
            agent_ref: metadata.agent_ref.clone(),
            status,
            crashed,
            task: metadata.task.clone(),
            start_time: metadata.start_time.clone(),
            end_time: metadata.end_time.clone(),
            model,
            iterations: metadata.iterations_completed,
            usage: metadata.usage,
            final_answer,
            pending_question,
            entries,
            torn_tail: torn.is_some(),
            damaged,
        })
    }

    /// The tool calls, in order.
    pub fn tools(&self) -> impl Iterator<Item = &ToolEntry> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Tool(t) => Some(t),
            _ => None,
        })
    }
}

/// The text of the last model answer that called no tool.
fn final_answer(entries: &[Entry]) -> Option<String> {
    entries.iter().rev().find_map(|e| match e {
        Entry::Model(m) if m.tool_calls == 0 && !m.text.is_empty() => Some(m.text.clone()),
        _ => None,
    })
}

/// Record `id` of `run`'s `io/` as kept, one JSON object: a tool call's (its `action_id`, or the
/// `execution_ref` of its result), else an LLM call's (the `llm_invocation_ref` of a `THOUGHT`);
/// `None` when the run has no such record. `id` must be a plain name ([`is_record_id`]).
pub fn record(run: &RunDir, id: &str) -> Result<Option<Value>, TranscriptError> {
    for dir in [run.tool_executions(), run.invocations()] {
        if let Some(found) = IoRecords::new(dir).find(id) {
            return Ok(Some(found.read()?));
        }
    }
    Ok(None)
}

/// Where a record is, for people: its file, and its id when the file is a pack (which holds many).
pub(crate) fn record_label(path: &Path, id: Option<&str>) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    match (name, id) {
        (Some(name), Some(id)) if crate::io_packs::is_pack_file(&name) => {
            format!("{} (record {id})", path.display())
        }
        _ => path.display().to_string(),
    }
}

/// The question in `interaction/request.json`.
fn pending_question(run: &RunDir) -> Option<String> {
    store::atomic::read_json::<InteractionRequest>(&run.interaction().join("request.json"))
        .ok()
        .map(|r| r.prompt)
}

/// The transcript of the child run of call `tool` of `run` (an agent tool's), if it has one.
/// A folder that is a link is not followed (a child's transcript is never read from elsewhere).
fn sub_run(run: &RunDir, tool: &ToolEntry) -> Option<Box<Transcript>> {
    let workspace = crate::engine::child_workspace(&run.root, &tool.action_id, tool.request_seq);
    let meta = std::fs::symlink_metadata(&workspace).ok()?;
    if !meta.is_dir() || !run.root.join(crate::engine::AGENTS_DIR).is_dir() {
        return None;
    }
    let child = find_run(&workspace, None)?;
    Transcript::load(&child).ok().map(Box::new)
}

/// Where a run ended up, in a line: the final answer of a COMPLETED run, the question a
/// WAITING_FOR_INPUT one waits on, the error a FAILED one stopped on (for `list-runs`). Reads only
/// the journal's end where it can.
pub fn outcome(run: &RunDir, status: RunStatus) -> Option<Outcome> {
    match status {
        RunStatus::WaitingForInput => pending_question(run).map(Outcome::Question),
        RunStatus::Completed => last_answer(&run.journal()).map(Outcome::Answer),
        RunStatus::Failed => crate::tail::failure(&run.journal())
            .ok()
            .flatten()
            .map(Outcome::Error),
        _ => None,
    }
}

/// What [`outcome`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The model's final answer.
    Answer(String),
    /// The question waiting for an answer.
    Question(String),
    /// Why the run failed.
    Error(String),
}

/// The text of the last model answer without tool calls: from the journal's last 256 KiB, or the
/// whole journal when those hold none.
fn last_answer(journal: &Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    const WINDOW: u64 = 256 * 1024;
    let is_answer = |event: Event| match event {
        Event::Thought {
            content,
            tool_calls: None,
            ..
        } if !content.trim().is_empty() => Some(content),
        _ => None,
    };
    let mut file = std::fs::File::open(journal).ok()?;
    let len = file.metadata().ok()?.len();
    let start = len.saturating_sub(WINDOW);
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    // A window that starts inside a line leaves that line out.
    let found = bytes
        .split(|b| *b == b'\n')
        .skip(usize::from(start > 0))
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .find_map(|line| is_answer(events::parse_journal_line(line).ok()?.1?));
    if found.is_some() || start == 0 {
        return found;
    }
    let (lines, _) = events::read(journal).ok()?;
    lines.iter().rev().find_map(|line| is_answer(line.event()?))
}

/// Puts entries together from journal lines.
struct Builder {
    /// The records of `io/invocations/` and `io/tool_executions/`.
    invocations: IoRecords,
    tools: IoRecords,
    entries: Vec<Entry>,
    calls: u64,
    model: Option<String>,
}

impl Builder {
    fn new(run: &RunDir) -> Self {
        Self {
            invocations: IoRecords::new(run.invocations()),
            tools: IoRecords::new(run.tool_executions()),
            entries: Vec::new(),
            calls: 0,
            model: None,
        }
    }

    fn add(&mut self, line: &Envelope) {
        let Some(event) = line.event() else { return };
        let time = line.timestamp.clone();
        let entry = match event {
            Event::RunStart { .. } => return,
            Event::UserMessage { content } => Entry::User {
                time,
                text: content,
            },
            Event::Thought {
                content,
                llm_invocation_ref,
                tool_calls,
                usage,
            } => {
                let calls = tool_calls.map_or(0, |c| c.len());
                self.model_answer(time, content, &llm_invocation_ref, calls, usage)
            }
            Event::ActionRequest {
                action_id,
                tool_name,
                tool_args,
                resolved_command,
            } => Entry::Tool(ToolEntry {
                request_seq: line.seq,
                ..ToolEntry::requested(time, action_id, tool_name, tool_args, resolved_command)
            }),
            Event::ActionResult {
                action_id,
                status,
                observation_content,
                execution_ref,
            } => {
                self.tool_result(&action_id, status, observation_content, &execution_ref);
                return;
            }
            other => match Entry::other(time, other) {
                Some(entry) => entry,
                None => return,
            },
        };
        self.entries.push(entry);
    }

    fn model_answer(
        &mut self,
        time: String,
        text: String,
        invocation: &str,
        tool_calls: usize,
        usage: Option<llm::Usage>,
    ) -> Entry {
        self.calls += 1;
        let meta = self.invocation_metadata(invocation);
        if self.model.is_none() {
            self.model = meta
                .as_ref()
                .and_then(|m| m["model_id"].as_str())
                .map(str::to_string);
        }
        Entry::Model(ModelEntry {
            time,
            call: self.calls,
            text,
            tool_calls,
            usage,
            duration_ms: meta.as_ref().and_then(|m| m["duration_ms"].as_u64()),
        })
    }

    fn invocation_metadata(&self, id: &str) -> Option<Value> {
        self.invocations.find(id)?.metadata()
    }

    /// Completes the open call `action_id` with its result.
    fn tool_result(
        &mut self,
        action_id: &str,
        status: ActionStatus,
        output: String,
        reference: &str,
    ) {
        let (record, (exit_code, duration_ms)) = match self.tools.find(reference) {
            Some(found) => (Some(found.path()), found.tool()),
            None => (None, (None, None)),
        };
        let open = self.entries.iter_mut().rev().find_map(|e| match e {
            Entry::Tool(t) if t.action_id == action_id && t.status.is_none() => Some(t),
            _ => None,
        });
        if let Some(tool) = open {
            tool.status = Some(status);
            tool.exit_code = exit_code;
            tool.duration_ms = duration_ms;
            tool.output = output;
            tool.record_id = record.is_some().then(|| reference.to_string());
            tool.record = record;
        }
    }

    /// Adds the failed model requests of `io/invocations/` (which the journal does not hold when the
    /// run went on, as after a request refused for its length), each before the first journal entry
    /// that came after it (by the time its id carries); the journal's own order is kept.
    fn add_failed_requests(&mut self) {
        let ids = self.invocations.ids();
        let mut failed: Vec<Entry> = ids
            .iter()
            .filter_map(|id| {
                let found = self.invocations.find(id)?;
                let meta = found.metadata()?;
                if meta["status"].as_str() != Some("FAILED") {
                    return None;
                }
                let error = &meta["error"];
                Some(Entry::FailedRequest {
                    time: uuid_time(id)?,
                    error_kind: error["kind"].as_str().unwrap_or("error").to_string(),
                    message: error["message"].as_str().unwrap_or("").to_string(),
                    http_status: error["http_status"].as_u64(),
                    record: found.path(),
                    record_id: id.clone(),
                })
            })
            .collect();
        failed.sort_by(|a, b| a.time().cmp(b.time()));
        for entry in failed {
            let at = self
                .entries
                .iter()
                .position(|e| e.time() > entry.time())
                .unwrap_or(self.entries.len());
            self.entries.insert(at, entry);
        }
    }

    fn finish(self) -> Vec<Entry> {
        self.entries
    }
}

/// The time a version-7 UUID carries (its first 48 bits: milliseconds since the epoch), as journal
/// timestamps spell it.
fn uuid_time(id: &str) -> Option<String> {
    let hex: String = id.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 || hex.as_bytes().get(12) != Some(&b'7') {
        return None;
    }
    let millis = i64::from_str_radix(hex.get(..12)?, 16).ok()?;
    let at = jiff::Timestamp::from_millisecond(millis).ok()?;
    Some(events::timestamp(at))
}

impl Entry {
    /// The entry of a note, a failed hook, a compaction or the run's end (`None` for anything else).
    fn other(time: String, event: Event) -> Option<Self> {
        Some(match event {
            Event::SystemMessage { level, content } => Self::Note {
                time,
                level,
                text: content,
            },
            Event::HookExecutionAudit {
                hook_name,
                status: events::HookStatus::Failed,
                ..
            } => Self::HookFailed {
                time,
                name: hook_name,
            },
            Event::Compaction {
                strategy,
                iterations,
                summary,
                tokens_before,
                tokens_after,
                ..
            } => Self::Compaction(CompactionEntry {
                time,
                strategy,
                iterations,
                summary,
                tokens_before,
                tokens_after,
            }),
            Event::RunEnd { status } => Self::End {
                time,
                status: format!("{status:?}").to_uppercase(),
            },
            _ => return None,
        })
    }

    /// When it happened.
    pub fn time(&self) -> &str {
        match self {
            Self::User { time, .. }
            | Self::FailedRequest { time, .. }
            | Self::Note { time, .. }
            | Self::HookFailed { time, .. }
            | Self::End { time, .. } => time,
            Self::Model(m) => &m.time,
            Self::Compaction(c) => &c.time,
            Self::Tool(t) => &t.time,
        }
    }
}

/// `text` cut to at most `limit` characters, and how many were left out.
pub fn clip(text: &str, limit: usize) -> (&str, usize) {
    match text.char_indices().nth(limit) {
        Some((at, _)) => (&text[..at], text[at..].chars().count()),
        None => (text, 0),
    }
}

/// The run `run_id` of `workspace`, or the one `LATEST` names; `None` for an id that is not a valid
/// run id (it never reaches the filesystem).
pub fn find_run(workspace: &Path, run_id: Option<&str>) -> Option<RunDir> {
    match run_id {
        Some(id) => {
            crate::workspace::validate_run_id(id).ok()?;
            Some(RunDir::new(workspace, id)).filter(RunDir::holds_run)
        }
        None => runs::latest(workspace),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_7_ids_carry_their_time() {
        assert_eq!(
            uuid_time("019b76da-a800-7aad-8e12-6d684f503ec1").as_deref(),
            Some("2026-01-01T00:00:00.000Z")
        );
        assert_eq!(uuid_time("not-a-uuid"), None);
        // Version 4 ids carry no time.
        assert_eq!(uuid_time("9b2f3c1e-5d4a-4e8b-9c7d-1a2b3c4d5e6f"), None);
    }

    #[test]
    fn a_run_id_that_is_not_one_never_reaches_the_filesystem() {
        let ws = tempfile::tempdir().unwrap();
        let outside = ws.path().join("outside");
        std::fs::create_dir_all(outside.join(".delta")).unwrap();
        std::fs::write(outside.join("metadata.json"), "{}").unwrap();
        assert!(find_run(&ws.path().join("ws"), Some("../../outside")).is_none());
        assert!(find_run(ws.path(), Some("no-such-run")).is_none());
    }

    #[test]
    fn clipping_counts_what_is_left_out_in_characters() {
        assert_eq!(clip("héllo", 10), ("héllo", 0));
        assert_eq!(clip("héllo", 2), ("hé", 3));
    }

    #[test]
    fn html_escapes_markup_and_quotes() {
        assert_eq!(
            html::escape(r#"<script>alert("x" & 'y')</script>"#),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;"
        );
    }
}
