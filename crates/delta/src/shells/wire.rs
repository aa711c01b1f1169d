//! What a client and a session's host say to each other over the host's Unix socket.
//!
//! A request is one JSON line. A reply is one JSON line (its header) followed by the bytes it
//! announces: the command's standard output, then its standard error, raw (a command's output need
//! not be UTF-8).

use std::io::{self, BufRead, Read, Write};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What a client asks of a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Run `command` in the session; give up after `timeout_ms` (none: wait for it).
    Exec {
        command: String,
        timeout_ms: Option<u64>,
    },
    /// Stop the session's process and the host.
    Stop,
}

impl Request {
    /// An exec request.
    pub fn exec(command: &str, timeout: Option<Duration>) -> Self {
        Self::Exec {
            command: command.to_string(),
            timeout_ms: timeout.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        }
    }
}

/// The header of a host's reply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// The command's exit code (for a program on a terminal: 0 while it runs, its code once it ended).
    pub exit_code: i32,
    /// The command did not finish in time: the session's process was stopped.
    pub timed_out: bool,
    /// The session's process had ended and was started again for this command: what was said.
    pub rebuilt: Option<String>,
    /// The session's process ended during this command (it ran `exit`, say).
    pub ended: bool,
    /// Bytes of standard output that follow the header.
    pub stdout: u64,
    /// Bytes of standard error that follow the standard output.
    pub stderr: u64,
    /// What went wrong in the host, if the command could not be run at all.
    pub error: Option<String>,
    /// Bytes of each stream past what a reply keeps ([`crate::process::MAX_CAPTURE`]), read and
    /// dropped.
    #[serde(default)]
    pub dropped: [u64; 2],
}

/// A reply: its header and both streams.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    pub header: Header,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Reply {
    /// A reply saying the command could not be run.
    pub fn failed(message: String) -> Self {
        Self {
            header: Header {
                exit_code: 1,
                error: Some(message),
                ..Header::default()
            },
            ..Self::default()
        }
    }

    /// Writes the reply: its header line, then the bytes.
    pub fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        let mut header = self.header.clone();
        header.stdout = self.stdout.len() as u64;
        header.stderr = self.stderr.len() as u64;
        let mut line = serde_json::to_vec(&header).map_err(io::Error::other)?;
        line.push(b'\n');
        out.write_all(&line)?;
        out.write_all(&self.stdout)?;
        out.write_all(&self.stderr)?;
        out.flush()
    }

    /// Reads a reply written by [`Reply::write_to`].
    pub fn read_from(input: &mut impl BufRead) -> io::Result<Self> {
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the session's host closed the connection without replying",
            ));
        }
        let header: Header = serde_json::from_str(&line).map_err(io::Error::other)?;
        let most = crate::process::MAX_CAPTURE as u64;
        if header.stdout > most || header.stderr > most {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the session's host announced more output than a reply holds",
            ));
        }
        let stdout = read_exact(input, header.stdout)?;
        let stderr = read_exact(input, header.stderr)?;
        Ok(Self {
            header,
            stdout,
            stderr,
        })
    }
}

fn read_exact(input: &mut impl Read, len: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    input.take(len).read_to_end(&mut bytes)?;
    if bytes.len() as u64 != len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the session's host stopped in the middle of its reply",
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_reads_back_as_written() {
        let reply = Reply {
            header: Header {
                exit_code: 3,
                rebuilt: Some("rebuilt".into()),
                ..Header::default()
            },
            stdout: b"out\xff\n".to_vec(),
            stderr: b"err".to_vec(),
        };
        let mut bytes = Vec::new();
        reply.write_to(&mut bytes).unwrap();
        let back = Reply::read_from(&mut io::Cursor::new(&bytes)).unwrap();
        assert_eq!(back.stdout, reply.stdout);
        assert_eq!(back.stderr, reply.stderr);
        assert_eq!(back.header.exit_code, 3);
        assert_eq!(back.header.rebuilt.as_deref(), Some("rebuilt"));
        let cut = &bytes[..bytes.len() - 1];
        assert!(Reply::read_from(&mut io::Cursor::new(cut)).is_err());
        let request: Request =
            serde_json::from_str(r#"{"op":"exec","command":"ls","timeout_ms":null}"#).unwrap();
        assert_eq!(request, Request::exec("ls", None));
    }
}
