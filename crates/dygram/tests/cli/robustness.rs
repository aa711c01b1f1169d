//! Robustness: every file of the reference corpus (`../shared/conformance/dygram/examples`),
//! truncated at many points and mutated, is compiled and rendered in-process. Nothing may panic.
//!
//! Truncations: every char boundary of small files; for the others, evenly spaced points and
//! the boundaries around each `{`, `}`, `"` and `->`. Mutations (a xorshift PRNG seeded by the
//! file's index, so runs are repeatable): delete a char, duplicate a span, insert a token or
//! a non-ASCII char, swap two lines; one variant in four stacks several. About 120 000
//! variants, about 20 s in a debug build on 2 cores. The fuzz target in `crates/dygram/fuzz`
//! explores further.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};

use dygram_core::json::JsonOptions;
use dygram_syntax::source::SourceFile;

/// The examples of the reference corpus, or `None` (the test says SKIPPED) without it.
fn examples() -> Option<PathBuf> {
    testkit::needs::conformance().map(|c| c.join("examples"))
}

/// Every file under `dir`, sorted, as (path relative to `dir`, text).
fn files(dir: &Path) -> Vec<(String, String)> {
    let mut stack = vec![dir.to_path_buf()];
    let mut out = Vec::new();
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.strip_prefix(dir).unwrap().display().to_string();
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                out.push((name, text));
            }
        }
    }
    out.sort();
    out
}

/// Files smaller than this (bytes) are truncated at every char boundary.
const SMALL: usize = 256;
/// Evenly spaced truncation points for larger files.
const SPACED_CUTS: usize = 64;
/// Mutated variants per file.
const MUTATIONS: usize = 80;
/// Below this, the test did not really run.
const MIN_VARIANTS: usize = 100_000;

const INSERTS: &[&str] = &[
    "{", "}", "\"", "'", "(", ")", "[", "]", "<", ">", "-", "->", ":", ";", ",", "@", "#", ".",
    "\n", "\\", "/*", "//", "é", "😀", "-->", "<-->", "=>", "*/", "<|--", "\"\\",
];

/// A small deterministic PRNG (xorshift64).
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        // Never zero; spread small seeds.
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// In `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The char boundary at or before `i`.
fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// A random char boundary of `s` (0..=len).
fn boundary(s: &str, rng: &mut XorShift) -> usize {
    floor_boundary(s, rng.below(s.len() + 1))
}

/// One variant: its text, what was done, and where (for the excerpt).
struct Variant {
    text: String,
    kind: String,
    at: usize,
}

/// The truncation points of a file.
fn cuts(text: &str) -> BTreeSet<usize> {
    let mut points = BTreeSet::new();
    if text.len() < SMALL {
        points.extend((0..=text.len()).filter(|&i| text.is_char_boundary(i)));
        return points;
    }
    for k in 0..=SPACED_CUTS {
        points.insert(floor_boundary(text, text.len() * k / SPACED_CUTS));
    }
    for token in ["{", "}", "\"", "->"] {
        for (i, _) in text.match_indices(token) {
            // Before, inside (for `->`) and after the token.
            points.extend(i..=i + token.len());
        }
    }
    points.retain(|&i| text.is_char_boundary(i));
    points
}

/// One random mutation of `text`.
fn mutate(text: &str, rng: &mut XorShift) -> Variant {
    let mut out = text.to_string();
    match rng.below(4) {
        0 if !text.is_empty() => {
            let at = floor_boundary(text, rng.below(text.len()));
            let ch = text[at..].chars().next().unwrap();
            out.replace_range(at..at + ch.len_utf8(), "");
            Variant {
                text: out,
                kind: format!("delete {ch:?} at {at}"),
                at,
            }
        }
        1 if !text.is_empty() => {
            let start = boundary(text, rng);
            let end = floor_boundary(text, start + 1 + rng.below(40));
            let to = boundary(text, rng);
            out.insert_str(to, &text[start..end]);
            Variant {
                text: out,
                kind: format!("duplicate {start}..{end} at {to}"),
                at: to,
            }
        }
        2 => {
            let lines: Vec<&str> = text.split('\n').collect();
            let (a, b) = (rng.below(lines.len()), rng.below(lines.len()));
            let mut swapped = lines.clone();
            swapped.swap(a, b);
            let at = lines[..a.min(b)].iter().map(|l| l.len() + 1).sum();
            Variant {
                text: swapped.join("\n"),
                kind: format!("swap lines {} and {}", a + 1, b + 1),
                at,
            }
        }
        _ => {
            let insert = INSERTS[rng.below(INSERTS.len())];
            let at = boundary(text, rng);
            out.insert_str(at, insert);
            Variant {
                text: out,
                kind: format!("insert {insert:?} at {at}"),
                at,
            }
        }
    }
}

/// Compiles and renders everything the library offers for the text; whether it had no errors
/// (so that every output was rendered).
fn exercise(text: &str) -> bool {
    let compiled = dygram_core::compile(SourceFile::new("robust.dy", text));
    for d in &compiled.diagnostics {
        let _ = d.one_line(&compiled.file);
        let _ = d.render(&compiled.file, false);
    }
    if compiled.has_errors() {
        return false;
    }
    let _ = compiled.json(JsonOptions {
        source_ranges: true,
    });
    let machine = compiled.json(JsonOptions::default());
    let _ = serde_json::to_string_pretty(&machine).unwrap();
    let _ = dygram_core::render::dot::to_dot(&machine);
    let _ = dygram_core::render::mermaid::to_mermaid(&machine);
    // The back-compiled text is read again (it need not be free of errors, only of panics).
    let dsl = dygram_core::render::dsl::to_dsl(&machine);
    let again = dygram_core::compile(SourceFile::new("robust-dsl.dy", dsl));
    for d in &again.diagnostics {
        let _ = d.render(&again.file, false);
    }
    true
}

thread_local! {
    /// Set while a variant runs on this thread: the hook records the panic here instead of printing.
    static CAUGHT: RefCell<Option<Option<String>>> = const { RefCell::new(None) };
}

/// A panic hook that records the message and location of panics of variants (other threads and
/// tests keep the previous hook).
fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let recorded = CAUGHT.with(|c| {
                let mut c = c.borrow_mut();
                match c.as_mut() {
                    Some(slot) => {
                        *slot = Some(info.to_string());
                        true
                    }
                    None => false,
                }
            });
            if !recorded {
                previous(info);
            }
        }));
    });
}

/// Runs one variant: whether it had no errors, or the panic (message and location).
fn run_caught(text: &str) -> Result<bool, String> {
    CAUGHT.with(|c| *c.borrow_mut() = Some(None));
    let result = panic::catch_unwind(AssertUnwindSafe(|| exercise(text)));
    let caught = CAUGHT.with(|c| c.borrow_mut().take()).flatten();
    result.map_err(|_| caught.unwrap_or_else(|| "panic (no message)".into()))
}

/// Variants run, and of those without errors (all outputs rendered).
#[derive(Default)]
struct Counts {
    variants: AtomicUsize,
    clean: AtomicUsize,
}

/// The text around `at` (all of it if short), debug-escaped.
fn excerpt(text: &str, at: usize) -> String {
    if text.len() <= 300 {
        return format!("{text:?}");
    }
    let start = floor_boundary(text, at.saturating_sub(60));
    let end = floor_boundary(text, at.saturating_add(60));
    format!(
        "{}{:?}{}",
        if start > 0 { "…" } else { "" },
        &text[start..end],
        if end < text.len() { "…" } else { "" }
    )
}

/// Checks one file's variants; returns failures.
fn check_file(index: usize, name: &str, text: &str, counts: &Counts) -> Vec<String> {
    let mut failures = Vec::new();
    let mut check = |variant: &str, kind: &str, at: usize| {
        counts.variants.fetch_add(1, Ordering::Relaxed);
        match run_caught(variant) {
            Ok(clean) => {
                counts
                    .clean
                    .fetch_add(usize::from(clean), Ordering::Relaxed);
            }
            Err(panic) => failures.push(format!(
                "{name} [{kind}]: {panic}\n    input: {}",
                excerpt(variant, at)
            )),
        }
    };
    check(text, "original", 0);
    for cut in cuts(text) {
        check(&text[..cut], &format!("truncate at {cut}"), cut);
    }
    let mut rng = XorShift::new(index as u64 + 1);
    for n in 0..MUTATIONS {
        // One mutation, sometimes a few on top of each other.
        let mut v = mutate(text, &mut rng);
        let extra = if n % 4 == 3 { 1 + rng.below(3) } else { 0 };
        for _ in 0..extra {
            let next = mutate(&v.text, &mut rng);
            v = Variant {
                kind: format!("{}, then {}", v.kind, next.kind),
                ..next
            };
        }
        check(&v.text, &v.kind, v.at);
    }
    failures
}

#[test]
fn mangled_corpus_files_never_panic() {
    let Some(examples) = examples() else { return };
    install_hook();
    let files = files(&examples);
    assert!(files.len() > 100, "only {} corpus files", files.len());
    let counts = Counts::default();
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    let mut failures: Vec<String> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut failures = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((name, text)) = files.get(i) else {
                            break failures;
                        };
                        failures.extend(check_file(i, name, text, &counts));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    failures.sort();
    let count = counts.variants.into_inner();
    eprintln!(
        "robustness: {count} variants of {} files ({} without errors, all outputs rendered), {} panics",
        files.len(),
        counts.clean.into_inner(),
        failures.len()
    );
    let shown: Vec<&str> = failures.iter().take(30).map(String::as_str).collect();
    assert!(
        failures.is_empty(),
        "{} variants panicked:\n{}",
        failures.len(),
        shown.join("\n")
    );
    assert!(count > MIN_VARIANTS, "only {count} variants");
}
