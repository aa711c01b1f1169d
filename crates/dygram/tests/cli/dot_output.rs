//! Graphviz DOT, Mermaid and SVG outputs: every corpus program through Graphviz and a Mermaid
//! checker, a structural comparison with the reference's DOT, and snapshots of small programs.
//!
//! What needs Graphviz (`dot`) or the corpus says SKIPPED and returns without them, unless
//! `DYGRAM_GRAPHVIZ_REQUIRED` / `CONFORMANCE_REQUIRED` is set (CI provides both and sets both).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use dygram_core::render::dot::to_dot;
use dygram_core::render::mermaid::to_mermaid;
use dygram_runtime::outputs::svg::{SvgError, to_svg, to_svg_with};
use dygram_syntax::source::SourceFile;

/// The corpus, or `None` (the test says SKIPPED) without it.
fn corpus() -> Option<PathBuf> {
    testkit::needs::conformance()
}

/// The `ok` programs of the corpus: (path under `examples/`, source).
fn ok_programs(corpus: &Path) -> Vec<(String, String)> {
    let manifest = std::fs::read_to_string(corpus.join("manifest.tsv")).unwrap();
    manifest
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut cols = line.split('\t');
            let path = cols.next()?.to_string();
            (cols.next()? == "ok").then_some(path)
        })
        .map(|path| {
            let text = std::fs::read_to_string(corpus.join("examples").join(&path)).unwrap();
            (path, text)
        })
        .collect()
}

fn machine(name: &str, text: &str) -> serde_json::Value {
    dygram_core::compile(SourceFile::new(name, text)).json(dygram_core::json::JsonOptions {
        source_ranges: true,
    })
}

/// Whether Graphviz can be used: without it the test says SKIPPED, or fails when CI requires it.
fn graphviz() -> bool {
    testkit::needs::graphviz().is_some()
}

/// Runs `dot -Tsvg` on some DOT text: Ok(number of SVG documents) or Err(stderr).
fn run_dot(input: &str) -> Result<usize, String> {
    use std::io::Write;
    let mut child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    let _ = writer.join().unwrap();
    let svgs = String::from_utf8_lossy(&out.stdout).matches("<svg").count();
    if out.status.success() {
        Ok(svgs)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The DOT texts Graphviz rejects, with its message. All of them go through one `dot` process
/// (fast); only when that fails is each text run on its own (on a few threads) to find the
/// culprits.
fn rejected_by_graphviz(dots: &[(String, String)]) -> Vec<(String, String)> {
    let batch: String = dots.iter().map(|(_, d)| format!("{d}\n")).collect();
    if run_dot(&batch) == Ok(dots.len()) {
        return Vec::new();
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    let chunk = dots.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = dots
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .filter_map(|(path, dot)| match run_dot(dot) {
                            Ok(1) => None,
                            Ok(n) => Some((path.clone(), format!("{n} SVG documents"))),
                            Err(e) => Some((path.clone(), e)),
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

// ---- a small structural reading of DOT ---------------------------------------------------------------

/// Node ids with their shape, edges (source, target) with their count, and cluster names.
#[derive(Debug, PartialEq, Default)]
struct Structure {
    nodes: BTreeMap<String, Option<String>>,
    edges: BTreeMap<(String, String), usize>,
    clusters: Vec<String>,
}

/// A quoted DOT string at the start of `s`: its text and the rest after it.
fn quoted(s: &str) -> Option<(String, &str)> {
    let rest = s.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = rest.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                if let Some((_, next)) = chars.next() {
                    if next != '"' {
                        out.push('\\');
                    }
                    out.push(next);
                }
            }
            '"' => return Some((out, &rest[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

/// An endpoint `"id"` or `"id":"port"`: the id and the rest.
fn endpoint(s: &str) -> Option<(String, &str)> {
    let (id, rest) = quoted(s)?;
    match rest.strip_prefix(':') {
        Some(port) => Some((id, quoted(port)?.1)),
        None => Some((id, rest)),
    }
}

/// The attribute list after an HTML or quoted label is skipped, so that text in labels is not read
/// as attributes.
fn attributes_outside_label(attrs: &str) -> String {
    let Some(start) = attrs.find("label=") else {
        return attrs.to_string();
    };
    let after = &attrs[start + "label=".len()..];
    let end = if after.starts_with('<') {
        let mut depth = 0usize;
        after
            .char_indices()
            .find_map(|(i, c)| {
                match c {
                    '<' => depth += 1,
                    '>' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                None
            })
            .unwrap_or(after.len())
    } else {
        quoted(after).map_or(0, |(_, rest)| after.len() - rest.len())
    };
    format!("{}{}", &attrs[..start], &after[end..])
}

fn structure(dot: &str) -> Structure {
    let mut s = Structure::default();
    for line in dot.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("subgraph ") {
            s.clusters.push(
                name.trim_end_matches('{')
                    .trim()
                    .trim_matches('"')
                    .to_string(),
            );
            continue;
        }
        let Some((first, rest)) = endpoint(line) else {
            continue;
        };
        if let Some(rest) = rest.strip_prefix(" -> ") {
            if let Some((second, _)) = endpoint(rest) {
                *s.edges.entry((first, second)).or_default() += 1;
            }
        } else if let Some(attrs) = rest.strip_prefix(" [") {
            let attrs = attributes_outside_label(attrs);
            let shape = attrs.split(", ").find_map(|a| {
                a.strip_prefix("shape=")
                    .map(|v| v.trim_end_matches("];").to_string())
            });
            s.nodes.insert(first, shape);
        }
    }
    s
}

// ---- DOT over the corpus -----------------------------------------------------------------------------

#[test]
fn every_corpus_program_gives_dot_that_graphviz_accepts() {
    let Some(corpus) = corpus() else { return };
    let programs = ok_programs(&corpus);
    assert!(programs.len() > 400, "{} programs", programs.len());
    let dots: Vec<(String, String)> = programs
        .iter()
        .map(|(path, text)| (path.clone(), to_dot(&machine(path, text))))
        .collect();

    // Structure and bytes against the reference's DOT.
    let mut same_structure = 0;
    let mut same_bytes = 0;
    let mut different = Vec::new();
    for (path, dot) in &dots {
        let reference =
            std::fs::read_to_string(corpus.join("expected").join(format!("{path}.dot"))).unwrap();
        if *dot == reference {
            same_bytes += 1;
        }
        let (ours, theirs) = (structure(dot), structure(&reference));
        if ours == theirs {
            same_structure += 1;
        } else {
            different.push(path.as_str());
        }
    }
    let n = dots.len();
    let pct = |k: usize| 100.0 * k as f64 / n as f64;
    eprintln!(
        "DOT vs reference: same structure (node ids, shapes, edges, clusters) {same_structure}/{n} ({:.1}%), byte for byte {same_bytes}/{n} ({:.1}%)",
        pct(same_structure),
        pct(same_bytes)
    );
    for path in different.iter().take(20) {
        eprintln!("  structure differs: {path}");
    }
    assert!(pct(same_structure) >= 95.0, "{:.1}%", pct(same_structure));

    if !graphviz() {
        return;
    }
    let started = std::time::Instant::now();
    let rejected = rejected_by_graphviz(&dots);
    eprintln!(
        "Graphviz accepted {}/{n} DOT outputs ({:.1?})",
        n - rejected.len(),
        started.elapsed()
    );
    for (path, message) in &rejected {
        eprintln!("  rejected: {path}: {}", message.trim());
    }
    assert!(rejected.is_empty(), "{} rejected", rejected.len());
}

// ---- snapshots ----------------------------------------------------------------------------------------

const TRAFFIC_LIGHT: &str = r#"machine "Traffic Light" {
    cycles<number>: 0;
}

init Start "Power on";
state Red "Stop";
state Green;
Task Notify "Send *status*" @Critical {
    prompt: "Report the light {{ Settings.mode }}";
};
context Settings {
    mode: "auto";
    timeout<number>: 30;
};

Start -> Red;
Red -after: "30s"-> Green;
Green -when: 'cycles > 2';-> Notify;
Green -unless: "cycles > 2"-> Red;
Notify -writes-> Settings;
"#;

const NESTED: &str = r#"machine "Orders"

Process Fulfilment {
    region: "eu-west";
    Task pick "Pick items";
    Task pack;
    pick -> pack;
};

Task receive;
state done;
receive -> Fulfilment;
Fulfilment.pack => done;
receive "1" -> "0..*" done;

note Fulfilment "Runs in the warehouse" @Ops;
note done "All shipped";
"#;

const ODD_NAMES: &str = r#"machine "Odd: names; and {braces} <b>"

state end "The \"end\" & <more>";
state default;
Task class "Has: colons; semis" {
    desc: "direction LR %% not a comment";
};
start -> class -"go: now; {x}"-> end;
default <--> end;
class -"b"-> class;
"#;

#[test]
fn dot_snapshots() {
    for (name, text) in [
        ("traffic_light", TRAFFIC_LIGHT),
        ("nested", NESTED),
        ("odd_names", ODD_NAMES),
    ] {
        let dot = to_dot(&machine(&format!("{name}.dy"), text));
        insta::assert_snapshot!(format!("dot_{name}"), dot);
    }
}

#[test]
fn mermaid_snapshots() {
    for (name, text) in [
        ("traffic_light", TRAFFIC_LIGHT),
        ("nested", NESTED),
        ("odd_names", ODD_NAMES),
    ] {
        let mermaid = to_mermaid(&machine(&format!("{name}.dy"), text));
        assert_eq!(check_mermaid(&mermaid), Ok(()), "{mermaid}");
        insta::assert_snapshot!(format!("mermaid_{name}"), mermaid);
    }
}

#[test]
fn snapshot_programs_render_with_graphviz() {
    if !graphviz() {
        return;
    }
    for text in [TRAFFIC_LIGHT, NESTED, ODD_NAMES] {
        let svg = to_svg(&to_dot(&machine("m.dy", text))).unwrap();
        assert!(svg.contains("<svg"), "{svg}");
    }
}

// ---- SVG ------------------------------------------------------------------------------------------------

#[test]
fn svg_comes_from_graphviz() {
    if !graphviz() {
        return;
    }
    let svg = to_svg("digraph { a -> b }").unwrap();
    assert!(svg.contains("<svg"), "{svg}");
    assert!(svg.contains("</svg>"), "{svg}");
}

#[test]
fn svg_errors_name_the_missing_program() {
    let err = to_svg_with("dygram-no-such-graphviz-program", "digraph { a -> b }").unwrap_err();
    assert!(matches!(err, SvgError::NotInstalled { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("`dygram-no-such-graphviz-program` was not found"),
        "{message}"
    );
    assert!(message.contains("install Graphviz"), "{message}");
    assert!(message.contains("apt-get install graphviz"), "{message}");
}

#[test]
fn svg_errors_carry_graphviz_messages() {
    if !graphviz() {
        return;
    }
    let err = to_svg("digraph { a -> [ }").unwrap_err();
    assert!(matches!(err, SvgError::Failed { .. }), "{err:?}");
    assert!(err.to_string().contains("syntax error"), "{err}");
}

// ---- Mermaid ------------------------------------------------------------------------------------------

/// Words a Mermaid state id must not be.
const MERMAID_KEYWORDS: [&str; 10] = [
    "state",
    "note",
    "class",
    "classdef",
    "scale",
    "direction",
    "acctitle",
    "accdescr",
    "statediagram",
    "end",
];

fn check_id(id: &str) -> Result<(), String> {
    let lower = id.to_ascii_lowercase();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("bad id `{id}`"));
    }
    if MERMAID_KEYWORDS.contains(&lower.as_str()) || lower.starts_with("default") {
        return Err(format!("keyword id `{id}`"));
    }
    Ok(())
}

/// Whether Mermaid would read the line as a `direction` statement.
fn has_direction(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.match_indices("direction").any(|(i, _)| {
        let rest = &lower[i + "direction".len()..];
        rest.starts_with(char::is_whitespace)
            && ["tb", "bt", "rl", "lr"]
                .iter()
                .any(|d| rest.trim_start().starts_with(d))
    })
}

/// Text after ` : ` (descriptions, labels, notes).
fn check_text(text: &str) -> Result<(), String> {
    if text.trim().is_empty()
        || text.contains([':', ';', '"', '{', '}', '\n'])
        || text.contains("%%")
        || has_direction(text)
    {
        return Err(format!("bad text `{text}`"));
    }
    Ok(())
}

fn check_endpoint(s: &str) -> Result<(), String> {
    if s == "[*]" { Ok(()) } else { check_id(s) }
}

/// A line-by-line check of the `stateDiagram-v2` subset we write.
fn check_mermaid(text: &str) -> Result<(), String> {
    let mut lines = text.lines();
    if lines.next() != Some("stateDiagram-v2") {
        return Err("the first line is not `stateDiagram-v2`".into());
    }
    let mut depth = 0usize;
    let mut states: HashSet<String> = HashSet::new();
    for (n, raw) in lines.enumerate() {
        let line = raw.trim();
        let at = |e: String| format!("line {}: {e}: `{raw}`", n + 2);
        let result: Result<(), String> = (|| {
            if line.is_empty() {
                return Ok(());
            }
            if let Some(comment) = line.strip_prefix("%%") {
                return if has_direction(comment) {
                    Err("`direction` statement inside a comment".into())
                } else {
                    Ok(())
                };
            }
            if let Some(d) = line.strip_prefix("direction ") {
                return ["TB", "BT", "RL", "LR"]
                    .contains(&d)
                    .then_some(())
                    .ok_or_else(|| "bad direction".into());
            }
            if line == "}" {
                depth = depth.checked_sub(1).ok_or("unbalanced `}`")?;
                return Ok(());
            }
            if let Some(rest) = line.strip_prefix("state ") {
                if let Some(id) = rest.strip_suffix(" {") {
                    check_id(id)?;
                    states.insert(id.to_string());
                    depth += 1;
                    return Ok(());
                }
                let label = rest.strip_prefix('"').ok_or("bad state line")?;
                let (label, id) = label.split_once("\" as ").ok_or("bad state line")?;
                if label.contains(['"', '<', '>', '[', ']']) {
                    return Err("bad state name".into());
                }
                check_id(id)?;
                states.insert(id.to_string());
                return Ok(());
            }
            if let Some(rest) = line.strip_prefix("note ") {
                let rest = rest
                    .strip_prefix("right of ")
                    .or_else(|| rest.strip_prefix("left of "))
                    .ok_or("bad note")?;
                let (id, note) = rest.split_once(" : ").ok_or("bad note")?;
                check_id(id)?;
                if !states.contains(id) {
                    return Err(format!("note on undeclared state `{id}`"));
                }
                return check_text(note);
            }
            if let Some(rest) = line.strip_prefix("classDef ") {
                let (name, style) = rest.split_once(' ').ok_or("bad classDef")?;
                return (name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !style.is_empty()
                    && !style.contains(';'))
                .then_some(())
                .ok_or_else(|| "bad classDef".into());
            }
            if let Some(rest) = line.strip_prefix("class ") {
                let (ids, class) = rest.rsplit_once(' ').ok_or("bad class")?;
                for id in ids.split(", ") {
                    check_id(id)?;
                    if !states.contains(id) {
                        return Err(format!("class on undeclared state `{id}`"));
                    }
                }
                return check_id(class);
            }
            let (statement, text) = match line.split_once(" : ") {
                Some((s, t)) => (s, Some(t)),
                None => (line, None),
            };
            if let Some(t) = text {
                check_text(t)?;
            }
            match statement.split_once(" --> ") {
                Some((a, b)) => {
                    check_endpoint(a)?;
                    check_endpoint(b)?;
                    states.extend([a.to_string(), b.to_string()]);
                }
                None => {
                    check_id(statement)?;
                    states.insert(statement.to_string());
                }
            }
            Ok(())
        })();
        result.map_err(at)?;
    }
    if depth != 0 {
        return Err(format!("{depth} composite state(s) left open"));
    }
    Ok(())
}

#[test]
fn the_mermaid_checker_catches_mistakes() {
    assert_eq!(check_mermaid("stateDiagram-v2\n    a --> b : go\n"), Ok(()));
    for bad in [
        "stateDiagram\n",
        "stateDiagram-v2\n    a-b --> c\n",
        "stateDiagram-v2\n    a --> b : x: y\n",
        "stateDiagram-v2\n    a --> b : x; y\n",
        "stateDiagram-v2\n    state a {\n",
        "stateDiagram-v2\n    }\n",
        "stateDiagram-v2\n    note right of z : hi\n",
        "stateDiagram-v2\n    default --> b\n",
        "stateDiagram-v2\n    a --> b : turn direction LR\n",
    ] {
        assert!(check_mermaid(bad).is_err(), "{bad}");
    }
}

#[test]
fn every_corpus_program_gives_well_formed_mermaid() {
    let mut bad = Vec::new();
    let Some(corpus) = corpus() else { return };
    let programs = ok_programs(&corpus);
    for (path, text) in &programs {
        let mermaid = to_mermaid(&machine(path, text));
        assert!(mermaid.starts_with("stateDiagram-v2\n"), "{path}");
        if let Err(e) = check_mermaid(&mermaid) {
            bad.push(format!("{path}: {e}"));
        }
    }
    eprintln!(
        "Mermaid: {}/{} corpus programs well formed",
        programs.len() - bad.len(),
        programs.len()
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// A condition written on a later segment of a chain guards that segment's edge, so the node it
/// leaves depends on what the condition reads, not the chain's first source: the README's order
/// flow makes `charge` (not `start`) depend on `order`, in the JSON and in the drawing.
#[test]
fn a_condition_on_a_later_segment_of_a_chain_belongs_to_that_segment() {
    let json = machine("order.dy", super::answers::ORDER);
    let dependencies: Vec<(&str, &str, &str)> = json["inferredDependencies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["source"].as_str().unwrap(),
                d["target"].as_str().unwrap(),
                d["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(
        dependencies.contains(&("charge", "order", "condition references order")),
        "{dependencies:?}"
    );
    assert!(
        !dependencies.iter().any(|(source, ..)| *source == "start"),
        "{dependencies:?}"
    );
    let dot = to_dot(&json);
    assert!(
        dot.contains(r#""charge" -> "order" [label="condition references order""#),
        "{dot}"
    );
    assert!(!dot.contains(r#""start" -> "order""#), "{dot}");

    // Each segment's sources are the previous segment's targets, also several of them.
    let json = machine(
        "fan.dy",
        "Context c { n<number>: 0; }\na -> b, d -when: 'c.n > 1'-> e;\n",
    );
    let sources: Vec<&str> = json["inferredDependencies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources, ["b", "d"], "{json}");
}
