//! What the engine keeps of a run's past.
//!
//! A run whose journal is read whole (no context window) needs its past only as the conversation
//! the model sees. Such a run keeps that conversation, fed event by event as the journal is read
//! (a block of the file at a time) and as events are journaled, plus the events since the model's
//! last answer, which are all that settling calls, approvals and agent tools look at. A resume of
//! a long run then holds the conversation and its request, not every event as well.
//!
//! The conversation goes into each request without being copied: it is lent to the request
//! ([`Lent`]) and taken back once the model has answered, before anything more is journaled.
//!
//! The events themselves are kept (`Kept::Events`) when the journal is read from its end (a
//! context window bounds it), when the recipe keeps only the last iterations, and once the
//! conversation must be compacted: compaction reads the journal again and plans on its events.

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;

use llm::{ChatRequest, Message};
use store::{Clock, StoreError};

use super::{Engine, EngineError, EngineSetup, catch_up, compact};
use crate::agent::HookName;
use crate::agent::{Agent, Source};
use crate::context::{ConversationBuilder, Past};
use crate::events::{Event, Opened, RunJournal};
use crate::metadata::{RunMetadata, TokenTotals};

/// What the engine keeps of the journal's past.
#[derive(Debug)]
pub(super) enum Kept {
    /// Every event read or journaled (the engine's `typed`).
    Events,
    /// The conversation of every event before the model's last answer; `typed` holds the events
    /// from that answer on.
    Conversation(Box<ConversationBuilder>),
}

/// Where a request holds the kept conversation's messages, lent to it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Lent {
    at: usize,
    len: usize,
}

/// Whether the run's past can be kept as its conversation: a journal read whole, whose recipe
/// gives the model the whole conversation.
fn keeps_conversation(agent: &Agent, budget: bool) -> bool {
    !budget
        && agent.context.sources.iter().all(|s| {
            !matches!(
                s,
                Source::Journal {
                    max_iterations: Some(_),
                    ..
                }
            )
        })
}

/// Counts model answers and adds up the usage of those the metadata has not counted yet (a crash
/// can keep the last answers from it).
pub(super) struct Tally {
    counted: u64,
    answers: u64,
    usage: TokenTotals,
}

impl Tally {
    pub(super) fn new(metadata: &RunMetadata) -> Self {
        Self {
            counted: metadata.iterations_completed,
            answers: 0,
            usage: TokenTotals::default(),
        }
    }

    pub(super) fn see(&mut self, event: &Event) {
        if let Event::Thought { usage, .. } = event {
            if self.answers >= self.counted {
                self.usage.add(usage.unwrap_or_default());
            }
            self.answers += 1;
        }
    }

    /// Brings `metadata`'s counters up to the journal's.
    pub(super) fn apply(self, metadata: &mut RunMetadata) {
        metadata.usage.absorb(self.usage);
        metadata.iterations_completed = self.answers;
    }
}

/// The run's journal opened for the engine, with its past as the engine keeps it.
pub(super) struct Opening {
    /// The journal, and the events kept as events.
    pub(super) opened: Opened,
    /// What is kept of the rest.
    pub(super) kept: Kept,
    /// The journal has the run's first events (`RUN_START`).
    pub(super) has_start: bool,
}

/// Opens the run's journal: a block at a time into its conversation where the run can keep that,
/// else its end only (a context window bounds the request), else whole; `metadata`'s counters are
/// brought up to what the journal says.
pub(super) fn open(setup: &EngineSetup, metadata: &mut RunMetadata) -> Result<Opening, StoreError> {
    let path = setup.run.journal();
    let budget = setup.agent.llm.context_window.is_some()
        || metadata.extra.contains_key(compact::LEARNED_WINDOW);
    if keeps_conversation(&setup.agent, budget)
        && let Some(opening) = stream(&path, setup.clock, metadata)?
    {
        return Ok(opening);
    }
    let opened = if budget {
        RunJournal::open_tail(&path, setup.clock)?
    } else {
        RunJournal::open(&path, setup.clock)?
    };
    if opened.thoughts_before > 0 {
        // The counters are the metadata's; the journal's end can only say how many answers
        // there were (a crash may have kept the last ones from the metadata).
        let answers = opened.thoughts_before
            + opened
                .events
                .iter()
                .filter(|e| matches!(e, Event::Thought { .. }))
                .count() as u64;
        metadata.iterations_completed = metadata.iterations_completed.max(answers);
    } else {
        catch_up(metadata, &opened.events);
    }
    let has_start = opened
        .events
        .iter()
        .any(|e| matches!(e, Event::RunStart { .. }));
    Ok(Opening {
        opened,
        kept: Kept::Events,
        has_start,
    })
}

/// Reads the journal at `path` into its conversation, bringing `metadata`'s counters up to it.
/// `None` where the events are needed after all (a journal to repair, or one that was compacted),
/// with `metadata` untouched.
fn stream(
    path: &Path,
    clock: Clock,
    metadata: &mut RunMetadata,
) -> Result<Option<Opening>, StoreError> {
    let mut conversation = ConversationBuilder::default();
    let mut recent: Vec<Event> = Vec::new();
    let mut seqs = Vec::new();
    let mut tally = Tally::new(metadata);
    let mut has_start = false;
    let journal = RunJournal::open_streamed(path, clock, |seq, event| {
        if matches!(event, Event::Compaction { .. }) {
            // A compacted run (`delta compact` without a window): its events are read instead.
            return ControlFlow::Break(());
        }
        tally.see(&event);
        has_start |= matches!(event, Event::RunStart { .. });
        push_recent(&mut conversation, &mut recent, &mut seqs, seq, event);
        ControlFlow::Continue(())
    })?;
    let Some(journal) = journal else {
        return Ok(None);
    };
    tally.apply(metadata);
    Ok(Some(Opening {
        opened: Opened {
            journal,
            events: recent,
            seqs,
            thoughts_before: 0,
            recovered: None,
        },
        kept: Kept::Conversation(Box::new(conversation)),
        has_start,
    }))
}

/// Adds `event` (`seq`) to the events since the model's last answer: an answer moves the events
/// before it into `conversation`.
fn push_recent(
    conversation: &mut ConversationBuilder,
    recent: &mut Vec<Event>,
    seqs: &mut Vec<u64>,
    seq: u64,
    event: Event,
) {
    if matches!(event, Event::Thought { .. }) {
        for older in recent.drain(..) {
            conversation.feed_owned(older);
        }
        seqs.clear();
    }
    recent.push(event);
    seqs.push(seq);
}

impl Engine<'_> {
    /// Keeps the journal's newest event, `seq`: where the past is kept as the conversation, a
    /// model answer moves the events before it into the conversation.
    pub(super) fn keep(&mut self, seq: u64, event: Event) -> Result<(), EngineError> {
        if self.lent.is_some() && matches!(event, Event::Thought { .. }) {
            // The conversation was not taken back from its request: it is read again, with every
            // event (this one is in the file already).
            return self.keep_events();
        }
        match &mut self.kept {
            Kept::Conversation(conversation) => {
                push_recent(conversation, &mut self.typed, &mut self.seqs, seq, event);
            }
            Kept::Events => {
                self.seqs.push(seq);
                self.typed.push(event);
            }
        }
        Ok(())
    }

    /// Keeps every event from now on (compaction plans on them): a run that kept its conversation
    /// reads its journal again, every line journaled so far being in the file.
    pub(super) fn keep_events(&mut self) -> Result<(), EngineError> {
        if matches!(self.kept, Kept::Events) {
            return Ok(());
        }
        let opened = RunJournal::open(&self.setup.run.journal(), self.setup.clock)?;
        self.typed = opened.events;
        self.seqs = opened.seqs;
        self.thoughts_before = 0;
        self.kept = Kept::Events;
        self.lent = None;
        Ok(())
    }

    /// The journal's past for the next request. Where the conversation is kept and lent (a
    /// recipe with one journal source, and no `pre_llm_req` hook that could replace the request),
    /// only what the events since the last answer add to it: [`Engine::lend`] puts the rest in.
    pub(super) fn past(&self) -> Past<'_> {
        match &self.kept {
            Kept::Events => Past::Events(&self.typed),
            Kept::Conversation(before) if self.lends() => Past::After {
                before,
                recent: &self.typed,
            },
            Kept::Conversation(before) => Past::Conversation {
                before,
                recent: &self.typed,
            },
        }
    }

    fn lends(&self) -> bool {
        let journals = (self.setup.agent.context.sources.iter())
            .filter(|s| matches!(s, Source::Journal { .. }))
            .count();
        journals == 1 && !self.hooks.has(HookName::PreLlmReq)
    }

    /// Lends the kept conversation to `messages` (built from [`Engine::past`]) at `journal_at`.
    pub(super) fn lend(&mut self, messages: &mut Vec<Message>, journal_at: Option<usize>) {
        if !self.lends() {
            return;
        }
        let (Kept::Conversation(before), Some(at)) = (&mut self.kept, journal_at) else {
            return;
        };
        let lent = before.lend();
        let len = lent.len();
        messages.splice(at..at, lent);
        self.lent = Some(Lent { at, len });
    }

    /// Takes back the conversation lent to `request` once the model has answered (or not): the
    /// model's worker has let go of the request; the `io/` writer may still hold it (a record
    /// written from it), and is waited for.
    pub(super) fn reclaim(&mut self, request: Arc<ChatRequest>) -> Result<(), EngineError> {
        if self.lent.is_none() {
            return Ok(());
        }
        let request = self.unshare(request);
        self.take_back(request)
    }

    /// `request`, no longer shared: the `io/` writer (which may hold it for a record) is waited
    /// for, and where something else still holds it (a model call left behind by an interrupt),
    /// a copy.
    pub(super) fn unshare(&self, request: Arc<ChatRequest>) -> ChatRequest {
        Arc::try_unwrap(request).unwrap_or_else(|shared| {
            self.io.flush();
            Arc::unwrap_or_clone(shared)
        })
    }

    /// Takes the conversation lent to `request` back (before any more events are kept); should
    /// the request not hold it whole, the journal is read again, with every event.
    pub(super) fn take_back(&mut self, request: ChatRequest) -> Result<(), EngineError> {
        let Some(Lent { at, len }) = self.lent.take() else {
            return Ok(());
        };
        let mut messages = request.messages;
        match &mut self.kept {
            Kept::Conversation(before) if messages.len() >= at + len => {
                messages.truncate(at + len);
                messages.drain(..at);
                before.give_back(messages);
                Ok(())
            }
            _ => self.keep_events(),
        }
    }
}
