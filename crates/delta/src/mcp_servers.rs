//! The MCP servers of a run (`mcp_servers:` in agent.yaml): started with the run, their tools offered
//! to the model as `<server>__<tool>`, called through the [`mcp`] client, and stopped with the run.
//!
//! A stdio server runs in a process group of its own, recorded in the run folder's
//! `mcp_servers.json` as soon as it starts; the next process that takes the run over stops what a
//! killed delta left running (a server also ends by itself when its stdin closes, as delta's death
//! closes it). A server that stops answering (it crashed, or its connection broke) fails the call it
//! was running and is started again for the next one. What a stdio server writes to its standard
//! error goes to `io/mcp/<name>.stderr.log` in the run folder, scrubbed, up to [`MAX_CAPTURE`] bytes
//! (the rest is read and dropped).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::agent::mcp::{McpServerSpec, McpTransport, UnsetVariable};
use crate::process::MAX_CAPTURE;
use crate::process::group::{self, GroupId};

/// The record of the run's stdio servers, in its folder.
pub const RECORD_FILE: &str = "mcp_servers.json";
/// How long a leftover server gets after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(1);
/// The line a stdio server's standard error log ends with once it has [`MAX_CAPTURE`] bytes.
const STDERR_CUT: &str =
    "[delta: the server's standard error was cut here; the rest was read and dropped]\n";

// One bound for what a program sends: a tool's output, one message of an MCP server.
const _: () = assert!(mcp::MAX_MESSAGE == MAX_CAPTURE);

/// Why a server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum McpServerError {
    #[error(transparent)]
    Unset(#[from] UnsetVariable),
    #[error("MCP server {server}: cannot start {command}: {source}")]
    Spawn {
        server: String,
        command: String,
        source: std::io::Error,
    },
    #[error("MCP server {server}: {source}")]
    Client {
        server: String,
        source: mcp::McpError,
    },
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("starting an MCP server failed unexpectedly")]
    Panicked,
}

/// A server just started.
struct Started {
    client: mcp::Client,
    group: Option<GroupId>,
    tools: Vec<mcp::ToolInfo>,
}

/// A tool of a server, as offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// The name the model sees: `<server>__<tool>`.
    pub model_name: String,
    /// Which server (its index in the agent's `mcp_servers`).
    pub server: usize,
    /// The tool as the server describes it.
    pub info: mcp::ToolInfo,
}

/// One server: its configuration (variables expanded), its connection when it has one.
struct Slot {
    spec: McpServerSpec,
    client: Option<mcp::Client>,
    group: Option<GroupId>,
    tools: Vec<mcp::ToolInfo>,
}

/// The servers of one run.
pub struct McpServers {
    slots: Vec<Slot>,
    launcher: Launcher,
}

/// What starting a server takes (shared by the threads that start them).
struct Launcher {
    /// Where a stdio server's standard error goes (`None`: nowhere), one file per server.
    logs: Option<PathBuf>,
    /// `mcp_servers.json` (`None`: not recorded).
    record: Option<PathBuf>,
    /// The folder a stdio server starts in, unless it names one.
    workspace: PathBuf,
    agent_dir: PathBuf,
    /// The environment a stdio server starts with (its own `env` is added).
    env: Vec<(String, String)>,
    redactor: llm::Redactor,
    /// The stdio servers running now, by name (what `mcp_servers.json` says).
    running: std::sync::Mutex<Vec<(String, GroupId)>>,
    /// Raised to give up on a call in progress (the run's interrupt).
    interrupt: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// The sandbox stdio servers run in (the agent's).
    sandbox: Option<crate::sandbox::SandboxPolicy>,
}

/// Where a run keeps what its servers need: the run folder (record, logs) and the folders to start
/// them in.
pub struct Places<'a> {
    pub run_root: Option<&'a Path>,
    pub workspace: &'a Path,
    pub agent_dir: &'a Path,
}

impl McpServers {
    /// The servers of `specs`, their `${VAR}`s expanded by `lookup`; nothing is started yet.
    /// Returns them and the secrets the expansion brought in (to scrub).
    pub fn new(
        specs: &[McpServerSpec],
        lookup: &dyn Fn(&str) -> Option<String>,
        places: &Places<'_>,
        env: Vec<(String, String)>,
    ) -> Result<(Self, Vec<String>), McpServerError> {
        let mut slots = Vec::new();
        let mut secrets = Vec::new();
        for spec in specs {
            let (resolved, found) = spec.resolve(lookup)?;
            secrets.extend(found);
            slots.push(Slot {
                spec: resolved,
                client: None,
                group: None,
                tools: Vec::new(),
            });
        }
        let launcher = Launcher {
            logs: places.run_root.map(|r| r.join("io/mcp")),
            record: places.run_root.map(|r| r.join(RECORD_FILE)),
            workspace: places.workspace.to_path_buf(),
            agent_dir: places.agent_dir.to_path_buf(),
            env,
            redactor: llm::Redactor::new(secrets.clone()),
            running: std::sync::Mutex::new(Vec::new()),
            interrupt: None,
            sandbox: None,
        };
        let servers = Self { slots, launcher };
        Ok((servers, secrets))
    }

    /// Scrubs the run's secrets from what a server writes to its log and the tools it describes,
    /// too.
    pub fn set_redactor(&mut self, redactor: llm::Redactor) {
        self.launcher.redactor = redactor;
    }

    /// Runs stdio servers in `policy`'s sandbox (for the workspace), like the agent's tools.
    pub fn set_sandbox(&mut self, policy: Option<crate::sandbox::SandboxPolicy>) {
        self.launcher.sandbox = policy.filter(crate::sandbox::SandboxPolicy::confines);
    }

    /// Gives up on a call in progress when `flag` is raised (over stdio; an HTTP call runs to its
    /// answer or its timeout).
    pub fn set_interrupt(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        self.launcher.interrupt = Some(flag);
    }

    /// Stops the servers a previous process of the run left running (recorded in the run folder).
    pub fn stop_leftovers(&self) -> Vec<String> {
        self.launcher
            .record
            .as_deref()
            .map_or_else(Vec::new, stop_recorded)
    }

    /// Starts every server and lists its tools, all at once (each on a thread of its own: a run
    /// waits for its slowest server, not for the sum of them).
    pub fn start_all(&mut self) -> Result<(), McpServerError> {
        let launcher = &self.launcher;
        let specs: Vec<McpServerSpec> = self.slots.iter().map(|s| s.spec.clone()).collect();
        let started: Vec<Result<Started, McpServerError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = specs
                .iter()
                .map(|spec| scope.spawn(move || launcher.launch(spec)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(McpServerError::Panicked)))
                .collect()
        });
        let mut first_error = None;
        for (slot, started) in self.slots.iter_mut().zip(started) {
            match started {
                Ok(started) => {
                    slot.client = Some(started.client);
                    slot.group = started.group;
                    slot.tools = started.tools;
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Starts server `i` again (initialize, tools/list).
    fn start(&mut self, i: usize) -> Result<(), McpServerError> {
        let started = self.launcher.launch(&self.slots[i].spec)?;
        let slot = &mut self.slots[i];
        slot.client = Some(started.client);
        slot.group = started.group;
        slot.tools = started.tools;
        Ok(())
    }

    /// The tools of every server that runs, as the model sees them: their descriptions, titles and
    /// schemas scrubbed of the run's secrets (a server writes them, and may write what it was given).
    /// A tool whose combined name a model would refuse, or whose name holds a secret, is left out;
    /// the second value names those.
    pub fn tools(&self) -> (Vec<McpTool>, Vec<String>) {
        let redactor = &self.launcher.redactor;
        let mut offered = Vec::new();
        let mut refused = Vec::new();
        for (server, slot) in self.slots.iter().enumerate() {
            for info in &slot.tools {
                match mcp::model_tool_name(&slot.spec.name, &info.name) {
                    Some(model_name) if !info.name.is_empty() && !redactor.leaks(&info.name) => {
                        offered.push(McpTool {
                            model_name,
                            server,
                            info: scrubbed(info, redactor),
                        });
                    }
                    _ => refused.push(format!(
                        "{}/{}",
                        slot.spec.name,
                        redactor.redact(&info.name)
                    )),
                }
            }
        }
        (offered, refused)
    }

    /// Lists the tools again of each server that said they changed; whether any did.
    pub fn refresh(&mut self) -> bool {
        let mut changed = false;
        for slot in &mut self.slots {
            let Some(client) = &mut slot.client else {
                continue;
            };
            if client.tools_changed()
                && let Ok(tools) = client.list_tools()
            {
                slot.tools = tools;
                changed = true;
            }
        }
        changed
    }

    /// The name of server `i`.
    pub fn name(&self, i: usize) -> &str {
        self.slots.get(i).map_or("", |s| s.spec.name.as_str())
    }

    /// Calls `tool` of server `i`, starting the server again first if it had stopped. A server
    /// that fails (other than by the tool's own `isError`) is let go, to be started for the next
    /// call.
    pub fn call(
        &mut self,
        i: usize,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<(mcp::CallResult, Duration), McpServerError> {
        if self.slots.get(i).is_some_and(|s| s.client.is_none()) {
            self.stop(i);
            self.start(i)?;
        }
        let started = Instant::now();
        let slot = &mut self.slots[i];
        let timeout = slot.spec.timeout;
        let Some(client) = &mut slot.client else {
            return Err(McpServerError::Client {
                server: slot.spec.name.clone(),
                source: mcp::McpError::Protocol("the server is not running".into()),
            });
        };
        match client.call_tool(tool, arguments, Some(timeout)) {
            Ok(result) => Ok((result, started.elapsed())),
            Err(source) => {
                let server = slot.spec.name.clone();
                if !matches!(source, mcp::McpError::Rpc { .. }) {
                    self.stop(i);
                }
                Err(McpServerError::Client { server, source })
            }
        }
    }

    /// Ends server `i`'s connection and stops its group.
    fn stop(&mut self, i: usize) {
        let Some(slot) = self.slots.get_mut(i) else {
            return;
        };
        if let Some(client) = slot.client.take() {
            client.close();
        }
        if let Some(group) = slot.group.take() {
            group::stop(&group, STOP_GRACE);
        }
        let name = slot.spec.name.clone();
        let _ = self.launcher.note_running(&name, None);
    }

    /// Stops every server.
    pub fn stop_all(&mut self) {
        // Each server gets its grace to exit at the same time as the others.
        std::thread::scope(|scope| {
            for slot in &mut self.slots {
                if let Some(client) = slot.client.take() {
                    scope.spawn(move || client.close());
                }
            }
        });
        for i in 0..self.slots.len() {
            self.stop(i);
        }
        if let Some(record) = &self.launcher.record {
            let _ = std::fs::remove_file(record);
        }
    }
}

/// Stops the stdio servers that `record` (a run's [`RECORD_FILE`]) names and that still run, then
/// removes the record; the names of those that ran. For the holder of the run's lock.
pub fn stop_recorded(record: &Path) -> Vec<String> {
    let Ok(bytes) = std::fs::read(record) else {
        return Vec::new();
    };
    let left: Vec<(String, GroupId)> = serde_json::from_slice(&bytes).unwrap_or_default();
    let mut stopped = Vec::new();
    for (name, group) in left {
        if group::stop(&group, STOP_GRACE).was_running() {
            stopped.push(name);
        }
    }
    let _ = std::fs::remove_file(record);
    stopped
}

impl Launcher {
    /// Starts the server of `spec` (a stdio server's group recorded as soon as it runs), initializes
    /// it and lists its tools.
    fn launch(&self, spec: &McpServerSpec) -> Result<Started, McpServerError> {
        let options = mcp::Options {
            timeout: spec.timeout,
            client: mcp::ClientInfo {
                name: "delta".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
        };
        let client_error = |source| McpServerError::Client {
            server: spec.name.clone(),
            source,
        };
        let (mut client, group) = match &spec.transport {
            McpTransport::Http { url, headers } => (
                mcp::Client::http(url, headers, options).map_err(client_error)?,
                None,
            ),
            McpTransport::Stdio {
                command, args, env, ..
            } => {
                let server_env: Vec<(String, String)> =
                    self.env.iter().chain(env).cloned().collect();
                let mut child = match &self.sandbox {
                    Some(policy) => crate::sandbox::command(
                        &crate::shells::host_program(),
                        policy,
                        &self.workspace,
                        command,
                        args,
                        &server_env,
                    ),
                    None => {
                        let mut plain = Command::new(command);
                        plain
                            .args(args)
                            .env_clear()
                            .envs(server_env.iter().map(|(k, v)| (k, v)));
                        plain
                    }
                };
                child
                    .current_dir(spec.start_dir(&self.agent_dir, &self.workspace))
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(if self.logs.is_some() {
                        Stdio::piped()
                    } else {
                        Stdio::null()
                    });
                std::os::unix::process::CommandExt::process_group(&mut child, 0);
                let mut child = child.spawn().map_err(|source| McpServerError::Spawn {
                    server: spec.name.clone(),
                    command: command.clone(),
                    source,
                })?;
                let group = GroupId::of_leader(child.id() as i32);
                self.note_running(&spec.name, Some(&group))?;
                if let (Some(stderr), Some(logs)) = (child.stderr.take(), &self.logs) {
                    self.log_stderr(stderr, &logs.join(format!("{}.stderr.log", spec.name)));
                }
                let client = mcp::Client::stdio(child, options).map_err(|e| {
                    group::kill(&group);
                    client_error(e)
                })?;
                (client, Some(group))
            }
        };
        if let Some(flag) = &self.interrupt {
            client.cancel_when(std::sync::Arc::clone(flag));
        }
        let tools = client.list_tools().map_err(client_error)?;
        Ok(Started {
            client,
            group,
            tools,
        })
    }

    /// Copies a server's standard error into `path`, scrubbed, on a thread of its own: whole lines
    /// up to [`MAX_CAPTURE`] bytes, then [`STDERR_CUT`]; whatever is not copied is read and dropped,
    /// so that the server never blocks on a full pipe.
    fn log_stderr(&self, stderr: std::process::ChildStderr, path: &Path) {
        let redactor = self.redactor.clone();
        let path = path.to_path_buf();
        std::thread::spawn(move || {
            let mut stderr = BufReader::new(stderr);
            if let Some(mut log) = open_log(&path) {
                copy_lines(&mut stderr, &mut log, &redactor, MAX_CAPTURE);
            }
            let _ = std::io::copy(&mut stderr, &mut std::io::sink());
        });
    }

    /// Notes in `mcp_servers.json` that server `name` runs in `group` (`None`: it no longer runs).
    fn note_running(&self, name: &str, group: Option<&GroupId>) -> Result<(), McpServerError> {
        let Some(record) = &self.record else {
            return Ok(());
        };
        let mut running = self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        running.retain(|(n, _)| n != name);
        if let Some(group) = group {
            running.push((name.to_string(), group.clone()));
        }
        let bytes = serde_json::to_vec(&*running).unwrap_or_default();
        store::write_atomic_lazy(record, &bytes)?;
        Ok(())
    }
}

/// Opens (to append) a server's standard error log, not through a link a tool may have put in the
/// run folder (`io/`, `io/mcp/`).
fn open_log(path: &Path) -> Option<std::fs::File> {
    if let Some(parent) = path.parent() {
        let io = parent.parent().map(crate::io_files::own_folder);
        if matches!(io, Some(Err(_))) || crate::io_files::own_folder(parent).is_err() {
            return None;
        }
    }
    store::atomic::own_file(std::fs::OpenOptions::new().create(true).append(true))
        .open(path)
        .ok()
}

/// Copies the lines of `input` into `log`, each scrubbed by `redactor`, while they fit in `cap`
/// bytes; at the first that does not, writes [`STDERR_CUT`] and stops (the rest of `input` is the
/// caller's to drain). Holds at most `cap + 1` bytes of a line: a longer one is not read further.
fn copy_lines(
    input: &mut impl BufRead,
    log: &mut impl Write,
    redactor: &llm::Redactor,
    cap: usize,
) {
    let mut left = cap;
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = left as u64 + 1;
        match input.by_ref().take(limit).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let ended = line.last() == Some(&b'\n');
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = String::from_utf8_lossy(text.strip_suffix(b"\r").unwrap_or(text));
        let scrubbed = redactor.redact(&text);
        let fits = (ended || line.len() <= left) && scrubbed.len() < left;
        if !fits {
            let _ = log.write_all(STDERR_CUT.as_bytes());
            return;
        }
        // A failed write (a full disk) costs the line, not the budget's bound.
        let _ = writeln!(log, "{scrubbed}");
        left -= scrubbed.len() + 1;
    }
}

impl Drop for McpServers {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// `info` as the model may read it: its description, title and schema with every secret of
/// `redactor` replaced (its name, which calls use, as it is).
fn scrubbed(info: &mcp::ToolInfo, redactor: &llm::Redactor) -> mcp::ToolInfo {
    let text = |t: &Option<String>| t.as_deref().map(|t| redactor.redact(t).into_owned());
    let mut input_schema = info.input_schema.clone();
    redactor.redact_json(&mut input_schema);
    mcp::ToolInfo {
        name: info.name.clone(),
        description: text(&info.description),
        input_schema,
        title: text(&info.title),
    }
}

/// What to say of the MCP tools a run does not offer: `refused` (names a model would refuse,
/// `server/tool`) and `skipped` (names taken already).
pub fn left_out(refused: &[String], skipped: &[String]) -> Vec<String> {
    let mut warnings = Vec::new();
    if !refused.is_empty() {
        warnings.push(format!(
            "MCP tools not offered: their names are not ones a model accepts (1-64 letters, digits, _ or - with the server's prefix) or hold a secret: {}",
            refused.join(", ")
        ));
    }
    if !skipped.is_empty() {
        warnings.push(format!(
            "MCP tools not offered: another tool has the same name: {}",
            skipped.join(", ")
        ));
    }
    warnings
}

/// Every tool a run of `agent` would offer the model, in order, with its MCP servers started (and
/// stopped again) to list theirs; `workspace` is where stdio servers start, `env` the environment a
/// run would have. The second value says which tools of the servers are left out, and why.
pub fn offered_tools(
    agent: &crate::agent::Agent,
    env: &crate::env::Env,
    workspace: &Path,
) -> Result<(Vec<llm::ToolDefinition>, Vec<String>), McpServerError> {
    let lookup = crate::agent::mcp::lookup(env, &agent.dir);
    let places = Places {
        run_root: None,
        workspace,
        agent_dir: &agent.dir,
    };
    let (mut servers, secrets) =
        McpServers::new(&agent.mcp_servers, &lookup, &places, env.for_child())?;
    // What a run would scrub from the tools it offers: the servers' secrets and delta's keys.
    let keys = env
        .secret_names()
        .into_iter()
        .filter_map(|name| env.get(name));
    let keys: Vec<String> = keys.map(str::to_string).collect();
    servers.set_redactor(llm::Redactor::new(secrets.into_iter().chain(keys)));
    servers.set_sandbox(agent.sandbox.clone());
    servers.start_all()?;
    let (tools, refused) = servers.tools();
    servers.stop_all();
    let registry = crate::engine::ToolRegistry::with_mcp(agent, tools);
    let warnings = left_out(&refused, registry.skipped_mcp());
    Ok((registry.definitions().to_vec(), warnings))
}
