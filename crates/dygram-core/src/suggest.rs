//! "Did you mean …?": the known name closest to a misspelled one, when it is close enough to be
//! what was meant.
//!
//! Closeness is the edit distance (insertions, deletions, substitutions and swaps of two
//! neighbouring characters, each counting one), counted in characters. A name is suggested when it
//! differs from the wanted one only in case, or when its distance is at most a third of the wanted
//! name's length (at least 1) and smaller than both names' lengths, so that a one-letter name is
//! never "corrected" into another one-letter name. Among names as close, one that differs only in
//! case comes first, then the one listed first.

/// The candidate closest to `wanted`, if one is close enough (see the module documentation).
/// `wanted` itself is never suggested.
pub fn closest<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let length = wanted.chars().count();
    let limit = (length / 3).max(1);
    let lower = wanted.to_lowercase();
    let mut best: Option<(bool, usize, &'a str)> = None;
    for candidate in candidates {
        if candidate == wanted || candidate.is_empty() {
            continue;
        }
        let same_but_case = candidate.to_lowercase() == lower;
        let d = distance(wanted, candidate);
        let close = same_but_case || (d <= limit && d < length && d < candidate.chars().count());
        if !close {
            continue;
        }
        // Ranked by: differs only in case, then distance; the first listed wins a tie.
        let better = match best {
            None => true,
            Some((best_case, best_d, _)) => (!same_but_case, d) < (!best_case, best_d),
        };
        if better {
            best = Some((same_but_case, d, candidate));
        }
    }
    best.map(|(_, _, name)| name)
}

/// The edit distance between `a` and `b` in characters: insertions, deletions, substitutions and
/// swaps of two neighbouring characters count one each (the optimal string alignment distance).
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows: the one before the previous (for swaps), the previous, the current.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        current[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (previous[j] + 1)
                .min(current[j - 1] + 1)
                .min(previous[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            current[j] = d;
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_count_edits_and_swaps() {
        assert_eq!(distance("", ""), 0);
        assert_eq!(distance("abc", ""), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("review", "review"), 0);
        assert_eq!(distance("reveiw", "review"), 1, "a swap is one edit");
        assert_eq!(distance("revew", "review"), 1);
        assert_eq!(distance("reviews", "review"), 1);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("Review", "review"), 1);
        assert_eq!(distance("ça", "ca"), 1, "characters, not bytes");
    }

    #[test]
    fn close_names_are_suggested() {
        let names = ["start", "review", "approve", "done"];
        assert_eq!(closest("reveiw", names), Some("review"));
        assert_eq!(closest("aprove", names), Some("approve"));
        assert_eq!(closest("strat", names), Some("start"));
        assert_eq!(closest("Done", names), Some("done"));
    }

    #[test]
    fn the_threshold_is_a_third_of_the_length() {
        // Six characters: two edits are close enough, three are not.
        assert_eq!(closest("rvewi_", ["review"]), None);
        assert_eq!(closest("reviex", ["review"]), Some("review"));
        assert_eq!(closest("rexiex", ["review"]), Some("review"));
        assert_eq!(closest("rxxiey", ["review"]), None);
        // Short names allow one edit, but never a whole-name change.
        assert_eq!(closest("dne", ["done"]), Some("done"));
        assert_eq!(closest("x", ["y"]), None);
        assert_eq!(closest("ab", ["ac"]), Some("ac"));
        assert_eq!(closest("ab", ["b"]), None);
        // Nothing like it.
        assert_eq!(closest("payment", ["start", "review"]), None);
    }

    #[test]
    fn ties_go_to_case_then_to_the_first_listed() {
        assert_eq!(closest("review", ["Review", "reviews"]), Some("Review"));
        assert_eq!(closest("reviews", ["reviews2", "Reviews"]), Some("Reviews"));
        assert_eq!(closest("strng", ["string", "String"]), Some("string"));
        assert_eq!(closest("cat", ["bat", "car"]), Some("bat"));
        assert_eq!(closest("review", ["review"]), None, "not itself");
    }
}
