//! Fitting a conversation into a model's context window, for both tools.
//!
//! * **Counting** without a tokenizer: a request's size in characters, divided by a
//!   characters-per-token ratio that starts cautious and is calibrated by the `prompt_tokens`
//!   servers report for the requests they answered ([`Estimator`]).
//! * **Learning** a window: a server that refuses a request for its length usually says its limit
//!   (OpenAI's and llama.cpp's wording, Anthropic's); [`overflow`] reads it.
//! * **Summarizing**: the request that asks the model, without tools, to summarize the oldest part
//!   of a conversation ([`summary_request`]), fitted into the window itself.
//! * **Cutting** a list of messages: which oldest exchanges to replace without separating a tool
//!   call from its results ([`oldest_exchanges`]), and, as a last resort, shortening long texts
//!   ([`shorten`]); the answer limit to ask for in a small window ([`answer_limit`]).
//!
//! What to compact and how it is recorded is each engine's (delta journals it; dygram keeps it in
//! its conversation state and on the path); the arithmetic and the wording are shared here.

use std::ops::Range;

use serde_json::Value;

use crate::error::LlmError;
use crate::types::{ChatRequest, ContentBlock, Message, Role};

/// Characters per token assumed before any server has reported a count: cautious (English prose
/// is about 4; code and JSON fewer).
pub const DEFAULT_CHARS_PER_TOKEN: f64 = 3.0;

/// Tokens kept free for the answer when the request sets no `max_tokens`: an eighth of the window,
/// at most 1 024.
pub fn answer_reserve(window: u32, max_tokens: Option<u32>) -> u32 {
    max_tokens.unwrap_or_else(|| (window / 8).min(1024))
}

/// The output limit to ask for in a window of `window` tokens when the caller would ask for
/// `max_tokens`: at most a quarter of the window (and never under 64 tokens), so that a generous
/// default limit does not leave the prompt without room (or make a server refuse every request).
pub fn answer_limit(window: u32, max_tokens: u32) -> u32 {
    max_tokens.min((window / 4).max(64))
}

/// Estimates token counts from sizes, calibrated by what servers report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimator {
    chars_per_token: f64,
}

impl Default for Estimator {
    fn default() -> Self {
        Self {
            chars_per_token: DEFAULT_CHARS_PER_TOKEN,
        }
    }
}

impl Estimator {
    /// An estimator that goes on from a ratio learned before (saved with a conversation); the ratio
    /// is kept within the bounds [`Estimator::calibrate`] keeps it in (a value that is not a number
    /// gives the default).
    pub fn with_chars_per_token(ratio: f64) -> Self {
        if ratio.is_nan() {
            return Self::default();
        }
        Self {
            chars_per_token: ratio.clamp(1.0, 6.0),
        }
    }

    /// The request's estimated tokens, and whether it fits a window of `window` tokens (when one is
    /// known) with room for the answer ([`answer_reserve`] of the request's `max_tokens`).
    pub fn measure(&self, request: &ChatRequest, window: Option<u32>) -> (u32, bool) {
        let tokens = self.tokens(request);
        let fits = window.is_none_or(|window| {
            tokens.saturating_add(answer_reserve(window, request.max_tokens)) <= window
        });
        (tokens, fits)
    }

    /// The ratio in use.
    pub fn chars_per_token(&self) -> f64 {
        self.chars_per_token
    }

    /// Learns from a request of `chars` characters that the server counted as `tokens`. The ratio
    /// follows the observations, kept 10 % on the cautious side, and never rises above 6.
    pub fn calibrate(&mut self, chars: usize, tokens: u64) {
        if tokens < 16 || chars < 64 {
            return;
        }
        let observed = chars as f64 / tokens as f64 * 0.9;
        self.chars_per_token = observed.clamp(1.0, 6.0);
    }

    /// Lowers the ratio to `chars_per_token` (not under 1) when it is higher: after a server counted
    /// more tokens than estimated.
    pub fn at_most(&mut self, chars_per_token: f64) {
        if chars_per_token.is_finite() {
            self.chars_per_token = self.chars_per_token.min(chars_per_token.max(1.0));
        }
    }

    /// Estimated tokens of `request` (messages and tool definitions).
    pub fn tokens(&self, request: &ChatRequest) -> u32 {
        let tokens = request_chars(request) as f64 / self.chars_per_token;
        tokens.ceil().min(f64::from(u32::MAX)) as u32
    }

    /// Estimated tokens of `text`.
    pub fn text_tokens(&self, text: &str) -> u32 {
        (text.chars().count() as f64 / self.chars_per_token).ceil() as u32
    }

    /// How many characters make `tokens` tokens.
    pub fn chars_for(&self, tokens: u32) -> usize {
        (f64::from(tokens) * self.chars_per_token) as usize
    }
}

/// The size of what a request sends the model, in characters: the text of every message (with a
/// little for its framing), every tool call and result, and the tool definitions.
pub fn request_chars(request: &ChatRequest) -> usize {
    let messages: usize = request.messages.iter().map(message_chars).sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len() + 16)
        .sum();
    messages + tools
}

fn message_chars(message: &Message) -> usize {
    let blocks: usize = message
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.chars().count(),
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => {
                id.len()
                    + name.len()
                    + match arguments {
                        Value::String(s) => s.chars().count(),
                        other => other.to_string().chars().count(),
                    }
                    + 16
            }
            ContentBlock::ToolResult {
                tool_call_id,
                content,
                ..
            } => tool_call_id.len() + content.chars().count() + 16,
        })
        .sum();
    blocks + 12
}

/// The messages of a conversation that compaction replaces so that the `keep_recent` most recent
/// exchanges stay as they are (at least one).
///
/// An exchange is an assistant message with the messages that follow it up to the next assistant
/// message (the results of its tool calls among them), so a cut never separates a tool call from
/// its result. The messages before the first assistant message carry the task and are never
/// replaced. The range runs from the first assistant message to the first message kept; `None`
/// when there are not more exchanges than `keep_recent`.
pub fn oldest_exchanges(messages: &[Message], keep_recent: usize) -> Option<Range<usize>> {
    let starts: Vec<usize> = (messages.iter().enumerate())
        .filter(|(_, m)| m.role == Role::Assistant)
        .map(|(i, _)| i)
        .collect();
    let keep = keep_recent.max(1);
    if starts.len() <= keep {
        return None;
    }
    Some(starts[0]..starts[starts.len() - keep])
}

/// `messages` with every text and tool result longer than `limit` characters cut to its head, with
/// a note of what was left out; tool calls (their ids, names and arguments) and roles are kept, so
/// the conversation keeps its shape. The last resort when even the most recent exchange does not fit.
pub fn shorten(messages: &[Message], limit: usize) -> Vec<Message> {
    let block = |b: &ContentBlock| match b {
        ContentBlock::Text { text } => ContentBlock::Text {
            text: cut(text, limit),
        },
        ContentBlock::ToolResult {
            tool_call_id,
            content,
            is_error,
        } => ContentBlock::ToolResult {
            tool_call_id: tool_call_id.clone(),
            content: cut(content, limit),
            is_error: *is_error,
        },
        call @ ContentBlock::ToolCall { .. } => call.clone(),
    };
    (messages.iter())
        .map(|m| Message {
            role: m.role,
            content: m.content.iter().map(block).collect(),
        })
        .collect()
}

/// The length in characters of the longest text or tool result of `messages` (what [`shorten`]
/// would cut).
pub fn longest_block(messages: &[Message]) -> usize {
    (messages.iter().flat_map(|m| &m.content))
        .map(|b| match b {
            ContentBlock::Text { text } => text.chars().count(),
            ContentBlock::ToolResult { content, .. } => content.chars().count(),
            ContentBlock::ToolCall { .. } => 0,
        })
        .max()
        .unwrap_or(0)
}

/// What a refusal for length said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overflow {
    /// The model's context window in tokens, when the server said it.
    pub window: Option<u32>,
    /// The tokens of the refused request's messages, when the server said it (a calibration).
    pub prompt_tokens: Option<u32>,
}

/// Whether `error` is a server refusing a request for its length, and what it said of the limit.
///
/// Recognised: OpenAI's `context_length_exceeded` ("maximum context length is N tokens … (M in the
/// messages, …)"), llama.cpp's `exceed_context_size_error` (`n_ctx`, `n_prompt_tokens`), and
/// Anthropic's "prompt is too long: M tokens > N maximum".
pub fn overflow(error: &LlmError) -> Option<Overflow> {
    let LlmError::BadRequest { message, body, .. } = error else {
        return None;
    };
    let body_text = body
        .bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default();
    let text = format!("{message}\n{body_text}");
    let lower = text.to_lowercase();
    let said = [
        "context_length_exceeded",
        "exceed_context_size",
        "maximum context length",
        "context size",
        "prompt is too long",
        "context window",
    ]
    .iter()
    .any(|s| lower.contains(s));
    if !said {
        return None;
    }
    let json: Option<Value> = serde_json::from_str(&body_text).ok();
    let field = |name: &str| -> Option<u32> {
        let error = json.as_ref()?.get("error")?;
        error
            .get(name)?
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
    };
    let window = field("n_ctx")
        .or_else(|| number_after(&lower, "maximum context length is "))
        .or_else(|| number_before(&lower, " maximum"));
    let prompt_tokens = field("n_prompt_tokens")
        .or_else(|| number_before(&lower, " in the messages"))
        .or_else(|| number_after(&lower, "prompt is too long: "));
    Some(Overflow {
        window,
        prompt_tokens,
    })
}

/// The number written right after `marker` in `text`.
fn number_after(text: &str, marker: &str) -> Option<u32> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The number written right before `marker` in `text`.
fn number_before(text: &str, marker: &str) -> Option<u32> {
    let head = &text[..text.find(marker)?];
    let digits: String = head
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().ok()
}

/// The largest summary asked for, in tokens: an eighth of the window, at most 256 (a summary must
/// leave room for the work it makes room for).
pub fn summary_answer(window: u32) -> u32 {
    (window / 8).clamp(32, 256)
}

/// `request` with its long texts cut (their head and end kept, with a note of what was left out)
/// until it fits `tokens`, or `None` when even cut short it does not. The system messages and the
/// first user message (the task) are left whole; a tool call still has its result.
pub fn shrink(request: &ChatRequest, tokens: u32, estimator: &Estimator) -> Option<ChatRequest> {
    let first_user = request.messages.iter().position(|m| m.role == Role::User);
    let mut limit = 8_000usize;
    while limit >= 200 {
        let mut cut = request.clone();
        for (i, message) in cut.messages.iter_mut().enumerate() {
            if message.role == Role::System || Some(i) == first_user {
                continue;
            }
            for block in &mut message.content {
                match block {
                    ContentBlock::Text { text } => *text = middle_cut(text, limit),
                    ContentBlock::ToolResult { content, .. } => {
                        *content = middle_cut(content, limit)
                    }
                    ContentBlock::ToolCall { .. } => {}
                }
            }
        }
        if estimator.tokens(&cut) <= tokens {
            return Some(cut);
        }
        limit /= 2;
    }
    None
}

/// `text` with its middle left out when it is longer than `limit` characters.
fn middle_cut(text: &str, limit: usize) -> String {
    let count = text.chars().count();
    if count <= limit {
        return text.to_string();
    }
    let keep = limit / 2;
    let head: String = text.chars().take(keep).collect();
    let tail: String = text.chars().skip(count - keep).collect();
    format!(
        "{head}\n[… {} characters left out to fit the model's context window …]\n{tail}",
        count - 2 * keep
    )
}

/// What the model is asked when it summarizes.
pub const SUMMARY_INSTRUCTIONS: &str = "You summarize the earlier part of a conversation between a \
user, an assistant and the tools the assistant called, so that the assistant can go on with the task \
without it. Keep what the rest of the work needs: the task, decisions taken, facts and figures found, \
files and names involved, what was done and what is left to do, errors met. Leave out pleasantries \
and repetition. Answer with the summary only, in plain prose or short bullets.";

/// The conversation `messages` as plain text, for a summary: one paragraph per message, each tool
/// call and result named. Every message's text is cut to `per_message` characters (its head kept).
pub fn transcript(messages: &[Message], per_message: usize) -> String {
    let mut out = String::new();
    for message in messages {
        let who = match message.role {
            Role::System => "System",
            Role::User => "User",
            Role::Assistant => "Assistant",
            Role::Tool => "Tool",
        };
        for block in &message.content {
            let line = match block {
                ContentBlock::Text { text } if text.trim().is_empty() => continue,
                ContentBlock::Text { text } => format!("{who}: {}", cut(text, per_message)),
                ContentBlock::ToolCall {
                    name, arguments, ..
                } => format!(
                    "Assistant called {name} with {}",
                    cut(&arguments.to_string(), per_message)
                ),
                ContentBlock::ToolResult {
                    content, is_error, ..
                } => format!(
                    "{} {}",
                    if *is_error {
                        "Tool failed:"
                    } else {
                        "Tool result:"
                    },
                    cut(content, per_message)
                ),
            };
            out.push_str(&line);
            out.push_str("\n\n");
        }
    }
    out
}

/// `text`, cut to `limit` characters with a note of what was left out.
fn cut(text: &str, limit: usize) -> String {
    let count = text.chars().count();
    if count <= limit {
        return text.to_string();
    }
    let head: String = text.chars().take(limit).collect();
    format!("{head} […{} more characters]", count - limit)
}

/// The request that summarizes `messages` (no tools offered), fitted into `window` tokens with
/// room for an answer of `answer` tokens: long messages are cut, the earliest ones first dropped
/// when even that is not enough.
pub fn summary_request(
    model: &str,
    messages: &[Message],
    window: u32,
    answer: u32,
    estimator: &Estimator,
) -> ChatRequest {
    let overhead = estimator.text_tokens(SUMMARY_INSTRUCTIONS) + 64;
    let room = window.saturating_sub(answer + overhead).max(64);
    let budget = estimator.chars_for(room);
    let mut per_message = budget.max(200);
    let mut text = transcript(messages, per_message);
    while text.chars().count() > budget && per_message > 200 {
        per_message /= 2;
        text = transcript(messages, per_message);
    }
    let text = if text.chars().count() > budget {
        // Even cut short, too long: the most recent part is kept.
        let skip = text.chars().count() - budget;
        format!("[…]{}", text.chars().skip(skip).collect::<String>())
    } else {
        text
    };
    // No tools offered: the answer can only be the summary.
    ChatRequest::new(
        model,
        vec![
            Message::system(SUMMARY_INSTRUCTIONS),
            Message::user(format!("The conversation so far:\n\n{text}")),
        ],
    )
    .with_max_tokens(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ResponseBody;

    fn refused(message: &str, body: &str) -> LlmError {
        LlmError::BadRequest {
            status: 400,
            message: message.into(),
            body: ResponseBody::new(body.as_bytes().to_vec()),
        }
    }

    #[test]
    fn limits_are_read_from_the_servers_wordings() {
        let openai = refused(
            "This model's maximum context length is 2048 tokens. However, you requested 3026 tokens (3010 in the messages, 16 in the completion).",
            r#"{"error":{"message":"This model's maximum context length is 2048 tokens. However, you requested 3026 tokens (3010 in the messages, 16 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        );
        assert_eq!(
            overflow(&openai),
            Some(Overflow {
                window: Some(2048),
                prompt_tokens: Some(3010)
            })
        );
        let llama = refused(
            "the request exceeds the available context size, try increasing it",
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4100,"n_ctx":4096}}"#,
        );
        assert_eq!(
            overflow(&llama),
            Some(Overflow {
                window: Some(4096),
                prompt_tokens: Some(4100)
            })
        );
        let anthropic = refused("prompt is too long: 210000 tokens > 200000 maximum", "{}");
        assert_eq!(
            overflow(&anthropic),
            Some(Overflow {
                window: Some(200_000),
                prompt_tokens: Some(210_000)
            })
        );
        let bare = refused("context_length_exceeded", "");
        assert_eq!(
            overflow(&bare),
            Some(Overflow {
                window: None,
                prompt_tokens: None
            })
        );
        assert_eq!(overflow(&refused("invalid model", "{}")), None);
    }

    #[test]
    fn the_estimator_follows_what_servers_count() {
        let mut e = Estimator::default();
        let request = ChatRequest::new("m", vec![Message::user("x".repeat(3000))]);
        let before = e.tokens(&request);
        assert!(before >= 1000, "{before}");
        e.calibrate(request_chars(&request), 600);
        let after = e.tokens(&request);
        // 10 % on the cautious side of what the server counted.
        assert!((600..=700).contains(&after), "{after}");
        e.calibrate(10, 1);
        assert_eq!(e.tokens(&request), after, "tiny samples are ignored");
    }

    #[test]
    fn long_texts_are_cut_until_the_request_fits() {
        let e = Estimator::default();
        let request = ChatRequest::new(
            "m",
            vec![
                Message::system("rules"),
                Message::user("the task"),
                Message::tool_results(vec![ContentBlock::tool_result(
                    "c1",
                    "z".repeat(30_000),
                    false,
                )]),
            ],
        );
        let cut = shrink(&request, 1000, &e).unwrap();
        assert!(e.tokens(&cut) <= 1000);
        let text = match &cut.messages[2].content[0] {
            ContentBlock::ToolResult { content, .. } => content.clone(),
            other => panic!("{other:?}"),
        };
        assert!(text.contains("characters left out"), "{text}");
        assert_eq!(cut.messages[1].text(), "the task");
        assert!(shrink(&request, 5, &e).is_none());
    }

    #[test]
    fn a_saved_ratio_goes_on_within_bounds() {
        let e = Estimator::with_chars_per_token(2.5);
        assert_eq!(e.chars_per_token(), 2.5);
        assert_eq!(Estimator::with_chars_per_token(40.0).chars_per_token(), 6.0);
        assert_eq!(Estimator::with_chars_per_token(0.1).chars_per_token(), 1.0);
        assert_eq!(
            Estimator::with_chars_per_token(f64::NAN),
            Estimator::default()
        );
    }

    #[test]
    fn a_request_is_measured_against_its_window_with_room_for_the_answer() {
        let e = Estimator::default();
        let request = ChatRequest::new("m", vec![Message::user("x".repeat(3000))]);
        // 3 000 characters at 3 per token, plus the message's framing.
        let (tokens, fits) = e.measure(&request, None);
        assert!(fits);
        assert!((1000..1010).contains(&tokens), "{tokens}");
        assert!(e.measure(&request, Some(2048)).1, "256 tokens kept free");
        assert!(
            !e.measure(&request.clone().with_max_tokens(1100), Some(2048))
                .1
        );
        assert!(!e.measure(&request, Some(1024)).1);
    }

    #[test]
    fn the_answer_limit_leaves_the_prompt_most_of_the_window() {
        assert_eq!(answer_limit(2048, 4096), 512);
        assert_eq!(answer_limit(2048, 48), 48);
        assert_eq!(answer_limit(128, 4096), 64);
        assert_eq!(answer_limit(200_000, 4096), 4096);
    }

    fn exchange(id: &str, with_result: bool) -> Vec<Message> {
        let call = Message::assistant(vec![ContentBlock::tool_call(id, "t", Value::Null)]);
        if with_result {
            vec![
                call,
                Message::tool_results(vec![ContentBlock::tool_result(id, "r", false)]),
            ]
        } else {
            vec![call]
        }
    }

    #[test]
    fn the_oldest_exchanges_are_whole_and_leave_the_task() {
        let mut messages = vec![Message::system("s"), Message::user("task")];
        for i in 0..4 {
            messages.extend(exchange(&format!("c{i}"), true));
        }
        // Task (0, 1), then exchanges at 2, 4, 6, 8.
        assert_eq!(oldest_exchanges(&messages, 2), Some(2..6));
        assert_eq!(oldest_exchanges(&messages, 1), Some(2..8));
        assert_eq!(
            oldest_exchanges(&messages, 0),
            Some(2..8),
            "one is always kept"
        );
        assert_eq!(oldest_exchanges(&messages, 4), None);
        // A cut never falls between a call and its result: the kept part starts with a call.
        let range = oldest_exchanges(&messages, 3).unwrap();
        assert_eq!(messages[range.end].role, Role::Assistant);
        assert_eq!(messages[range.end + 1].role, Role::Tool);
        // A user message after an exchange stays with it; an answer without results is one too.
        let mut mixed = vec![Message::user("task")];
        mixed.extend(exchange("a", true));
        mixed.push(Message::user("by the way"));
        mixed.extend(exchange("b", false));
        mixed.extend(exchange("c", true));
        assert_eq!(oldest_exchanges(&mixed, 1), Some(1..5));
        assert_eq!(oldest_exchanges(&[Message::user("task")], 1), None);
    }

    #[test]
    fn shortening_cuts_long_texts_and_results_and_keeps_calls() {
        let arguments = serde_json::json!({"text": "z".repeat(500)});
        let messages = vec![
            Message::user("u".repeat(300)),
            Message::assistant(vec![
                ContentBlock::text("a".repeat(1000)),
                ContentBlock::tool_call("c1", "t", arguments.clone()),
            ]),
            Message::tool_results(vec![ContentBlock::tool_result("c1", "r".repeat(900), true)]),
        ];
        assert_eq!(longest_block(&messages), 1000);
        let short = shorten(&messages, 400);
        assert_eq!(
            longest_block(&short),
            400 + " […600 more characters]".chars().count()
        );
        assert_eq!(short[0], messages[0], "what is short enough is left alone");
        assert_eq!(short[1].role, Role::Assistant);
        assert_eq!(
            short[1].content[1],
            ContentBlock::tool_call("c1", "t", arguments)
        );
        assert!(short[1].text().starts_with(&"a".repeat(400)));
        match &short[2].content[0] {
            ContentBlock::ToolResult {
                tool_call_id,
                content,
                is_error,
            } => {
                assert_eq!(tool_call_id, "c1");
                assert!(*is_error);
                assert!(content.ends_with("[…500 more characters]"), "{content}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_summary_request_fits_its_window() {
        let e = Estimator::default();
        let messages: Vec<Message> = (0..40)
            .map(|i| Message::user(format!("message {i}: {}", "y".repeat(2000))))
            .collect();
        let request = summary_request("m", &messages, 2048, 256, &e);
        assert!(request.tools.is_empty());
        assert_eq!(request.max_tokens, Some(256));
        assert!(e.tokens(&request) + 256 <= 2048, "{}", e.tokens(&request));
        assert!(request.messages[1].text().contains("message 39"));
    }
}
