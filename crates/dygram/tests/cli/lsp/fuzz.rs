//! 10 000 random edits: the server answers everything, never panics and keeps the same text as the
//! editor.
//!
//! Real programs are opened (the repository's `examples/`, and the conformance corpus when it is
//! beside the checkout: without it the test says SKIPPED for the corpus and goes on with the
//! examples) and edited at random through incremental `didChange` notifications: snippets of
//! DyGram's punctuation, keywords, non-ASCII text and characters of two UTF-16 units inserted,
//! ranges deleted or replaced, pieces of the document copied elsewhere, at positions given as lines
//! and UTF-16 units, some of them out of range on purpose (past a line's end, past the last line,
//! in the middle of a surrogate pair, an end before its start). Between the edits come requests:
//! every request whose capability the server advertises in its answer to `initialize` (read
//! generically, so features added later are fuzzed too), at random positions.
//!
//! Checked: every request is answered and none with `InternalError` (what a panicking handler gives)
//! or `MethodNotFound` (an advertised method not handled); no `window/logMessage` of type Error;
//! nothing on the server's standard error says `panicked`; the process is alive at the end and
//! exits 0 after `shutdown` and `exit`. The test keeps its own copy of every document, edited with
//! the same rules, and at checkpoints compares what the server says about its copy (diagnostics,
//! outline, the answers of every advertised request) with what a second server, given the test's
//! copy whole, says: a divergence of the texts shows there. Ranges the server returns must lie in
//! the document.
//!
//! The seed is random and printed (`seed=…`, also in every failure's message); `DYGRAM_LSP_FUZZ_SEED`
//! replays one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{Value, json};

use super::{ANSWER, Client};
use crate::support::repo_root;

/// Edits in all (each content change counts).
const EDITS: usize = 10_000;
/// Edits between two checkpoints of a document.
const CHECK_EVERY: usize = 250;
/// Replays a run.
const SEED_VAR: &str = "DYGRAM_LSP_FUZZ_SEED";

/// The seed of a randomised test: `var`'s value when it is set (a replay), else a new one; printed
/// with how to replay it.
pub(super) fn seed(test: &str, var: &str) -> u64 {
    let seed = match std::env::var(var) {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{var}={s} is not a number")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    };
    eprintln!("{test}: seed={seed} (replay with {var}={seed})");
    seed
}

/// SplitMix64: small, seedable, good enough to pick edits.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub(super) fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    /// True `percent` times in a hundred.
    pub(super) fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub(super) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Pieces of DyGram and of text that trouble positions: punctuation, keywords, templates, strings
/// left open, non-ASCII, characters of two UTF-16 units, a zero-width joiner sequence, NUL, CR.
const SNIPPETS: &[&str] = &[
    "{",
    "}",
    "{{",
    "}}",
    "->",
    "-->",
    "=>",
    "<-->",
    "<|--",
    "*-->",
    "o-->",
    "-label->",
    "-when: 'x > 0'->",
    "\"",
    "'",
    "`",
    "@",
    "@Async",
    "@Version(\"2\")",
    "<",
    ">",
    "<number>",
    "<Array<string>>",
    ":",
    ";",
    ",",
    ".",
    "[",
    "]",
    "(",
    ")",
    "#",
    "\\",
    "//",
    "/*",
    "*/",
    "// comment\n",
    "\n",
    "\n\n",
    " ",
    "\t",
    "\r\n",
    "\r",
    "\u{0}",
    "machine \"M\"\n",
    "machine",
    "state s;\n",
    "State",
    "Task t \"T\" { prompt: \"hi {{ x.y }}\"; }\n",
    "Task",
    "Context",
    "context c { n<number>: 1; }\n",
    "Process p {\n  State q;\n}\n",
    "a -> b;\n",
    "start",
    "end",
    "x.y.z",
    "{{ order.total }}",
    "import { A } from \"./a.dy\";\n",
    "import",
    "from",
    "as",
    "prompt: \"",
    "retries<number>: 3;",
    "true",
    "null",
    "1e309",
    "-0",
    "0x10",
    "é",
    "ç",
    "ß",
    "日本語",
    "Ω",
    "😀",
    "𝄞",
    "👩\u{200d}👩\u{200d}👧",
    "🇫🇷",
    "\u{feff}",
    "\u{2028}",
    "e\u{301}",
    "\u{10ffff}",
];

/// One piece to insert: snippets, an identifier, or random characters.
fn snippet(rng: &mut Rng) -> String {
    match rng.below(10) {
        0..=5 => (0..1 + rng.below(3)).map(|_| *rng.pick(SNIPPETS)).collect(),
        6 | 7 => {
            let letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789";
            (0..1 + rng.below(8))
                .map(|_| letters.as_bytes()[rng.below(letters.len())] as char)
                .collect()
        }
        _ => (0..1 + rng.below(6))
            .map(|_| {
                let planes = [0x20..0x7f, 0xa0..0x800, 0x800..0xd800, 0x1_0000..0x1_fbff];
                let plane = rng.pick(&planes).clone();
                char::from_u32(plane.start + rng.below((plane.end - plane.start) as usize) as u32)
                    .unwrap_or('?')
            })
            .collect(),
    }
}

/// The byte offset of an LSP position in `text`, by the protocol's rules: lines end at `\n`,
/// `\r\n` or a lone `\r`; a character past a line's end is the line's end, a line past the last
/// the text's end, a position inside a character of two units the end of that character.
fn offset(text: &str, line: u32, character: u32) -> usize {
    let lines = lines(text);
    let Some(&(start, end)) = lines.get(line as usize) else {
        return text.len();
    };
    let mut units = 0;
    for (i, c) in text[start..end].char_indices() {
        if units >= character {
            return start + i;
        }
        units += c.len_utf16() as u32;
    }
    end
}

/// Each line's text as a byte range (its line break left out).
fn lines(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                out.push((start, i));
                start = i + 1;
            }
            b'\r' => {
                out.push((start, i));
                if bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push((start, text.len()));
    out
}

/// The length in UTF-16 units of each line.
fn line_lengths(text: &str) -> Vec<u32> {
    lines(text)
        .into_iter()
        .map(|(s, e)| text[s..e].encode_utf16().count() as u32)
        .collect()
}

/// A position in `text`: mostly in range (any UTF-16 unit, the middle of a surrogate pair too),
/// sometimes past a line's end or past the last line.
fn position(rng: &mut Rng, text: &str) -> Value {
    let lines = line_lengths(text);
    let (line, character) = match rng.below(100) {
        0..=4 => (
            lines.len() + rng.below(5),
            rng.below(10) + if rng.chance(10) { 1 << 30 } else { 0 },
        ),
        n => {
            let line = rng.below(lines.len());
            let len = lines[line] as usize;
            let character = if n < 12 {
                len + 1 + rng.below(20)
            } else {
                rng.below(len + 1)
            };
            (line, character)
        }
    };
    json!({"line": line, "character": character})
}

/// A range near `start`: mostly on its line or the next few, sometimes anywhere (an end before the
/// start included).
fn range_from(rng: &mut Rng, text: &str, start: Value) -> Value {
    let end = match rng.below(10) {
        0..=6 => {
            let line = start["line"].as_u64().unwrap();
            let character = start["character"].as_u64().unwrap();
            json!({"line": line, "character": character + rng.below(30) as u64})
        }
        7 | 8 => {
            let line = start["line"].as_u64().unwrap() + 1 + rng.below(3) as u64;
            json!({"line": line, "character": rng.below(40)})
        }
        _ => position(rng, text),
    };
    json!({"start": start, "end": end})
}

/// An open document: the test's copy.
struct Doc {
    uri: String,
    text: String,
    original_len: usize,
    version: i32,
    /// Edits since its last checkpoint.
    since_check: usize,
}

impl Doc {
    /// Applies one change as the server must.
    fn apply(&mut self, change: &Value) {
        let text = change["text"].as_str().unwrap();
        match change.get("range") {
            Some(range) => {
                let at = |p: &Value| {
                    offset(
                        &self.text,
                        p["line"].as_u64().unwrap().min(u32::MAX as u64) as u32,
                        p["character"].as_u64().unwrap().min(u32::MAX as u64) as u32,
                    )
                };
                let start = at(&range["start"]);
                let end = at(&range["end"]).max(start);
                self.text.replace_range(start..end, text);
            }
            None => self.text = text.to_string(),
        }
    }

    /// A random change of the document.
    fn change(&self, rng: &mut Rng) -> Value {
        let too_big = self.text.len() > 3 * self.original_len + 2_000;
        let kind = if self.text.is_empty() {
            0
        } else if too_big {
            5
        } else {
            rng.below(100)
        };
        match kind {
            // Insert a snippet.
            0..=44 => {
                let at = position(rng, &self.text);
                json!({"range": {"start": at, "end": at}, "text": snippet(rng)})
            }
            // Copy a piece of the document elsewhere.
            45..=49 => {
                let a = rng.below(self.text.len() + 1);
                let b = (a + rng.below(80)).min(self.text.len());
                let piece: String = self
                    .text
                    .get(a..b)
                    .map_or_else(|| "?".to_string(), str::to_string);
                let at = position(rng, &self.text);
                json!({"range": {"start": at, "end": at}, "text": piece})
            }
            // Replace a range with a snippet.
            50..=64 => {
                let start = position(rng, &self.text);
                json!({"range": range_from(rng, &self.text, start), "text": snippet(rng)})
            }
            // The whole text at once (a change without a range): the original back, or a cut.
            65 => {
                let cut = rng.below(self.text.len() + 1);
                let text: String = self.text.chars().take(cut).collect();
                json!({"text": text})
            }
            // Delete a range.
            _ => {
                let start = position(rng, &self.text);
                json!({"range": range_from(rng, &self.text, start), "text": ""})
            }
        }
    }
}

/// A request the protocol defines, the capability that advertises it and the shape of its
/// parameters.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Document,
    Position,
    Range,
    References,
    Completion,
    CodeAction,
    Formatting,
    RangeFormatting,
    OnTypeFormatting,
    Rename,
    SelectionRange,
    SemanticDelta,
    InlineValue,
    WorkspaceSymbol,
}

/// Every `…Provider` capability of the protocol (3.17) and the requests it advertises.
const PROVIDERS: &[(&str, &[(&str, Shape)])] = &[
    ("hoverProvider", &[("textDocument/hover", Shape::Position)]),
    (
        "definitionProvider",
        &[("textDocument/definition", Shape::Position)],
    ),
    (
        "declarationProvider",
        &[("textDocument/declaration", Shape::Position)],
    ),
    (
        "typeDefinitionProvider",
        &[("textDocument/typeDefinition", Shape::Position)],
    ),
    (
        "implementationProvider",
        &[("textDocument/implementation", Shape::Position)],
    ),
    (
        "referencesProvider",
        &[("textDocument/references", Shape::References)],
    ),
    (
        "documentHighlightProvider",
        &[("textDocument/documentHighlight", Shape::Position)],
    ),
    (
        "completionProvider",
        &[("textDocument/completion", Shape::Completion)],
    ),
    (
        "signatureHelpProvider",
        &[("textDocument/signatureHelp", Shape::Position)],
    ),
    (
        "documentSymbolProvider",
        &[("textDocument/documentSymbol", Shape::Document)],
    ),
    (
        "codeActionProvider",
        &[("textDocument/codeAction", Shape::CodeAction)],
    ),
    (
        "codeLensProvider",
        &[("textDocument/codeLens", Shape::Document)],
    ),
    (
        "documentLinkProvider",
        &[("textDocument/documentLink", Shape::Document)],
    ),
    (
        "colorProvider",
        &[("textDocument/documentColor", Shape::Document)],
    ),
    (
        "documentFormattingProvider",
        &[("textDocument/formatting", Shape::Formatting)],
    ),
    (
        "documentRangeFormattingProvider",
        &[("textDocument/rangeFormatting", Shape::RangeFormatting)],
    ),
    (
        "documentOnTypeFormattingProvider",
        &[("textDocument/onTypeFormatting", Shape::OnTypeFormatting)],
    ),
    (
        "renameProvider",
        &[
            ("textDocument/rename", Shape::Rename),
            ("textDocument/prepareRename", Shape::Position),
        ],
    ),
    (
        "foldingRangeProvider",
        &[("textDocument/foldingRange", Shape::Document)],
    ),
    (
        "selectionRangeProvider",
        &[("textDocument/selectionRange", Shape::SelectionRange)],
    ),
    (
        "linkedEditingRangeProvider",
        &[("textDocument/linkedEditingRange", Shape::Position)],
    ),
    (
        "callHierarchyProvider",
        &[("textDocument/prepareCallHierarchy", Shape::Position)],
    ),
    (
        "typeHierarchyProvider",
        &[("textDocument/prepareTypeHierarchy", Shape::Position)],
    ),
    (
        "monikerProvider",
        &[("textDocument/moniker", Shape::Position)],
    ),
    (
        "inlayHintProvider",
        &[("textDocument/inlayHint", Shape::Range)],
    ),
    (
        "inlineValueProvider",
        &[("textDocument/inlineValue", Shape::InlineValue)],
    ),
    (
        "diagnosticProvider",
        &[("textDocument/diagnostic", Shape::Document)],
    ),
    (
        "semanticTokensProvider",
        &[
            ("textDocument/semanticTokens/full", Shape::Document),
            ("textDocument/semanticTokens/range", Shape::Range),
            (
                "textDocument/semanticTokens/full/delta",
                Shape::SemanticDelta,
            ),
        ],
    ),
    (
        "workspaceSymbolProvider",
        &[("workspace/symbol", Shape::WorkspaceSymbol)],
    ),
    // Commands act on the workspace; which ones and their arguments are the server's own.
    ("executeCommandProvider", &[]),
];

/// The requests the server advertises, read from its capabilities.
fn advertised(capabilities: &Value) -> Vec<(&'static str, Shape)> {
    let mut requests = Vec::new();
    for (key, value) in capabilities.as_object().unwrap() {
        if !key.ends_with("Provider") || matches!(value, Value::Null | Value::Bool(false)) {
            continue;
        }
        let Some((_, methods)) = PROVIDERS.iter().find(|(k, _)| k == key) else {
            panic!(
                "the server advertises {key}, which this test does not know: add it to PROVIDERS"
            );
        };
        for &(method, shape) in *methods {
            let offered = match method {
                "textDocument/prepareRename" => value["prepareProvider"] == true,
                "textDocument/semanticTokens/full" => {
                    value["full"].is_object() || value["full"] == true
                }
                "textDocument/semanticTokens/range" => {
                    value["range"].is_object() || value["range"] == true
                }
                "textDocument/semanticTokens/full/delta" => value["full"]["delta"] == true,
                _ => true,
            };
            if offered {
                requests.push((method, shape));
            }
        }
        if key == "completionProvider" && value["resolveProvider"] == true {
            requests.push(("completionItem/resolve", Shape::Completion));
        }
    }
    requests
}

/// Random parameters of a request of `shape` on `doc`; `published` are the diagnostics the server
/// last published for it (a code action is asked about some of them, as an editor does, even when
/// they are of an older version).
fn params(
    rng: &mut Rng,
    shape: Shape,
    doc: &Doc,
    capabilities: &Value,
    published: Option<&Value>,
) -> Value {
    let id = json!({"uri": doc.uri});
    let text = &doc.text;
    let options = json!({"tabSize": 1 + rng.below(8), "insertSpaces": rng.chance(50)});
    let mut p = match shape {
        Shape::Document => json!({"textDocument": id}),
        Shape::Position => json!({"textDocument": id, "position": position(rng, text)}),
        Shape::Range => {
            let start = position(rng, text);
            json!({"textDocument": id, "range": range_from(rng, text, start)})
        }
        Shape::References => json!({
            "textDocument": id, "position": position(rng, text),
            "context": {"includeDeclaration": rng.chance(50)}
        }),
        Shape::Completion => json!({
            "textDocument": id, "position": position(rng, text), "context": {"triggerKind": 1}
        }),
        Shape::CodeAction => {
            let published = published
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let sent: Vec<Value> = published.into_iter().filter(|_| rng.chance(50)).collect();
            let range = match sent.first() {
                Some(d) if rng.chance(50) => d["range"].clone(),
                _ => {
                    let start = position(rng, text);
                    range_from(rng, text, start)
                }
            };
            let mut context = json!({"diagnostics": sent});
            if rng.chance(20) {
                context["only"] = json!([*rng.pick(&["quickfix", "refactor", "source"])]);
            }
            json!({"textDocument": id, "range": range, "context": context})
        }
        Shape::Formatting => json!({"textDocument": id, "options": options}),
        Shape::RangeFormatting => {
            let start = position(rng, text);
            json!({"textDocument": id, "range": range_from(rng, text, start), "options": options})
        }
        Shape::OnTypeFormatting => {
            let first = &capabilities["documentOnTypeFormattingProvider"]["firstTriggerCharacter"];
            json!({"textDocument": id, "position": position(rng, text),
                   "ch": first.as_str().unwrap_or("}"), "options": options})
        }
        Shape::Rename => json!({
            "textDocument": id, "position": position(rng, text),
            "newName": if rng.chance(80) { "renamed".to_string() } else { snippet(rng) }
        }),
        Shape::SelectionRange => {
            let positions: Vec<Value> = (0..rng.below(4)).map(|_| position(rng, text)).collect();
            json!({"textDocument": id, "positions": positions})
        }
        Shape::SemanticDelta => json!({"textDocument": id, "previousResultId": "0"}),
        Shape::InlineValue => {
            let start = position(rng, text);
            let range = range_from(rng, text, start);
            json!({"textDocument": id, "range": range,
                   "context": {"frameId": 0, "stoppedLocation": range}})
        }
        Shape::WorkspaceSymbol => json!({"query": snippet(rng)}),
    };
    if rng.chance(2) && shape != Shape::WorkspaceSymbol {
        // A document that is not open.
        p["textDocument"] = json!({"uri": "untitled:never-opened"});
    }
    p
}

/// A server and what has been seen of it.
struct Served {
    client: Client,
    /// The last diagnostics published for each document.
    diagnostics: HashMap<String, Value>,
    seed: u64,
}

impl Served {
    fn start(dir: &Path, seed: u64) -> Self {
        Self {
            client: Client::start(dir),
            diagnostics: HashMap::new(),
            seed,
        }
    }

    /// Reads messages until `done` says so; checks every notification on the way.
    fn pump(&mut self, mut done: impl FnMut(&Value) -> bool) -> Value {
        loop {
            let message = self.client.incoming.recv_timeout(ANSWER).unwrap_or_else(|_| {
                panic!(
                    "seed={}: the server said nothing for {ANSWER:?} (alive: {}); its stderr:\n{}",
                    self.seed,
                    self.client.alive(),
                    self.client.stderr()
                )
            });
            if message["method"] == "window/logMessage" {
                assert_ne!(
                    message["params"]["type"], 1,
                    "seed={}: the server logged an error: {message}",
                    self.seed
                );
            }
            if message["method"] == "textDocument/publishDiagnostics" {
                let uri = message["params"]["uri"].as_str().unwrap().to_string();
                self.diagnostics.insert(uri, message["params"].clone());
            }
            if done(&message) {
                return message;
            }
        }
    }

    /// Sends a request and returns its answer, which must not be a failure of the server.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.client.next_id;
        self.client.next_id += 1;
        self.client
            .send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = self.pump(|m| m["id"] == id && m.get("method").is_none());
        if let Some(error) = answer.get("error") {
            let code = error["code"].as_i64().unwrap_or(0);
            let refused = code == -32603 // InternalError: a handler panicked
                || code == -32601 // MethodNotFound: advertised, not handled
                || (code == -32602 && method != "textDocument/rename"); // InvalidParams
            assert!(
                !refused,
                "seed={}: {method} {params} was answered {answer}",
                self.seed
            );
        }
        answer
    }

    /// Waits until everything sent so far has been handled and its diagnostics published: the
    /// server publishes when no message waits, after answering the request in hand, so the second
    /// of two requests in a row is answered after the diagnostics of all before the first.
    fn settle(&mut self) {
        for _ in 0..2 {
            self.call(
                "textDocument/documentSymbol",
                json!({"textDocument": {"uri": "untitled:barrier"}}),
            );
        }
    }

    /// The diagnostics last published for `uri`, which must be those of `version`.
    fn diagnostics_of(&mut self, uri: &str, version: i32) -> Value {
        let published = self
            .diagnostics
            .get(uri)
            .unwrap_or_else(|| panic!("seed={}: no diagnostics for {uri}", self.seed));
        assert_eq!(
            published["version"], version,
            "seed={}: the last diagnostics of {uri} are not of its last version: {published}",
            self.seed
        );
        published["diagnostics"].clone()
    }

    fn open(&mut self, doc: &Doc) {
        self.client.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": doc.uri, "languageId": "dygram",
                                    "version": doc.version, "text": doc.text}}),
        );
    }

    fn assert_no_panic(&mut self) {
        let stderr = self.client.stderr();
        assert!(
            !stderr.contains("panicked"),
            "seed={}: the server panicked:\n{stderr}",
            self.seed
        );
        assert!(
            self.client.alive(),
            "seed={}: the server died:\n{stderr}",
            self.seed
        );
    }
}

/// Every `range` (an object with `start` and `end` positions) inside `value` lies in `text`, the
/// text of `uri`; what is about another file (a location with another URI, a workspace edit's
/// changes of another file) is not looked at.
fn assert_ranges_inside(value: &Value, uri: &str, text: &str, context: &str) {
    let lines = line_lengths(text);
    let inside = |p: &Value| {
        let (Some(line), Some(character)) = (p["line"].as_u64(), p["character"].as_u64()) else {
            return true;
        };
        (line as usize) < lines.len() && character <= u64::from(lines[line as usize])
    };
    let is_uri = |s: &str| s.starts_with("file:") || s.starts_with("untitled:");
    match value {
        Value::Object(map) => {
            let elsewhere = ["uri", "targetUri"].iter().any(|k| {
                map.get(*k)
                    .and_then(Value::as_str)
                    .is_some_and(|u| u != uri)
            });
            if elsewhere {
                return;
            }
            for (key, v) in map {
                if is_uri(key) && key != uri {
                    continue;
                }
                if key.ends_with("ange") && v.get("start").is_some() {
                    assert!(
                        inside(&v["start"]) && inside(&v["end"]),
                        "{context}: {key} {v} is outside the document:\n{text}"
                    );
                }
                assert_ranges_inside(v, uri, text, context);
            }
        }
        Value::Array(items) => items
            .iter()
            .for_each(|v| assert_ranges_inside(v, uri, text, context)),
        _ => {}
    }
}

/// `value` without `resultId`s (which may count requests) and, for a diagnostics report, without
/// the version.
fn comparable(mut value: Value) -> Value {
    if let Value::Object(map) = &mut value {
        map.remove("resultId");
        for v in map.values_mut() {
            *v = comparable(v.take());
        }
    } else if let Value::Array(items) = &mut value {
        for v in items.iter_mut() {
            *v = comparable(v.take());
        }
    }
    value
}

/// Compares what `server` and `reference` (given the test's copies whole) say about `docs`, the
/// documents open: the diagnostics of each, and the answers of every advertised request about one.
fn checkpoint(
    rng: &mut Rng,
    server: &mut Served,
    reference: &mut Served,
    docs: &[Doc],
    checked: usize,
    requests: &[(&'static str, Shape)],
) {
    server.settle();
    for doc in docs {
        reference.open(doc);
    }
    reference.settle();
    for doc in docs {
        let context = format!(
            "seed={}: {} at version {}",
            server.seed, doc.uri, doc.version
        );
        let ours = server.diagnostics_of(&doc.uri, doc.version);
        let theirs = reference.diagnostics_of(&doc.uri, doc.version);
        assert_eq!(
            ours, theirs,
            "{context}: the diagnostics differ from those of the same text opened whole:\n{}",
            doc.text
        );
        assert_ranges_inside(&ours, &doc.uri, &doc.text, &context);
    }
    let doc = &docs[checked];
    let context = format!(
        "seed={}: {} at version {}",
        server.seed, doc.uri, doc.version
    );
    let capabilities = server.client.capabilities.clone();
    for &(method, shape) in requests {
        if !method.starts_with("textDocument/") {
            continue;
        }
        let published = server
            .diagnostics
            .get(&doc.uri)
            .map(|p| p["diagnostics"].clone());
        let mut p = params(rng, shape, doc, &capabilities, published.as_ref());
        p["textDocument"] = json!({"uri": doc.uri});
        let ours = server.call(method, p.clone());
        let theirs = reference.call(method, p.clone());
        assert_eq!(
            comparable(ours["result"].clone()),
            comparable(theirs["result"].clone()),
            "{context}: {method} {p} differs from its answer on the same text opened whole:\n{}",
            doc.text
        );
        // Positions out of the document are clamped to it: every answer's ranges lie inside.
        assert_ranges_inside(
            &ours["result"],
            &doc.uri,
            &doc.text,
            &format!("{context}: {method} {p}"),
        );
    }
    server.assert_no_panic();
    reference.assert_no_panic();
}

/// The programs of `dir` and its subfolders.
fn programs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            programs(&path, out);
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| dygram_core::imports::EXTENSIONS.contains(&e))
        {
            out.push(path);
        }
    }
}

/// A `file:` URI of `path`.
fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file://");
    for b in path.to_str().unwrap().bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

#[test]
fn ten_thousand_random_edits_leave_the_server_answering_and_in_step() {
    let seed = seed("lsp fuzz", SEED_VAR);
    let mut rng = Rng(seed);

    let mut files = Vec::new();
    programs(
        &std::fs::canonicalize(repo_root().join("examples")).unwrap(),
        &mut files,
    );
    let examples = files.len();
    assert!(examples > 0, "no programs in examples/");
    if let Some(corpus) = testkit::needs::conformance() {
        programs(&corpus.join("examples"), &mut files);
    }
    let files: Vec<(PathBuf, String)> = files
        .into_iter()
        .filter_map(|p| Some((p.clone(), std::fs::read_to_string(&p).ok()?)))
        .collect();

    let dir = tempfile::tempdir().unwrap();
    let mut server = Served::start(dir.path(), seed);
    let mut reference = Served::start(dir.path(), seed);
    let requests = advertised(&server.client.capabilities);
    assert!(
        requests.iter().any(|(m, _)| *m == "textDocument/hover"),
        "{requests:?}",
        requests = requests.iter().map(|(m, _)| m).collect::<Vec<_>>()
    );

    let started = Instant::now();
    let (mut edits, mut asked, mut checked, mut opened) = (0, 0, 0, 0);
    let mut round = 0;
    while edits < EDITS {
        // A round: one to three documents open, a few hundred edits among them, then closed. The
        // examples come first, so that each is edited in every run.
        let mut docs: Vec<Doc> = (0..1 + rng.below(3))
            .map(|i| {
                let (path, text) = if round < examples && i == 0 {
                    &files[round]
                } else {
                    rng.pick(&files)
                };
                Doc {
                    uri: file_uri(path),
                    text: text.clone(),
                    original_len: text.len(),
                    version: 1,
                    since_check: 0,
                }
            })
            .collect();
        docs.sort_by(|a, b| a.uri.cmp(&b.uri));
        docs.dedup_by(|a, b| a.uri == b.uri);
        for doc in &docs {
            server.open(doc);
            opened += 1;
        }
        let round_edits = (100 + rng.below(400)).min(EDITS - edits);
        let mut done = 0;
        while done < round_edits {
            let d = rng.below(docs.len());
            let doc = &mut docs[d];
            // Usually one change per notification, sometimes a few (applied in order).
            let n = if rng.chance(10) { 2 + rng.below(3) } else { 1 };
            let changes: Vec<Value> = (0..n.min(round_edits - done))
                .map(|_| {
                    let change = doc.change(&mut rng);
                    doc.apply(&change);
                    change
                })
                .collect();
            doc.version += 1;
            doc.since_check += changes.len();
            done += changes.len();
            server.client.notify(
                "textDocument/didChange",
                json!({"textDocument": {"uri": doc.uri, "version": doc.version},
                       "contentChanges": changes}),
            );
            if !requests.is_empty() && rng.chance(20) {
                let (method, shape) = *rng.pick(&requests);
                let doc = &docs[rng.below(docs.len())];
                let capabilities = server.client.capabilities.clone();
                let p = match method {
                    "completionItem/resolve" => {
                        let listed = server.call(
                            "textDocument/completion",
                            params(&mut rng, Shape::Completion, doc, &capabilities, None),
                        );
                        let items = &listed["result"];
                        let items = items.get("items").unwrap_or(items);
                        match items.as_array().filter(|i| !i.is_empty()) {
                            Some(items) => rng.pick(items).clone(),
                            None => json!({"label": snippet(&mut rng)}),
                        }
                    }
                    _ => {
                        let published = server
                            .diagnostics
                            .get(&doc.uri)
                            .map(|p| p["diagnostics"].clone());
                        params(&mut rng, shape, doc, &capabilities, published.as_ref())
                    }
                };
                server.call(method, p);
                asked += 1;
            }
            if docs[d].since_check >= CHECK_EVERY {
                checkpoint(&mut rng, &mut server, &mut reference, &docs, d, &requests);
                docs[d].since_check = 0;
                checked += 1;
            }
        }
        for d in 0..docs.len() {
            checkpoint(&mut rng, &mut server, &mut reference, &docs, d, &requests);
            checked += 1;
        }
        for doc in &docs {
            server.client.notify(
                "textDocument/didClose",
                json!({"textDocument": {"uri": doc.uri}}),
            );
            reference.client.notify(
                "textDocument/didClose",
                json!({"textDocument": {"uri": doc.uri}}),
            );
        }
        edits += done;
        round += 1;
    }
    server.assert_no_panic();
    let elapsed = started.elapsed();
    for served in [server, reference] {
        let seed = served.seed;
        let (code, stderr) = served.client.finish();
        assert!(
            !stderr.contains("panicked"),
            "seed={seed}: the server panicked:\n{stderr}"
        );
        assert_eq!(
            code, 0,
            "seed={seed}: the server's exit code; its stderr:\n{stderr}"
        );
    }
    eprintln!(
        "lsp fuzz: seed={seed}: {edits} edits of {opened} opened documents ({} files, {examples} \
         examples), {asked} random requests, {checked} checkpoints in {:.1} s; requests: {:?}",
        files.len(),
        elapsed.as_secs_f64(),
        requests.iter().map(|(m, _)| *m).collect::<Vec<_>>()
    );
}
