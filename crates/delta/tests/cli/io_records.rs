//! The `io/` records of a tool call say what happened to its output: a stream past the 64 MiB a
//! call keeps is counted in full and marked where it was cut; on a full disk, the records that
//! could not be written are named in the journal instead of being left empty.

use serde_json::{Value, json};
use testkit::{Reply, ScriptedServer};

use crate::support::{Sandbox, agent_yaml, output, read_jsonl};

const CAPTURE: u64 = 64 * 1024 * 1024;

#[test]
fn output_past_the_capture_limit_is_counted_and_its_cut_marked() {
    let extra = 1000;
    let tool = format!(
        "  - name: flood\n    shell: \"head -c {} /dev/zero | tr '\\\\000' y\"\n",
        CAPTURE + extra
    );
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "flood", json!({})),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(&agent_yaml(&tool));
    let out = sb.run(Some(&server), "go", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result = &sb.events("ACTION_RESULT")[0]["payload"];
    let seen = result["observation_content"].as_str().unwrap();
    assert!(
        seen.contains(&format!("{} total bytes", CAPTURE + extra))
            && seen.contains(&format!("then {extra} bytes past the 64 MiB")),
        "{}",
        &seen[seen.len().saturating_sub(300)..]
    );
    let record = crate::support::tool_record(&sb.run_dir(), "c1");
    let kept = record["stdout"].as_str().unwrap().as_bytes();
    assert!(kept[..CAPTURE as usize].iter().all(|b| *b == b'y'));
    let mark = String::from_utf8_lossy(&kept[CAPTURE as usize..]).into_owned();
    assert!(
        mark.contains(&format!("cut here; {extra} more bytes")),
        "{mark:?}"
    );
}

#[test]
fn records_a_full_disk_refused_are_named_in_the_journal_not_left_empty() {
    if testkit::needs::private_mounts().is_none() {
        return;
    }
    // The workspace is a 4 MiB tmpfs; the tool fills it but for 200 KiB, then prints 1 MB: the
    // journal's lines still fit, the tool's record does not.
    let tool = "  - name: fill\n    shell: \"head -c 100000000 /dev/zero > fill 2>/dev/null; truncate -s -200K fill; head -c 1000000 /dev/zero | tr '\\\\000' y\"\n";
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "fill", json!({})),
        Reply::text("done"),
    ]);
    let sb = Sandbox::new(&agent_yaml(tool));
    std::fs::create_dir_all(sb.ws()).unwrap();
    std::fs::create_dir_all(sb.path("copy")).unwrap();
    let mut cmd = sb.delta(Some(&server));
    cmd.args(["run", "--agent", "agent", "-w", "ws", "-m", "go"]);
    let script = "mount -t tmpfs -o size=4m none ws || exit 90; \"$@\"; rc=$?; rm -f ws/fill; \
                  cp -a ws/. copy/; exit $rc";
    let out = output(crate::support::wrapped(
        &cmd,
        std::path::Path::new("unshare"),
        &["-Urm", "sh", "-c", script, "sh"],
    ));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let id = std::fs::read_to_string(sb.path("copy/.delta/LATEST")).unwrap();
    let run = sb.path("copy/.delta").join(id.trim());
    let journal = read_jsonl(&run.join("journal.jsonl"));
    let warning = journal
        .iter()
        .filter(|e| e["type"] == "SYSTEM_MESSAGE")
        .filter_map(|e| e["payload"]["content"].as_str())
        .find(|t| t.contains("could not be written"))
        .unwrap_or_else(|| {
            let kinds: Vec<&Value> = journal.iter().map(|e| &e["type"]).collect();
            panic!("no warning in the journal: {kinds:?}")
        });
    assert!(
        warning.contains("io/tool_executions (record c1: No space left"),
        "{warning}"
    );
    // Nothing of it: no file, no line (whole or cut short) in a pack.
    let tools = run.join("io/tool_executions");
    assert_eq!(
        crate::support::io_record_ids(&tools),
        Vec::<String>::new(),
        "a record that could not be written is not left empty or cut short"
    );
    for entry in std::fs::read_dir(&tools).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            0,
            "{}",
            path.display()
        );
    }
    let kinds: Vec<&Value> = journal.iter().map(|e| &e["type"]).collect();
    assert_eq!(kinds.last().unwrap().as_str(), Some("RUN_END"), "{kinds:?}");
    assert!(
        out.stderr.contains("could not be written"),
        "{}",
        out.stderr
    );
}
