//! An incremental parser for server-sent events (the `text/event-stream` format).
//!
//! Bytes arrive in arbitrary pieces; [`SseParser::feed`] buffers partial lines and returns every event
//! completed so far. Supported: `data:` lines (several are joined with `\n`), `event:`, `:` comment
//! lines (skipped), blank-line dispatch, and `\n` or `\r\n` line endings. `id:` and `retry:` are
//! accepted and ignored. A parser made [`SseParser::with_limit`] holds at most that many bytes of one
//! event: a longer event is dropped as it comes, to the blank line that ends it, and counted
//! ([`SseParser::cut`]).

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name, if the server sent one.
    pub event: Option<String>,
    /// The data lines joined with `\n`.
    pub data: String,
}

/// Incremental SSE parser.
#[derive(Debug, Default)]
pub struct SseParser {
    partial: Vec<u8>,
    data: String,
    has_data: bool,
    event: Option<String>,
    /// The most bytes one event may hold (its fields and the line being read); `None`: no limit.
    limit: Option<usize>,
    /// The event being read went over `limit`: its lines are dropped up to the blank line that ends
    /// it, and `partial` only says whether the line being read is blank so far.
    skipping: bool,
    /// How many events went over `limit`.
    cut: u64,
}

impl SseParser {
    /// A parser with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser that holds at most `limit` bytes of one event: an event that grows past it is
    /// dropped (its bytes let go as they come, up to the blank line that ends it) and counted by
    /// [`SseParser::cut`]; nothing is dispatched for it.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            limit: Some(limit),
            ..Self::default()
        }
    }

    /// How many events went over the limit and were dropped so far (counted as soon as one grows
    /// past it).
    pub fn cut(&self) -> u64 {
        self.cut
    }

    /// Feeds the next bytes and returns the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        let mut rest = bytes;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            let (head, tail) = rest.split_at(i);
            rest = &tail[1..];
            if self.partial.is_empty() {
                self.line(head, &mut events);
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(head);
                self.line(&line, &mut events);
            }
        }
        self.partial.extend_from_slice(rest);
        self.bound();
        events
    }

    /// Ends the stream: an event whose data lines were all complete but which lacked the final blank
    /// line is dispatched; a partial last line is dropped (its data never fully arrived).
    pub fn finish(&mut self) -> Vec<SseEvent> {
        self.partial.clear();
        self.skipping = false;
        let mut events = Vec::new();
        self.dispatch(&mut events);
        events
    }

    /// Whether bytes of an unfinished line are buffered.
    pub fn has_partial_line(&self) -> bool {
        !self.partial.is_empty()
    }

    fn line(&mut self, raw: &[u8], events: &mut Vec<SseEvent>) {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if self.skipping {
            // Only the blank line that ends the dropped event matters.
            self.skipping = !raw.is_empty();
            return;
        }
        if raw.is_empty() {
            self.dispatch(events);
            return;
        }
        if raw[0] == b':' {
            return;
        }
        let line = String::from_utf8_lossy(raw);
        let (field, value) = match line.find(':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            _ => {}
        }
        self.bound();
    }

    /// Drops the event being read once it holds more than the limit; while dropping, keeps no more
    /// of the line being read than whether it is blank so far (empty or one `\r`).
    fn bound(&mut self) {
        let Some(limit) = self.limit else { return };
        let held =
            self.partial.len() + self.data.len() + self.event.as_ref().map_or(0, String::len);
        if !self.skipping && held > limit {
            self.skipping = true;
            self.cut += 1;
            self.data = String::new();
            self.has_data = false;
            self.event = None;
        }
        if self.skipping && !matches!(self.partial.as_slice(), [] | [b'\r']) {
            self.partial = vec![b'-'];
        }
    }

    fn dispatch(&mut self, events: &mut Vec<SseEvent>) {
        if self.has_data {
            events.push(SseEvent {
                event: self.event.take(),
                data: std::mem::take(&mut self.data),
            });
            self.has_data = false;
        } else {
            self.event = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &str) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut out = p.feed(input.as_bytes());
        out.extend(p.finish());
        out
    }

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_string),
            data: data.to_string(),
        }
    }

    #[test]
    fn parses_openai_style_streams() {
        let events = parse_all("data: {\"a\":1}\n\n: keep-alive\n\ndata: [DONE]\n\n");
        assert_eq!(events, vec![ev(None, "{\"a\":1}"), ev(None, "[DONE]")]);
    }

    #[test]
    fn parses_named_events_crlf_and_multiline_data() {
        let events =
            parse_all("event: ping\r\ndata: {}\r\n\r\nevent: x\ndata: a\ndata:b\nid: 7\n\n");
        assert_eq!(events, vec![ev(Some("ping"), "{}"), ev(Some("x"), "a\nb")]);
    }

    #[test]
    fn an_event_name_without_data_is_not_dispatched_and_does_not_leak() {
        let events = parse_all("event: lonely\n\ndata: x\n\n");
        assert_eq!(events, vec![ev(None, "x")]);
    }

    #[test]
    fn finish_dispatches_complete_lines_and_drops_partial_ones() {
        let mut p = SseParser::new();
        assert!(p.feed(b"data: complete\n").is_empty());
        assert_eq!(p.finish(), vec![ev(None, "complete")]);
        let mut p = SseParser::new();
        assert!(p.feed(b"data: {\"cut").is_empty());
        assert!(p.has_partial_line());
        assert!(p.finish().is_empty());
    }

    #[test]
    fn an_event_over_the_limit_is_dropped_to_its_end_and_counted() {
        let mut p = SseParser::with_limit(10);
        let mut out = p.feed(b"data: 0123456789\n\ndata: 0123");
        assert_eq!((out.len(), p.cut()), (1, 0), "ten bytes of data fit");
        // The second event grows past the limit across pieces and lines; nothing of it is kept.
        out.extend(p.feed(b"456789ab"));
        assert_eq!(p.cut(), 1);
        assert!(p.partial.len() <= 1 && p.data.is_empty(), "{p:?}");
        out.extend(p.feed(b"cdef\r\ndata: more\nevent: x\r"));
        out.extend(p.feed(b"\n\r\n: comment\nevent: y\ndata: after\n\n"));
        assert_eq!(out, vec![ev(None, "0123456789"), ev(Some("y"), "after")]);
        // Many short data lines count together.
        let mut p = SseParser::with_limit(10);
        assert!(p.feed(b"data: 123\ndata: 456\ndata: 789\n\n").is_empty());
        assert_eq!(p.cut(), 1);
        assert_eq!(p.feed(b"data: ok\n\n"), vec![ev(None, "ok")]);
    }

    #[test]
    fn split_utf8_sequences_survive() {
        let text = "data: héllo wörld\n\n".as_bytes();
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for b in text {
            out.extend(p.feed(std::slice::from_ref(b)));
        }
        assert_eq!(out, vec![ev(None, "héllo wörld")]);
    }
}
