//! Tests that need something the repository does not hold: the specification's conformance corpus,
//! a live LLM server, Graphviz, a pseudo-terminal, Neovim.
//!
//! Each function returns what the test needs, or `None` after printing one line that says what is
//! missing and how to provide it:
//!
//! ```text
//! SKIPPED conformance::json_matches_the_reference: needs the DyGram conformance corpus (...)
//! ```
//!
//! The line goes straight to the process's standard error, past the test harness's capture, so
//! `cargo test` shows it even for a test that passes, and `.ci/run` counts these lines: a skipped
//! test is reported as skipped, never as a pass. Where the environment variable named in the line is
//! set (CI sets them all), a missing resource fails the test instead.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What a `SKIPPED` line starts with.
pub const SKIPPED: &str = "SKIPPED";

/// Makes the conformance tests required.
pub const CONFORMANCE_REQUIRED: &str = "CONFORMANCE_REQUIRED";
/// Makes the live-server tests required.
pub const LIVE_REQUIRED: &str = "LLM_E2E_REQUIRED";
/// Makes the Graphviz checks required.
pub const GRAPHVIZ_REQUIRED: &str = "DYGRAM_GRAPHVIZ_REQUIRED";

/// The specification folder: `$SHARED_DIR`, or `shared/` beside the checkout.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("SHARED_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            // `crates/testkit/../../../shared`, without the `..` steps (messages show this path).
            let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2);
            let beside = checkout.and_then(Path::parent).unwrap_or(Path::new(".."));
            beside.join("shared")
        }
    }
}

/// The DyGram conformance corpus (`<shared>/conformance/dygram`: `manifest.tsv`, `examples/`,
/// `expected/`, `execution/`).
pub fn conformance() -> Option<PathBuf> {
    let dir = shared_dir().join("conformance/dygram");
    if dir.join("manifest.tsv").is_file() {
        return Some(dir);
    }
    skip(
        CONFORMANCE_REQUIRED,
        &format!(
            "the DyGram conformance corpus at {} (the specification checked out beside this \
             repository as ../shared, or SHARED_DIR=PATH)",
            dir.display()
        ),
    )
}

/// A live OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct LiveServer {
    /// Base URL, `http://127.0.0.1:PORT/v1`.
    pub url: String,
    /// Model name to ask for.
    pub model: String,
}

/// The live server named by `LLM_E2E_URL` (model: `LLM_E2E_MODEL`, default `smollm2`).
pub fn live_server() -> Option<LiveServer> {
    match std::env::var("LLM_E2E_URL").ok().filter(|u| !u.is_empty()) {
        Some(url) => Some(LiveServer {
            url,
            model: std::env::var("LLM_E2E_MODEL").unwrap_or_else(|_| "smollm2".into()),
        }),
        None => skip(
            LIVE_REQUIRED,
            "a live OpenAI-compatible server: LLM_E2E_URL=http://127.0.0.1:PORT/v1 \
             (.ci/run starts one with ../shared/tools/real-llm-server)",
        ),
    }
}

/// Whether `program arg` runs and succeeds.
pub(crate) fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether Graphviz's `dot` runs; `None` (after saying so) when it does not.
pub fn graphviz() -> Option<()> {
    let found = runs("dot", "-V");
    if found {
        return Some(());
    }
    skip(
        GRAPHVIZ_REQUIRED,
        "Graphviz's `dot` on PATH (apt-get install graphviz)",
    )
}

/// Says that the current test is skipped for want of `what`, or fails it when `required` is set
/// (for the other modules of the kit).
pub(crate) fn skip_for<T>(required: &str, what: &str) -> Option<T> {
    skip(required, what)
}

/// Says that the current test is skipped for want of `what`, or fails it when `required` is set.
fn skip<T>(required: &str, what: &str) -> Option<T> {
    let test = std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .unwrap_or("a test")
        .to_string();
    if std::env::var_os(required).is_some_and(|v| !v.is_empty() && v != "0") {
        panic!("{test} needs {what}, and {required} is set, so it may not be skipped");
    }
    let line = format!("{SKIPPED} {test}: needs {what}; {required}=1 makes this a failure\n");
    // Past the harness's capture: the line must be seen even though the test passes.
    let _ = std::io::stderr().write_all(line.as_bytes());
    None
}

/// Makes the tests that need a pseudo-terminal required.
pub const TERMINAL_REQUIRED: &str = "TERMINAL_TEST_REQUIRED";

/// util-linux's `script`, which runs a command on a pseudo-terminal (for tests of what a tool does
/// on a terminal).
pub fn pseudo_terminal() -> Option<PathBuf> {
    program(
        ["script", "--version"],
        TERMINAL_REQUIRED,
        "util-linux's script, which gives a command a pseudo-terminal (apt-get install util-linux)",
    )
}

/// `program` (found on `PATH` when `program --flag` runs and succeeds), or, after saying so, `None`
/// (a failure when `required` is set).
fn program([program, flag]: [&str; 2], required: &str, what: &str) -> Option<PathBuf> {
    if runs(program, flag) {
        Some(PathBuf::from(program))
    } else {
        skip(required, what)
    }
}

/// Makes the tests that drive Neovim required.
pub const NEOVIM_REQUIRED: &str = "NEOVIM_TEST_REQUIRED";

/// Neovim's `nvim` (0.7 or later), for tests with a real editor as the language server's client.
pub fn neovim() -> Option<PathBuf> {
    program(
        ["nvim", "--version"],
        NEOVIM_REQUIRED,
        "Neovim's nvim on PATH, 0.7 or later (apt-get install neovim)",
    )
}

/// Makes the tests that need the kernel's Landlock required.
pub const LANDLOCK_REQUIRED: &str = "SANDBOX_TEST_REQUIRED";

/// A kernel with Landlock (Linux 5.13 or later, enabled), which delta's filesystem sandbox needs: a
/// ruleset is created (and dropped) to ask.
pub fn landlock() -> Option<()> {
    use landlock::{ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr};
    let made = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|r| r.create());
    if made.is_ok() {
        return Some(());
    }
    skip(
        LANDLOCK_REQUIRED,
        "a kernel with Landlock (Linux 5.13 or later, with Landlock in its security modules)",
    )
}

/// Makes the tests that inject faults with `strace` required.
pub const STRACE_REQUIRED: &str = "STRACE_TEST_REQUIRED";

/// `strace`, which traces a process's system calls and injects faults into them (a signal at the
/// N-th call of one kind), for tests of what a kill at one exact point leaves.
pub fn strace() -> Option<PathBuf> {
    program(
        ["strace", "-V"],
        STRACE_REQUIRED,
        "strace on PATH (apt-get install strace)",
    )
}

/// Makes the tests that need a private mount namespace required.
pub const MOUNT_NAMESPACE_REQUIRED: &str = "MOUNT_NAMESPACE_TEST_REQUIRED";

/// A private mount namespace a test can make without root (`unshare -Urm`: user namespaces), to
/// mount a small tmpfs and fill it.
pub fn private_mounts() -> Option<()> {
    let made = Command::new("unshare")
        .args(["-Urm", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if made {
        return Some(());
    }
    skip(
        MOUNT_NAMESPACE_REQUIRED,
        "unshare -Urm (a private mount namespace: user namespaces allowed)",
    )
}

/// Makes the tests that run MCP servers required.
pub const MCP_REQUIRED: &str = "MCP_TEST_REQUIRED";

/// Python 3 on `PATH`, which runs the scripted MCP servers of the `mcp` crate's tests.
pub fn python3() -> Option<PathBuf> {
    program(
        ["python3", "--version"],
        MCP_REQUIRED,
        "python3 on PATH (apt-get install python3)",
    )
}

/// The real MCP servers that `scripts/install-mcp-servers` installs.
#[derive(Debug, Clone)]
pub struct McpServers {
    /// The reference server `@modelcontextprotocol/server-everything`'s entry: `node <it> stdio`.
    pub everything: PathBuf,
    /// The Python of the virtual environment that holds the official `mcp` SDK.
    pub python: PathBuf,
    /// The MCP Inspector's command (`@modelcontextprotocol/inspector`; `--cli` for its CLI).
    pub inspector: PathBuf,
}

/// The MCP servers in `$MCP_SERVERS_DIR`, or in `target/mcp-servers` of the checkout, with `node` on
/// `PATH` to run the reference server.
pub fn mcp_servers() -> Option<McpServers> {
    let dir = match std::env::var_os("MCP_SERVERS_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2);
            checkout
                .unwrap_or(Path::new("."))
                .join("target/mcp-servers")
        }
    };
    let servers = McpServers {
        everything: dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        python: dir.join("venv/bin/python"),
        inspector: dir.join("node_modules/.bin/mcp-inspector"),
    };
    if servers.everything.is_file()
        && servers.python.is_file()
        && servers.inspector.is_file()
        && runs("node", "--version")
    {
        return Some(servers);
    }
    skip(
        MCP_REQUIRED,
        &format!(
            "the MCP test servers in {} and node on PATH (scripts/install-mcp-servers installs \
             them; MCP_SERVERS_DIR=PATH names another folder)",
            dir.display()
        ),
    )
}
