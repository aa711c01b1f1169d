//! Starting servers for the tests.

use std::ffi::OsStr;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp::{Client, ClientInfo, Options};
use serde_json::{Map, Value};

/// Options with a timeout long enough for a slow machine.
pub fn options() -> Options {
    Options {
        timeout: Duration::from_secs(30),
        client: ClientInfo {
            name: "mcp-tests".into(),
            version: "0".into(),
        },
    }
}

/// A file of `tests/servers`.
pub fn server_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/servers")
        .join(name)
}

/// Starts `program args` with piped stdin and stdout (stderr discarded).
pub fn spawn<S: AsRef<OsStr>>(program: impl AsRef<OsStr>, args: &[S]) -> Child {
    Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// A client of the scripted server, or `None` (skipped) without python3.
pub fn scripted() -> Option<Client> {
    let python = testkit::needs::python3()?;
    let child = spawn(python, &[server_file("scripted.py")]);
    Some(Client::stdio(child, options()).unwrap())
}

/// Arguments from a JSON object literal.
pub fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// Whether process `pid` still exists (a zombie counts as gone: it has exited).
pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .split(") ")
            .nth(1)
            .is_some_and(|rest| rest.starts_with('Z'))
    })
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something accepts connections on `port` (or panics after `limit`).
pub fn wait_for_port(port: u16, limit: Duration) {
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < limit,
            "nothing listens on port {port} after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server process that is killed when the test ends.
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The names `tools/list` gives.
pub fn tool_names(client: &mut Client) -> Vec<String> {
    client
        .list_tools()
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect()
}
