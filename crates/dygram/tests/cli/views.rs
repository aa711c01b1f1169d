//! `dygram exec show --format svg|html`: the machine drawn with the execution's path, and the HTML
//! page loaded by a real browser (headless Chromium) that must find the tool names, their results
//! and the status in the DOM, run none of the model's markup and fetch nothing.

use serde_json::json;
use testkit::{Reply, ScriptedServer, ToolCallSpec};

use super::answers::ORDER;
use super::support::{Dir, Out};

/// The model's text of the first answer: markup that must show as text.
const SHOUT: &str = "<script>document.title='owned'</script><b>Charging</b> now";

/// An execution `v` run to its end turn by turn: the model writes, calls a tool that does not
/// exist (a failed call), then writes the total and moves on.
fn finished_execution() -> Dir {
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ToolCallSpec::new("c1", "launch_rockets", json!({"count": 3})),
            ToolCallSpec::new("c2", "write_order", json!({"data": {"total": 42}})),
        ])
        .with_text(SHOUT),
        Reply::tool_call("c3", "transition_to_shipped", json!({})),
    ]);
    let mut d = Dir::with_file("order.dy", ORDER);
    d.env("OPENAI_BASE_URL", &server.openai_base());
    for _ in 0..10 {
        let out = d.run(&["e", "-i", "order.dy", "--id", "v", "--provider", "openai"]);
        match out.code {
            0 => continue,
            2 => return d,
            _ => panic!("{out:?}"),
        }
    }
    panic!("the execution did not end in 10 calls");
}

/// An execution `v` whose model ends its conversation while the only way out is closed: the
/// path fails.
fn failed_execution() -> Dir {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "write_order", json!({"data": {"total": 0}})).with_text("Hm."),
        Reply::text("Nothing to charge."),
    ]);
    let mut d = Dir::with_file("order.dy", ORDER);
    d.env("OPENAI_BASE_URL", &server.openai_base());
    let call = [
        "e",
        "-i",
        "order.dy",
        "--id",
        "v",
        "--provider",
        "openai",
        "--step",
    ];
    for _ in 0..10 {
        let out = d.run(&call);
        if out.code == 1 && out.stdout.contains("Status: error") {
            return d;
        }
        assert_eq!(out.code, 0, "{out:?}");
    }
    panic!("the execution did not fail in 10 calls");
}

fn show(d: &Dir, format: &str) -> Out {
    let out = d.run(&["exec", "show", "v", "--format", format]);
    assert_eq!(out.code, 0, "{out:?}");
    out
}

#[test]
fn the_history_keeps_the_model_text_and_each_tool_call_with_its_result() {
    let d = finished_execution();
    let history = d.history("v");
    let first = history
        .iter()
        .find(|h| h["calls"].as_array().is_some_and(|c| c.len() == 2))
        .unwrap_or_else(|| panic!("no line with two calls: {history:?}"));
    assert_eq!(first["text"], SHOUT);
    assert_eq!(first["calls"][0]["name"], "launch_rockets");
    assert_eq!(first["calls"][0]["isError"], true);
    assert_eq!(first["calls"][0]["input"], json!({"count": 3}));
    assert!(
        first["calls"][0]["result"]
            .as_str()
            .unwrap()
            .contains("Unknown tool: launch_rockets"),
        "{first}"
    );
    assert_eq!(first["calls"][1]["isError"], false);
    assert_eq!(first["tools"], json!(["launch_rockets", "write_order"]));
}

#[test]
fn svg_draws_the_machine_with_the_visited_path() {
    if testkit::needs::graphviz().is_none() {
        return;
    }
    let d = finished_execution();
    let svg = show(&d, "svg").stdout;
    assert!(
        svg.contains("<svg") && svg.trim_end().ends_with("</svg>"),
        "{svg}"
    );
    for node in ["start", "charge", "shipped"] {
        assert!(svg.contains(&format!("<title>{node}</title>")), "{svg}");
    }
    // Visited nodes and the transitions taken are drawn in the trace's green.
    assert!(svg.to_ascii_lowercase().contains("#2e7d32"), "{svg}");
}

#[test]
fn svg_and_html_say_what_is_missing_without_graphviz() {
    let mut d = Dir::with_file("order.dy", ORDER);
    let out = d.run(&["e", "-i", "order.dy", "--id", "v"]);
    assert_eq!(out.code, 0, "{out:?}");
    d.env("PATH", "/nonexistent");
    let svg = d.run(&["exec", "show", "v", "--format", "svg"]);
    assert_eq!(svg.code, 1, "{svg:?}");
    assert_eq!(svg.stdout, "", "{svg:?}");
    assert!(svg.stderr.contains("Graphviz"), "{svg:?}");
    // The page needs no drawing to be read: it is made without one, and says why.
    let html = d.run(&["exec", "show", "v", "--format", "html"]);
    assert_eq!(html.code, 0, "{html:?}");
    assert!(html.stdout.starts_with("<!DOCTYPE html>"), "{html:?}");
    assert!(html.stdout.contains("The machine is not drawn"), "{html:?}");
    assert!(html.stderr.contains("Graphviz"), "{html:?}");
}

#[test]
fn the_html_page_is_self_contained_and_escapes_what_the_model_wrote() {
    if testkit::needs::graphviz().is_none() {
        return;
    }
    let d = finished_execution();
    let html = show(&d, "html").stdout;
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(
        !html.contains("<script>document"),
        "the model's markup is escaped"
    );
    assert!(html.contains("&lt;script&gt;document.title"), "{html}");
    for external in ["src=\"http", "href=\"http", "@import", "url("] {
        assert!(!html.contains(external), "{external} in the page");
    }
}

/// The HTML page of execution `v` of `d`, as a headless Chromium built its DOM (checked to have
/// fetched nothing); its screenshot is kept as `picture` when CI collects them. `None` (after a
/// SKIPPED line) without Graphviz or the browser.
fn browse(make: fn() -> Dir, picture: &str) -> Option<String> {
    testkit::needs::graphviz()?;
    let browser = testkit::browser::browser()?;
    let d = make();
    let page = d.path().join(format!("{picture}.html"));
    std::fs::write(&page, show(&d, "html").stdout).unwrap();
    let loaded = browser.load(&page);
    assert_eq!(loaded.requests, Vec::<String>::new(), "the page fetched");
    if let Some(dir) = testkit::browser::artifacts_dir() {
        browser.screenshot(&page, &dir.join(format!("{picture}.png")), 1200, 1600);
    }
    Some(loaded.dom)
}

#[test]
fn a_browser_shows_the_tool_calls_their_results_and_the_status() {
    let Some(dom) = browse(finished_execution, "dygram-exec-show") else {
        return;
    };
    for text in [
        "launch_rockets",
        "Unknown tool: launch_rockets",
        "write_order",
        "transition_to_shipped",
        "\"total\": 42",
        "id=\"status\">complete<",
        "<title>charge</title>",
        "&lt;b&gt;Charging&lt;/b&gt; now",
    ] {
        assert!(dom.contains(text), "{text} not in the DOM:\n{dom}");
    }
    // The model's script did not run (it would have renamed the page).
    assert!(dom.contains("<title>dygram · v</title>"), "{dom}");
    assert!(!dom.contains("owned</title>"), "{dom}");
}

#[test]
fn a_browser_shows_why_an_execution_failed() {
    let Some(dom) = browse(failed_execution, "dygram-exec-show-error") else {
        return;
    };
    for text in [
        "id=\"status\">error<",
        "No transition available",
        "write_order",
        "status-failed",
    ] {
        assert!(dom.contains(text), "{text} not in the DOM:\n{dom}");
    }
}

/// A Graphviz whose plugins were never registered (`dot -c` not run) answers as this one does.
const UNCONFIGURED_DOT: &str = "#!/bin/sh\necho 'Format: \"svg\" not recognized. No formats found.\nPerhaps \"dot -c\" needs to be run (with installer'\"'\"'s privileges) to register the plugins?' >&2\nexit 1\n";

/// An unconfigured Graphviz is explained with the way to fix it (`dot -c`), and the HTML view,
/// which needs no picture to be useful, is made without the drawing (and says why).
#[test]
fn an_unconfigured_graphviz_is_explained_and_the_html_view_is_made_without_it() {
    use std::os::unix::fs::PermissionsExt;
    let mut d = finished_execution();
    let bin = d.path().join("fake-bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::write(bin.join("dot"), UNCONFIGURED_DOT).unwrap();
    std::fs::set_permissions(bin.join("dot"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    d.env("PATH", &path);
    let svg = d.run(&["g", "order.dy", "-f", "svg"]);
    assert_eq!(svg.code, 1, "{svg:?}");
    assert!(
        svg.stderr.contains("no output formats registered"),
        "{svg:?}"
    );
    assert!(svg.stderr.contains("dot -c"), "{svg:?}");
    let html = d.run(&["exec", "show", "v", "--format", "html"]);
    assert_eq!(html.code, 0, "{html:?}");
    assert!(
        html.stdout.contains("The machine is not drawn"),
        "{}",
        html.stdout
    );
    assert!(
        html.stdout.contains("launch_rockets"),
        "the timeline is there"
    );
    assert!(
        html.stderr.contains("no drawing of the machine"),
        "{html:?}"
    );
    assert!(html.stderr.contains("dot -c"), "{html:?}");
}
