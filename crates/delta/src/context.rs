//! Building what the model sees, on every iteration.
//!
//! The agent's context recipe (its `context.yaml`, or the default: system prompt, the workspace's
//! `DELTA.md`, the conversation) is evaluated in order. File and generated sources become system
//! messages headed `# Context Block: <id>`; the journal source becomes the conversation: rebuilt
//! from the events, or the one a run keeps as it goes ([`ConversationBuilder`], [`Past`]).

use std::path::Path;
use std::sync::atomic::AtomicBool;

use llm::{ContentBlock, Message};
use serde_json::Value;

use crate::agent::{Agent, OnMissing, Source};
use crate::events::{ActionStatus, Envelope, Event};
use crate::process::record::{ChildKind, Recorder};
use crate::process::{self, Spawn};

/// Where context sources are evaluated.
pub struct ContextEnv<'a> {
    /// The agent.
    pub agent: &'a Agent,
    /// The workspace (`${CWD}`, and the generators' working folder).
    pub workspace: &'a Path,
    /// The run id (`DELTA_RUN_ID` for generators).
    pub run_id: &'a str,
    /// Environment for generators.
    pub env: &'a [(String, String)],
    /// Raised on SIGINT/SIGTERM.
    pub interrupt: &'a AtomicBool,
    /// Where generators' process groups are recorded while they run (`process.json`).
    pub recorder: Option<&'a Recorder>,
    /// Model answers journaled before the events given (a journal read from its tail).
    pub thoughts_before: u64,
}

/// The messages for the next request, and notes about sources that were skipped.
#[derive(Debug, Default)]
pub struct Built {
    /// Messages in order.
    pub messages: Vec<Message>,
    /// Skipped sources, for the log.
    pub notes: Vec<String>,
    /// Where the journal's conversation begins in `messages` (for [`Past::After`], where the
    /// kept conversation goes).
    pub journal_at: Option<usize>,
}

fn substitute(text: &str, ctx: &ContextEnv<'_>) -> String {
    text.replace("${AGENT_HOME}", &ctx.agent.dir.display().to_string())
        .replace("${CWD}", &ctx.workspace.display().to_string())
}

/// A source path: variables substituted; a relative path is relative to the workspace (where
/// generators run and write).
fn source_path(text: &str, ctx: &ContextEnv<'_>) -> String {
    let path = substitute(text, ctx);
    if std::path::Path::new(&path).is_absolute() {
        path
    } else {
        ctx.workspace.join(path).display().to_string()
    }
}

fn block(id: &str, content: &str) -> Message {
    Message::system(format!("# Context Block: {id}\n\n{content}"))
}

/// Why a context source gave nothing (the run fails, unless the source says `on_missing: skip`).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A file source that does not exist.
    #[error("File not found: {path} (source: {id})")]
    NotFound {
        /// The source.
        id: String,
        /// The file.
        path: String,
    },
    /// A file source that cannot be read.
    #[error("cannot read {path} (source: {id}): {error}")]
    Unreadable {
        /// The source.
        id: String,
        /// The file.
        path: String,
        /// Why.
        error: std::io::Error,
    },
    /// A generator that could not start.
    #[error("Generator failed for source '{id}': cannot start {program}: {error}")]
    NoStart {
        /// The source.
        id: String,
        /// The program.
        program: String,
        /// Why.
        error: Box<crate::process::RunError>,
    },
    /// A generator that ran past its timeout.
    #[error("Generator failed for source '{id}': timed out after {millis} ms")]
    TimedOut {
        /// The source.
        id: String,
        /// Its timeout.
        millis: u128,
    },
    /// A generator that failed.
    #[error("Generator failed for source '{id}': exit code {code}: {stderr}")]
    Failed {
        /// The source.
        id: String,
        /// Its exit code.
        code: i32,
        /// The beginning of its stderr.
        stderr: String,
    },
    /// A generator whose output file is not there.
    #[error("Generator output file not found: {path} (source: {id}): {error}")]
    NoOutput {
        /// The source.
        id: String,
        /// The file it should have written.
        path: String,
        /// Why it cannot be read.
        error: std::io::Error,
    },
}

/// The journal so far, as a run keeps it.
#[derive(Debug, Clone, Copy)]
pub enum Past<'a> {
    /// Its events of known types, in order (those after [`ContextEnv::thoughts_before`] answers).
    Events(&'a [Event]),
    /// The conversation of its events before `recent`, then `recent`.
    Conversation {
        /// The conversation of the events before `recent`.
        before: &'a ConversationBuilder,
        /// The events since.
        recent: &'a [Event],
    },
    /// Only what `recent` adds to the conversation `before` (whose messages the caller puts at
    /// [`Built::journal_at`] itself, without copying them).
    After {
        /// The conversation of the events before `recent`.
        before: &'a ConversationBuilder,
        /// The events since.
        recent: &'a [Event],
    },
}

impl Past<'_> {
    /// The conversation given to the model (a kept conversation is always whole: runs whose
    /// recipe keeps the last iterations only keep their events).
    fn conversation(self, thoughts_before: u64, max_iterations: Option<u32>) -> Vec<Message> {
        match self {
            Past::Events(typed) => conversation_after(typed, thoughts_before, max_iterations),
            Past::Conversation { before, recent } => before.clone().then(recent),
            Past::After { before, recent } => before.clone_turn().then(recent),
        }
    }
}

/// Evaluates the recipe against the journal so far.
pub fn build(ctx: &ContextEnv<'_>, past: Past<'_>) -> Result<Built, SourceError> {
    let mut built = Built::default();
    for source in &ctx.agent.context.sources {
        match source {
            Source::File {
                id,
                path,
                on_missing,
            } => {
                let path = source_path(path, ctx);
                match std::fs::read_to_string(&path) {
                    Ok(content) => built.messages.push(block(id, &content)),
                    Err(e) if *on_missing == OnMissing::Skip => {
                        built
                            .notes
                            .push(format!("context source '{id}' skipped: {path}: {e}"));
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return Err(SourceError::NotFound {
                            id: id.clone(),
                            path,
                        });
                    }
                    Err(error) => {
                        return Err(SourceError::Unreadable {
                            id: id.clone(),
                            path,
                            error,
                        });
                    }
                }
            }
            Source::ComputedFile {
                id,
                command,
                timeout,
                output_path,
                on_missing,
            } => match generate(ctx, id, command, *timeout, output_path) {
                Ok(content) => built.messages.push(block(id, &content)),
                Err(e) if *on_missing == OnMissing::Skip => {
                    built
                        .notes
                        .push(format!("context source '{id}' skipped: {e}"));
                }
                Err(e) => return Err(e),
            },
            Source::Journal { max_iterations, .. } => {
                built.journal_at.get_or_insert(built.messages.len());
                built
                    .messages
                    .extend(past.conversation(ctx.thoughts_before, *max_iterations));
            }
        }
    }
    Ok(built)
}

fn generate(
    ctx: &ContextEnv<'_>,
    id: &str,
    command: &[String],
    timeout: std::time::Duration,
    output_path: &str,
) -> Result<String, SourceError> {
    let mut env = ctx.env.to_vec();
    env.push(("DELTA_RUN_ID".into(), ctx.run_id.to_string()));
    env.push((
        "DELTA_AGENT_HOME".into(),
        ctx.agent.dir.display().to_string(),
    ));
    env.push(("DELTA_CWD".into(), ctx.workspace.display().to_string()));
    let spawn = Spawn {
        argv: command.iter().map(|c| substitute(c, ctx)).collect(),
        stdin: None,
        cwd: ctx.workspace.to_path_buf(),
        env,
        timeout,
        confine: None,
    };
    let out = match ctx.recorder {
        Some(recorder) => {
            let recording = process::Recording {
                recorder,
                kind: ChildKind::Generator,
                name: id,
                action_id: None,
            };
            let run = process::run_recorded(&spawn, ctx.interrupt, recording);
            // The group has ended (or never ran) once `run_recorded` returns.
            let _ = recorder.clear();
            run
        }
        None => process::run(&spawn, ctx.interrupt),
    };
    let out = out.map_err(|error| SourceError::NoStart {
        id: id.to_string(),
        program: command[0].clone(),
        error: Box::new(error),
    })?;
    if out.timed_out {
        return Err(SourceError::TimedOut {
            id: id.to_string(),
            millis: timeout.as_millis(),
        });
    }
    if !out.success() {
        let stderr = String::from_utf8_lossy(&out.stderr)
            .trim()
            .chars()
            .take(500)
            .collect::<String>();
        return Err(SourceError::Failed {
            id: id.to_string(),
            code: out.exit_code,
            stderr,
        });
    }
    let path = source_path(output_path, ctx);
    std::fs::read_to_string(&path).map_err(|error| SourceError::NoOutput {
        id: id.to_string(),
        path,
        error,
    })
}

/// Turns a journaled tool call back into a content block.
fn call_block(call: &crate::events::ToolCallRecord) -> ContentBlock {
    let raw = &call.function.arguments;
    let arguments = serde_json::from_str::<Value>(raw)
        .map(crate::events::exact)
        .unwrap_or_else(|_| Value::String(raw.clone()));
    ContentBlock::tool_call(&call.id, &call.function.name, arguments)
}

/// The typed events of a journal (unknown types left out).
pub fn typed(events: &[Envelope]) -> Vec<Event> {
    events.iter().filter_map(Envelope::event).collect()
}

/// Result text for a call whose result is missing from the journal (a journal written by another
/// engine, or damaged). The engine itself settles every call before the next request.
pub const MISSING_RESULT: &str = "No result was recorded for this call: the run stopped while it was pending. It may or may not have taken effect.";

/// Builds the model's conversation from journal events, always in a shape strict servers accept: every
/// assistant turn with tool calls is followed directly by one result per call, in call order.
///
/// Events are given one at a time, so a long run's conversation can be kept up to date as its
/// journal grows instead of being rebuilt from every event it holds.
#[derive(Debug, Clone, Default)]
pub struct ConversationBuilder {
    messages: Vec<Message>,
    /// Calls of the last assistant turn still waiting for their result, in order.
    pending: Vec<String>,
    /// Results that arrived for pending calls (by id).
    results: Vec<ContentBlock>,
    /// User messages that arrived while calls were pending: they go after the results.
    deferred: Vec<Message>,
}

impl ConversationBuilder {
    /// Takes the next event of the journal (events that say nothing to the model are passed over).
    pub fn feed(&mut self, event: &Event) {
        match event {
            Event::UserMessage { content } => self.user(content.clone()),
            Event::Thought {
                content,
                tool_calls,
                ..
            } => self.answer(content, tool_calls.as_deref().unwrap_or_default()),
            Event::ActionResult {
                action_id,
                status,
                observation_content,
                ..
            } => self.result(action_id, observation_content, *status),
            _ => {}
        }
    }

    /// [`ConversationBuilder::feed`], taking the event's texts instead of copying them.
    pub fn feed_owned(&mut self, event: Event) {
        match event {
            Event::UserMessage { content } => self.user(content),
            Event::ActionResult {
                action_id,
                status,
                observation_content,
                ..
            } => self.result(action_id, observation_content, status),
            other => self.feed(&other),
        }
    }

    /// Lends the messages so far (to a request, without copying them): the builder holds none
    /// until they are given back, and must be given no event meanwhile.
    pub fn lend(&mut self) -> Vec<Message> {
        std::mem::take(&mut self.messages)
    }

    /// Takes back the messages [`ConversationBuilder::lend`] gave.
    pub fn give_back(&mut self, messages: Vec<Message>) {
        self.messages = messages;
    }

    /// The state of the turn in progress, without the messages.
    fn clone_turn(&self) -> Self {
        Self {
            messages: Vec::new(),
            pending: self.pending.clone(),
            results: self.results.clone(),
            deferred: self.deferred.clone(),
        }
    }

    /// This conversation followed by `recent`, finished.
    fn then(mut self, recent: &[Event]) -> Vec<Message> {
        for event in recent {
            self.feed(event);
        }
        self.finish()
    }

    fn finish(mut self) -> Vec<Message> {
        self.close_turn(true);
        self.messages
    }

    fn user(&mut self, content: String) {
        let message = Message::user(content);
        if self.pending.is_empty() {
            self.messages.push(message);
        } else {
            self.deferred.push(message);
        }
    }

    fn answer(&mut self, content: &str, calls: &[crate::events::ToolCallRecord]) {
        self.close_turn(true);
        let mut blocks = Vec::with_capacity(usize::from(!content.is_empty()) + calls.len());
        if !content.is_empty() {
            blocks.push(ContentBlock::text(content));
        }
        blocks.extend(calls.iter().map(call_block));
        self.pending = calls.iter().map(|t| t.id.clone()).collect();
        self.messages.push(Message::assistant(blocks));
    }

    /// A result for a call of the current turn (anything else cannot be placed validly).
    fn result(
        &mut self,
        id: impl AsRef<str> + Into<String>,
        content: impl Into<String>,
        status: ActionStatus,
    ) {
        if !self.awaits(id.as_ref()) {
            return;
        }
        self.results.push(ContentBlock::tool_result(
            id,
            content,
            status == ActionStatus::Error,
        ));
        if self.all_answered() {
            self.close_turn(false);
        }
    }

    fn close_turn(&mut self, fill_missing: bool) {
        if self.pending.is_empty() && self.results.is_empty() {
            return;
        }
        // Exact capacities here and below: a long run's conversation holds tens of thousands of
        // these lists, and a list grown by pushes keeps room for four.
        let mut ordered = Vec::with_capacity(self.pending.len());
        for id in std::mem::take(&mut self.pending) {
            match self.results.iter().position(|r| matches!(r, ContentBlock::ToolResult { tool_call_id, .. } if *tool_call_id == id)) {
                Some(i) => ordered.push(self.results.remove(i)),
                None if fill_missing => ordered.push(ContentBlock::tool_result(id, MISSING_RESULT, true)),
                None => {}
            }
        }
        self.results.clear();
        // Calls left without a result (not filled in) leave room behind.
        ordered.shrink_to_fit();
        if !ordered.is_empty() {
            self.messages.push(Message::tool_results(ordered));
        }
        self.messages.append(&mut self.deferred);
    }

    fn all_answered(&self) -> bool {
        self.results.len() == self.pending.len()
    }

    /// Whether a result for `id` has a call of the current turn waiting for it. Calls are answered
    /// in order, so two calls with the same id take one result each.
    fn awaits(&self, id: &str) -> bool {
        let with_id = |ids: &mut dyn Iterator<Item = &str>| ids.filter(|i| *i == id).count();
        let calls = with_id(&mut self.pending.iter().map(String::as_str));
        let answered = with_id(&mut self.results.iter().filter_map(|r| match r {
            ContentBlock::ToolResult { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        }));
        answered < calls
    }
}

/// Where the conversation given to the model starts in `typed` (the latest compaction's first
/// kept answer, or the `max_iterations`-th last one, whichever is later), and that compaction's
/// count and summary.
fn kept_from(
    typed: &[Event],
    thoughts_before: u64,
    max_iterations: Option<u32>,
) -> (usize, Option<(u64, &str)>) {
    let thoughts: Vec<usize> = typed
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Event::Thought { .. }))
        .map(|(i, _)| i)
        .collect();
    let compaction = typed.iter().rev().find_map(|e| match e {
        Event::Compaction {
            iterations,
            summary,
            ..
        } => Some((*iterations, summary.as_str())),
        _ => None,
    });
    let mut start = 0;
    if let Some((iterations, _)) = compaction {
        let kept =
            usize::try_from(iterations.saturating_sub(thoughts_before)).unwrap_or(usize::MAX);
        start = thoughts.get(kept).copied().unwrap_or(typed.len());
    }
    if let Some(n) = max_iterations
        && thoughts.len() > n as usize
    {
        start = start.max(thoughts[thoughts.len() - n as usize]);
    }
    (start, compaction)
}

/// The conversation recorded in the journal.
///
/// `max_iterations` keeps the journal from the N-th last model answer on; the first user message (the
/// task) is always kept, so the model never loses sight of what it was asked. The latest
/// `COMPACTION` event replaces the iterations it covers by its summary, given with the task.
pub fn conversation(typed: &[Event], max_iterations: Option<u32>) -> Vec<Message> {
    conversation_after(typed, 0, max_iterations)
}

/// [`conversation`] of events that follow `thoughts_before` model answers (the end of a journal,
/// read from its latest compaction on: [`crate::tail`]); the first user message given is the task.
pub fn conversation_after(
    typed: &[Event],
    thoughts_before: u64,
    max_iterations: Option<u32>,
) -> Vec<Message> {
    let (start, compaction) = kept_from(typed, thoughts_before, max_iterations);
    let task = typed
        .iter()
        .position(|e| matches!(e, Event::UserMessage { .. }))
        .filter(|&i| i < start);
    let mut c = ConversationBuilder::default();
    if let Some(Event::UserMessage { content }) = task.map(|i| &typed[i]) {
        c.messages.push(Message::user(match compaction {
            Some((iterations, summary)) => format!(
                "{content}\n\n--- Earlier work ({iterations} iterations), compacted to fit the model's context window ---\n{summary}"
            ),
            None => content.clone(),
        }));
    }
    c.then(&typed[start..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{FunctionRecord, ToolCallRecord};
    use llm::Role;
    use serde_json::json;

    fn env(seq: u64, event: Event) -> Envelope {
        let v = serde_json::to_value(&event).unwrap();
        Envelope {
            seq,
            timestamp: "t".into(),
            kind: v["type"].as_str().unwrap().into(),
            payload: v["payload"].clone(),
        }
    }

    fn thought(n: u64, call: Option<&str>) -> Envelope {
        env(
            n,
            Event::Thought {
                content: format!("t{n}"),
                llm_invocation_ref: "i".into(),
                tool_calls: call.map(|id| {
                    vec![ToolCallRecord {
                        id: id.into(),
                        kind: "function".into(),
                        function: FunctionRecord {
                            name: "ls".into(),
                            arguments: "{\"a\":1}".into(),
                        },
                    }]
                }),
                usage: None,
            },
        )
    }

    fn result(n: u64, id: &str) -> Envelope {
        env(
            n,
            Event::ActionResult {
                action_id: id.into(),
                status: ActionStatus::Success,
                observation_content: format!("r{n}"),
                execution_ref: id.into(),
            },
        )
    }

    fn journal() -> Vec<Envelope> {
        vec![
            env(
                1,
                Event::RunStart {
                    run_id: "r".into(),
                    task: "task".into(),
                    agent_ref: "/a".into(),
                },
            ),
            env(
                2,
                Event::UserMessage {
                    content: "task".into(),
                },
            ),
            thought(3, Some("c1")),
            env(
                4,
                Event::ActionRequest {
                    action_id: "c1".into(),
                    tool_name: "ls".into(),
                    tool_args: json!({}),
                    resolved_command: "ls".into(),
                },
            ),
            result(5, "c1"),
            thought(6, Some("c2")),
            result(7, "c2"),
            thought(8, None),
        ]
    }

    #[test]
    fn a_resumed_conversation_holds_its_lists_at_their_exact_size() {
        let typed = typed(&journal());
        let m = conversation(&typed, None);
        for message in &m {
            assert_eq!(
                message.content.capacity(),
                message.content.len(),
                "{message:?}"
            );
        }
        // The journal's own lists, as read, are exact too.
        for event in &typed {
            if let Event::Thought {
                tool_calls: Some(calls),
                ..
            } = event
            {
                assert_eq!(calls.capacity(), calls.len());
            }
        }
    }

    /// A journal of random turns: answers with zero to three calls (ids sometimes repeated),
    /// results in any order or missing, results for calls of other turns, user messages while
    /// calls wait, requests and notes between them.
    fn random_journal(seed: u64) -> Vec<Event> {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut events = vec![Event::UserMessage {
            content: "task".into(),
        }];
        let mut open: Vec<String> = Vec::new();
        for turn in 0..40 {
            match next(6) {
                0 => events.push(Event::UserMessage {
                    content: format!("u{turn}"),
                }),
                1 => events.push(Event::SystemMessage {
                    level: crate::events::Level::Info,
                    content: format!("note {turn}"),
                }),
                2 | 3 if !open.is_empty() => {
                    let id = open.remove(next(open.len() as u64) as usize);
                    events.push(Event::ActionResult {
                        action_id: id,
                        status: if next(4) == 0 {
                            ActionStatus::Error
                        } else {
                            ActionStatus::Success
                        },
                        observation_content: format!("out {turn}"),
                        execution_ref: String::new(),
                    });
                }
                4 => events.push(Event::ActionResult {
                    action_id: format!("stray{}", next(3)),
                    status: ActionStatus::Success,
                    observation_content: "stray".into(),
                    execution_ref: String::new(),
                }),
                _ => {
                    let calls: Vec<ToolCallRecord> = (0..next(4))
                        .map(|k| ToolCallRecord {
                            id: format!("c{}", if next(5) == 0 { 0 } else { turn * 4 + k }),
                            kind: "function".into(),
                            function: FunctionRecord {
                                name: "ls".into(),
                                arguments: format!("{{\"k\":{k}}}"),
                            },
                        })
                        .collect();
                    open = calls.iter().map(|c| c.id.clone()).collect();
                    events.push(Event::Thought {
                        content: if next(3) == 0 {
                            String::new()
                        } else {
                            format!("t{turn}")
                        },
                        llm_invocation_ref: String::new(),
                        tool_calls: Some(calls).filter(|c| !c.is_empty()),
                        usage: None,
                    });
                }
            }
        }
        events
    }

    #[test]
    fn a_conversation_kept_event_by_event_is_the_one_rebuilt_from_the_events() {
        for seed in 0..200 {
            let events = random_journal(seed);
            let rebuilt = conversation(&events, None);
            // Fed one event at a time (copied or moved), asked for its messages at every step.
            let mut copied = ConversationBuilder::default();
            let mut moved = ConversationBuilder::default();
            for (i, event) in events.iter().enumerate() {
                copied.feed(event);
                moved.feed_owned(event.clone());
                assert_eq!(
                    copied.clone().finish(),
                    conversation(&events[..=i], None),
                    "{seed}/{i}"
                );
            }
            assert_eq!(moved.clone().finish(), rebuilt, "seed {seed}");
            // Kept up to the last answer, the rest given as recent events: whole, or only what
            // the recent events add, with the kept messages lent in front of it.
            let last = events
                .iter()
                .rposition(|e| matches!(e, Event::Thought { .. }))
                .unwrap_or(events.len());
            let mut before = ConversationBuilder::default();
            for event in &events[..last] {
                before.feed(event);
            }
            let recent = &events[last..];
            let whole = Past::Conversation {
                before: &before,
                recent,
            }
            .conversation(0, None);
            assert_eq!(whole, rebuilt, "seed {seed}");
            let mut after = Past::After {
                before: &before,
                recent,
            }
            .conversation(0, None);
            let lent = before.lend();
            let len = lent.len();
            after.splice(0..0, lent);
            assert_eq!(after, rebuilt, "seed {seed}");
            before.give_back(after.drain(..len).collect());
            assert_eq!(
                before.clone().finish(),
                conversation(&events[..last], None),
                "seed {seed}"
            );
        }
    }

    #[test]
    fn rebuilds_user_assistant_and_tool_turns() {
        let m = conversation(&typed(&journal()), None);
        let roles: Vec<Role> = m.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            vec![
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Assistant,
                Role::Tool,
                Role::Assistant
            ]
        );
        assert_eq!(
            m[1].content[1],
            ContentBlock::tool_call("c1", "ls", json!({"a": 1}))
        );
        assert_eq!(
            m[2].content,
            vec![ContentBlock::tool_result("c1", "r5", false)]
        );
    }

    fn compaction(n: u64, iterations: u64) -> Envelope {
        env(
            n,
            Event::Compaction {
                strategy: "summarize".into(),
                iterations,
                from_seq: 3,
                to_seq: 5,
                summary: "the summary".into(),
                tokens_before: 100,
                tokens_after: 50,
                window: 2048,
                llm_invocation_ref: None,
            },
        )
    }

    #[test]
    fn a_compaction_gives_the_task_with_its_summary_then_the_iterations_kept() {
        let mut journal = journal();
        // Journaled after the second answer's result: it replaces the first iteration.
        journal.insert(7, compaction(8, 1));
        let m = conversation(&typed(&journal), None);
        let roles: Vec<Role> = m.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            vec![Role::User, Role::Assistant, Role::Tool, Role::Assistant]
        );
        let first = m[0].text();
        assert!(
            first.starts_with("task\n\n--- Earlier work (1 iterations)"),
            "{first}"
        );
        assert!(first.ends_with("the summary"), "{first}");
        assert_eq!(
            m[1].content[1],
            ContentBlock::tool_call("c2", "ls", json!({"a": 1}))
        );
        // The latest compaction wins, and `max_iterations` still applies beside it.
        journal.push(compaction(10, 2));
        let m = conversation(&typed(&journal), None);
        assert_eq!(m.len(), 2);
        assert!(m[0].text().contains("(2 iterations)"));
        let m = conversation(&typed(&journal[..8]), Some(1));
        assert_eq!(m.len(), 3, "{m:?}");
    }

    fn user(n: u64, text: &str) -> Envelope {
        env(
            n,
            Event::UserMessage {
                content: text.into(),
            },
        )
    }

    #[test]
    fn results_always_follow_their_calls() {
        // A user message journaled between a call and its result (the original engine did this) goes
        // after the result; a call without any result gets a placeholder result.
        let journal = vec![
            user(1, "task"),
            thought(2, Some("c1")),
            user(3, "answer"),
            result(4, "c1"),
            thought(5, Some("c2")),
            user(6, "more"),
            thought(7, None),
        ];
        let m = conversation(&typed(&journal), None);
        let roles: Vec<Role> = m.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            vec![
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::User,
                Role::Assistant
            ]
        );
        assert_eq!(m[3].text(), "answer");
        assert_eq!(
            m[5].content,
            vec![ContentBlock::tool_result("c2", MISSING_RESULT, true)]
        );
    }

    /// Answer `n`, calling tool `x` once per id.
    fn thought_calling(n: u64, ids: &[&str]) -> Envelope {
        let mut answer = thought(n, Some(ids[0]));
        answer.payload["tool_calls"] = ids
            .iter()
            .map(|id| json!({"id": id, "type": "function", "function": {"name": "x", "arguments": "{}"}}))
            .collect();
        answer
    }

    #[test]
    fn results_are_put_in_call_order_and_strays_dropped() {
        let two = thought_calling(2, &["a", "b"]);
        let journal = vec![
            user(1, "t"),
            two,
            result(3, "zzz"),
            result(4, "b"),
            result(5, "a"),
        ];
        let m = conversation(&typed(&journal), None);
        assert_eq!(m.len(), 3);
        let ids: Vec<&str> = m[2]
            .content
            .iter()
            .map(|b| match b {
                ContentBlock::ToolResult { tool_call_id, .. } => tool_call_id.as_str(),
                _ => "",
            })
            .collect();
        assert_eq!(ids, vec!["a", "b"]);
    }

    #[test]
    fn calls_with_the_same_id_get_one_result_each_in_order() {
        let two = thought_calling(2, &["dup", "dup"]);
        let journal = vec![
            user(1, "t"),
            two,
            result(3, "dup"),
            result(4, "dup"),
            result(5, "dup"),
        ];
        let m = conversation(&typed(&journal), None);
        assert_eq!(m.len(), 3, "{m:?}");
        let texts: Vec<String> = m[2]
            .content
            .iter()
            .map(|b| match b {
                ContentBlock::ToolResult { content, .. } => content.clone(),
                _ => String::new(),
            })
            .collect();
        assert_eq!(texts, vec!["r3", "r4"], "the third result is a stray");
    }

    #[test]
    fn a_window_keeps_the_task() {
        let m = conversation(&typed(&journal()), Some(2));
        let roles: Vec<Role> = m.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            vec![Role::User, Role::Assistant, Role::Tool, Role::Assistant]
        );
        assert_eq!(m[0].text(), "task");
        assert_eq!(m[1].text(), "t6");
    }
}
