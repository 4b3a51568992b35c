// modes/steps.mjs's pure part: where a reply lives and the request a step of it makes, and what
// is refused, said as a sentence. tests/test_inspect_browser.py plays the clicks on the page.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { inRange, noCandidates, noCause, recordRequest, refusal, stepName, whereOf } from "../../site/js/modes/steps.mjs";
import { branchRequest, inspectRequest, recordedRequest } from "../../site/js/page/step.mjs";
import { createStore, liveMessages } from "../../site/js/page/state.mjs";
import { toWire } from "../../site/js/page/protocol.mjs";

const settings = { reply_limit: 96, windows: [256, 512, 1024], compare_limit: 48, top_k: 10, near_tie_gap: 0.01 };
const recordOf = (system, replyIds, extra = {}) => ({
  prompt_ids: [1, 2, 3], prompt_tokens: ["<|im_start|>", "a", "b"], special_ids: [1], system, preset: null, window: 512,
  reserve: 96, max_tokens: 96, special_in_text: true, reply_ids: replyIds, reply_text: "x", reply_tokens: replyIds.map(String),
  stop_reason: "end_turn", top_k: replyIds.map((id) => [[id, 2, 0.6], [id + 1, 1, 0.3]]), ...extra,
});

/** A store with a live conversation of two answered turns. */
function live() {
  const store = createStore();
  const first = store.sent("Hi! My name is Priya.", "{}");
  store.read(first, recordOf("You are a pirate.", []));
  store.replied(first, recordOf("You are a pirate.", [10, 11]));
  const second = store.sent("What is my name?", "{}");
  store.read(second, recordOf("You are a pirate.", []));
  store.replied(second, recordOf("You are a pirate.", [20, 21, 22]));
  return { store, state: store.state, first, second };
}

test("a live turn's step: the messages before it and its own record's system, window and limits", () => {
  const { state, first, second } = live();
  const where = whereOf(state, second.record, { settings });
  assert.equal(where.kind, "live");
  assert.equal(where.turn, second);
  assert.equal(where.keep, null); // the last turn: a branch of it can be kept
  assert.deepEqual(where.args.messages, liveMessages(state, undefined).slice(0, 3));
  assert.deepEqual(where.args.messages.map((m) => m.content), ["Hi! My name is Priya.", "x", "What is my name?"]);
  assert.deepEqual(toWire("inspect", inspectRequest(where.args, second.record.reply_ids, 1), settings), {
    messages: where.args.messages, system: "You are a pirate.", window: 512, reserve: 96, max_tokens: 96, special_in_text: true,
    reply_ids: [20, 21, 22], step: 1,
  });
  // a branch records as many candidates as the reply did, so it can be branched again
  assert.equal(toWire("branch", branchRequest(where.args, second.record.reply_ids, 1, 99), settings).top_k, 2);
  // an earlier turn is inspected and branched, but its branch cannot replace a reply later turns read
  const earlier = whereOf(state, first.record, { settings });
  assert.deepEqual(earlier.args.messages, [{ role: "user", content: "Hi! My name is Priya." }]);
  assert.match(earlier.keep, /^Only the last turn's reply can be replaced: turn 2 and after already read this one\.$/);
});

test("the template's default system prompt stays the default: null, not a custom text", () => {
  const args = recordRequest(recordOf(null, [5]), [{ role: "user", content: "Who are you?" }]);
  assert.equal(toWire("inspect", { ...args, replyIds: [5], step: 0 }, settings).system, undefined);
});

test("a reply being written is refused in a sentence; so is a reply no longer on the page", () => {
  const { store, state } = live();
  const turn = store.sent("Who are you?", "{}");
  store.read(turn, recordOf(null, []));
  store.tokenArrived(turn, { id: 5, text: "I", token: "I", bytes: "49" });
  assert.match(whereOf(state, turn.streaming).why, /still being written/);
  assert.match(whereOf(state, null).why, /no longer on the page/);
  assert.match(whereOf(state, { reply_ids: [1] }).why, /not one the engine can recompute/);
});

const recorded = JSON.parse(readFileSync(new URL("../../site/recorded.json", import.meta.url), "utf8"));

test("a recorded turn: the recording's request, and no keeping", () => {
  const store = createStore();
  store.recordedLoaded(recorded);
  const conv = recorded.conversations.find((c) => c.preset === "pirate" && c.window === 256);
  const where = whereOf(store.state, conv.turns[3], { settings });
  assert.equal(where.kind, "recorded");
  assert.deepEqual(where.args, recordedRequest(recorded, conv, 3));
  assert.match(where.keep, /kept in Live mode/);
  assert.equal(stepName(where, 0), `token 1 of recorded turn 4's reply, “${conv.turns[3].reply_tokens[0].replace(/ /g, "·")}”`);
});

test("a comparison cell: each is a step of its model and layout; only the instruct template cell branches", () => {
  const store = createStore();
  store.settingsRead({ ...settings, model_keys: ["base", "instruct"], layouts: ["plain", "template"] });
  const run = store.compareStarted("What is the capital of France?", new AbortController());
  const prompt = { text: run.text, template_ids: new Array(40).fill(7), template_tokens: new Array(40).fill("t"),
                   plain_ids: [1, 2, 3], plain_tokens: ["What", " is", "?"], special_ids: [7] };
  store.comparePrompt(run, prompt);
  const answer = { reply_ids: [3, 4], reply_tokens: ["P", "aris"], reply_text: "Paris", stop_reason: "end_turn" };
  const cell = (m, l) => ({ ...answer, reply_ids: [...answer.reply_ids], m, l });
  const ans = { prompt, base: { plain: cell("b", "p"), template: cell("b", "t") }, instruct: { plain: cell("i", "p"), template: cell("i", "t") } };
  store.compareEnded(run, ans);
  const where = whereOf(store.state, ans.instruct.template, { settings, context: 8192 });
  assert.deepEqual([where.kind, where.label, where.branchWhy], ["compare", "the instruct model's chat-template cell", null]);
  assert.deepEqual(where.record.prompt_ids, prompt.template_ids);
  assert.deepEqual(where.args.messages, [{ role: "user", content: prompt.text }]);
  const base = whereOf(store.state, ans.base.plain, { settings, context: 8192 });
  assert.deepEqual([base.label, base.args.model, base.args.layout], ["the base model's plain-text cell", "base", "plain"]);
  assert.deepEqual([base.record.prompt_ids, base.record.prompt_tokens], [prompt.plain_ids, prompt.plain_tokens]);
  for (const other of [ans.base.plain, ans.base.template, ans.instruct.plain]) {
    assert.match(whereOf(store.state, other, { settings, context: 8192 }).branchWhy, /can be inspected, not branched/);
  }
  // which piece it needed: asked of the template cells, and of no plain cell, which says why
  for (const model of ["base", "instruct"]) {
    assert.equal(noCause(whereOf(store.state, ans[model].template, { settings, context: 8192 })), null);
    assert.match(noCause(whereOf(store.state, ans[model].plain, { settings, context: 8192 })), /^Plain text is one piece with nothing around it/);
  }
});

test("plain text's continuation is a step of the text read with no template, not a branch", () => {
  const store = createStore();
  const p = store.plainText("Once upon a time");
  const answer = { prompt_ids: [9, 8], prompt_tokens: ["Once", " upon"], reply_ids: [5, 6], reply_tokens: [",", " there"], stop_reason: "max_tokens" };
  store.sideEnded(p.plain, { answer });
  const where = whereOf(store.state, answer, { settings });
  assert.deepEqual(where.args, { messages: [{ role: "user", content: "Once upon a time" }], layout: "plain" });
  assert.equal(where.record, answer);
  assert.match(where.branchWhy, /plain text's continuation can be inspected, not branched/);
  assert.equal(stepName(where, 1), "token 2 of the plain-text side's reply, “·there”");
  // no piece to take away: said in a sentence; the same words sent as a chat message have pieces
  assert.equal(noCause(where), "Plain text is one piece with nothing around it: there is no piece to take away and keep the rest.");
  const chat = { ...recordOf(null, [5]), reply_tokens: ["Hi"] };
  store.sideEnded(p.chat, { answer: chat });
  assert.equal(noCause(whereOf(store.state, chat, { settings })), null);
});

test("nothing is computed without the weights, or while a reply is written", () => {
  const { store, state } = live();
  assert.match(refusal({ model: null }, state, "A branch"), /^A branch needs the model's weights: download them/);
  assert.match(refusal({ model: { error: "no WebGPU adapter" } }, state, "A branch"), /^A branch needs the model's weights: no WebGPU adapter\.$/);
  const api = { model: { backend: "numpy" }, writing: false };
  assert.equal(refusal(api, state, "A branch"), null);
  store.sent("Another", "{}");
  assert.equal(refusal(api, state, "A branch"), "A branch waits for the reply being written: press Stop, or wait until it ends, then ask again.");
  assert.match(refusal({ ...api, writing: true }, createStore().state, "Inspecting a step"), /^Inspecting a step waits/);
});

test("a step is within the reply: 0 up to its last token", () => {
  const record = recordOf(null, [1, 2, 3]);
  assert.deepEqual([-1, 0, 2, 3, 1.5].map((s) => inRange(record, s)), [false, true, true, false, false]);
});

test("a reply without candidates says why it has none: “Why this token” was off, or it was recorded so", () => {
  const store = createStore();
  const turn = store.sent("Who are you?", "{}");
  store.replied(turn, recordOf(null, [5, 6], { top_k: null })); // sent with "why this token" off (Look inside's, say)
  const where = whereOf(store.state, turn.record, { settings });
  assert.equal(noCandidates(where), "This reply has no candidates: “Why this token” was off when it was written; " +
    "once a step is inspected, its last block's candidates are offered to branch with.");
  assert.match(noCandidates({ kind: "recorded", record: {} }), /^This reply was recorded without its candidates: /);
});
