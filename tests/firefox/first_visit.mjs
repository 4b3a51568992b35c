// A learner's first visit in Firefox, with its default settings (nothing answers the storage
// prompt): the page boots and previews; Download stores the model while persist() is never
// answered; a forced WebGPU reply; a reply stopped after its first token; the site cached for
// offline use; the GPU's known-answer check, run as the page boots. Then, given a faulty test build
// (faulty: its URL and the query of the tiny model beside it), that site in the same browser: its
// check fails, the stored model is refused the GPU and writes no token, and a reload reads the kept
// result. Prints what each step gave, for tests/test_firefox_browser.py to compare.
//
//   node first_visit.mjs '{"url", "profile", "shots", "system", "messages", "window", "maxTokens", "faulty"?}'

import { args, job, launch, open, previewsWork, report, until } from "./firefox.mjs";

const { url, profile, shots, system, messages, window: win, maxTokens, faulty } = args();
const MINUTES = 60_000;
const errors = [];
const out = { errors };
const browser = await launch({ profile });
try {
  const page = await open(browser, url, { errors });
  out.boot = { state: await previewsWork(page) };
  out.preview = await job(page, (a) => chatlens.preview(a), { system, messages, window: win }, MINUTES);
  // The adapter, as the page's device rule reads it (site/js/worker/device.mjs): the test applies
  // chatlens.device's rule to it. (Firefox's only adapter here is a fallback (CPU) one, which
  // `auto` passes over: the page was asked for WebGPU by name, firefox.mjs.)
  out.adapter = await job(page, async () => {
    const a = await navigator.gpu?.requestAdapter();
    if (!a) return null;
    const info = a.info ?? {};
    return { fallback: info.isFallbackAdapter ?? a.isFallbackAdapter ?? false, vendor: info.vendor ?? "",
             architecture: info.architecture ?? "", device: info.device ?? "", description: info.description ?? "" };
  }, null, MINUTES);

  // Download, as a learner presses it; persist() waits on a prompt nobody answers.
  await page.click("#download");
  await until(page, () => document.querySelector("#model-body [data-stored='complete']") !== null, 10 * MINUTES);
  // The page's own request is still unanswered once the download has ended, and a while after.
  // (Asking again here would not do: Firefox then withdraws the first prompt, answering it false.)
  await new Promise((r) => setTimeout(r, 2000));
  out.download = {
    stored: await page.evaluate(() => chatlens.storedModels()),
    persistence: await page.evaluate(() => document.getElementById("persistence")?.dataset.persistence ?? null),
    note: await page.evaluate(() => document.getElementById("persistence")?.textContent ?? null),
    persisted: await job(page, () => navigator.storage.persisted(), null, MINUTES),
  };
  if (shots) await page.screenshot({ path: `${shots}/firefox-stored.png`, fullPage: true });
  out.model = await job(page, () => chatlens.modelReady, null, 10 * MINUTES);
  out.check = await job(page, () => chatlens.check(), null, 10 * MINUTES);

  const run = (a) => {
    const streamed = [];
    const stopper = new AbortController();
    return chatlens.run(a.request, { signal: stopper.signal, onToken: (t) => {
      if (t.id >= 0 && streamed.push(t.id) === 1 && a.stopAtFirst) stopper.abort();
    } }).then((record) => ({ record, streamed }));
  };
  const request = { system, messages, window: win, maxTokens };
  out.reply = await job(page, run, { request }, 10 * MINUTES);
  // The same again, stopped as its first token arrives (its prompt is in the cache by now).
  out.stopped = await job(page, run, { request, stopAtFirst: true }, 10 * MINUTES);

  // The service worker has cached this build and controls the page: the next visit needs no server.
  await job(page, () => navigator.serviceWorker.ready.then(() => true), null, 2 * MINUTES);
  out.controlled = await until(page, () => Boolean(navigator.serviceWorker.controller), 2 * MINUTES);
  if (shots) await page.screenshot({ path: `${shots}/firefox-reply.png`, fullPage: true });
  if (faulty) out.faulty = await faultyVisit(page, faulty);
} catch (e) {
  out.failed = String(e?.stack ?? e);
} finally {
  await browser.close();
}
report(out);

/** The faulty test build (another origin: its own storage) in the same tab: the check fails, the
 * tiny model is refused the GPU, no token comes, and a reload reads the result kept. */
async function faultyVisit(page, { url, query }) {
  await page.goto(`${url}${query}`);
  await until(page, () => window.chatlens !== undefined, MINUTES);
  await previewsWork(page);
  const seen = {};
  seen.check = await job(page, () => chatlens.check(), null, 10 * MINUTES);
  seen.stored = await job(page, () => chatlens.downloadModel().then((s) => s.complete), null, 5 * MINUTES);
  seen.model = await until(page, () => chatlens.model, 5 * MINUTES);
  seen.reply = await job(page, (a) => {
    const tokens = [];
    return chatlens.run(a, { onToken: (t) => tokens.push(t.id) }).then(() => ({ tokens, error: null }),
                                                                        (e) => ({ tokens, error: e.message }));
  }, { messages: [{ role: "user", content: "Hi!" }], window: 256, maxTokens: 2 }, 5 * MINUTES);
  seen.box = await page.evaluate(() => document.getElementById("device-body")?.textContent ?? "");
  if (shots) await page.screenshot({ path: `${shots}/firefox-check-refused.png`, fullPage: true });
  await page.reload();
  await previewsWork(page);
  seen.again = await job(page, () => chatlens.check(), null, 5 * MINUTES);
  return seen;
}
