//! The DSL back-compiler: parse → JSON → DSL → parse gives the same JSON.

use std::path::PathBuf;

use dygram_syntax::source::SourceFile;
use serde_json::Value as Json;

/// The corpus, or `None` (the test says SKIPPED) without it.
fn corpus() -> Option<PathBuf> {
    testkit::needs::conformance()
}

fn strip_ranges(v: &mut Json) {
    match v {
        Json::Object(m) => {
            m.shift_remove("$sourceRange");
            for x in m.values_mut() {
                strip_ranges(x);
            }
        }
        Json::Array(a) => a.iter_mut().for_each(strip_ranges),
        _ => {}
    }
}

/// A compiled program: its JSON (without source ranges) and its diagnostics.
struct Compiled {
    json: Json,
    syntax_errors: bool,
    errors: Vec<String>,
}

fn compile(name: &str, text: &str) -> Compiled {
    let compiled = dygram_core::compile(SourceFile::new(name, text));
    let mut json = compiled.json(Default::default());
    strip_ranges(&mut json);
    Compiled {
        json,
        syntax_errors: compiled.has_syntax_errors(),
        errors: compiled
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.message.clone())
            .collect(),
    }
}

/// The first place two JSON values differ, for messages.
fn first_difference(a: &Json, b: &Json, path: &str) -> String {
    match (a, b) {
        (Json::Object(x), Json::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    Some(w) if v == w => {}
                    Some(w) => return first_difference(v, w, &format!("{path}.{k}")),
                    None => return format!("{path}.{k}: only in the original"),
                }
            }
            match y.keys().find(|k| !x.contains_key(*k)) {
                Some(k) => format!("{path}.{k}: only in the regenerated JSON"),
                None => format!("{path}: same entries, another order"),
            }
        }
        (Json::Array(x), Json::Array(y)) => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                if v != w {
                    return first_difference(v, w, &format!("{path}[{i}]"));
                }
            }
            format!("{path}: {} items, then {}", x.len(), y.len())
        }
        _ => format!("{path}: {a} became {b}"),
    }
}

/// The result of one round trip.
struct RoundTrip {
    original: Compiled,
    dsl: String,
    again: Compiled,
}

impl RoundTrip {
    fn of(name: &str, text: &str) -> Self {
        let original = compile(name, text);
        let dsl = dygram_core::render::dsl::to_dsl(&original.json);
        let again = compile(name, &dsl);
        Self {
            original,
            dsl,
            again,
        }
    }

    /// `Err` explains what went wrong.
    fn check(&self) -> Result<(), String> {
        let dsl = &self.dsl;
        if self.again.syntax_errors {
            return Err(format!(
                "the DSL does not parse: {:?}\n{dsl}",
                self.again.errors
            ));
        }
        if self.again.json != self.original.json {
            let where_ = first_difference(&self.original.json, &self.again.json, "");
            return Err(format!("{where_}\n{dsl}"));
        }
        Ok(())
    }

    /// Same JSON, keys in the same order too.
    fn same_order(&self) -> bool {
        serde_json::to_string(&self.original.json).ok()
            == serde_json::to_string(&self.again.json).ok()
    }

    /// The DSL of the regenerated JSON is the same DSL.
    fn idempotent(&self) -> bool {
        dygram_core::render::dsl::to_dsl(&self.again.json) == self.dsl
    }
}

/// Round trip of an inline program that must succeed; the DSL.
fn round_trip(text: &str) -> String {
    let rt = RoundTrip::of("inline.dy", text);
    if let Err(e) = rt.check() {
        panic!("{text}\n---\n{e}");
    }
    assert!(rt.same_order(), "key order changed:\n{}", rt.dsl);
    assert!(rt.idempotent(), "not idempotent:\n{}", rt.dsl);
    assert_eq!(rt.original.errors, rt.again.errors, "{}", rt.dsl);
    rt.dsl
}

/// Corpus rows left out of the round trip, with the reason. None: every `ok` row round-trips.
const EXCLUDED: &[(&str, &str)] = &[];

#[test]
fn the_corpus_round_trips_through_the_dsl() {
    let Some(corpus) = corpus() else { return };
    let manifest = std::fs::read_to_string(corpus.join("manifest.tsv")).unwrap();
    let rows: Vec<&str> = manifest
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut cols = line.split('\t');
            let path = cols.next()?;
            (cols.next() == Some("ok")).then_some(path)
        })
        .filter(|path| !EXCLUDED.iter().any(|(p, _)| p == path))
        .collect();
    let (mut equal, mut same_order, mut idempotent, mut still_valid) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for path in &rows {
        let text = std::fs::read_to_string(corpus.join("examples").join(path)).unwrap();
        let rt = RoundTrip::of(path, &text);
        match rt.check() {
            Ok(()) => equal += 1,
            Err(e) => failures.push(format!("{path}: {e}")),
        }
        same_order += usize::from(rt.same_order());
        idempotent += usize::from(rt.idempotent());
        // Not part of the guarantee, but a valid program should stay valid.
        if rt.original.errors.is_empty() == rt.again.errors.is_empty() {
            still_valid += 1;
        } else {
            failures.push(format!(
                "{path}: errors {:?} became {:?}",
                rt.original.errors, rt.again.errors
            ));
        }
    }
    let n = rows.len();
    eprintln!(
        "DSL round trip over the corpus's ok rows: {equal}/{n} equal JSON ({} rows excluded), \
         {same_order} with the same key order, {idempotent} idempotent, {still_valid} as valid as before",
        EXCLUDED.len()
    );
    for f in &failures {
        eprintln!("  {f}");
    }
    assert!(n > 400, "the corpus has {n} ok rows");
    assert_eq!(equal, n, "{} failures", failures.len());
    assert_eq!(same_order, n);
    assert_eq!(idempotent, n);
    assert_eq!(still_valid, n);
}

#[test]
fn the_reference_json_reads_back_through_the_dsl() {
    // JSON written by the reference implementation (expected/<row>.json) back to DSL, compiled
    // by us: the same JSON.
    let Some(corpus) = corpus() else { return };
    let manifest = std::fs::read_to_string(corpus.join("manifest.tsv")).unwrap();
    let mut rows = 0;
    let mut failures = Vec::new();
    for line in manifest.lines().skip(1) {
        let mut cols = line.split('\t');
        let (Some(path), Some("ok")) = (cols.next(), cols.next()) else {
            continue;
        };
        rows += 1;
        let expected: Json = serde_json::from_str(
            &std::fs::read_to_string(corpus.join("expected").join(format!("{path}.json"))).unwrap(),
        )
        .unwrap();
        let dsl = dygram_core::render::dsl::to_dsl(&expected);
        let again = compile(path, &dsl);
        if again.json != expected {
            failures.push(format!(
                "{path}: {}",
                first_difference(&expected, &again.json, "")
            ));
        }
    }
    eprintln!(
        "reference JSON → DSL → JSON: {}/{rows} equal",
        rows - failures.len()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn every_parsable_row_round_trips_too() {
    // Rows the reference rejects at validation or generation still parse and give JSON.
    let Some(corpus) = corpus() else { return };
    let manifest = std::fs::read_to_string(corpus.join("manifest.tsv")).unwrap();
    let mut checked = 0;
    for line in manifest.lines().skip(1) {
        let mut cols = line.split('\t');
        let (Some(path), Some(outcome)) = (cols.next(), cols.next()) else {
            continue;
        };
        if outcome == "ok" || outcome == "parse_error" {
            continue;
        }
        let text = std::fs::read_to_string(corpus.join("examples").join(path)).unwrap();
        let rt = RoundTrip::of(path, &text);
        if rt.original.syntax_errors {
            continue;
        }
        checked += 1;
        if let Err(e) = rt.check() {
            panic!("{path}: {e}");
        }
    }
    assert!(checked > 30, "{checked}");
}

// ---- snapshots ---------------------------------------------------------------------------------

#[test]
fn a_small_workflow_reads_back_as_canonical_dsl() {
    let dsl = round_trip(
        r#"machine "Order flow" @Version("2") @style(rankdir: LR) { owner: "ops"; retries<number>: 3; }
context Config { url<URL>: "https://x.io"; tags: ["a", 2, true]; }
process Billing {
    Task charge "Charge card" @Critical { prompt: "Charge {{ Config.url }}"; }
    State pending;
    charge -> pending;
}
Start -> Billing.charge -when: 'Config.retries > 1'-> Billing.pending;
Billing.charge, Billing.pending --> Done;
note charge "Charges the card";
"#,
    );
    insta::assert_snapshot!(dsl);
}

#[test]
fn a_class_diagram_reads_back_as_canonical_dsl() {
    let dsl = round_trip(
        r#"Group Model {
    entity User { id<UUID>: "5f0c7b1e-2a9d-4c1e-9f3b-8d2a6e4c1b7a"; name<string>: "Ada"; }
    entity Order { total: 19.99; status<'new' | 'paid'>: "new"; }
    User "1" --> "0..*" Order;
}
Base <|-- User;
Order *--> Line;
Cart o--> Line;
User <--> Order;
User.name -"shown as"-> Order.status { weight: 2; };
"#,
    );
    insta::assert_snapshot!(dsl);
}

// ---- edge cases --------------------------------------------------------------------------------

#[test]
fn strings_needing_escapes_come_back() {
    let dsl = round_trip(
        r#"a {
    back: "one \\ two";
    quotes: "say \"hi\" and 'bye'";
    only_double: "a \"b\" c";
    lines: "first\nsecond\tthird\rfourth";
    controls: "\b\f\v\0";
    unicode: "ünïcödé ✓ — 字";
    empty: "";
    spaces: "   ";
    escaped_quote_end: "ends with a quote\"";
}
"#,
    );
    assert!(dsl.contains(r#"back: "one \\ two";"#), "{dsl}");
    assert!(dsl.contains(r#"only_double: 'a "b" c';"#), "{dsl}");
    assert!(dsl.contains("\\r"), "{dsl}");
}

#[test]
fn strings_the_conversion_would_change_get_inner_quotes() {
    let dsl = round_trip(
        r#"a {
    number: "'42'";
    float: "'1.5e3'";
    hex: "'0x10'";
    padded: "' 7 '";
    boolean: "'true'";
    infinity: "'Infinity'";
    leading: "''x";
    trailing: "x''";
    both: "''x''";
    coerced: "42";
    coerced_bool: "false";
    negative: "-3";
    negative_float: "-2.5";
    infinite: 1e400;
    big: 123456789012345678901234;
    small: 0.000001;
    tiny: 1e-7;
    ref: #external;
}
"#,
    );
    assert!(dsl.contains(r#"number: "'42'";"#), "{dsl}");
    assert!(dsl.contains(r#"coerced: 42;"#), "{dsl}");
    assert!(dsl.contains(r#"negative: "-3";"#), "{dsl}");
    assert!(dsl.contains("infinite: 1e999;"), "{dsl}");
    assert!(dsl.contains("ref: #external;"), "{dsl}");
}

#[test]
fn nested_objects_arrays_and_types_come_back() {
    let dsl = round_trip(
        r#"machine "Types" { bare; config<Map<string, Array<number>>>: { a: [1, 2]; }; }
Address { street<string>: "x"; zip<string>: "0"; kind<'home' | 'work'>: "home"; }
p {
    nested: { a: { b: [1, "2", true, { c: "d"; }, [], {}]; }; e: []; f: {}; };
    typed<Array<Array<string>>>: [["a"], []];
    optional<string?>;
    home<Address>: { street: "Main"; zip: "12345"; kind: "work"; };
    count<string>: "7";
    flag<string>: "true";
    when<Date>: "2024-01-15T10:00:00Z";
}
"#,
    );
    // Strings the types check stay strings (the conversion turns them into numbers anyway).
    assert!(dsl.contains(r#"zip: "12345";"#), "{dsl}");
    assert!(dsl.contains(r#"count<string>: "7";"#), "{dsl}");
    // A literal union lost its literals in the JSON: the values it checks are allowed.
    assert!(dsl.contains(r#"kind<"home" | "work">"#), "{dsl}");
    assert!(RoundTrip::of("types.dy", &dsl).again.errors.is_empty());
}

#[test]
fn qualified_nested_and_placeholder_nodes_come_back() {
    let dsl = round_trip(
        r#"Task API.Auth.Login "Login";
Task API.Auth.Logout;
note API.Auth "Auth docs";
Group { task Child; note Group.Child "collision"; }
Init -> Workflow.start;
Workflow.complete -> Done;
Outer { Inner { Leaf { x: 1; } } }
Leaf -> Inner;
"#,
    );
    // Declarations are plain and nested: nothing is left for the linker to create.
    assert!(!dsl.contains("API.Auth"), "{dsl}");
    assert!(dsl.contains("Workflow {"), "{dsl}");
}

#[test]
fn notes_come_back_with_their_targets() {
    let dsl = round_trip(
        r#"Task child "Child";
Task other;
note child "Doc for child" @Pattern;
Note other "Capitalised: no target";
note child "explicit" { target: "other"; extra: 1; }
note lonely "Documents nothing";
"#,
    );
    assert!(
        dsl.contains("note child \"Doc for child\" @Pattern;"),
        "{dsl}"
    );
    assert!(dsl.contains("Note other"), "{dsl}");
    assert!(dsl.contains("target: \"other\";"), "{dsl}");
}

#[test]
fn arrows_labels_and_multiplicities_come_back() {
    let dsl = round_trip(
        r#"a -> b; a --> b; a => b; a <--> b; a <--rel--> b; a <|-- b; a *--> b; a o--> b;
a -label-> b; a --dashed--> b; a =fat=> b;
a "1" -> "0..*" b;
a "1..*" --label--> "*" b;
a -writes-> b;
a -"stores", "other"-> b;
a -reads, x-> b;
a -error-> b;
a -@style("color: red;")-> b;
a -@style(color: blue; weight: 2), async, timeout: 1000-> b;
a -@barrier("sync"), @q(Ctx.list), @p("\"quoted\""), @e(""), @flag(on)-> b;
a -"'quoted'", k: "'v'", m: '"w"', n: "'x", num: 1.50-> b;
a -text: "pair text", priority: 5-> b;
a -o-> b;
a -k: o-> b;
a -> b { weight: 5; note: "n"; text: "override"; };
a -lbl-> b { x<string>; };
a -> b { x<string>; };
a -lbl, k: v-> b { k; };
a, b -> c, d -> e;
"#,
    );
    for arrow in ["<-->", "<--rel-->", "<|--", "*-->", "o-->", " => ", " --> "] {
        assert!(dsl.contains(arrow), "{arrow}: {dsl}");
    }
    assert!(dsl.contains(r#"a "1" -> "0..*" b"#), "{dsl}");
    assert!(dsl.contains(r#"a -"o"-> b"#), "{dsl}");
}

#[test]
fn conditions_keep_their_dependencies() {
    let dsl = round_trip(
        r#"Task a { n: 1; }
Task b;
a -when: b-> c;
b -when: "a"-> c;
a -if: 'b.n > 1'; @auto, "go"-> c;
a, b -unless: "n > 2"-> c -> a;
a -> b -when: "c"-> c;
G {
    Task x;
    Task y;
    x -when: "y"-> y;
}
"#,
    );
    // A bare condition is not a condition for the dependency analysis: it stays bare.
    assert!(dsl.contains("a -when: b-> c;"), "{dsl}");
    assert!(dsl.contains(r#"b -when: "a"-> c;"#), "{dsl}");
    // A conditional edge written in a block added no dependency; it goes back there.
    assert!(dsl.contains("    x -when: \"y\"-> y;"), "{dsl}");
}

/// A condition on a later segment of a chain gives dependencies from that segment's sources: the
/// chain is written back as a chain, and the dependencies come back the same.
#[test]
fn a_chain_with_a_condition_on_a_later_segment_comes_back() {
    let dsl = round_trip(
        r#"Context order { total<number>: 0; }
start -> charge -when: 'order.total > 0'-> shipped;
a, b -> c -when: 'order.total > 1'-> d, e -unless: 'order.total > 2'-> f;
"#,
    );
    assert!(
        dsl.contains(r#"start -> charge -when: "order.total > 0"-> shipped;"#),
        "{dsl}"
    );
}

#[test]
fn attribute_endpoints_come_back() {
    let dsl = round_trip(
        r#"Task a { port: 1; deep: { x: 1; }; }
Task b { port: 2; }
Group G { Task inner { p: 1; } }
a.port -> b.port;
a.deep.x --> G.inner.p;
G.inner -"label"-> b.port;
a.missing -> b;
"#,
    );
    assert!(dsl.contains("a.port -> b.port;"), "{dsl}");
    assert!(dsl.contains("a.deep.x --> inner.p;"), "{dsl}");
}

#[test]
fn edges_written_in_blocks_stay_in_order() {
    let dsl = round_trip(
        r#"Group G {
    Task x;
    Task z;
    x -> undefinedThing;
    x -> Other.thing;
    x -> z -> x;
}
Group H { Task y; y -> y; }
a -> b;
"#,
    );
    assert!(dsl.contains("    x -> z -> x;"), "{dsl}");
    assert!(dsl.contains("    y -> y;"), "{dsl}");
}

#[test]
fn inferred_edges_are_not_invented() {
    // `"'b'"` hides the name from the edge inference; the JSON shows only `"b"`.
    let dsl = round_trip(
        r#"Task a { hidden: "'b'"; seen: "b"; list: ["b"]; o: { k: "'b'"; j: "c"; }; }
Task b;
State c;
a -> b;
"#,
    );
    assert!(dsl.contains(r#"hidden: "'b'";"#), "{dsl}");
    assert!(dsl.contains(r#"seen: "b";"#), "{dsl}");
}

#[test]
fn templates_styles_and_wrapping_settings_come_back() {
    let dsl = round_trip(
        r#"machine "W" { maxEdgeLabelLength: "20"; maxNodeTitleLength: 30; style: { rankdir: LR; }; }
Task a { list: ["{{ b.x }}", "{{c}}"]; obj: { t: "{{ b.y }}"; }; text: "{{
 b.z }}"; }
Task b { x: 1; y: 2; z: 3; }
Task c;
style hot @critical { color: red; fill: "'blue'"; }
Task d @critical @style(fill: red; penwidth: 3) { style: "color: green; penwidth: 2"; }
a -"when: 'b'"-> b;
a -when: 'b.x == "q"'-> c;
a -when: "b.x == 'q'"-> c;
b -@style(text: hello)-> c;
b -text: hi, @style(text: hello)-> c;
note a "n" { note inner "nested note"; }
"#,
    );
    // Line breaks stay in strings: templates are found in the source text of arrays and objects.
    assert!(dsl.contains("text: \"{{\n b.z }}\";"), "{dsl}");
    assert!(dsl.contains(r#"a -when: 'b.x == "q"'-> c;"#), "{dsl}");
}

#[test]
fn strict_machines_come_back() {
    round_trip(
        r#"machine "M" @StrictMode
Task a;
Task b;
a -> b;
a -> ghost;
"#,
    );
}

#[test]
fn odd_json_gives_no_panic() {
    use serde_json::json;
    for v in [
        json!(null),
        json!("text"),
        json!({}),
        json!({"nodes": 3, "edges": {}, "attributes": "x"}),
        json!({"nodes": [1, {"parent": "x"}, {"name": "a", "parent": "zz", "attributes": [2]}]}),
        json!({"edges": [{"source": "a"}, {"source": "a", "target": "b", "value": 3}]}),
        json!({"edges": [{"source": 1, "target": "b"}, {"source": "a", "target": "b", "arrowType": "?"}]}),
        json!({"title": 5, "annotations": [{"name": "a", "attributes": {"k": [1]}}]}),
    ] {
        let _ = dygram_core::render::dsl::to_dsl(&v);
    }
    assert_eq!(dygram_core::render::dsl::to_dsl(&json!({})), "");
}
