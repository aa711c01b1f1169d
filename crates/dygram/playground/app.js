// The DyGram playground: an editor checked as you type by the language compiled to WebAssembly
// (dygram.wasm, in the page: no round trip), a diagram laid out by the same module, and, when the
// page is served by `dygram serve`, executions run one turn at a time on the server. Nothing here
// reaches beyond the page's own origin.
"use strict";

const $ = (id) => document.getElementById(id);
const source = $("source");
const highlight = $("highlight");
const underline = $("underline");
const state = {
  wasm: null,
  served: false,
  path: null,
  savedText: "",
  diagnostics: [],
  execution: null,
  selected: null,
};
// For scripts and tests: when the last check finished (performance.now()) and what it found.
window.dygram = { checks: 0, lastCheckAt: 0, lastCheckMs: 0, diagnostics: [] };

// ---- the WebAssembly core -------------------------------------------------------------------

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Sends one request to the module and returns its answer. */
function ask(request) {
  const bytes = encoder.encode(JSON.stringify(request));
  const exports = state.wasm.exports;
  const at = exports.dy_input(bytes.length);
  new Uint8Array(exports.memory.buffer, at, bytes.length).set(bytes);
  const length = exports.dy_call();
  const out = exports.dy_output();
  return JSON.parse(decoder.decode(new Uint8Array(exports.memory.buffer, out, length)));
}

async function loadWasm() {
  const response = await fetch("dygram.wasm");
  const bytes = await response.arrayBuffer();
  const { instance } = await WebAssembly.instantiate(bytes, {});
  state.wasm = instance;
}

// ---- checking as you type -------------------------------------------------------------------

// A keystroke is answered in two frames: its diagnostics (and the text, uncoloured) first; then
// the colours, the underlines and the diagram (the larger part of the work on a large machine),
// skipped when another keystroke came meanwhile.
let pending = false;
let drawing = null;
function scheduleCheck() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    check();
  });
}

function check() {
  const started = performance.now();
  const text = source.value;
  const answer = ask({ op: "diagnose", text });
  state.diagnostics = answer.diagnostics;
  highlight.textContent = text + "\n";
  paintUnderlines(text, answer.diagnostics);
  paintDiagnostics(answer.diagnostics);
  const took = performance.now() - started;
  window.dygram.checks += 1;
  window.dygram.lastCheckAt = performance.now();
  window.dygram.lastCheckMs = took;
  window.dygram.diagnostics = answer.diagnostics;
  // A drawing that takes long waits for a pause in the typing as long as it takes.
  clearTimeout(drawing);
  const quiet = lastDrawMs < 16 ? 0 : Math.min(lastDrawMs, 400);
  drawing = setTimeout(() => draw(text, took), quiet);
}

let lastDrawMs = 0;

function draw(text, checkMs) {
  if (text !== source.value) return;
  const started = performance.now();
  const answer = ask({ op: "draw", text });
  paintSource(text, answer.highlights);
  $("diagram").innerHTML = answer.svg;
  markExecution();
  const took = performance.now() - started;
  lastDrawMs = took;
  window.dygram.lastDrawMs = took;
  window.dygram.drawn = answer.nodes.length;
  setStatus(`${answer.nodes.length} nodes · checked in ${checkMs.toFixed(1)} ms, drawn in ${took.toFixed(1)} ms` +
    (text === state.savedText ? "" : " · unsaved"));
}

function syncScroll() {
  for (const layer of [highlight, underline]) {
    layer.scrollTop = source.scrollTop;
    layer.scrollLeft = source.scrollLeft;
  }
}

function escapeHtml(text) {
  return text.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
}

/** The coloured copy of the text behind the textarea: one span per classified token. */
function paintSource(text, highlights) {
  const parts = [];
  let from = 0;
  for (const [start, end, kind] of highlights) {
    if (start < from || end <= start) continue;
    if (start > from) parts.push(escapeHtml(text.slice(from, start)));
    parts.push(`<span class="t-${kind}">`, escapeHtml(text.slice(start, end)), "</span>");
    from = end;
  }
  parts.push(escapeHtml(text.slice(from)), "\n");
  highlight.innerHTML = parts.join("");
  syncScroll();
}

/** The diagnostics underlined, in a transparent copy of the text over the coloured one. */
function paintUnderlines(text, diagnostics) {
  const ranges = diagnostics
    .map((d) => [d.start, Math.min(Math.max(d.end, d.start + 1), text.length), d.severity])
    .filter(([start, end]) => end > start)
    .sort((a, b) => a[0] - b[0]);
  const parts = [];
  let from = 0;
  for (const [start, end, severity] of ranges) {
    if (start < from) continue;
    parts.push(escapeHtml(text.slice(from, start)));
    parts.push(`<span class="squiggle-${severity}">`, escapeHtml(text.slice(start, end)), "</span>");
    from = end;
  }
  parts.push(escapeHtml(text.slice(from)), "\n");
  underline.innerHTML = parts.join("");
  syncScroll();
}

function paintDiagnostics(diagnostics) {
  const list = $("diagnostics");
  list.innerHTML = "";
  if (diagnostics.length === 0) {
    const li = document.createElement("li");
    li.className = "ok";
    li.textContent = "✓ No problems";
    list.appendChild(li);
    return;
  }
  for (const d of diagnostics.slice(0, 200)) {
    const li = document.createElement("li");
    li.className = d.severity;
    li.dataset.line = d.line;
    li.textContent = `${d.line}:${d.column} ${d.severity}: ${d.message}` + (d.hint ? ` (${d.hint})` : "");
    li.addEventListener("click", () => select(d.start, Math.max(d.end, d.start)));
    list.appendChild(li);
  }
}

function select(start, end) {
  source.focus();
  source.setSelectionRange(start, end);
}

function setStatus(text) {
  $("status").textContent = text;
}

// ---- the diagram ----------------------------------------------------------------------------

$("diagram").addEventListener("click", (event) => {
  const node = event.target.closest("g.node");
  if (!node) return;
  document.querySelectorAll("#diagram g.node.selected").forEach((n) => n.classList.remove("selected"));
  node.classList.add("selected");
  state.selected = node.dataset.node;
  if (node.dataset.start !== undefined) select(Number(node.dataset.start), Number(node.dataset.end));
});

/** Marks the execution's current nodes, the nodes it visited and the transitions it took. */
function markExecution() {
  const run = state.execution;
  if (!run) return;
  for (const g of document.querySelectorAll("#diagram g.node")) {
    const name = g.dataset.node;
    g.classList.toggle("current", run.currentNodes.includes(name));
    g.classList.toggle("visited", run.visited.includes(name));
  }
  const taken = new Set(run.taken.map(([a, b]) => a + "\u0000" + b));
  for (const g of document.querySelectorAll("#diagram g.edge")) {
    g.classList.toggle("taken", taken.has(g.dataset.from + "\u0000" + g.dataset.to));
  }
}

// ---- completion and hover -------------------------------------------------------------------

const completions = $("completions");
let items = [];
let active = 0;

function openCompletions() {
  const answer = ask({ op: "complete", text: source.value, at: source.selectionStart });
  items = answer.items || [];
  if (items.length === 0) return closeCompletions();
  active = 0;
  completions.innerHTML = "";
  items.slice(0, 50).forEach((item, n) => {
    const li = document.createElement("li");
    li.innerHTML = `${escapeHtml(item.label)}<small>${escapeHtml(item.kind)}</small>`;
    li.title = item.detail;
    li.addEventListener("mousedown", (e) => { e.preventDefault(); accept(n); });
    completions.appendChild(li);
  });
  completions.hidden = false;
  paintActive();
}

function paintActive() {
  [...completions.children].forEach((li, n) => li.classList.toggle("active", n === active));
}

function closeCompletions() {
  completions.hidden = true;
  items = [];
}

function accept(n) {
  const item = items[n];
  closeCompletions();
  if (!item) return;
  source.setRangeText(item.label, item.start, item.end, "end");
  scheduleCheck();
}

source.addEventListener("keydown", (event) => {
  if ((event.ctrlKey || event.metaKey) && event.key === "s") {
    event.preventDefault();
    save();
    return;
  }
  if (event.ctrlKey && event.key === " ") {
    event.preventDefault();
    openCompletions();
    return;
  }
  if (completions.hidden) {
    if (event.key === "Tab") {
      event.preventDefault();
      source.setRangeText("    ", source.selectionStart, source.selectionEnd, "end");
      scheduleCheck();
    }
    return;
  }
  if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    event.preventDefault();
    active = (active + (event.key === "ArrowDown" ? 1 : items.length - 1)) % Math.min(items.length, 50);
    paintActive();
  } else if (event.key === "Enter" || event.key === "Tab") {
    event.preventDefault();
    accept(active);
  } else if (event.key === "Escape") {
    closeCompletions();
  }
});

const hoverBox = $("hover");
let hoverTimer = null;
source.addEventListener("mousemove", (event) => {
  clearTimeout(hoverTimer);
  hoverBox.hidden = true;
  hoverTimer = setTimeout(() => showHover(event), 250);
});
source.addEventListener("mouseleave", () => { clearTimeout(hoverTimer); hoverBox.hidden = true; });

/** The character of the text under a point of the textarea (a monospace grid). */
function offsetAt(event) {
  const style = getComputedStyle(source);
  const line = parseFloat(style.lineHeight);
  const probe = document.createElement("span");
  probe.style.font = style.font;
  probe.textContent = "0".repeat(100);
  document.body.appendChild(probe);
  const char = probe.getBoundingClientRect().width / 100;
  probe.remove();
  const box = source.getBoundingClientRect();
  const x = event.clientX - box.left - parseFloat(style.paddingLeft) + source.scrollLeft;
  const y = event.clientY - box.top - parseFloat(style.paddingTop) + source.scrollTop;
  const lines = source.value.split("\n");
  const row = Math.floor(y / line);
  if (row < 0 || row >= lines.length) return null;
  const column = Math.floor(x / char);
  if (column < 0 || column >= lines[row].length) return null;
  let at = 0;
  for (let r = 0; r < row; r++) at += lines[r].length + 1;
  return at + column;
}

function showHover(event) {
  const at = offsetAt(event);
  if (at === null) return;
  const answer = ask({ op: "hover", text: source.value, at });
  if (!answer || !answer.markdown) return;
  hoverBox.textContent = answer.markdown.replace(/\*\*|`/g, "");
  const box = $("editor").getBoundingClientRect();
  hoverBox.style.left = `${event.clientX - box.left + 12}px`;
  hoverBox.style.top = `${event.clientY - box.top + 16}px`;
  hoverBox.hidden = false;
}

source.addEventListener("input", () => { closeCompletions(); scheduleCheck(); });
source.addEventListener("scroll", syncScroll);

// ---- files ----------------------------------------------------------------------------------

async function listFiles() {
  try {
    const response = await fetch("api/files");
    if (response.ok) {
      state.served = true;
      return { files: await response.json(), texts: null };
    }
  } catch (_) { /* a static copy: no server */ }
  const response = await fetch("machines.json");
  const machines = response.ok ? await response.json() : {};
  return { files: Object.keys(machines), texts: machines };
}

async function openFile(path, texts) {
  let text = "";
  if (texts) {
    text = texts[path] ?? "";
  } else {
    const response = await fetch("api/file?path=" + encodeURIComponent(path));
    if (!response.ok) {
      setStatus(`cannot open ${path}: ${await response.text()}`);
      return;
    }
    text = await response.text();
  }
  state.path = path;
  state.savedText = text;
  state.execution = null;
  source.value = text;
  $("history").innerHTML = "";
  $("run-status").textContent = "";
  $("execution").value = "";
  const url = new URL(location.href);
  url.searchParams.set("file", path);
  history.replaceState(null, "", url);
  check();
}

async function save() {
  if (!state.served || !state.path) return;
  const response = await fetch("api/file?path=" + encodeURIComponent(state.path), {
    method: "PUT",
    body: source.value,
  });
  if (response.ok) {
    state.savedText = source.value;
    setStatus(`saved ${state.path}`);
  } else {
    setStatus(`not saved: ${await response.text()}`);
  }
}

$("save").addEventListener("click", save);
$("format").addEventListener("click", () => {
  const answer = ask({ op: "format", text: source.value, indent: 4 });
  if (answer.text !== undefined) {
    source.value = answer.text;
    check();
  } else {
    setStatus(`not formatted: ${answer.refused}`);
  }
});

// ---- executions -----------------------------------------------------------------------------

async function step() {
  if (!state.served || !state.path) return;
  if (source.value !== state.savedText) await save();
  const body = {
    path: state.path,
    id: $("execution").value.trim() || null,
    playback: $("playback").value.trim() || null,
    answer: $("answer").value.trim() || null,
  };
  $("step").disabled = true;
  try {
    const response = await fetch("api/step", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    const answer = await response.json();
    if (!response.ok) {
      $("run-status").textContent = answer.message || "the turn failed";
      return;
    }
    showRun(answer);
    $("answer").value = "";
  } finally {
    $("step").disabled = false;
  }
}

function showRun(answer) {
  const report = answer.report;
  $("execution").value = report.id;
  state.execution = answer.trace;
  $("run-status").textContent =
    `${report.id}: ${report.status} · turn ${report.turns}, step ${report.steps} · at ${report.currentNodes.join(", ") || "—"}` +
    (report.request ? " · waiting for an answer" : "");
  const list = $("history");
  list.innerHTML = "";
  for (const entry of answer.history) {
    const li = document.createElement("li");
    li.textContent = `turn ${entry.turn} at ${entry.node}: ${entry.summary}`;
    list.appendChild(li);
  }
  markExecution();
}

$("step").addEventListener("click", step);

// ---- start ----------------------------------------------------------------------------------

async function start() {
  await loadWasm();
  const { files, texts } = await listFiles();
  if (!state.served) $("run").classList.add("static");
  if (!state.served) $("save").hidden = true;
  const picker = $("files");
  for (const f of files) {
    const option = document.createElement("option");
    option.value = f;
    option.textContent = f;
    picker.appendChild(option);
  }
  picker.addEventListener("change", () => openFile(picker.value, texts));
  const wanted = new URL(location.href).searchParams.get("file");
  const first = wanted && files.includes(wanted) ? wanted : files[0];
  if (first !== undefined) {
    picker.value = first;
    await openFile(first, texts);
  } else {
    source.value = "machine \"New\"\n\nstart -> done;\n";
    check();
  }
  document.body.dataset.ready = "true";
}

start().catch((e) => {
  setStatus(`the playground could not start: ${e}`);
  document.body.dataset.ready = "failed";
});
