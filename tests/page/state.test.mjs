// The page's store (site/js/page/state.mjs), in node: a live turn played through its transitions
// as modes/live.mjs plays them, and what each change tells the page to draw.
import assert from "node:assert/strict";
import { test } from "node:test";
import { detect, observe } from "../../site/js/lesson/challenges.mjs";
import { createStore, liveMessages } from "../../site/js/page/state.mjs";

function recording() {
  const store = createStore();
  const changes = [];
  store.subscribe((c) => changes.push(c));
  return { store, changes, types: () => changes.map((c) => c.type) };
}

test("a message sent, read, streamed and answered", () => {
  const { store, changes, types } = recording();
  const turn = store.sent("Hi!", "key");
  assert.deepEqual(liveMessages(store.state), [{ role: "user", content: "Hi!" }]);
  store.read(turn, { reply_text: null, pieces: [] });
  store.progressed(turn, { done: 3, total: 9 });
  store.tokenArrived(turn, { id: 19556, text: "Hello", token: "Hello", bytes: "48656c6c6f" });
  store.tokenArrived(turn, { id: -1, text: "!", token: "", bytes: "" }); // text with no token of its own
  assert.deepEqual({ ...turn.streaming }, { reply_ids: [19556], reply_text: "Hello!", reply_tokens: ["Hello"], reply_bytes: ["48656c6c6f"],
                                          stop_reason: null, top_k: null, top_k_tokens: null, top_k_bytes: null, progress: null });
  const streamed = turn.streaming;
  store.replied(turn, { reply_text: "Hello!", stop_reason: "stopped" });
  assert.deepEqual(types(), ["sent", "read", "progress", "token", "token", "replied"]);
  assert.ok(changes.every((c) => c.turn === turn && c.current));
  assert.equal(changes.at(-1).stopped, true);
  assert.equal(turn.streaming, null);
  assert.ok(changes.filter((c) => c.type === "token").every((c) => c.reply === streamed && c.at === turn && c.mode === "live"));
  store.tokenArrived(turn, { id: 5, text: "late", token: "late", bytes: "6c617465" }); // after its end: dropped
  assert.equal(streamed.reply_text, "Hello!");
  assert.deepEqual(liveMessages(store.state, "Again"), [
    { role: "user", content: "Hi!" }, { role: "assistant", content: "Hello!" }, { role: "user", content: "Again" }]);
});

test("a turn of a conversation that was cleared is not drawn", () => {
  const { store, changes } = recording();
  const turn = store.sent("Hi!", "key");
  store.cleared();
  store.read(turn, { pieces: [] });
  store.failed(turn, "the worker stopped");
  assert.deepEqual(store.state.live.turns, []);
  assert.deepEqual(changes.slice(-2).map((c) => [c.type, c.current]), [["read", false], ["failed", false]]);
  assert.equal(turn.note, "No reply: the worker stopped");
});

test("a message that cannot be read is taken back", () => {
  const { store, changes } = recording();
  const turn = store.sent("a very long message", "key");
  const error = Object.assign(new Error("too long"), { name: "WindowError" });
  store.unsent(turn, error);
  assert.deepEqual(store.state.live.turns, []);
  assert.deepEqual([changes.at(-1).type, changes.at(-1).current, changes.at(-1).error], ["unsent", true, error]);
});

test("only the newest preview is drawn", () => {
  const { store } = recording();
  const first = store.previewAsked();
  const second = store.previewAsked();
  assert.equal(store.isNewest(first), false);
  assert.equal(store.isNewest(second), true);
});

test("modes, settings and the near-tie gap from build.json", () => {
  const { store, changes } = recording();
  assert.equal(store.state.nearTieGap, null); // no number of its own: the settings carry it
  store.settingsRead({ near_tie_gap: 0.25 });
  assert.equal(store.state.nearTieGap, 0.25);
  store.modeChosen("recorded");
  assert.equal(store.state.modeChosen, false); // landed there: not remembered
  store.modeChosen("plain", { chosen: true });
  assert.deepEqual([store.state.mode, store.state.modeChosen], ["plain", true]);
  store.stepped(3);
  store.cleared(); // outside Live, New conversation goes back to the first recorded turn
  assert.equal(store.state.step, 0);
  store.repliesKnown({ state: "ready", why: "" });
  store.repliesKnown({ state: "ready", why: "" });
  assert.deepEqual(changes.filter((c) => c.type === "replies").map((c) => c.changed), [true, false]);
});

test("plain text: an older text's answers are dropped; a side streams as a reply so far, then its answer", () => {
  const { store, changes, types } = recording();
  const old = store.plainText("What is");
  const now = store.plainText("What is the capital of France?");
  assert.notEqual(old, now);
  store.tokenized(old, { tokens: [1] });
  assert.equal(old.tokens, null);
  store.sideStarted(now.plain);
  store.tokenArrived(now.plain, { id: 378, text: " The", token: " The", bytes: "20546865" });
  assert.equal(now.plain.streaming.reply_text, " The");
  assert.deepEqual([changes.at(-1).mode, changes.at(-1).reply], ["plain", now.plain.streaming]);
  const answer = { prompt_ids: [1], reply_ids: [378], reply_text: " The", stop_reason: "max_tokens" }; // a Continuation
  store.sideEnded(now.plain, { answer });
  assert.deepEqual([now.plain.streaming, now.plain.answer], [null, answer]); // under the answer's own names
  store.tokenArrived(old.plain, { id: 1, text: "x", token: "x", bytes: "78" }); // a side no longer shown: nothing
  assert.deepEqual(types(), ["plain", "token", "plain"]);
});

test("one transition for a token whatever the mode: a live turn, a plain-text side and a comparison's cell grow alike", () => {
  const { store, changes } = recording();
  store.settingsRead({ near_tie_gap: 0.01, model_keys: ["instruct", "base"], layouts: ["plain", "template"] });
  const token = { id: 19556, text: "Hello", token: "Hello", bytes: "48656c6c6f" };
  const turn = store.sent("Hi!", "key");
  store.read(turn, { pieces: [] });
  store.tokenArrived(turn, token);
  store.replied(turn, { reply_text: "Hello", stop_reason: "end_turn" });
  const p = store.plainText("Hi");
  store.sideStarted(p.chat);
  store.tokenArrived(p.chat, token);
  const run = store.compareStarted("Hi", null);
  store.cellBegun(run, run.cells.base.template);
  store.tokenArrived(run.cells.base.template, token);
  const grown = changes.filter((c) => c.type === "token");
  assert.deepEqual(grown.map((c) => c.mode), ["live", "plain", "compare"]);
  for (const c of grown) assert.deepEqual([c.reply.reply_ids, c.reply.reply_text, c.reply.reply_tokens, c.reply.reply_bytes], [[19556], "Hello", ["Hello"], ["48656c6c6f"]]);
});

test("the challenges a record completes", () => {
  const { store, types } = recording();
  const now = new Date(2026, 11, 2);
  // a live reply whose window dropped the first message: the "Past the window" challenge is done
  const dropped = { pieces: [], prompt_ids: [], special_ids: [], window: 256, reply_text: "Arr, it be gone.",
    stop_reason: "end_turn", dropped_messages: [{ message_index: 0, count: 12 }] };
  store.observed(dropped, { live: true, now });
  assert.deepEqual(store.state.progress, observe({}, dropped, now, { live: true }));
  assert.equal(store.state.progress.drop, true);
  assert.equal(store.state.progress.showed.drop, detect(dropped, now).drop);
  assert.deepEqual(types(), ["challenges"]);
  // seen again it changes nothing, and nothing is redrawn
  const before = store.state.progress;
  store.observed(dropped, { live: true, now });
  assert.equal(store.state.progress, before);
  assert.deepEqual(types(), ["challenges"]);
  // a recorded turn only marks it seen, and where
  const { store: other } = recording();
  other.observed(dropped, { live: false, where: "pirate, 256 tokens, turn 3", now });
  assert.equal(other.state.progress.drop, undefined);
  assert.equal(other.state.progress.seen.drop, "pirate, 256 tokens, turn 3");
  store.progressReset();
  assert.deepEqual(store.state.progress, {});
  assert.deepEqual(types(), ["challenges", "challenges"]);
});

test("the state's fields are declared: a misspelt one throws, read or written", () => {
  const { store } = recording();
  const { state } = store;
  assert.throws(() => state.customChosen, /no field customChosen/); // the name a save once read, renamed customKept
  assert.throws(() => {
    state.customChosen = true;
  }, TypeError);
  assert.throws(() => state.start.landing, /no field landing/);
  assert.throws(() => {
    state.replies.offered = "webgpu";
  }, TypeError);
  // a turn and its streaming reply are records of fixed fields too
  const turn = store.sent("Hi!", "key");
  assert.throws(() => {
    turn.replied = "Hello";
  }, TypeError);
  store.read(turn, { pieces: [] });
  assert.throws(() => {
    turn.streaming.text = "Hello"; // the reply so far's names are a Reply's: reply_text
  }, TypeError);
  assert.equal(JSON.stringify(state.start), JSON.stringify({ notes: [], landed: false })); // JSON reads it as an object
});

test("the step box: a step named, inspected, branched as a reply is written, kept; a new message closes it", () => {
  const { store, changes } = recording();
  const { state } = store;
  const turn = store.sent("Who are you?", "key");
  const record = { reply_text: "Arr", reply_ids: [5, 6], reply_tokens: ["A", "rr"], stop_reason: "end_turn", pieces: [], prompt_ids: [1],
                   prompt_tokens: ["<|im_start|>"], preset: null, dropped_messages: [] };
  store.replied(turn, record);
  const where = { kind: "live", label: "turn 1", record, turn, keep: null };
  const box = () => changes.filter((c) => c.type === "step-box").map((c) => c.what);
  store.stepNamed(where, 1);
  assert.deepEqual(state.stepBox.named, { where, step: 1 });
  // an inspection: asked, then answered; a newer one stops the one before
  const first = new AbortController();
  const asked = store.inspectionAsked(where, 1, { controller: first, says: "Inspecting…" });
  const again = store.inspectionAsked(where, 0, { controller: new AbortController(), says: "Inspecting…" });
  assert.ok(first.signal.aborted);
  store.inspected(asked, { step: 1 }); // not the box's any more: nothing changes
  assert.equal(state.stepBox.inspection.answer, null);
  store.inspected(again, { step: 0, strongest_heads: [], every_layer: { shares_skip_first: [] } });
  assert.deepEqual([state.stepBox.inspection.answer.step, state.stepBox.status], [0, null]);
  // a branch: its tokens through tokenArrived, into a reply so far, as every reply's
  const controller = new AbortController();
  const branch = store.branchStarted(where, 0, 9, "B", controller);
  store.tokenArrived(branch, { id: 7, text: "oat", token: "oat", bytes: "6f6174" });
  const token = changes.at(-1);
  assert.deepEqual([token.type, token.mode, token.reply === branch.streaming], ["token", "branch", true]);
  assert.deepEqual([branch.streaming.reply_ids, branch.streaming.reply_text], [[7], "oat"]);
  const answer = { reply_ids: [9, 7], reply_text: "Boat", reply_tokens: ["B", "oat"], stop_reason: "max_tokens", step: 0, id: 9 };
  store.branchEnded(branch, { answer });
  assert.deepEqual([branch.controller, branch.answer, branch.streaming.stop_reason], [null, answer, "max_tokens"]);
  store.branchKept(branch, { ...record, reply_ids: [9, 7], reply_text: "Boat", branched: { step: 0, id: 9, reply_ids: [5, 6] } }, "Kept.");
  assert.deepEqual([turn.reply, turn.record.branched.id, state.stepBox.branch, state.stepBox.status], ["Boat", 9, null, { text: "Kept.", cls: "kept" }]);
  assert.equal(changes.at(-1).type, "replied"); // the one transition for a reply that ended
  // a new message closes the box, and stops what it computes
  const writing = new AbortController();
  store.branchStarted(where, 1, 3, "C", writing);
  store.sent("And you?", "key");
  assert.ok(writing.signal.aborted);
  assert.deepEqual([state.stepBox.named, state.stepBox.inspection, state.stepBox.branch], [null, null, null]);
  assert.deepEqual(box(), ["named", "inspecting", "inspecting", "inspected", "branch", "branch-ended", "kept", "branch"]);
});

test("a cause of a live turn's step completes Look inside, in the store, with its inspection beside it; its two answers", () => {
  const { store, changes } = recording();
  const turn = store.sent("Who are you?", "key");
  const prompt = ["<|im_start|>", "system", " pirate", "<|im_end|>"];
  const record = { preset: "pirate", prompt_ids: [1, 2, 3, 4], prompt_tokens: prompt, reply_ids: [9, 10, 11], reply_text: "my name is Arr",
                   reply_tokens: [" my name", " is", " Arr"], stop_reason: "end_turn", pieces: [{ kind: "system", text: "" },
                   { kind: "new", text: "Who are you?" }], dropped_messages: [] };
  store.replied(turn, record);
  const where = { kind: "live", label: "turn 1", record, turn, keep: null };
  const inspection = store.inspectionAsked(where, 2, { controller: new AbortController(), says: "Inspecting…" });
  store.inspected(inspection, { step: 2, strongest_heads: [{ kind: "system", layer: 23, head: 4, position: 2, weight: 0.82 }] });
  assert.deepEqual(store.state.insideProgress, {}); // an inspection alone completes nothing
  const cause = store.causeAsked(where, 2, { controller: new AbortController() });
  assert.equal(store.state.stepBox.inspection, inspection); // the same step: the inspection stays beside it
  const measure = (p) => ({ p, top_id: 5, top_token: " Cap", top_p: 0.4, reply_logprob: -3 });
  store.causeProgress(cause, "token", { read: 3, of: 9, doing: "system: knocked out" });
  assert.equal(store.state.stepBox.cause.token.progress.doing, "system: knocked out");
  store.caused(cause, "token", { answer: { step: 2, chosen_id: 11, chosen_token: " Arr", p: 0.6, top_id: 11, top_p: 0.6,
    pieces: [{ kind: "system", name: "system:0", removed: measure(0.01), knocked: measure(0.02) }] } });
  assert.match(store.state.insideProgress.pirate, /^Writing “·Arr”, the first token of the name it gives \(60\.0%\): without/);
  assert.match(store.state.insideProgress.pirate, /Where it looked: block 24 · head 5 put 82\.0% of its weight on the system prompt's “·pirate”/);
  assert.ok(changes.some((c) => c.type === "inside"));
  // the whole reply so far: the cause's other declared answer, asked, growing and answered on its own
  assert.ok(store.wholeAsked(cause, { controller: new AbortController() }));
  store.causeProgress(cause, "whole", { read: 1, of: 9, doing: "new message: removed" });
  assert.deepEqual([cause.whole.progress.read, cause.token.progress, cause.showWhole], [1, null, true]);
  const whole = { step: 2, chosen_id: 11, chosen_token: " Arr", p: 0.6, top_id: 11, top_p: 0.6, reply_logprob: -4, pieces: [] };
  store.caused(cause, "whole", { answer: whole });
  assert.deepEqual([cause.whole.answer, cause.token.answer.reply_logprob, cause.whole.controller], [whole, undefined, null]);
  assert.throws(() => {
    cause.answer = whole; // no `part` union: the answers are cause.token's and cause.whole's
  }, TypeError);
  // another step named: the cause goes, stopped, both its answers
  const other = store.causeAsked(where, 1, { controller: new AbortController() });
  const otherWhole = new AbortController();
  store.wholeAsked(other, { controller: otherWhole });
  store.stepNamed(where, 0);
  assert.equal(store.state.stepBox.cause, null);
  assert.ok(other.token.controller.signal.aborted && otherWhole.signal.aborted);
  assert.equal(store.wholeAsked(other, { controller: new AbortController() }), false); // no longer the box's
});
