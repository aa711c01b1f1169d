//! The commands, driven as a user would: real files in temporary folders, the real binary.

use std::path::Path;

use assert_cmd::Command;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn dygram(dir: &Path, args: &[&str], stdin: Option<&str>) -> Out {
    let mut cmd = Command::cargo_bin("dygram").unwrap();
    cmd.current_dir(dir).args(args).env("NO_COLOR", "1");
    if let Some(input) = stdin {
        cmd.write_stdin(input);
    }
    let out = cmd.output().unwrap();
    Out {
        code: out.status.code().unwrap(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

const GOOD: &str = "machine \"Demo\"\nTask start \"Begin\" { prompt: \"go\"; }\nstart -> done;\n";

#[test]
fn pv_reports_success_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "m.dy", GOOD);
    let out = dygram(dir.path(), &["pv", "m.dy"], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "✓ Parsed and validated m.dy successfully!\n");
    assert_eq!(out.stderr, "");
}

#[test]
fn every_syntax_error_is_reported_with_position_line_and_caret() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "bad.dy",
        "machine \"x\"\nx: -3;\nTask a { y: 1 }\na -> b -> ;\nc -@weight(5)-> d;\n",
    );
    let out = dygram(dir.path(), &["parseAndValidate", "bad.dy"], None);
    assert_eq!(out.code, 1);
    assert_eq!(out.stdout, "");
    insta::assert_snapshot!(out.stderr);
}

#[test]
fn validation_errors_and_warnings() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "m.dy",
        "machine \"v\"\nA { Task Step; }\nB { Task Step; }\nt<Integer>: 1.5;\nx \"1\" -> \"0..many\" y;\n",
    );
    let out = dygram(dir.path(), &["pv", "m.dy"], None);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("error: Duplicate state name: Step"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("first declared here"), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("Type mismatch: expected Integer, got number. Must be an integer"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("Invalid target multiplicity format: \"0..many\""),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("3 errors"), "{}", out.stderr);
    // Warnings alone do not fail.
    write(dir.path(), "w.dy", "a -> b;\nlonely;\n");
    let out = dygram(dir.path(), &["pv", "w.dy"], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("warning: Orphaned nodes detected: lonely"),
        "{}",
        out.stderr
    );
    let quiet = dygram(dir.path(), &["pv", "w.dy", "-q"], None);
    assert_eq!(quiet.stderr, "");
}

#[test]
fn pv_json_lists_diagnostics_for_scripts() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "m.dy", "a -> b;\nx<number>: \"no\";\n");
    let out = dygram(dir.path(), &["pv", "m.dy", "--json"], None);
    assert_eq!(out.code, 1);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["valid"], false);
    let errors: Vec<&serde_json::Value> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["severity"] == "error")
        .collect();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["line"], 2);
    assert_eq!(errors[0]["column"], 12);
    assert_eq!(errors[0]["file"], "m.dy");
}

#[test]
fn generate_writes_one_format_to_stdout_and_several_to_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "m.dy", GOOD);
    let out = dygram(dir.path(), &["generate", "m.dy"], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(json["title"], "Demo");
    assert_eq!(json["edges"][0]["target"], "done");
    let dot = dygram(dir.path(), &["g", "m.dy", "-f", "graphviz"], None);
    assert!(dot.stdout.starts_with("digraph"), "{}", dot.stdout);
    let out = dygram(
        dir.path(),
        &["g", "m.dy", "-f", "json,dot,mermaid,dsl", "-d", "out"],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "out/m.json\nout/m.dot\nout/m.mmd\nout/m.dy\n");
    for f in ["m.json", "m.dot", "m.mmd", "m.dy"] {
        assert!(dir.path().join("out").join(f).is_file(), "{f}");
    }
    // Several formats need a folder; an unknown format is a usage error.
    let out = dygram(dir.path(), &["g", "m.dy", "-f", "json,dot"], None);
    assert_eq!(out.code, 64);
    assert!(out.stderr.contains("-d DIR"), "{}", out.stderr);
    let out = dygram(dir.path(), &["g", "m.dy", "-f", "html"], None);
    assert_eq!(out.code, 64);
    assert!(
        out.stderr.contains("unknown format `html`"),
        "{}",
        out.stderr
    );
}

#[test]
fn generate_never_overwrites_its_input() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "m.dy", GOOD);
    let out = dygram(dir.path(), &["g", "m.dy", "-f", "dsl", "-d", "."], None);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("refusing to overwrite the input"),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("m.dy")).unwrap(),
        GOOD
    );
}

#[test]
fn generate_reads_standard_input_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = dygram(dir.path(), &["g", "-", "-f", "mermaid"], Some(GOOD));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("stateDiagram-v2"), "{}", out.stdout);
    let json = dygram(dir.path(), &["g", "-"], Some(GOOD)).stdout;
    write(dir.path(), "m.json", &json);
    let back = dygram(dir.path(), &["g", "m.json", "-f", "dsl"], None);
    assert_eq!(back.code, 0, "{}", back.stderr);
    write(dir.path(), "again.dy", &back.stdout);
    let again = dygram(dir.path(), &["g", "again.dy"], None);
    assert_eq!(again.stdout, json, "JSON → .dy → JSON gives the same JSON");
    // Errors in a machine from stdin name <stdin>.
    let out = dygram(dir.path(), &["pv", "-"], Some("a -> ;\n"));
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("<stdin>:1:6"), "{}", out.stderr);
}

#[test]
fn files_of_other_kinds_and_missing_files_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "m.txt", GOOD);
    let out = dygram(dir.path(), &["pv", "m.txt"], None);
    assert_eq!(out.code, 64);
    assert!(out.stderr.contains("not a machine file"), "{}", out.stderr);
    let out = dygram(dir.path(), &["pv", "missing.dy"], None);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("cannot read missing.dy"),
        "{}",
        out.stderr
    );
    write(dir.path(), "bad.json", "{}");
    let out = dygram(dir.path(), &["g", "bad.json", "-f", "dsl"], None);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("no \"nodes\" array"), "{}", out.stderr);
}

#[test]
fn imports_bring_nodes_and_check_imports_shows_the_order() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "lib/auth.dy",
        "Auth { Task Login \"Log in\"; Task Session; Login -> Session; }\nTask Helper;\n",
    );
    write(
        dir.path(),
        "app.dy",
        "import { Auth, Helper as Util } from \"./lib/auth\"\nmachine \"App\"\nstart -> Login;\nSession -> Util;\n",
    );
    let out = dygram(dir.path(), &["g", "app.dy"], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // `Helper` has no edges in its library; that is for the importer to wire, not a warning.
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let names: Vec<&str> = json["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Auth", "Login", "Session", "Util", "start"]);
    let edges: Vec<(String, String)> = json["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["source"].to_string(), e["target"].to_string()))
        .collect();
    assert!(edges.contains(&("\"Login\"".into(), "\"Session\"".into())));
    let out = dygram(dir.path(), &["check-imports", "app.dy"], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("1. lib/auth.dy\n  2. app.dy"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("Total files: 2"), "{}", out.stdout);
    // A bundle is one self-contained file with the same machine.
    let out = dygram(dir.path(), &["bundle", "app.dy", "-o", "dist/app.dy"], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("Merged 2 file(s)"), "{}", out.stdout);
    let bundled = std::fs::read_to_string(dir.path().join("dist/app.dy")).unwrap();
    assert!(!bundled.contains("import"), "{bundled}");
    let again = dygram(dir.path(), &["g", "dist/app.dy"], None);
    let v: serde_json::Value = serde_json::from_str(&again.stdout).unwrap();
    assert_eq!(v["nodes"], json["nodes"]);
}

#[test]
fn import_errors_missing_cycles_collisions_unknown_names() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.dy", "import { B } from \"./b.dy\"\nA;\n");
    write(dir.path(), "b.dy", "import { A } from \"./a.dy\"\nB;\n");
    let out = dygram(dir.path(), &["ci", "a.dy"], None);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("Circular dependency detected: a.dy → b.dy → a.dy"),
        "{}",
        out.stderr
    );
    write(dir.path(), "c.dy", "import { X } from \"./nowhere.dy\"\n");
    let out = dygram(dir.path(), &["pv", "c.dy"], None);
    assert!(
        out.stderr.contains("Cannot find module \"./nowhere.dy\""),
        "{}",
        out.stderr
    );
    // The right stem with another machine extension: the hint names the file that exists.
    write(dir.path(), "flows/lib2.dygram", "Step;\n");
    write(
        dir.path(),
        "e.dy",
        "import { Step } from \"./flows/lib2.dy\"\nStep -> x;\n",
    );
    let out = dygram(dir.path(), &["pv", "e.dy"], None);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("(looked for flows/lib2.dy)")
            && out.stderr.contains("help: flows/lib2.dygram exists"),
        "{}",
        out.stderr
    );
    write(dir.path(), "lib.dy", "Shared;\nOther;\n");
    write(
        dir.path(),
        "d.dy",
        "import { Shared, Missing } from \"./lib.dy\"\nShared;\n",
    );
    let out = dygram(dir.path(), &["pv", "d.dy"], None);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("Imported symbol \"Shared\" collides with local node \"Shared\""),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("Module \"./lib.dy\" has no node named \"Missing\""),
        "{}",
        out.stderr
    );
    write(
        dir.path(),
        "e.dy",
        "import { X } from \"https://example.com/x.dy\"\n",
    );
    let out = dygram(dir.path(), &["pv", "e.dy"], None);
    assert!(
        out.stderr.contains("Remote imports are not supported"),
        "{}",
        out.stderr
    );
    // Without imports, names are placeholders and the file checks alone.
    let out = dygram(dir.path(), &["pv", "c.dy", "--no-imports"], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn batch_checks_many_files_and_mirrors_folders() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "src/a.dy", GOOD);
    write(dir.path(), "src/sub/b.dygram", "x -> y;\n");
    write(dir.path(), "src/sub/bad.dy", "x -> ;\n");
    write(dir.path(), "src/notes.txt", "not a machine");
    let out = dygram(
        dir.path(),
        &[
            "batch",
            "src/**/*",
            "-d",
            "out",
            "--continue-on-error",
            "--json",
        ],
        None,
    );
    assert_eq!(out.code, 1);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["processed"], 3);
    assert_eq!(v["failed"], 1);
    assert!(dir.path().join("out/a.json").is_file());
    assert!(dir.path().join("out/sub/b.json").is_file());
    assert!(out.stderr.contains("sub/bad.dy:1:6"), "{}", out.stderr);
    // Without --continue-on-error the batch stops at the first failure (in path order).
    write(dir.path(), "src/sub/zz.dy", "z -> w;\n");
    let out = dygram(dir.path(), &["b", "src/**/*.dy"], None);
    assert_eq!(out.code, 1);
    assert!(
        out.stdout
            .contains("Processed: 2 file(s)\nFailed: 1 file(s)"),
        "{}",
        out.stdout
    );
    assert!(out.stderr.contains("--continue-on-error"), "{}", out.stderr);
    let out = dygram(dir.path(), &["b", "nothing/*.dy"], None);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("no machine files match"),
        "{}",
        out.stderr
    );
}

#[test]
fn batch_says_which_matches_it_skips_that_are_not_files() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "src/a.dy", GOOD);
    std::fs::create_dir_all(dir.path().join("src/folder.dy")).unwrap();
    std::os::unix::fs::symlink("nowhere.dy", dir.path().join("src/gone.dy")).unwrap();
    write(dir.path(), "src/notes.txt", "not a machine");
    let out = dygram(dir.path(), &["batch", "src/*"], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("Processed: 1 file(s)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr
            .contains("warning: skipped src/folder.dy: it is a folder, not a file"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("warning: skipped src/gone.dy: a link to nowhere.dy, which does not exist"),
        "{}",
        out.stderr
    );
    // Files that are not machines are left out without a word.
    assert!(!out.stderr.contains("notes.txt"), "{}", out.stderr);
}
