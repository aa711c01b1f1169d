//! The reference corpus (`../shared/conformance/dygram`): outcome classes and canonical JSON.

use std::path::{Path, PathBuf};

/// The corpus, or `None` (the test says SKIPPED) without it.
fn corpus() -> Option<PathBuf> {
    testkit::needs::conformance()
}

struct Row {
    path: String,
    outcome: String,
}

fn manifest(corpus: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(corpus.join("manifest.tsv")).unwrap();
    text.lines()
        .skip(1)
        .map(|line| {
            let mut cols = line.split('\t');
            Row {
                path: cols.next().unwrap().to_string(),
                outcome: cols.next().unwrap().to_string(),
            }
        })
        .collect()
}

fn outcome(project: &dygram_core::imports::Project) -> &'static str {
    if project.entry().has_syntax_errors() {
        "parse_error"
    } else if project.has_errors() {
        "validation_error"
    } else {
        "ok"
    }
}

#[test]
fn outcomes_match_the_reference() {
    let Some(corpus) = corpus() else { return };
    let rows = manifest(&corpus);
    let mut agree = 0;
    let mut disagreements = Vec::new();
    for row in &rows {
        let path = corpus.join("examples").join(&row.path);
        let text = std::fs::read_to_string(&path).unwrap();
        let file = dygram_syntax::source::SourceFile::new(&row.path, text.as_str());
        let project =
            dygram_core::imports::load(file.clone(), Some(&path), &dygram_runtime::files::Disk);
        let compiled = project.entry();
        let ours = outcome(&project);
        if ours == row.outcome {
            agree += 1;
        } else {
            let first = compiled
                .diagnostics
                .iter()
                .find(|d| d.is_error())
                .map(|d| d.one_line(&file))
                .unwrap_or_default();
            disagreements.push(format!(
                "{} (reference {}, ours {ours}): {first}",
                row.path, row.outcome
            ));
        }
    }
    let pct = 100.0 * agree as f64 / rows.len() as f64;
    eprintln!("outcome agreement: {agree}/{} ({pct:.1}%)", rows.len());
    for d in &disagreements {
        eprintln!("  {d}");
    }
    assert!(pct >= 90.0, "{pct:.1}%");
}

fn strip_ranges(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.shift_remove("$sourceRange");
            for x in m.values_mut() {
                strip_ranges(x);
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_ranges),
        _ => {}
    }
}

#[test]
fn json_matches_the_reference() {
    let Some(corpus) = corpus() else { return };
    let rows: Vec<Row> = manifest(&corpus)
        .into_iter()
        .filter(|r| r.outcome == "ok")
        .collect();
    let mut equal = 0;
    let mut same_order = 0;
    let mut differences = Vec::new();
    for row in &rows {
        let text = std::fs::read_to_string(corpus.join("examples").join(&row.path)).unwrap();
        let expected: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(corpus.join("expected").join(format!("{}.json", row.path)))
                .unwrap(),
        )
        .unwrap();
        let file = dygram_syntax::source::SourceFile::new(&row.path, text.as_str());
        let parsed = dygram_syntax::parse(&text);
        let machine = dygram_core::model::link(&parsed.program);
        let mut ours = dygram_core::json::to_json(&machine, &file, Default::default());
        strip_ranges(&mut ours);
        if ours == expected {
            equal += 1;
            if serde_json::to_string(&ours).unwrap() == serde_json::to_string(&expected).unwrap() {
                same_order += 1;
            }
        } else {
            let section = [
                "title",
                "attributes",
                "annotations",
                "nodes",
                "edges",
                "inferredDependencies",
                "style",
            ]
            .into_iter()
            .find(|k| ours.get(k) != expected.get(k))
            .unwrap_or("?");
            differences.push(format!("{} [{section}]", row.path));
        }
    }
    let pct = 100.0 * equal as f64 / rows.len() as f64;
    eprintln!(
        "JSON equal: {equal}/{} ({pct:.1}%), of which in the reference's key order: {same_order}",
        rows.len()
    );
    for d in &differences {
        eprintln!("  {d}");
    }
    assert!(pct >= 97.0, "{pct:.1}%");
}

/// How many `//` and `/*` a text has (strings included): formatting keeps every comment.
fn comment_marks(text: &str) -> usize {
    text.matches("//").count() + text.matches("/*").count()
}

#[test]
fn formatting_keeps_every_corpus_machine_and_comment() {
    let Some(corpus) = corpus() else { return };
    let rows = manifest(&corpus);
    let indent = dygram_analysis::format::Indent::Spaces(4);
    let mut formatted = 0;
    let mut refused: std::collections::BTreeMap<String, usize> = Default::default();
    for row in &rows {
        let text = std::fs::read_to_string(corpus.join("examples").join(&row.path)).unwrap();
        match dygram_analysis::format::formatted(&text, indent) {
            Ok(result) => {
                formatted += 1;
                let json = |t: &str| {
                    dygram_core::compile(dygram_syntax::source::SourceFile::new(&row.path, t))
                        .json(Default::default())
                };
                assert_eq!(json(&result), json(&text), "{}", row.path);
                assert!(
                    comment_marks(&result) >= comment_marks(&text),
                    "{}:\n{result}",
                    row.path
                );
                // Formatted, it formats to itself.
                assert_eq!(
                    dygram_analysis::format::formatted(&result, indent).as_ref(),
                    Ok(&result),
                    "{}",
                    row.path
                );
            }
            Err(why) => {
                let kind = format!("{why:?}");
                let kind = kind
                    .split([' ', '{'])
                    .next()
                    .unwrap_or_default()
                    .to_string();
                *refused.entry(kind).or_default() += 1;
            }
        }
    }
    eprintln!(
        "formatted: {formatted}/{}; left as they are: {refused:?}",
        rows.len()
    );
    // Most of the corpus has comments and is valid; a regression would refuse it wholesale.
    assert!(
        formatted * 10 >= rows.len() * 7,
        "{formatted}/{}",
        rows.len()
    );
}
