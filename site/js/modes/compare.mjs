// The comparison: the lesson's experiment as its own mode. One message goes to the base model and
// the instruct model, each in two layouts (plain text, the chat template), through
// chatlens.compare: the same ids, greedy, the same cap. Its own mode, not a part of Plain text:
// the 2x2 needs the panel's whole width, it needs both models stored (Plain text needs only the
// instruct), and its one Stop ends all four.
//
// The logic (which models are stored, a run, Stop, a new message stopping the old) goes through
// the store and the API only: tests/page/compare.test.mjs plays it with a fake API, no DOM.

import { LESSON_TEXT } from "./plain.mjs";
import { appendToken, missingModels, renderCompare, renderMissing, whoseWeights } from "../views/compare.mjs";
import { $, debounce } from "../views/dom.mjs";
import { weightsOf } from "../page/weights.mjs";

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
  state.compare.run?.controller?.abort();
  const controller = new AbortController();
  const run = store.compareStarted(text, controller);
  const limits = { text, maxTokens: api.settings.compare_limit, topK: api.settings.compare_top_k };
  try {
    const answer = await api.compare(limits, {
      signal: controller.signal,
      onPrompt: (prompt) => store.comparePrompt(run, prompt),
      onToken: (t) => store.compareToken(run, t),
    });
    store.compareEnded(run, answer);
  } catch (e) {
    store.compareFailed(run, e.message);
  }
  return run;
}

/** Stop: the four end with what they have. Resolves once they have (the run's controller goes). */
export function stopCompare(page) {
  const run = page.state.compare.run;
  if (!run?.controller) return Promise.resolve();
  const ended = new Promise((resolve) => {
    const off = page.store.subscribe(() => {
      if (run.controller) return;
      off();
      resolve();
    });
  });
  run.controller.abort();
  return ended;
}

/** The view's inputs from the store and the API. */
export function compareView(page) {
  const { api, state } = page;
  const run = state.compare.run;
  return {
    run,
    missing: missingModels(state.compare.stored),
    limit: api.settings?.compare_limit,
    lesson: (run?.text ?? "").trim() === LESSON_TEXT,
    weights: { instruct: whoseWeights("instruct", { instruct: weightsOf(api.source) }),
               base: whoseWeights("base", { base: state.compare.stored.baseSource }) },
    eosId: run?.answer?.eos_id,
  };
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

/** Draw the comparison's panel and its ask (the subscriber calls it on "compare"). */
export function drawCompare(page) {
  if (page.state.mode !== "compare") return;
  renderCompare($("reads"), compareView(page));
  drawAsk(page);
  $("compare-stop").hidden = !page.state.compare.run?.controller;
}

/** Only the ask for a missing model (on "compare-stored": the store was read again, and the 2x2
 * streaming below is left as it is). */
export function drawAsk(page) {
  if (page.state.mode !== "compare") return;
  renderMissing($("compare-ask"), missingModels(page.state.compare.stored), getModel);
}

/** A token of one of the four: appended where it is drawn (the whole panel only when it is not). */
export function compareTokenDrawn(page, change) {
  if (page.state.mode !== "compare" || !change.current) return;
  const c = change.run.cells[change.model][change.layout];
  const special = new Set(change.run.prompt?.special_ids);
  if (!appendToken($("reads"), change, c.ids.length, special)) drawCompare(page);
}

/** The mode shown: drawn, and the store read again (a model may have come or gone). */
export function showCompare(page) {
  drawCompare(page);
  return checkStored(page);
}

/** Wire the mode's controls (once). */
export function setUpCompare(page) {
  $("compare-text").value = LESSON_TEXT;
  const send = () => compareMessage(page, $("compare-text").value);
  $("compare-run").addEventListener("click", send);
  $("compare-text").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  $("compare-stop").addEventListener("click", () => stopCompare(page));
  // A model downloaded or deleted in the model box: it redraws its parts, and the comparison
  // reads the store again (it asks for a model only while one is missing).
  const recheck = debounce(() => page.state.mode === "compare" && checkStored(page), 200);
  const seen = new MutationObserver(recheck);
  for (const id of ["base-body", "model-body"]) if ($(id)) seen.observe($(id), { childList: true });
}
