// Debian's firefox-esr, driven over WebDriver BiDi by the pinned puppeteer-core (package.json):
// Playwright needs its own Firefox build, which cannot be downloaded here. What the scripts
// beside this one share: launching the stock browser headless, opening the site as a returning
// learner (Live mode, WebGPU by name), polling for long work, and one JSON line of results.
//
// Each script is run by tests/test_firefox_browser.py as `node SCRIPT JSON-ARGS` and prints one
// JSON object on its last line; the test compares it with the command line and CPython.

import puppeteer from "puppeteer-core";

export const FIREFOX = process.env.CHATLENS_FIREFOX || "/usr/bin/firefox-esr";

// WebGPU on in Firefox 153 on Linux, and its blocklist ignored: its only adapter here is a
// fallback one (a CPU device), which `auto` rightly passes over, so the tests ask for WebGPU by
// name as a learner can. Nothing about storage is set: persist() asks the user, as it does by
// default (a headless browser never answers it).
const PREFS = { "dom.webgpu.enabled": true, "gfx.webgpu.ignore-blocklist": true };

// The same two settings webapp.py saves for Chromium before the page's own scripts run.
const RETURNING_LEARNER = `try {
  if (localStorage.getItem('chatlens.prefs') === null) localStorage.setItem('chatlens.prefs', '{"mode": "live"}');
  if (localStorage.getItem('chatlens.backend') === null) localStorage.setItem('chatlens.backend', 'webgpu');
} catch {}`;

/** The browser, headless, on `profile` (a folder kept between visits) or a fresh one. */
export async function launch({ profile, prefs = {} } = {}) {
  return puppeteer.launch({
    browser: "firefox", executablePath: FIREFOX, headless: true, userDataDir: profile,
    // BiDi calls give up after this: long work is polled (until()), never awaited in one call.
    protocolTimeout: 180_000, extraPrefsFirefox: { ...PREFS, ...prefs },
  });
}

/** A tab on `url`, its page errors and CSP violations collected in `errors`. */
export async function open(browser, url, { errors = [], init = [] } = {}) {
  const page = (await browser.pages())[0] ?? (await browser.newPage());
  await page.setViewport({ width: 1400, height: 1000 });
  for (const script of [RETURNING_LEARNER, ...init]) await page.evaluateOnNewDocument(script);
  page.on("pageerror", (e) => errors.push(String(e?.message ?? e)));
  page.on("console", (m) => {
    if (/Content[- ]Security[- ]Policy/.test(m.text())) errors.push(`CSP: ${m.text()}`);
  });
  await page.goto(url);
  await until(page, () => window.chatlens !== undefined, 60_000);
  return page;
}

/** Until `fn` (evaluated in the page) is truthy; its value (JSON: a DOM node comes back empty).
 * Polled: one long BiDi call would time out. */
export async function until(page, fn, ms, arg) {
  const end = Date.now() + ms;
  for (;;) {
    const value = await page.evaluate(fn, arg);
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${fn}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Until previews work (the text side is read); throws with the status if the page failed. */
export async function previewsWork(page, ms = 180_000) {
  const state = await until(page, () => ["text", "weights", "ready", "error"].includes(chatlens.status.state) && chatlens.status.state, ms);
  if (state === "error") throw new Error(`the page failed: ${JSON.stringify(await page.evaluate(() => chatlens.status))}`);
  return state;
}

/**
 * Start `fn(arg)` in the page (it may return a promise) and poll for its end: its value, or an
 * Error with its message. Each job's outcome waits in window.__jobs.
 */
export async function job(page, fn, arg, ms) {
  // One expression, evaluated by the browser's own channel (the page's CSP, which forbids eval,
  // does not apply to it): fn's source is the script's own, never user input.
  const id = await page.evaluate(`(() => {
    const jobs = (window.__jobs ??= []);
    const id = jobs.push({ done: false }) - 1;
    Promise.resolve().then(() => (${fn.toString()})(${JSON.stringify(arg ?? null)}))
      .then((value) => (jobs[id] = { done: true, value }), (e) => (jobs[id] = { done: true, error: \`\${e?.name}: \${e?.message ?? e}\` }));
    return id;
  })()`);
  const out = await until(page, (id) => window.__jobs[id].done && window.__jobs[id], ms, id);
  if (out.error) throw new Error(out.error);
  return out.value;
}

/** The scripts' arguments (one JSON object) and their one line of results. */
export const args = () => JSON.parse(process.argv[2] ?? "{}");
export const report = (result) => process.stdout.write(`${JSON.stringify(result)}\n`);
