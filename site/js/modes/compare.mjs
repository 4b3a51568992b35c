// The comparison: the lesson's experiment as its own mode. One message goes to the base model and
// the instruct model, each in two layouts (plain text, the chat template), through
// chatlens.compare: the same ids, greedy, the same cap. Its own mode, not a part of Plain text:
// the 2x2 needs the panel's whole width, it needs both models stored (Plain text needs only the
// instruct), and its one Stop ends all four. Before both are stored, a recorded comparison
// (site/recorded-compare.json, written by `python -m chatlens record`) shows what it gives.
//
// The four are computed one after another (cellsOf's order: build.json's model_keys, then its
// layouts, as Python computes them), so a cell's state follows from the stream: the prompt's
// progress is the reply under way's (the first that has not ended), and the worker says when a
// reply ends and why (onCellEnd: its end of turn, or the cap). Its result shows the moment it
// ends; the answer, once all four have, brings each one's candidates.
//
// The logic (which models are stored, a run, Stop, a new message stopping the old, a reload)
// goes through the store and the API only: tests/page/compare.test.mjs plays it with a fake API,
// no DOM.

import { LESSON_TEXT } from "../views/lessonfigures.mjs";
import { cellsOf } from "../page/state.mjs";
import { estimate, estimateSentence, missingModels, renderCell, renderCellState, renderCompare, renderMissing,
         renderPrompt, whoseWeights } from "../views/compare.mjs";
import { $, debounce, keepFocus } from "../views/dom.mjs";
import { replyGrew } from "../views/reply.mjs";
import { baseNameOf, weightsOf } from "../page/weights.mjs";

/** Which models the comparison can read, as the store and the worker say: {instruct, base,
 * baseSource}; each true, false (not stored: the view asks for it) or null (the store cannot
 * say, so the comparison is tried and its error shown). The instruct counts as there when the
 * worker already computes replies with it. */
export async function checkStored(page) {
  const { api, store } = page;
  let instruct = null;
  let base = null;
  let baseSource = null;
  try {
    instruct = Boolean(api.model?.backend) || Boolean((await api.downloads.status())?.complete);
  } catch {
    instruct = api.model?.backend ? true : null;
  }
  try {
    const got = await api.downloads.base();
    if (!got.error) [base, baseSource] = [Boolean(got.status?.complete), got.source ?? null];
  } catch {
    // no store here: the comparison's own error says what is missing
  }
  store.compareStored({ instruct, base, baseSource });
  return page.state.compare.stored;
}

/** The reply under way: the first of the four, in the order they are computed, that has not ended. */
const underWay = (run) => cellsOf(run).find(({ cell }) => !cell.answer && !cell.streaming?.stop_reason) ?? null;

// Each of the four's clock, for the estimate (performance.now(): when its prompt began to be read,
// when its first and its last token came), beside the run's cells, which the clock outlives not.
const clocks = new WeakMap(); // a run's cell -> {begun, first, last}
const now = () => globalThis.performance?.now() ?? Date.now();
function clockOf(cell) {
  if (!clocks.has(cell)) clocks.set(cell, { begun: null, first: null, last: null });
  return clocks.get(cell);
}

/** A cell begins: its prompt is read from now. */
function begin(page, run, cell) {
  clockOf(cell).begun ??= now();
  page.store.cellBegun(run, cell);
}

/** A token of one of the four. */
function cellToken(page, run, { model, layout, token }) {
  const cell = run.cells[model]?.[layout];
  if (!cell) return;
  begin(page, run, cell);
  const clock = clockOf(cell);
  clock.last = now();
  clock.first ??= clock.last;
  page.store.tokenArrived(cell, token);
}

/** One of the four ended, as the worker says: {model, layout, stop_reason}. */
function cellEnd(page, run, { model, layout, stop_reason }) {
  const cell = run.cells[model]?.[layout];
  if (cell) page.store.cellEnded(run, cell, stop_reason);
}

/** The prompt's progress: the reply under way's. */
function cellProgress(page, run, progress) {
  const at = underWay(run);
  if (!at) return;
  begin(page, run, at.cell);
  page.store.progressed(at.cell, progress);
}

/** Send `text` to the four: the comparison before it (if any) stops first. Resolves with the
 * run once it has ended (however), or null when nothing was started (no text, a model missing,
 * or another mode's reply being written). */
export async function compareMessage(page, text) {
  const { api, state, store } = page;
  if (!text.trim()) return null;
  if (state.writing && !state.compare.run?.controller) return null; // another mode's reply: one at a time
  const stored = await checkStored(page);
  if (stored.instruct === false || stored.base === false) return null; // the view asks for the missing one
  // A new message stops the old ones here, and only here: the API and the worker would have the
  // new comparison wait for the old to end.
  const before = state.compare.run;
  if (before?.controller) {
    store.compareStopping(before, "a new message replaced it");
    before.controller.abort();
  }
  const controller = new AbortController();
  const run = store.compareStarted(text, controller);
  const limits = { text, maxTokens: api.settings.compare_limit, topK: api.settings.compare_top_k };
  try {
    const answer = await api.compare(limits, {
      signal: controller.signal,
      onPrompt: (prompt) => {
        store.comparePrompt(run, prompt);
        if (underWay(run)) begin(page, run, underWay(run).cell); // the first reply reads it now
      },
      onToken: (t) => cellToken(page, run, t),
      onCellEnd: (c) => cellEnd(page, run, c),
      onProgress: (p) => cellProgress(page, run, p),
    });
    store.compareEnded(run, answer);
  } catch (e) {
    store.compareFailed(run, e.message);
  }
  return run;
}

/** Stop: the four end with what they have; `why` (a sentence) is said above them. Resolves once
 * they have (the run's controller goes). */
export function stopCompare(page, why = "you pressed Stop") {
  const run = page.state.compare.run;
  if (!run?.controller) return Promise.resolve();
  const ended = new Promise((resolve) => {
    const off = page.store.subscribe(() => {
      if (run.controller) return;
      off();
      resolve();
    });
  });
  page.store.compareStopping(run, why);
  run.controller.abort();
  return ended;
}

/** The recorded comparison to show for `text` (none run yet, or a model missing): the file's
 * comparison of that message, else of the lesson's; null when the file has none. */
export function recordedView(page, text, onPick = () => {}) {
  const doc = page.state.compare.recorded;
  if (!doc?.comparisons?.length) return null;
  const find = (t) => doc.comparisons.find((c) => c.prompt?.text === t.trim());
  const compared = find(text) ?? find(LESSON_TEXT) ?? doc.comparisons[0];
  const instruct = weightsOf({ model: doc.models?.instruct ?? {} });
  const label = doc.models?.instruct ?? {};
  const from = label.source ? `, ${label.source.replace(/==[\w.]+$/, "")}` : "";
  const bits = instruct.bits ? `a ${instruct.bits}-bit copy` : "a copy";
  const about = `Recorded ${doc.date ?? ""} with greedy decoding, up to ${compared.max_tokens} tokens a reply: the instruct model's half ` +
    `from ${bits} of SmolLM2-135M-Instruct, this site's (${label.file ?? "its file"}${from}), not the original bf16 weights the lesson used. ` +
    "Once both models are stored, “Send to both models” runs any message here.";
  const base = doc.models?.base?.recorded === false ? { kind: "unknown", name: "SmolLM2-135M", says: "SmolLM2-135M, not recorded here" }
    : baseNameOf(doc.models?.base?.stand_in ? { origin: "mirror", manifest: { stand_in: true } } : { origin: "hub" });
  return {
    compared,
    about,
    lesson: compared.prompt?.text === LESSON_TEXT,
    weights: { instruct: whoseWeights("instruct", { instruct }), base: whoseWeights("base", { base }) },
    names: { base },
    others: doc.comparisons.filter((c) => c !== compared).map((c) => ({ text: c.prompt.text, pick: () => onPick(c.prompt.text) })),
  };
}

/** The view's inputs from the store and the API. */
export function compareView(page) {
  const { api, state } = page;
  const run = state.compare.run;
  const settings = api.settings ?? {};
  const base = baseNameOf(state.compare.stored.baseSource, api.build?.models?.base);
  const keys = settings.model_keys ?? [];
  const layouts = settings.layouts ?? [];
  const pick = (text) => {
    const box = globalThis.document?.getElementById("compare-text");
    if (box) box.value = text;
    box?.dispatchEvent(new Event("input")); // kept for the next visit, as a message typed there is
    drawCompare(page);
  };
  return {
    run,
    recorded: run ? null : recordedView(page, globalThis.document?.getElementById("compare-text")?.value ?? LESSON_TEXT, pick),
    missing: missingModels(state.compare.stored, base),
    limit: settings.compare_limit,
    lesson: (run?.text ?? "").trim() === LESSON_TEXT,
    // the instruct's weights once its source is known (until then nothing is said of them)
    weights: { instruct: whoseWeights("instruct", { instruct: api.source ? weightsOf(api.source) : null }), base: whoseWeights("base", { base }) },
    names: { base },
    eosId: run?.answer?.eos_id,
    why: state.why ? { gap: state.nearTieGap } : null,
    hooks: page.replyHooks ?? {},
    order: keys.flatMap((model) => layouts.map((layout) => ({ model, layout }))),
  };
}

/** How long the rest of the run takes, from what each reply took so far (a sentence: views/compare.mjs
 * estimate), or null when nothing runs. */
export function estimateOf(page, at = now()) {
  const run = page.state.compare.run;
  if (!run?.controller) return null;
  const cap = page.api.settings?.compare_limit ?? 48;
  const cells = cellsOf(run).map(({ cell }) => {
    const reply = cell.answer ?? cell.streaming;
    return { written: reply?.reply_ids.length ?? 0, ended: Boolean(reply?.stop_reason), ...(clocks.get(cell) ?? { begun: null, first: null, last: null }) };
  });
  return estimateSentence(estimate({ cells, now: at, cap }), cap);
}

// -- the DOM -------------------------------------------------------------------------------------------

/** Lead to where a missing model is downloaded, with its size and consent: the model box's base
 * section, or its own Download. */
function getModel(model) {
  if (model === "base") {
    $("base-model").open = true;
    $("base-model").scrollIntoView({ block: "start" });
    ($("download-base") || $("base-model").querySelector("summary")).focus();
    return;
  }
  $("model-box").scrollIntoView({ block: "start" });
  ($("download") || $("model-title")).focus?.();
}

/** The mode's lines outside the panel: the Stop button, the estimate, the base's name. */
function drawControls(page) {
  const run = page.state.compare.run;
  keepFocus($("compare-stop"), !run?.controller, $("compare-text")); // Stop pressed: back to the message
  keepFocus($("compare-run"), Boolean(page.state.writing && !run?.controller), $("compare-text"), "disabled");
  const line = estimateOf(page);
  const shown = $("compare-estimate"); // above the 2x2, where the learner looks while it fills
  if (shown && shown.textContent !== (line ?? "")) shown.textContent = line ?? "";
  if (shown) shown.hidden = !line;
  const base = compareView(page).names.base;
  $("compare-base-name").textContent = base.kind === "unknown" ? "SmolLM2-135M (the base model, pretraining only)" : base.says;
}

/** What the 2x2 names: the base (from what its files are) and whose weights each model's are.
 * Known only once the store and the source have said (after a reload, after the first draw). */
const namesOf = (view) => JSON.stringify([view.names.base, view.weights]);

/** Draw the comparison's panel and its ask (the subscriber calls it on "compare"). */
export function drawCompare(page) {
  if (page.state.mode !== "compare") return;
  const view = compareView(page);
  renderCompare($("reads"), view);
  $("reads").dataset.compareNames = namesOf(view);
  drawAsk(page);
  drawControls(page);
}

/** The ask for a missing model (on "compare-stored": the store was read again); the 2x2 below
 * is drawn again only when what it names changed (the base's name, whose weights: known once
 * the store and the source have said), else left streaming as it is. */
export function drawAsk(page) {
  if (page.state.mode !== "compare") return;
  const view = compareView(page);
  const drawn = $("reads").dataset.compareNames;
  if (drawn !== undefined && drawn !== namesOf(view)) return drawCompare(page);
  renderMissing($("compare-ask"), view.missing, getModel);
  drawControls(page);
}

/** What a change of the store redraws of the comparison: a token appends to its cell's reply
 * view and moves its state line and the estimate; a cell begun or ended is drawn again alone;
 * the prompt goes below the 2x2; anything else draws it all. */
export function compareChanged(page, change) {
  if (page.state.mode !== "compare" || change.current === false) return;
  const reads = $("reads");
  const view = compareView(page);
  const where = (cell) => cellsOf(change.run ?? page.state.compare.run).find((c) => c.cell === cell);
  if (change.type === "token" || change.type === "progress") {
    const at = where(change.at);
    const drawn = at && (change.type === "progress" || replyGrew(change.reply)) && renderCellState(reads, view, at.model, at.layout);
    if (!drawn && !(at && renderCell(reads, view, at.model, at.layout))) drawCompare(page);
    return drawControls(page);
  }
  if (change.what === "begun" || change.what === "ended") {
    const at = where(change.cell);
    if (!(at && renderCell(reads, view, at.model, at.layout))) drawCompare(page);
    return drawControls(page);
  }
  if (change.what === "prompt" && reads.querySelector("#compare-grid .compare-cell") && renderPrompt(reads, change.run.prompt)) return drawControls(page);
  drawCompare(page);
  // a comparison started from the message box: the 2x2 it fills is what the learner waits for
  if (change.what === "started") globalThis.requestAnimationFrame?.(toGrid);
}

/** The mode shown: drawn, and the store read again (a model may have come or gone). */
export function showCompare(page) {
  drawCompare(page);
  loadRecordedComparison(page);
  if (!page.api.source) page.api.sourceReady?.then(() => drawAsk(page), () => {}); // the instruct's weights named
  return checkStored(page);
}

/** site/recorded-compare.json, read once. */
async function loadRecordedComparison(page, url = new URL("../../recorded-compare.json", import.meta.url)) {
  const { state, store } = page;
  if (state.compare.recorded || state.compare.recordedError) return;
  try {
    const r = await fetch(url);
    if (!r.ok) throw new Error(`no recorded comparison (${new URL(url).pathname}: HTTP ${r.status})`);
    store.compareRecordedLoaded(await r.json());
  } catch (e) {
    store.compareRecordedLoaded(null, e.message);
  }
}

/** Bring the 2x2 into view once a comparison starts (the message box sits above it). */
function toGrid() {
  const target = $("compare-grid") ?? $("reads");
  target?.scrollIntoView?.({ block: "start", behavior: "smooth" });
}

/** Wire the mode's controls (once). `draft`: the message kept from the last visit. */
export function setUpCompare(page, { draft = null, onDraft = () => {} } = {}) {
  $("compare-text").value = draft ?? page.state.compare.run?.text ?? LESSON_TEXT;
  const send = () => compareMessage(page, $("compare-text").value);
  $("compare-run").addEventListener("click", send);
  $("compare-text").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  $("compare-text").addEventListener("input", debounce(() => {
    onDraft($("compare-text").value);
    if (!page.state.compare.run) drawCompare(page); // the recording of that message, if there is one
  }, 200));
  $("compare-stop").addEventListener("click", () => stopCompare(page));
  // A model downloaded or deleted in the model box: it redraws its parts, and the comparison
  // reads the store again (it asks for a model only while one is missing).
  const recheck = debounce(() => page.state.mode === "compare" && checkStored(page), 200);
  const seen = new MutationObserver(recheck);
  for (const id of ["base-body", "model-body"]) if ($(id)) seen.observe($(id), { childList: true });
}
