// Drives the playground in headless Chromium (playwright-core, the machine's Chromium) for the
// `playground` tests of crates/dygram/tests/cli: prints one JSON object with what it saw.
//
// Environment: PLAYWRIGHT (the playwright-core folder), BROWSER (Chromium), URL (the page, with
// ?file=…), SHOTS (a folder for screenshots, optional), PLAYBACK (recordings, relative to the
// served folder; none: no execution is stepped), STEPS (how many turns to step).
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(import.meta.url);
const { chromium } = require(process.env.PLAYWRIGHT);
const page_url = new URL(process.env.URL);
const shots = process.env.SHOTS || "";
const result = { outside: [], steps: [] };

const browser = await chromium.launch({
  executablePath: process.env.BROWSER,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  // The page's own errors go to stderr, for the test's failure message.
  page.on("pageerror", (e) => console.error(`page error: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error") console.error(`console: ${m.text()}`); });
  // Every request the page makes: one outside the page's own origin is noted and refused.
  await page.route("**/*", (route) => {
    const url = new URL(route.request().url());
    if (url.origin !== page_url.origin) {
      result.outside.push(url.href);
      return route.abort();
    }
    return route.continue();
  });
  const shot = async (name) => {
    if (shots) await page.screenshot({ path: path.join(shots, name) });
  };
  await page.goto(page_url.href);
  await page.waitForSelector("body[data-ready]", { timeout: 30000 });
  result.ready = await page.getAttribute("body", "data-ready");
  await page.waitForFunction(() => window.dygram.drawn !== undefined, null, { timeout: 30000 });
  result.nodes = await page.locator("#diagram g.node").count();
  result.drawMs = await page.evaluate(() => window.dygram.lastDrawMs);
  result.file = await page.inputValue("#files");
  await shot("1-opened.png");

  if (process.env.TYPE_ERROR !== "no") {
    // A syntax error typed at the end of the text: the diagnostic, its line, and how long after
    // the last key it showed.
    const textarea = page.locator("#source");
    await textarea.click();
    await page.keyboard.press("Control+End");
    const lines = (await textarea.inputValue()).split("\n").length;
    await page.keyboard.type("\nstate ->", { delay: 5 });
    const before = Date.now();
    await page.keyboard.type(";");
    await page.waitForFunction(
      () => window.dygram.diagnostics.some((d) => d.severity === "error"), null, { polling: 5, timeout: 5000 });
    result.latencyMs = Date.now() - before;
    result.inPageCheckMs = await page.evaluate(() => window.dygram.lastCheckMs);
    result.errorLine = await page.evaluate(() => window.dygram.diagnostics.find((d) => d.severity === "error").line);
    result.expectedLine = lines + 1;
    result.listed = await page.locator("#diagnostics li.error").first().textContent();
    await shot("2-error.png");
    for (let i = 0; i < "\nstate ->;".length; i++) await page.keyboard.press("Backspace");
    await page.waitForFunction(
      () => !window.dygram.diagnostics.some((d) => d.severity === "error"), null, { polling: 5, timeout: 5000 });
    result.fixed = true;
    await shot("3-fixed.png");
    // Clicking a node selects its source.
    const first = page.locator("#diagram g.node").first();
    const name = await first.getAttribute("data-node");
    await first.click();
    result.clicked = name;
    result.selection = await page.evaluate(() => {
      const t = document.getElementById("source");
      return t.value.slice(t.selectionStart, t.selectionEnd);
    });
  }

  const steps = Number(process.env.STEPS || "0");
  if (steps > 0) {
    await page.fill("#playback", process.env.PLAYBACK || "");
    for (let n = 0; n < steps; n++) {
      const answered = page.waitForResponse((r) => r.url().endsWith("/api/step"));
      await page.click("#step");
      const response = await answered;
      const body = await response.json();
      await page.waitForFunction((turns) => document.getElementById("run-status").textContent.includes(`turn ${turns}`),
        body.report ? body.report.turns : 0, { timeout: 10000 }).catch(() => {});
      result.steps.push({
        status: response.status(),
        id: body.report && body.report.id,
        turns: body.report && body.report.turns,
        currentNodes: body.report && body.report.currentNodes,
        marked: await page.locator("#diagram g.node.current").evaluateAll((gs) => gs.map((g) => g.dataset.node)),
        message: body.message,
      });
      await shot(`4-step-${n + 1}.png`);
    }
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));
