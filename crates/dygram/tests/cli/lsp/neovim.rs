//! A real editor as the client: headless Neovim (0.7, Debian's) starts `dygram lsp` with its own
//! LSP client, opens a machine with an error, and reports what it shows and where go-to-definition
//! takes the cursor. Needs `nvim` (the test says SKIPPED without it; `NEOVIM_TEST_REQUIRED=1`, set
//! by CI, makes that a failure).
//!
//! The machine has characters of two and four UTF-8 bytes (one and two UTF-16 units) before the
//! places looked at, so that Neovim's byte columns and the protocol's UTF-16 ones must be told
//! apart on both sides for the answers to be right.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::bin;

const MACHINE: &str = "machine \"Trip ✈ planner\"
Context trip \"Trip ✓\" { days<number>: \"three\"; }
/* 😀 é */ State booked \"Booked ✓\";
Task plan \"Plan the trip\" { prompt: \"Plan {{ trip.days }} days\"; }
start -> plan;
/* ü */ plan -when: 'trip.days > 0'-> booked;
";

/// What Neovim does, in Lua; `%s` are the server, the machine and the output file (Lua strings).
/// Whatever fails is written to the output as `error`, and Neovim always quits.
const SCRIPT: &str = r#"
local server, machine, output = %s, %s, %s
local out = { logs = {} }
local function run()
  vim.cmd('edit ' .. vim.fn.fnameescape(machine))
  local bufnr = vim.api.nvim_get_current_buf()
  local client_id = vim.lsp.start_client({
    name = 'dygram',
    cmd = { server, 'lsp' },
    root_dir = vim.fn.fnamemodify(machine, ':h'),
    handlers = {
      ['window/logMessage'] = function(_, result) table.insert(out.logs, result) end,
    },
    on_exit = function(code, signal) out.exit = { code = code, signal = signal } end,
  })
  assert(client_id, 'the client did not start')
  vim.lsp.buf_attach_client(bufnr, client_id)
  vim.wait(15000, function() return #vim.diagnostic.get(bufnr) > 0 end, 20)
  out.diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    table.insert(out.diagnostics,
      { message = d.message, lnum = d.lnum, col = d.col, severity = d.severity })
  end
  -- On the edge's target, then to its declaration.
  vim.api.nvim_win_set_cursor(0, { TARGET_ROW, TARGET_COL })
  local params = vim.lsp.util.make_position_params(0, 'utf-16')
  out.asked = params.position
  local answers, err = vim.lsp.buf_request_sync(bufnr, 'textDocument/definition', params, 15000)
  out.request_error = err
  local location
  for _, answer in pairs(answers or {}) do
    if answer.error then out.definition_error = answer.error end
    local result = answer.result
    if result and result[1] then result = result[1] end
    if result and (result.uri or result.targetUri) then location = result end
  end
  out.definition = location
  if location then vim.lsp.util.jump_to_location(location, 'utf-16') end
  local cursor = vim.api.nvim_win_get_cursor(0)
  out.cursor = { row = cursor[1], col = cursor[2], file = vim.api.nvim_buf_get_name(0) }
  vim.lsp.stop_client(client_id)
  vim.wait(10000, function() return out.exit ~= nil end, 20)
end
local ok, err = pcall(run)
if not ok then out.error = tostring(err) end
vim.fn.writefile({ vim.fn.json_encode(out) }, output)
vim.cmd('qa!')
"#;

/// A Lua string literal of `text`.
fn lua_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The line (0-based) and byte column where `needle` first appears on a line of the machine.
fn find(needle: &str, after: &str) -> (usize, usize) {
    MACHINE
        .lines()
        .enumerate()
        .find_map(|(i, line)| {
            let from = line.find(after)?;
            Some((i, from + line[from..].find(needle)?))
        })
        .unwrap()
}

#[test]
fn neovim_shows_the_diagnostics_and_goes_to_a_definition() {
    let Some(nvim) = testkit::needs::neovim() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let machine = dir.path().join("trip.dy");
    std::fs::write(&machine, MACHINE).unwrap();
    let output = dir.path().join("out.json");
    // On `booked` where the edge names it; its declaration is on line 3 after a comment.
    let (row, col) = find("booked", "->");
    let (declared_row, declared_col) = find("booked", "State");
    let script = SCRIPT
        .replacen(
            "%s, %s, %s",
            &format!(
                "{}, {}, {}",
                lua_string(bin().to_str().unwrap()),
                lua_string(machine.to_str().unwrap()),
                lua_string(output.to_str().unwrap())
            ),
            1,
        )
        .replace("TARGET_ROW", &(row + 1).to_string())
        .replace("TARGET_COL", &col.to_string());
    let script_path = dir.path().join("test.lua");
    std::fs::write(&script_path, script).unwrap();

    // Neovim's own files (logs, state) go to the temporary folder.
    let mut child = Command::new(nvim)
        .args(["--headless", "--clean", "-n", "-c"])
        .arg(format!("luafile {}", script_path.display()))
        .current_dir(dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .env("NVIM_LOG_FILE", dir.path().join("nvim.log"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let finished = child.wait_with_output().unwrap();
    let said = format!(
        "nvim exited {:?}; stdout: {}; stderr: {}",
        finished.status.code(),
        String::from_utf8_lossy(&finished.stdout),
        String::from_utf8_lossy(&finished.stderr)
    );
    let written = std::fs::read_to_string(&output)
        .unwrap_or_else(|e| panic!("Neovim wrote no report ({e}); {said}"));
    let out: Value = serde_json::from_str(&written).unwrap();
    eprintln!("Neovim reported: {out}");
    assert!(
        out.get("error").is_none(),
        "the script failed: {out}; {said}"
    );

    // The type mismatch, where `dygram pv` puts it, in Neovim's byte columns (after `✓`).
    let (error_row, error_col) = find("\"three\"", "days");
    let error = out["diagnostics"]
        .as_array()
        .unwrap_or_else(|| panic!("{out}"))
        .iter()
        .find(|d| d["severity"] == 1)
        .unwrap_or_else(|| panic!("no error among the diagnostics: {out}"));
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .starts_with("Type mismatch: expected number, got string"),
        "{error}"
    );
    assert_eq!(
        (&error["lnum"], &error["col"]),
        (&Value::from(error_row), &Value::from(error_col)),
        "{out}"
    );

    // The definition: asked at the right UTF-16 column, and the cursor on the declaration's name.
    let utf16 = |row: usize, col: usize| {
        MACHINE.lines().nth(row).unwrap()[..col]
            .encode_utf16()
            .count()
    };
    assert_eq!(
        out["asked"],
        serde_json::json!({"line": row, "character": utf16(row, col)}),
        "{out}"
    );
    assert!(out["definition"].is_object(), "no definition: {out}");
    assert_eq!(
        (&out["cursor"]["row"], &out["cursor"]["col"]),
        (&Value::from(declared_row + 1), &Value::from(declared_col)),
        "the cursor is not on the declaration of `booked`: {out}"
    );
    assert!(
        out["cursor"]["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("trip.dy")),
        "{out}"
    );

    // The server logged no failure, and Neovim's shutdown stopped it cleanly.
    let failures: Vec<&Value> = out["logs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["type"] == 1)
        .collect();
    assert!(failures.is_empty(), "{out}");
    assert_eq!(out["exit"]["code"], 0, "{out}");
}
