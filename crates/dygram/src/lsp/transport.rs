//! The connection to the editor: JSON-RPC messages framed by `Content-Length` headers, read and
//! written on two threads, handed to the server as an [`lsp_server::Connection`].
//!
//! Reading holds bad input to limits instead of trusting it:
//!
//! * a header line is read up to [`MAX_HEADER_LINE`] bytes, and a message has at most
//!   [`MAX_HEADERS`] header lines; past either, or with a header that is not `Name: value`, or
//!   without `Content-Length`, the framing is lost and reading stops with an error;
//! * a message longer than [`MAX_MESSAGE`] bytes is refused without being held: its bytes are read
//!   and dropped as they come, the editor gets an error response, and reading goes on after it;
//! * a message that is framed well but is no message (not UTF-8, not JSON, `null`, a batch array,
//!   an object of no message's shape) gets an error response (`-32700` parse error or `-32600`
//!   invalid request, with the message's `id` when it has a usable one), and reading goes on.
//!
//! Reading stops after the `exit` notification, at the end of the input, or at an error of the
//! framing; [`Transport::join`] tells which.

use std::io::{self, BufRead, Read, Write};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use lsp_server::{Connection, Message};
use serde_json::{Value, json};

/// The longest message read (64 MiB); a longer one is refused.
pub const MAX_MESSAGE: u64 = 64 << 20;
/// The longest header line read, in bytes.
pub const MAX_HEADER_LINE: usize = 8 << 10;
/// The most header lines one message may have.
pub const MAX_HEADERS: usize = 32;

/// JSON-RPC: the text is not JSON.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the JSON is not a request, a response or a notification.
const INVALID_REQUEST: i64 = -32600;

/// Why reading the editor's messages stopped before the `exit` notification or the end of the
/// input.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// A header line longer than [`MAX_HEADER_LINE`].
    #[error("malformed header: a line longer than {MAX_HEADER_LINE} bytes")]
    HeaderTooLong,
    /// More than [`MAX_HEADERS`] header lines.
    #[error("malformed header: more than {MAX_HEADERS} header lines before a message")]
    TooManyHeaders,
    /// A header line that is not `Name: value`, or a `Content-Length` that is not a number.
    #[error("malformed header: {0:?} (expected `Content-Length: <bytes>`)")]
    Malformed(String),
    /// Headers without `Content-Length`.
    #[error("malformed header: no Content-Length before the message")]
    NoLength,
    /// The input ended inside a message's headers or body.
    #[error("the input ended inside a message ({0})")]
    Truncated(String),
    /// Standard input could not be read.
    #[error("cannot read standard input: {0}")]
    Read(#[source] io::Error),
    /// An error response could not be written to standard output.
    #[error("cannot write to standard output: {0}")]
    Write(#[source] io::Error),
}

/// The reading and writing threads of a connection.
pub struct Transport {
    reader: JoinHandle<Result<(), TransportError>>,
    writer: JoinHandle<io::Result<()>>,
}

impl Transport {
    /// Whether reading has stopped.
    pub fn reading_stopped(&self) -> bool {
        self.reader.is_finished()
    }

    /// Waits for both threads (the writer ends once the server's side of the connection is
    /// dropped): why reading stopped, when it was an error; else an error of writing.
    pub fn join(self) -> Result<(), TransportError> {
        let read = self
            .reader
            .join()
            .unwrap_or_else(|_| Err(TransportError::Read(io::Error::other("reader panicked"))));
        let written = self
            .writer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("writer panicked")));
        read?;
        written.map_err(TransportError::Write)
    }
}

/// The connection over the process's standard input and output.
pub fn stdio() -> (Connection, Transport) {
    over(io::BufReader::new(io::stdin()), io::stdout())
}

/// A connection reading framed messages from `input` and writing them to `output`.
pub fn over<R, W>(input: R, output: W) -> (Connection, Transport)
where
    R: BufRead + Send + 'static,
    W: Write + Send + 'static,
{
    let (server, client) = Connection::memory();
    let output = Arc::new(Mutex::new(output));
    let to_editor = Arc::clone(&output);
    let from_server = client.receiver;
    let writer = std::thread::spawn(move || {
        for message in from_server {
            let mut out = to_editor.lock().unwrap_or_else(|p| p.into_inner());
            message.write(&mut *out)?;
        }
        Ok(())
    });
    let to_server = client.sender;
    let reader = std::thread::spawn(move || {
        let mut input = input;
        loop {
            let mut too_large = None;
            let incoming = match read_frame(&mut input)? {
                Frame::End => return Ok(()),
                Frame::TooLarge(length) => {
                    too_large = Some(length);
                    Incoming::Invalid {
                        code: INVALID_REQUEST,
                        message: format!(
                            "a message of {length} bytes is longer than the limit of {MAX_MESSAGE} bytes; it is skipped"
                        ),
                        id: Value::Null,
                    }
                }
                Frame::Body(body) => classify(body),
            };
            match incoming {
                Incoming::Message(message) => {
                    let exit = matches!(&message, Message::Notification(n) if n.method == "exit");
                    if to_server.send(message).is_err() || exit {
                        return Ok(());
                    }
                }
                Incoming::Invalid { code, message, id } => {
                    let error = json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": code, "message": message}});
                    let mut out = output.lock().unwrap_or_else(|p| p.into_inner());
                    write_frame(&mut *out, &error).map_err(TransportError::Write)?;
                }
            }
            // Refused first, then dropped as it comes.
            if let Some(length) = too_large {
                skip(&mut input, length)?;
            }
        }
    });
    (server, Transport { reader, writer })
}

/// What one frame held.
enum Frame {
    /// The input ended between messages.
    End,
    /// A body within the limit.
    Body(Vec<u8>),
    /// A body longer than [`MAX_MESSAGE`], not read yet: its length.
    TooLarge(u64),
}

/// Reads one frame: headers, then as many bytes as `Content-Length` says.
fn read_frame(input: &mut impl BufRead) -> Result<Frame, TransportError> {
    let mut length = None;
    for n in 0.. {
        if n == MAX_HEADERS {
            return Err(TransportError::TooManyHeaders);
        }
        let Some(line) = read_header_line(input)? else {
            if n == 0 {
                return Ok(Frame::End);
            }
            return Err(TransportError::Truncated("in its headers".into()));
        };
        if line.is_empty() {
            break;
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| TransportError::Malformed(line.clone()))?;
        if name.trim().eq_ignore_ascii_case("content-length") {
            let bytes = value.trim().parse::<u64>();
            length = Some(bytes.map_err(|_| TransportError::Malformed(line.clone()))?);
        }
    }
    let length = length.ok_or(TransportError::NoLength)?;
    if length > MAX_MESSAGE {
        return Ok(Frame::TooLarge(length));
    }
    let mut body = Vec::new();
    let read = input
        .take(length)
        .read_to_end(&mut body)
        .map_err(TransportError::Read)? as u64;
    if read < length {
        return Err(missing(read, length));
    }
    Ok(Frame::Body(body))
}

/// Reads and drops the `length` bytes of a message too long to hold.
fn skip(input: &mut impl BufRead, length: u64) -> Result<(), TransportError> {
    let skipped =
        io::copy(&mut input.take(length), &mut io::sink()).map_err(TransportError::Read)?;
    if skipped < length {
        return Err(missing(skipped, length));
    }
    Ok(())
}

/// The input ended after `read` of a message's `length` bytes.
fn missing(read: u64, length: u64) -> TransportError {
    TransportError::Truncated(format!("{} of its {length} bytes missing", length - read))
}

/// One header line without its line break (`\r\n`, or `\n` alone); `None` at the end of the
/// input before any byte of it. At most [`MAX_HEADER_LINE`] bytes are read.
fn read_header_line(input: &mut impl BufRead) -> Result<Option<String>, TransportError> {
    let mut line = Vec::new();
    loop {
        let available = input.fill_buf().map_err(TransportError::Read)?;
        if available.is_empty() {
            if line.is_empty() {
                return Ok(None);
            }
            return Err(TransportError::Truncated("in a header line".into()));
        }
        let (taken, ends) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        if line.len() + taken > MAX_HEADER_LINE + 2 {
            return Err(TransportError::HeaderTooLong);
        }
        line.extend_from_slice(&available[..taken]);
        input.consume(taken);
        if ends {
            break;
        }
    }
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    if line.len() > MAX_HEADER_LINE {
        return Err(TransportError::HeaderTooLong);
    }
    Ok(Some(String::from_utf8_lossy(&line).into_owned()))
}

/// A body read, as the server takes it or as the error the editor gets.
enum Incoming {
    Message(Message),
    Invalid {
        code: i64,
        message: String,
        id: Value,
    },
}

/// What a body is: a message, or why it is none.
fn classify(body: Vec<u8>) -> Incoming {
    let invalid = |code, message: &str, id| Incoming::Invalid {
        code,
        message: message.to_string(),
        id,
    };
    let Ok(text) = String::from_utf8(body) else {
        return invalid(PARSE_ERROR, "the message is not UTF-8 text", Value::Null);
    };
    let value: Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(e) => {
            let message = format!("the message is not JSON: {e}");
            return invalid(PARSE_ERROR, &message, Value::Null);
        }
    };
    match value {
        Value::Object(object) => {
            let id = match object.get("id") {
                Some(id @ (Value::Number(_) | Value::String(_))) => id.clone(),
                _ => Value::Null,
            };
            match serde_json::from_value::<Message>(Value::Object(object)) {
                Ok(message) => Incoming::Message(message),
                Err(_) => invalid(
                    INVALID_REQUEST,
                    "the object is not a request, a response or a notification",
                    id,
                ),
            }
        }
        Value::Array(_) => invalid(
            INVALID_REQUEST,
            "a batch (an array of messages) is not part of the Language Server Protocol: send one message at a time",
            Value::Null,
        ),
        _ => invalid(
            INVALID_REQUEST,
            "a message is a JSON object (a request, a response or a notification)",
            Value::Null,
        ),
    }
}

/// Writes `value` as one framed message.
fn write_frame(out: &mut impl Write, value: &Value) -> io::Result<()> {
    let body = value.to_string();
    write!(out, "Content-Length: {}\r\n\r\n{body}", body.len())?;
    out.flush()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// What reading a stream of frames gave, one by one.
    #[derive(Debug, Clone, PartialEq)]
    enum Read {
        /// A message's body.
        Body(String),
        /// A frame refused, or the framing lost (why).
        Refused(String),
    }

    impl Read {
        fn refusal(&self) -> &str {
            match self {
                Self::Refused(why) => why,
                Self::Body(body) => panic!("a body was read: {body}"),
            }
        }
    }

    fn frames(input: &[u8]) -> Vec<Read> {
        let mut input = input;
        let mut out = Vec::new();
        loop {
            match read_frame(&mut input) {
                Ok(Frame::End) => return out,
                Ok(Frame::Body(b)) => {
                    out.push(Read::Body(String::from_utf8_lossy(&b).into_owned()))
                }
                Ok(Frame::TooLarge(n)) => {
                    out.push(Read::Refused(format!("too large: {n}")));
                    if let Err(e) = skip(&mut input, n) {
                        out.push(Read::Refused(e.to_string()));
                        return out;
                    }
                }
                Err(e) => {
                    out.push(Read::Refused(e.to_string()));
                    return out;
                }
            }
        }
    }

    #[test]
    fn frames_are_read_by_their_length_whatever_the_header_case_and_line_breaks() {
        let input = b"Content-Length: 2\r\n\r\n{}content-length:3\nContent-Type: x\n\n[1]";
        assert_eq!(
            frames(input),
            [Read::Body("{}".to_string()), Read::Body("[1]".to_string())]
        );
    }

    #[test]
    fn broken_framing_stops_with_a_reason() {
        let cases: [(&[u8], &str); 5] = [
            (b"hello\r\n\r\n", "malformed header: \"hello\""),
            (b"Content-Type: x\r\n\r\n{}", "no Content-Length"),
            (b"Content-Length: many\r\n\r\n", "malformed header"),
            (b"Content-Length: 10\r\n\r\n{}", "8 of its 10 bytes missing"),
            (b"Content-Length: 10\r\n", "in its headers"),
        ];
        for (input, reason) in cases {
            let got = frames(input);
            let last = got.last().unwrap().refusal();
            assert!(last.contains(reason), "{last}");
        }
        let long = vec![b'a'; MAX_HEADER_LINE + 10];
        assert!(frames(&long)[0].refusal().contains("longer than"));
        let many = "X: y\r\n".repeat(MAX_HEADERS + 1);
        assert!(frames(many.as_bytes())[0].refusal().contains("more than"));
    }

    #[test]
    fn a_message_over_the_limit_is_skipped_and_the_next_one_read() {
        let mut input = format!("Content-Length: {}\r\n\r\n", MAX_MESSAGE + 1).into_bytes();
        input.extend(std::iter::repeat_n(b' ', (MAX_MESSAGE + 1) as usize));
        input.extend_from_slice(b"Content-Length: 2\r\n\r\n{}");
        assert_eq!(
            frames(&input),
            [
                Read::Refused(format!("too large: {}", MAX_MESSAGE + 1)),
                Read::Body("{}".to_string())
            ]
        );
    }

    #[test]
    fn bodies_that_are_no_message_are_told_apart() {
        let code = |body: &[u8]| match classify(body.to_vec()) {
            Incoming::Message(_) => 0,
            Incoming::Invalid { code, .. } => code,
        };
        assert_eq!(code(br#"{"jsonrpc":"2.0","method":"initialized"}"#), 0);
        assert_eq!(code(br#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#), 0);
        assert_eq!(code(b"{"), PARSE_ERROR);
        assert_eq!(code(b"\"\xff\""), PARSE_ERROR);
        assert_eq!(code(b"null"), INVALID_REQUEST);
        assert_eq!(code(b"[]"), INVALID_REQUEST);
        assert_eq!(code(br#"{"id": 3, "method": 4}"#), INVALID_REQUEST);
        match classify(br#"{"id": 3, "method": 4}"#.to_vec()) {
            Incoming::Invalid { id, .. } => assert_eq!(id, json!(3)),
            Incoming::Message(_) => unreachable!(),
        }
    }
}
