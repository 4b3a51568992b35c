// What survives a reload in the middle of a reply (site/js/page/prefs.mjs saveLive / loadLive), and
// a message that got no reply sent again in its own place (state.mjs), in node.
import assert from "node:assert/strict";
import { test } from "node:test";
import { branchReloaded, loadLive, RELOADED, saveBranch, saveLive } from "../../site/js/page/prefs.mjs";
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
  assert.deepEqual(loadLive(storage), [{ user: "Hi!", settings: "key", saved: { count: undefined, wrote: undefined, stop: undefined, cut: true },
                                        note: RELOADED, noteClass: "no-reply" }]);
  store.read(first, record([], null));
  store.tokenArrived(first, { id: 19556, text: "Hello", token: "Hello", bytes: "48656c6c6f" });
  saveLive(store.state.live.turns, storage);
  const [back] = loadLive(storage);
  assert.deepEqual(back, { user: "Hi!", reply: "Hello", settings: "key", saved: { count: 9, wrote: 1, stop: "stopped", cut: true } });
  saveLive([back], storage); // saved again after the reload: still what the reload stopped
  assert.deepEqual(loadLive(storage), [back]);
  // the conversation goes on after it, as after a reply stopped by hand
  assert.deepEqual(liveMessages({ live: { turns: [back] } }, "More"), [
    { role: "user", content: "Hi!" }, { role: "assistant", content: "Hello" }, { role: "user", content: "More" }]);
});

test("a message with no reply sent again takes its place; another message follows it", () => {
  const store = createStore();
  store.restored([{ user: "Hi!", reply: "Hello" }, { user: "Tell me a joke.", note: RELOADED, noteClass: "no-reply", saved: { cut: true } }]);
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
  assert.deepEqual(back.saved, { count: 9, wrote: 3, stop: "eos", branched: { step: 1, id: 3681 } });
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
