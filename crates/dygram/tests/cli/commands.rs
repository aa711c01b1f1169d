//! The commands, driven as a user would: real files in temporary folders, the real binary.

use super::support::Dir;

const GOOD: &str = "machine \"Demo\"\nTask start \"Begin\" { prompt: \"go\"; }\nstart -> done;\n";

#[test]
fn pv_reports_success_on_stdout() {
    let dir = Dir::new();
    dir.write("m.dy", GOOD);
    let out = dir.run(&["pv", "m.dy"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "✓ Parsed and validated m.dy successfully!\n");
    assert_eq!(out.stderr, "");
}

#[test]
fn every_syntax_error_is_reported_with_position_line_and_caret() {
    let dir = Dir::new();
    dir.write(
        "bad.dy",
        "machine \"x\"\nx: -3;\nTask a { y: 1 }\na -> b -> ;\nc -@weight(5)-> d;\n",
    );
    let out = dir.run(&["parseAndValidate", "bad.dy"]);
    assert_eq!(out.code, 1);
    assert_eq!(out.stdout, "");
    insta::assert_snapshot!(out.stderr);
}

#[test]
fn validation_errors_and_warnings() {
    let dir = Dir::new();
    dir.write("m.dy",
        "machine \"v\"\nA { Task Step; }\nB { Task Step; }\nt<Integer>: 1.5;\nx \"1\" -> \"0..many\" y;\n",
    );
    let out = dir.run(&["pv", "m.dy"]);
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
    dir.write("w.dy", "a -> b;\nlonely;\n");
    let out = dir.run(&["pv", "w.dy"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("warning: Orphaned nodes detected: lonely"),
        "{}",
        out.stderr
    );
    let quiet = dir.run(&["pv", "w.dy", "-q"]);
    assert_eq!(quiet.stderr, "");
}

#[test]
fn pv_json_lists_diagnostics_for_scripts() {
    let dir = Dir::new();
    dir.write("m.dy", "a -> b;\nx<number>: \"no\";\n");
    let out = dir.run(&["pv", "m.dy", "--json"]);
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
    let dir = Dir::new();
    dir.write("m.dy", GOOD);
    let out = dir.run(&["generate", "m.dy"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(json["title"], "Demo");
    assert_eq!(json["edges"][0]["target"], "done");
    let dot = dir.run(&["g", "m.dy", "-f", "graphviz"]);
    assert!(dot.stdout.starts_with("digraph"), "{}", dot.stdout);
    let out = dir.run(&["g", "m.dy", "-f", "json,dot,mermaid,dsl", "-d", "out"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "out/m.json\nout/m.dot\nout/m.mmd\nout/m.dy\n");
    for f in ["m.json", "m.dot", "m.mmd", "m.dy"] {
        assert!(dir.path().join("out").join(f).is_file(), "{f}");
    }
    // Several formats need a folder; an unknown format is a usage error.
    let out = dir.run(&["g", "m.dy", "-f", "json,dot"]);
    assert_eq!(out.code, 64);
    assert!(out.stderr.contains("-d DIR"), "{}", out.stderr);
    let out = dir.run(&["g", "m.dy", "-f", "html"]);
    assert_eq!(out.code, 64);
    assert!(
        out.stderr.contains("unknown format `html`"),
        "{}",
        out.stderr
    );
}

#[test]
fn generate_never_overwrites_its_input() {
    let dir = Dir::new();
    dir.write("m.dy", GOOD);
    let out = dir.run(&["g", "m.dy", "-f", "dsl", "-d", "."]);
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
    let dir = Dir::new();
    let out = dir.run_with_stdin(&["g", "-", "-f", "mermaid"], GOOD);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("stateDiagram-v2"), "{}", out.stdout);
    let json = dir.run_with_stdin(&["g", "-"], GOOD).stdout;
    dir.write("m.json", &json);
    let back = dir.run(&["g", "m.json", "-f", "dsl"]);
    assert_eq!(back.code, 0, "{}", back.stderr);
    dir.write("again.dy", &back.stdout);
    let again = dir.run(&["g", "again.dy"]);
    assert_eq!(again.stdout, json, "JSON → .dy → JSON gives the same JSON");
    // Errors in a machine from stdin name <stdin>.
    let out = dir.run_with_stdin(&["pv", "-"], "a -> ;\n");
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("<stdin>:1:6"), "{}", out.stderr);
}

#[test]
fn files_of_other_kinds_and_missing_files_are_refused_clearly() {
    let dir = Dir::new();
    dir.write("m.txt", GOOD);
    let out = dir.run(&["pv", "m.txt"]);
    assert_eq!(out.code, 64);
    assert!(out.stderr.contains("not a machine file"), "{}", out.stderr);
    let out = dir.run(&["pv", "missing.dy"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("cannot read missing.dy"),
        "{}",
        out.stderr
    );
    dir.write("bad.json", "{}");
    let out = dir.run(&["g", "bad.json", "-f", "dsl"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("no \"nodes\" array"), "{}", out.stderr);
}

#[test]
fn imports_bring_nodes_and_check_imports_shows_the_order() {
    let dir = Dir::new();
    dir.write(
        "lib/auth.dy",
        "Auth { Task Login \"Log in\"; Task Session; Login -> Session; }\nTask Helper;\n",
    );
    dir.write("app.dy",
        "import { Auth, Helper as Util } from \"./lib/auth\"\nmachine \"App\"\nstart -> Login;\nSession -> Util;\n",
    );
    let out = dir.run(&["g", "app.dy"]);
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
    let out = dir.run(&["check-imports", "app.dy"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("1. lib/auth.dy\n  2. app.dy"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("Total files: 2"), "{}", out.stdout);
    // A bundle is one self-contained file with the same machine.
    let out = dir.run(&["bundle", "app.dy", "-o", "dist/app.dy"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("Merged 2 file(s)"), "{}", out.stdout);
    let bundled = std::fs::read_to_string(dir.path().join("dist/app.dy")).unwrap();
    assert!(!bundled.contains("import"), "{bundled}");
    let again = dir.run(&["g", "dist/app.dy"]);
    let v: serde_json::Value = serde_json::from_str(&again.stdout).unwrap();
    assert_eq!(v["nodes"], json["nodes"]);
}

#[test]
fn import_errors_missing_cycles_collisions_unknown_names() {
    let dir = Dir::new();
    dir.write("a.dy", "import { B } from \"./b.dy\"\nA;\n");
    dir.write("b.dy", "import { A } from \"./a.dy\"\nB;\n");
    let out = dir.run(&["ci", "a.dy"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("Circular dependency detected: a.dy → b.dy → a.dy"),
        "{}",
        out.stderr
    );
    dir.write("c.dy", "import { X } from \"./nowhere.dy\"\n");
    let out = dir.run(&["pv", "c.dy"]);
    assert!(
        out.stderr.contains("Cannot find module \"./nowhere.dy\""),
        "{}",
        out.stderr
    );
    // The right stem with another machine extension: the hint names the file that exists.
    dir.write("flows/lib2.dygram", "Step;\n");
    dir.write(
        "e.dy",
        "import { Step } from \"./flows/lib2.dy\"\nStep -> x;\n",
    );
    let out = dir.run(&["pv", "e.dy"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("(looked for flows/lib2.dy)")
            && out.stderr.contains("help: flows/lib2.dygram exists"),
        "{}",
        out.stderr
    );
    dir.write("lib.dy", "Shared;\nOther;\n");
    dir.write(
        "d.dy",
        "import { Shared, Missing } from \"./lib.dy\"\nShared;\n",
    );
    let out = dir.run(&["pv", "d.dy"]);
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
    dir.write("e.dy", "import { X } from \"https://example.com/x.dy\"\n");
    let out = dir.run(&["pv", "e.dy"]);
    assert!(
        out.stderr.contains("Remote imports are not supported"),
        "{}",
        out.stderr
    );
    // Without imports, names are placeholders and the file checks alone.
    let out = dir.run(&["pv", "c.dy", "--no-imports"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn batch_checks_many_files_and_mirrors_folders() {
    let dir = Dir::new();
    dir.write("src/a.dy", GOOD);
    dir.write("src/sub/b.dygram", "x -> y;\n");
    dir.write("src/sub/bad.dy", "x -> ;\n");
    dir.write("src/notes.txt", "not a machine");
    let out = dir.run(&[
        "batch",
        "src/**/*",
        "-d",
        "out",
        "--continue-on-error",
        "--json",
    ]);
    assert_eq!(out.code, 1);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["processed"], 3);
    assert_eq!(v["failed"], 1);
    assert!(dir.path().join("out/a.json").is_file());
    assert!(dir.path().join("out/sub/b.json").is_file());
    assert!(out.stderr.contains("sub/bad.dy:1:6"), "{}", out.stderr);
    // Without --continue-on-error the batch stops at the first failure (in path order).
    dir.write("src/sub/zz.dy", "z -> w;\n");
    let out = dir.run(&["b", "src/**/*.dy"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stdout
            .contains("Processed: 2 file(s)\nFailed: 1 file(s)"),
        "{}",
        out.stdout
    );
    assert!(out.stderr.contains("--continue-on-error"), "{}", out.stderr);
    let out = dir.run(&["b", "nothing/*.dy"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("no machine files match"),
        "{}",
        out.stderr
    );
}

/// `dygram batch a.dy b.dy` (a pattern the shell expanded) takes every file, as a quoted pattern
/// would; a file two patterns match is processed once.
#[test]
fn batch_takes_the_files_a_shell_expanded() {
    let dir = Dir::new();
    dir.write("src/a.dy", GOOD);
    dir.write("src/b.dy", "x -> y;\n");
    let out = dir.run(&[
        "batch", "src/a.dy", "src/b.dy", "src/*.dy", "-d", "out", "--json",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["processed"], 2, "{v}");
    assert!(dir.path().join("out/a.json").is_file());
    assert!(dir.path().join("out/b.json").is_file());
}

#[test]
fn batch_says_which_matches_it_skips_that_are_not_files() {
    let dir = Dir::new();
    dir.write("src/a.dy", GOOD);
    std::fs::create_dir_all(dir.path().join("src/folder.dy")).unwrap();
    std::os::unix::fs::symlink("nowhere.dy", dir.path().join("src/gone.dy")).unwrap();
    dir.write("src/notes.txt", "not a machine");
    let out = dir.run(&["batch", "src/*"]);
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

/// A misspelt edge end makes an undeclared node and leaves the declared one an orphan: the orphan
/// warning says which name was probably meant.
#[test]
fn a_misspelt_edge_target_gets_did_you_mean_in_the_orphan_warning() {
    let dir = Dir::new();
    dir.write(
        "typo.dy",
        "machine \"O\"\nState shipped;\nstart -> charge -> shiped;\n",
    );
    let out = dir.run(&["pv", "typo.dy"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("Orphaned nodes detected: shipped"),
        "{out:?}"
    );
    assert!(
        out.stderr
            .contains("an edge names `shiped`, which is not declared: did you mean `shipped`?"),
        "{out:?}"
    );
}

/// A batch run again over its own outputs leaves the files whose bytes did not change untouched
/// (time stamps included), and rewrites the ones that changed.
#[test]
fn batch_again_leaves_unchanged_outputs_untouched() {
    let dir = Dir::with_file("src/a.dy", GOOD);
    dir.write("src/b.dy", GOOD);
    let args = ["batch", "src/*.dy", "-d", "out", "-f", "json,dot"];
    assert_eq!(dir.run(&args).code, 0);
    let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    let outputs = ["out/a.json", "out/a.dot", "out/b.json", "out/b.dot"];
    for name in outputs {
        let file = std::fs::File::options()
            .write(true)
            .open(dir.path().join(name))
            .unwrap();
        file.set_modified(old).unwrap();
    }
    dir.write("src/b.dy", &GOOD.replace("Begin", "Start here"));
    assert_eq!(dir.run(&args).code, 0);
    let modified = |name: &str| {
        std::fs::metadata(dir.path().join(name))
            .unwrap()
            .modified()
            .unwrap()
    };
    assert_eq!(modified("out/a.json"), old, "unchanged: not rewritten");
    assert_eq!(modified("out/a.dot"), old);
    assert_ne!(modified("out/b.json"), old, "changed: rewritten");
    let b = std::fs::read_to_string(dir.path().join("out/b.json")).unwrap();
    assert!(b.contains("Start here"), "{b}");
}
