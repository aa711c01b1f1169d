//! Fitting the conversation into the model's context window.
//!
//! The window is configured (`llm.context_window`) or learned from a server that refused a request
//! for its length (the limit its error names; the run remembers it in its `COMPACTION` events).
//! Requests are measured without a tokenizer ([`llm::window::Estimator`]), calibrated by the
//! prompt tokens the server reports for each answer, with room kept for the answer.
//!
//! When the next request would not fit, the oldest iterations are replaced (`context.yaml`'s
//! `compaction`): by a summary the model writes in one call without tools (`summarize`), or by a
//! note (`truncate`). A `COMPACTION` event records it; [`crate::context::conversation`] gives the
//! model the task with the summary, then the iterations kept, so a tool call is never separated
//! from its result and a resumed or forked run sees what this one saw.

use std::sync::Arc;
use std::time::Instant;

use llm::window::{self, Estimator, Overflow};
use llm::{ChatRequest, ChatResponse};

use super::{Engine, EngineError, Observer, Progress};
use crate::agent::{Agent, CompactionStrategy};
use crate::context;
use crate::events::{Event, Level};

/// How many times one iteration's request may be refused for its length and made to fit again.
pub(super) const REFITS: u32 = 3;

/// The metadata key that keeps a window learned from a refusal (so that a resume reads the
/// journal's end only).
pub(super) const LEARNED_WINDOW: &str = "context_window";

/// What the engine knows of the model's context window.
#[derive(Debug, Clone)]
pub(super) struct Window {
    /// The window in tokens, configured or learned; `None` until a refusal says it.
    tokens: Option<u32>,
    estimator: Estimator,
}

impl Window {
    /// The agent's window, else the one the run learned (its latest `COMPACTION` event).
    pub(super) fn new(agent: &Agent, events: &[Event]) -> Self {
        let learned = events.iter().rev().find_map(|e| match e {
            Event::Compaction { window, .. } => u32::try_from(*window).ok().filter(|w| *w > 0),
            _ => None,
        });
        Self {
            tokens: agent.llm.context_window.or(learned),
            estimator: Estimator::default(),
        }
    }

    /// Learns from an answer to a request of `chars` characters.
    pub(super) fn calibrate(&mut self, chars: usize, response: &ChatResponse) {
        self.estimator.calibrate(chars, response.usage.input_tokens);
    }
}

/// What a compaction did, for `delta compact`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    /// Model answers replaced, from the run's start.
    pub iterations: u64,
    /// `summarize` or `truncate`.
    pub strategy: String,
    /// Estimated tokens of the next request before.
    pub tokens_before: u64,
    /// Estimated tokens of the next request after.
    pub tokens_after: u64,
}

/// What `delta compact` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactNow {
    /// A compaction was journaled.
    Compacted(Compacted),
    /// Beyond what was compacted before, the run has no more than its `keep_recent` most recent
    /// iterations, which are kept.
    NothingToCompact {
        /// The agent's `keep_recent`.
        keep_recent: u32,
    },
}

/// Why the conversation could not be made to fit.
#[derive(Debug)]
pub(super) struct NoFit(pub String);

impl Engine<'_> {
    /// Compacts now, whether or not the next request would fit (`delta compact`): the oldest
    /// iterations but the agent's `keep_recent` are replaced.
    pub fn compact_now(&mut self) -> Result<CompactNow, EngineError> {
        let request = self.build_request()?;
        let (tokens, _) = self.measure(&request);
        if let Err(NoFit(_)) = self.compact(tokens, 1, true)? {
            return Ok(CompactNow::NothingToCompact {
                keep_recent: self.setup.agent.context.compaction.keep_recent,
            });
        }
        self.io.flush();
        self.save_metadata()?;
        match self.typed.last() {
            Some(Event::Compaction {
                iterations,
                strategy,
                tokens_before,
                tokens_after,
                ..
            }) => Ok(CompactNow::Compacted(Compacted {
                iterations: *iterations,
                strategy: strategy.clone(),
                tokens_before: *tokens_before,
                tokens_after: *tokens_after,
            })),
            // `compact` journals its event last.
            _ => Ok(CompactNow::NothingToCompact {
                keep_recent: self.setup.agent.context.compaction.keep_recent,
            }),
        }
    }

    /// The request's estimated tokens, and whether it fits with room for the answer.
    fn measure(&self, request: &ChatRequest) -> (u32, bool) {
        let tokens = self.window.estimator.tokens(request);
        let fits = match self.window.tokens {
            None => true,
            Some(window) => {
                let reserve = window::answer_reserve(window, request.max_tokens);
                tokens.saturating_add(reserve) <= window
            }
        };
        (tokens, fits)
    }

    /// `request`, or a smaller one built after compacting when it would not fit.
    pub(super) fn fit(
        &mut self,
        mut request: ChatRequest,
    ) -> Result<Result<ChatRequest, NoFit>, EngineError> {
        if self.window.tokens.is_none() {
            // No window known: nothing to measure against (until a refusal says one).
            return Ok(Ok(request));
        }
        let mut rounds = 0;
        loop {
            let (tokens, fits) = self.measure(&request);
            if fits {
                return Ok(Ok(request));
            }
            rounds += 1;
            if let Err(no) = self.compact(tokens, rounds, false)? {
                // Nothing older is left to replace: the long texts of what is kept are cut, in the
                // request only (the journal keeps them whole).
                let window = self.window.tokens.unwrap_or(u32::MAX);
                let room =
                    window.saturating_sub(window::answer_reserve(window, request.max_tokens));
                return Ok(
                    match window::shrink(&request, room, &self.window.estimator) {
                        Some(cut) => {
                            self.log(&format!(
                            "Cut long texts of the request to fit the context window ({window} tokens)"
                        ));
                            Ok(cut)
                        }
                        None => Err(no),
                    },
                );
            }
            request = match self.build_request() {
                Ok(r) => r,
                Err(e) => return Ok(Err(NoFit(e.to_string()))),
            };
        }
    }

    /// A server refused `request` for its length: learns the window it named (or one a little
    /// under the request's size) and the server's count of the request.
    /// The `nth` refusal of one request was said to fit: the estimates were too low for it (text
    /// that makes many tokens per character), so they are made more cautious each time.
    pub(super) fn learn(&mut self, request: &ChatRequest, overflow: Overflow, nth: u32) {
        let chars = window::request_chars(request);
        // A count at or under the limit is the server capping it, not counting.
        if let Some(tokens) = overflow
            .prompt_tokens
            .filter(|t| overflow.window.is_none_or(|w| *t > w))
        {
            self.window.estimator.calibrate(chars, u64::from(tokens));
        }
        if let Some(window) = overflow.window.or(self.window.tokens) {
            // The refused request held more than the window's tokens.
            self.window
                .estimator
                .at_most(chars as f64 / f64::from(window) * 0.9);
        }
        if nth > 1 {
            let ratio = self.window.estimator.chars_per_token() * 0.75;
            self.window.estimator.at_most(ratio);
        }
        let estimated = self.window.estimator.tokens(request);
        let window = overflow
            .window
            .unwrap_or_else(|| estimated.saturating_mul(3) / 4)
            .max(crate::agent::MIN_CONTEXT_WINDOW);
        let window = self.window.tokens.map_or(window, |w| w.min(window));
        self.window.tokens = Some(window);
        self.metadata
            .extra
            .insert(LEARNED_WINDOW.into(), serde_json::Value::from(window));
        self.log(&format!(
            "The model's server refused a request of about {estimated} tokens ({chars} characters, \
             {:.2} per token) for its length; context window: {window} tokens",
            self.window.estimator.chars_per_token()
        ));
    }

    /// Replaces the oldest iterations so that the next request is smaller: each round keeps fewer
    /// recent iterations (the agent's `keep_recent`, then down to one). On demand (`delta
    /// compact`), exactly the agent's `keep_recent` are kept.
    fn compact(
        &mut self,
        tokens_before: u32,
        round: u32,
        on_demand: bool,
    ) -> Result<Result<(), NoFit>, EngineError> {
        self.keep_events()?;
        let compaction = self.setup.agent.context.compaction;
        // Unknown (a compaction asked for with `delta compact`): the summary is sized by the
        // conversation itself, and the event says 0.
        let known = self.window.tokens;
        let window = known.unwrap_or_else(|| tokens_before.saturating_mul(2).max(4096));
        let refuse = |why: &str| {
            Ok(Err(NoFit(format!(
                "the conversation (about {tokens_before} tokens) does not fit the model's context \
                 window ({window} tokens): {why}"
            ))))
        };
        if compaction.strategy == CompactionStrategy::Off {
            return refuse("compaction is off (context.yaml)");
        }
        let fewest = if on_demand {
            1.max(compaction.keep_recent)
        } else {
            1
        };
        let most = (compaction.keep_recent as usize)
            .saturating_sub(round as usize - 1)
            .max(1);
        let Some(Plan {
            replace,
            cut,
            from_seq,
        }) = self.plan(fewest as usize, most)
        else {
            return refuse("nothing is left to compact (only the most recent iteration remains)");
        };
        let (summary, invocation) = match compaction.strategy {
            CompactionStrategy::Summarize => self.summarize(cut, window)?,
            _ => (truncated(replace), None),
        };
        let event = Event::Compaction {
            strategy: compaction.strategy.as_str().into(),
            iterations: replace as u64,
            from_seq,
            to_seq: self.seqs[cut - 1],
            summary,
            tokens_before: u64::from(tokens_before),
            tokens_after: 0,
            window: u64::from(known.unwrap_or(0)),
            llm_invocation_ref: invocation,
        };
        let mut event = self.with_tokens_after(event);
        if let Event::Compaction {
            summary,
            tokens_after,
            strategy,
            ..
        } = &mut event
            && *tokens_after >= u64::from(tokens_before)
        {
            // A summary longer than what it replaces makes no room: the note does.
            *summary = truncated(replace);
            *strategy = CompactionStrategy::Truncate.as_str().into();
            event = self.with_tokens_after(event);
        }
        let note = describe(&event, replace);
        let progress = match &event {
            Event::Compaction {
                strategy,
                iterations,
                tokens_before,
                tokens_after,
                ..
            } => Progress::Compacted {
                strategy: strategy.clone(),
                iterations: *iterations,
                tokens_before: *tokens_before,
                tokens_after: *tokens_after,
                note: note.clone(),
            },
            _ => Progress::Note(note.clone()),
        };
        self.append(event)?;
        self.log(&note);
        self.observer.progress(progress);
        Ok(Ok(()))
    }

    /// Which iterations a compaction replaces: as many of the most recent (`most` down to
    /// `fewest`) are kept as still let it replace more than the last compaction did.
    fn plan(&self, fewest: usize, most: usize) -> Option<Plan> {
        let thoughts: Vec<usize> = (self.typed.iter().enumerate())
            .filter(|(_, e)| matches!(e, Event::Thought { .. }))
            .map(|(i, _)| i)
            .collect();
        let previous = self.typed.iter().rev().find_map(|e| match e {
            Event::Compaction {
                iterations,
                from_seq,
                ..
            } => Some((
                usize::try_from(*iterations).unwrap_or(usize::MAX),
                *from_seq,
            )),
            _ => None,
        });
        // Counted from the run's start (the events held may begin after a compaction).
        let before = usize::try_from(self.thoughts_before).unwrap_or(usize::MAX);
        let total = before + thoughts.len();
        let floor = previous.map_or(before, |(done, _)| done.max(before));
        let replace = (fewest..=most)
            .rev()
            .map(|keep| total.saturating_sub(keep))
            .find(|replace| *replace > floor && *replace > 0)?;
        let cut = thoughts[replace - before];
        Some(Plan {
            replace,
            cut,
            from_seq: previous.map_or(self.seqs[thoughts[0]], |(_, from)| from),
        })
    }

    /// `event` with the estimated size of the request it leads to.
    fn with_tokens_after(&mut self, mut event: Event) -> Event {
        self.typed.push(event.clone());
        let after = self.build_request().map(|r| self.measure(&r).0);
        self.typed.pop();
        if let (Event::Compaction { tokens_after, .. }, Ok(after)) = (&mut event, after) {
            *tokens_after = u64::from(after);
        }
        event
    }

    /// The model's summary of the conversation before event `cut` (a request without tools, fitted
    /// into the window), and the call's `io/invocations/` id. A summary that cannot be had leaves a
    /// note instead (the run goes on; what was dropped is in the journal).
    fn summarize(
        &mut self,
        cut: usize,
        window: u32,
    ) -> Result<(String, Option<String>), EngineError> {
        let messages = context::conversation_after(&self.typed[..cut], self.thoughts_before, None);
        let answer = window::summary_answer(window);
        let model = self.setup.agent.llm.model.clone().unwrap_or_default();
        let request = Arc::new(window::summary_request(
            &model,
            &messages,
            window,
            answer,
            &self.window.estimator,
        ));
        let replaced = self.typed[..cut]
            .iter()
            .filter(|e| matches!(e, Event::Thought { .. }))
            .count();
        let id = self.setup.ids.uuid_v7(self.setup.clock.now()).to_string();
        let started = Instant::now();
        match self.call_llm(&request) {
            Some(Ok(response)) if !response.text().trim().is_empty() => {
                self.save_invocation(&id, request, &response, started.elapsed());
                self.metadata.usage.add(response.usage);
                Ok((self.redact(response.text().trim()), Some(id)))
            }
            Some(Ok(response)) => {
                self.save_invocation(&id, request, &response, started.elapsed());
                self.system(Level::Warn, "The summary the model wrote was empty")?;
                Ok((truncated(replaced), Some(id)))
            }
            Some(Err(e)) => {
                self.save_failed_invocation(&id, request, &e, started.elapsed());
                self.system(
                    Level::Warn,
                    &format!("The conversation could not be summarized ({e}); its oldest part was dropped instead"),
                )?;
                Ok((truncated(replaced), Some(id)))
            }
            None => Ok((truncated(replaced), None)),
        }
    }
}

/// What a compaction replaces.
struct Plan {
    /// Model answers from the run's start.
    replace: usize,
    /// The index (in the events held) of the first answer kept.
    cut: usize,
    /// The first journal line replaced.
    from_seq: u64,
}

/// The progress line of a compaction.
fn describe(event: &Event, replace: usize) -> String {
    let Event::Compaction {
        tokens_before,
        tokens_after,
        strategy,
        window,
        ..
    } = event
    else {
        return String::new();
    };
    let what = if strategy == CompactionStrategy::Summarize.as_str() {
        "summarized"
    } else {
        "dropped"
    };
    let window = match window {
        0 => "on demand".to_string(),
        w => format!("to fit the context window ({w} tokens)"),
    };
    format!(
        "Compacted the conversation {window}: {replace} iteration(s) {what}, about \
         {tokens_before} → {tokens_after} tokens"
    )
}

/// The note that stands for dropped iterations.
fn truncated(iterations: usize) -> String {
    format!(
        "{iterations} earlier iteration(s) were dropped to fit the model's context window. Their \
         tool calls ran; their results are in the run's journal."
    )
}
