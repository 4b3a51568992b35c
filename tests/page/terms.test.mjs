// The words of a change (site/js/lesson/terms.mjs change): one rule for a cause's table, its
// sentences and Look inside's lines, "stays near" only within a tenth either way; and one rule
// for the factor they quote (times), the strip's labels too.
import assert from "node:assert/strict";
import { test } from "node:test";
import { change, likelier, LITTLE, moved, times } from "../../site/js/lesson/terms.mjs";

test("a change is little only within a factor of 1.1 either way; else it falls or rises", () => {
  assert.equal(LITTLE, 1.1);
  assert.deepEqual([1, 1.09, 1 / 1.09, 0.956].map(change), ["little", "little", "little", "little"]);
  assert.deepEqual([1.1, 1.8, 2, 50, Infinity].map(change), ["rises", "rises", "rises", "rises", "rises"]);
  assert.deepEqual([1 / 1.1, 0.8956, 0.5, 0.003, 0].map(change), ["falls", "falls", "falls", "falls", "falls"]);
  assert.equal(change(0 / 0), "little"); // nothing against nothing
  // the same change said the same, up or down, by its factor
  for (const f of [1.05, 1.2, 3]) assert.equal(change(f) === "little", change(1 / f) === "little");
});

test("the sentences say what the rule says: a probability, and the whole reply's log-probability", () => {
  assert.equal(moved(0.658, 0.688), "stays near 65.8% (from 68.8%)");
  assert.equal(moved(0.798, 0.891), "falls to 79.8% (from 89.1%)"); // once "stays near": a tenth less is said
  assert.equal(moved(0.791, 0.46), "rises to 79.1% (from 46.0%)"); // once "stays near" (issue 50)
  assert.equal(likelier(-3.0, -3.05), "about as likely"); // exp(0.05) = 1.05: little
  assert.equal(likelier(-3.0, -3.2), "1.2 times more likely");
  assert.equal(likelier(-3.2, -3.0), "1.2 times less likely");
});

test("a factor is written one way everywhere: two figures, then about m × 10ⁿ", () => {
  assert.deepEqual([1.23, 2.72, 46.2, 189, 7085].map((f) => times(f)), ["1.2", "2.7", "46", "190", "7,100"]);
  assert.equal(times(352_000), "about 4 × 10⁵"); // Look inside's line and the table's cell say the same
  assert.equal(times(352_000, { short: true }), "4×10⁵"); // the strip's label
  assert.equal(times(9.7e5), "about 1 × 10⁶");
  assert.equal(likelier(-24.36, -11.59), "about 4 × 10⁵ times less likely");
});
