//! A real browser for the HTML views: headless Chromium (Debian's `chromium` package) loads a page
//! from a file; a test reads the DOM the page built, saves a screenshot, and checks that the page
//! asked the network for nothing.
//!
//! The browser writes a log of its network activity (`--log-net-log`); the requests in it that the
//! page started ([`Loaded::requests`]: a font, a script, an image from elsewhere) are what a
//! self-contained page must not have. The browser's own background requests (it still asks Google for
//! the time, a dictionary and its accounts, whatever the flags say) start from no origin and are told
//! apart by that. Every request goes to a proxy on 127.0.0.1 that answers nothing, so none leaves the
//! machine.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::needs::skip_for as skip;

/// Makes the browser tests required.
pub const BROWSER_REQUIRED: &str = "BROWSER_TEST_REQUIRED";
/// Names the browser program (default: `chromium`, `chromium-browser` or `google-chrome` on `PATH`).
pub const BROWSER_VAR: &str = "BROWSER_BIN";
/// Longest a page may take.
const LIMIT: Duration = Duration::from_secs(90);

/// A headless Chromium.
#[derive(Debug, Clone)]
pub struct Browser {
    program: PathBuf,
}

/// What loading a page gave.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The DOM after the page's scripts ran, serialized.
    pub dom: String,
    /// The URL of every network request the page started (`http`, `https`, `ws`, `wss`, `ftp`):
    /// empty for a self-contained page.
    pub requests: Vec<String>,
}

/// The browser, or `None` after a `SKIPPED` line (a failure where [`BROWSER_REQUIRED`] is set).
pub fn browser() -> Option<Browser> {
    let named = std::env::var_os(BROWSER_VAR).map(PathBuf::from);
    let found = named.or_else(|| {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .flat_map(|dir| {
                ["chromium", "chromium-browser", "google-chrome"].map(|name| dir.join(name))
            })
            .find(|p| p.is_file())
    });
    match found {
        Some(program) => Some(Browser { program }),
        None => skip(
            BROWSER_REQUIRED,
            "a headless browser: Debian's chromium (apt-get install chromium), or BROWSER_BIN=PATH",
        ),
    }
}

/// A proxy on 127.0.0.1 that closes every connection: nothing the browser asks for leaves the
/// machine. It stops when dropped (its thread ends with the process; the port is closed with it).
struct Trap {
    port: u16,
}

impl Trap {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                drop(stream);
            }
        });
        Self { port }
    }
}

/// The network requests the page started, from the browser's network log `log`: events that start a
/// request's job (`URL_REQUEST_START_JOB`) whose initiator is an origin (a `file:` page's is `null`)
/// rather than the browser itself (`not an origin`).
fn page_requests(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log)
        .unwrap_or_else(|e| panic!("no network log at {}: {e}", log.display()));
    let log: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the network log {} is not JSON: {e}", log.display()));
    let start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"].as_u64();
    let network = ["http:", "https:", "ws:", "wss:", "ftp:"];
    log["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| start_job.is_some() && e["type"].as_u64() == start_job)
        .filter(|e| e["params"]["initiator"].as_str() != Some("not an origin"))
        .filter_map(|e| e["params"]["url"].as_str())
        .filter(|url| network.iter().any(|scheme| url.starts_with(scheme)))
        .map(str::to_string)
        .collect()
}

impl Browser {
    /// The browser run on `page` with `extra` arguments, its network going to `trap`: its standard
    /// output.
    fn run(&self, page: &Path, trap: &Trap, extra: &[String]) -> String {
        let profile = tempfile::tempdir().unwrap();
        let url = format!("file://{}", page.canonicalize().unwrap().display());
        let mut child = Command::new(&self.program)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--disable-default-apps",
                "--metrics-recording-only",
                "--hide-scrollbars",
                "--virtual-time-budget=3000",
                "--proxy-bypass-list=<-loopback>",
            ])
            .arg(format!("--proxy-server=http://127.0.0.1:{}", trap.port))
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(extra)
            .arg(&url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.program.display()));
        let mut stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut out = String::new();
            let _ = std::io::Read::read_to_string(&mut stdout, &mut out);
            out
        });
        let end = Instant::now() + LIMIT;
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if Instant::now() > end {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{} did not finish {url} within {LIMIT:?}",
                    self.program.display()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        reader.join().unwrap()
    }

    /// The browser program.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Loads `page` (a file) and returns its DOM and the requests it started.
    pub fn load(&self, page: &Path) -> Loaded {
        let trap = Trap::start();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("netlog.json");
        let dom = self.run(
            page,
            &trap,
            &[
                "--dump-dom".to_string(),
                format!("--log-net-log={}", log.display()),
            ],
        );
        assert!(
            dom.contains("<html") || dom.contains("<body"),
            "the browser printed no DOM for {}: {dom:?}",
            page.display()
        );
        Loaded {
            dom,
            requests: page_requests(&log),
        }
    }

    /// Saves a screenshot of `page` as the PNG `png`, `width` × `height` pixels.
    pub fn screenshot(&self, page: &Path, png: &Path, width: u32, height: u32) {
        let trap = Trap::start();
        let png = std::path::absolute(png).unwrap();
        self.run(
            page,
            &trap,
            &[
                format!("--screenshot={}", png.display()),
                format!("--window-size={width},{height}"),
            ],
        );
        let bytes = std::fs::read(&png)
            .unwrap_or_else(|e| panic!("no screenshot at {}: {e}", png.display()));
        assert!(
            bytes.starts_with(b"\x89PNG"),
            "{} is not a PNG",
            png.display()
        );
    }
}

/// Where CI collects pictures of the HTML views for people to look at: `$VIEW_ARTIFACTS_DIR`, if set.
pub fn artifacts_dir() -> Option<PathBuf> {
    std::env::var_os("VIEW_ARTIFACTS_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

/// The browser driver of the playground's tests: the `playwright-core` folder in `$PLAYWRIGHT_DIR`
/// or `target/playwright` of the checkout (`scripts/install-playwright` installs it), with `node` on
/// `PATH`. Required where the browser tests are ([`BROWSER_REQUIRED`]).
pub fn playwright() -> Option<PathBuf> {
    let dir = match std::env::var_os("PLAYWRIGHT_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2);
            checkout.unwrap_or(Path::new(".")).join("target/playwright")
        }
    };
    let module = dir.join("node_modules/playwright-core");
    if module.join("package.json").is_file() && crate::needs::runs("node", "--version") {
        return Some(module);
    }
    skip(
        BROWSER_REQUIRED,
        &format!(
            "the browser driver playwright-core in {} and node on PATH (scripts/install-playwright \
             installs it; PLAYWRIGHT_DIR=PATH names another folder)",
            dir.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_s_scripts_run_and_its_requests_are_caught() {
        let Some(browser) = browser() else { return };
        let dir = tempfile::tempdir().unwrap();
        let quiet = dir.path().join("quiet.html");
        std::fs::write(
            &quiet,
            "<!doctype html><html><body><p id=x>static</p>\
             <script>document.getElementById('x').textContent='from script'</script></body></html>",
        )
        .unwrap();
        let loaded = browser.load(&quiet);
        assert!(loaded.dom.contains(">from script</p>"), "{}", loaded.dom);
        assert_eq!(loaded.requests, Vec::<String>::new());
        let noisy = dir.path().join("noisy.html");
        std::fs::write(
            &noisy,
            "<!doctype html><html><body><img src='http://pictures.example.org/a.png'>\
             <p>x</p></body></html>",
        )
        .unwrap();
        let loaded = browser.load(&noisy);
        assert!(
            loaded
                .requests
                .iter()
                .any(|r| r == "http://pictures.example.org/a.png"),
            "{:?}",
            loaded.requests
        );
        let png = dir.path().join("shot.png");
        browser.screenshot(&quiet, &png, 400, 300);
    }
}
