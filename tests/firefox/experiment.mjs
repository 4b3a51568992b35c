// Base vs instruct in Firefox before any download (issue 32): the recorded comparison, drawn as
// Chromium draws it; the base's download where the Hub cannot be reached, in a plain sentence;
// a message typed in the mode kept across a reload. Nothing is downloaded and nothing runs on the
// GPU: this is the mode as a first visit meets it. Prints what each step gave, for
// tests/test_firefox_experiment_browser.py to compare.
//
//   node experiment.mjs '{"url", "profile", "shots"}'

import { args, open, launch, previewsWork, report, until } from "./firefox.mjs";

const { url, profile, shots } = args();
const MINUTES = 60_000;
const errors = [];
const out = { errors };
// A learner who chose Base vs instruct: the mode the page opens in (after firefox.mjs's own settings),
// and the device left to `auto`: nothing is computed, so the GPU's known-answer check (which a GPU
// asked for by name runs as the page boots) has nothing to guard here.
const IN_COMPARE = `try {
  localStorage.setItem('chatlens.prefs', '{"mode": "compare"}');
  localStorage.setItem('chatlens.backend', 'auto');
} catch {}`;
const CELLS = () => Object.fromEntries([...document.querySelectorAll("#compare-grid .compare-cell")].map((c) => [
  `${c.dataset.model}/${c.dataset.layout}`,
  { state: c.dataset.state, stop: c.querySelector("[data-stop]")?.dataset.stop ?? null, text: c.querySelector(".compare-reply")?.textContent ?? null,
    quote: c.querySelector("blockquote")?.textContent ?? null, says: c.querySelector(".compare-state")?.textContent ?? "" }]));
const browser = await launch({ profile });
try {
  const page = await open(browser, url, { errors, init: [IN_COMPARE] });
  out.boot = { state: await previewsWork(page) };
  await until(page, () => document.querySelector("#compare-recorded #compare-grid, #compare-grid[data-recorded]") !== null, 2 * MINUTES);
  out.recorded = {
    about: await page.evaluate(() => document.getElementById("compare-recorded").textContent),
    message: await page.evaluate(() => document.getElementById("compare-text").value),
    cells: await page.evaluate(CELLS),
  };
  if (shots) await page.screenshot({ path: `${shots}/firefox-experiment-recorded.png`, fullPage: true });

  // the base's download: its source is the Hub, which this machine cannot reach
  await page.click("#base-model summary");
  await until(page, () => document.getElementById("download-base") !== null, MINUTES);
  await page.click("#download-base");
  out.baseError = await until(page, () => document.getElementById("base-error")?.textContent, 5 * MINUTES);

  // a message typed, not sent: still there after a reload
  await page.evaluate(() => {
    const box = document.getElementById("compare-text");
    box.value = "Typed in Firefox, not sent";
    box.dispatchEvent(new Event("input", { bubbles: true }));
  });
  // saved after a pause in typing: until the page keeps it for the next visit (page/prefs.mjs DRAFTS_KEY)
  await until(page, () => {
    try {
      return JSON.parse(localStorage.getItem("chatlens.drafts")).compare === "Typed in Firefox, not sent";
    } catch {
      return false;
    }
  }, MINUTES);
  await page.reload();
  await previewsWork(page);
  out.afterReload = await until(page, () => document.getElementById("compare-text")?.value, MINUTES);
} catch (e) {
  out.failed = String(e?.stack ?? e);
} finally {
  await browser.close();
}
report(out);
