//! The official MCP clients driving one of our servers: the Python SDK (through
//! `tests/mcp-clients/official_client.py`) and the MCP Inspector's CLI, both from
//! `scripts/install-mcp-servers` ([`crate::needs::mcp_servers`]). The server is given as the
//! [`Command`] that starts it: its program, arguments, folder and environment are handed on.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::needs::McpServers;

/// What a client printed.
#[derive(Debug)]
pub struct ClientOutput {
    /// It exited with 0.
    pub ok: bool,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
}

impl ClientOutput {
    fn of(out: std::process::Output) -> Self {
        Self {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Stdout as JSON, once the client succeeded.
    pub fn json(&self) -> Value {
        assert!(self.ok, "the client failed: {}", self.stderr);
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {}", self.stdout))
    }
}

fn script_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp-clients/official_client.py")
}

/// The folder `server` runs in.
fn folder(server: &Command) -> PathBuf {
    server
        .get_current_dir()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

impl McpServers {
    /// The Python SDK runs `script` (see `official_client.py`) against `server` started on stdio,
    /// in its folder, with its environment.
    pub fn python_stdio(&self, server: &Command, script: &Value) -> ClientOutput {
        let mut line = vec![server.get_program().to_string_lossy().into_owned()];
        line.extend(server.get_args().map(|a| a.to_string_lossy().into_owned()));
        let mut cmd = Command::new(&self.python);
        cmd.arg(script_file())
            .args(["stdio", &Value::from(line).to_string(), &script.to_string()])
            .current_dir(folder(server));
        for (key, value) in server.get_envs() {
            match value {
                Some(value) => cmd.env(key, value),
                None => cmd.env_remove(key),
            };
        }
        ClientOutput::of(cmd.output().unwrap_or_else(|e| panic!("python: {e}")))
    }

    /// The Python SDK runs `script` against the streamable HTTP endpoint `url`.
    pub fn python_http(&self, url: &str, script: &Value) -> ClientOutput {
        let out = Command::new(&self.python)
            .arg(script_file())
            .args(["http", url, &script.to_string()])
            .output()
            .unwrap_or_else(|e| panic!("python: {e}"));
        ClientOutput::of(out)
    }

    /// One call of the Inspector's CLI (`--cli`) on `server`, with `args` (`--method …`).
    pub fn inspect(&self, server: &Command, args: &[&str]) -> ClientOutput {
        let mut cmd = Command::new(&self.inspector);
        cmd.arg("--cli")
            .arg(server.get_program())
            .args(server.get_args());
        cmd.arg("--cwd").arg(folder(server));
        for (key, value) in server.get_envs() {
            if let Some(value) = value {
                cmd.arg("-e").arg(format!(
                    "{}={}",
                    key.to_string_lossy(),
                    value.to_string_lossy()
                ));
            }
        }
        cmd.args(args).current_dir(folder(server));
        ClientOutput::of(cmd.output().unwrap_or_else(|e| panic!("inspector: {e}")))
    }

    /// The structured content of calling `tool` with `arguments` through the Inspector's CLI.
    pub fn inspect_call(&self, server: &Command, tool: &str, arguments: &Value) -> Value {
        let out = self.inspect(
            server,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                tool,
                "--tool-args-json",
                &arguments.to_string(),
                "--format",
                "json",
                "-q",
            ],
        );
        out.json()["result"]["structuredContent"].clone()
    }
}

/// Starts `server` (an MCP server asked for `--http HOST:0`), which prints `MCP endpoint: URL` as
/// its first line on stderr: the process and the URL.
pub fn http_endpoint(mut server: Command) -> (Child, String) {
    let mut child = server
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the server: {e}"));
    let mut line = String::new();
    if let Some(stderr) = child.stderr.take() {
        let _ = BufReader::new(stderr).read_line(&mut line);
    }
    let url = line
        .trim()
        .strip_prefix("MCP endpoint: ")
        .unwrap_or_else(|| panic!("no endpoint line: {line:?}"))
        .to_string();
    (child, url)
}
