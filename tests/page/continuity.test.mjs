// What survives a reload in the middle of a reply (site/js/page/saved.mjs saveLive / loadLive), a
// reply's record read again after it (its steps inspected and branched as before), and a message
// that got no reply sent again in its own place (state.mjs), in node.
import assert from "node:assert/strict";
import { test } from "node:test";
import { noCandidates, whereOf } from "../../site/js/modes/steps.mjs";
import { branchReloaded, CANDIDATES_KEY, createSaver, GROWING_KEY, LIVE_KEY, loadLive, previewOf, printOf, recordAgain, reloadedOf, RELOADED,
  saveBranch, saveGrowing, saveLive } from "../../site/js/page/saved.mjs";
import { createStore, liveMessages } from "../../site/js/page/state.mjs";

function memory() {
  const items = new Map();
  return { getItem: (k) => (items.has(k) ? items.get(k) : null), setItem: (k, v) => items.set(k, String(v)), removeItem: (k) => items.delete(k) };
}

const record = (reply_ids, stop_reason) => ({ pieces: [{ kind: "new", count: 9 }], reply_ids, stop_reason });

test("a reply being written is saved as far as it got, and comes back stopped by the reload", () => {
  const storage = memory();
  const store = createStore();
  const first = store.sent("Hi!", "key");
  saveLive(store.state.live.turns, storage); // sent: saved before Python has read it
  assert.deepEqual(loadLive(storage), [{ user: "Hi!", settings: "key", reloaded: reloadedOf({ cut: true }), note: RELOADED, noteClass: "no-reply" }]);
  store.read(first, record([], null));
  store.tokenArrived(first, { id: 19556, text: "Hello", token: "Hello", bytes: "48656c6c6f" });
  saveLive(store.state.live.turns, storage);
  const [back] = loadLive(storage);
  assert.deepEqual(back, { user: "Hi!", reply: "Hello", settings: "key", reloaded: reloadedOf({ count: 9, wrote: 1, stop: "stopped", cut: true }) });
  saveLive([back], storage); // saved again after the reload: still what the reload stopped
  assert.deepEqual(loadLive(storage), [back]);
  // the conversation goes on after it, as after a reply stopped by hand
  assert.deepEqual(liveMessages({ live: { turns: [back] } }, "More"), [
    { role: "user", content: "Hi!" }, { role: "assistant", content: "Hello" }, { role: "user", content: "More" }]);
});

test("a message with no reply sent again takes its place; another message follows it", () => {
  const store = createStore();
  store.restored([{ user: "Hi!", reply: "Hello" }, { user: "Tell me a joke.", note: RELOADED, noteClass: "no-reply", reloaded: reloadedOf({ cut: true }) }]);
  const hi = [{ role: "user", content: "Hi!" }, { role: "assistant", content: "Hello" }];
  store.sent("Tell me a joke.", "key"); // the same text: sent again
  assert.deepEqual(store.state.live.turns.map((t) => t.user), ["Hi!", "Tell me a joke."]);
  assert.deepEqual(liveMessages(store.state), [...hi, { role: "user", content: "Tell me a joke." }]);
  store.failed(store.state.live.turns[1], "the weights are not loaded");
  store.sent("Something else", "key"); // another text: the page without a model still fills the window
  assert.deepEqual(liveMessages(store.state), [...hi, { role: "user", content: "Tell me a joke." }, { role: "user", content: "Something else" }]);
  // with no replies to be had, the same text sent twice is two messages
  store.failed(store.state.live.turns[2], "the weights are not loaded");
  store.repliesKnown({ state: "none", why: "replies need the model's weights" });
  store.sent("Something else", "key");
  assert.equal(store.state.live.turns.length, 4);
});

test("a draft during a reply is read after the reply as written so far", () => {
  const store = createStore();
  const turn = store.sent("Hi!", "key");
  store.read(turn, record([], null));
  store.tokenArrived(turn, { id: 1, text: "Hel", token: "Hel", bytes: "48656c" });
  assert.deepEqual(liveMessages(store.state, "And you?", { partial: true }), [
    { role: "user", content: "Hi!" }, { role: "assistant", content: "Hel" }, { role: "user", content: "And you?" }]);
});

test("a reply kept from a branch comes back from a reload marked as chosen by hand", () => {
  const storage = memory();
  const store = createStore();
  const turn = store.sent("Who are you?", "key");
  // the record as page/step.mjs keptRecord makes it when a branch is kept
  store.replied(turn, { ...record([57, 3681, 2], "eos"), reply_text: "A ship", branched: { step: 1, id: 3681, reply_ids: [57, 5248, 2] } });
  saveLive(store.state.live.turns, storage);
  const [back] = loadLive(storage);
  assert.deepEqual(back.reloaded, reloadedOf({ count: 9, wrote: 3, stop: "eos", branched: { step: 1, id: 3681 } }));
  assert.equal(back.reply, "A ship");
  saveLive([back], storage); // saved again after the reload: still marked
  assert.deepEqual(loadLive(storage), [back]);
});

test("a branch being written when the page goes is said to be gone, once; one that ended says nothing", () => {
  const storage = memory();
  saveBranch({ label: "turn 1", step: 1, token: "·ship" }, storage); // modes/steps.mjs, as the branch starts
  assert.equal(branchReloaded(storage), "The page was reloaded while a branch of turn 1's reply (“·ship” at token 2) was " +
    "written: a branch is the conversation's only once kept, so it is gone and the conversation is as it was.");
  assert.equal(branchReloaded(storage), null); // read once
  saveBranch({ label: "turn 1", step: 1, token: "·ship" }, storage);
  saveBranch(null, storage); // it ended (kept, dropped, stopped or failed)
  assert.equal(branchReloaded(storage), null);
});

// A turn as the worker answers it: its prompt, and a reply with its tokens, bytes and, with "why
// this token" on, its candidates.
const full = (extra = {}) => ({
  prompt_ids: [1, 520, 198, 57, 2, 198, 1, 520, 198], pieces: [{ kind: "new", count: 9 }], system: null, preset: "none",
  window: 256, reserve: 4, max_tokens: 4, special_in_text: true, reused_tokens: 0, computed_tokens: 9, backend: "numpy",
  timings: { prefill_ms: 12 }, reply_ids: [19556, 2], reply_text: "Hello", reply_tokens: ["Hello", "<|im_end|>"],
  reply_vocab: ["Hello", "<|im_end|>"], reply_bytes: ["48656c6c6f", "3c7c696d5f656e647c3e"], stop_reason: "end_turn",
  top_k: [[[19556, 9, 0.8], [2, 8, 0.1]], [[2, 9, 0.9], [13, 7, 0.05]]], top_k_tokens: [["Hello", "<|im_end|>"], ["<|im_end|>", "."]],
  top_k_bytes: [["48656c6c6f", "3c7c696d5f656e647c3e"], ["3c7c696d5f656e647c3e", "2e"]], branched: null, ...extra,
});

/** The record a preview of the same request answers: the prompt, no reply, the cache's figures of now. */
const previewOfRecord = (r) => ({ ...r, reply_ids: null, reply_text: null, reply_tokens: null, reply_vocab: null, reply_bytes: null,
                                  stop_reason: null, top_k: null, top_k_tokens: null, top_k_bytes: null, timings: null, backend: null,
                                  preset: null, reused_tokens: 0, computed_tokens: r.prompt_ids.length });

test("a reply comes back from a reload with its tokens and candidates: its record read again is the one it had", () => {
  const storage = memory();
  const store = createStore();
  const turn = store.sent("Hi!", "key");
  const record = full();
  store.replied(turn, record);
  saveLive(store.state.live.turns, storage);
  // the conversation's key holds the reply and the prompt's print, not the prompt nor the candidates
  const [entry] = JSON.parse(storage.getItem(LIVE_KEY));
  assert.deepEqual(entry.kept.reply_ids, record.reply_ids);
  assert.equal(entry.kept.prompt, printOf(record.prompt_ids));
  assert.ok(!("top_k" in entry.kept) && !("prompt_ids" in entry.kept) && entry.kept.candidates === true);
  // read again after the reload: the request the reply was written from, and the same record
  const [back] = loadLive(storage);
  const args = previewOf(back.reloaded.kept, [{ role: "user", content: "Hi!" }]);
  assert.deepEqual(args, { messages: [{ role: "user", content: "Hi!" }], system: undefined, window: 256, reserve: 4, maxTokens: 4 });
  const again = recordAgain(previewOfRecord(record), back.reloaded.kept);
  for (const k of Object.keys(record)) assert.deepEqual(again[k], record[k], k);
  // another prompt (another tokenizer or template since): not this reply's record
  assert.equal(recordAgain({ ...previewOfRecord(record), prompt_ids: [1, 520, 198, 58, 2, 198, 1, 520, 198] }, back.reloaded.kept), null);
  // in the store: the turn gets its record again, and a step of it is the same request as before the reload
  const before = whereOf(store.state, turn.record, {});
  const restored = createStore();
  restored.restored([back]);
  const t = restored.state.live.turns[0];
  assert.match(whereOf(restored.state, t.streaming ?? t.record, {}).why ?? "", /no longer on the page|not one/); // no record yet
  restored.recordRestored(t, { record: again });
  const after = whereOf(restored.state, t.record, {});
  assert.deepEqual([after.kind, after.args, after.keep], [before.kind, before.args, before.keep]);
  // saved again (at each token of the next reply): the same, and the candidates' key not written again
  let writes = 0;
  const counting = { ...storage, setItem: (k, v) => { if (k === CANDIDATES_KEY) writes++; storage.setItem(k, v); } };
  saveLive(restored.state.live.turns, counting);
  saveLive(restored.state.live.turns, counting);
  assert.ok(writes <= 1, writes);
  assert.deepEqual(loadLive(storage)[0].reloaded.kept, back.reloaded.kept);
});

test("with no room for the candidates the reply comes back without them, and says why", () => {
  const items = memory();
  const full_ = { ...items, setItem: (k, v) => { if (k === CANDIDATES_KEY) throw new DOMException("full", "QuotaExceededError"); items.setItem(k, v); } };
  const store = createStore();
  const turn = store.sent("Hi!", "key");
  store.replied(turn, full());
  saveLive(store.state.live.turns, full_);
  const [back] = loadLive(items);
  assert.equal(back.reply, "Hello");
  assert.equal(back.reloaded.kept.candidates, "lost");
  assert.equal(back.reloaded.kept.top_k, undefined);
  const restored = createStore();
  restored.restored([back]);
  const t = restored.state.live.turns[0];
  restored.recordRestored(t, { record: recordAgain(previewOfRecord(full()), back.reloaded.kept) });
  assert.equal(t.record.top_k, null);
  assert.match(noCandidates(whereOf(restored.state, t.record, {})), /^This reply's candidates were not kept across the reload/);
  saveLive(restored.state.live.turns, items); // saved again: still lost, not "why this token was off"
  assert.equal(loadLive(items)[0].reloaded.kept.candidates, "lost");
  assert.throws(() => t.reloaded.record, /no field record/); // a declared shape: the record to read again is `kept`
  // a branch kept since: the reply is this visit's, no longer the reload's
  restored.replied(t, { ...t.record, reply_ids: [19556, 13, 2], branched: { step: 1, id: 13, reply_ids: [19556, 2] } });
  assert.equal(t.reloaded, null);
  assert.match(noCandidates(whereOf(restored.state, t.record, {})), /“Why this token” was off/);
});

test("a reply cut off by a reload keeps its tokens as far as it got; one whose prompt cannot be read says why", () => {
  const storage = memory();
  const store = createStore();
  const turn = store.sent("Hi!", "key");
  store.read(turn, previewOfRecord(full()));
  store.tokenArrived(turn, { id: 19556, text: "Hello", token: "Hello", bytes: "48656c6c6f" });
  saveLive(store.state.live.turns, storage);
  const [back] = loadLive(storage);
  assert.deepEqual([back.reloaded.cut, back.reloaded.kept.reply_ids, back.reloaded.kept.stop_reason], [true, [19556], "stopped"]);
  const restored = createStore();
  restored.restored([back]);
  const t = restored.state.live.turns[0];
  restored.recordRestored(t, { why: "the prompt Python reads now is not the one it was written after" });
  assert.equal(t.record, null);
  assert.equal(t.reloaded.why, "the prompt Python reads now is not the one it was written after");
  saveLive(restored.state.live.turns, storage); // still what the reload stopped, its record tried again at the next visit
  assert.deepEqual({ ...loadLive(storage)[0].reloaded }, { ...back.reloaded, why: null }); // why is said now, not saved
});

/** A clock and timers a test moves by hand: createSaver's now, later and cancel. */
function clock() {
  let t = 0;
  const timers = new Map();
  let next = 0;
  return {
    now: () => t,
    later: (fn, ms) => (timers.set(++next, { fn, at: t + ms }), next),
    cancel: (id) => timers.delete(id),
    advance(ms) {
      t += ms;
      for (const [id, { fn, at }] of [...timers]) if (at <= t) timers.delete(id), fn();
    },
  };
}

test("a reply's tokens write only that reply, at most once a second; a page hide saves what was shown; its end the whole", () => {
  const items = memory();
  const writes = new Map(); // key -> setItem calls
  const storage = { ...items, setItem: (k, v) => (writes.set(k, (writes.get(k) ?? 0) + 1), items.setItem(k, v)) };
  const time = clock();
  const saver = createSaver({ whole: (turns) => saveLive(turns, storage), grown: (turns) => saveGrowing(turns, storage), ...time });
  const store = createStore();
  const turns = () => store.state.live.turns;
  for (const text of ["Hi!", "Again"]) {
    const t = store.sent(text, "key");
    saver.changed(turns());
    store.replied(t, full());
    saver.changed(turns());
  }
  const turn = store.sent("More", "key");
  saver.changed(turns());
  store.read(turn, previewOfRecord(full()));
  saver.changed(turns());
  writes.clear();
  const n = 60; // a token every 20 ms: 1.2 s of tokens
  for (let i = 0; i < n; i++) {
    store.tokenArrived(turn, { id: 100 + i, text: ` w${i}`, token: ` w${i}`, bytes: "2077" });
    saver.grew(turns());
    time.advance(20);
  }
  assert.equal(writes.get(LIVE_KEY), undefined); // the conversation is not written again for a token
  assert.ok(writes.get(GROWING_KEY) <= 2, `${writes.get(GROWING_KEY)} writes for ${n} tokens`);
  assert.notEqual(loadLive(items).at(-1).reply, turn.streaming.reply_text); // the last tokens wait for their second
  saver.flush(); // the page hidden (a reload hides it first)
  const back = loadLive(items);
  assert.deepEqual(back.map((t) => t.reply), ["Hello", "Hello", turn.streaming.reply_text]); // all that was shown
  assert.deepEqual([back[2].reloaded.cut, back[2].reloaded.wrote, back[2].reloaded.kept.reply_ids.length], [true, n, n]);
  // the reply's end: the conversation written whole, the growth's key gone, a growth that waited dropped
  store.tokenArrived(turn, { id: 7, text: "!", token: "!", bytes: "21" });
  saver.grew(turns());
  store.replied(turn, full({ reply_ids: [...turn.streaming.reply_ids, 2], reply_text: `${turn.streaming.reply_text}!` }));
  saver.changed(turns());
  time.advance(2000);
  assert.equal(items.getItem(GROWING_KEY), null);
  assert.deepEqual([loadLive(items)[2].reloaded.cut, loadLive(items)[2].reply.endsWith("!")], [false, true]);
  // a growth the page went before removing: its reply had ended (its entry is not cut), so the entry wins
  items.setItem(GROWING_KEY, JSON.stringify({ at: 2, entry: { user: "More", reply: " w0", line: {}, cut: true } }));
  assert.equal(loadLive(items)[2].reply.endsWith("!"), true);
});
