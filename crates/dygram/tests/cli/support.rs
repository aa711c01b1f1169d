//! Helpers of the tests that run `dygram` in a temporary folder with their own machines (no file
//! of the shared conformance corpus is needed).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// Variables that would give the binary a live API: removed from every call unless a test sets
/// them itself.
pub const LLM_ENV: [&str; 7] = [
    "DYGRAM_BASE_URL",
    "DYGRAM_PROVIDER",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_MODEL_ID",
];

/// The `dygram` binary under test.
pub fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("dygram")
}

/// The repository's root folder.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What a call printed and returned.
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

impl Out {
    /// stdout as one JSON value.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }

    /// stdout as exactly one JSON value on one line.
    pub fn json_line(&self) -> Value {
        assert_eq!(
            self.stdout.trim_end().lines().count(),
            1,
            "one JSON object, one line: {self:?}"
        );
        self.json()
    }

    /// The id after `Starting interactive execution: ` on stderr.
    pub fn started_id(&self) -> String {
        let line = self
            .stderr
            .lines()
            .find_map(|l| l.split("Starting interactive execution: ").nth(1))
            .unwrap_or_else(|| panic!("no start line: {self:?}"));
        line.trim().to_string()
    }
}

/// A temporary working folder.
pub struct Dir {
    dir: TempDir,
    env: Vec<(String, String)>,
}

impl Dir {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            env: Vec::new(),
        }
    }

    /// With `name` holding `text`.
    pub fn with_file(name: &str, text: &str) -> Self {
        let d = Self::new();
        d.write(name, text);
        d
    }

    /// Sets a variable for every later call.
    pub fn env(&mut self, name: &str, value: &str) {
        self.env.push((name.to_string(), value.to_string()));
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, name: &str, text: &str) {
        let path = self.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, text).unwrap();
    }

    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(bin());
        cmd.args(args).current_dir(self.path());
        for var in LLM_ENV {
            cmd.env_remove(var);
        }
        // A store of the developer's would move the executions out of the folder.
        cmd.env_remove("DYGRAM_STORE");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs `dygram ARGS` with an empty, closed stdin.
    pub fn run(&self, args: &[&str]) -> Out {
        self.run_with_stdin(args, "")
    }

    /// Runs `dygram ARGS` with `stdin` piped in (at most 60 s).
    pub fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Out {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            let mut input = child.stdin.take().unwrap();
            let _ = input.write_all(stdin.as_bytes());
        }
        let out = wait_output(child, Duration::from_secs(60));
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }

    /// A `std::process::Command` for `dygram ARGS` with no stdin (for spawning and killing).
    pub fn spawn_command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = self.command(args);
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Starts `dygram ARGS` with stdin, stdout and stderr piped: the test writes to stdin when it
    /// likes, or keeps it open without writing.
    pub fn spawn_piped(&self, args: &[&str]) -> std::process::Child {
        self.command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Runs `dygram ARGS` on a pseudo-terminal (util-linux's `script` gives it one): what it
    /// showed there, stdout and stderr together (at most 60 s). `NO_COLOR` is unset unless the test
    /// set it. `None`, after a SKIPPED line, without `script`.
    pub fn run_on_terminal(&self, args: &[&str]) -> Option<String> {
        let quote = |a: &str| format!("'{}'", a.replace('\'', "'\\''"));
        let line: Vec<String> = std::iter::once(bin().display().to_string())
            .chain(args.iter().map(|a| a.to_string()))
            .map(|a| quote(&a))
            .collect();
        let program = testkit::needs::pseudo_terminal()?;
        let mut cmd = std::process::Command::new(program);
        cmd.args(["-qec", &line.join(" "), "/dev/null"])
            .current_dir(self.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env_remove("NO_COLOR")
            .env_remove("DYGRAM_STORE");
        for var in LLM_ENV {
            cmd.env_remove(var);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().ok()?;
        let out = wait_output(child, Duration::from_secs(60));
        Some(String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n"))
    }

    /// `.dygram/executions/<name>`.
    pub fn exec_dir(&self, name: &str) -> PathBuf {
        self.path().join(".dygram/executions").join(name)
    }

    /// Names in `.dygram/executions/` (without `last`), sorted.
    pub fn folders(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.path().join(".dygram/executions")) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "last")
            .collect();
        names.sort();
        names
    }

    pub fn read_json(&self, id: &str, file: &str) -> Value {
        let path = self.exec_dir(id).join(file);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// `dygram exec status ID --format json` (which must succeed), as one JSON object.
    pub fn status_json(&self, id: &str) -> Value {
        let out = self.run(&["exec", "status", id, "--format", "json"]);
        assert_eq!(out.code, 0, "{out:?}");
        out.json_line()
    }

    /// `dygram exec show ID --format json` (which must succeed), as JSON.
    pub fn show_json(&self, id: &str) -> Value {
        let out = self.run(&["exec", "show", id, "--format", "json"]);
        assert_eq!(out.code, 0, "{out:?}");
        out.json()
    }

    /// The lines of `history.jsonl` (none when it does not exist).
    pub fn history(&self, id: &str) -> Vec<Value> {
        std::fs::read_to_string(self.exec_dir(id).join("history.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}

/// Waits for a child with a deadline (killed and reported when it does not end).
pub fn wait_output(mut child: std::process::Child, limit: Duration) -> std::process::Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().unwrap()
}

/// Copies a folder with everything in it.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Whether Graphviz's `dot` is installed.
pub fn graphviz_available() -> bool {
    std::process::Command::new("dot")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The peak resident memory of a running process, in kB (Linux; `None` without `/proc`).
pub fn peak_memory_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
