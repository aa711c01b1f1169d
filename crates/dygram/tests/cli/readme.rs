//! The README's dygram section, as a newcomer follows it: its machine (`order.dy`, written by the
//! here-document in the README) runs end to end, turn by turn, in manual mode.

use serde_json::{Value, json};

use super::support::{Dir, copy_dir, repo_root};

/// The `### dygram` section of the README.
pub fn dygram_section() -> String {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let start = readme
        .find("### dygram")
        .expect("README has a ### dygram section");
    let rest = &readme[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_string()
}

/// The text a `cat > NAME <<'EOF'` here-document of the section writes.
pub fn heredoc(section: &str, name: &str) -> String {
    let opener = format!("cat > {name} <<'EOF'\n");
    let start = section
        .find(&opener)
        .unwrap_or_else(|| panic!("no here-document for {name} in the README"))
        + opener.len();
    let end = section[start..].find("\nEOF\n").unwrap() + start;
    format!("{}\n", &section[start..end])
}

fn order_dy() -> String {
    heredoc(&dygram_section(), "order.dy")
}

/// Tool names of the request waiting in `pending-request.json`.
fn pending_tools(d: &Dir, id: &str) -> Vec<String> {
    d.read_json(id, "pending-request.json")["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// The example answer printed under `EXAMPLE RESPONSE:`.
fn example_answer(stdout: &str) -> Value {
    let line = stdout
        .lines()
        .skip_while(|l| !l.starts_with("EXAMPLE RESPONSE:"))
        .nth(1)
        .unwrap_or_else(|| panic!("no example answer in\n{stdout}"));
    serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("{e}: {line}"))
}

#[test]
fn readme_order_flow_reaches_shipped_turn_by_turn() {
    let d = Dir::with_file("order.dy", &order_dy());
    let call = |stdin: &str| d.run_with_stdin(&["e", "-i", "order.dy", "--id", "o"], stdin);

    let out = call("");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("start --(default)--> charge"),
        "{out:?}"
    );

    // At `charge` the model may only write the order: the transition is closed (total is 0).
    let out = call("");
    assert_eq!(out.code, 101, "{out:?}");
    assert_eq!(pending_tools(&d, "o"), ["write_order"]);

    let out = call(
        r#"{"response": "Charged.", "tools": [{"name": "write_order", "input": {"data": {"total": 42}}}]}"#,
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!out.stdout.contains("(failed)"), "{out:?}");

    // The write opened the transition: the next request of the same conversation offers it.
    let out = call("");
    assert_eq!(out.code, 101, "{out:?}");
    assert_eq!(
        pending_tools(&d, "o"),
        ["transition_to_shipped", "write_order"]
    );
    assert_eq!(
        example_answer(&out.stdout)["tools"][0]["name"],
        "transition_to_shipped"
    );

    let out =
        call(r#"{"tools": [{"name": "transition_to_shipped", "input": {"reason": "paid"}}]}"#);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("charge --(agent_decision)--> shipped"),
        "{out:?}"
    );
    let out = call("");
    assert_eq!(out.code, 2, "{out:?}");
    let shown = d.show_json("o");
    assert_eq!(shown["status"], "complete");
    assert_eq!(shown["visitedNodes"], json!(["start", "charge", "shipped"]));
    assert_eq!(shown["contextState"]["order"]["total"], 42);
}

#[test]
fn manual_mode_example_answer_fits_the_tools_schema_and_failed_tools_are_marked() {
    let d = Dir::with_file("order.dy", &order_dy());
    let call = |stdin: &str| d.run_with_stdin(&["e", "-i", "order.dy", "--id", "o"], stdin);
    assert_eq!(call("").code, 0);
    let out = call("");
    assert_eq!(out.code, 101, "{out:?}");
    // Only `write_order` is offered, and the transition opens once the order's total is above
    // 0: the example writes the order's declared fields under `data`, a total that opens it, and
    // takes it.
    let example = example_answer(&out.stdout);
    assert_eq!(example["tools"][0]["name"], "write_order", "{example}");
    assert!(
        example["tools"][0]["input"]["data"]["total"]
            .as_f64()
            .unwrap()
            > 0.0,
        "{example}"
    );
    assert_eq!(
        example["tools"][1]["name"], "transition_to_shipped",
        "{example}"
    );

    // The example, piped back as it is, is a valid answer that moves the machine on.
    let out = call(&example.to_string());
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .contains("Tools: write_order, transition_to_shipped\n"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("charge --(agent_decision)--> shipped"),
        "{out:?}"
    );

    // A call with the wrong input fails, and the text output says so.
    let call = |stdin: &str| d.run_with_stdin(&["e", "-i", "order.dy", "--id", "p"], stdin);
    assert_eq!(call("").code, 0);
    assert_eq!(call("").code, 101);
    let out = call(r#"{"tools": [{"name": "write_order", "input": {"reason": "…"}}]}"#);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("write_order (failed)"), "{out:?}");
}

/// The commands of the section's first `bash` block: one per line, a here-document with its
/// lines as one.
fn commands(section: &str) -> Vec<String> {
    let start = section.find("```bash\n").expect("a bash block") + "```bash\n".len();
    let end = section[start..].find("```").unwrap() + start;
    let mut out = Vec::new();
    let mut lines = section[start..end].lines();
    while let Some(line) = lines.next() {
        if line.trim().is_empty() {
            continue;
        }
        let mut command = line.to_string();
        if line.contains("<<'EOF'") {
            for more in lines.by_ref() {
                command.push('\n');
                command.push_str(more);
                if more == "EOF" {
                    break;
                }
            }
        }
        out.push(command);
    }
    out
}

/// The exit code a README line documents: `(exit N)` in its comment, else 0.
fn documented_exit(command: &str) -> i32 {
    let first = command.lines().next().unwrap_or("");
    first
        .split_once('#')
        .and_then(|(_, comment)| comment.split_once("(exit "))
        .and_then(|(_, rest)| rest.split_once(')'))
        .map_or(0, |(n, _)| n.trim().parse().unwrap())
}

#[test]
fn every_command_of_the_readme_dygram_section_runs_offline_as_written() {
    let section = dygram_section();
    let commands = commands(&section);
    assert!(commands.len() >= 10, "{commands:#?}");
    // The machine the README writes is the shipped example its recordings were made for.
    let example = std::fs::read_to_string(repo_root().join("examples/dygram/order.dy")).unwrap();
    assert_eq!(heredoc(&section, "order.dy"), example);

    let d = Dir::new();
    copy_dir(
        &repo_root().join("examples/dygram"),
        &d.path().join("examples/dygram"),
    );
    let bin_dir = super::support::bin().parent().unwrap().to_path_buf();
    let mut path = vec![bin_dir];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let graphviz = super::support::graphviz_available();
    let mut ran = 0;
    for command in &commands {
        let drawn = command.contains("-f svg") || command.contains("--format html");
        if drawn && !graphviz {
            eprintln!("skipped (no Graphviz): {command}");
            continue;
        }
        let mut cmd = std::process::Command::new("bash");
        cmd.arg("-c")
            .arg(command)
            .current_dir(d.path())
            .env("PATH", std::env::join_paths(&path).unwrap())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        for var in super::support::LLM_ENV {
            cmd.env_remove(var);
        }
        let out =
            super::support::wait_output(cmd.spawn().unwrap(), std::time::Duration::from_secs(60));
        let code = out.status.code().unwrap_or(-1);
        assert_eq!(
            code,
            documented_exit(command),
            "{command}\n--- stdout\n{}--- stderr\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ran += 1;
    }
    assert!(ran >= commands.len() - 1, "{ran} of {}", commands.len());

    // What the commands left is what the README says they do.
    for file in [
        "order.json",
        "out/order.json",
        "out/order.dot",
        "out/order.dy",
    ] {
        assert!(d.path().join(file).is_file(), "no {file}");
    }
    let result = |name: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(d.path().join(name)).unwrap()).unwrap()
    };
    let order = result("generated/order-result.json");
    assert_eq!(order["status"], "complete");
    assert_eq!(order["visitedNodes"], json!(["start", "charge", "shipped"]));
    assert_eq!(order["contextState"]["order"]["total"], 42);
    let review = result("out/review-result.json");
    assert_eq!(review["status"], "complete");
    assert_eq!(review["contextState"]["draft"]["score"], 8);
    let trip = result("out/trip-result.json");
    assert_eq!(trip["status"], "complete");
    assert_eq!(
        trip["contextState"]["plan"]["hotel"],
        "Casa do Rio, 3 to 6 May"
    );
    assert!(
        !trip["contextState"]["plan"]["flight"]
            .as_str()
            .unwrap()
            .is_empty()
    );
    let list = d.run(&["exec", "list", "--json"]).json();
    let rows = list.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{list}");
    for row in rows {
        assert_eq!(row["status"], "complete", "{list}");
    }
    let by_hand = d
        .run(&["exec", "show", "by-hand", "--format", "json"])
        .json();
    assert_eq!(by_hand["contextState"]["order"]["total"], 42);

    // Run in a clone, the commands leave nothing git would list as new: each thing they made
    // beside the copied examples is ignored by the repository's .gitignore.
    for entry in std::fs::read_dir(d.path()).unwrap() {
        let entry = entry.unwrap();
        let mut name = entry.file_name().to_string_lossy().into_owned();
        if name == "examples" {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            name.push('/');
        }
        let ignored = std::process::Command::new("git")
            .args(["check-ignore", "--no-index", "-q", &name])
            .current_dir(repo_root())
            .status()
            .unwrap();
        assert!(
            ignored.success(),
            "{name}, made by the README's commands, is not in .gitignore"
        );
    }
}
