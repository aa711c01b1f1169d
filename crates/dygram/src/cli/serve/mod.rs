//! `dygram serve`: the playground, a page on 127.0.0.1 to edit, see and run the machines of a
//! folder. The language runs in the page (the WebAssembly core, `dygram-wasm`); the server lists,
//! reads and writes the folder's machine files and takes turns of their executions, in the same
//! `.dygram/executions/` as `dygram execute -i` run in that folder.

pub(super) mod files;
pub(super) mod turn;

use std::io::Read;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;
use tiny_http::{Header, Method, Request, Response, Server};

use super::{CliError, Exit, eprint_line, print_out};

/// The page and what it loads, built into the binary (`crates/dygram/playground/`).
const ASSETS: [(&str, &str, &[u8]); 4] = [
    (
        "index.html",
        "text/html; charset=utf-8",
        include_bytes!("../../../playground/index.html"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../../playground/app.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_bytes!("../../../playground/style.css"),
    ),
    (
        "dygram.wasm",
        "application/wasm",
        include_bytes!("../../../playground/dygram.wasm"),
    ),
];
/// The largest body a request may send.
const BODY_LIMIT: u64 = 4 * 1024 * 1024;

/// Serve the playground: edit, check, draw and run the machines of a folder in a browser.
///
/// The page is served on 127.0.0.1 only. It checks a machine as you type and draws it beside the
/// editor (the language compiled to WebAssembly runs in the page); Ctrl+Space completes, hovering
/// a name describes it, clicking a node selects its source, Ctrl+S saves. "Step" advances an
/// execution of the open machine by one turn, with recorded answers from a folder under DIR or an
/// answer typed in the page, in DIR/.dygram/executions/ as `dygram execute -i` run in DIR does.
/// Open /?file=PATH (relative to DIR) to start on one machine. With --export OUT, a static copy
/// (the page, the WebAssembly core and DIR's machines) is written instead: it edits and draws
/// machines from any static host, without running them.
///
/// Examples:
///   dygram serve examples/dygram            # then open http://127.0.0.1:5173/
///   dygram serve . --port 8080
///   dygram serve examples/dygram --export site/
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ServeArgs {
    /// The folder whose machines are served.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// The port on 127.0.0.1 (0: any free one).
    #[arg(short, long, default_value_t = 5173)]
    port: u16,
    /// Write a static copy of the playground into this folder instead of serving.
    #[arg(long, value_name = "OUT")]
    export: Option<PathBuf>,
}

pub fn run(args: ServeArgs) -> Result<Exit, CliError> {
    if !args.dir.is_dir() {
        return Err(
            CliError::usage(format!("{} is not a folder", args.dir.display()))
                .hint("give the folder whose machines the page edits"),
        );
    }
    if let Some(out) = &args.export {
        return export(&args.dir, out);
    }
    let server = Server::http(("127.0.0.1", args.port)).map_err(|e| {
        CliError::new(format!("cannot listen on 127.0.0.1:{}: {e}", args.port))
            .hint("another program may use the port: --port N picks another (0: any free one)")
    })?;
    let address = server
        .server_addr()
        .to_ip()
        .map_or_else(|| format!("127.0.0.1:{}", args.port), |a| a.to_string());
    eprint_line(&format!(
        "Serving the machines of {} at http://{address}/ (Ctrl-C stops)",
        args.dir.display()
    ));
    print_out(&format!("http://{address}/\n"));
    let root = args.dir.clone();
    for request in server.incoming_requests() {
        let response = answer(&root, &address, request);
        if let Err(e) = response {
            eprint_line(&format!("warning: a response could not be sent: {e}"));
        }
    }
    Ok(Exit::Ok)
}

/// Answers one request.
fn answer(root: &Path, address: &str, mut request: Request) -> std::io::Result<()> {
    // A page of another site that reaches 127.0.0.1 through its own host name (DNS rebinding) is
    // refused, and so is a write without the JSON content type a form cannot send.
    let host_ok = header(&request, "Host")
        .is_some_and(|h| h == address || h == address.replacen("127.0.0.1", "localhost", 1));
    if !host_ok {
        return request.respond(text(403, "this server answers only pages it served"));
    }
    let url = request.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((url.as_str(), ""));
    let method = request.method().clone();
    let response = match (&method, path) {
        (Method::Get, "/") => asset("index.html"),
        (Method::Get, "/api/files") => json_response(200, &json!(files::list(root))),
        (Method::Get, "/api/file") => read_file(root, query),
        (Method::Put, "/api/file") => match body(&mut request) {
            Ok(text) => write_file(root, query, &text),
            Err(response) => response,
        },
        (Method::Post, "/api/step") => {
            let json_body =
                header(&request, "Content-Type").is_some_and(|t| t.starts_with("application/json"));
            match body(&mut request) {
                Ok(_) if !json_body => text(415, "send the step as application/json"),
                Ok(text_body) => step(root, &text_body),
                Err(response) => response,
            }
        }
        (Method::Get, asset_path) => asset(asset_path.trim_start_matches('/')),
        _ => text(405, "not a request this server answers"),
    };
    request.respond(response)
}

type Reply = Response<std::io::Cursor<Vec<u8>>>;

fn header(request: &Request, name: &str) -> Option<String> {
    request
        .headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str().to_string())
}

fn with_type(response: Reply, content_type: &str) -> Reply {
    match Header::from_bytes("Content-Type", content_type) {
        Ok(h) => response.with_header(h),
        Err(()) => response,
    }
}

fn text(status: u16, message: &str) -> Reply {
    with_type(
        Response::from_string(message).with_status_code(status),
        "text/plain; charset=utf-8",
    )
}

fn json_response(status: u16, value: &serde_json::Value) -> Reply {
    with_type(
        Response::from_string(value.to_string()).with_status_code(status),
        "application/json",
    )
}

fn asset(name: &str) -> Reply {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, bytes)) => {
            with_type(Response::from_data(bytes.to_vec()), content_type)
        }
        None => text(404, "no such page"),
    }
}

/// The request's body as text, within [`BODY_LIMIT`].
fn body(request: &mut Request) -> Result<String, Reply> {
    let mut text = String::new();
    let read = request
        .as_reader()
        .take(BODY_LIMIT + 1)
        .read_to_string(&mut text);
    match read {
        Ok(n) if n as u64 > BODY_LIMIT => Err(self::text(413, "the body is too large")),
        Ok(_) => Ok(text),
        Err(_) => Err(self::text(400, "the body is not UTF-8 text")),
    }
}

/// The `path` parameter of a query, decoded.
fn path_param(query: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let value = pair.strip_prefix("path=")?;
        percent_decode(value)
    })
}

/// `%XX` and `+` decoded; `None` for a bad escape or bytes that are not UTF-8.
fn percent_decode(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = value.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

fn read_file(root: &Path, query: &str) -> Reply {
    let Some(relative) = path_param(query) else {
        return text(400, "give ?path=FILE");
    };
    match files::machine(root, &relative) {
        Ok(path) => match std::fs::read_to_string(&path) {
            Ok(content) => text(200, &content),
            Err(e) => text(404, &format!("cannot read {relative}: {e}")),
        },
        Err(e) => text(400, &e.to_string()),
    }
}

fn write_file(root: &Path, query: &str, content: &str) -> Reply {
    let Some(relative) = path_param(query) else {
        return text(400, "give ?path=FILE");
    };
    match files::machine(root, &relative) {
        Ok(path) => match store::write_atomic(&path, content.as_bytes()) {
            Ok(()) => text(200, "saved"),
            Err(e) => text(500, &format!("cannot write {relative}: {e}")),
        },
        Err(e) => text(400, &e.to_string()),
    }
}

fn step(root: &Path, body: &str) -> Reply {
    let request: turn::StepRequest = match serde_json::from_str(body) {
        Ok(request) => request,
        Err(e) => return json_response(400, &json!({"message": format!("not a step: {e}")})),
    };
    match turn::step(root, request, None) {
        Ok(answer) => json_response(200, &answer),
        Err(e) => json_response(e.status(), &json!({"message": e.to_string()})),
    }
}

/// `--export OUT`: the page, the core and the folder's machines (`machines.json`), to be served
/// by any static host.
fn export(root: &Path, out: &Path) -> Result<Exit, CliError> {
    let write = |name: &str, bytes: &[u8]| {
        let path = out.join(name);
        store::write_atomic(&path, bytes)
            .map_err(|e| CliError::with_source(format!("cannot write {}", path.display()), e))
    };
    std::fs::create_dir_all(out)
        .map_err(|e| CliError::new(format!("cannot create {}: {e}", out.display())))?;
    for (name, _, bytes) in ASSETS {
        write(name, bytes)?;
    }
    let mut machines = serde_json::Map::new();
    for relative in files::list(root) {
        if let Ok(text) = std::fs::read_to_string(root.join(&relative)) {
            machines.insert(relative, json!(text));
        }
    }
    let count = machines.len();
    write(
        "machines.json",
        serde_json::Value::Object(machines).to_string().as_bytes(),
    )?;
    print_out(&format!(
        "wrote the playground with {count} machines to {}\n",
        out.display()
    ));
    Ok(Exit::Ok)
}
