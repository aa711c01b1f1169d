//! What the server does with input that is not a good message: a well-framed message that is not
//! valid (not JSON, not UTF-8, `null`, a batch, an object of no message's shape) is answered with a
//! JSON-RPC error and the server goes on; a `Content-Length` above the limit is refused without
//! the memory to hold it; a header line is read only so far.

use std::io::Write;
use std::time::Duration;

use serde_json::{Value, json};

use super::fuzz::Rng;
use super::{ANSWER, Client};
use crate::support::{Dir, peak_memory_kb};

/// `body` framed with its `Content-Length`.
fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// The next message from the server that is an error response.
fn next_error(client: &Client) -> Value {
    loop {
        let message = client
            .incoming
            .recv_timeout(ANSWER)
            .expect("no error response");
        if message.get("error").is_some() {
            return message;
        }
    }
}

#[test]
fn a_well_framed_invalid_message_is_answered_with_an_error_and_the_server_goes_on() {
    let project = Dir::new();
    let mut client = Client::start(project.path());
    let cases: [(&[u8], i64, Value); 7] = [
        (b"{\"jsonrpc\": \"2.0\", \"id\": 1, ", -32700, Value::Null),
        (b"null", -32600, Value::Null),
        (
            br#"[{"jsonrpc": "2.0", "id": 2, "method": "shutdown"}]"#,
            -32600,
            Value::Null,
        ),
        (
            b"{\"jsonrpc\": \"2.0\", \"method\": \"\xff\xfe\"}",
            -32700,
            Value::Null,
        ),
        (b"42", -32600, Value::Null),
        (br#""text""#, -32600, Value::Null),
        (
            br#"{"jsonrpc": "2.0", "id": 5, "method": 7}"#,
            -32600,
            json!(5),
        ),
    ];
    for (body, code, id) in cases {
        client.send_raw(&frame(body));
        let error = next_error(&client);
        assert_eq!(error["jsonrpc"], "2.0", "{error}");
        assert_eq!(
            error["error"]["code"],
            code,
            "{}: {error}",
            String::from_utf8_lossy(body)
        );
        assert_eq!(error["id"], id, "{error}");
        assert!(
            error["error"]["message"].as_str().unwrap().len() > 10,
            "{error}"
        );
        assert!(client.alive());
    }
    // Still serving: a document is checked, and the server shuts down cleanly.
    client.open("file:///m.dy", "a -> ;\n");
    let diagnostics = client.diagnostics("file:///m.dy");
    assert!(!diagnostics["diagnostics"].as_array().unwrap().is_empty());
    let (code, stderr) = client.finish();
    assert_eq!(code, 0, "{stderr}");
}

/// A message larger than the limit (64 MiB) is refused and skipped as it streams in: the server
/// answers with an error and goes on, and its memory never holds the message.
#[test]
fn a_content_length_above_the_limit_is_refused_without_allocating_it() {
    let project = Dir::new();
    let mut client = Client::start(project.path());
    let Some(before) = peak_memory_kb(client.pid()) else {
        eprintln!(
            "SKIPPED a_content_length_above_the_limit_is_refused_without_allocating_it: needs /proc"
        );
        return;
    };
    let length = 128usize << 20;
    client.send_raw(format!("Content-Length: {length}\r\n\r\n").as_bytes());
    let block = vec![b'x'; 1 << 20];
    for _ in 0..length / block.len() {
        client.send_raw(&block);
    }
    let error = next_error(&client);
    assert_eq!(error["error"]["code"], -32600, "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains(&length.to_string()), "{error}");
    assert!(message.contains("67108864"), "the limit: {error}");
    // Still serving.
    client.open("file:///m.dy", "a -> b;\n");
    client.diagnostics("file:///m.dy");
    let peak = peak_memory_kb(client.pid()).unwrap();
    assert!(
        peak < before + (32 << 10),
        "peak memory {peak} kB (at the start {before} kB)"
    );
    let (code, stderr) = client.finish();
    assert_eq!(code, 0, "{stderr}");
}

/// A length no message could have (10^10 bytes) is refused the same way; when the input then ends
/// inside the message, the server says so and exits 1, without aborting.
#[test]
fn a_huge_content_length_is_refused_and_an_input_that_ends_inside_it_is_an_error() {
    let project = Dir::new();
    let mut client = Client::start(project.path());
    client.send_raw(b"Content-Length: 10000000000\r\n\r\n{\"jsonrpc\"");
    let error = next_error(&client);
    assert_eq!(error["error"]["code"], -32600, "{error}");
    let (code, stderr) = client.ended(true);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("the language server could not read the editor's messages"),
        "{stderr}"
    );
    assert!(stderr.contains("ended inside a message"), "{stderr}");
}

/// A header line is read up to a limit: a megabyte without a line break ends the server with an
/// error at once, while its input is still open.
#[test]
fn a_header_line_is_read_only_so_far() {
    let project = Dir::new();
    let mut client = Client::start(project.path());
    // The server stops reading long before the end: the rest finds the pipe closed.
    let _ = client.stdin.write_all(&vec![b'a'; 1 << 20]);
    std::thread::sleep(Duration::from_millis(50));
    let (code, stderr) = client.ended(false);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("malformed header"), "{stderr}");
    assert!(stderr.contains("8192"), "{stderr}");
}

/// Replays a run of the randomised test below.
const FRAMING_SEED_VAR: &str = "DYGRAM_LSP_FRAMING_SEED";

/// A body of one of the kinds the server must answer with an error (its code), or a notification
/// it takes without an answer (`None`).
fn random_body(rng: &mut Rng) -> (Vec<u8>, Option<i64>) {
    const SCALARS: &[&str] = &["null", "0", "-1.5e3", "true", "\"x\"", "[]", "[null]"];
    match rng.below(6) {
        // Bytes that are not UTF-8.
        0 => {
            let mut bytes: Vec<u8> = (0..1 + rng.below(300)).map(|_| rng.next() as u8).collect();
            bytes.push(0xff);
            (bytes, Some(-32700))
        }
        // JSON cut short.
        1 => {
            let whole =
                json!({"jsonrpc": "2.0", "id": rng.below(1000), "method": "textDocument/hover",
                "params": {"text": "é".repeat(rng.below(50))}})
                .to_string();
            let cut = 1 + rng.below(whole.len() - 1);
            let cut = (cut..whole.len())
                .find(|&i| whole.is_char_boundary(i))
                .unwrap();
            (whole.as_bytes()[..cut].to_vec(), Some(-32700))
        }
        // A scalar, or a batch.
        2 => (rng.pick(SCALARS).as_bytes().to_vec(), Some(-32600)),
        3 => {
            let batch = json!([{"jsonrpc": "2.0", "id": rng.below(1000), "method": "shutdown"}]);
            (batch.to_string().into_bytes(), Some(-32600))
        }
        // An object of no message's shape.
        4 => {
            let object = json!({"jsonrpc": "2.0", "id": rng.below(1000), "method": rng.below(9)});
            (object.to_string().into_bytes(), Some(-32600))
        }
        // A notification the server does not know, which it ignores.
        _ => {
            let note = json!({"jsonrpc": "2.0", "method": format!("$/x{}", rng.below(100)),
                "params": {"n": rng.next() % 1000}});
            (note.to_string().into_bytes(), None)
        }
    }
}

/// Hundreds of random bodies, framed with headers of varying case, line breaks and extra fields:
/// each invalid one gets exactly its error, the others none, and the server shuts down cleanly.
#[test]
fn random_invalid_messages_are_each_answered_and_never_stop_the_server() {
    let mut rng = Rng(super::fuzz::seed("lsp framing", FRAMING_SEED_VAR));
    let project = Dir::new();
    let mut client = Client::start(project.path());
    let mut expected = Vec::new();
    for _ in 0..300 {
        let (body, code) = random_body(&mut rng);
        let name = *rng.pick(&["Content-Length", "content-length", "CONTENT-LENGTH"]);
        let eol = *rng.pick(&["\r\n", "\n"]);
        let extra = if rng.chance(30) {
            format!("Content-Type: application/vscode-jsonrpc; charset=utf-8{eol}")
        } else {
            String::new()
        };
        let mut framed = format!("{extra}{name}: {}{eol}{eol}", body.len()).into_bytes();
        framed.extend_from_slice(&body);
        client.send_raw(&framed);
        expected.extend(code);
    }
    for code in &expected {
        let error = next_error(&client);
        assert_eq!(&error["error"]["code"], code, "{error}");
    }
    let (code, stderr) = client.finish();
    assert_eq!(code, 0, "{stderr}");
}
