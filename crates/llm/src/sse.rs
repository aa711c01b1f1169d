//! An incremental parser for server-sent events (the `text/event-stream` format).
//!
//! Bytes arrive in arbitrary pieces; [`SseParser::feed`] buffers partial lines and returns every event
//! completed so far. Supported: `data:` lines (several are joined with `\n`), `event:`, `:` comment
//! lines (skipped), blank-line dispatch, and `\n` or `\r\n` line endings. `id:` and `retry:` are
//! accepted and ignored.

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
}

impl SseParser {
    /// A parser with nothing buffered.
    pub fn new() -> Self {
        Self::default()
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
        events
    }

    /// Ends the stream: an event whose data lines were all complete but which lacked the final blank
    /// line is dispatched; a partial last line is dropped (its data never fully arrived).
    pub fn finish(&mut self) -> Vec<SseEvent> {
        self.partial.clear();
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
