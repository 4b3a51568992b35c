// views/inspect.mjs's parts that hold logic and no DOM: which text an inspection's weights lie
// on, the token texts the lens can name, the labels that count blocks from 1, and the commitment
// strip's kinds of cell, each with the words its legend gives.
import assert from "node:assert/strict";
import { test } from "node:test";
import { blockLabel, COMMIT_KEY, commitKinds, headLabel, knownTokens, readOf } from "../../site/js/views/inspect.mjs";

// A turn record of 4 prompt tokens and a 3-token reply, and an inspection of its step 2 (the step
// that chose reply id 12: its query is reply id 11, at position 4 + 2 - 1).
const record = {
  prompt_ids: [1, 9, 2, 1], prompt_tokens: ["<|im_start|>", "Hi", "<|im_end|>", "<|im_start|>"], prompt_bytes: ["", "4869", "", ""],
  special_ids: [1, 2], reply_ids: [10, 11, 12], reply_tokens: ["A", "ye", "!"], reply_bytes: ["41", "7965", "21"],
  top_k: [[[10, 2, 0.6], [20, 1, 0.3]], [[11, 2, 0.7], [21, 1, 0.2]], [[12, 2, 0.8], [22, 1, 0.1]]],
  top_k_tokens: [["A", "B"], ["ye", "yo"], ["!", "?"]],
};
const answer = { prompt_ids: record.prompt_ids, reply_ids: record.reply_ids, step: 2, position: 5 };

test("the text an inspection read: the prompt, then the reply up to the step's query", () => {
  const read = readOf(answer, record);
  assert.deepEqual(read.ids, [1, 9, 2, 1, 10, 11]);
  assert.deepEqual(read.tokens, ["<|im_start|>", "Hi", "<|im_end|>", "<|im_start|>", "A", "ye"]);
  assert.equal(read.ids.length, answer.position + 1); // one a weight
  assert.deepEqual(read.bytes.slice(-2), ["41", "7965"]);
  assert.ok(read.special.has(1) && !read.special.has(9));
});

test("the draft's first token: the prompt alone, the query its last token", () => {
  const draft = { ...record, reply_ids: null, reply_tokens: null, reply_bytes: null };
  const read = readOf({ prompt_ids: record.prompt_ids, reply_ids: [], step: 0, position: 3 }, draft);
  assert.deepEqual(read.ids, record.prompt_ids);
});

test("another turn's record is no text for these weights", () => {
  assert.equal(readOf(answer, { ...record, prompt_ids: [1, 9, 2, 7] }), null);
  assert.equal(readOf({ ...answer, position: 6 }, record), null); // an answer that does not fit its own ids
});

test("the lens's tokens: every id whose text the record or a branch shows, candidates included", () => {
  const known = knownTokens(record, { reply_ids: [10, 30], reply_tokens: ["A", "ho"] }, null);
  assert.equal(known.get(22), "?"); // a candidate the model did not take
  assert.equal(known.get(30), "ho");
  assert.equal(known.get(9), "Hi");
  assert.equal(known.has(99), false);
});

test("blocks and heads are counted from 1 on the page: block 25 is the answer's layer 24", () => {
  assert.equal(blockLabel(24), "block 25");
  assert.equal(headLabel(23, 4), "block 24 · head 5");
});

test("the commitment strip's cells: another token first, the chosen one first for a while, then for good; each in words", () => {
  // five blocks: the chosen id 7 first at block 2, lost at block 3, first from block 4 on (settles: 3)
  const lens = [[[5, 0.4]], [[7, 0.3]], [[5, 0.5]], [[7, 0.6]], [[7, 0.9]]];
  assert.deepEqual(commitKinds({ lens, settles: 3, chosen_id: 7 }), ["other", "first", "other", "stays", "stays"]);
  // not the last block's first choice (a step chosen by hand): nothing stays
  assert.deepEqual(commitKinds({ lens: lens.slice(0, 3), settles: null, chosen_id: 7 }), ["other", "first", "other"]);
  // every kind a cell can be has its words in the legend, each different
  const words = Object.values(COMMIT_KEY);
  assert.deepEqual(Object.keys(COMMIT_KEY).sort(), ["first", "other", "stays"]);
  assert.equal(new Set(words).size, words.length);
  assert.ok(words.every((w) => typeof w === "string" && w.length > 0));
});
