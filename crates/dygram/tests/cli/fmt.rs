//! `dygram fmt`: files rewritten in the printer's layout only when nothing is lost; `--check`
//! writes nothing and says which would change; `-` formats standard input.

use super::support::Dir;

const MESSY: &str = "machine   \"Demo\"\n// the first\nstate start;   Task  review \"Review it\" {prompt: \"check\";}\nstart->review; review -> done;\nstate done;\n";
const COMMENT_INSIDE: &str = "state a;\na -> /* why */ b;\n";

#[test]
fn files_are_rewritten_once_and_then_left_alone() {
    let d = Dir::with_file("m.dy", MESSY);
    let out = d.run(&["fmt", "m.dy"]);
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "formatted m.dy\n"),
        "{out:?}"
    );
    let formatted = std::fs::read_to_string(d.path().join("m.dy")).unwrap();
    assert!(formatted.contains("// the first\n"), "{formatted}");
    assert!(
        formatted.contains("\n    prompt: \"check\";\n"),
        "{formatted}"
    );
    // The same machine as before.
    let json = |name: &str| d.run(&["generate", name, "-f", "json"]).stdout;
    d.write("before.dy", MESSY);
    assert_eq!(json("m.dy"), json("before.dy"));
    // Formatted already: nothing to do, nothing written.
    let again = d.run(&["fmt", "m.dy"]);
    assert_eq!((again.code, again.stdout.as_str()), (0, ""), "{again:?}");
    let check = d.run(&["fmt", "--check", "m.dy"]);
    assert_eq!(check.code, 0, "{check:?}");
}

#[test]
fn check_lists_what_would_change_and_writes_nothing() {
    let d = Dir::with_file("m.dy", MESSY);
    d.write("lost.dy", COMMENT_INSIDE);
    let out = d.run(&["fmt", "--check", "m.dy", "lost.dy"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.stdout, "would reformat m.dy\n");
    assert!(
        out.stderr
            .contains("lost.dy: not formatted: the comment on line 2 would be lost"),
        "{out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("m.dy")).unwrap(),
        MESSY
    );
    let json = d.run(&["fmt", "--check", "--format", "json", "m.dy", "lost.dy"]);
    assert_eq!(json.code, 1, "{json:?}");
    let v = json.json();
    assert_eq!(v["files"][0]["status"], "wouldChange", "{v}");
    assert_eq!(v["files"][1]["status"], "refused", "{v}");
    assert_eq!(
        (v["changed"].as_u64(), v["refused"].as_u64()),
        (Some(1), Some(1))
    );
}

#[test]
fn a_file_that_would_lose_something_is_left_untouched() {
    let d = Dir::with_file("lost.dy", COMMENT_INSIDE);
    d.write("broken.dy", "state a;\na -> ;\n");
    d.write("fine.dy", MESSY);
    let out = d.run(&["fmt", "lost.dy", "broken.dy", "missing.dy", "fine.dy"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("missing.dy"), "{out:?}");
    // The others are formatted all the same.
    assert_eq!(out.stdout, "formatted fine.dy\n", "{out:?}");
    assert!(
        out.stderr
            .contains("broken.dy: not formatted: it has syntax errors"),
        "{out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("lost.dy")).unwrap(),
        COMMENT_INSIDE
    );
}

#[test]
fn standard_input_is_formatted_to_standard_output_with_the_indentation_asked() {
    let d = Dir::new();
    let out = d.run_with_stdin(&["fmt", "-", "--indent", "2"], MESSY);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("\n  prompt: \"check\";\n"), "{out:?}");
    let tabs = d.run_with_stdin(&["fmt", "-", "--tabs"], MESSY);
    assert!(tabs.stdout.contains("\n\tprompt: \"check\";\n"), "{tabs:?}");
    let check = d.run_with_stdin(&["fmt", "-", "--check"], MESSY);
    assert_eq!((check.code, check.stdout.as_str()), (1, ""), "{check:?}");
    let refused = d.run_with_stdin(&["fmt", "-"], COMMENT_INSIDE);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains("<stdin>: not formatted"),
        "{refused:?}"
    );
    let usage = d.run(&["fmt", "--indent", "0", "x.dy"]);
    assert_eq!(usage.code, 64, "{usage:?}");
}

#[test]
fn a_link_stays_a_link_and_the_file_it_names_is_formatted() {
    let d = Dir::with_file("machines/m.dy", MESSY);
    std::os::unix::fs::symlink("machines/m.dy", d.path().join("link.dy")).unwrap();
    let out = d.run(&["fmt", "link.dy"]);
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "formatted link.dy\n"),
        "{out:?}"
    );
    let link = d.path().join("link.dy");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "link.dy was replaced by a file"
    );
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        std::path::Path::new("machines/m.dy")
    );
    let target = std::fs::read_to_string(d.path().join("machines/m.dy")).unwrap();
    assert_ne!(target, MESSY);
    assert!(target.contains("\n    prompt: \"check\";\n"), "{target}");
    // Nothing was left beside the link or the file.
    let names = |dir: &str| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(d.path().join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names("machines"), ["m.dy"]);
    assert_eq!(names("."), ["link.dy", "machines"]);
}
