//! Replaying recorded answers: each node is served a recording made at that node, whatever order
//! the paths run in, and a recording of another node is never taken for one that matches its
//! tools by chance.

use serde_json::Value;

use super::support::{Dir, repo_root};

/// `examples/dygram/<name>` of the repository.
fn example(name: &str) -> String {
    repo_root()
        .join("examples/dygram")
        .join(name)
        .display()
        .to_string()
}

/// The model's text of each call of `id` that asked it, by node (from `history.jsonl`).
fn answers_by_node(d: &Dir, id: &str) -> Vec<(String, String)> {
    d.history(id)
        .iter()
        .filter_map(|line| {
            let text = line.get("output").and_then(Value::as_str)?;
            Some((line["node"].as_str()?.to_string(), text.to_string()))
        })
        .collect()
}

/// `trip.dy` runs `flights` and `hotels` on parallel paths; their recordings offer the same tools
/// after the same number of messages. With `--step-path` the paths take turns, `hotels` first:
/// it must be served the hotel, not the next recording of its shape.
#[test]
fn each_node_is_served_the_recording_made_at_it_whatever_the_order_of_the_paths() {
    let d = Dir::new();
    let (trip, recordings) = (example("trip.dy"), example("recordings/trip"));
    let mut codes = Vec::new();
    for _ in 0..10 {
        let out = d.run(&[
            "e",
            "-i",
            &trip,
            "--id",
            "t",
            "--step-path",
            "--playback",
            &recordings,
        ]);
        assert!(matches!(out.code, 0 | 2), "{out:?}");
        codes.push(out.code);
        if out.code == 2 {
            break;
        }
    }
    assert_eq!(codes.last(), Some(&2), "{codes:?}");
    let answers = answers_by_node(&d, "t");
    assert!(
        answers.contains(&("hotels".into(), "Hotel chosen.".into())),
        "{answers:?}"
    );
    assert!(
        answers.contains(&("flights".into(), "Flight chosen.".into())),
        "{answers:?}"
    );
    let shown = d.show_json("t");
    assert_eq!(
        shown["contextState"]["plan"]["hotel"],
        "Casa do Rio, 3 to 6 May"
    );
    assert_eq!(
        shown["contextState"]["plan"]["flight"],
        "TP 1351 on 3 May, 08:10"
    );
}

/// When the only recording left of a request's shape was made at another node, the call fails
/// and says so, and nothing is changed: the recording is not served to the wrong node.
#[test]
fn a_recording_of_another_node_is_not_served_and_the_miss_says_why() {
    let d = Dir::new();
    let only_flights = d.path().join("only-flights");
    std::fs::create_dir_all(&only_flights).unwrap();
    std::fs::copy(
        example("recordings/trip/turn-1.json"),
        only_flights.join("turn-1.json"),
    )
    .unwrap();
    let trip = example("trip.dy");
    let args = [
        "e",
        "-i",
        trip.as_str(),
        "--id",
        "t",
        "--step-path",
        "--playback",
        "only-flights",
    ];
    // The start spawns both paths; the next path step is hotels'.
    assert_eq!(d.run(&args).code, 0);
    let before = std::fs::read_to_string(d.exec_dir("t").join("state.json")).unwrap();
    let out = d.run(&args);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("hotels"), "{out:?}");
    assert!(out.stderr.contains("turn-1.json"), "{out:?}");
    assert!(out.stderr.contains("flights"), "{out:?}");
    assert!(!out.stderr.contains("already used"), "{out:?}");
    let after = std::fs::read_to_string(d.exec_dir("t").join("state.json")).unwrap();
    assert_eq!(before, after, "the refused call changed the execution");
}
