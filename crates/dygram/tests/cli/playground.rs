//! `dygram serve`: the playground driven in headless Chromium (playwright-core, the machine's
//! Chromium; `scripts/install-playwright` installs the driver) by `playground/drive.mjs`. Opening
//! an example draws it; a syntax error typed shows its diagnostic at its line within 300 ms of the
//! keystroke and fixing it clears it; stepping an execution with recordings moves the highlight and
//! the command line's `exec status` then shows the same turn; the page asks for nothing outside
//! 127.0.0.1. The static export is served by a plain static server and draws an example.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::support::{Dir, bin, copy_dir, repo_root};

/// The playground's example folder, copied (executions are made in it).
fn examples() -> Dir {
    let d = Dir::new();
    let from = repo_root().join("examples/dygram");
    copy_dir(&from, d.path());
    d
}

/// A server process, stopped when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `dygram serve DIR --port 0`: the process and the address it printed.
fn serve(dir: &Path) -> (Running, String) {
    let mut child = Command::new(bin())
        .args(["serve", "--port", "0"])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().trim_end_matches('/').to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{line:?}");
    (Running(child), url)
}

/// What drive.mjs saw at `url` (with `env` added), or `None` after a SKIPPED line; its screenshots
/// go to `playground/<shots>/` of the view artifacts, when CI collects them.
fn drive(url: &str, shots: &str, env: &[(&str, &str)]) -> Option<Value> {
    let browser = testkit::browser::browser()?;
    let driver = testkit::browser::playwright()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/playground/drive.mjs");
    let shots = testkit::browser::artifacts_dir().map(|d| d.join("playground").join(shots));
    if let Some(dir) = &shots {
        std::fs::create_dir_all(dir).unwrap();
    }
    let mut cmd = Command::new("node");
    cmd.arg(script)
        .env("PLAYWRIGHT", &driver)
        .env("BROWSER", browser.program())
        .env("URL", url)
        .env("SHOTS", shots.unwrap_or_default());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "drive.mjs failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    Some(serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap())
}

#[test]
fn the_playground_checks_draws_and_steps_an_example_in_a_browser() {
    let d = examples();
    let (_server, url) = serve(d.path());
    let Some(seen) = drive(
        &format!("{url}/?file=review.dy"),
        "example",
        &[("PLAYBACK", "recordings/review"), ("STEPS", "2")],
    ) else {
        return;
    };
    assert_eq!(seen["ready"], "true", "{seen}");
    assert_eq!(seen["file"], "review.dy", "{seen}");
    assert!(seen["nodes"].as_u64().unwrap() >= 5, "the diagram: {seen}");
    // The syntax error: shown at its line, within 300 ms of the key, and cleared once fixed.
    assert_eq!(seen["errorLine"], seen["expectedLine"], "{seen}");
    let latency = seen["latencyMs"].as_u64().unwrap();
    assert!(
        latency <= 300,
        "the diagnostic came {latency} ms after the key: {seen}"
    );
    assert!(
        seen["listed"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{}:", seen["expectedLine"])),
        "{seen}"
    );
    assert_eq!(seen["fixed"], true, "{seen}");
    // A node clicked selects where it is written.
    let clicked = seen["clicked"].as_str().unwrap();
    assert!(
        seen["selection"].as_str().unwrap().contains(clicked),
        "{seen}"
    );
    // Two turns with the recordings: the highlight moves, and the command line sees the same turn.
    let steps = seen["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{seen}");
    for step in steps {
        assert_eq!(step["status"], 200, "{seen}");
        assert_eq!(
            step["marked"], step["currentNodes"],
            "the diagram marks where it stands: {seen}"
        );
    }
    assert_ne!(steps[0]["currentNodes"], steps[1]["currentNodes"], "{seen}");
    let id = steps[1]["id"].as_str().unwrap();
    let status = d.run(&["exec", "status", id, "--format", "json"]);
    assert_eq!(status.code, 0, "{status:?}");
    let status = status.json_line();
    assert_eq!(status["turns"], steps[1]["turns"], "{status}");
    assert_eq!(status["currentNodes"], steps[1]["currentNodes"], "{status}");
    // And a turn from the command line is the page's next one.
    let next = d.run(&["e", "-i", "review.dy", "--id", id, "--format", "json"]);
    assert!(matches!(next.code, 0 | 2), "{next:?}");
    assert_eq!(
        next.json_line()["turns"].as_u64(),
        steps[1]["turns"].as_u64().map(|t| t + 1)
    );
    assert_eq!(
        seen["outside"],
        serde_json::json!([]),
        "requests outside 127.0.0.1: {seen}"
    );
}

/// The benchmark, in the page: a keystroke at the end of a 1 000-node machine, to its
/// diagnostics (printed; the native figure is `cargo bench -p dygram-wasm --bench check`).
#[test]
fn a_thousand_node_machine_is_checked_as_you_type() {
    let d = Dir::new();
    let mut text = String::from("machine \"Big\"\n");
    for i in 0..1000 {
        text.push_str(&format!("State s{i} \"Step {i}\";\n"));
    }
    for i in 0..1000 {
        text.push_str(&format!("s{i} -> s{};\n", (i * 7 + 1) % 1000));
    }
    d.write("big.dy", &text);
    let (_server, url) = serve(d.path());
    let Some(seen) = drive(&format!("{url}/?file=big.dy"), "thousand-nodes", &[]) else {
        return;
    };
    assert_eq!(seen["nodes"], 1000, "{seen}");
    assert_eq!(seen["errorLine"], seen["expectedLine"], "{seen}");
    let latency = seen["latencyMs"].as_u64().unwrap();
    eprintln!(
        "playground, 1 000 nodes: keystroke to diagnostics {latency} ms (the check in the page: \
         {:.1} ms; the drawing, a frame later: {:.1} ms)",
        seen["inPageCheckMs"].as_f64().unwrap_or_default(),
        seen["drawMs"].as_f64().unwrap_or_default()
    );
    assert!(latency <= 300, "{seen}");
}

#[test]
fn the_static_export_draws_an_example_from_a_plain_static_server() {
    let d = examples();
    let out = d.path().join("site");
    let exported = d.run(&["serve", ".", "--export", "site"]);
    assert_eq!(exported.code, 0, "{exported:?}");
    for file in [
        "index.html",
        "app.js",
        "style.css",
        "dygram.wasm",
        "machines.json",
    ] {
        assert!(out.join(file).is_file(), "{file}");
    }
    let Some(python) = testkit::needs::python3() else {
        return;
    };
    let port = free_port();
    let _static = Running(
        Command::new(python)
            .args([
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                &port.to_string(),
                "--directory",
            ])
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_port(port);
    let Some(seen) = drive(
        &format!("http://127.0.0.1:{port}/?file=trip.dy"),
        "static-export",
        &[("TYPE_ERROR", "no")],
    ) else {
        return;
    };
    assert_eq!(seen["ready"], "true", "{seen}");
    assert_eq!(seen["file"], "trip.dy", "{seen}");
    assert!(seen["nodes"].as_u64().unwrap() >= 3, "{seen}");
    assert_eq!(seen["outside"], serde_json::json!([]), "{seen}");
}

#[test]
fn the_server_refuses_paths_outside_its_folder_and_other_hosts() {
    let d = examples();
    let (_server, url) = serve(d.path());
    let get = |path: &str, host: Option<&str>| http_get(&format!("{url}{path}"), host);
    assert_eq!(get("/api/files", None).0, 200);
    assert!(get("/api/files", None).1.contains("review.dy"));
    assert_eq!(get("/api/file?path=review.dy", None).0, 200);
    for bad in [
        "../x.dy",
        "%2E%2E/x.dy",
        "/etc/passwd",
        "recordings",
        ".dygram/x.dy",
    ] {
        assert_eq!(get(&format!("/api/file?path={bad}"), None).0, 400, "{bad}");
    }
    assert_eq!(get("/api/files", Some("evil.example:80")).0, 403);
    assert_eq!(get("/nothing", None).0, 404);
}

/// A GET by hand (status, body), with another `Host` header when given.
fn http_get(url: &str, host: Option<&str>) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (address, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_string()), |(a, p)| (a, format!("/{p}")));
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let host = host.unwrap_or(address);
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for_port(port: u16) {
    let start = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "the static server never listened"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
