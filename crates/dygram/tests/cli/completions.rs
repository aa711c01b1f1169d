//! `dygram completions bash|zsh|fish` and `dygram man`: generated from the command definition, so
//! they know every command, flag and value; the bash script is loaded by a real bash and asked to
//! complete.

use std::process::Command;

use super::support::{Dir, bin};

/// What bash's completion offers for the words of a command line, the last being completed.
fn bash_completes(words: &[&str]) -> Vec<String> {
    let line = words
        .iter()
        .map(|w| format!("'{w}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let script = format!(
        "source <('{bin}' completions bash) && COMP_WORDS=({line}) && COMP_CWORD={last} && \
         _dygram dygram \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\" && \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        bin = bin().display(),
        last = words.len() - 1,
    );
    let out = Command::new("bash").args(["-c", &script]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_commands_actions_and_format_values() {
    assert_eq!(bash_completes(&["dygram", "exec", "s"]), ["status", "show"]);
    let formats = bash_completes(&["dygram", "exec", "show", "--format", ""]);
    assert_eq!(formats, ["text", "json", "dot", "mermaid", "svg", "html"]);
    let formats = bash_completes(&["dygram", "execute", "m.dy", "--format", ""]);
    assert!(formats.contains(&"stream-json".to_string()), "{formats:?}");
    let top = bash_completes(&["dygram", "comp"]);
    assert_eq!(top, ["completions"]);
}

#[test]
fn zsh_and_fish_scripts_name_every_command() {
    let d = Dir::new();
    for shell in ["zsh", "fish"] {
        let out = d.run(&["completions", shell]);
        assert_eq!(out.code, 0, "{out:?}");
        for word in ["execute", "check-imports", "stream-json", "html", "color"] {
            assert!(out.stdout.contains(word), "{shell} lacks {word}");
        }
    }
    let bad = d.run(&["completions", "tcsh"]);
    assert_eq!(bad.code, 64, "{bad:?}");
}

#[test]
fn man_prints_the_page_or_writes_one_per_command() {
    let d = Dir::new();
    let page = d.run(&["man"]);
    assert_eq!(page.code, 0, "{page:?}");
    assert!(page.stdout.contains(".TH dygram 1"), "{page:?}");
    assert!(page.stdout.contains("execute"), "{page:?}");
    let out = d.run(&["man", "-d", "pages"]);
    assert_eq!(out.code, 0, "{out:?}");
    for name in [
        "dygram.1",
        "dygram-execute.1",
        "dygram-exec-show.1",
        "dygram-completions.1",
    ] {
        let file = d.path().join("pages").join(name);
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(text.starts_with(".ie"), "{name}");
        assert!(out.stdout.contains(name), "{out:?}");
    }
    let show = std::fs::read_to_string(d.path().join("pages/dygram-exec-show.1")).unwrap();
    assert!(show.contains("html"), "{show}");
}

/// `-o FILE` writes the script where the shell looks for it, making the folder (a fresh home has
/// none of them); a folder that cannot be made is an error that says which file.
#[test]
fn completions_are_written_to_a_file_whose_folder_is_made() {
    let d = Dir::new();
    let file = d
        .path()
        .join("home/.local/share/bash-completion/completions/dygram");
    let out = d.run(&["completions", "bash", "-o", file.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout.trim(), file.display().to_string());
    let script = std::fs::read_to_string(&file).unwrap();
    assert!(script.contains("_dygram"), "{script}");
    let blocked = d.path().join("a-file");
    std::fs::write(&blocked, "").unwrap();
    let out = d.run(&[
        "completions",
        "zsh",
        "-o",
        blocked.join("_dygram").to_str().unwrap(),
    ]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("cannot write"), "{out:?}");
}
