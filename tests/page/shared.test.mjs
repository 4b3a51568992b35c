// A case shared, the page's side (site/js/modes/shared.mjs): the request a turn or a step makes
// from what the page holds, the conversation a link puts back, what this site refuses, and this
// device's reply against the link's, in sentences.
import assert from "node:assert/strict";
import { test } from "node:test";
import { caseOf } from "../../site/js/page/link.mjs";
import { caseTurns, caseWords, idsCompared, openOf, refusedHere, shareRequest, systemOf } from "../../site/js/modes/shared.mjs";

const settings = {
  presets: [{ name: "none", label: "None (the template's default)" }, { name: "pirate", label: "Pirate" },
            { name: "date", label: "Today's date", dated: true }, { name: "custom", label: "Custom text" }],
  default_preset: "none", windows: [256, 512, 1024], default_window: 1024,
};
const MESSAGES = [{ role: "user", content: "Hi" }, { role: "assistant", content: "Hello!" }, { role: "user", content: "Who are you?" }];
const record = (over = {}) => ({ preset: "pirate", system: "You are a pirate.", window: 512, reserve: 48, max_tokens: 48, special_in_text: true,
                                 reply_ids: [5, 6, 7], reply_tokens: ["A", "rr", "!"], ...over });
const live = (r = record()) => ({ kind: "live", label: "turn 2", args: { messages: MESSAGES, system: r.system }, record: r, turn: {} });

test("a turn's system prompt: a preset's name, or its text where the name would read another text", () => {
  assert.deepEqual(systemOf(record(), settings), { preset: "pirate" });
  assert.deepEqual(systemOf(record({ preset: "none", system: null }), settings), { preset: "none" });
  // the date's text is the day it was sent: another day's would be another prompt
  const dated = record({ preset: "date", system: "Today's date is Monday, May 4, 2026." });
  assert.deepEqual(systemOf(dated, settings), { preset: "custom", custom: dated.system });
  assert.deepEqual(systemOf(record({ preset: "custom", system: "Be terse." }), settings), { preset: "custom", custom: "Be terse." });
  assert.deepEqual(systemOf(record({ preset: null, system: "Given as text." }), settings), { preset: "custom", custom: "Given as text." });
  assert.deepEqual(systemOf(record({ preset: null, system: null }), settings), { preset: "none" });
});

test("the request of a turn and of a step: what the record says, the measures open on that step", () => {
  const where = live();
  const turn = shareRequest(where, settings);
  assert.deepEqual(turn, { messages: MESSAGES, preset: "pirate", window: 512, reserve: 48, maxTokens: 48, replyIds: [5, 6, 7] });
  assert.deepEqual(caseOf(turn), turn); // a case as it is
  assert.equal(shareRequest(live(record({ special_in_text: false })), settings).specialInText, false);
  // the step box: an inspection of this step, its cause showing the whole reply, a branch there
  const box = {
    inspection: { where, step: 1, answer: {} }, cause: { where, step: 1, showWhole: true }, branch: { where, step: 1, id: 99 },
  };
  assert.deepEqual(openOf(box, where, 1), { open: ["inspect", "whole", "branch"], id: 99 });
  assert.deepEqual(openOf({ ...box, cause: { ...box.cause, showWhole: false } }, where, 1).open, ["inspect", "cause", "branch"]);
  assert.deepEqual(openOf(box, where, 2), { open: [] }); // open on another step: not this one's
  assert.deepEqual(openOf({ inspection: { where, step: 1, answer: null } }, where, 1), { open: [] }); // asked, not come
  assert.deepEqual(openOf(box, live(), 1), { open: [] }); // another reply's
  const step = shareRequest(where, settings, { step: 1, ...openOf(box, where, 1) });
  assert.deepEqual(caseOf(step), { ...turn, step: 1, open: ["inspect", "whole", "branch"], id: 99 });
  // what keeps no conversation cannot be a link
  assert.match(shareRequest({ kind: "compare", record: record(), args: {} }, settings).why, /a chat turn of Live or Recorded mode/);
  assert.deepEqual(shareRequest({ why: "gone" }, settings), { why: "gone" });
});

test("a case's conversation put back: the turns before its own, and its message", () => {
  assert.deepEqual(caseTurns(MESSAGES), { turns: [{ user: "Hi", reply: "Hello!" }], message: "Who are you?" });
  // a message that got no reply is followed by the next
  assert.deepEqual(caseTurns([{ role: "user", content: "a" }, { role: "user", content: "b" }]), { turns: [{ user: "a" }], message: "b" });
  assert.deepEqual(caseTurns([{ role: "user", content: "only" }]), { turns: [], message: "only" });
});

test("what this site cannot set up is said, and nothing else is refused", () => {
  const c = { messages: MESSAGES, preset: "pirate", window: 512 };
  assert.equal(refusedHere(c, settings), null);
  assert.match(refusedHere({ ...c, preset: "sailor" }, settings), /the preset “sailor”, which this site does not have \(it has none, pirate, date, custom\)\. Nothing was changed\.$/);
  assert.equal(refusedHere({ ...c, window: 8192 }, settings), null); // the model's whole context perhaps: known once it is read
  assert.equal(refusedHere({ ...c, window: 8192 }, settings, 8192), null);
  assert.match(refusedHere({ ...c, window: 4096 }, settings, 8192), /window of 4096 tokens is not offered here: the windows are 256, 512, 1024 and the model's whole context \(8192 tokens\)/);
});

test("the case in words, and this device's reply against the link's", () => {
  assert.equal(caseWords({ messages: MESSAGES, preset: "pirate", window: 512, replyIds: [1, 2], step: 1, open: ["inspect", "cause"] }, settings),
               "turn 2 under Pirate, a window of 512 tokens; token 2 of its reply, where it looked and which piece it needed");
  assert.equal(caseWords({ messages: [MESSAGES[0]], preset: "custom", custom: "x" }, settings),
               "turn 1 under a custom system prompt, a window of 1024 tokens");
  assert.deepEqual(idsCompared([1, 2, 3], [1, 2, 3]), { at: null, text: "This device wrote the link's reply, id for id (3 tokens)." });
  const parted = idsCompared([1, 2, 3], [1, 9, 3], ["a", " b", "c"]);
  assert.equal(parted.at, 1);
  assert.match(parted.text, /^This device's reply parts from the link's at token 2: the link's has id 2 there, this device wrote id 9 \(“·b”\)\./);
  assert.match(parted.text, /near-tie: what opens here is this device's reply\.$/);
  assert.match(idsCompared([1, 2], [1, 2, 3]).text, /^This device's reply has 3 tokens and the link's 2: the first 2 ids are the same/);
  assert.deepEqual(idsCompared(undefined, [1]), { at: null, text: "" });
});
