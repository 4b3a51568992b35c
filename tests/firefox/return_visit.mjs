// The learner comes back to Firefox with the server gone: the service worker serves the page,
// the model is read from the store (no download), previews and a reply work offline; then the
// same with `auto`, which passes an emulated adapter (Firefox's fallback one here) over.
//
//   node return_visit.mjs '{"url", "profile", "shots", "system", "messages", "window", "maxTokens"}'

import { args, job, launch, open, previewsWork, report, until } from "./firefox.mjs";

const { url, profile, shots, system, messages, window: win, maxTokens } = args();
const MINUTES = 60_000;
const errors = [];
const out = { errors };
const browser = await launch({ profile });
try {
  const page = await open(browser, url, { errors });
  out.boot = { state: await previewsWork(page), source: await page.evaluate(() => chatlens.source?.origin ?? null) };
  out.stored = await job(page, () => chatlens.ready.then((r) => r.stored), null, MINUTES);
  out.preview = await job(page, (a) => chatlens.preview(a), { system, messages, window: win }, MINUTES);
  out.model = await job(page, () => chatlens.modelReady, null, 10 * MINUTES);
  out.check = await job(page, () => chatlens.check(), null, MINUTES); // the first visit's, kept: not run again
  out.reply = await job(page, (a) => chatlens.run(a), { system, messages, window: win, maxTokens }, 10 * MINUTES);
  if (shots) await page.screenshot({ path: `${shots}/firefox-offline.png`, fullPage: true });

  // With `auto`: on an emulated adapter (Firefox's fallback one here) the page passes it over for
  // NumPy (which cannot be fetched offline) and offers the GPU by name instead; on a real GPU it
  // takes it (the test applies chatlens.device's rule to the first visit's adapter).
  await page.goto(`${url}?backend=auto`);
  await until(page, () => window.chatlens !== undefined, MINUTES);
  await previewsWork(page);
  out.auto = { backend: await page.evaluate(() => chatlens.backend),
               model: await until(page, () => (chatlens.model?.error || chatlens.model?.backend) ? chatlens.model : null,
                                   10 * MINUTES) };
} catch (e) {
  out.failed = String(e?.stack ?? e);
} finally {
  await browser.close();
}
report(out);
