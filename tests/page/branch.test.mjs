// views/branch.mjs's parts that hold logic and no DOM: which branches are offered first (the
// near-ties "why this token" marks), the candidates a step offers, and the cache's sentence.
import assert from "node:assert/strict";
import { test } from "node:test";
import { branchChoices, cacheSentence, nearlyChose, nearTieOffers } from "../../site/js/views/branch.mjs";
import { isNearTie } from "../../site/js/views/why.mjs";

const GAP = 0.01; // build.json's near_tie_gap (chatlens.defaults.NEAR_TIE_GAP)
// A reply of four steps; the two best logits of each step are 0.005, 0.5, 0.0099 and 0.02 apart.
const gaps = [0.005, 0.5, 0.0099, 0.02];
const record = {
  prompt_ids: new Array(30).fill(1),
  reply_ids: [100, 110, 120, 130],
  reply_tokens: [" his", " cat", " sat", "."],
  top_k: gaps.map((g, s) => [[100 + 10 * s, 5, 0.4], [101 + 10 * s, 5 - g, 0.39], [102 + 10 * s, 3, 0.05]]),
  top_k_tokens: [[" his", " her", " its"], [" cat", " dog", " cow"], [" sat", " lay", " ran"], [".", "!", "?"]],
};

test("the near-ties offered first are exactly the steps why.mjs marks, each with what the model nearly chose", () => {
  const offers = nearTieOffers(record, GAP);
  assert.deepEqual(offers.map((o) => o.step), record.top_k.flatMap((row, s) => (isNearTie(row, GAP) ? [s] : [])));
  assert.deepEqual(offers.map((o) => [o.step, o.id, o.token, o.chosenToken]), [[0, 101, " her", " his"], [2, 121, " lay", " sat"]]);
  assert.ok(Math.abs(offers[0].behind - 0.005) < 1e-12);
  assert.equal(nearlyChose(offers[0]), "the model nearly chose “·her” (0.0050 logits behind “·his”)");
});

test("a step a kept branch chose by hand is not offered as the model's near-tie", () => {
  const kept = { ...record, reply_ids: [101, 110, 120, 130] }; // step 0 took the runner-up by hand
  assert.deepEqual(nearTieOffers(kept, GAP).map((o) => o.step), [2]);
  // its candidates: the model's own choice is offered back, not marked as nearly chosen
  assert.deepEqual(branchChoices(kept, 0, GAP).map((c) => [c.id, c.near]), [[100, false], [102, false]]);
});

test("a step's candidates to branch with: the reply's own left out, the near-tie's runner-up marked", () => {
  assert.deepEqual(branchChoices(record, 0, GAP).map((c) => [c.id, c.token, c.near]), [[101, " her", true], [102, " its", false]]);
  assert.deepEqual(branchChoices(record, 1, GAP).map((c) => c.near), [false, false]); // no near-tie there
  assert.deepEqual(branchChoices({ ...record, top_k: null }, 0, GAP), []); // no candidates recorded
});

test("the cache's sentence says the answer's figures, and names the parts only when they add up", () => {
  // the reply's cache: the prompt (30) and the reply's first 2 reused, the id taken computed
  const reused = { step: 2, reused_tokens: 32, computed_tokens: 1 };
  assert.equal(cacheSentence(reused, 30), "From the cache: 32 tokens, the prompt's 30 and the reply's first 2. " +
    "Computed: 1 token, the one chosen by hand, before the branch's own first choice.");
  // at the reply's first step the cache holds the prompt alone; at its second, one token of the reply
  assert.equal(cacheSentence({ step: 0, reused_tokens: 34, computed_tokens: 1 }, 34), "From the cache: 34 tokens, the whole prompt. " +
    "Computed: 1 token, the one chosen by hand, before the branch's own first choice.");
  assert.ok(cacheSentence({ step: 1, reused_tokens: 35, computed_tokens: 1 }, 34).startsWith("From the cache: 35 tokens, the prompt's 34 and the reply's first token. "));
  // a cache that held something else: only the figures
  assert.equal(cacheSentence({ step: 2, reused_tokens: 0, computed_tokens: 33 }, 30),
    "From the cache: 0 tokens. Computed before the branch's own first choice: 33 tokens.");
});
