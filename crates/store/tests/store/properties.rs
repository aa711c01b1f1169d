//! Property tests: the journal reader against arbitrary truncation.

use std::path::Path;

use proptest::prelude::*;
use serde_json::{Value, json};
use store::{TornReason, journal};

fn journal_bytes(records: &[Value]) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = Vec::new();
    let mut ends = Vec::new();
    for r in records {
        bytes.extend_from_slice(serde_json::to_string(r).unwrap().as_bytes());
        bytes.push(b'\n');
        ends.push(bytes.len());
    }
    (bytes, ends)
}

fn arb_record() -> impl Strategy<Value = Value> {
    (
        any::<u32>(),
        ".{0,40}",
        proptest::collection::vec(any::<i16>(), 0..4),
    )
        .prop_map(|(n, s, v)| json!({"n": n, "s": s, "v": v}))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Cutting a journal anywhere returns exactly the records whose lines are complete, and reports
    /// the rest as a torn tail.
    #[test]
    fn truncation_anywhere_returns_the_complete_prefix(
        records in proptest::collection::vec(arb_record(), 0..12),
        cut_frac in 0.0f64..=1.0,
    ) {
        let (bytes, ends) = journal_bytes(&records);
        let cut = ((bytes.len() as f64) * cut_frac).floor() as usize;
        let cut = cut.min(bytes.len());
        let contents = journal::parse::<Value>(Path::new("j"), &bytes[..cut]).unwrap();
        let complete = ends.iter().filter(|&&e| e <= cut).count();
        prop_assert_eq!(&contents.records[..], &records[..complete]);
        let boundary = if complete == 0 { 0 } else { ends[complete - 1] };
        prop_assert_eq!(contents.complete_len as usize, boundary);
        match contents.torn_tail {
            None => prop_assert_eq!(cut, boundary),
            Some(t) => {
                prop_assert!(cut > boundary);
                prop_assert_eq!(t.reason, TornReason::MissingNewline);
                prop_assert_eq!(t.offset as usize, boundary);
                prop_assert_eq!(t.len as usize, cut - boundary);
                prop_assert_eq!(t.line, complete + 1);
            }
        }
    }

    /// Garbage glued to the end is a torn tail, never an error and never a record.
    #[test]
    fn garbage_after_complete_lines_is_a_torn_tail(
        records in proptest::collection::vec(arb_record(), 1..6),
        garbage in "[^\n]{1,30}\n?",
    ) {
        let (mut bytes, _) = journal_bytes(&records);
        bytes.extend_from_slice(garbage.as_bytes());
        let contents = journal::parse::<Value>(Path::new("j"), &bytes).unwrap();
        if garbage.trim().is_empty() {
            prop_assert_eq!(contents.records.len(), records.len());
        } else if let Ok(v) = serde_json::from_str::<Value>(garbage.trim_end_matches('\n')) {
            // The garbage happens to be JSON: it is a record when terminated, torn otherwise.
            if garbage.ends_with('\n') {
                prop_assert_eq!(contents.records.last(), Some(&v));
            } else {
                prop_assert!(contents.torn_tail.is_some());
            }
        } else {
            prop_assert_eq!(&contents.records[..], &records[..]);
            prop_assert!(contents.torn_tail.is_some());
        }
    }
}
