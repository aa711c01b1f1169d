//! Lifecycle hooks: programs run at fixed points of the loop, talking to the engine through files.
//!
//! Each invocation gets `io/hooks/<NNN>_<hook>/` (numbered after the highest existing folder, so
//! numbering continues when a run is resumed):
//!
//! ```text
//! input/context.json            {hook_name, step_index, run_id, timestamp}
//! input/proposed_payload.json   pre_llm_req: the request about to be sent
//! input/payload.json            other hooks: what happened
//! output/                       the hook may write final_payload.json, payload_override.dat,
//!                               control.json ({"skip": true} skips a tool in pre_tool_exec)
//! execution_meta/               command.txt, stdout.log, stderr.log, exit_code.txt, duration_ms.txt
//! ```
//!
//! The hook runs in the workspace with `DELTA_RUN_ID` and `DELTA_HOOK_IO_PATH` set. Its outputs are
//! read only when it exits 0; a timeout kills its process group and records exit code -1.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use serde_json::{Value, json};

use crate::agent::{HookName, HookSpec};
use crate::events::{HookStatus, timestamp};
use crate::io_files::Folders;
use crate::process::record::{ChildKind, Recorder};
use crate::process::{self, Spawn};

/// What a hook invocation produced.
#[derive(Debug, Clone, PartialEq)]
pub struct HookOutcome {
    /// Exit 0 or not.
    pub status: HookStatus,
    /// `io/hooks/NNN_name/`, relative to the run folder.
    pub io_path_ref: String,
    /// `output/final_payload.json`, when the hook succeeded and wrote one.
    pub final_payload: Option<Value>,
    /// `output/payload_override.dat`, likewise.
    pub payload_override: Option<String>,
    /// `output/control.json`, likewise.
    pub control: Option<Value>,
    /// Why outputs were ignored, or why the hook failed.
    pub problems: Vec<String>,
}

impl HookOutcome {
    /// Whether `control.json` says `"skip": true`.
    pub fn skip(&self) -> bool {
        self.control
            .as_ref()
            .and_then(|c| c.get("skip"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
}

/// Runs a run's hooks.
pub struct HookRunner {
    hooks: BTreeMap<HookName, HookSpec>,
    dir: PathBuf,
    next: u32,
    workspace: PathBuf,
    env: Vec<(String, String)>,
    run_id: String,
    clock: store::Clock,
    redactor: llm::Redactor,
    recorder: Option<Recorder>,
    /// Where the hooks' `io/` files are written (the run folder: `dir` is its `io/hooks`).
    folders: Folders,
    /// The sandbox hooks run in, like the agent's tools.
    confine: Option<std::sync::Arc<crate::sandbox::Confinement>>,
}

impl HookRunner {
    /// A runner writing into `hooks_dir` (the run's `io/hooks`).
    pub fn new(
        hooks: BTreeMap<HookName, HookSpec>,
        hooks_dir: &Path,
        workspace: &Path,
        env: Vec<(String, String)>,
        run_id: &str,
        clock: store::Clock,
        redactor: llm::Redactor,
    ) -> Self {
        let highest = std::fs::read_dir(hooks_dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|e| {
                        let name = e.file_name().into_string().ok()?;
                        name.split('_').next()?.parse::<u32>().ok()
                    })
                    .max()
                    .unwrap_or(0)
            })
            .unwrap_or(0);
        Self {
            hooks,
            dir: hooks_dir.to_path_buf(),
            folders: Folders::new(
                hooks_dir
                    .parent()
                    .and_then(Path::parent)
                    .unwrap_or(hooks_dir)
                    .to_path_buf(),
            ),
            next: highest + 1,
            workspace: workspace.to_path_buf(),
            env,
            run_id: run_id.to_string(),
            clock,
            redactor,
            recorder: None,
            confine: None,
        }
    }

    /// Records each hook's process group in `recorder`'s file while it runs, so that a process taking
    /// the run over after a crash can stop a hook left running.
    pub fn record_processes(&mut self, recorder: Recorder) {
        self.recorder = Some(recorder);
    }

    /// Runs hooks in `confine` (the agent's sandbox).
    pub fn confine(&mut self, confine: Option<std::sync::Arc<crate::sandbox::Confinement>>) {
        self.confine = confine;
    }

    /// Whether `name` is configured.
    pub fn has(&self, name: HookName) -> bool {
        self.hooks.contains_key(&name)
    }

    /// Writes the hook's `input/` files (context and payload, keys scrubbed) and its command.
    fn write_inputs(
        &mut self,
        name: HookName,
        spec: &HookSpec,
        io: &Path,
        step_index: u64,
        payload: &Value,
    ) -> std::io::Result<()> {
        for sub in ["input", "output", "execution_meta"] {
            self.folders.make_folder(&io.join(sub))?;
        }
        let context = json!({
            "hook_name": name.as_str(),
            "step_index": step_index,
            "run_id": self.run_id,
            "timestamp": timestamp(self.clock.now()),
        });
        self.folders
            .write(&io.join("input/context.json"), pretty(&context).as_bytes())?;
        let payload_file = if name == HookName::PreLlmReq {
            "proposed_payload.json"
        } else {
            "payload.json"
        };
        let scrubbed;
        let payload = if self.redactor.is_empty() {
            payload
        } else {
            let mut copy = payload.clone();
            self.redactor.redact_json(&mut copy);
            scrubbed = copy;
            &scrubbed
        };
        let payload = pretty(payload);
        self.folders
            .write(&io.join("input").join(payload_file), payload.as_bytes())?;
        self.folders.write(
            &io.join("execution_meta/command.txt"),
            spec.command.join(" ").as_bytes(),
        )?;
        Ok(())
    }

    /// The next hook folder's name, and whether delta has just made it: a folder already in the
    /// way (a tool may write in the run folder, and could lay out a hook's outputs in advance) is
    /// passed over; one that cannot be made is not read from.
    fn next_folder(&mut self, name: HookName) -> (String, bool) {
        for _ in 0..1000 {
            let folder = format!("{:03}_{}", self.next, name.as_str());
            self.next = self.next.saturating_add(1);
            match self.folders.new_folder(&self.dir.join(&folder)) {
                Ok(false) => continue,
                made => return (folder, made.is_ok()),
            }
        }
        (format!("{:03}_{}", self.next, name.as_str()), false)
    }

    /// Runs hook `name` (if configured) with `payload`.
    pub fn run(
        &mut self,
        name: HookName,
        step_index: u64,
        payload: &Value,
        interrupt: &AtomicBool,
    ) -> Option<HookOutcome> {
        let spec = self.hooks.get(&name)?.clone();
        let (folder, made) = self.next_folder(name);
        let io = self.dir.join(&folder);
        let io_path_ref = format!("io/hooks/{folder}/");
        let mut problems = Vec::new();
        let prepared = self.write_inputs(name, &spec, &io, step_index, payload);
        if let Err(e) = &prepared {
            problems.push(format!("cannot prepare {}: {e}", io.display()));
        }
        if !made && prepared.is_ok() {
            problems.push(format!(
                "{} was there before the hook ran: its outputs are not read",
                io.display()
            ));
        }
        // Outputs are read only from a folder delta made and prepared for this run of the hook.
        let ours = made && prepared.is_ok();
        let mut env = self.env.clone();
        env.push(("DELTA_RUN_ID".into(), self.run_id.clone()));
        env.push(("DELTA_HOOK_IO_PATH".into(), io.display().to_string()));
        let spawn = Spawn {
            argv: spec.command.clone(),
            stdin: None,
            cwd: self.workspace.clone(),
            env,
            timeout: spec.timeout,
            confine: self.confine.clone(),
        };
        let run = match &self.recorder {
            Some(recorder) => {
                let recording = process::Recording {
                    recorder,
                    kind: ChildKind::Hook,
                    name: name.as_str(),
                    action_id: None,
                };
                let run = process::run_recorded(&spawn, interrupt, recording);
                // The group has ended (or never ran) once `run_recorded` returns.
                if let Err(e) = recorder.clear() {
                    problems.push(e.to_string());
                }
                run
            }
            None => process::run(&spawn, interrupt),
        };
        let (exit_code, stdout, stderr, millis) = match run {
            Ok(out) => {
                let code = if out.timed_out {
                    problems.push(format!("timed out after {} ms", spec.timeout.as_millis()));
                    -1
                } else {
                    out.exit_code
                };
                (code, out.stdout, out.stderr, out.duration.as_millis())
            }
            Err(e) => {
                let message = format!("cannot start {}: {e}", spec.command[0]);
                problems.push(message.clone());
                (1, Vec::new(), message.into_bytes(), 0)
            }
        };
        let meta = io.join("execution_meta");
        // Copied only where a secret was found.
        let files: [(&str, std::borrow::Cow<[u8]>); 4] = [
            ("stdout.log", self.redactor.redact_bytes(&stdout)),
            ("stderr.log", self.redactor.redact_bytes(&stderr)),
            ("exit_code.txt", exit_code.to_string().into_bytes().into()),
            ("duration_ms.txt", millis.to_string().into_bytes().into()),
        ];
        for (name, bytes) in files {
            let _ = self.folders.write(&meta.join(name), &bytes);
        }
        let status = if exit_code == 0 {
            HookStatus::Success
        } else {
            HookStatus::Failed
        };
        if status == HookStatus::Failed && exit_code > 0 {
            let tail = self
                .redactor
                .redact(&String::from_utf8_lossy(&stderr))
                .trim()
                .chars()
                .take(300)
                .collect::<String>();
            problems.push(if tail.is_empty() {
                format!("exit code {exit_code}")
            } else {
                format!("exit code {exit_code}: {tail}")
            });
        }
        let mut outcome = HookOutcome {
            status,
            io_path_ref,
            final_payload: None,
            payload_override: None,
            control: None,
            problems,
        };
        if status == HookStatus::Success && ours {
            let out = io.join("output");
            let folders = &mut self.folders;
            let problems = &mut outcome.problems;
            outcome.final_payload = read_json(folders, &out.join("final_payload.json"), problems);
            if outcome.final_payload.is_none() {
                outcome.payload_override =
                    folders.read(&out.join("payload_override.dat"), MAX_OUTPUT);
            }
            outcome.control = read_json(folders, &out.join("control.json"), problems);
        }
        Some(outcome)
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// The most of a hook's output file read (a request is the largest).
const MAX_OUTPUT: u64 = 256 << 20;

/// A hook's output file `path` as JSON (read through `folders`); invalid JSON is noted in
/// `problems`.
fn read_json(folders: &mut Folders, path: &Path, problems: &mut Vec<String>) -> Option<Value> {
    let text = folders.read(path, MAX_OUTPUT)?;
    match serde_json::from_str(&text) {
        Ok(v) => Some(v),
        Err(e) => {
            problems.push(format!("ignored {}: not valid JSON ({e})", path.display()));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn runner(dir: &Path, name: HookName, script: &str, timeout: Duration) -> HookRunner {
        let mut hooks = BTreeMap::new();
        hooks.insert(
            name,
            HookSpec {
                command: vec!["sh".into(), "-c".into(), script.into()],
                timeout,
                description: None,
            },
        );
        std::fs::create_dir_all(dir.join("io/hooks")).unwrap();
        HookRunner::new(
            hooks,
            &dir.join("io/hooks"),
            dir,
            vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
            "run-1",
            store::Clock::Fixed("2026-01-01T00:00:00Z".parse().unwrap()),
            llm::Redactor::new(["SECRET"]),
        )
    }

    #[test]
    fn outputs_laid_out_in_advance_or_reached_through_a_link_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = runner(
            dir.path(),
            HookName::PreLlmReq,
            // Succeeds, and points control.json at a file outside its folder.
            r#"ln -s "$DELTA_HOOK_IO_PATH/../../../outside.json" "$DELTA_HOOK_IO_PATH/output/control.json""#,
            Duration::from_secs(5),
        );
        // What a tool could leave for the next hook before it runs.
        let planted = dir.path().join("io/hooks/001_pre_llm_req/output");
        std::fs::create_dir_all(&planted).unwrap();
        std::fs::write(planted.join("final_payload.json"), r#"{"model":"planted"}"#).unwrap();
        std::fs::write(dir.path().join("outside.json"), r#"{"skip":true}"#).unwrap();
        let flag = AtomicBool::new(false);
        let out = r
            .run(HookName::PreLlmReq, 1, &json!({"model": "m"}), &flag)
            .unwrap();
        assert_eq!(out.status, HookStatus::Success, "{:?}", out.problems);
        assert_eq!(out.io_path_ref, "io/hooks/002_pre_llm_req/");
        assert_eq!(out.final_payload, None);
        assert_eq!(out.control, None, "a link is not read through");

        // The hooks' folder itself replaced by a link: nothing is made or read there.
        let outside = dir.path().join("elsewhere");
        std::fs::create_dir_all(outside.join("003_pre_llm_req/output")).unwrap();
        std::fs::write(
            outside.join("003_pre_llm_req/output/final_payload.json"),
            r#"{"model":"planted"}"#,
        )
        .unwrap();
        std::fs::rename(dir.path().join("io/hooks"), dir.path().join("io/old")).unwrap();
        std::os::unix::fs::symlink(&outside, dir.path().join("io/hooks")).unwrap();
        let out = r
            .run(HookName::PreLlmReq, 2, &json!({"model": "m"}), &flag)
            .unwrap();
        assert_eq!(out.final_payload, None);
        assert!(!out.problems.is_empty());
        assert!(!outside.join("003_pre_llm_req/input").exists());
    }

    #[test]
    fn writes_inputs_reads_outputs_and_continues_numbering() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("io/hooks/007_on_error")).unwrap();
        let script = r#"cat "$DELTA_HOOK_IO_PATH/input/proposed_payload.json" > /dev/null && echo "$DELTA_RUN_ID SECRET" && printf '{"model":"changed"}' > "$DELTA_HOOK_IO_PATH/output/final_payload.json" && echo '{"skip":true}' > "$DELTA_HOOK_IO_PATH/output/control.json""#;
        let mut r = runner(
            dir.path(),
            HookName::PreLlmReq,
            script,
            Duration::from_secs(5),
        );
        let flag = AtomicBool::new(false);
        let out = r
            .run(HookName::PreLlmReq, 3, &json!({"model": "m"}), &flag)
            .unwrap();
        assert_eq!(out.status, HookStatus::Success, "{:?}", out.problems);
        assert_eq!(out.io_path_ref, "io/hooks/008_pre_llm_req/");
        assert_eq!(out.final_payload, Some(json!({"model": "changed"})));
        assert!(out.skip());
        let io = dir.path().join("io/hooks/008_pre_llm_req");
        let ctx: Value =
            serde_json::from_str(&std::fs::read_to_string(io.join("input/context.json")).unwrap())
                .unwrap();
        assert_eq!(ctx["hook_name"], "pre_llm_req");
        assert_eq!(ctx["step_index"], 3);
        assert_eq!(
            std::fs::read_to_string(io.join("execution_meta/stdout.log")).unwrap(),
            "run-1 [REDACTED]\n"
        );
        assert_eq!(
            std::fs::read_to_string(io.join("execution_meta/exit_code.txt")).unwrap(),
            "0"
        );
        assert!(
            r.run(HookName::OnError, 1, &json!({}), &flag).is_none(),
            "not configured"
        );
    }

    #[test]
    fn failures_and_timeouts_are_recorded_and_outputs_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let flag = AtomicBool::new(false);
        let mut r = runner(
            dir.path(),
            HookName::PostToolExec,
            r#"echo '{"skip":true}' > "$DELTA_HOOK_IO_PATH/output/control.json"; echo boom >&2; exit 42"#,
            Duration::from_secs(5),
        );
        let out = r.run(HookName::PostToolExec, 1, &json!({}), &flag).unwrap();
        assert_eq!(out.status, HookStatus::Failed);
        assert!(!out.skip(), "outputs of a failed hook are ignored");
        assert_eq!(out.problems, vec!["exit code 42: boom"]);
        let mut r = runner(
            dir.path(),
            HookName::OnRunEnd,
            "sleep 10",
            Duration::from_millis(200),
        );
        let out = r.run(HookName::OnRunEnd, 1, &json!({}), &flag).unwrap();
        assert_eq!(out.status, HookStatus::Failed);
        let code = std::fs::read_to_string(
            dir.path()
                .join(&out.io_path_ref)
                .join("execution_meta/exit_code.txt"),
        )
        .unwrap();
        assert_eq!(code, "-1");
    }
}
