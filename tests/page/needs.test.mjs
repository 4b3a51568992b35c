// modes/needs.mjs's pure part: which conversation the matrix is asked of, with each reply's ids
// as its record has them (a reply with no record: null, read as the template writes its text),
// and the request it makes. tests/test_inspect_browser.py asks it on the page.
import assert from "node:assert/strict";
import { test } from "node:test";
import { conversationOf } from "../../site/js/modes/needs.mjs";
import { needsRequest } from "../../site/js/page/step.mjs";
import { createStore } from "../../site/js/page/state.mjs";

const record = (ids, extra = {}) => ({ prompt_ids: [1, 2], reply_ids: ids, reply_text: "x", system: null, window: 256, reserve: 96,
                                       max_tokens: 96, special_in_text: true, ...extra });

test("a live conversation's matrix: every reply with its record's ids, the last turn's settings", () => {
  const store = createStore();
  assert.equal(conversationOf(store.state), null); // nothing to measure yet
  store.restored([{ user: "Hi! My name is Priya.", reply: "Hello!" }]); // a reply a reload (or a case) brought back, no record
  const turn = store.sent("What is my name?", "{}");
  store.read(turn, record([]));
  assert.match(conversationOf(store.state).why, /has no reply yet/);
  store.replied(turn, record([5, 6, 2]));
  const conv = conversationOf(store.state);
  assert.deepEqual(conv.messages.map((m) => m.role), ["user", "assistant", "user", "assistant"]);
  assert.deepEqual(conv.replies, [null, [5, 6, 2]]);
  const args = needsRequest(conv.args, conv.messages, conv.replies, { knocked: true });
  assert.deepEqual([args.replies, args.knocked, args.tokens, args.window], [[null, [5, 6, 2]], true, true, 256]);
  assert.equal(args.replyIds, undefined);
});

test("Recorded mode's matrix: the conversation its controls name, each recorded reply's ids", () => {
  const store = createStore();
  store.modeChosen("recorded");
  store.recordedLoaded({ reply_limit: 96, messages: ["Hi", "Name?"], conversations: [
    { preset: "none", window: 256, system: null, turns: [{ reply_text: "Hello", reply_ids: [7, 2] }, { reply_text: "Sam", reply_ids: [8, 2] }] }] });
  const conv = conversationOf(store.state, { preset: "none", window: 256 });
  assert.equal(conv.label, "the recorded conversation");
  assert.deepEqual(conv.replies, [[7, 2], [8, 2]]);
  assert.deepEqual(conv.messages.map((m) => m.content), ["Hi", "Hello", "Name?", "Sam"]);
  assert.equal(conversationOf(store.state, { preset: "pirate", window: 256 }), null); // none recorded so
});
