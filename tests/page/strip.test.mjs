// views/strip.mjs, views/needs.mjs and views/progress.mjs: the token strip's tint and words, the
// matrix's columns and cells, a long computation's progress in words. The figures are in the
// shape `python -m chatlens cause --tokens` and `needs` print (numbers made up to the rule being
// tested: the views only word and place them).
import assert from "node:assert/strict";
import { test } from "node:test";
import { band, factorWords, legendBands, stripCells, tokenWords } from "../../site/js/views/strip.mjs";
import { cellOf, columnKeys, columnsOf, rowSentence } from "../../site/js/views/needs.mjs";
import { workWords } from "../../site/js/views/progress.mjs";

const row = (p, top_id, top_p = p, top_token = "x") => ({ p, top_id, top_p, top_token });
const answer = {
  reply_ids: [10, 11, 12], reply_logprob: -3.0,
  tokens: [row(0.5, 10), row(0.2, 11), row(0.9, 12)],
  pieces: [
    { name: "system:0", kind: "system", label: "system", attention_share: 0.6, messages: [],
      removed: { reply_logprob: -12.0, tokens: [row(0.004, 7, 0.3, " Arr"), row(0.21, 11), row(0.9 * 40, 12)] },
      knocked: null, knocked_why: "Not asked." },
  ],
};

test("a token's tint steps by how far its probability moved; its factor is written, never colour alone", () => {
  const cells = stripCells(answer, ["Aye", " ye", "!"], "system:0", "removed");
  assert.deepEqual(cells.map((c) => [c.how, c.band, c.label]), [["falls", 4, "÷130"], ["little", 0, "·"], ["rises", 3, "×40"]]);
  assert.deepEqual(cells[0].top, { token: " Arr", p: 0.3 }); // another token leads under the measure
  assert.equal(cells[1].top, null); // still the model's choice
  assert.equal(tokenWords(cells[0], "the system prompt", "removed"),
    "Token 1, “Aye”: 50.0% with every piece read; without the system prompt 0.40% (falls 130 times), “·Arr” leads (30.0%).");
  assert.deepEqual(stripCells(answer, [], "system:0", "knocked"), []); // a measure not taken draws nothing
  assert.equal(factorWords(1 / 3e6), "÷3×10⁶");
  assert.equal(band(1.05), 0);
  assert.equal(legendBands().filter((b) => b.how === "falls").length, 4);
});

const needed = {
  knocked: false, backend: "numpy", computed_tokens: 100,
  turns: [{
    turn: 1, message_index: 3, reply_ids: [1, 2], reply_tokens: ["I'm", " Sarah"], reply_logprob: -2.0,
    pieces: [
      { name: "default_system:0", kind: "default_system", label: "system (template default)", messages: [], attention_share: 0.5,
        removed: null, removed_why: "cannot be left out", knocked: null },
      { name: "user:0", kind: "user", label: "turn 1 · user", messages: [0], attention_share: 0.05, removed: { reply_logprob: -12.9 }, knocked: null },
      { name: "assistant:0", kind: "assistant", label: "turn 1 · assistant", messages: [1], attention_share: 0.3, removed: { reply_logprob: -2.05 }, knocked: null },
      { name: "new:0", kind: "new", label: "new message", messages: [2], attention_share: 0.1, removed: { reply_logprob: -6.0 }, knocked: null },
      { name: "dropped:0", kind: "dropped", label: "dropped turn 1", messages: [], attention_share: null, removed: { reply_logprob: -1.0 }, knocked: null },
    ],
  }],
};
const messages = [{ role: "user", content: "Hi" }, { role: "assistant", content: "Hello" }, { role: "user", content: "Name?" },
                  { role: "assistant", content: "I'm Sarah" }];

test("the matrix's columns follow the conversation's messages; a cell is the reply's log-probability's change", () => {
  assert.deepEqual(columnsOf(needed, messages).map((c) => c.label),
    ["system prompt", "turn 1 · your message", "turn 1 · assistant", "turn 2 · your message", "dropped turn 1"]);
  assert.deepEqual(columnKeys(needed.turns[0].pieces[2]), ["m1"]);
  const cell = cellOf(needed.turns[0], needed.turns[0].pieces[1]);
  assert.equal(cell.removed.delta.toFixed(1), "-10.9");
  assert.equal(cell.removed.perToken.toFixed(2), "-5.45");
  assert.equal(cell.removed.how, "falls");
  assert.equal(cell.knocked, null);
});

test("a row says where attention and need disagree, with both figures", () => {
  const said = rowSentence(needed.turns[0]);
  assert.match(said, /read turn 1 · assistant most \(30\.0% of its attention/);
  assert.match(said, /without turn 1 · user, read 5\.0%/);
  const agree = { ...needed.turns[0], pieces: needed.turns[0].pieces.map((p) => (p.name === "user:0" ? { ...p, attention_share: 0.9 } : p)) };
  assert.equal(rowSentence(agree), null);
});

test("progress in a learner's words: the piece, how many passes, a time left once it can be told", () => {
  const p = { read: 300, of: 600, ms: 30000, doing: "system: removed", stage: { done: 2, of: 7, turn: null, turns: null }, parts: 0 };
  assert.deepEqual(workWords(p), { line: "system: removed · pass 3 of 7 · about 30 s left", detail: "300 of 600 tokens run through" });
  const matrix = { ...p, stage: { done: 0, of: 5, turn: 0, turns: 3 }, parts: 3, partsOf: 9, covers: 128 };
  assert.deepEqual(workWords(matrix), { line: "system: removed · pass 1 of 5",
                                        detail: "300 of 600 tokens run through; the GPU's part 3 of 9 of a step reading 128 tokens" });
  assert.equal(workWords(null).line, "starting…");
});
