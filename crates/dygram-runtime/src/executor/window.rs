//! Fitting an agent node's conversation into the model's context window.
//!
//! The window is the node's `contextWindow` attribute, else the machine's, and what a server said
//! when it refused a request for its length (remembered in the state, by model, so that later
//! calls know it; the smaller wins). Requests are measured without a tokenizer
//! ([`llm::window::Estimator`], calibrated by the prompt tokens each answer reports), with room
//! kept for the answer, whose limit is then a part of the window ([`llm::window::answer_limit`]).
//!
//! When the next request would not fit, the conversation's oldest answers (each with its tool
//! results) are replaced by a summary the model writes in one call without tools, or by a note
//! when that call fails; the prompt and the most recent exchanges stay. The summary is given with
//! the prompt in the first message, so the saved conversation is the compacted one, and the path
//! records the compaction ([`Compaction`]). When only the latest exchange is left and it is still
//! too long, its long texts are shortened. A request refused for its length is compacted and sent
//! again once. Compaction needs a client: answers given by hand see the whole conversation.

use llm::window::{self, Estimator, Overflow};
use llm::{ChatRequest, ChatResponse, LlmClient, LlmError, Message, Role, StreamEvent};
use serde_json::Value;

use super::{ExecutionEvent, Executor, TurnOutcome};
use crate::state::{Compacted, Compaction, ModelWindow, TurnState};

/// The attribute that sets the window, on the node or on the machine (as `modelId` is).
pub const CONTEXT_WINDOW: &str = "contextWindow";

/// The smallest window taken from a setting or learned (tokens).
pub const MIN_CONTEXT_WINDOW: u32 = 256;

/// Recent exchanges kept by the first compaction of a request; later rounds keep fewer, down to
/// one.
pub const KEEP_RECENT: usize = 2;

impl Executor<'_> {
    /// One round trip of the open conversation through `client`: the request fitted into the
    /// window, sent (compacted and sent again once when the server refuses it for its length), and
    /// the answer applied.
    pub fn exchange(&mut self, client: &dyn LlmClient) -> Result<TurnOutcome, LlmError> {
        let Some(request) = self.pending_request() else {
            return Ok(TurnOutcome::Idle);
        };
        let request = self.fit(client, request);
        self.announce(&request);
        let (request, response) = match self.ask(client, &request) {
            Ok(response) => (request, response),
            Err(error) => self.after_refusal(client, &request, error)?,
        };
        self.calibrate(&request, &response);
        let Some(turn) = self.state.turn_state.clone() else {
            return Ok(TurnOutcome::Idle);
        };
        Ok(self.apply_response(turn, response))
    }

    /// `request` failed with `error`: when the server refused it for its length, the window is
    /// learned, the conversation compacted and the smaller request sent, once (the same round trip,
    /// announced once). Any other error, a conversation that cannot be made smaller, or a second
    /// refusal, is the error.
    fn after_refusal(
        &mut self,
        client: &dyn LlmClient,
        request: &ChatRequest,
        error: LlmError,
    ) -> Result<(ChatRequest, ChatResponse), LlmError> {
        let Some(overflow) = window::overflow(&error) else {
            return Err(error);
        };
        self.learn(request, overflow);
        let Some(retry) = self.pending_request() else {
            return Err(error);
        };
        let mut retry = self.fit(client, retry);
        if retry == *request {
            // The estimate found it small enough; the server did not.
            let tokens = self.estimator(&request.model).tokens(request);
            if !self.make_room(client, tokens, 1) {
                return Err(error);
            }
            match self.pending_request() {
                Some(smaller) => retry = self.fit(client, smaller),
                None => return Err(error),
            }
        }
        let response = client.complete(&retry)?;
        Ok((retry, response))
    }

    /// Sends `request`: as a stream when the options ask for one (each piece of text announced as
    /// it arrives), else whole. A streamed request the server refuses before answering anything
    /// ([`refuses_streams`]: some servers cannot stream with tools) is sent again whole, and later
    /// requests of this executor go whole from the start.
    fn ask(
        &mut self,
        client: &dyn LlmClient,
        request: &ChatRequest,
    ) -> Result<ChatResponse, LlmError> {
        if !self.options.stream || self.stream_refused {
            return client.complete(request);
        }
        let path = self
            .state
            .turn_state
            .as_ref()
            .map(|t| t.path_id.clone())
            .unwrap_or_default();
        let mut heard = false;
        let events = &mut self.events;
        let streamed = client.complete_streaming(request, &mut |event| {
            heard = true;
            if let StreamEvent::TextDelta(text) = event {
                events.announce(ExecutionEvent::TextDelta {
                    path: path.clone(),
                    text,
                });
            }
        });
        match streamed {
            Err(error) if !heard && refuses_streams(&error) => {
                self.stream_refused = true;
                client.complete(request)
            }
            other => other,
        }
    }

    /// The `LlmCall` event of a request about to be sent.
    fn announce(&mut self, request: &ChatRequest) {
        let Some(turn) = self.state.turn_state.as_ref() else {
            return;
        };
        self.events.push(ExecutionEvent::LlmCall {
            path: turn.path_id.clone(),
            node: turn.node_name.clone(),
            tools: turn.tools.iter().map(|t| t.name.clone()).collect(),
            messages: turn.messages.len(),
            model: request.model.clone(),
        });
    }

    /// The context window of the open conversation `turn`, in tokens: the node's or the machine's
    /// `contextWindow`, and what a server said of the model's (the smaller when both are known).
    pub fn context_window(&self, turn: &TurnState) -> Option<u32> {
        let learned = self
            .state
            .model_windows
            .get(&self.model_for(turn))
            .and_then(|w| w.context_window);
        match (self.configured_window(&turn.node_name), learned) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The node's `contextWindow`, else the machine's.
    fn configured_window(&self, node: &str) -> Option<u32> {
        let node = self.machine.node(node);
        node.and_then(|n| tokens_of(n.attribute(CONTEXT_WINDOW)))
            .or_else(|| tokens_of(self.machine.attributes.get(CONTEXT_WINDOW)))
    }

    /// The estimator for `model`: calibrated by earlier answers when the state remembers it.
    fn estimator(&self, model: &str) -> Estimator {
        self.state
            .model_windows
            .get(model)
            .and_then(|w| w.chars_per_token)
            .map_or_else(Estimator::default, Estimator::with_chars_per_token)
    }

    /// Learns the size of a request from the server's count (kept only for conversations with a
    /// known window: elsewhere nothing is measured).
    fn calibrate(&mut self, request: &ChatRequest, response: &ChatResponse) {
        let known =
            (self.state.turn_state.as_ref()).is_some_and(|t| self.context_window(t).is_some());
        if !known {
            return;
        }
        let mut estimator = self.estimator(&request.model);
        estimator.calibrate(window::request_chars(request), response.usage.input_tokens);
        let entry = self.model_window(&request.model);
        entry.chars_per_token = Some(estimator.chars_per_token());
    }

    fn model_window(&mut self, model: &str) -> &mut ModelWindow {
        self.state
            .model_windows
            .entry(model.to_string())
            .or_default()
    }

    /// A server refused `request` for its length: remembers the window it named (or one a little
    /// under the request's size) and its count of the request.
    fn learn(&mut self, request: &ChatRequest, overflow: Overflow) {
        let mut estimator = self.estimator(&request.model);
        if let Some(tokens) = overflow.prompt_tokens {
            estimator.calibrate(window::request_chars(request), u64::from(tokens));
        }
        let estimated = estimator.tokens(request);
        let window = overflow
            .window
            .unwrap_or_else(|| estimated.saturating_mul(3) / 4)
            .max(MIN_CONTEXT_WINDOW);
        let entry = self.model_window(&request.model);
        entry.context_window = Some(entry.context_window.map_or(window, |w| w.min(window)));
        entry.chars_per_token = Some(estimator.chars_per_token());
    }

    /// `request`, or the smaller one of the conversation compacted until it fits (or until nothing
    /// is left to compact: the server then decides).
    fn fit(&mut self, client: &dyn LlmClient, mut request: ChatRequest) -> ChatRequest {
        let mut round = 0;
        loop {
            let Some(window) = self
                .state
                .turn_state
                .as_ref()
                .and_then(|t| self.context_window(t))
            else {
                return request;
            };
            let (tokens, fits) = self
                .estimator(&request.model)
                .measure(&request, Some(window));
            if fits {
                return request;
            }
            round += 1;
            if !self.make_room(client, tokens, round) {
                return request;
            }
            match self.pending_request() {
                Some(smaller) => request = smaller,
                None => return request,
            }
        }
    }

    /// Makes the open conversation smaller, round `round` of a request: its oldest answers are
    /// replaced keeping [`KEEP_RECENT`] exchanges (one fewer each round, at least one); when only
    /// one is left, its long texts are shortened. False when nothing could be made smaller.
    fn make_room(&mut self, client: &dyn LlmClient, tokens: u32, round: usize) -> bool {
        let keep = KEEP_RECENT.saturating_sub(round.saturating_sub(1)).max(1);
        self.compact(client, tokens, keep)
            || (keep > 1 && self.compact(client, tokens, 1))
            || self.shorten(tokens)
    }

    /// Replaces the open conversation's oldest answers, keeping the `keep` most recent exchanges.
    /// False when there was nothing to replace.
    fn compact(&mut self, client: &dyn LlmClient, tokens_before: u32, keep: usize) -> bool {
        let Some(turn) = self.state.turn_state.clone() else {
            return false;
        };
        let Some(window) = self.context_window(&turn) else {
            return false;
        };
        let Some(range) = window::oldest_exchanges(&turn.messages, keep) else {
            return false;
        };
        let answers = (turn.messages[range.clone()].iter())
            .filter(|m| m.role == Role::Assistant)
            .count() as u64;
        let total = answers + turn.compacted.as_ref().map_or(0, |c| c.answers);
        let (summary, strategy) = self.summarize(client, &turn, range.end, window, total);
        let mut messages = vec![Message::user(with_summary(
            &turn.system_prompt,
            total,
            &summary,
        ))];
        messages.extend_from_slice(&turn.messages[1.min(range.start)..range.start]);
        messages.extend_from_slice(&turn.messages[range.end..]);
        let compacted = TurnState {
            messages,
            compacted: Some(Compacted {
                answers: total,
                summary,
            }),
            ..turn
        };
        self.state.turn_state = Some(compacted);
        self.record(answers, strategy, window, tokens_before);
        true
    }

    /// Cuts the long texts and tool results of the conversation's exchanges (the prompt stays)
    /// to half the longest one's length. False when none is longer than 200 characters.
    fn shorten(&mut self, tokens_before: u32) -> bool {
        let Some(mut turn) = self.state.turn_state.clone() else {
            return false;
        };
        let Some(window) = self.context_window(&turn) else {
            return false;
        };
        let start = 1.min(turn.messages.len());
        let longest = window::longest_block(&turn.messages[start..]);
        if longest <= 200 {
            return false;
        }
        let short = window::shorten(&turn.messages[start..], longest / 2);
        turn.messages.truncate(start);
        turn.messages.extend(short);
        self.state.turn_state = Some(turn);
        self.record(0, "shorten", window, tokens_before);
        true
    }

    /// Records a compaction of the open conversation on its path, and as an event.
    fn record(&mut self, answers: u64, strategy: &str, window: u32, tokens_before: u32) {
        let Some(turn) = self.state.turn_state.as_ref() else {
            return;
        };
        let (path, node, turn_count) = (
            turn.path_id.clone(),
            turn.node_name.clone(),
            turn.turn_count,
        );
        let summary = (turn.compacted.as_ref()).map_or_else(String::new, |c| c.summary.clone());
        let tokens_after = self
            .pending_request()
            .map_or(0, |r| self.estimator(&r.model).tokens(&r));
        self.events.push(ExecutionEvent::Compacted {
            path: path.clone(),
            node: node.clone(),
            answers,
            strategy: strategy.to_string(),
            window,
            tokens_before,
            tokens_after,
        });
        let record = Compaction {
            node,
            turn: turn_count,
            answers,
            strategy: strategy.to_string(),
            summary,
            window,
            tokens_before,
            tokens_after,
            timestamp: (self.options.clock)(),
        };
        if let Some(p) = self.state.path_mut(&path) {
            p.compactions.push(record);
        }
    }

    /// The model's summary of the conversation's messages before `end` (one call, no tools, fitted
    /// into the window), or a note standing for the `answers` replaced when it cannot be had.
    fn summarize(
        &mut self,
        client: &dyn LlmClient,
        turn: &TurnState,
        end: usize,
        window: u32,
        answers: u64,
    ) -> (String, &'static str) {
        let model = self.model_for(turn);
        let answer = (window / 4)
            .clamp(64, 1024)
            .min(self.options.max_tokens.max(64));
        let estimator = self.estimator(&model);
        let request =
            window::summary_request(&model, &turn.messages[..end], window, answer, &estimator);
        match client.complete(&request) {
            Ok(response) if !response.text().trim().is_empty() => {
                (response.text().trim().to_string(), "summarize")
            }
            _ => (truncated(answers), "truncate"),
        }
    }
}

/// Whether a streamed request that failed before any piece of the answer arrived may be a server
/// that cannot stream it: a refusal (400, 5xx) or a stream that is empty or broken (llama.cpp's
/// server answers a streamed request with tools by an empty 200). Not the failures that a request
/// without a stream would meet too (the key, the rate, the network, time).
fn refuses_streams(error: &LlmError) -> bool {
    matches!(
        error,
        LlmError::BadRequest { .. }
            | LlmError::Server { .. }
            | LlmError::Decode { .. }
            | LlmError::StreamError { .. }
            | LlmError::IncompleteStream { .. }
    )
}

/// The first message of a compacted conversation: the prompt, then what stands for the answers
/// replaced.
fn with_summary(prompt: &str, answers: u64, summary: &str) -> String {
    format!(
        "{prompt}\n\n--- Your earlier turns at this node ({answers} answer(s) with their tool \
         results), summarized to fit the model's context window ---\n{summary}"
    )
}

/// The note that stands for answers replaced without a summary.
fn truncated(answers: u64) -> String {
    format!(
        "{answers} earlier answer(s) and their tool results were left out to fit the model's \
         context window. The tools they called have run; their effects are in the contexts."
    )
}

/// A window written as a number of tokens (a number, or text holding one), when it is one.
fn tokens_of(value: Option<&Value>) -> Option<u32> {
    let n = match value? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }?;
    u32::try_from(n).ok().filter(|n| *n >= MIN_CONTEXT_WINDOW)
}
