// The comparison (modes/compare.mjs, views/compare.mjs's pure parts, the store's transitions),
// played in node with a fake chatlens that answers as chatlens.compare does: the prompt first
// (onPrompt), then each reply's tokens (onToken), then the four; its signal stops all four.
import assert from "node:assert/strict";
import { test } from "node:test";
import { checkStored, compareMessage, compareView, estimateOf, recordedView, stopCompare } from "../../site/js/modes/compare.mjs";
import { LESSON_TEXT } from "../../site/js/modes/plain.mjs";
import { COMPARE_RELOADED, compareToSave, loadCompare, saveCompare } from "../../site/js/page/saved.mjs";
import { cellsOf, createStore } from "../../site/js/page/state.mjs";
import { baseNameOf, weightsOf } from "../../site/js/page/weights.mjs";
import { cellState, estimate, estimateSentence, firstStep, lessonFigure, missingModels, stopSentence, whoseWeights } from "../../site/js/views/compare.mjs";
import { LESSON_SHARES } from "../../site/js/views/plain.mjs";
import { percent } from "../../site/js/views/why.mjs";

// build.json's settings: the cap, top-k, and the comparison's models and layouts as Python has them
const settings = { compare_limit: 48, compare_top_k: 5, model_keys: ["instruct", "base"], layouts: ["plain", "template"] };
const PROMPT = { text: "Hi", plain_ids: [12], plain_tokens: ["Hi"], template_text: "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                 template_ids: [1, 4093, 198, 12, 2, 198, 1, 520, 198], template_tokens: ["<|im_start|>", "user", "\n", "Hi", "<|im_end|>", "\n", "<|im_start|>", "assistant", "\n"],
                 special_ids: [1, 2] };
const ORDER = [["instruct", "plain"], ["instruct", "template"], ["base", "plain"], ["base", "template"]];

/** A fake chatlens. Each reply writes `script[model][layout]` (tokens), one at a time, each after
 * `gate()` resolves; a stop (the signal) ends the reply under way and the ones after it. */
function fakeApi({ stored = { instruct: true, base: true }, script = null, gate = () => Promise.resolve(), error = null, onCell = () => {} } = {}) {
  const calls = [];
  const tok = (id, text) => ({ id, text, token: text, bytes: "" });
  const plan = script ?? Object.fromEntries(["instruct", "base"].map((m) => [m, { plain: [tok(7, "A"), tok(8, "B")], template: [tok(9, "C")] }]));
  const api = {
    settings,
    calls,
    source: { origin: "mirror", manifest: { gguf: "SmolLM2-135M-Instruct-Q4_1.gguf" }, label: "local mirror" },
    model: null,
    downloads: {
      status: async () => ({ complete: stored.instruct }),
      base: async () => (stored.base === "error" ? { error: "no base here" } : { source: { label: "a stand-in", manifest: { stand_in: true } }, status: { complete: stored.base } }),
    },
    async compare(args, { onToken, onCellEnd, onPrompt, onProgress, signal }) {
      calls.push(["compare", args, signal]);
      if (error) throw error;
      onPrompt(PROMPT);
      const out = { prompt: PROMPT, max_tokens: args.maxTokens, top_k: args.topK, eos_id: 2 };
      let stopped = false;
      for (const [model, layout] of ORDER) {
        const cell = { reply_ids: [], reply_tokens: [], reply_text: "", stop_reason: "end_turn", top_k: [[[3, 2, 0.6], [4, 1, 0.4]]], top_k_tokens: [["x", "y"]],
                       backend: "webgpu: fake", computed_tokens: 1 };
        if (!stopped) onProgress?.({ read: 0, of: 9, ms: 1, parts: 0 }); // each reply reads its prompt first
        for (const t of stopped ? [] : plan[model][layout]) {
          await gate();
          if (signal.aborted) {
            stopped = true;
            break;
          }
          onToken({ model, layout, token: t });
          cell.reply_ids.push(t.id), cell.reply_tokens.push(t.token), (cell.reply_text += t.text);
          if (cell.reply_ids.length === plan[model][layout].length) onCellEnd({ model, layout, stop_reason: "end_turn" }); // the worker's cell_end
          onCell(model, layout);
        }
        if (stopped) {
          cell.stop_reason = "stopped";
          if (!cell.reply_ids.length) Object.assign(cell, { backend: null, computed_tokens: 0 }); // never ran
        }
        (out[model] ??= {})[layout] = cell;
      }
      return out;
    },
  };
  return api;
}

const pageOf = (api) => {
  const store = createStore();
  store.settingsRead(api.settings);
  return { api, store, state: store.state };
};

test("the store: the comparison's fields are declared, a run streams into its cells and ends", () => {
  const store = createStore();
  store.settingsRead(settings);
  const seen = [];
  store.subscribe((c) => seen.push(c.type));
  assert.throws(() => store.state.compare.running, /no field running/);
  const run = store.compareStarted("Hi", null);
  assert.deepEqual(cellsOf(run).map((c) => [c.model, c.layout]), ORDER); // the order Python computes them in
  assert.equal(store.state.writing, true);
  store.comparePrompt(run, PROMPT);
  const cell = run.cells.base.template;
  store.cellBegun(run, cell);
  store.tokenArrived(cell, { id: 5, text: "Hel", token: "Hel", bytes: "48656c" });
  store.tokenArrived(cell, { id: 6, text: "lo", token: "lo", bytes: "6c6f" });
  assert.deepEqual([cell.streaming.reply_text, cell.streaming.reply_ids], ["Hello", [5, 6]]);
  assert.equal(run.cells.instruct.plain.streaming, null); // not begun: waiting
  const answer = { reply_ids: [5, 6], reply_text: "Hello", stop_reason: "max_tokens" };
  store.compareEnded(run, { prompt: PROMPT, instruct: {}, base: { template: answer } });
  assert.deepEqual([cell.answer, cell.streaming], [answer, null]);
  assert.equal(store.state.writing, false);
  assert.deepEqual(seen, ["compare", "compare", "compare", "token", "token", "compare"]);
});

test("the view's sentences: why each stopped, the first step's candidates", () => {
  assert.match(stopSentence("base", { reply_ids: new Array(48).fill(1), stop_reason: "max_tokens" }, 48), /never wrote <\|im_end\|>.*cap of 48/);
  assert.match(stopSentence("instruct", { reply_ids: [2], stop_reason: "end_turn" }, 48), /first token was <\|im_end\|>/);
  assert.match(stopSentence("instruct", { reply_ids: [5, 6, 2], stop_reason: "end_turn" }, 48), /after 3 tokens/);
  assert.match(stopSentence("base", { reply_ids: [5], stop_reason: "stopped" }, 48), /Stopped after 1 token,/);
  const cell = { top_k: [[[2, 9.1, 0.7312], [504, 7.2, 0.1]]], top_k_tokens: [["<|im_end|>", "The"]] };
  assert.deepEqual(firstStep(cell), [{ id: 2, token: "<|im_end|>", p: 0.7312, percent: percent(0.7312) },
                                     { id: 504, token: "The", p: 0.1, percent: percent(0.1) }]);
  assert.deepEqual(firstStep({ top_k: null }), []);
});

test("the lesson's figures beside this copy's: said only for the lesson's text, with why they differ", () => {
  const copy = whoseWeights("instruct", { instruct: weightsOf({ origin: "mirror", manifest: { gguf: "x-Q4_1.gguf" } }) });
  assert.equal(copy.kind, "copy");
  assert.match(copy.says, /4-bit copy of the weights \(Q4_1\)/);
  const want = LESSON_SHARES.plain;
  const cell = { reply_ids: [2], stop_reason: "end_turn", top_k: [[[2, 9, 0.61], [504, 7, 0.2]]], top_k_tokens: [[want.token, "The"]] };
  const f = lessonFigure("instruct", "plain", cell, { lesson: true, weights: copy, cap: 48 });
  assert.ok(f.lesson.includes(`${want.percent}%`) && f.lesson.includes(want.token));
  assert.ok(f.here.includes(percent(0.61)) && f.here.includes("first"));
  assert.match(f.differs, /4-bit copy/);
  const same = { ...cell, top_k: [[[2, 9, want.percent / 100], [504, 7, 0.2]]] };
  assert.equal(lessonFigure("instruct", "plain", same, { lesson: true, weights: copy, cap: 48 }).differs, null);
  assert.equal(lessonFigure("instruct", "plain", cell, { lesson: false, weights: copy, cap: 48 }), null);
  // the chat template's figure is the other token's
  const tpl = lessonFigure("instruct", "template", cell, { lesson: true, weights: copy, cap: 48 });
  assert.ok(tpl.lesson.includes(`${LESSON_SHARES.chat.percent}%`) && tpl.here.includes("ranked 2"));
  // the base: the lesson says it never ends; a stand-in says so when it does
  const standIn = whoseWeights("base", { base: baseNameOf({ origin: "mirror", label: "local mirror of a stand-in", manifest: { stand_in: true } }) });
  assert.equal(standIn.kind, "stand-in");
  const ran = lessonFigure("base", "template", { reply_ids: new Array(48).fill(1), stop_reason: "max_tokens" }, { lesson: true, weights: standIn, cap: 48 });
  assert.match(ran.lesson, /cap of 48/);
  assert.equal(ran.differs, null);
  const ended = lessonFigure("base", "template", { reply_ids: [1, 2], stop_reason: "end_turn" }, { lesson: true, weights: standIn, cap: 48 });
  assert.match(ended.differs, /stand-in/);
  // on plain text the lesson gives no figure: the original base's cell says nothing, a stand-in's
  // that ends the turn there says what it is, as its other cell does (issue 32.2)
  const original = whoseWeights("base", { base: baseNameOf({ origin: "hub" }) });
  assert.equal(lessonFigure("base", "plain", cell, { lesson: true, weights: original, cap: 48 }), null);
  assert.match(lessonFigure("base", "plain", cell, { lesson: true, weights: standIn, cap: 48 }).differs, /stand-in.*not SmolLM2-135M's weights/);
});

test("before the store and the source have said (a reload's first draw), nothing is named wrongly", () => {
  // the instruct's source not known yet: no sentence on its weights, not “an address you gave”
  const unknown = whoseWeights("instruct", { instruct: null });
  assert.equal(unknown.says, null);
  const cell = { reply_ids: [2], stop_reason: "end_turn", top_k: [[[2, 9, 0.61]]], top_k_tokens: [[LESSON_SHARES.plain.token]] };
  assert.equal(lessonFigure("instruct", "plain", cell, { lesson: true, weights: unknown, cap: 48 }).differs, null);
  const store = createStore();
  store.settingsRead(settings);
  const view = compareView({ api: { settings, source: null }, state: store.state });
  assert.equal(view.weights.instruct.says, null);
  assert.equal(view.names.base.kind, "unknown"); // drawn again once the store names it (modes/compare.mjs drawAsk)
});

test("a missing model is asked for, and nothing is run without it", async () => {
  assert.deepEqual(missingModels({ instruct: true, base: true }), []);
  assert.deepEqual(missingModels({ instruct: null, base: null }), []); // unknown: tried, its error shown
  for (const stored of [{ instruct: true, base: false }, { instruct: false, base: true }]) {
    const api = fakeApi({ stored });
    const page = pageOf(api);
    assert.equal(await compareMessage(page, "Hi"), null);
    assert.deepEqual(api.calls, []);
    const missing = compareView(page).missing;
    assert.deepEqual(missing.map((m) => m.model), Object.keys(stored).filter((k) => !stored[k]));
    assert.equal(page.state.writing, false);
  }
  // the store cannot say (no base in this build): the comparison is tried and its error shown
  const api = fakeApi({ stored: { instruct: true, base: "error" }, error: new Error("the base model is not stored") });
  const page = pageOf(api);
  const run = await compareMessage(page, "Hi");
  assert.equal(run.error, "the base model is not stored");
  assert.equal(page.state.writing, false);
});

test("a comparison: the settings' cap and top-k, the prompt before any token, four cells filled", async () => {
  const api = fakeApi();
  const page = pageOf(api);
  const order = [];
  page.store.subscribe((c) => order.push(c.type === "compare" ? c.what : c.type));
  const run = await compareMessage(page, LESSON_TEXT);
  assert.deepEqual(api.calls[0][1], { text: LESSON_TEXT, maxTokens: settings.compare_limit, topK: settings.compare_top_k });
  assert.deepEqual(order.slice(0, 3), ["compare-stored", "started", "prompt"]);
  assert.ok(order.indexOf("token") > order.indexOf("prompt"));
  for (const [m, l] of ORDER) {
    const c = run.cells[m][l];
    assert.equal(c.answer.reply_text, api.calls.length && c.answer.reply_text);
    assert.deepEqual(c.answer.reply_ids, [7, 8, 9].filter((id) => (l === "plain" ? id < 9 : id === 9)));
  }
  const view = compareView(page);
  assert.equal(view.lesson, true);
  assert.equal(view.weights.base.kind, "stand-in"); // the fake's base says it is one
  assert.equal(page.state.writing, false);
});

test("Stop ends all four; a new message stops the old one and only the new is drawn", async () => {
  let release = [];
  const gate = () => new Promise((r) => release.push(r));
  const step = async () => {
    while (!release.length) await new Promise((r) => setImmediate(r));
    release.shift()();
    await new Promise((r) => setImmediate(r));
  };
  const api = fakeApi({ gate });
  const page = pageOf(api);
  const first = compareMessage(page, "one");
  await step(); // one token of the first reply
  stopCompare(page);
  await step();
  const run = await first;
  assert.ok(api.calls[0][2].aborted);
  assert.deepEqual(ORDER.map(([m, l]) => run.cells[m][l].answer.stop_reason), ["stopped", "stopped", "stopped", "stopped"]);
  assert.equal(run.cells.instruct.plain.answer.reply_text, "A");
  assert.equal(run.stopped, "you pressed Stop"); // said above the four
  // the three a stop kept from starting never ran, and say so
  assert.deepEqual(ORDER.map(([m, l]) => cellState(run.cells[m][l], false)), ["ended", "never-ran", "never-ran", "never-ran"]);
  assert.match(stopSentence("base", run.cells.base.plain.answer, 48, run.stopped), /^Never ran: .*stopped before this reply's turn \(you pressed Stop\)/);
  assert.equal(page.state.writing, false);

  let oldDone = false;
  const a = compareMessage(page, "old").then((r) => ((oldDone = true), r));
  await step();
  const b = compareMessage(page, "new");
  while (api.calls.length < 3) await step(); // the new one starts once the store has answered
  assert.ok(api.calls[1][2].aborted, "the old comparison was stopped");
  while (!oldDone) await step(); // its reply under way sees the stop at its next step
  const old = await a;
  assert.notEqual(page.state.compare.run, old);
  assert.equal(page.state.writing, true); // the old one ending does not end the new one's writing
  while (!page.state.compare.run.answer) await step();
  const now = await b;
  assert.equal(page.state.compare.run, now);
  assert.equal(now.text, "new");
  assert.equal(page.state.writing, false);
});

test("which models are stored: the worker's instruct counts, a store that cannot say is unknown", async () => {
  const api = fakeApi({ stored: { instruct: false, base: "error" } });
  api.model = { backend: "webgpu" };
  const stored = await checkStored(pageOf(api));
  assert.deepEqual([stored.instruct, stored.base], [true, null]);
});
